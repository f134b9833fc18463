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
//
// The next permit must also come soon. The platform counts 10 creates in any second, and the
// limiter frees each of its 10 slots a second after that slot's answer: a backlog that began with
// 10 creates at once keeps them in a clump, 10 permits at one instant then none for a second, for
// as long as it lasts. A quiet namespace's create that arrives just after a clump is next, and still
// waits up to a second for the next clump (measured: 0.9-1.4 s of a ten-flood run's slowest keys).
// So while creates of more than one namespace share the organization, permits are spread: one at
// most every `spacingMs` (a little under the window over the limit: 90 ms), and a clump spreads
// out over one round of the window. The rate is the same (each slot still goes again a window after its answer);
// what it costs is one round's spreading, under a second, when a backlog begins. A namespace alone
// is not spread (nobody waits behind its clump; issue 14's convergence keeps its figure): a burst
// of up to 10 creates still goes at once.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Permit, RateLimiter } from '../../../platform/index.ts';
import { realClock, type BucketClock } from '../../../platform/waiter-queue.ts';
import { CreateLine, namespaceOf, type Priority } from './create-line.ts';

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

export interface FairLimiterOptions {
  /** While more than one namespace creates, one permit at most this often. Default 0 (never spread). */
  spacingMs?: number;
  /** A namespace whose last permit is this recent still counts as creating. Default 10 s. */
  recentMs?: number;
  clock?: BucketClock;
}

export class FairLimiter implements RateLimiter {
  readonly #inner: RateLimiter;
  readonly #line = new CreateLine();
  readonly #waiters = new Map<string, Waiter>();
  readonly #spacingMs: number;
  readonly #recentMs: number;
  readonly #clock: BucketClock;
  /** When each namespace had its last permit, while recent (pruned as it is read). */
  readonly #lastPermit = new Map<string, number>();
  #lastGrantAt = Number.NEGATIVE_INFINITY;
  #serial = 0;
  /** One waiter is at the inner limiter. */
  #taking = false;
  /** The next hand-off waits for the spacing. */
  #cancelSpacing: (() => void) | undefined;

  constructor(inner: RateLimiter, options: FairLimiterOptions = {}) {
    this.#inner = inner;
    this.#spacingMs = options.spacingMs ?? 0;
    this.#recentMs = options.recentMs ?? 10_000;
    this.#clock = options.clock ?? realClock;
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
    if (this.#taking || this.#cancelSpacing !== undefined || this.#line.size === 0) return;
    const waitMs = this.#lastGrantAt + this.#spacingMs - this.#clock.now();
    if (waitMs > 0 && this.#shared()) {
      // The turn is chosen when the wait ends: a repair that arrives meanwhile still goes first.
      this.#cancelSpacing = this.#clock.schedule(() => {
        this.#cancelSpacing = undefined;
        this.#pump();
      }, Math.ceil(waitMs));
      return;
    }
    const token = this.#line.next() as string;
    const waiter = this.#waiters.get(token) as Waiter;
    this.#waiters.delete(token);
    this.#taking = true;
    const settle = (): void => {
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      this.#taking = false;
      this.#pump();
    };
    this.#inner.take(waiter.signal).then((permit) => {
      const now = this.#clock.now();
      this.#lastGrantAt = now;
      this.#lastPermit.set(namespaceOf(token), now);
      settle();
      waiter.resolve(permit);
    }, (error: unknown) => {
      settle();
      waiter.reject(error);
    });
  }

  /** More than one namespace creates: two had a permit lately, or one other than the recent one waits. */
  #shared(): boolean {
    const since = this.#clock.now() - this.#recentMs;
    for (const [namespace, at] of this.#lastPermit) if (at < since) this.#lastPermit.delete(namespace);
    if (this.#lastPermit.size > 1) return true;
    const [recent] = this.#lastPermit.keys();
    return this.#line.namespaces().some((namespace) => namespace !== recent);
  }
}
