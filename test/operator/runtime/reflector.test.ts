// The informer's LIST-and-WATCH loop (reflector.ts) against a scripted watch: a FAKE, named so,
// because the faults it plays (a refusal at a given attempt, a 410 at a given moment, a watch that
// closes after a given time) cannot be produced on demand by a real apiserver in a unit test. The
// integration suite test/operator/watch-refused.test.ts plays the same story on a real one.
import { describe, expect, it } from '@jest/globals';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { Reflector, type ReflectorOptions, type WatchRestart } from '../../../src/operator/runtime/reflector.ts';
import type { WatchSource } from '../../../src/operator/runtime/watch-stream.ts';

type Step =
  | { refuse: number }
  /** Opens; sends these events; closes cleanly after closeAfterMs (never when undefined). */
  | { events?: { type: string; object: unknown }[]; closeAfterMs?: number };

interface Call {
  at: number;
  params: Record<string, unknown>;
}

class FakeScriptedWatch implements WatchSource {
  requestTimeoutMs = 30_000;
  readonly calls: Call[] = [];
  readonly #steps: Step[];

  constructor(steps: Step[]) {
    this.#steps = steps;
  }

  async watch(
    _path: string,
    params: Record<string, unknown>,
    callback: (phase: string, obj: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    this.calls.push({ at: performance.now(), params });
    const controller = new AbortController();
    const step = this.#steps.shift() ?? { refuse: 403 };
    if ('refuse' in step) {
      done(Object.assign(new Error('Forbidden'), { statusCode: step.refuse }));
      return controller;
    }
    let closed = false;
    const close = (err: unknown): void => {
      if (closed) return;
      closed = true;
      done(err);
    };
    controller.signal.addEventListener('abort', () => close(null));
    setTimeout(() => {
      for (const event of step.events ?? []) if (!closed) callback(event.type, event.object);
      if (step.closeAfterMs !== undefined) setTimeout(() => close(null), step.closeAfterMs);
    }, 1);
    return controller;
  }
}

const secret = (name: string, rv: string): KubernetesObject => ({ metadata: { name, namespace: 'team-a', resourceVersion: rv, uid: `uid-${name}` } });

function lister(lists: KubernetesObject[][]): { list: () => Promise<KubernetesListObject<KubernetesObject>>; count: () => number } {
  let count = 0;
  return {
    list: async () => {
      const items = lists[Math.min(count, lists.length - 1)] ?? [];
      count++;
      return { metadata: { resourceVersion: String(100 * count) }, items };
    },
    count: () => count,
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, test: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(5);
  }
}

function reflector(
  watch: FakeScriptedWatch,
  list: () => Promise<KubernetesListObject<KubernetesObject>>,
  options: ReflectorOptions = {},
): { r: Reflector<KubernetesObject>; restarts: WatchRestart[]; events: string[] } {
  const restarts: WatchRestart[] = [];
  const events: string[] = [];
  const r = new Reflector<KubernetesObject>('/api/v1/namespaces/team-a/secrets', watch, list, undefined, {
    backoff: { initialMs: 20, maxMs: 160, jitter: 0 },
    healthyWatchMs: 200,
    ...options,
    onRestart: (restart) => restarts.push(restart),
  });
  for (const verb of ['add', 'update', 'delete'] as const) r.on(verb, (obj) => events.push(`${verb} ${obj.metadata?.name}@${obj.metadata?.resourceVersion}`));
  return { r, restarts, events };
}

describe('Reflector', () => {
  it("asks every watch for bookmarks and a server-side timeout of 1 to 2 times the minimum, from the LIST's version; drops a silent one after inactivityMs", async () => {
    const watch = new FakeScriptedWatch([{}]);
    const { list } = lister([[secret('a', '7')]]);
    const { r, events } = reflector(watch, list, { minWatchTimeoutSeconds: 300, inactivityMs: 90_000 });
    await r.start();
    await until('watching', () => watch.calls.length === 1);
    expect(watch.calls[0]?.params).toEqual(expect.objectContaining({ resourceVersion: '100', allowWatchBookmarks: true }));
    expect(watch.calls[0]?.params.timeoutSeconds).toBeGreaterThanOrEqual(300);
    expect(watch.calls[0]?.params.timeoutSeconds).toBeLessThanOrEqual(600);
    expect(watch.requestTimeoutMs).toBe(90_000);
    expect(events).toEqual(['add a@7']);
    expect(r.hasSynced()).toBe(true);
    await r.stop();
  });

  it('backs a refused watch off exponentially to the cap, resumes from its version (no LIST), and the backoff is not reset by the attempts', async () => {
    const watch = new FakeScriptedWatch(Array.from({ length: 7 }, () => ({ refuse: 403 })));
    const lists = lister([[secret('a', '7')]]);
    // What happened, in order: each watch call, each pause asked for, each pause's end. How late a
    // loaded machine fires the timers is its business; that the reflector waits exactly the pause
    // it asked for, and only that, between two attempts is the reflector's.
    const story: string[] = [];
    const { r, restarts } = reflector(watch, lists.list, {
      pauseTimer: (done, ms) => {
        story.push(`pause ${ms}`);
        const timer = setTimeout(() => {
          story.push('paused');
          done();
        }, ms);
        return () => clearTimeout(timer);
      },
    });
    const watchOf = watch.watch.bind(watch);
    watch.watch = (...args) => {
      story.push('watch');
      return watchOf(...args);
    };
    await r.start();
    await until('seven refusals and an open watch', () => watch.calls.length === 8, 50_000);
    await r.stop();
    const gaps = watch.calls.slice(1).map((c, i) => c.at - (watch.calls[i]?.at ?? 0));
    const expected = [20, 40, 80, 160, 160, 160, 160];
    expect(story.slice(0, 3 * expected.length + 1)).toEqual([...expected.flatMap((ms) => ['watch', `pause ${ms}`, 'paused']), 'watch']);
    // Real timers: no attempt came before its pause was over.
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual((expected[i] ?? 0) - 2));
    expect(lists.count()).toBe(1);
    expect(watch.calls.every((c) => c.params.resourceVersion === '100')).toBe(true);
    expect(restarts.slice(0, 7).map((x) => [x.reason, x.error, x.delayMs])).toEqual(expected.map((d) => ['failed', 'HTTP 403', d]));
  });

  it('knows since when its watch fails, and is current again at the first event or bookmark (which moves its version)', async () => {
    let now = 1_000_000;
    const watch = new FakeScriptedWatch([
      { refuse: 403 },
      { refuse: 503 },
      { events: [{ type: 'BOOKMARK', object: { metadata: { resourceVersion: '555' } } }] },
    ]);
    const { r } = reflector(watch, lister([[]]).list, { now: () => now });
    await r.start();
    expect(r.failingSince()).toBeUndefined();
    await until('first refusal', () => watch.calls.length >= 1);
    await until('failing', () => r.failingSince() !== undefined);
    const since = r.failingSince();
    expect(since).toBe(1_000_000);
    now += 5_000;
    await until('second refusal', () => watch.calls.length >= 2);
    await sleep(5);
    expect(r.failingSince()).toBe(since);
    expect(r.lastError()).toBe('HTTP 503');
    await until('bookmark', () => r.latestResourceVersion() === '555');
    expect(r.failingSince()).toBeUndefined();
    expect(r.lastError()).toBeUndefined();
    await r.stop();
  });

  it('a watch open a second without an error is current again, even when nothing happens, and says so once', async () => {
    const watch = new FakeScriptedWatch([{ refuse: 403 }, {}]);
    const recovered: number[] = [];
    const { r } = reflector(watch, lister([[]]).list, { onRecovered: (ms) => recovered.push(ms) });
    await r.start();
    await until('failing', () => r.failingSince() !== undefined);
    await until('open', () => watch.calls.length === 2);
    expect(r.failingSince()).toBeDefined();
    // Told without anyone asking (the controller wakes a stale namespace's keys on it).
    await until('recovered', () => recovered.length === 1, 2_000);
    expect(recovered[0]).toBeGreaterThanOrEqual(1_000);
    expect(r.failingSince()).toBeUndefined();
    await sleep(50);
    expect(recovered).toHaveLength(1);
    await r.stop();
  });

  it('a watch that cannot resume (410) relists at once, stays synced meanwhile, and reports what was deleted', async () => {
    const watch = new FakeScriptedWatch([
      {
        events: [
          { type: 'BOOKMARK', object: { metadata: { resourceVersion: '11' } } },
          { type: 'ERROR', object: { kind: 'Status', code: 410, message: 'too old resource version' } },
        ],
        closeAfterMs: 0,
      },
      {},
    ]);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let lists = 0;
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      lists++;
      if (lists === 1) return { metadata: { resourceVersion: '10' }, items: [secret('a', '1'), secret('b', '2')] };
      await gate;
      return { metadata: { resourceVersion: '20' }, items: [secret('a', '3')] };
    };
    const { r, restarts, events } = reflector(watch, list);
    await r.start();
    await until('relisting', () => lists === 2);
    expect(r.hasSynced()).toBe(true);
    expect(r.latestResourceVersion()).toBe('11');
    release();
    await until('second watch', () => watch.calls.length === 2);
    expect(watch.calls[1]?.params.resourceVersion).toBe('20');
    expect(events).toEqual(['add a@1', 'add b@2', 'delete b@2', 'update a@3']);
    expect(r.list().map((o) => o.metadata?.name)).toEqual(['a']);
    expect(restarts[0]).toEqual(expect.objectContaining({ reason: 'expired', delayMs: 0 }));
    await r.stop();
  });

