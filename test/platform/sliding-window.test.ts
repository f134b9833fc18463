import { describe, expect, it } from '@jest/globals';
import { SlidingWindowLimiter, defaultOrgKeyLimiter, orgKeyCreationLimiter, type Permit } from '../../src/platform/sliding-window.ts';
import { manualClock, recordingRealClock, takeAll } from './manual-clock.ts';

/** The most grants in any window of `windowMs` (a window [t, t + windowMs) as the platform counts). */
function mostInAnyWindow(times: number[], windowMs: number): number {
  let most = 0;
  for (const start of times) most = Math.max(most, times.filter((t) => t >= start && t < start + windowMs).length);
  return most;
}

describe('SlidingWindowLimiter', () => {
  it('lets `limit` requests go at once, then each one when the oldest leaves the window plus margin', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 10, windowMs: 1_000, marginMs: 25, clock });
    const { times, done } = takeAll(limiter, clock, 25);
    await clock.advance(0);
    expect(times).toEqual(Array.from({ length: 10 }, () => 0));
    await clock.advance(1_024);
    expect(times).toHaveLength(10);
    await clock.advance(1);
    expect(times).toHaveLength(20);
    await clock.advance(1_025);
    await Promise.all(done);
    expect(times.slice(20)).toEqual([2_050, 2_050, 2_050, 2_050, 2_050]);
  });

  it('never grants more than `limit` in any window, however the requests arrive', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 10, windowMs: 1_000, marginMs: 25, clock });
    const times: number[] = [];
    const pending: Promise<void>[] = [];
    // Irregular arrivals: bursts and gaps over 6 s.
    for (let i = 0; i < 120; i++) {
      pending.push(
        limiter.take().then((p) => {
          p.done();
          times.push(clock.now());
        }),
      );
      // A take granted at once records its time in a continuation: let it run before time moves.
      await new Promise((resolve) => setImmediate(resolve));
      await clock.advance([0, 3, 40, 170, 0, 9][i % 6] as number);
    }
    await clock.advance(20_000);
    await Promise.all(pending);
    expect(times).toHaveLength(120);
    // The margin holds too: any window of 1,025 ms sees at most 10.
    expect(mostInAnyWindow(times, 1_025)).toBe(10);
    // And it wastes nothing beyond the margin: with a backlog, each grant comes the moment the
    // grant ten before it leaves the span.
    for (let i = 10; i < times.length; i++) expect(times[i]).toBe((times[i - 10] as number) + 1_025);
  });

  it('serves waiters first come, first served, and a newcomer never jumps the queue', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 1, windowMs: 100, marginMs: 0, clock });
    (await limiter.take()).done();
    const order: string[] = [];
    const answer = (name: string) => (p: Permit) => {
      p.done();
      order.push(name);
    };
    const a = limiter.take().then(answer('a'));
    const b = limiter.take().then(answer('b'));
    await clock.advance(100);
    const c = limiter.take().then(answer('c'));
    await clock.advance(200);
    await Promise.all([a, b, c]);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  it('rejects an aborted waiter with the signal reason, gives its turn to the next, and stops its timer', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 1, windowMs: 100, marginMs: 0, clock });
    (await limiter.take()).done();
    const ac = new AbortController();
    const reason = new Error('cancelled');
    const aborted = limiter.take(ac.signal);
    const next = limiter.take().then((p) => {
      p.done();
      return clock.now();
    });
    ac.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    await clock.advance(100);
    expect(await next).toBe(100);
    await expect(limiter.take(AbortSignal.abort(reason))).rejects.toBe(reason);

    const lone = new AbortController();
    const waiting = limiter.take(lone.signal);
    expect(clock.pending()).toBe(1);
    lone.abort();
    await expect(waiting).rejects.toBeDefined();
    expect(clock.pending()).toBe(0);
  });

  it('counts each request from its answer: a slot is free a window after the answer came', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 2, windowMs: 1_000, clock });
    const { times, done } = takeAll(limiter, clock, 6, undefined, 300);
    await clock.advance(0);
    expect(times).toEqual([0, 0]);
    // Answered at 300: free at 1,300, not at 1,000.
    await clock.advance(1_299);
    expect(times).toEqual([0, 0]);
    await clock.advance(1);
    expect(times).toEqual([0, 0, 1_300, 1_300]);
    await clock.advance(1_300);
    await Promise.all(done);
    expect(times.slice(4)).toEqual([2_600, 2_600]);
  });

  it('waits for an answer, without a timer, while every slot is in flight', async () => {
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 1, windowMs: 1_000, clock });
    const first = await limiter.take();
    let grantedAt: number | undefined;
    const second = limiter.take().then((p) => {
      grantedAt = p.grantedAt;
      p.done();
    });
    expect(clock.pending()).toBe(0);
    await clock.advance(5_000);
    expect(grantedAt).toBeUndefined();
    first.done();
    first.done(); // a second call changes nothing
    expect(clock.pending()).toBe(1);
    await clock.advance(999);
    expect(grantedAt).toBeUndefined();
    await clock.advance(1);
    await second;
    expect(grantedAt).toBe(6_000);
  });

  it('keeps arrivals within the limit whatever each request takes to arrive and be answered', async () => {
    // The platform counts arrivals; an arrival lies anywhere between departure and answer.
    const clock = manualClock();
    const limiter = new SlidingWindowLimiter({ limit: 10, windowMs: 1_000, clock });
    const arrivals: number[] = [];
    const pending = Array.from({ length: 80 }, (_, i) =>
      limiter.take().then((p) => {
        const latency = ((i * 37) % 11) * 40;
        arrivals.push(p.grantedAt + latency * (((i * 13) % 7) / 6));
        clock.schedule(() => p.done(), latency);
      }),
    );
    // In steps, letting each grant's continuation schedule its answer.
    for (let step = 0; step < 300; step++) {
      await clock.advance(50);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(pending);
    expect(arrivals).toHaveLength(80);
    expect(mostInAnyWindow(arrivals, 1_000)).toBeLessThanOrEqual(10);
  });

  it('holds on the real clock: 25 requests at 10 per second leave in three windows', async () => {
    // Real time and real timers; how long it took in all is the machine's business. The limiter's
    // own decisions are not: 10 go before any timer, the rest at most a window's wait each.
    const clock = recordingRealClock();
    const limiter = orgKeyCreationLimiter(clock);
    const started = clock.now();
    const timersBefore: number[] = [];
    const granted = await Promise.all(
      Array.from({ length: 25 }, () =>
        limiter.take().then((p) => {
          timersBefore.push(clock.fired());
          p.done();
          return p.grantedAt;
        }),
      ),
    );
    expect(clock.now() - started).toBeGreaterThanOrEqual(2 * 1_000 - 1);
    expect(timersBefore.filter((n) => n === 0)).toHaveLength(10);
    const sorted = [...granted].sort((x, y) => x - y);
    for (let i = 10; i < sorted.length; i++) expect(sorted[i]! - sorted[i - 10]!).toBeGreaterThanOrEqual(1_000);
    expect(clock.asked.length).toBeGreaterThan(0);
    for (const ms of clock.asked) expect(ms).toBeLessThanOrEqual(1_000);
  });

  it('validates its options, and the process-wide default is one limiter', () => {
    expect(() => new SlidingWindowLimiter({ limit: 0 })).toThrow(RangeError);
    expect(() => new SlidingWindowLimiter({ limit: 1.5 })).toThrow(RangeError);
    expect(() => new SlidingWindowLimiter({ limit: 1, windowMs: 0 })).toThrow(RangeError);
    expect(() => new SlidingWindowLimiter({ limit: 1, marginMs: -1 })).toThrow(RangeError);
    expect(defaultOrgKeyLimiter()).toBe(defaultOrgKeyLimiter());
  });
});
