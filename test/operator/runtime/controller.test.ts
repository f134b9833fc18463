// The generic controller (src/operator/runtime/controller.ts) with in-memory informers and a
// scripted reconciler: which events wake a key, what a reconcile's result does to it, and what
// happens to events that arrive while the key is being reconciled.
import { afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Controller } from '../../../src/operator/runtime/controller.ts';
import type { Watch } from '../../../src/operator/runtime/watches.ts';
import type { ReconcileResult, Request, Worker } from '../../../src/operator/runtime/workers.ts';
import { OwnWrites } from '../../../src/operator/runtime/own-writes.ts';
import { FakeInformer } from './fake-informer.ts';

const silent = pino({ level: 'silent' });

function widget(name: string, resourceVersion: string, extra: { generation?: number; deleting?: boolean; input?: string } = {}): KubernetesObject {
  return {
    kind: 'Widget',
    metadata: {
      name,
      namespace: 'ns',
      resourceVersion,
      generation: extra.generation ?? 1,
      ...(extra.deleting === true ? { deletionTimestamp: new Date(0) } : {}),
      ...(extra.input !== undefined ? { annotations: { input: extra.input } } : {}),
    },
  };
}

/** An object widgets refer to (by their `input` annotation), e.g. a credentials Secret. */
function input(name: string, resourceVersion: string): KubernetesObject {
  return { kind: 'Input', metadata: { name, namespace: 'ns', resourceVersion } };
}

function part(name: string, owner: string | undefined, resourceVersion: string): KubernetesObject {
  return { kind: 'Part', metadata: { name, namespace: 'ns', resourceVersion, ...(owner !== undefined ? { annotations: { owner } } : {}) } };
}

/** A reconciler whose results the test scripts; a reconcile can be held open with `gate`. */
class ScriptedReconciler {
  readonly calls: string[] = [];
  results: ReconcileResult[] = [];
  gate: Promise<void> | undefined;
  onReconcile: ((request: Request) => void) | undefined;

  async reconcile(request: Request): Promise<ReconcileResult> {
    this.calls.push(`${request.kind}/${request.namespace}/${request.name}`);
    this.onReconcile?.(request);
    if (this.gate !== undefined) await this.gate;
    return this.results.shift() ?? { type: 'Done' };
  }
}

interface Harness {
  controller: Controller;
  reconciler: ScriptedReconciler;
  widgets: FakeInformer;
  parts: FakeInformer;
  inputs: FakeInformer;
  ownWrites: OwnWrites;
  results: string[];
  informers: FakeInformer[];
  /**
   * Resolves once every key that entered the work queue has been worked: an event's wake enters
   * the queue while the event is handled, so a key an earlier event woke has been reconciled by then.
   */
  settled(): Promise<void>;
}

let running: Controller | undefined;

afterEach(async () => {
  await running?.stop();
  running = undefined;
});

