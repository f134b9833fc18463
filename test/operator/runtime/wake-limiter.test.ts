// Wakes by an input's change are rate-limited per key (src/operator/runtime/wake-limiter.ts): a burst
// at once, then one per interval, and the last change of a storm always wakes. Through the generic
// controller too: an input rewritten in a storm (a credentials Secret rewritten every few ms) does
// not buy its keys a reconcile per write, even when they back off from a refusal.
import { afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Controller, type ControllerOptions } from '../../../src/operator/runtime/controller.ts';
import type { Watch } from '../../../src/operator/runtime/watches.ts';
import type { ReconcileResult, Request } from '../../../src/operator/runtime/workers.ts';
import { WakeLimiter } from '../../../src/operator/runtime/wake-limiter.ts';
import { manualClock } from '../../platform/manual-clock.ts';
import { FakeInformer } from './fake-informer.ts';

const list = async (): Promise<{ items: KubernetesObject[] }> => ({ items: [] });
let stops: (() => unknown)[] = [];

afterEach(async () => {
  for (const stop of stops) await stop();
  stops = [];
});

describe('the input wake limiter', () => {
  it('wakes a burst at once, then one per interval, and always the last of a storm with its latest event', async () => {
    // A clock this test moves: which writes wake depends on the limiter's time, not on this machine's speed.
    const clock = manualClock();
    const limiter = new WakeLimiter({ burst: 2, everyMs: 200 }, clock);
    stops.push(() => limiter.stop());
    const woken: string[] = [];
    for (let i = 0; i < 30; i++) {
      limiter.admit('k', () => woken.push(`k${i}`));
      await clock.advance(10);
    }
    // 300 ms of writes every 10 ms: two at once; the third (at 20 ms, 0.1 token refilled) waits
    // for the token due at 200 ms and wakes with the latest write by then (k19); the next token
    // comes at 400 ms, with the storm's last write (k29).
    expect(woken).toEqual(['k0', 'k1', 'k19']);
    await clock.advance(99);
    expect(woken).toEqual(['k0', 'k1', 'k19']);
    await clock.advance(1);
    expect(woken).toEqual(['k0', 'k1', 'k19', 'k29']);
    // Nothing after it: no timer is left, however far time moves.
    expect(clock.pending()).toBe(0);
    await clock.advance(60_000);
    expect(woken).toEqual(['k0', 'k1', 'k19', 'k29']);
    // Another key has its own bucket.
    limiter.admit('other', () => woken.push('other'));
    expect(woken.at(-1)).toBe('other');
  });

  it('keeps a bucket only for keys woken lately, and wakes nothing once stopped', async () => {
    // Its own clock: which buckets are full again depends on time, not on how fast this machine runs the loop.
    const clock = manualClock();
    const limiter = new WakeLimiter({ burst: 1, everyMs: 5 }, clock);
    for (let i = 0; i < 3_000; i++) limiter.admit(`key-${i}`, () => undefined);
    // All woken this instant: every bucket is live (empty), none can go.
    expect(limiter.size).toBe(3_000);
    await clock.advance(20);
    // Keys woken once each, long since: their buckets are full again, and dropped the first time the
    // map outgrows its bound (twice the buckets live at the last look) as new keys come.
    for (let i = 0; i < 1_200; i++) limiter.admit(`again-${i}`, () => undefined);
    expect(limiter.size).toBeLessThan(3_000);
    expect(limiter.size).toBeLessThanOrEqual(2 * 1_200);
    let late = false;
    limiter.admit('storm', () => undefined);
    limiter.admit('storm', () => {
      late = true;
    });
    expect(clock.pending()).toBe(1);
    limiter.stop();
    // Its trailing wake's timer is gone, and nothing wakes when the time comes.
    expect(clock.pending()).toBe(0);
    await clock.advance(1_000);
    expect(late).toBe(false);
  });
});