  it('a 410 right after a LIST backs off before the next LIST: no loop of LISTs', async () => {
    const expired = { events: [{ type: 'ERROR', object: { code: 410 } }], closeAfterMs: 0 };
    const watch = new FakeScriptedWatch([expired, expired, expired, {}]);
    const lists = lister([[]]);
    // A clock that stands still: each watch was open 0 ms, however slow the machine (on a loaded
    // one the real clock once counted a watch closed at once as healthy, which resets the backoff).
    const { r, restarts } = reflector(watch, lists.list, { now: () => 0 });
    await r.start();
    await until('fourth watch', () => watch.calls.length === 4);
    await r.stop();
    expect(lists.count()).toBe(4);
    expect(restarts.slice(0, 3).map((x) => x.delayMs)).toEqual([20, 40, 80]);
  });

  it('a watch that ran a while resets the backoff: the next failure waits the first pause again', async () => {
    const watch = new FakeScriptedWatch([
      { refuse: 500 },
      { refuse: 500 },
      { refuse: 500 },
      { events: [{ type: 'BOOKMARK', object: { metadata: { resourceVersion: '101' } } }], closeAfterMs: 250 },
      { refuse: 500 },
      {},
    ]);
    const { r, restarts } = reflector(watch, lister([[]]).list);
    await r.start();
    await until('sixth watch', () => watch.calls.length === 6, 5_000);
    await r.stop();
    expect(restarts.map((x) => [x.reason, x.delayMs])).toEqual([
      ['failed', 20],
      ['failed', 40],
      ['failed', 80],
      ['ended', 0],
      ['failed', 20],
    ]);
  });

