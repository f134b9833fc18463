// The org key limiters are kept per organization only while they hold something (manager.ts
// orgKeyLimiters): an idle limiter (sliding-window.ts, fair-limiter.ts idle()) is dropped, and the
// one made again in its place must behave exactly as the one kept would have. On a manual clock,
// with the platform limiter and the fair limiter themselves.
import { describe, expect, it } from '@jest/globals';
import { orgKeyLimiters } from '../../../../src/operator/manager.ts';
import { CreateWaiter, FairLimiter } from '../../../../src/operator/keys/turns/fair-limiter.ts';
import { orgKeyCreationLimiter, type Permit } from '../../../../src/platform/index.ts';
import type { BucketClock } from '../../../../src/platform/waiter-queue.ts';

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Time moves only through advanceTo, which fires the due timers one at a time, letting promises settle after each. */
class ManualClock implements BucketClock {
  t = 0;
  #timers: { at: number; seq: number; fn: () => void }[] = [];
  #seq = 0;
  now(): number {
    return this.t;
  }
  schedule(fn: () => void, ms: number): () => void {
    const timer = { at: this.t + ms, seq: ++this.#seq, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((x) => x !== timer);
    };
  }
  async advanceTo(end: number): Promise<void> {
    await settle();
    for (;;) {
      this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.#timers[0];
      if (next === undefined || next.at > end) break;
      this.#timers.shift();
      this.t = Math.max(this.t, next.at);
      next.fn();
      await settle();
    }
    this.t = Math.max(this.t, end);
    await settle();
  }
}

/** A deterministic pseudo-random sequence (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const operatorLimiter = (clock: BucketClock): FairLimiter => new FairLimiter(orgKeyCreationLimiter(clock), { spacingMs: 90, clock });

describe('org key limiters kept only while they hold something', () => {
  it('a limiter is not idle while a creation is in its window or its round trips still count, nor ever after a 429', async () => {
    const clock = new ManualClock();
    const limiter = orgKeyCreationLimiter(clock);
    expect(limiter.idle()).toBe(true);
    const permit = await limiter.take();
    expect(limiter.idle()).toBe(false); // in flight
    await clock.advanceTo(100);
    permit.done({ status: 200 });
    await clock.advanceTo(1_099);
    expect(limiter.idle()).toBe(false); // its answer is within the window
    await clock.advanceTo(1_100);
    // Free again, but its round trip still counts toward the credit for 10 windows.
    expect(limiter.idle()).toBe(false);
    await clock.advanceTo(11_101);
    expect(limiter.idle()).toBe(true);
    // Failed without an answer: no round trip to count, idle a window after.
    const failed = await limiter.take();
    failed.done();
    await clock.advanceTo(12_101);
    expect(limiter.idle()).toBe(true);
    // A 429: the next caution is doubled, which a new limiter would not know: never idle again.
    const refused = await limiter.take();
    refused.done({ status: 429 });
    await clock.advanceTo(2_000_000);
    expect(limiter.idle()).toBe(false);

    const fair = operatorLimiter(clock);
    expect(fair.idle()).toBe(true);
    const taken = await fair.take(undefined, new CreateWaiter('ApiKey/team/k', 'create'));
    expect(fair.idle()).toBe(false);
    taken.done();
    await clock.advanceTo(clock.t + 4_000);
    expect(fair.idle()).toBe(false); // the namespace's permit is within the fair line's 5 s
    await clock.advanceTo(clock.t + 1_001);
    expect(fair.idle()).toBe(true);
  });

  it('dropped when idle and made again, a limiter grants every create at the very instant the one kept does (3 seeds, 400 creates each, 429s and pauses included)', async () => {
    for (const seed of [41, 42, 43]) {
      const clock = new ManualClock();
      const kept = operatorLimiter(clock);
      let made = 0;
      const limiterFor = orgKeyLimiters(
        () => {
          made++;
          return operatorLimiter(clock);
        },
        () => clock.now(),
      );
      const next = random(seed);
      const grants: { kept: number[]; remade: number[] } = { kept: [], remade: [] };
      let i = 0;
      let madeAtFirst429: number | undefined;
      for (let phase = 0; phase < 40; phase++) {
        // A burst of creates of a few namespaces, repairs among them; each answered after its latency, a few 429s.
        const burst = 1 + Math.floor(next() * 20);
        for (let b = 0; b < burst; b++, i++) {
          const index = i;
          const key = `ApiKey/ns-${Math.floor(next() * 3)}/k${index}`;
          const priority = next() < 0.2 ? 'repair' : 'create';
          const latencyMs = 20 + Math.floor(next() * 300);
          // 429s only in the second half: the first shows limiters dropped and made again, the second one kept for its caution.
          const status = next() < 0.02 && phase >= 20 ? 429 : 201;
          for (const [side, limiter] of [
            ['kept', kept],
            ['remade', limiterFor('org-a')],
          ] as const) {
            void limiter.take(undefined, new CreateWaiter(key, priority)).then((permit: Permit) => {
              grants[side][index] = clock.now();
              clock.schedule(() => {
                if (status === 429 && side === 'remade') madeAtFirst429 ??= made;
                permit.done({ status });
              }, latencyMs);
            });
          }
          await clock.advanceTo(clock.t + Math.floor(next() * 50));
        }
        // A pause: often long enough for everything to leave the window and the round trips to expire.
        await clock.advanceTo(clock.t + (next() < 0.5 ? 15_000 : Math.floor(next() * 3_000)));
      }
      await clock.advanceTo(clock.t + 60_000);
      expect(grants.remade.length).toBe(i);
      expect(grants.remade).toEqual(grants.kept);
      // It was dropped and made again along the way (not one limiter kept all along).
      expect({ seed, remadeSome: made > 1, madeAfter429: madeAtFirst429 === made }).toEqual({ seed, remadeSome: true, madeAfter429: true });
    }
  });

  it('10,000 distinct organizations, one create each at 100 a second: the limiters kept are only those with a create in the last 11 s, and one once all are idle', async () => {
    const clock = new ManualClock();
    const limiterFor = orgKeyLimiters(
      () => operatorLimiter(clock),
      () => clock.now(),
    );
    const takenAt: number[] = [];
    let most = 0;
    for (let n = 0; n < 10_000; n++) {
      const limiter = limiterFor(`org-${n}`);
      takenAt.push(clock.t);
      void limiter.take(undefined, new CreateWaiter(`ApiKey/tenant/k${n}`, 'create')).then((permit) => {
        clock.schedule(() => permit.done({ status: 403 }), 50);
      });
      await clock.advanceTo(clock.t + 10);
      // Busy: a create taken within the last 11 s (answered 50 ms later, counted 10 s after that), plus a look-up a second apart.
      const recent = takenAt.filter((at) => at > clock.t - 12_100).length;
      most = Math.max(most, limiterFor.size);
      expect(limiterFor.size).toBeLessThanOrEqual(recent);
    }
    // About 11 s of creates at 100 a second at most, however many organizations were named.
    expect(most).toBeLessThanOrEqual(1_220);
    await clock.advanceTo(clock.t + 12_000);
    limiterFor('org-again');
    expect(limiterFor.size).toBe(1);
  });
});
