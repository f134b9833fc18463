import { describe, expect, it } from '@jest/globals';
import { RefusalLimiter } from '../../../src/operator/runtime/refusal-limiter.ts';

describe('RefusalLimiter', () => {
  it('waits 1 s doubling per refusal up to the ceiling, per key, and forgets on success', () => {
    const limiter = new RefusalLimiter<string>({ maxDelayMs: 5_000 });
    expect([1, 2, 3, 4, 5].map(() => limiter.when('a'))).toEqual([1_000, 2_000, 4_000, 5_000, 5_000]);
    expect(limiter.when('b')).toBe(1_000);
    limiter.forget('a');
    expect(limiter.when('a')).toBe(1_000);
  });

  it('never waits less than the remote asked (Retry-After), even beyond the ceiling', () => {
    const limiter = new RefusalLimiter<string>({ maxDelayMs: 5_000 });
    expect(limiter.when('a', 1_500)).toBe(1_500);
    expect(limiter.when('a', 60_000)).toBe(60_000);
    expect(limiter.when('a')).toBe(4_000);
  });

  it('defaults to a 5 minute ceiling', () => {
    const limiter = new RefusalLimiter<string>();
    for (let i = 0; i < 20; i++) limiter.when('a');
    expect(limiter.when('a')).toBe(300_000);
  });
});