async function start(
  options: {
    maxBackoffMs?: number;
    minBackoffMs?: number;
    namespaces?: string[];
    watched?: (string | undefined)[];
    retries?: string[];
    cacheStaleAfterMs?: number;
  } = {},
): Promise<Harness> {
  const reconciler = new ScriptedReconciler();
  const informers: FakeInformer[] = [];
  const ownWrites = new OwnWrites();
  const results: string[] = [];
  const watches = (namespace: string | undefined): Watch[] => {
    options.watched?.push(namespace);
    return [
      {
        type: 'for',
        kind: 'Widget',
        path: '/widgets',
        project: (o) => o,
        indexes: { input: (o) => (o.metadata?.annotations?.input !== undefined ? [`${o.metadata.namespace}/${o.metadata.annotations.input}`] : []) },
      },
      {
        type: 'owns',
        kind: 'Part',
        path: '/parts',
        project: (o) => o,
        ownerOf: (o) => (o.metadata?.annotations?.owner !== undefined ? `Widget/${o.metadata.namespace}/${o.metadata.annotations.owner}` : undefined),
      },
      {
        type: 'referenced',
        kind: 'Input',
        path: '/inputs',
        metadataOnly: true,
        project: (o) => o,
        index: 'input',
        valueOf: (o) => `${o.metadata?.namespace}/${o.metadata?.name}`,
      },
    ];
  };
  const controller = new Controller({
    kubeConfig: new KubeConfig(),
    reconciler,
    watches,
    logger: silent,
    workers: 2,
    ownWrites,
    informerFor: (watch) => {
      const informer = new FakeInformer(watch);
      informers.push(informer);
      return informer;
    },
    onReconciled: (kind, result) => results.push(`${kind} ${result}`),
    ...(options.maxBackoffMs !== undefined ? { maxBackoffMs: options.maxBackoffMs } : {}),
    ...(options.minBackoffMs !== undefined ? { minBackoffMs: options.minBackoffMs } : {}),
    ...(options.namespaces !== undefined ? { namespaces: options.namespaces } : {}),
    ...(options.cacheStaleAfterMs !== undefined ? { cacheStaleAfterMs: options.cacheStaleAfterMs } : {}),
    queueMetrics: {
      depth: () => undefined,
      add: () => void queued++,
      queueLatency: () => undefined,
      workDuration: () => void worked++,
      retry: () => options.retries?.push('retry'),
    },
  });
  let queued = 0;
  let worked = 0;
  running = controller;
  await controller.start();
  const settled = (): Promise<void> => until('every queued key worked', () => queued === worked && reconciler.calls.length === results.length, 50_000);
  return { controller, reconciler, widgets: informers[0]!, parts: informers[1]!, inputs: informers[2]!, ownWrites, results, informers, settled };
}

