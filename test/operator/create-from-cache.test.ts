// A new key's create starts from the informer's copy of it, not a fresh GET (issue 25: at its turn
// in a flood, that read waited behind the flood's writes for up to 4 s). Safe because every first
// write of a new key carries the copy's resourceVersion: a copy behind the apiserver gets 409 and
// creates nothing, and the pass after reads fresh (keys/reconciler.ts #read). A real kube-apiserver,
// the emulator over HTTP, the operator in-process; every request it sends to the apiserver counted
// where its kube config signs it. A copy behind the apiserver cannot be produced on demand with a
// real watch: a fake of the informer's delivery (the operator's `cacheDelivery` seam, and only for
// the keys a test names) shows the reconciler the copy it saw first, as a watch that delivered
// nothing since would.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { PlatformClient } from '../../src/platform/index.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { emulatorAdmin, eventually, onEveryRequest, operatorKubeConfig } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const plural = 'apikeys';
const ORG = 'org-cached-000001';
const WAVE = 12;
/** Creates under way at once: a line forms at once, and most of the wave is woken at its turn. */
const PER_ORGANIZATION = 2;
const CREATE_LATENCY_MS = 400;

interface Condition {
  type: string;
  status: string;
}
interface Resource {
  metadata: {
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    managedFields?: { manager?: string }[];
    finalizers?: string[];
  };
  status?: { keyId?: number; keyName?: string; conditions?: Condition[] };
}
interface RequestCount {
  method: string;
  route: string;
  status: number;
  count: number;
}
interface Sent {
  at: number;
  method: string;
  path: string;
}

