import { describe, expect, it } from '@jest/globals';
import { backoffDelay, DEFAULT_RETRY_POLICY, nextRetryDelay, parseRetryAfter, resolveRetryPolicy, sleep } from '../../src/platform/retry.ts';

const policy = { maxAttempts: 4, baseDelayMs: 200, maxDelayMs: 10_000 };

describe('backoffDelay (full jitter)', () => {
  it.each([
    [1, 200],
    [2, 400],
    [3, 800],
    [4, 1600],
    [6, 6400],
    [7, 10_000],
    [20, 10_000],
  ])('attempt %i stays within [0, %i]', (attempt, ceiling) => {
    expect(backoffDelay(attempt, policy, () => 0)).toBe(0);
    expect(backoffDelay(attempt, policy, () => 0.999_999_999)).toBe(ceiling);
    for (let i = 0; i < 200; i++) {
      const d = backoffDelay(attempt, policy);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(ceiling);
      expect(Number.isInteger(d)).toBe(true);
    }
  });

  it('spreads delays over the whole window (not clustered at the ceiling)', () => {
    const samples = Array.from({ length: 1000 }, () => backoffDelay(3, policy));
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    expect(mean).toBeGreaterThan(300);
    expect(mean).toBeLessThan(500);
  });

  it('never exceeds maxDelayMs even with a huge attempt number', () => {
    expect(backoffDelay(10_000, policy, () => 0.9999)).toBeLessThanOrEqual(10_000);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-11-22T21:00:00Z');
  it.each<[string | string[] | undefined, number | undefined]>([
    ['1', 1000],
    ['0', 0],
    ['120', 120_000],
    [' 3 ', 3000],
    ['0.5', 500],
    [['2', '9'], 2000],
    ['Sun, 22 Nov 2026 21:00:05 GMT', 5000],
    ['Sun, 22 Nov 2026 20:59:00 GMT', 0],
    [undefined, undefined],
    ['', undefined],
    ['soon', undefined],
    ['-1', undefined],
    ['1e3', undefined],
  ])('%j → %j', (header, expected) => {
    expect(parseRetryAfter(header, now)).toBe(expected);
  });
});

describe('nextRetryDelay', () => {
  it('stops for ambiguous and terminal failures', () => {
    expect(nextRetryDelay({ disposition: 'ambiguous', attempt: 1, policy })).toBeUndefined();
    expect(nextRetryDelay({ disposition: 'terminal', attempt: 1, policy })).toBeUndefined();
  });

  it('stops after maxAttempts attempts', () => {
    expect(nextRetryDelay({ disposition: 'retryable', attempt: 3, policy, random: () => 0.5 })).toBe(400);
    expect(nextRetryDelay({ disposition: 'retryable', attempt: 4, policy })).toBeUndefined();
    expect(nextRetryDelay({ disposition: 'retryable', attempt: 1, policy: { ...policy, maxAttempts: 1 } })).toBeUndefined();
  });

  it('uses Retry-After instead of the backoff', () => {
    expect(nextRetryDelay({ disposition: 'retryable', attempt: 1, retryAfterMs: 1500, policy, random: () => 0 })).toBe(1500);
    expect(nextRetryDelay({ disposition: 'retryable', attempt: 1, retryAfterMs: 0, policy, random: () => 0.9 })).toBe(0);
  });

  it('does not wait inside a call for a Retry-After longer than maxDelayMs', () => {
    expect(nextRetryDelay({ disposition: 'retryable', attempt: 1, retryAfterMs: 60_000, policy })).toBeUndefined();
  });
});

describe('resolveRetryPolicy', () => {
  it('fills defaults (4 attempts, 200 ms base, 10 s cap)', () => {
    expect(resolveRetryPolicy(undefined)).toEqual(DEFAULT_RETRY_POLICY);
    expect(DEFAULT_RETRY_POLICY).toEqual({ maxAttempts: 4, baseDelayMs: 200, maxDelayMs: 10_000 });
    expect(resolveRetryPolicy({ maxAttempts: 2 })).toEqual({ ...DEFAULT_RETRY_POLICY, maxAttempts: 2 });
  });

  it('rejects nonsense', () => {
    expect(() => resolveRetryPolicy({ maxAttempts: 0 })).toThrow(RangeError);
    expect(() => resolveRetryPolicy({ baseDelayMs: -1 })).toThrow(RangeError);
  });
});

describe('sleep', () => {
  it('rejects at once with the reason of an aborted signal', async () => {
    const ac = new AbortController();
    const reason = new Error('stop');
    const p = sleep(10_000, ac.signal);
    ac.abort(reason);
    // Settled before the event loop's next turn: by the abort, not by the 10 s timer.
    const nextTurn = new Promise<string>((resolve) => setImmediate(() => resolve('still pending at the next turn')));
    expect(
      await Promise.race([
        p.then(
          () => 'resolved',
          (e: unknown) => e,
        ),
        nextTurn,
      ]),
    ).toBe(reason);
  });

  it('resolves after the delay', async () => {
    const started = performance.now();
    await sleep(20);
    expect(performance.now() - started).toBeGreaterThanOrEqual(19);
  });
});
