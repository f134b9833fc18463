// The organization's rate limiter, served in fair turns too (issue 25).
//
// A create that has its turn in the organization's line (create-admission.ts) is read and its
// intent written, then it waits for the platform's rate limit (src/platform/sliding-window.ts),
// whose waiters go first come, first served. Up to 30 creates of one organization are admitted at
// once, so a quiet namespace's key, admitted at its fair turn, would still wait behind up to 29 of
// a flooding namespace's creates there: about 3 s at 10/s. So this wrapper hands the limiter one
// waiter at a time, chosen like the organization's line chooses (create-line.ts: fair turns
// between namespaces, a broken key first); the limiter's throughput is the same (it always has the
// next create waiting), and a quiet namespace's create is the next one it lets through.
//
// Which key a take() is for comes from the async context of its reconcile (sendsFor, around the
// create): the platform client knows nothing of namespaces. A take() outside any (another caller
// of the limiter) waits in a namespace of its own.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Permit, RateLimiter } from '../../../platform/index.ts';
import { CreateLine, type Priority } from './create-line.ts';

const sender = new AsyncLocalStorage<{ key: string; priority: Priority }>();

/** Runs `fn` (a create of `key`, a work-queue key `kind/namespace/name`) with its limiter waits in that key's fair turns. */
export function sendsFor<T>(key: string, priority: Priority, fn: () => Promise<T>): Promise<T> {
  return sender.run({ key, priority }, fn);
}

interface Waiter {
  resolve(permit: Permit): void;
  reject(reason: unknown): void;
  signal: AbortSignal | undefined;
  onAbort(): void;
}

export class FairLimiter implements RateLimiter {
  readonly #inner: RateLimiter;
  readonly #line = new CreateLine();
  readonly #waiters = new Map<string, Waiter>();
  #serial = 0;
  /** One waiter is at the inner limiter. */
  #taking = false;

  constructor(inner: RateLimiter) {
    this.#inner = inner;
  }

  take(signal?: AbortSignal): Promise<Permit> {
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    const context = sender.getStore();
    // Unique per take (a key makes one create at a time, but a token must never be shared).
    const token = `${context?.key ?? 'other//'}#${++this.#serial}`;
    return new Promise<Permit>((resolve, reject) => {
      const waiter: Waiter = {
        resolve, reject, signal,
        onAbort: () => {
          if (!this.#line.delete(token)) return; // at the inner limiter: it rejects
          this.#waiters.delete(token);
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiters.set(token, waiter);
      this.#line.add(token, context?.priority ?? 'create');
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#taking) return;
    const token = this.#line.next();
    if (token === undefined) return;
    const waiter = this.#waiters.get(token) as Waiter;
    this.#waiters.delete(token);
    this.#taking = true;
    const settle = (): void => {
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      this.#taking = false;
      this.#pump();
    };
    this.#inner.take(waiter.signal).then((permit) => {
      settle();
      waiter.resolve(permit);
    }, (error: unknown) => {
      settle();
      waiter.reject(error);
    });
  }
}