describe("a new key is created from the informer's copy", () => {
  let platform: PlatformClient;
  const suite = operatorSuite({
    namespaces: ['cached'],
    emulator: {
      seed: {
        organizations: [{ id: ORG, name: 'cached' }],
        users: [{ name: 'alice', email: 'alice@example.com', orgRoles: { [ORG]: 'admin' } }],
      },
    },
    operator: async (s) => {
      platform = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
      const config = await operatorKubeConfig(s.cp);
      onEveryRequest(config, (context) => {
        const url = new URL(context.getUrl());
        if (!url.searchParams.has('watch')) sent.push({ at: Date.now(), method: context.getHttpMethod(), path: url.pathname });
      });
      return {
        kubeConfig: config,
        namespace: s.namespace,
        workers: 4,
        driftIntervalMs: 10 * 60_000,
        logger: createLogger({ level: 'silent' }),
        identity: 'create-from-cache',
        createsPerOrganization: PER_ORGANIZATION,
        onReconcile: (record) => records.push(record),
        cacheDelivery: (_kind, ns, name, cached) => {
          const id = `${ns}/${name}`;
          if (cached !== undefined && (cached as { seed?: unknown }).seed !== undefined && !firstSeen.has(id)) firstSeen.set(id, cached);
          return late.has(id) ? (firstSeen.get(id) ?? cached) : cached;
        },
      };
    },
    timeoutMs: 120_000,
  });

  beforeAll(async () => {
    await eventually(async () => (suite.operator.ready() ? true : undefined), 30_000, 'operator ready');
    // Every create answered after 0.4 s: with 2 under way, the wave waits in its organization's line.
    await emulatorAdmin(suite.emulator.adminUrl, 'PUT', '/faults', {
      rules: [{ method: 'POST', route: '/api/v2/organizations/:org_id/api_keys', probability: 1, kind: 'latency', latencyMs: CREATE_LATENCY_MS }],
    });
  });

  const records: ReconcileRecord[] = [];
  const sent: Sent[] = [];
  /** The fake of the informer's delivery: each key's first copy seen while new, shown instead of the cache for the keys in `late`. */
  const firstSeen = new Map<string, KubernetesObject>();
  const late = new Set<string>();

  const apply = async (name: string, keyName = name): Promise<void> => {
    await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural,
      fieldManager: 'team-tool',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ApiKey',
        metadata: { name, namespace: suite.namespace, labels: { team: 'a' }, annotations: { 'example.com/owner': 'team a' } },
        spec: { scope: 'Organization', organizationId: ORG, keyName, credentialsSecretRef: { name: 'neon-admin' } },
      },
    });
  };
  const get = async (name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural, name })) as Resource;
  const ready = (r: Resource): boolean => r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
  const allReady = (names: readonly string[], what: string): Promise<true> =>
    eventually(
      async () => {
        for (const name of names) if (!ready(await get(name))) return undefined;
        return true;
      },
      120_000,
      what,
    );
  const of = (name: string): ReconcileRecord[] => records.filter((r) => r.namespace === suite.namespace && r.name === name);
  /** GETs of the resource itself (not lists, not watches), sent in [from, to]. */
  const readsOf = (name: string, from = 0, to = Infinity): number =>
    sent.filter(
      (s) => s.method === 'GET' && s.path === `/apis/${group}/${version}/namespaces/${suite.namespace}/${plural}/${name}` && s.at >= from && s.at <= to,
    ).length;
  const creates = async (): Promise<number> =>
    (await emulatorAdmin<RequestCount[]>(suite.emulator.adminUrl, 'GET', '/requests'))
      .filter((r) => r.method === 'POST' && r.route.endsWith('/api_keys') && r.status === 200)
      .reduce((n, r) => n + r.count, 0);
  const wave = (prefix: string, n = WAVE): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);
  const applyAll = async (names: readonly string[]): Promise<void> => {
    let next = 0;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < names.length) await apply(names[next++] as string);
      }),
    );
  };

  it(`${WAVE} new keys of one organization, most woken at their turn, are created without a GET of the resource, and keep what their team wrote`, async () => {
    const keys = wave('turn');
    const before = await creates();
    await applyAll(keys);
    await allReady(keys, `all ${WAVE} keys Ready`);
    // The line formed: most keys waited for their turn and were woken at it.
    expect(keys.filter((k) => of(k).some((r) => r.deferred === true)).length).toBeGreaterThan(WAVE / 2);
    for (const k of keys) {
      const created = of(k).filter((r) => r.createSent);
      // One create each, from the cached copy; no GET of the resource until its create had ended.
      expect([k, created.length, created.every((r) => r.cachedRead === true)]).toEqual([k, 1, true]);
      expect([k, readsOf(k, 0, created[0]?.endedAt)]).toEqual([k, 0]);
      // The update that added the finalizer and the intent, made from the copy, left the team's
      // labels, annotations and field ownership as they were (managedFields are not in the copy:
      // an update without them keeps the apiserver's).
      const r = await get(k);
      expect([k, r.metadata.labels?.team, r.metadata.annotations?.['example.com/owner']]).toEqual([k, 'a', 'team a']);
      expect([k, r.metadata.managedFields?.some((f) => f.manager === 'team-tool')]).toEqual([k, true]);
    }
    expect(await creates()).toBe(before + WAVE);
  }, 180_000);

  it("a create decided on a copy behind the apiserver creates nothing: its intent's write gets 409, and the pass after reads fresh", async () => {
    // A line of 20 (4 s of creates at least): the late key, of the same namespace, waits behind all of it.
    const keys = wave('line', 20);
    const before = await creates();
    await applyAll(keys);
    await eventually(async () => (keys.every((k) => of(k).length > 0) ? true : undefined), 60_000, 'a first look at every key of the line');
    // Its first look sends it to the organization's line unread, and the fake delivery keeps that copy.
    late.add(`${suite.namespace}/late`);
    await apply('late', 'late-v1');
    await eventually(
      async () => (firstSeen.has(`${suite.namespace}/late`) && of('late').length > 0 ? true : undefined),
      60_000,
      'a first look at the late key',
    );
    expect(of('late')[0]?.deferred).toBe(true);
    // Its team renames the key while it waits: a create from the copy would name it late-v1.
    await suite.objects.patchNamespacedCustomObject(
      { group, version, namespace: suite.namespace, plural, name: 'late', body: { spec: { keyName: 'late-v2' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const r = await eventually(
      async () => {
        const x = await get('late');
        return ready(x) ? x : undefined;
      },
      120_000,
      'the late key Ready',
    );
    await allReady(keys, 'all keys of the line Ready');

    expect(r.status?.keyName).toMatch(/^late-v2-/);
    const passes = of('late');
    const refused = passes.find((p) => p.cachedRead === true && p.result === 'Retry');
    const created = passes.filter((p) => p.createSent);
    // The create the stale copy decided was refused before the platform was called; the one that
    // created was read fresh, after the refusal.
    expect(refused).toMatchObject({ createSent: false, actions: ['AddFinalizer', 'Create'] });
    expect(created).toHaveLength(1);
    expect(created[0]?.cachedRead).toBeUndefined();
    expect(readsOf('late', refused?.endedAt, created[0]?.endedAt)).toBeGreaterThan(0);
    // One key on the platform for the resource, by the name it has now; none by the stale one.
    const names = (await platform.listOrganizationKeys(ORG)).map((k) => k.name);
    expect(names.filter((n) => n.startsWith('late-'))).toEqual([r.status?.keyName]);
    expect(await creates()).toBe(before + keys.length + 1);
  }, 180_000);

  it('a copy from before its key was issued issues no second key: its write gets 409, and the pass after finds the key in sync', async () => {
    const name = 'turn-00';
    const issued = await get(name);
    expect(firstSeen.get(`${suite.namespace}/${name}`)).toBeDefined();
    const before = await creates();
    // The fake delivery shows the key as it was before it was issued; a change of its own wakes it.
    late.add(`${suite.namespace}/${name}`);
    const at = Date.now();
    await suite.objects.patchNamespacedCustomObject(
      { group, version, namespace: suite.namespace, plural, name, body: { metadata: { annotations: { 'example.com/touched': 'yes' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const passes = await eventually(
      async () => {
        const after = of(name).filter((p) => p.startedAt >= at);
        return after.some((p) => p.result === 'Done' && p.cachedRead === undefined) ? after : undefined;
      },
      60_000,
      'a pass of the woken key from a fresh read',
    );
    expect(passes[0]).toMatchObject({ cachedRead: true, result: 'Retry', createSent: false });
    expect(passes.some((p) => p.createSent)).toBe(false);
    const r = await get(name);
    expect([r.status?.keyId, ready(r)]).toEqual([issued.status?.keyId, true]);
    expect(await creates()).toBe(before);
    late.clear();
  }, 60_000);
});