describe('a controller with an input rewritten in a storm', () => {
  it('reconciles the key that names it a few times, not once per write, even out of a refusal backoff, and after the last write', async () => {
    // The wake limiter's clock is this test's; the refusal backoff is an hour, so every pass after
    // the first is a wake by the input.
    const clock = manualClock();
    const { calls, informers } = await widgetController(
      { type: 'Backoff', minDelayMs: 3_600_000 },
      { maxBackoffMs: 3_600_000, inputWakes: { burst: 2, everyMs: 300 }, wakeClock: clock },
    );
    const [widgets, inputs] = informers as [FakeInformer, FakeInformer];
    widgets.emit('add', { kind: 'Widget', metadata: { name: 'a', namespace: 'ns', resourceVersion: '1', generation: 1, annotations: { input: 'creds' } } });
    await until(() => calls.length === 1);
    for (let t = 0; t < 20; t++) await tick();
    // 1.2 s of writes every 20 ms: 60 writes, each given the turns a reconcile needs.
    for (let i = 0; i < 60; i++) {
      inputs.emit('update', { kind: 'Input', metadata: { name: 'creds', namespace: 'ns', resourceVersion: String(10 + i) } });
      for (let t = 0; t < 20; t++) await tick();
      await clock.advance(20);
      for (let t = 0; t < 20; t++) await tick();
    }
    // Two at once (0, 20 ms), then one per 300 ms as the tokens come (300, 601, 902 ms: each
    // a millisecond rounded up), so far 5 passes for 60 writes; the last write (1,180 ms) waits
    // for the next token and wakes the key once more when it comes.
    expect(calls.length - 1).toBe(5);
    await clock.advance(300);
    await until(() => calls.length - 1 >= 6);
    expect(calls.length - 1).toBe(6);
    // Nothing more to come: no wake waits for a token, however far time moves.
    expect(clock.pending()).toBe(0);
    await clock.advance(60_000);
    for (let t = 0; t < 5; t++) await tick();
    expect(calls.length - 1).toBe(6);
  });
});

describe('a controller with an owned object rewritten in a storm', () => {
  it("reconciles its owner the burst, not once per write, and leaves the inputs' wakes of that key untouched", async () => {
    // An interval no test waits for: past the burst, nothing more comes while the test runs.
    const { calls, informers } = await widgetController({ type: 'Done' }, { inputWakes: { burst: 2, everyMs: 3_600_000 } }, [
      // Any object of the namespace may name a widget its owner (as any Secret may carry keys.neon.dev/owner).
      {
        type: 'owns',
        kind: 'Part',
        path: '/parts',
        metadataOnly: true,
        project: (o) => o,
        ownerOf: (o) => (o.metadata?.annotations?.owner !== undefined ? `Widget/ns/${o.metadata.annotations.owner}` : undefined),
      },
    ]);
    const [widgets, inputs, parts] = informers as [FakeInformer, FakeInformer, FakeInformer];
    widgets.emit('add', { kind: 'Widget', metadata: { name: 'a', namespace: 'ns', resourceVersion: '1', generation: 1, annotations: { input: 'creds' } } });
    await until(() => calls.length === 1);
    // 60 writes of an object naming the widget its owner, each given the turns a reconcile needs.
    for (let i = 0; i < 60; i++) {
      parts.emit('update', { kind: 'Part', metadata: { name: 'forged', namespace: 'ns', resourceVersion: String(10 + i), annotations: { owner: 'a' } } });
      for (let t = 0; t < 5; t++) await tick();
    }
    // The burst, then nothing until the interval: without the limiter, one pass per write.
    expect(calls.length - 1).toBe(2);
    // Its credentials change: woken, the owner storm took none of the inputs' tokens (a shared
    // limiter would hold it for the hour-long interval, longer than the test's timeout).
    inputs.emit('update', { kind: 'Input', metadata: { name: 'creds', namespace: 'ns', resourceVersion: '100' } });
    await until(() => calls.length === 4);
  });
});

/**
 * A started controller of Widgets, each naming an Input by its `input` annotation, with fake
 * informers (in the order of the watches) and every reconciled name in `calls`.
 */
async function widgetController(
  result: ReconcileResult,
  options: Pick<ControllerOptions, 'maxBackoffMs' | 'inputWakes' | 'wakeClock'>,
  more: Watch[] = [],
): Promise<{ calls: string[]; informers: FakeInformer[] }> {
  const calls: string[] = [];
  const informers: FakeInformer[] = [];
  const controller = new Controller({
    kubeConfig: new KubeConfig(),
    reconciler: {
      async reconcile(request: Request): Promise<ReconcileResult> {
        calls.push(request.name);
        return result;
      },
    },
    watches: () => [
      {
        type: 'for',
        kind: 'Widget',
        path: '/widgets',
        list,
        project: (o) => o,
        indexes: { input: (o) => (o.metadata?.annotations?.input !== undefined ? [`ns/${o.metadata.annotations.input}`] : []) },
      },
      { type: 'referenced', kind: 'Input', path: '/inputs', metadataOnly: true, project: (o) => o, index: 'input', valueOf: (o) => `ns/${o.metadata?.name}` },
      ...more,
    ],
    logger: pino({ level: 'silent' }),
    workers: 2,
    ...options,
    informerFor: (watch) => {
      const informer = new FakeInformer(watch);
      informers.push(informer);
      return informer;
    },
  });
  stops.push(() => controller.stop());
  await controller.start();
  return { calls, informers };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Waits for `f` to hold, however long that takes on this machine (the test's own timeout ends a wait that never ends). */
async function until(f: () => boolean): Promise<void> {
  while (!f()) await sleep(5);
}
