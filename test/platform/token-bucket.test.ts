import { describe, expect, it } from '@jest/globals';
import { TokenBucket, type BucketClock } from '../../src/platform/token-bucket.ts';
import { manualClock, recordingRealClock, takeAll } from './manual-clock.ts';

describe('TokenBucket', () => {
  it('spaces takes at 1/rate with the default burst of 1', async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ ratePerSecond: 10, clock });
    const { times } = takeAll(bucket, clock, 25);
    await clock.advance(0);
    await clock.advance(5_000);
    expect(times).toHaveLength(25);
    expect(times[0]).toBe(0);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBe(100);
    // Any one-second window holds at most 10 takes.
    for (const start of times) expect(times.filter((x) => x >= start && x < start + 1000).length).toBeLessThanOrEqual(10);
  });

  it('never releases two waiters together when its timer fires late (a busy event loop)', async () => {
    let t = 0;
    const timers: (() => void)[] = [];
    const clock: BucketClock = { now: () => t, schedule: (fn) => (timers.push(fn), () => {}) };
    const bucket = new TokenBucket({ ratePerSecond: 10, clock });
    const { times } = takeAll(bucket, clock, 4);
    await Promise.resolve();
    expect(times).toEqual([0]);
    // The timer asked for 100 ms but fires at 350 ms: only one waiter goes.
    t = 350;
    timers.shift()!();
    await Promise.resolve();
    expect(times).toEqual([0, 350]);
    t = 360;
    timers.shift()!();
    await Promise.resolve();
    // 10 ms after the last release only 0.1 token has accrued: nobody is released yet.
    expect(times).toEqual([0, 350]);
    expect(timers).toHaveLength(1);
  });

  it('lets a burst through at once, then refills at the rate', async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ ratePerSecond: 5, burst: 3, clock });
    for (let i = 0; i < 3; i++) expect(bucket.tryTake()).toBe(true);
    expect(bucket.tryTake()).toBe(false);
    await clock.advance(199);
    expect(bucket.tryTake()).toBe(false);
    await clock.advance(1);
    expect(bucket.tryTake()).toBe(true);
    await clock.advance(10_000);
    // Never more than `burst` saved up, however long it was idle.
    for (let i = 0; i < 3; i++) expect(bucket.tryTake()).toBe(true);
    expect(bucket.tryTake()).toBe(false);
  });

  it('serves waiters first come, first served, and tryTake does not jump the queue', async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ ratePerSecond: 4, clock });
    const order: string[] = [];
    const a = bucket.take().then(() => order.push('a'));
    const b = bucket.take().then(() => order.push('b'));
    const c = bucket.take().then(() => order.push('c'));
    await clock.advance(0);
    expect(bucket.tryTake()).toBe(false);
    await clock.advance(1_000);
    await Promise.all([a, b, c]);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  it('rejects an aborted waiter with the signal reason and gives its turn to the next one', async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ ratePerSecond: 10, clock });
    expect(bucket.tryTake()).toBe(true);
    const ac = new AbortController();
    const reason = new Error('cancelled');
    const aborted = bucket.take(ac.signal);
    const next = bucket.take().then(() => clock.now());
    ac.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await clock.advance(200);
    expect(await next).toBe(100);
    await expect(bucket.take(AbortSignal.abort(reason))).rejects.toBe(reason);
  });

  it('stops its timer when the last waiter aborts', async () => {
    const clock = manualClock();
    const bucket = new TokenBucket({ ratePerSecond: 1, clock });
    bucket.tryTake();
    const ac = new AbortController();
    const p = bucket.take(ac.signal);
    expect(clock.pending()).toBe(1);
    ac.abort();
    await expect(p).rejects.toBeDefined();
    expect(clock.pending()).toBe(0);
  });

  it('holds a real-clock rate: 12 takes at 40/s, each waiting for its own 25 ms token', async () => {
    // Real time and real timers. Each take resolves with the instant the bucket let it through, so
    // the spacing is read from the bucket's own decisions: timing the continuations measured the
    // event loop as well (a continuation that ran 1.6 ms late made the next gap 23.4 ms for a real
    // 25 ms spacing), and so did reading the clock after the grant (2 us either way). How long it
    // took in all is the machine's business; what the bucket asked of the timers is its own: one
    // token's worth at most each time, however late the last timer fired.
    const clock = recordingRealClock();
    const started = clock.now();
    const bucket = new TokenBucket({ ratePerSecond: 40, clock });
    const granted = (await Promise.all(Array.from({ length: 12 }, () => bucket.take()))).map((p) => p.grantedAt);
    expect(granted).toHaveLength(12);
    expect(clock.now() - started).toBeGreaterThanOrEqual(270);
    for (let i = 1; i < granted.length; i++) expect(granted[i]! - granted[i - 1]!).toBeGreaterThanOrEqual(25 - 1e-6);
    expect(clock.asked.length).toBeGreaterThanOrEqual(11);
    for (const ms of clock.asked) expect(ms).toBeLessThanOrEqual(25 + 1e-6);
  });

  it('validates its options', () => {
    expect(() => new TokenBucket({ ratePerSecond: 0 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSecond: 10, burst: 0 })).toThrow(RangeError);
  });
});