async function until(what: string, f: () => boolean, ms = 2_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!f()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

describe('Controller', () => {
  it('reconciles the key of a watched object, and the owner of an owned one', async () => {
    const h = await start();
    expect(h.controller.synced).toBe(true);
    h.widgets.emit('add', widget('a', '1'));
    await until('a reconciled', () => h.reconciler.calls.length === 1);
    h.parts.emit('add', part('p', 'b', '2'));
    h.parts.emit('add', part('orphan', undefined, '3'));
    await until('b reconciled', () => h.reconciler.calls.length === 2);
    await h.settled();
    expect(h.reconciler.calls).toEqual(['Widget/ns/a', 'Widget/ns/b']);
    expect(h.results).toEqual(['Widget success', 'Widget success']);
    expect(h.controller.cached('Widget').map((o) => o.metadata?.name)).toEqual(['a']);
  });

  it('reconciles a cluster-scoped object (no namespace) as kind//name, with its own writes and cache', async () => {
    const h = await start();
    const cluster = (resourceVersion: string): KubernetesObject => ({ kind: 'Widget', metadata: { name: 'c', resourceVersion, generation: 1 } });
    h.reconciler.results = [{ type: 'Done', requeueAfterMs: 10 }];
    h.widgets.emit('add', cluster('1'));
    await until('c reconciled, then again after its requeue', () => h.reconciler.calls.length === 2);
    expect(h.reconciler.calls).toEqual(['Widget//c', 'Widget//c']);
    expect(h.controller.cachedObject('Widget', '', 'c')?.metadata?.resourceVersion).toBe('1');
    h.ownWrites.record('Widget//c', '1', '2');
    h.widgets.emit('update', cluster('2'));
    await h.settled();
    expect(h.reconciler.calls).toHaveLength(2);
    h.widgets.emit('update', cluster('3'));
    await until('c woken by another writer', () => h.reconciler.calls.length === 3);
  });

  it('runs one informer per watch and namespace when given namespaces', async () => {
    const watched: (string | undefined)[] = [];
    const h = await start({ namespaces: ['x', 'y'], watched });
    expect(watched).toEqual(['x', 'y']);
    expect(h.controller.synced).toBe(true);
    expect(h.informers.map((i) => `${i.watch.kind} started ${i.started}`)).toEqual([
      'Widget started 1',
      'Part started 1',
      'Input started 1',
      'Widget started 1',
      'Part started 1',
      'Input started 1',
    ]);
  });

  it('is not woken by a version its own reconcile wrote, and is by any other', async () => {
    const h = await start();
    h.ownWrites.record('Widget/ns/a', '1', '2');
    h.ownWrites.record('Part/ns/p', undefined, '7');
    h.widgets.emit('update', widget('a', '2'));
    h.parts.emit('add', part('p', 'a', '7'));
    await h.settled();
    expect(h.reconciler.calls).toEqual([]);
    h.widgets.emit('update', widget('a', '3'));
    await until('a reconciled', () => h.reconciler.calls.length === 1);
  });

  it('judges events that arrive during a reconcile once it ends (its own writes recorded by then)', async () => {
    const h = await start();
    let release!: () => void;
    h.reconciler.gate = new Promise((resolve) => {
      release = resolve;
    });
    h.widgets.emit('add', widget('a', '1'));
    await until('a in progress', () => h.reconciler.calls.length === 1);
    // The watch delivers the reconcile's write before its response recorded the version.
    h.widgets.emit('update', widget('a', '2'));
    h.ownWrites.record('Widget/ns/a', '1', '2');
    h.reconciler.gate = undefined;
    release();
    await h.settled();
    expect(h.reconciler.calls).toEqual(['Widget/ns/a']);

    // Someone else's change during a reconcile runs the key again after it.
    h.reconciler.gate = new Promise((resolve) => {
      release = resolve;
    });
    h.widgets.emit('update', widget('a', '5'));
    await until('a in progress again', () => h.reconciler.calls.length === 2);
    h.widgets.emit('update', widget('a', '6'));
    h.reconciler.gate = undefined;
    release();
    await until('a run after the change', () => h.reconciler.calls.length === 3);
  });

  it('retries a failed reconcile (an exception or Retry) at once with the per-item backoff', async () => {
    const h = await start();
    h.reconciler.onReconcile = (): void => {
      if (h.reconciler.calls.length === 1) throw new Error('apiserver hiccup');
    };
    h.reconciler.results = [{ type: 'Retry' }];
    h.widgets.emit('add', widget('a', '1'));
    await until('three reconciles', () => h.reconciler.calls.length === 3);
    expect(h.results).toEqual(['Widget error', 'Widget requeue', 'Widget success']);
  });

  it('runs the next step of a protocol (Continue) at once, and not as a failure', async () => {
    const retries: string[] = [];
    const h = await start({ retries });
    h.reconciler.results = [{ type: 'Continue' }, { type: 'Continue' }, { type: 'Retry' }];
    h.widgets.emit('add', widget('a', '1'));
    await until('four reconciles', () => h.reconciler.calls.length === 4);
    expect(h.results).toEqual(['Widget requeue', 'Widget requeue', 'Widget requeue', 'Widget success']);
    // Only the Retry went through the failure limiter.
    expect(retries).toEqual(['retry']);
  });

  it('requeues a Done with requeueAfterMs after about that long', async () => {
    const h = await start();
    h.reconciler.results = [{ type: 'Done', requeueAfterMs: 100 }];
    const started = performance.now();
    h.widgets.emit('add', widget('a', '1'));
    await until('requeued', () => h.reconciler.calls.length === 2);
    expect(performance.now() - started).toBeGreaterThanOrEqual(85);
  });

  it('holds a key that backs off: only a spec change or a deletion wakes it before its delay', async () => {
    // A delay of an hour: the retry of the backoff itself never comes within the test, however slow the machine.
    const h = await start({ maxBackoffMs: 3_600_000, minBackoffMs: 3_600_000 });
    h.reconciler.results = [{ type: 'Backoff' }];
    h.widgets.emit('add', widget('a', '1', { generation: 1 }));
    await until('a refused', () => h.results.length === 1);
    expect(h.results).toEqual(['Widget requeue']);
    // Status writes by others, its owned objects: held.
    h.widgets.emit('update', widget('a', '2', { generation: 1 }));
    h.parts.emit('update', part('p', 'a', '3'));
    await h.settled();
    expect(h.reconciler.calls).toEqual(['Widget/ns/a']);
    // A new generation (spec change) wakes it at once.
    h.reconciler.results = [{ type: 'Backoff' }];
    h.widgets.emit('update', widget('a', '4', { generation: 2 }));
    await until('woken by the spec change', () => h.reconciler.calls.length === 2);
    await until('refused again', () => h.results.length === 2);
    // And a deletion (deletionTimestamp set) too.
    h.widgets.emit('update', widget('a', '5', { generation: 2, deleting: true }));
    await until('woken by the deletion', () => h.reconciler.calls.length === 3);
  });

  it('wakes exactly the keys that refer to a changed input, even out of a refusal backoff', async () => {
    // A delay of an hour: no retry of the backoff itself comes within the test, however slow the machine.
    const h = await start({ maxBackoffMs: 3_600_000, minBackoffMs: 3_600_000 });
    h.reconciler.results = [{ type: 'Backoff' }, { type: 'Backoff' }, { type: 'Backoff' }];
    h.widgets.emit('add', widget('a', '1', { input: 'creds' }));
    h.widgets.emit('add', widget('b', '1', { input: 'creds' }));
    h.widgets.emit('add', widget('c', '1', { input: 'other' }));
    await until('all three refused', () => h.results.length === 3);
    // An input nobody names, and an owned object: nothing wakes (held).
    h.inputs.emit('update', input('unrelated', '5'));
    h.parts.emit('update', part('p', 'a', '6'));
    await h.settled();
    expect(h.reconciler.calls).toHaveLength(3);
    // The input a and b name changes: both wake at once, c does not.
    h.inputs.emit('update', input('creds', '7'));
    await until('a and b woken', () => h.reconciler.calls.length === 5);
    await h.settled();
    expect(h.reconciler.calls.slice(3).sort()).toEqual(['Widget/ns/a', 'Widget/ns/b']);
    // b now names another input: the index follows (the old one no longer wakes it).
    h.widgets.emit('update', widget('b', '8', { input: 'other', generation: 2 }));
    await until('b reconciled for its spec change', () => h.reconciler.calls.length === 6);
    await until('settled', () => h.results.length === 6);
    h.inputs.emit('add', input('creds', '9'));
    await until('a woken', () => h.reconciler.calls.length === 7);
    await h.settled();
    expect(h.reconciler.calls[6]).toBe('Widget/ns/a');
    // A deleted input wakes too (the credentials are gone); a deleted widget leaves the index.
    h.widgets.emit('delete', widget('a', '10', { input: 'creds' }));
    await until('a reconciled for its deletion', () => h.reconciler.calls.length === 8);
    await until('settled again', () => h.results.length === 8);
    h.inputs.emit('delete', input('creds', '11'));
    h.inputs.emit('delete', input('other', '12'));
    await until('b and c woken by the deleted input', () => h.reconciler.calls.length === 10);
    expect(h.reconciler.calls.slice(8).sort()).toEqual(['Widget/ns/b', 'Widget/ns/c']);
  });

  it('one watch for owned objects that are also inputs: an event wakes the owner and every key naming the object', async () => {
    const reconciler = new ScriptedReconciler();
    const informers: FakeInformer[] = [];
    const ownWrites = new OwnWrites();
    let queued = 0;
    let worked = 0;
    let ended = 0;
    // Every key that entered the work queue was worked, and every reconcile started has ended.
    const settled = (): Promise<void> => until('every queued key worked', () => queued === worked && reconciler.calls.length === ended, 50_000);
    const controller = new Controller({
      kubeConfig: new KubeConfig(),
      reconciler,
      onReconciled: () => void ended++,
      queueMetrics: {
        depth: () => undefined,
        add: () => void queued++,
        queueLatency: () => undefined,
        workDuration: () => void worked++,
        retry: () => undefined,
      },
      watches: () => [
        {
          type: 'for',
          kind: 'Widget',
          path: '/widgets',
          project: (o) => o,
          indexes: { input: (o) => (o.metadata?.annotations?.input !== undefined ? [`${o.metadata.namespace}/${o.metadata.annotations.input}`] : []) },
        },
        {
          type: 'owns',
          kind: 'Part',
          path: '/parts',
          metadataOnly: true,
          project: (o) => o,
          ownerOf: (o) => (o.metadata?.annotations?.owner !== undefined ? `Widget/${o.metadata.namespace}/${o.metadata.annotations.owner}` : undefined),
          referencedBy: { index: 'input', valueOf: (o) => `${o.metadata?.namespace}/${o.metadata?.name}` },
        },
      ],
      logger: silent,
      workers: 2,
      ownWrites,
      informerFor: (watch) => {
        const informer = new FakeInformer(watch);
        informers.push(informer);
        return informer;
      },
    });
    running = controller;
    await controller.start();
    const [widgets, parts] = informers as [FakeInformer, FakeInformer];
    widgets.emit('add', widget('a', '1', { input: 'p' }));
    widgets.emit('add', widget('b', '1'));
    await until('a and b reconciled', () => reconciler.calls.length === 2);
    // p belongs to b and is a's input: both wake.
    parts.emit('update', part('p', 'b', '5'));
    await until('a and b woken', () => reconciler.calls.length === 4);
    expect(reconciler.calls.slice(2).sort()).toEqual(['Widget/ns/a', 'Widget/ns/b']);
    // b's own write of p wakes only a (for which it is an input, never an own write).
    ownWrites.record('Part/ns/p', '5', '6');
    parts.emit('update', part('p', 'b', '6'));
    await until('a woken', () => reconciler.calls.length === 5);
    await settled();
    expect(reconciler.calls[4]).toBe('Widget/ns/a');
    expect(reconciler.calls).toHaveLength(5);
    // An object nobody owns nor names: nothing.
    parts.emit('add', part('q', undefined, '7'));
    await settled();
    expect(reconciler.calls).toHaveLength(5);
  });

  it('never takes an input for an own write of the key', async () => {
    const h = await start();
    h.widgets.emit('add', widget('a', '1', { input: 'creds' }));
    await until('a reconciled', () => h.reconciler.calls.length === 1);
    // This process wrote version 2 of the input (e.g. another key's Secret used as a's credentials).
    h.ownWrites.record('Input/ns/creds', '1', '2');
    h.inputs.emit('update', input('creds', '2'));
    await until('a woken by its input', () => h.reconciler.calls.length === 2);
  });

  it('a quiet write of ours to an input (a finalizer on a credentials Secret) wakes no key naming it; the next change by anyone else does', async () => {
    const h = await start();
    h.widgets.emit('add', widget('a', '1', { input: 'creds' }));
    await until('a reconciled', () => h.reconciler.calls.length === 1);
    h.ownWrites.recordQuiet('Input/ns/creds', '1', '2');
    h.inputs.emit('update', input('creds', '2'));
    await h.settled();
    expect(h.reconciler.calls).toHaveLength(1);
    h.inputs.emit('update', input('creds', '3'));
    await until('a woken by a change of its input', () => h.reconciler.calls.length === 2);
  });

  it('waits after a refusal at least what it asked for, and at most maxBackoffMs otherwise', async () => {
    const h = await start({ maxBackoffMs: 50 });
    h.reconciler.results = [{ type: 'Backoff' }, { type: 'Backoff', minDelayMs: 120 }, { type: 'Done' }];
    const times: number[] = [];
    h.reconciler.onReconcile = (): void => {
      times.push(performance.now());
    };
    h.widgets.emit('add', widget('a', '1'));
    await until('three reconciles', () => h.reconciler.calls.length === 3, 3_000);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(40);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(110);
  });

  it('names the caches whose watch has failed longer than the bound, by kind and namespace, and says which are stale', async () => {
    const h = await start({ namespaces: ['a', 'b'], cacheStaleAfterMs: 5_000 });
    const [, , , widgetsB, partsB] = h.informers;
    expect(h.controller.staleCaches()).toEqual([]);
    partsB!.failing = { since: Date.now() - 10_000, error: 'HTTP 403' };
    widgetsB!.failing = { since: Date.now() - 1_000, error: 'HTTP 403' };
    const stale = h.controller.staleCaches();
    expect(stale.map((c) => [c.kind, c.namespace, c.error])).toEqual([['Part', 'b', 'HTTP 403']]);
    expect(stale[0]?.failingForMs).toBeGreaterThanOrEqual(10_000);
    expect(h.controller.cacheStale('Part', 'b')).toBe(true);
    expect(h.controller.cacheStale('Part', 'a')).toBe(false);
    expect(h.controller.cacheStale('Widget', 'b')).toBe(false);
    // Synced all along: a stale cache is not an unsynced one.
    expect(h.controller.synced).toBe(true);
    partsB!.failing = undefined;
    expect(h.controller.staleCaches()).toEqual([]);
    expect(h.controller.cacheStale('Part', 'b')).toBe(false);
  });

  it('a cache of every namespace that is stale is stale for each namespace', async () => {
    const h = await start({ cacheStaleAfterMs: 5_000 });
    h.parts.failing = { since: Date.now() - 6_000, error: 'HTTP 429' };
    expect(h.controller.staleCaches().map((c) => [c.kind, c.namespace])).toEqual([['Part', undefined]]);
    expect(h.controller.cacheStale('Part', 'anywhere')).toBe(true);
  });

  it('looks objects up by an index value, following updates and deletes', async () => {
    const h = await start();
    h.widgets.emit('add', widget('a', '1', { input: 'creds' }));
    h.widgets.emit('add', widget('b', '1', { input: 'creds' }));
    expect([...h.controller.indexed('input', 'ns/creds')].sort()).toEqual(['Widget/ns/a', 'Widget/ns/b']);
    h.widgets.emit('update', widget('a', '2', { input: 'other' }));
    h.widgets.emit('delete', widget('b', '1', { input: 'creds' }));
    expect(h.controller.indexed('input', 'ns/creds')).toEqual([]);
    expect(h.controller.indexed('input', 'ns/other')).toEqual(['Widget/ns/a']);
    expect(h.controller.indexed('nope', 'x')).toEqual([]);
  });

  it('restarts an informer whose watch failed', async () => {
    const h = await start();
    h.widgets.fail(new Error('watch closed'));
    await until('restarted', () => h.widgets.started === 2, 3_000);
  });

  it('is not synced before start(), and hands out no work after stop()', async () => {
    const reconciler = new ScriptedReconciler();
    let informer: FakeInformer | undefined;
    let queued = 0;
    const controller = new Controller({
      kubeConfig: new KubeConfig(),
      reconciler,
      watches: () => [{ type: 'for', kind: 'Widget', path: '/widgets', project: (o) => o }],
      logger: silent,
      workers: 1,
      informerFor: (watch) => (informer = new FakeInformer(watch)),
      queueMetrics: { depth: () => undefined, add: () => void queued++, queueLatency: () => undefined, workDuration: () => undefined, retry: () => undefined },
    });
    expect(controller.synced).toBe(false);
    await controller.start();
    // Running, an event's key enters the work queue while the event is delivered, and is worked.
    informer?.emit('add', widget('a', '1'));
    expect(queued).toBe(1);
    await until('a reconciled', () => reconciler.calls.length === 1);
    // stop() has awaited every worker: an event now enters no queue, and nothing is left to work it
    // (one turn of the event loop, past every promise a worker could still be waiting on).
    await controller.stop();
    informer?.emit('add', widget('b', '1'));
    expect(queued).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(reconciler.calls).toEqual(['Widget/ns/a']);
  });

  it('gives the worker back for a released wait: the next key runs meanwhile, the released key stays in flight until its reconcile ends, stop() waits for it', async () => {
    let open!: () => void;
    const slow = new Promise<void>((resolve) => {
      open = resolve;
    });
    const calls: string[] = [];
    const ended: string[] = [];
    let informer: FakeInformer | undefined;
    const controller = new Controller({
      kubeConfig: new KubeConfig(),
      reconciler: {
        async reconcile(request: Request, _logger: unknown, worker?: Worker): Promise<ReconcileResult> {
          calls.push(request.name);
          if (request.name === 'a' && calls.filter((c) => c === 'a').length === 1) await worker?.release(slow);
          ended.push(request.name);
          return { type: 'Done' };
        },
      },
      watches: () => [{ type: 'for', kind: 'Widget', path: '/widgets', project: (o) => o }],
      logger: silent,
      workers: 1,
      informerFor: (watch) => (informer = new FakeInformer(watch)),
    });
    running = controller;
    await controller.start();
    informer?.emit('add', widget('a', '1'));
    await until('a waiting, its worker given back', () => calls.length === 1);
    informer?.emit('add', widget('b', '1'));
    await until('b reconciled by the only worker while a waits', () => ended.includes('b'));
    // An event about a while it waits is judged once its reconcile ends: never two reconciles of a at
    // once. Then c: the only worker, free, takes c once anything queued before it is worked, so a
    // second reconcile of a would have started by the time c's has.
    informer?.emit('update', widget('a', '2'));
    informer?.emit('add', widget('c', '1'));
    await until('c reconciled by the only worker', () => ended.includes('c'));
    expect(calls).toEqual(['a', 'b', 'c']);
    open();
    await until('a ended, then reconciled again for the event', () => ended.length === 4);
    expect(calls).toEqual(['a', 'b', 'c', 'a']);
    expect(ended).toEqual(['b', 'c', 'a', 'a']);
  });

  it('stop() waits for a reconcile that gave its worker back', async () => {
    let open!: () => void;
    const slow = new Promise<void>((resolve) => {
      open = resolve;
    });
    let released = false;
    let informer: FakeInformer | undefined;
    const controller = new Controller({
      kubeConfig: new KubeConfig(),
      reconciler: {
        async reconcile(_request: Request, _logger: unknown, worker?: Worker): Promise<ReconcileResult> {
          released = true;
          await worker?.release(slow);
          return { type: 'Done' };
        },
      },
      watches: () => [{ type: 'for', kind: 'Widget', path: '/widgets', project: (o) => o }],
      logger: silent,
      workers: 1,
      informerFor: (watch) => (informer = new FakeInformer(watch)),
    });
    await controller.start();
    informer?.emit('add', widget('a', '1'));
    await until('a waiting', () => released);
    let stopped = false;
    const stopping = controller.stop().then(() => {
      stopped = true;
    });
    // stop() waits on promises only (the informers, the queue's drain, the workers), never on a
    // timer: one turn of the event loop is past every step of a stop() that did not wait for a.
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    open();
    await stopping;
    expect(stopped).toBe(true);
  });

  it("reports each result as controller-runtime's reconcileHandler counts it, and the workers holding a key (not a released one)", async () => {
    const outcomes: string[] = [];
    let busy = 0;
    let mostBusy = 0;
    let kinds: readonly string[] = [];
    let open!: () => void;
    const slow = new Promise<void>((resolve) => {
      open = resolve;
    });
    const script: Record<string, ReconcileResult[]> = {
      done: [{ type: 'Done' }],
      later: [{ type: 'Done', requeueAfterMs: 60_000 }],
      retry: [{ type: 'Retry' }],
      next: [{ type: 'Continue' }],
      refused: [{ type: 'Backoff', minDelayMs: 60_000 }],
    };
    let thrown = false;
    let waiting = false;
    let informer: FakeInformer | undefined;
    const controller = new Controller({
      kubeConfig: new KubeConfig(),
      reconciler: {
        async reconcile(request: Request, _logger: unknown, worker?: Worker): Promise<ReconcileResult> {
          if (request.name === 'thrown' && !thrown) {
            thrown = true;
            throw new Error('a bug');
          }
          if (request.name === 'released') {
            waiting = true;
            await worker?.release(slow);
          }
          return script[request.name]?.shift() ?? { type: 'Done' };
        },
      },
      watches: () => [{ type: 'for', kind: 'Widget', path: '/widgets', project: (o) => o }],
      logger: silent,
      workers: 1,
      informerFor: (watch) => (informer = new FakeInformer(watch)),
      metrics: {
        started: (started) => {
          kinds = started;
        },
        reconciled: (kind, outcome) => outcomes.push(`${kind} ${outcome}`),
        workers: (_kind, delta) => {
          busy += delta;
          mostBusy = Math.max(mostBusy, busy);
        },
      },
    });
    running = controller;
    await controller.start();
    expect(kinds).toEqual(['Widget']);
    informer?.emit('add', widget('released', '1'));
    await until('the released reconcile waiting, its worker given back', () => waiting && busy === 0);
    for (const name of ['done', 'later', 'retry', 'next', 'refused', 'thrown']) informer?.emit('add', widget(name, '1'));
    // done, later, retry twice, next twice, refused, thrown twice; the released one still waits.
    await until('every other key reconciled', () => outcomes.length === 9);
    expect(busy).toBe(0);
    open();
    await until('the released one ended', () => outcomes.length === 10);
    expect(outcomes.sort()).toEqual([
      'Widget error',
      'Widget requeue',
      'Widget requeue',
      'Widget requeue',
      'Widget requeue_after',
      'Widget success',
      'Widget success',
      'Widget success',
      'Widget success',
      'Widget success',
    ]);
    expect([busy, mostBusy]).toEqual([0, 1]);
  });
});
