// The org key limiter's latency credit (sliding-window.ts, round-trip-credit.ts) against a model of
// the platform on the limiter's manual clock: each request travels an outbound leg, is counted on
// arrival by the emulator's own rate limiter (src/emulator/rate-limit.ts, fed the arrival instant)
// and answered 201 or 429 after a return leg. Everything runs in simulated time: fast and exact.
import { describe, expect, it } from '@jest/globals';
import { slidingWindowLimiter } from '../../src/emulator/rate-limit.ts';
import { orgKeyCreationLimiter } from '../../src/platform/sliding-window.ts';
import { manualClock } from './manual-clock.ts';

interface Legs {
  /** Grant to arrival (a send delayed by a busy event loop included). */
  outMs: number;
  /** Arrival to done() (the platform's work after counting and a late done() included). */
  backMs: number;
}

interface Trip {
  grantedAt: number;
  arrivedAt: number;
  answeredAt: number;
  status: number;
}

/** `n` creations queued at once; `legs(i, grantedAt)` says how the i-th granted one travels. */
async function simulate(n: number, legs: (i: number, grantedAt: number) => Legs): Promise<Trip[]> {
  const clock = manualClock();
  const limiter = orgKeyCreationLimiter(clock);
  const platform = slidingWindowLimiter(10, 1_000);
  const trips: Trip[] = [];
  let granted = 0;
  const pending = Array.from({ length: n }, () =>
    limiter.take().then((permit) => {
      const { outMs, backMs } = legs(granted++, permit.grantedAt);
      const trip: Trip = { grantedAt: permit.grantedAt, arrivedAt: permit.grantedAt + outMs, answeredAt: permit.grantedAt + outMs + backMs, status: 0 };
      trips.push(trip);
      clock.schedule(
        () => {
          trip.status = platform.take('org', trip.arrivedAt) === undefined ? 201 : 429;
          clock.schedule(() => permit.done({ status: trip.status }), backMs);
        },
        Math.max(0, trip.arrivedAt - clock.now()),
      );
    }),
  );
  // A grant's continuation runs in the microtask after its timer (manual-clock.ts), before the next
  // timer: its trip is scheduled in time order however far one step goes. The first grants come
  // at once: their continuations run before time moves at all.
  await new Promise((resolve) => setImmediate(resolve));
  while (trips.filter((t) => t.status !== 0).length < n || clock.pending() > 0) {
    await clock.advance(1_000);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await Promise.all(pending);
  return trips;
}

/** Creations per second from the `from`-th grant to the last (the steady state once the credit holds). */
function steadyRate(trips: Trip[], from: number): number {
  const grants = trips.map((t) => t.grantedAt).sort((a, b) => a - b);
  const first = grants[from] as number;
  const last = grants[grants.length - 1] as number;
  return ((grants.length - 1 - from) * 1_000) / (last - first);
}

/** The most arrivals in any window the way the platform counts: (t - 1,000 ms, t]. */
function mostInAnyWindow(trips: Trip[]): number {
  const times = trips.filter((t) => t.status === 201).map((t) => t.arrivedAt);
  let most = 0;
  for (const end of times) most = Math.max(most, times.filter((t) => t > end - 1_000 && t <= end).length);
  return most;
}

/** A small deterministic generator (mulberry32), so a jittered run is the same run every time. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

describe('latency credit of the org key limiter', () => {
  it.each([
    // [round trip, its outbound share, slot period once credited: 1,000 + rtt - (rtt - max(30, 0.1 x rtt + 10))]
    [0, 1, 1_000],
    [100, 1, 1_030],
    [100, 0.5, 1_030],
    [100, 0, 1_030],
    [300, 1, 1_040],
    [300, 0.5, 1_040],
  ])('with a fixed %i ms round trip (%f of it outbound) reaches 0.95 of the rate, and the platform refuses none', async (rttMs, outShare, periodMs) => {
    const trips = await simulate(200, () => ({ outMs: rttMs * outShare, backMs: rttMs * (1 - outShare) }));
    expect(trips.filter((t) => t.status === 429)).toEqual([]);
    expect(mostInAnyWindow(trips)).toBeLessThanOrEqual(10);
    // Once the round trips known go back 5 s, each grant comes exactly one period after the grant ten before.
    const grants = trips.map((t) => t.grantedAt);
    for (let i = 70; i < grants.length; i++) expect((grants[i] as number) - (grants[i - 10] as number)).toBeCloseTo(periodMs, 6);
    expect(steadyRate(trips, 70)).toBeGreaterThanOrEqual(0.95 * 10);
  });

  it('gives no credit before three rounds of round trips have been answered over 5 s (the first round also opens connections)', async () => {
    const trips = await simulate(80, () => ({ outMs: 100, backMs: 0 }));
    const grants = trips.map((t) => t.grantedAt);
    const round = (r: number) => grants.slice(10 * r, 10 * r + 10);
    expect(round(0)).toEqual(Array.from({ length: 10 }, () => 0));
    // As without credit: a full window after each answer (at 100, 1,200, ... 5,600 ms).
    for (let r = 1; r <= 5; r++) expect(round(r)).toEqual(Array.from({ length: 10 }, () => r * 1_100));
    // The first answers are 5 s old: 70 ms of the 100 ms round trip given back.
    expect(round(6)).toEqual(Array.from({ length: 10 }, () => 5_600 + 1_000 - 70));
    expect(round(7)).toEqual(Array.from({ length: 10 }, () => 6_530 + 100 + 1_000 - 70));
  });

  it('stays within the limit when a round trip is faster than every one before by less than the margin', async () => {
    // 300 ms all outbound (the worst split: the arrival is at the answer), then 265 ms: credit 260.
    const trips = await simulate(200, (i) => ({ outMs: i < 80 ? 300 : 265, backMs: 0 }));
    expect(trips.filter((t) => t.status === 429)).toEqual([]);
    expect(mostInAnyWindow(trips)).toBeLessThanOrEqual(10);
  });

  it('when round trips suddenly collapse, only requests sent before the first fast answer can be refused, none after it', async () => {
    const trips = await simulate(200, (i) => ({ outMs: i < 80 ? 300 : 0, backMs: 0 }));
    const firstFastAnswer = Math.min(...trips.slice(80).map((t) => t.answeredAt));
    const refused = trips.filter((t) => t.status === 429);
    // The credit was wrong for the requests already on their way when the network sped up...
    for (const t of refused) expect(t.grantedAt).toBeLessThanOrEqual(firstFastAnswer);
    expect(refused.length).toBeLessThanOrEqual(10);
    // ...and for nothing after: the fast answer shrank the credit for every slot at once.
    expect(trips.filter((t) => t.grantedAt > firstFastAnswer && t.status === 429)).toEqual([]);
    // (That a 429 then stops the credit for a while is the last test's.)
  });

  it.each([1, 2, 3])('with round trips jittered between 50 and 350 ms before the count (seed %i), the platform refuses none', async (seed) => {
    const random = seeded(seed);
    const trips = await simulate(300, () => ({ outMs: 50 + Math.round(random() * 300), backMs: 2 }));
    expect(trips.filter((t) => t.status === 429)).toEqual([]);
    expect(mostInAnyWindow(trips)).toBeLessThanOrEqual(10);
  });

  it.each([1, 2, 3])('with a busy event loop delaying sends and answers by up to 20 ms each (seed %i), the platform refuses none', async (seed) => {
    const random = seeded(100 + seed);
    const trips = await simulate(300, () => ({ outMs: 50 + Math.round(random() * 20), backMs: 50 + Math.round(random() * 20) }));
    expect(trips.filter((t) => t.status === 429)).toEqual([]);
    expect(mostInAnyWindow(trips)).toBeLessThanOrEqual(10);
  });

  it('gives no credit to a request without an answer, answered 5xx or 429, and none at all for a while after a 429', async () => {
    const clock = manualClock();
    const limiter = orgKeyCreationLimiter(clock);
    // Round trips of 100 ms answered at 100, 1,200, ... 5,600: credit 70 ms from then on.
    for (let round = 0; round < 6; round++) {
      const permits = await Promise.all(Array.from({ length: 10 }, () => limiter.take()));
      await clock.advance(100);
      for (const p of permits) p.done({ status: 201 });
      await clock.advance(round < 5 ? 1_000 : 0);
    }
    expect(clock.now()).toBe(5_600);
    const outcomes = [
      undefined,
      { status: 503 },
      { status: 201 },
      { status: 201 },
      { status: 201 },
      { status: 201 },
      { status: 201 },
      { status: 201 },
      { status: 201 },
      { status: 201 },
    ];
    const at = async () => {
      const p = await limiter.take();
      return { p, at: clock.now() };
    };
    // Answered at 5,600: free at 6,530 with the credit.
    const next = Array.from({ length: 10 }, at);
    await clock.advance(6_530 - clock.now());
    const credited = await Promise.all(next);
    expect(credited.map((x) => x.at)).toEqual(Array.from({ length: 10 }, () => 6_530));
    await clock.advance(100);
    credited.forEach((x, i) => x.p.done(outcomes[i]));
    // Answered at 6,630: the failed and the 503 slots wait a full window (7,630), the others 930 ms.
    const after = Array.from({ length: 10 }, at);
    await clock.advance(7_560 - clock.now());
    const early = await Promise.all(after.slice(0, 8));
    expect(early.map((x) => x.at)).toEqual(Array.from({ length: 8 }, () => 7_560));
    await clock.advance(7_630 - clock.now());
    const late = await Promise.all(after.slice(8));
    expect(late.map((x) => x.at)).toEqual([7_630, 7_630]);
    // A 429 among the answers (at 7,730): every slot now waits a full window after its answer, for 10 s.
    await clock.advance(100);
    for (const [i, x] of [...early, ...late].entries()) x.p.done({ status: i === 0 ? 429 : 201 });
    const granted: number[] = [];
    const cautious = Array.from({ length: 10 }, () =>
      at().then((x) => {
        granted.push(x.at);
        return x;
      }),
    );
    await clock.advance(8_729 - clock.now());
    await new Promise((resolve) => setImmediate(resolve));
    expect(granted).toEqual([]); // with the credit: 8,660
    await clock.advance(1);
    for (const x of await Promise.all(cautious)) x.p.done({ status: 201 });
    expect(granted).toEqual(Array.from({ length: 10 }, () => 8_730));
  });
});