  it('a watch the apiserver closes after events, however soon, is resumed at once from its version: not backed off', async () => {
    // The apiserver's watch cache closes a watcher that falls behind a burst; client-go resumes it at once.
    const burst = (rv: number): Step => ({ events: [{ type: 'ADDED', object: secret(`k${rv}`, String(rv)) }], closeAfterMs: 5 });
    const watch = new FakeScriptedWatch([burst(101), burst(102), burst(103), burst(104), { closeAfterMs: 0 }, {}]);
    const { r, restarts, events } = reflector(watch, lister([[]]).list);
    await r.start();
    await until('sixth watch', () => watch.calls.length === 6);
    await r.stop();
    expect(restarts.map((x) => [x.reason, x.delayMs])).toEqual([
      ['ended', 0],
      ['ended', 0],
      ['ended', 0],
      ['ended', 0],
      ['failed', 20],
    ]);
    expect(watch.calls.map((c) => c.params.resourceVersion)).toEqual(['100', '101', '102', '103', '104', '104']);
    expect(events).toEqual(['add k101@101', 'add k102@102', 'add k103@103', 'add k104@104']);
  });

  it('a watch that stayed open, closed without an event and was not open long enough to be healthy, waits the backoff', async () => {
    const watch = new FakeScriptedWatch([{ closeAfterMs: 1_100 }, {}]);
    const { r, restarts } = reflector(watch, lister([[]]).list, { healthyWatchMs: 5_000 });
    await r.start();
    await until('second watch', () => watch.calls.length === 2, 5_000);
    await r.stop();
    expect(restarts.map((x) => [x.reason, x.delayMs])).toEqual([['ended', 20]]);
  });

  it('a watch that closes at once without an event is a failure; a failed LIST is retried with the same backoff', async () => {
    const watch = new FakeScriptedWatch([{ closeAfterMs: 0 }, {}]);
    let lists = 0;
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      lists++;
      if (lists <= 2) throw Object.assign(new Error('Forbidden'), { statusCode: 403 });
      return { metadata: { resourceVersion: '5' }, items: [] };
    };
    const { r, restarts } = reflector(watch, list);
    await r.start();
    expect(r.hasSynced()).toBe(false);
    expect(r.failingSince()).toBeDefined();
    await until('second watch', () => watch.calls.length === 2);
    await r.stop();
    expect(restarts.map((x) => [x.reason, x.error?.replace(/\d+ ms/, 'N ms'), x.delayMs])).toEqual([
      ['failed', 'list: HTTP 403', 20],
      ['failed', 'list: HTTP 403', 40],
      ['failed', 'watch closed after N ms without an event', 80],
    ]);
  });

  it('start() after stop() runs one loop, not two', async () => {
    const watch = new FakeScriptedWatch(Array.from({ length: 100 }, () => ({ refuse: 403 })));
    const { r } = reflector(watch, lister([[]]).list, { backoff: { initialMs: 50, maxMs: 50, jitter: 0 } });
    await r.start();
    await until('refused', () => watch.calls.length === 1);
    await r.stop();
    await r.start();
    const from = watch.calls.length;
    await sleep(260);
    await r.stop();
    // One loop: a request per 50 ms pause (about 5); two loops would send about 10.
    expect(watch.calls.length - from).toBeLessThanOrEqual(6);
    expect(watch.calls.length - from).toBeGreaterThanOrEqual(2);
  });

  it('stop() ends the loop: no request after it, even from a pause', async () => {
    const watch = new FakeScriptedWatch([{ refuse: 403 }]);
    const { r } = reflector(watch, lister([[]]).list, { backoff: { initialMs: 50, maxMs: 50, jitter: 0 } });
    await r.start();
    await until('refused', () => watch.calls.length === 1);
    await r.stop();
    await sleep(120);
    expect(watch.calls.length).toBe(1);
  });
});
