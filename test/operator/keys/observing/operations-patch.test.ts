// An operations change at rest (src/operator/keys/observing/operations-patch.ts): the JSON patch built from
// the cache's projection (pure), and the reconciler that sends it instead of a full pass, against
// the fake apiserver of fakes.ts (which applies a JSON patch in order, all or nothing, 422 on a
// failed test). What it writes is compared with what a full pass writes for a twin resource of the
// same project that is never at rest.
import { describe, expect, it } from '@jest/globals';
import { ApiException, type KubernetesObject } from '@kubernetes/client-node';
import { cachedConditionsOf, trimKeyResource } from '../../../../src/operator/keys/observing/cache-projection.ts';
import { DriftCache } from '../../../../src/operator/keys/observing/drift.ts';
import { operationsPatch } from '../../../../src/operator/keys/observing/operations-patch.ts';
import type { OperationsSnapshot } from '../../../../src/operator/keys/observing/operations-poller.ts';
import type { ReconcileRecord } from '../../../../src/operator/keys/reconcile-context.ts';
import type { KeyResource } from '../../../../src/operator/resources/schema.ts';
import { NAMESPACE, keyResource, rig } from '../fakes.ts';

const T0 = Date.parse('2026-11-23T10:00:00Z');
const running: OperationsSnapshot = {
  operations: [{ id: 'op-2', action: 'create_branch', status: 'running', failuresCount: 0, updatedAt: '2026-11-23T10:00:00Z' }],
  settled: { status: 'False', reason: 'InProgress', message: 'create_branch running (created at 2026-11-23T10:00:00Z)' },
};
const settled: OperationsSnapshot = {
  operations: [{ id: 'op-2', action: 'create_branch', status: 'finished', failuresCount: 0, updatedAt: '2026-11-23T10:00:03Z' }],
  settled: { status: 'True', reason: 'AllTerminal', message: 'all 1 recent operations are terminal' },
};

describe('operationsPatch (pure)', () => {
  const cached = {
    generation: 3,
    conditions: [
      { type: 'KeyIssued', status: 'True' },
      { type: 'Ready', status: 'True' },
      { type: 'OperationsSettled', status: 'True' },
    ],
  };

  it('tests the version rested on, then replaces the condition in place; a new status moves lastTransitionTime', () => {
    expect(operationsPatch('41', cached, running, new Date(T0 + 1_500))).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '41' },
      { op: 'test', path: '/status/conditions/2/type', value: 'OperationsSettled' },
      { op: 'test', path: '/status/conditions/2/status', value: 'True' },
      { op: 'replace', path: '/status/conditions/2/status', value: 'False' },
      { op: 'replace', path: '/status/conditions/2/reason', value: 'InProgress' },
      { op: 'replace', path: '/status/conditions/2/message', value: running.settled.message },
      { op: 'replace', path: '/status/conditions/2/observedGeneration', value: 3 },
      // Second precision, as every condition the operator writes (conditions.ts setConditions).
      { op: 'replace', path: '/status/conditions/2/lastTransitionTime', value: '2026-11-23T10:00:01Z' },
      { op: 'add', path: '/status/operations', value: running.operations },
    ]);
  });

  it('the same status keeps lastTransitionTime (no op touches it)', () => {
    const ops = operationsPatch('41', cached, settled, new Date(T0));
    expect(ops.map((o) => o.path)).not.toContain('/status/conditions/2/lastTransitionTime');
    expect(ops).toContainEqual({ op: 'replace', path: '/status/conditions/2/reason', value: 'AllTerminal' });
  });

  it('a resource without the condition yet gets it appended, whole', () => {
    const ops = operationsPatch('7', { generation: undefined, conditions: [{ type: 'Ready', status: 'True' }] }, running, new Date(T0));
    expect(ops).toEqual([
      { op: 'test', path: '/metadata/resourceVersion', value: '7' },
      {
        op: 'add',
        path: '/status/conditions/-',
        value: {
          type: 'OperationsSettled',
          status: 'False',
          reason: 'InProgress',
          message: running.settled.message,
          observedGeneration: 0,
          lastTransitionTime: '2026-11-23T10:00:00Z',
        },
      },
      { op: 'add', path: '/status/operations', value: running.operations },
    ]);
  });
});

