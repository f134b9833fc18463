import { describe, expect, it } from '@jest/globals';
import { ControllerRateLimiter, LOW_MAX_WAIT_MS, LOW_SHARE, WorkQueue, type Timers, type WorkQueueMetrics } from '../../../src/operator/runtime/queue.ts';

/** A manual clock: timers fire only when the test advances time. */
class FakeTimers implements Timers {
  #now = 0;
  #next = 0;
  readonly #pending = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.#now;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.#next++;
    this.#pending.set(id, { at: this.#now + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.#pending.delete(handle as number);
  }
  get pendingCount(): number {
    return this.#pending.size;
  }
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.#pending) if (entry[1].at <= target && (due === undefined || entry[1].at < due[1].at)) due = entry;
      if (due === undefined) break;
      this.#pending.delete(due[0]);
      this.#now = due[1].at;
      due[1].fn();
    }
    this.#now = target;
  }
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('WorkQueue', () => {
  it('hands keys out in FIFO order and deduplicates a key while it waits', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(q.len()).toBe(0);
  });

  it('re-queues a key added while it is processed only after done(), never handing it out twice at once', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    expect(await q.get()).toBe('a');
    q.add('a');
    q.add('a');
    expect(q.len()).toBe(0);
    let second: string | undefined;
    void q.get().then((key) => (second = key));
    await tick();
    expect(second).toBeUndefined();
    q.done('a');
    await tick();
    expect(second).toBe('a');
    q.done('a');
    expect(q.len()).toBe(0);
  });

  it('does not re-queue a processed key that was not added again', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.done((await q.get())!);
    expect(q.len()).toBe(0);
  });

  it('wakes a waiting get() on add', async () => {
    const q = new WorkQueue<string>();
    const pending = q.get();
    q.add('x');
    expect(await pending).toBe('x');
  });

  it('never processes a key in two workers at once under concurrent workers', async () => {
    const q = new WorkQueue<string>();
    const keys = ['a', 'b', 'c', 'd'];
    const active = new Set<string>();
    const processed = new Map<string, number>();
    let violations = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        const key = await q.get();
        if (key === undefined) return;
        if (active.has(key)) violations++;
        active.add(key);
        processed.set(key, (processed.get(key) ?? 0) + 1);
        // while in flight, the key is added again (a watch event arriving mid-reconcile)
        q.add(key);
        await tick();
        active.delete(key);
        q.done(key);
      }
    };
    const workers = Array.from({ length: 4 }, worker);
    for (let round = 0; round < 20; round++) {
      for (const key of keys) q.add(key);
      await tick();
    }
    await tick();
    await q.shutDownWithDrain();
    await Promise.all(workers);
    expect(violations).toBe(0);
    for (const key of keys) expect(processed.get(key)).toBeGreaterThan(1);
  });

  it('addAfter delays the add, orders by ready time and keeps the earlier of two delays', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.addAfter('late', 30);
    q.addAfter('early', 10);
    q.addAfter('late', 50); // later than the one already waiting: ignored
    q.addAfter('now', 0);
    expect(q.len()).toBe(1);
    expect(await q.get()).toBe('now');
    timers.advance(9);
    expect(q.len()).toBe(0);
    timers.advance(1);
    expect(q.len()).toBe(1);
    timers.advance(20);
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('early');
    expect(await q.get()).toBe('late');
    timers.advance(100);
    expect(q.len()).toBe(0);
  });

  it('addAfter with an earlier time replaces the waiting delay', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.addAfter('a', 100);
    q.addAfter('a', 10);
    expect(timers.pendingCount).toBe(1);
    timers.advance(10);
    expect(await q.get()).toBe('a');
    timers.advance(200);
    expect(q.len()).toBe(0);
  });

  it('addRateLimited backs off exponentially from 5 ms, counts requeues and resets on forget', () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    const readyAfter = (key: string): number => {
      q.addRateLimited(key);
      let waited = 0;
      while (q.len() === 0) {
        if (waited > 1_000) throw new Error('never became ready');
        timers.advance(1);
        waited++;
      }
      // the key is ready: take it and finish it (get() resolves with it synchronously)
      void q.get();
      q.done(key);
      return waited;
    };
    expect(readyAfter('a')).toBe(5);
    expect(readyAfter('a')).toBe(10);
    expect(readyAfter('a')).toBe(20);
    expect(readyAfter('a')).toBe(40);
    expect(q.numRequeues('a')).toBe(4);
    expect(q.numRequeues('b')).toBe(0);
    q.forget('a');
    expect(q.numRequeues('a')).toBe(0);
  });
});

