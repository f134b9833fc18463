// keys/turns/fair-limiter.ts: the org limiter's waiters in fair turns between namespaces, a repair first,
// with the platform limiter itself (src/platform/sliding-window.ts) on a manual clock.
import { describe, expect, it } from '@jest/globals';
import { orgKeyCreationLimiter, type Permit } from '../../../../src/platform/index.ts';
import type { BucketClock } from '../../../../src/platform/waiter-queue.ts';
import { CreateWaiter, FairLimiter } from '../../../../src/operator/keys/turns/fair-limiter.ts';

class ManualClock implements BucketClock {
  t = 0;
  readonly #timers = new Set<{ at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  schedule(fn: () => void, ms: number): () => void {
    const timer = { at: this.t + ms, fn };
    this.#timers.add(timer);
    return () => this.#timers.delete(timer);
  }
  advance(ms: number): void {
    this.t += ms;
    for (const timer of [...this.#timers].sort((a, b) => a.at - b.at)) {
      if (timer.at > this.t || !this.#timers.delete(timer)) continue;
      timer.fn();
    }
  }
}
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('FairLimiter', () => {
  it("lets a quiet namespace's create through next, not behind a flood's waiting creates, at the limiter's own rate", async () => {
    const clock = new ManualClock();
    const limiter = new FairLimiter(orgKeyCreationLimiter(clock));
    const granted: string[] = [];
    const permits: Permit[] = [];
    const take = (key: string, priority: 'create' | 'repair' = 'create'): void => {
      void limiter.take(undefined, new CreateWaiter(key, priority)).then((p) => {
        granted.push(key);
        permits.push(p);
      });
    };
    for (let i = 1; i <= 15; i++) take(`ApiKey/flood/k${i}`);
    await settle();
    // The platform's 10 slots, all the flood's (nobody else waited).
    expect(granted).toEqual(Array.from({ length: 10 }, (_, i) => `ApiKey/flood/k${i + 1}`));
    take('ApiKey/quiet/new');
    take('ApiKey/other/broken', 'repair');
    await settle();
    expect(granted.length).toBe(10);
    // Each answer frees its slot one window later: one create per slot.
    for (const p of permits.slice(0, 10)) p.done({ status: 200 });
    for (let i = 0; i < 8; i++) {
      clock.advance(1_000);
      await settle();
    }
    // The flood's k11 was already at the limiter; then the repair, the quiet namespace's key, and the flood again.
    expect(granted.slice(10)).toEqual([
      'ApiKey/flood/k11',
      'ApiKey/other/broken',
      'ApiKey/quiet/new',
      'ApiKey/flood/k12',
      'ApiKey/flood/k13',
      'ApiKey/flood/k14',
      'ApiKey/flood/k15',
    ]);
  });

  it('spreads its permits while two namespaces create: one per 100 ms at most, the same rate, and a newcomer waits one spacing, not for the next clump', async () => {
    const clock = new ManualClock();
    const limiter = new FairLimiter(orgKeyCreationLimiter(clock), { spacingMs: 100, clock });
    const grants: { key: string; at: number }[] = [];
    const take = (key: string): void => {
      void limiter.take(undefined, new CreateWaiter(key, 'create')).then((p) => {
        grants.push({ key, at: clock.now() });
        // The platform answers in 50 ms.
        clock.schedule(() => p.done({ status: 201 }), 50);
      });
    };
    for (let i = 1; i <= 30; i++) take(`ApiKey/flood-${i % 2}/k${i}`);
    for (let t = 0; t < 3_100; t += 10) {
      clock.advance(10);
      await settle();
    }
    const gaps = grants.slice(1).map((g, i) => g.at - (grants[i] as { at: number }).at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(100);
    // 30 creates in three rounds: 10 slots, each again 1,000 ms after its answer (50 ms after its
    // permit), the first round spread over 900 ms: the 30th at 2 x 1,050 + 900 ms, plus up to one
    // 10 ms step of this test's clock per round.
    expect(grants.length).toBe(30);
    expect((grants.at(-1) as { at: number }).at).toBeLessThanOrEqual(3_030);
    // Two namespaces with a backlog alternate: neither has more than one permit over the other's at any point.
    grants.forEach((_, i) => {
      const first = grants.slice(0, i + 1).filter((g) => g.key.startsWith('ApiKey/flood-0/')).length;
      expect(Math.abs(2 * first - (i + 1))).toBeLessThanOrEqual(1);
    });
    // No second holds more than 10 permits.
    for (const g of grants) expect(grants.filter((h) => h.at >= g.at && h.at < g.at + 1_000).length).toBeLessThanOrEqual(10);
    // A quiet namespace's create arriving now goes at the next spacing: within 150 ms, not a second.
    for (let i = 31; i <= 60; i++) take(`ApiKey/flood-${i % 2}/k${i}`);
    clock.advance(10);
    await settle();
    const before = grants.length;
    const arrived = clock.now();
    take('ApiKey/quiet/new');
    for (let t = 0; t < 300; t += 10) {
      clock.advance(10);
      await settle();
    }
    const quiet = grants.find((g) => g.key === 'ApiKey/quiet/new');
    expect(quiet).toBeDefined();
    expect((quiet as { at: number }).at - arrived).toBeLessThanOrEqual(150);
    expect(grants.length).toBeGreaterThan(before);
  });

  it("lets a quiet namespace's second create, right after its first, go before a round of ten floods: it had fewer permits in the window", async () => {
    const clock = new ManualClock();
    const limiter = new FairLimiter(orgKeyCreationLimiter(clock), { spacingMs: 90, clock });
    const grants: string[] = [];
    const take = (key: string): void => {
      void limiter.take(undefined, new CreateWaiter(key, 'create')).then((p) => {
        grants.push(key);
        clock.schedule(() => p.done({ status: 201 }), 50);
      });
    };
    const step = async (ms: number): Promise<void> => {
      for (let t = 0; t < ms; t += 10) {
        clock.advance(10);
        await settle();
      }
    };
    // Ten floods, three creates waiting each at a time (as the organization's admission keeps them).
    let n = 0;
    const refill = (): void => {
      for (let f = 0; f < 10; f++)
        while (grants.filter((g) => g.startsWith(`ApiKey/flood-${f}/`)).length + 3 > [...issued].filter((k) => k.startsWith(`ApiKey/flood-${f}/`)).length) {
          const key = `ApiKey/flood-${f}/k${++n}`;
          issued.add(key);
          take(key);
        }
    };
    const issued = new Set<string>();
    refill();
    for (let s = 0; s < 40; s++) {
      await step(100);
      refill();
    }
    // Two creates of namespace quiet, one right after the other.
    take('ApiKey/quiet/first');
    await step(10);
    take('ApiKey/quiet/second');
    const at = grants.length;
    for (let s = 0; s < 10 && !grants.includes('ApiKey/quiet/second'); s++) {
      await step(100);
      refill();
    }
    const after = grants.slice(at);
    // The first goes next; the second after at most a couple of the floods' creates, not ten.
    expect(after.indexOf('ApiKey/quiet/first')).toBe(0);
    expect(after.indexOf('ApiKey/quiet/second')).toBeGreaterThan(0);
    expect(after.indexOf('ApiKey/quiet/second')).toBeLessThanOrEqual(3);
  });

  it('does not spread a namespace alone: its burst of 10 goes at once', async () => {
    const clock = new ManualClock();
    const limiter = new FairLimiter(orgKeyCreationLimiter(clock), { spacingMs: 100, clock });
    let granted = 0;
    for (let i = 1; i <= 10; i++)
      void limiter.take(undefined, new CreateWaiter(`ApiKey/team/k${i}`, 'create')).then(() => {
        granted++;
      });
    await settle();
    expect(granted).toBe(10);
    expect(clock.now()).toBe(0);
  });

  it('lets a waiter whose signal aborts leave the line', async () => {
    const clock = new ManualClock();
    const limiter = new FairLimiter(orgKeyCreationLimiter(clock));
    const permits: Permit[] = [];
    for (let i = 0; i < 10; i++) permits.push(await limiter.take());
    const blocked = limiter.take(); // at the inner limiter
    const abort = new AbortController();
    const leaving = limiter.take(abort.signal);
    abort.abort(new Error('gone'));
    await expect(leaving).rejects.toThrow('gone');
    permits[0]?.done({ status: 200 });
    clock.advance(1_000);
    await expect(blocked).resolves.toBeDefined();
  });
});