describe('an operations change of a ProjectApiKey at rest', () => {
  /** A rig whose "caches" are the fake apiserver's current objects (up to date), except for `uncached` names. */
  function setUp(): {
    r: ReturnType<typeof rig>;
    clock: { t: number };
    snapshot: { current: OperationsSnapshot };
    records: ReconcileRecord[];
    lagging: Map<string, KeyResource>;
    stale: Set<string>;
  } {
    const clock = { t: T0 };
    const snapshot = { current: settled };
    const records: ReconcileRecord[] = [];
    const uncached = new Set(['twin']);
    /** Resources whose cache still shows an older object (its watch event not delivered yet). */
    const lagging = new Map<string, KeyResource>();
    /** Caches (`kind/namespace`) whose watch has failed too long (runtime/controller.ts cacheStale). */
    const stale = new Set<string>();
    const cachedResource = (namespace: string, name: string): KeyResource | undefined => lagging.get(name) ?? r.kube.resource('ProjectApiKey', namespace, name);
    const r: ReturnType<typeof rig> = rig({
      now: () => clock.t,
      drift: new DriftCache(60_000, () => clock.t),
      operations: { pollers: { ensure: () => undefined, release: () => undefined, snapshot: () => snapshot.current } },
      onReconcile: (record) => records.push(record),
      rest: {
        cacheStale: (kind, namespace) => stale.has(`${kind}/${namespace}`),
        cachedVersion: (kind, namespace, name) => {
          if (uncached.has(name)) return undefined;
          const obj = kind === 'Secret' ? r.kube.secret(namespace, name) : cachedResource(namespace, name);
          return obj === undefined ? undefined : { uid: obj.metadata?.uid, resourceVersion: obj.metadata?.resourceVersion };
        },
        cachedConditions: (_kind, namespace, name) => {
          const obj = cachedResource(namespace, name);
          return obj === undefined || uncached.has(name) ? undefined : cachedConditionsOf(trimKeyResource(obj as unknown as KubernetesObject));
        },
        platformById: (credentialsId) => ({ platform: r.platform, credentialsId }),
      },
    });
    return { r, clock, snapshot, records, lagging, stale };
  }

  async function atRest(s: ReturnType<typeof setUp>): Promise<void> {
    for (const name of ['pk', 'twin']) {
      s.r.kube.putResource(keyResource('ProjectApiKey', name));
      await s.r.settle('ProjectApiKey', name);
      // The pass after the create finds it InSync: what it verified is kept from then on.
      await s.r.reconcile('ProjectApiKey', name);
    }
    s.r.kube.calls.length = 0;
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.records.at(-1)?.atRest).toBe(true);
    expect(s.r.kube.calls).toEqual([]);
  }

  /** What the status mirrors of the operations, and its generation: the same for pk and its twin. */
  const mirrored = (s: ReturnType<typeof setUp>, name: string): unknown => {
    const status = s.r.kube.resource('ProjectApiKey', NAMESPACE, name)?.status as {
      operations?: unknown;
      conditions?: { type: string }[];
      observedGeneration?: number;
    };
    return {
      operations: status.operations,
      settled: status.conditions?.find((c) => c.type === 'OperationsSettled'),
      observedGeneration: status.observedGeneration,
    };
  };

  it('is one JSON patch and no read, and writes what a full pass writes, change after change', async () => {
    const s = setUp();
    await atRest(s);
    for (const [i, next] of [
      running,
      { ...running, settled: { ...running.settled, message: 'create_branch running (and 1 more not settled)' } },
      settled,
    ].entries()) {
      s.clock.t += 1_000 * (i + 1);
      s.snapshot.current = next;
      s.r.kube.calls.length = 0;
      // At rest again: its drift checks are the sweep's, not a requeue (KeyReconciler.sweep).
      expect(await s.r.reconcile('ProjectApiKey', 'pk')).toEqual({ type: 'Done' });
      expect(s.r.kube.calls).toEqual([`json-patch status ProjectApiKey/${NAMESPACE}/pk`]);
      expect(s.records.at(-1)).toMatchObject({ restBroken: 'operations', operationsPatched: true, actions: ['InSync'], result: 'Done' });
      // The twin is never at rest: a full pass each time.
      await s.r.reconcile('ProjectApiKey', 'twin');
      expect(mirrored(s, 'pk')).toEqual(mirrored(s, 'twin'));
      // And it rests on the version it wrote: the next pass makes no request.
      s.r.kube.calls.length = 0;
      await s.r.reconcile('ProjectApiKey', 'pk');
      expect(s.records.at(-1)?.atRest).toBe(true);
      expect(s.r.kube.calls).toEqual([]);
    }
    // Its other conditions are those of the full pass too (their messages name the resource and its key).
    const others = (name: string): unknown => {
      const { status } = s.r.kube.resource('ProjectApiKey', NAMESPACE, name)!;
      return status?.conditions?.map((c) => ({ ...c, message: c.message.replaceAll(name, '<name>').replaceAll(String(status.keyId), '<id>') }));
    };
    expect(others('pk')).toEqual(others('twin'));
  });

  it('a patch refused (a failed test: 422) falls back to the full pass, which writes the change', async () => {
    const s = setUp();
    await atRest(s);
    s.clock.t += 5_000;
    s.snapshot.current = running;
    s.r.kube.calls.length = 0;
    s.r.kube.failNext = { call: 'json-patch status', error: new ApiException(422, 'testing value /metadata/resourceVersion failed', {}, {}) };
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.r.kube.calls).toEqual([
      `json-patch status ProjectApiKey/${NAMESPACE}/pk`,
      `get ProjectApiKey ${NAMESPACE}/pk`,
      `get Secret ${NAMESPACE}/pk`,
      `get Secret ${NAMESPACE}/neon-admin`,
      `put status ProjectApiKey/${NAMESPACE}/pk`,
    ]);
    expect(s.records.at(-1)?.operationsPatched).toBeUndefined();
    await s.r.reconcile('ProjectApiKey', 'twin');
    expect(mirrored(s, 'pk')).toEqual(mirrored(s, 'twin'));
  });

  it('right after its write, while the cache still shows the version it replaced: at rest; a change then goes the full way', async () => {
    const s = setUp();
    await atRest(s);
    const before = s.r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!;
    s.snapshot.current = running;
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.records.at(-1)?.operationsPatched).toBe(true);
    // The watch has not delivered the patch: a drift pass due meanwhile reads nothing.
    s.lagging.set('pk', before);
    s.r.kube.calls.length = 0;
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.records.at(-1)?.atRest).toBe(true);
    expect(s.r.kube.calls).toEqual([]);
    // But the cache's conditions are not the written ones: a change now is not patched from them.
    s.snapshot.current = settled;
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.r.kube.calls).toEqual([
      `get ProjectApiKey ${NAMESPACE}/pk`,
      `get Secret ${NAMESPACE}/pk`,
      `get Secret ${NAMESPACE}/neon-admin`,
      `put status ProjectApiKey/${NAMESPACE}/pk`,
    ]);
    // Anyone else's version (neither the one written nor the one it replaced): the full way.
    s.lagging.set('pk', { ...before, metadata: { ...before.metadata, resourceVersion: '999' } });
    s.r.kube.calls.length = 0;
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.records.at(-1)?.restBroken).toBe('resource');
    expect(s.r.kube.calls[0]).toBe(`get ProjectApiKey ${NAMESPACE}/pk`);
  });

  it('anything else that changed too sends it the full way (a Secret edited)', async () => {
    const s = setUp();
    await atRest(s);
    const secret = s.r.kube.secret(NAMESPACE, 'pk')!;
    s.r.kube.putSecret({ ...secret, metadata: { ...secret.metadata, labels: { touched: 'yes' } } });
    s.snapshot.current = running;
    s.r.kube.calls.length = 0;
    await s.r.reconcile('ProjectApiKey', 'pk');
    expect(s.records.at(-1)?.restBroken).toBe('secret');
    expect(s.r.kube.calls.filter((c) => c.startsWith('json-patch'))).toEqual([]);
  });

  describe('the sweep (KeyReconciler.sweep): drift checks of resources at rest, without a pass', () => {
    const PK = `ProjectApiKey/${NAMESPACE}/pk`;
    const ofPk = (records: ReconcileRecord[]): ReconcileRecord[] => records.filter((r) => r.name === 'pk');
    /** What a sweep wakes, but the twin (never at rest here: the caches do not show it, so each of its checks wakes it). */
    const swept = async (s: ReturnType<typeof setUp>): Promise<string[]> => (await s.r.reconciler.sweep()).filter((key) => !key.endsWith('/twin'));

    it('checks a resource when its check is due (one drift interval, jittered), from the caches: no request, no requeue', async () => {
      const s = setUp();
      await atRest(s);
      // At rest, the pass asks for no requeue: the sweep has its check.
      expect(await s.r.reconcile('ProjectApiKey', 'pk')).toEqual({ type: 'Done' });
      const from = s.records.length;
      s.r.kube.calls.length = 0;
      s.clock.t += 50_000; // before 0.9 of the 60 s interval
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([]);
      s.clock.t += 16_000; // past 1.1 of it
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([expect.objectContaining({ atRest: true, actions: ['InSync'], result: 'Done' })]);
      // Checked: the next check is an interval later, not at the next tick.
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toHaveLength(1);
      expect(s.r.kube.calls).toEqual([]);
    });

    it('checks a resource once, at the time its last pass set: not at the time an earlier pass had set, nor twice after a long pause', async () => {
      const s = setUp();
      await atRest(s);
      // A pass 30 s in (it rests again): its check moves to one interval from then (84-96 s).
      s.clock.t += 30_000;
      await s.r.reconcile('ProjectApiKey', 'pk');
      const from = s.records.length;
      s.clock.t += 36_000; // 66 s: past the first rest's check, before the second's
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([]);
      s.clock.t += 30_000; // 96 s: past the second's
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([expect.objectContaining({ atRest: true, actions: ['InSync'] })]);
      // A clock far ahead (the process paused, a suspended host): the check runs once, then an interval later again.
      s.clock.t += 10 * 365 * 86_400_000;
      expect(await swept(s)).toEqual([]);
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toHaveLength(2);
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toHaveLength(3);
    });

    it('a clock set back an hour: a pass then rests it, and its check comes one interval later by that clock', async () => {
      const s = setUp();
      await atRest(s);
      s.clock.t += 30_000;
      expect(await swept(s)).toEqual([]);
      s.clock.t -= 3_600_000;
      await s.r.reconcile('ProjectApiKey', 'pk');
      const from = s.records.length;
      s.clock.t += 50_000;
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([]);
      s.clock.t += 16_000;
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([expect.objectContaining({ atRest: true, actions: ['InSync'] })]);
    });

    it('swept every 10 ms through the window of its check: checked exactly once', async () => {
      const s = setUp();
      await atRest(s);
      const from = s.records.length;
      const start = s.clock.t;
      // The check falls somewhere in 54-66 s; sweeps inside its second, before it, must keep it.
      for (s.clock.t = start + 50_000; s.clock.t <= start + 70_000; s.clock.t += 10) expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toHaveLength(1);
    });

    it("wakes a resource whose project's operations changed, and its pass patches them; then it rests again", async () => {
      const s = setUp();
      await atRest(s);
      s.snapshot.current = running;
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([PK]);
      // Woken once: not again at each tick while its pass has not run.
      expect(await swept(s)).toEqual([]);
      s.r.kube.calls.length = 0;
      await s.r.reconcile('ProjectApiKey', 'pk');
      expect(s.records.at(-1)).toMatchObject({ restBroken: 'operations', operationsPatched: true });
      expect(s.r.kube.calls).toEqual([`json-patch status ${PK}`]);
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([]);
      expect(s.records.at(-1)).toMatchObject({ name: 'pk', atRest: true });
    });

    it('does not trust a stale cache (its watch failing too long): each check is a full pass with fresh reads until the watch is back', async () => {
      const s = setUp();
      await atRest(s);
      // The Secrets' cache of the namespace is stale: the versions it shows prove nothing.
      s.stale.add(`Secret/${NAMESPACE}`);
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([PK]);
      s.r.kube.calls.length = 0;
      await s.r.reconcile('ProjectApiKey', 'pk');
      expect(s.records.at(-1)).toMatchObject({ restBroken: 'cache stale', result: 'Done' });
      expect(s.r.kube.calls.slice(0, 3)).toEqual([`get ProjectApiKey ${NAMESPACE}/pk`, `get Secret ${NAMESPACE}/pk`, `get Secret ${NAMESPACE}/neon-admin`]);
      // The same for the resources' own cache; once current again, it rests.
      s.stale.clear();
      s.stale.add(`ProjectApiKey/${NAMESPACE}`);
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([PK]);
      await s.r.reconcile('ProjectApiKey', 'pk');
      expect(s.records.at(-1)?.restBroken).toBe('cache stale');
      s.stale.clear();
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([]);
      expect(s.records.at(-1)).toMatchObject({ name: 'pk', atRest: true });
    });

    it('wakes a resource whose Secret was deleted, or whose key was revoked outside', async () => {
      const s = setUp();
      await atRest(s);
      await s.r.kube.deleteSecret(NAMESPACE, 'pk');
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([PK]);

      const t = setUp();
      await atRest(t);
      const keyId = t.r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')?.status?.keyId;
      await t.r.platform.revokeOrganizationKey('org-1', keyId!);
      // Past the key's creation (the fake platform's real time) by more than the list's margin.
      t.clock.t = Date.now() + 66_000;
      expect(await swept(t)).toEqual([PK]);
      await t.r.reconcile('ProjectApiKey', 'pk');
      expect(t.records.at(-1)?.restBroken).toBe('key absent');
    });

    it('forgets a resource a pass took off rest (deleted, or no longer in sync)', async () => {
      const s = setUp();
      await atRest(s);
      s.r.kube.resources.delete(PK);
      await s.r.reconcile('ProjectApiKey', 'pk');
      const from = s.records.length;
      s.clock.t += 66_000;
      expect(await swept(s)).toEqual([]);
      expect(ofPk(s.records.slice(from))).toEqual([]);
    });
  });
});