describe('addPaced', () => {
  it('adds at once under the token bucket, without counting a failure or waiting for past ones', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers, rateLimiter: { qps: 10, burst: 1 } });
    q.addRateLimited('a'); // a failure: 5 ms, and the only token
    timers.advance(5);
    expect(await q.get()).toBe('a');
    q.done('a');
    q.addPaced('a'); // the bucket is empty: 100 ms for the next token; no failure counted
    expect(q.numRequeues('a')).toBe(1);
    expect(q.len()).toBe(0);
    timers.advance(94);
    expect(q.len()).toBe(0);
    timers.advance(1);
    expect(q.len()).toBe(1);
  });
});

describe('ControllerRateLimiter', () => {
  it('caps the per-item backoff at 5 minutes and tracks items separately', () => {
    const limiter = new ControllerRateLimiter<string>({ burst: 1_000_000 }, () => 0);
    const delays = Array.from({ length: 40 }, () => limiter.when('a'));
    expect(delays.slice(0, 4)).toEqual([5, 10, 20, 40]);
    expect(Math.max(...delays)).toBe(300_000);
    expect(delays.at(-1)).toBe(300_000);
    expect(limiter.when('b')).toBe(5);
    limiter.forget('a');
    expect(limiter.when('a')).toBe(5);
  });

  it('applies the global token bucket (10 qps, burst 100) once the burst is spent', () => {
    let now = 0;
    const limiter = new ControllerRateLimiter<string>({}, () => now);
    for (let i = 0; i < 100; i++) expect(limiter.when(`k${i}`)).toBe(5);
    // 101st distinct key: the bucket is empty, one token comes every 100 ms
    expect(limiter.when('k100')).toBeCloseTo(100);
    expect(limiter.when('k101')).toBeCloseTo(200);
    now = 1_000; // ten tokens refilled: the debt of two is paid, eight remain
    expect(limiter.when('k102')).toBe(5);
  });
});

describe('token buckets per flow', () => {
  const byNamespace = (key: string): string => key.split('/')[1] ?? '';

  it("a requeue storm in one namespace delays no other namespace's paced step", () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers, flowOf: byNamespace });
    // A tenant rewrites an invalid intent on 1,000 of its resources: each pass clears it and steps on, paced.
    for (let i = 0; i < 1_000; i++) q.addPaced(`ApiKey/storm/k${i}`);
    // Its own bucket (burst 100, 10/s) is 900 tokens in debt: its last key waits 90 s.
    timers.advance(89_999);
    expect(q.len()).toBe(999);
    timers.advance(1);
    expect(q.len()).toBe(1_000);
    for (let i = 0; i < 1_000; i++) q.addPaced(`ApiKey/storm/again${i}`);
    // Another namespace's recovery step, paced: no wait at all (with one bucket for the controller it waited 90 s).
    q.addPaced('ApiKey/quiet/recover');
    expect(q.len()).toBe(1_001);
    // And its failures back off from their own count only.
    const limiter = new ControllerRateLimiter<string>({}, () => timers.now(), byNamespace);
    for (let i = 0; i < 1_000; i++) limiter.pace(`ApiKey/storm/k${i}`);
    expect(limiter.when('ApiKey/quiet/k0')).toBe(5);
    expect(limiter.when('ApiKey/storm/k1000')).toBeGreaterThan(90_000);
  });

  it('keeps a bucket only for flows in debt: 10,000 namespaces leave nothing once refilled', () => {
    let now = 0;
    const limiter = new ControllerRateLimiter<string>({ qps: 10, burst: 2 }, () => now, byNamespace);
    for (let i = 0; i < 10_000; i++) limiter.pace(`ApiKey/ns${i}/k`);
    expect(limiter.bucketsHeld).toBe(10_000);
    now = 100; // one token back each: every bucket is full again
    expect(limiter.bucketsHeld).toBe(0);
    // A flow that comes back starts full (burst 2), as if it had never left.
    expect(limiter.pace('ApiKey/ns1/k')).toBe(0);
    expect(limiter.pace('ApiKey/ns1/k')).toBe(0);
    expect(limiter.pace('ApiKey/ns1/k')).toBeCloseTo(100);
  });
});

