import { describe, expect, it } from '@jest/globals';
import { WatchBackoff } from '../../../src/operator/runtime/watch-backoff.ts';

describe('WatchBackoff', () => {
  it('waits 1 s doubling per failure up to 60 s by default, and starts again at 1 s after a reset', () => {
    const backoff = new WatchBackoff({ jitter: 0 });
    expect(Array.from({ length: 9 }, () => backoff.next())).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    expect(backoff.failures).toBe(9);
    backoff.reset();
    expect(backoff.failures).toBe(0);
    expect(backoff.next()).toBe(1_000);
  });

  it('jitter only lengthens a pause: at the cap, never more often than once per cap', () => {
    let r = 0;
    const backoff = new WatchBackoff({ initialMs: 100, maxMs: 400, jitter: 0.1, random: () => r });
    const pauses: number[] = [];
    for (const value of [0, 0.5, 0.999, 0, 0.999, 0.5]) {
      r = value;
      pauses.push(backoff.next());
    }
    expect(pauses).toEqual([100, 210, 440, 400, 440, 420]);
    const real = new WatchBackoff({ maxMs: 60_000 });
    for (let i = 0; i < 1_000; i++) {
      const pause = real.next();
      if (i >= 6) {
        expect(pause).toBeGreaterThanOrEqual(60_000);
        expect(pause).toBeLessThanOrEqual(66_000);
      }
    }
  });

  it('refuses a cap below the first pause', () => {
    expect(() => new WatchBackoff({ initialMs: 1_000, maxMs: 500 })).toThrow(/initial/);
    expect(() => new WatchBackoff({ initialMs: 0 })).toThrow(/initial/);
  });
});
