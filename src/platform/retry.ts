// Retry timing: exponential backoff with full jitter, Retry-After parsing, and the decision of
// whether (and how long) to wait before the next attempt. Pure functions with the clock and the
// random source passed in, so the schedule is tested without sleeping.
//
// Which failures may be retried at all is decided in errors.ts (`classify`); this file only
// decides when.

import type { Disposition } from './errors.ts';

export interface RetryPolicy {
  /** Total attempts including the first one. */
  maxAttempts: number;
  baseDelayMs: number;
  /** Cap of one backoff delay, and the longest Retry-After the client waits for by itself. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxAttempts: 4, baseDelayMs: 200, maxDelayMs: 10_000 };

export function resolveRetryPolicy(partial: Partial<RetryPolicy> | undefined): RetryPolicy {
  const policy = { ...DEFAULT_RETRY_POLICY, ...stripUndefined(partial ?? {}) };
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) {
    throw new RangeError(`retry.maxAttempts must be an integer >= 1, got ${policy.maxAttempts}`);
  }
  if (!(policy.baseDelayMs >= 0) || !(policy.maxDelayMs >= 0)) {
    throw new RangeError('retry.baseDelayMs and retry.maxDelayMs must be >= 0');
  }
  return policy;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Full jitter ("Exponential Backoff And Jitter", AWS Architecture Blog): a uniform delay in
 * [0, min(maxDelayMs, baseDelayMs * 2^(attempt-1))]. Full jitter spreads many workers that failed
 * together (e.g. every reconcile hitting the same 503) instead of retrying in lock step.
 *
 * @param attempt the attempt that just failed, starting at 1.
 */
export function backoffDelay(attempt: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>, random: () => number = Math.random): number {
  const exp = policy.baseDelayMs * 2 ** Math.max(0, attempt - 1);
  const ceiling = Math.min(policy.maxDelayMs, exp);
  return Math.floor(random() * (ceiling + 1));
}

/**
 * Parses a Retry-After header (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Returns
 * milliseconds from `now`, or undefined when absent or unparseable. A date in the past means
 * "now" (0). Fractional seconds are tolerated although the RFC only allows integers.
 */
export function parseRetryAfter(value: string | string[] | undefined | null, now: number = Date.now()): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw === null) return undefined;
  const text = raw.trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) {
    const ms = Math.ceil(Number(text) * 1000);
    return Number.isFinite(ms) ? ms : undefined;
  }
  // Only attempt a date when the value looks like one: Date.parse accepts odd inputs such as "1".
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/**
 * How long to wait before the next attempt, or undefined to stop and throw.
 *
 * A Retry-After from the platform replaces the backoff (it says when the platform will accept the
 * request again, docs/platform-api.md Limits). One that is longer than `maxDelayMs` is not waited for
 * inside a call: the error is thrown with `retryAfterMs` so the caller (the operator's work queue)
 * requeues the item instead of holding a worker.
 */
export function nextRetryDelay(args: {
  disposition: Disposition;
  attempt: number;
  retryAfterMs?: number | undefined;
  policy: RetryPolicy;
  random?: () => number;
}): number | undefined {
  const { disposition, attempt, retryAfterMs, policy } = args;
  if (disposition !== 'retryable' || attempt >= policy.maxAttempts) return undefined;
  if (retryAfterMs !== undefined) return retryAfterMs <= policy.maxDelayMs ? retryAfterMs : undefined;
  return backoffDelay(attempt, policy, args.random);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