describe('WorkQueue shutdown', () => {
  it('get() returns undefined after shutDown, for waiting and new callers, and adds are ignored', async () => {
    const q = new WorkQueue<string>();
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
    q.add('a');
    expect(q.len()).toBe(0);
    expect(await q.get()).toBeUndefined();
    expect(q.shuttingDown()).toBe(true);
  });

  it('shutDown cancels delayed adds', () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.addAfter('a', 10);
    q.shutDown();
    expect(timers.pendingCount).toBe(0);
  });

  it('shutDownWithDrain waits for every in-flight key and does not re-queue dirty ones', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.add('b');
    const a = (await q.get())!;
    const b = (await q.get())!;
    q.add('a'); // dirty while in flight
    let drained = false;
    const drain = q.shutDownWithDrain().then(() => (drained = true));
    await tick();
    expect(drained).toBe(false);
    q.done(a);
    await tick();
    expect(drained).toBe(false);
    q.done(b);
    await drain;
    expect(drained).toBe(true);
    expect(q.len()).toBe(0);
  });

  it('shutDownWithDrain resolves at once when nothing is in flight', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    await q.shutDownWithDrain();
    expect(q.len()).toBe(0);
  });
});

describe('WorkQueue metrics hooks', () => {
  it('reports depth, adds, latency, work duration and retries', async () => {
    const timers = new FakeTimers();
    const seen = { depth: [] as number[], adds: 0, latency: [] as number[], work: [] as number[], retries: 0 };
    const metrics: WorkQueueMetrics = {
      depth: (n) => seen.depth.push(n),
      add: () => seen.adds++,
      queueLatency: (s) => seen.latency.push(s),
      workDuration: (s) => seen.work.push(s),
      retry: () => seen.retries++,
    };
    const q = new WorkQueue<string>({ timers, metrics });
    q.add('a');
    q.add('a');
    q.add('b');
    expect(seen.adds).toBe(2);
    expect(seen.depth.at(-1)).toBe(2);
    timers.advance(250);
    const key = (await q.get())!;
    expect(seen.latency).toEqual([0.25]);
    expect(seen.depth.at(-1)).toBe(1);
    timers.advance(1_500);
    q.done(key);
    expect(seen.work).toEqual([1.5]);
    q.addRateLimited('c');
    expect(seen.retries).toBe(1);
  });
});

describe('WorkQueue metrics by key and lane', () => {
  it('tells depth which key entered or left which lane: a promotion moves it, get and shutDown take it out', async () => {
    const lanes = new Map<string, number>();
    const metrics: WorkQueueMetrics = {
      depth: (_n, key, priority, delta) => lanes.set(`${key} ${priority}`, (lanes.get(`${key} ${priority}`) ?? 0) + delta),
      add: () => undefined,
      queueLatency: () => undefined,
      workDuration: () => undefined,
      retry: () => undefined,
    };
    const q = new WorkQueue<string>({ metrics });
    q.add('a', { priority: 'low' });
    q.add('b', { priority: 'low' });
    q.add('c');
    q.add('a'); // promoted
    expect(Object.fromEntries(lanes)).toEqual({ 'a low': 0, 'a normal': 1, 'b low': 1, 'c normal': 1 });
    expect(await q.get()).toBe('c');
    expect(lanes.get('c normal')).toBe(0);
    q.shutDown();
    expect([...lanes.values()].every((n) => n === 0)).toBe(true);
  });

  it("gives the metrics a reader of the keys in flight and for how long (client-go's unfinished work)", async () => {
    const timers = new FakeTimers();
    let read: (() => Iterable<[string, number]>) | undefined;
    const metrics: WorkQueueMetrics = {
      depth: () => undefined,
      add: () => undefined,
      queueLatency: () => undefined,
      workDuration: () => undefined,
      retry: () => undefined,
      readUnfinishedWith: (reader) => {
        read = reader;
      },
    };
    const q = new WorkQueue<string>({ timers, metrics });
    q.add('a');
    q.add('b');
    const a = (await q.get())!;
    timers.advance(2_000);
    const b = (await q.get())!;
    timers.advance(500);
    expect(new Map(read?.())).toEqual(
      new Map([
        [a, 2.5],
        [b, 0.5],
      ]),
    );
    q.done(a);
    expect(new Map(read?.())).toEqual(new Map([[b, 0.5]]));
    q.done(b);
    expect([...(read?.() ?? [])]).toEqual([]);
  });
});

