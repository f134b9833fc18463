// Helpers of the limiters' tests: a manual clock (BucketClock: time moves only when a test says so)
// and a way to start many takes at once.
import type { RateLimiter } from '../../src/platform/sliding-window.ts';
import type { BucketClock } from '../../src/platform/token-bucket.ts';
import { realClock } from '../../src/platform/waiter-queue.ts';

/** A manual clock: time moves only through `advance`, which fires due timers in order. */
export function manualClock(): BucketClock & { advance(ms: number): Promise<void>; pending(): number } {
  let t = 0;
  let timers: { at: number; fn: () => void }[] = [];
  return {
    now: () => t,
    schedule(fn, ms) {
      const timer = { at: t + ms, fn };
      timers.push(timer);
      return () => {
        timers = timers.filter((x) => x !== timer);
      };
    },
    pending: () => timers.length,
    async advance(ms) {
      const end = t + ms;
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const next = timers[0];
        if (next === undefined || next.at > end) break;
        timers.shift();
        t = next.at;
        next.fn();
        await Promise.resolve();
      }
      t = end;
      await Promise.resolve();
    },
  };
}

/**
 * Starts `n` takes and records the clock time at which each one resolves. Each request is
 * answered at once (a limiter that counts answers sees them at their grant) unless `answerAfterMs`
 * says how long it stays in flight.
 */
export function takeAll(limiter: RateLimiter, clock: BucketClock, n: number, signal?: AbortSignal, answerAfterMs = 0) {
  const times: number[] = [];
  const done = Array.from({ length: n }, () =>
    limiter.take(signal).then((permit) => {
      times.push(clock.now());
      if (answerAfterMs === 0) permit.done();
      else clock.schedule(() => permit.done(), answerAfterMs);
    }),
  );
  return { times, done };
}

/**
 * The real clock and real timers, recording the wait each timer was asked for (a limiter's own
 * decision, which a slow machine does not change: it only fires the timers late) and how many
 * timers have fired.
 */
export function recordingRealClock(): BucketClock & { asked: number[]; fired(): number } {
  const asked: number[] = [];
  let fired = 0;
  return {
    asked,
    fired: () => fired,
    now: () => realClock.now(),
    schedule(fn, ms) {
      asked.push(ms);
      return realClock.schedule(() => {
        fired++;
        fn();
      }, ms);
    },
  };
}
