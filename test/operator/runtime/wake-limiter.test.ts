// Wakes by an input's change are rate-limited per key (src/operator/runtime/wake-limiter.ts): a burst
// at once, then one per interval, and the last change of a storm always wakes. Through the generic
// controller too: an input rewritten in a storm (a credentials Secret rewritten every few ms) does
// not buy its keys a reconcile per write, even when they back off from a refusal.
import { afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Controller, type ControllerOptions, type ReconcileResult, type Request, type Watch } from '../../../src/operator/runtime/controller.ts';
import { WakeLimiter } from '../../../src/operator/runtime/wake-limiter.ts';
import { FakeInformer } from './fake-informer.ts';

const list = async (): Promise<{ items: KubernetesObject[] }> => ({ items: [] });
let stops: (() => unknown)[] = [];

afterEach(async () => {
  for (const stop of stops) await stop();
  stops = [];
});

describe('the input wake limiter', () => {
  it('wakes a burst at once, then one per interval, and always the last of a storm with its latest event', async () => {
    const limiter = new WakeLimiter({ burst: 2, everyMs: 200 });
    stops.push(() => limiter.stop());
    const woken: string[] = [];
    const started = performance.now();
    for (let i = 0; i < 30; i++) {
      limiter.admit('k', () => woken.push(`k${i}`));
      await sleep(10);
    }
    // 300 ms of writes every 10 ms: two at once, then the ones the interval allows.
    expect(woken.slice(0, 2)).toEqual(['k0', 'k1']);
    await sleep(450);
    const elapsed = performance.now() - started;
    expect(woken.length).toBeLessThanOrEqual(2 + Math.ceil(elapsed / 200));
    // The last write was delivered (merged into a trailing wake), nothing after it.
    expect(woken.at(-1)).toBe('k29');
    const count = woken.length;
    await sleep(250);
    expect(woken).toHaveLength(count);
    // Another key has its own bucket.
    limiter.admit('other', () => woken.push('other'));
    expect(woken.at(-1)).toBe('other');
  });

  it('keeps a bucket only for keys woken lately, and wakes nothing once stopped', async () => {
    // Its own clock: which buckets are full again depends on time, not on how fast this machine runs the loop.
    let now = 1_000_000;
    const limiter = new WakeLimiter({ burst: 1, everyMs: 5 }, () => now);
    for (let i = 0; i < 3_000; i++) limiter.admit(`key-${i}`, () => undefined);
    // All woken this instant: every bucket is live (empty), none can go.
    expect(limiter.size).toBe(3_000);
    now += 20;
    // Keys woken once each, long since: their buckets are full again, and dropped the first time the
    // map outgrows its bound (twice the buckets live at the last look) as new keys come.
    for (let i = 0; i < 1_200; i++) limiter.admit(`again-${i}`, () => undefined);
    expect(limiter.size).toBeLessThan(3_000);
    expect(limiter.size).toBeLessThanOrEqual(2 * 1_200);
    let late = false;
    limiter.admit('storm', () => undefined);
    limiter.admit('storm', () => { late = true; });
    limiter.stop();
    await sleep(30);
    expect(late).toBe(false);
  });
});

describe('a controller with an input rewritten in a storm', () => {
  it('reconciles the key that names it a few times, not once per write, even out of a refusal backoff, and after the last write', async () => {
    const { calls, informers } = await widgetController({ type: 'Backoff' }, { maxBackoffMs: 60_000, inputWakes: { burst: 2, everyMs: 300 } });
    const [widgets, inputs] = informers as [FakeInformer, FakeInformer];
    widgets.emit('add', { kind: 'Widget', metadata: { name: 'a', namespace: 'ns', resourceVersion: '1', generation: 1, annotations: { input: 'creds' } } });
    await until(() => calls.length === 1);
    // 1.2 s of writes every 20 ms: 60 writes.
    const started = performance.now();
    for (let i = 0; i < 60; i++) {
      inputs.emit('update', { kind: 'Input', metadata: { name: 'creds', namespace: 'ns', resourceVersion: String(10 + i) } });
      await sleep(20);
    }
    await sleep(700);
    const elapsed = performance.now() - started;
    const woken = calls.length - 1;
    // At most the burst and one per interval (and one trailing), plus the refusal backoff's own
    // retries (1 s, then 2 s), never one per write; at least the burst.
    expect(woken).toBeGreaterThanOrEqual(2);
    expect(woken).toBeLessThanOrEqual(2 + Math.ceil(elapsed / 300) + 1 + 2);
    expect(woken).toBeLessThan(30);
  });
});

describe('a controller with an owned object rewritten in a storm', () => {
  it('reconciles its owner the burst, not once per write, and leaves the inputs\' wakes of that key untouched', async () => {
    // An interval no test waits for: past the burst, nothing more comes while the test runs.
    const { calls, informers } = await widgetController({ type: 'Done' }, { inputWakes: { burst: 2, everyMs: 3_600_000 } }, [
      // Any object of the namespace may name a widget its owner (as any Secret may carry keys.neon.dev/owner).
      { type: 'owns', kind: 'Part', path: '/parts', metadataOnly: true, project: (o) => o, ownerOf: (o) => (o.metadata?.annotations?.owner !== undefined ? `Widget/ns/${o.metadata.annotations.owner}` : undefined) },
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
    // limiter would hold it for the hour-long interval; the wait is only a loaded machine's margin).
    inputs.emit('update', { kind: 'Input', metadata: { name: 'creds', namespace: 'ns', resourceVersion: '100' } });
    await until(() => calls.length === 4, 60_000);
  });
});

/**
 * A started controller of Widgets, each naming an Input by its `input` annotation, with fake
 * informers (in the order of the watches) and every reconciled name in `calls`.
 */
async function widgetController(result: ReconcileResult, options: Pick<ControllerOptions, 'maxBackoffMs' | 'inputWakes'>, more: Watch[] = []): Promise<{ calls: string[]; informers: FakeInformer[] }> {
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
        type: 'for', kind: 'Widget', path: '/widgets', list, project: (o) => o,
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

async function until(f: () => boolean, ms = 2_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!f()) {
    if (performance.now() > deadline) throw new Error('timed out');
    await sleep(5);
  }
}