describe('WorkQueue priorities', () => {
  it('hands out normal keys before low ones, FIFO within each lane', async () => {
    const q = new WorkQueue<string>();
    q.add('low1', { priority: 'low' });
    q.add('n1');
    q.add('low2', { priority: 'low' });
    q.add('n2');
    q.add('low3', { priority: 'low' });
    expect(q.len()).toBe(5);
    const order: (string | undefined)[] = [];
    for (let i = 0; i < 5; i++) order.push(await q.get());
    expect(order).toEqual(['n1', 'n2', 'low1', 'low2', 'low3']);
  });

  it('a stream of normal adds cannot starve the low lane: one handout in LOW_SHARE is a low key while both wait', async () => {
    const q = new WorkQueue<string>({ timers: new FakeTimers() }); // a clock that stands still: no low key ages
    for (let i = 0; i < 3; i++) q.add(`low${i}`, { priority: 'low' });
    // A tenant writing its own resources in a loop: a normal key is always waiting.
    let n = 0;
    for (let i = 0; i < 2 * LOW_SHARE; i++) q.add(`n${n++}`);
    const order: string[] = [];
    for (let i = 0; i < 3 * LOW_SHARE; i++) {
      const key = (await q.get())!;
      order.push(key);
      q.done(key);
      q.add(`n${n++}`);
    }
    const lows = order
      .map((k, i) => [k, i] as const)
      .filter(([k]) => k.startsWith('low'))
      .map(([, i]) => i);
    expect(lows).toEqual([LOW_SHARE - 1, 2 * LOW_SHARE - 1, 3 * LOW_SHARE - 1]);
    // With no low key waiting, normal keys only, in order.
    expect(order.filter((k) => k.startsWith('n')).slice(0, 3)).toEqual(['n0', 'n1', 'n2']);
  });

  it('a normal key added while low ones wait still goes first', async () => {
    const q = new WorkQueue<string>();
    q.add('low1', { priority: 'low' });
    q.add('low2', { priority: 'low' });
    expect(await q.get()).toBe('low1');
    q.add('n');
    expect(await q.get()).toBe('n');
    expect(await q.get()).toBe('low2');
  });

  it('a normal add promotes a key waiting in the low lane, keeping its queue latency from the first add', async () => {
    const timers = new FakeTimers();
    const latency: number[] = [];
    const metrics: WorkQueueMetrics = {
      depth: () => undefined,
      add: () => undefined,
      queueLatency: (s) => latency.push(s),
      workDuration: () => undefined,
      retry: () => undefined,
    };
    const q = new WorkQueue<string>({ timers, metrics });
    q.add('a', { priority: 'low' });
    q.add('b', { priority: 'low' });
    q.add('n');
    timers.advance(100);
    q.add('b'); // promoted: behind 'n', which was in the normal lane first
    expect(q.len()).toBe(3);
    timers.advance(100);
    expect(await q.get()).toBe('n');
    expect(await q.get()).toBe('b');
    expect(await q.get()).toBe('a');
    expect(latency).toEqual([0.2, 0.2, 0.2]);
    expect(q.len()).toBe(0);
  });

  it('a low add does not demote a key waiting in the normal lane', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.add('b', { priority: 'low' });
    q.add('a', { priority: 'low' });
    q.add('b', { priority: 'low' });
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('keeps one entry per key across both lanes', async () => {
    let adds = 0;
    const metrics: WorkQueueMetrics = {
      depth: () => undefined,
      add: () => adds++,
      queueLatency: () => undefined,
      workDuration: () => undefined,
      retry: () => undefined,
    };
    const q = new WorkQueue<string>({ metrics });
    q.add('a', { priority: 'low' });
    q.add('a');
    q.add('a', { priority: 'low' });
    q.add('a');
    expect(q.len()).toBe(1);
    expect(adds).toBe(1);
    expect(await q.get()).toBe('a');
    expect(q.len()).toBe(0);
    // the entry the promotion left behind in the low lane is not handed out again
    let next: string | undefined;
    void q.get().then((key) => (next = key));
    await tick();
    expect(next).toBeUndefined();
    q.add('b', { priority: 'low' });
    await tick();
    expect(next).toBe('b');
  });

  it('a key re-added while in flight is re-queued with the highest priority it was re-added with', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.add('b');
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    q.add('a', { priority: 'low' });
    q.add('a'); // raises the in-flight re-add to normal
    q.add('a', { priority: 'low' }); // does not lower it again
    q.add('b', { priority: 'low' });
    q.add('c', { priority: 'low' });
    q.done('b'); // b goes to the low lane, behind c
    q.done('a'); // a goes to the normal lane
    expect(q.len()).toBe(3);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('c');
    expect(await q.get()).toBe('b');
  });

  it('addAfter with low priority adds to the low lane when the timer fires', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.addAfter('drift', 10, { priority: 'low' });
    q.addAfter('now', 0, { priority: 'low' });
    expect(q.len()).toBe(1);
    timers.advance(10);
    q.add('event');
    expect(q.len()).toBe(3);
    expect(await q.get()).toBe('event');
    expect(await q.get()).toBe('now');
    expect(await q.get()).toBe('drift');
  });

  it('two delayed adds of one key merge at the earlier time and the higher priority', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.addAfter('a', 10, { priority: 'low' });
    q.addAfter('a', 50); // later, but normal: the add at 10 becomes normal
    q.addAfter('b', 50);
    q.addAfter('b', 10, { priority: 'low' }); // earlier, but low: keeps normal
    q.addAfter('c', 10, { priority: 'low' });
    expect(timers.pendingCount).toBe(3);
    q.add('first', { priority: 'low' });
    timers.advance(10);
    expect(q.len()).toBe(4);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(await q.get()).toBe('first');
    expect(await q.get()).toBe('c');
    timers.advance(100);
    expect(q.len()).toBe(0);
  });

  it('a low delayed add does not demote a key waiting at normal priority, and a normal one promotes a low key', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.add('x', { priority: 'low' });
    q.add('a');
    q.add('b', { priority: 'low' });
    q.addAfter('a', 10, { priority: 'low' });
    q.addAfter('b', 10);
    timers.advance(10);
    expect(q.len()).toBe(3);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(await q.get()).toBe('x');
  });

  it('reports a depth that counts both lanes', async () => {
    const depth: number[] = [];
    const metrics: WorkQueueMetrics = {
      depth: (n) => depth.push(n),
      add: () => undefined,
      queueLatency: () => undefined,
      workDuration: () => undefined,
      retry: () => undefined,
    };
    const q = new WorkQueue<string>({ metrics });
    q.add('a', { priority: 'low' });
    q.add('b');
    q.add('c', { priority: 'low' });
    expect(depth.at(-1)).toBe(3);
    q.add('a'); // promotion: still three waiting
    expect(q.len()).toBe(3);
    expect(await q.get()).toBe('b');
    expect(depth.at(-1)).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('c');
    expect(depth.at(-1)).toBe(0);
  });

  it('shutDown clears both lanes and delayed low adds', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.add('a');
    q.add('b', { priority: 'low' });
    q.addAfter('c', 10, { priority: 'low' });
    q.shutDown();
    expect(q.len()).toBe(0);
    expect(timers.pendingCount).toBe(0);
    expect(await q.get()).toBeUndefined();
    q.add('d', { priority: 'low' });
    q.addAfter('e', 0, { priority: 'low' });
    expect(q.len()).toBe(0);
  });

  it('hands out a low key that waited LOW_MAX_WAIT_MS before normal ones, however few handouts went by', async () => {
    const timers = new FakeTimers();
    const q = new WorkQueue<string>({ timers });
    q.add('listed', { priority: 'low' }); // what a restart listed
    timers.advance(1_000);
    q.add('listed-later', { priority: 'low' });
    for (let i = 0; i < 4; i++) q.add(`n${i}`);
    expect(await q.get()).toBe('n0');
    q.done('n0');
    timers.advance(LOW_MAX_WAIT_MS - 1_001);
    expect(await q.get()).toBe('n1'); // not yet: 1 ms short
    q.done('n1');
    timers.advance(1);
    // A slow operator: two handouts in 5 s, far from LOW_SHARE; the low key whose turn it is has waited long enough.
    expect(await q.get()).toBe('listed');
    q.done('listed');
    // The next low key has waited 1 s less: normal keys again until it has waited as long.
    expect(await q.get()).toBe('n2');
    q.done('n2');
    timers.advance(1_000);
    expect(await q.get()).toBe('listed-later');
    expect(await q.get()).toBe('n3');
  });

  it('stays FIFO per lane with 10,000 keys and many promotions, a low key in every LOW_SHARE while normal ones remain', async () => {
    const q = new WorkQueue<string>({ timers: new FakeTimers() });
    const n = 10_000;
    const keys = Array.from({ length: n }, (_, i) => `k${i}`);
    for (const key of keys) q.add(key, { priority: 'low' });
    // promote two keys in three: most keys leave the low lane from its middle
    const promoted = keys.filter((_, i) => i % 3 !== 2);
    for (const key of promoted) q.add(key);
    expect(q.len()).toBe(n);
    const out: string[] = [];
    while (q.len() > 0) {
      const key = (await q.get())!;
      out.push(key);
      q.done(key);
    }
    const low = keys.filter((_, i) => i % 3 === 2);
    const isLow = new Set(low);
    expect(out.filter((k) => !isLow.has(k))).toEqual(promoted);
    expect(out.filter((k) => isLow.has(k))).toEqual(low);
    const lastNormal = out.findLastIndex((k) => !isLow.has(k));
    expect(out.slice(0, lastNormal + 1).map((k) => isLow.has(k))).toEqual(out.slice(0, lastNormal + 1).map((_, i) => i % LOW_SHARE === LOW_SHARE - 1));
  });
});

describe('WorkQueue fair turns between flows (issue 25)', () => {
  const byNamespace = (key: string): string => key.split('/')[1] ?? '';
  const takeAll = async (q: WorkQueue<string>): Promise<string[]> => {
    const out: string[] = [];
    while (q.len() > 0) {
      const key = (await q.get()) as string;
      out.push(key);
      q.done(key);
    }
    return out;
  };

  it("hands out a late namespace's key after one key of each namespace ahead, not after their whole backlogs", async () => {
    const q = new WorkQueue<string>({ flowOf: byNamespace });
    for (let i = 0; i < 1_000; i++) q.add(`ApiKey/flood/k${i}`);
    for (let i = 0; i < 3; i++) q.add(`ApiKey/busy/k${i}`);
    q.add('ApiKey/quiet/k0');
    const order = await takeAll(q);
    expect(order.slice(0, 5)).toEqual(['ApiKey/flood/k0', 'ApiKey/busy/k0', 'ApiKey/quiet/k0', 'ApiKey/flood/k1', 'ApiKey/busy/k1']);
    // Each flow stays FIFO.
    expect(order.filter((k) => k.includes('/flood/'))).toEqual(Array.from({ length: 1_000 }, (_, i) => `ApiKey/flood/k${i}`));
  });

  it('keeps the lanes: a low key of a quiet namespace waits for every normal key; turns hold within the low lane and across a promotion', async () => {
    const q = new WorkQueue<string>({ flowOf: byNamespace });
    for (let i = 0; i < 4; i++) q.add(`ApiKey/a/low${i}`, { priority: 'low' });
    q.add('ApiKey/b/low0', { priority: 'low' });
    q.add('ApiKey/a/n0');
    q.add('ApiKey/a/low3'); // promoted
    expect(await takeAll(q)).toEqual(['ApiKey/a/n0', 'ApiKey/a/low3', 'ApiKey/a/low0', 'ApiKey/b/low0', 'ApiKey/a/low1', 'ApiKey/a/low2']);
  });

  it('without flowOf, one flow: FIFO', async () => {
    const q = new WorkQueue<string>();
    for (const k of ['x/a/1', 'x/a/2', 'x/b/1']) q.add(k);
    expect(await takeAll(q)).toEqual(['x/a/1', 'x/a/2', 'x/b/1']);
  });
});
