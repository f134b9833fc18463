// Several clusters on one organization (docs/clusters.md), on a real kube-apiserver + etcd and the
// emulator over HTTP: two operators in this process, each watching a namespace of its own as two
// clusters would, with cluster names staging and prod and half the organization's rate each. Each
// names its keys `<keyName>.<cluster>.<tag>`; each inventory reports the other's keys as another
// cluster's, a key by hand as such, and a name forged like its own as its own, yet a name decides
// no revoke: a key carrying a resource's tag in another cluster's format is left live, while the
// same tag in this cluster's format (and in the format without a name, an upgrade's) is revoked
// as an orphan. Then prod is restored from a backup without status and without the Secrets the
// operator wrote, under a new name (prod-r1, prod's signing key restored too): every restored key
// resource gets a key of its own, no old key is used or revoked by it, and its inventory lists
// prod's keys as another cluster's for a person to revoke. What the inventory counts by origin is
// in its -o wide columns and, split by state, in the inventory gauge.
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { createMetrics, type OperatorMetrics } from '../../src/operator/keys/status/metrics.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { type RunningOperator } from '../../src/operator/manager.ts';
import { Signer } from '../../src/operator/keys/issuing/signing.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { createNamespace, eventually, kubectl } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const ORG = 'org-demo-00000001';
const DRIFT_MS = 1_500;
/** 55 characters: the longest spec.keyName. */
const LONG_KEY_NAME = `long-${'x'.repeat(50)}`;

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface ApiKey {
  metadata: { name: string; uid: string; annotations?: Record<string, string>; finalizers?: string[] };
  spec: Record<string, unknown>;
  status?: { keyId?: number; keyName?: string; conditions?: Condition[] };
}
interface Listed {
  id: number;
  name?: string;
  managed: boolean;
  origin?: string;
  cluster?: string;
}
interface Inventory {
  status?: {
    listedAt?: string;
    live?: number;
    managed?: number;
    notManaged?: number;
    notManagedByOrigin?: { thisCluster: number; otherCluster: number; byHand: number };
    notManagedKeys?: Listed[];
    conditions?: Condition[];
  };
}

describe('two clusters on one organization', () => {
  let alice: PlatformClient;
  const namespaces: string[] = [];
  const signingKeys = { staging: randomBytes(32), prod: randomBytes(32) };
  let staging: string;
  let prod: string;
  let prodOperator: RunningOperator;
  /** staging's metrics: its inventory gauge. */
  const stagingMetrics: OperatorMetrics = createMetrics(new Registry(), { defaultMetrics: false });

  const start = async (cluster: string, namespace: string, signingKey: Buffer, metrics?: OperatorMetrics): Promise<RunningOperator> => {
    return suite.startOperator({
      namespaces: [namespace],
      workers: 4,
      driftIntervalMs: DRIFT_MS,
      pendingGraceMs: 2_000,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: cluster,
      signingKey,
      clusterName: cluster,
      organizationRateShare: 0.5,
      ...(metrics !== undefined ? { metrics } : {}),
    });
  };
  const createKey = (namespace: string, name: string, keyName?: string): Promise<unknown> =>
    suite.apply(
      'ApiKey',
      { name, namespace },
      { scope: 'Organization', organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' }, ...(keyName !== undefined ? { keyName } : {}) },
      namespace,
    );
  const readKey = async (namespace: string, name: string): Promise<ApiKey> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name })) as ApiKey;
  const readyKey = (namespace: string, name: string): Promise<ApiKey> =>
    eventually(
      async () => {
        const key = await readKey(namespace, name);
        return key.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && key.status.keyId !== undefined ? key : undefined;
      },
      60_000,
      `${namespace}/${name} Ready`,
    );
  const createInventory = (namespace: string): Promise<unknown> =>
    suite.apply('ApiKeyInventory', { name: 'org', namespace }, { organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } }, namespace);
  const inventoryUntil = (namespace: string, test: (i: Inventory) => boolean, what: string): Promise<Inventory> =>
    eventually(
      async () => {
        const i = (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeyinventories', name: 'org' })) as Inventory;
        return test(i) ? i : undefined;
      },
      60_000,
      `inventory of ${namespace}: ${what}`,
    );
  const liveKeys = async (): Promise<{ id: number; name: string }[]> => (await alice.listOrganizationKeys(ORG)).map((k) => ({ id: k.id, name: k.name }));

  const suite = operatorSuite({
    namespaces: ['cluster-staging', 'cluster-prod'],
    before: async (s) => {
      // Its creates share the organization's 10 a second with the two operators': a 429 waits its Retry-After.
      alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 5 } });
      [staging = '', prod = ''] = s.namespaces;
      namespaces.push(staging, prod);
      await start('staging', staging, signingKeys.staging, stagingMetrics);
      prodOperator = await start('prod', prod, signingKeys.prod);
    },
    // prod's resources keep the finalizer of an operator that is stopped: lifted here, or the namespace never goes.
    after: async (s) => {
      for (const ns of namespaces) {
        const keys = (await s.objects.listNamespacedCustomObject({ group, version, namespace: ns, plural: 'apikeys' }).catch(() => ({ items: [] }))) as {
          items: ApiKey[];
        };
        for (const key of keys.items) {
          await s.objects
            .patchNamespacedCustomObject({
              group,
              version,
              namespace: ns,
              plural: 'apikeys',
              name: key.metadata.name,
              body: [{ op: 'replace', path: '/metadata/finalizers', value: [] }],
            })
            .catch(() => undefined);
        }
        await s.core.deleteNamespace({ name: ns }).catch(() => undefined);
      }
    },
    timeoutMs: 90_000,
  });

  it("names each cluster's keys after it, and each inventory tells the other's keys from keys by hand and from its own", async () => {
    for (const ns of [staging, prod]) {
      await createKey(ns, 'web');
      await createKey(ns, 'worker');
      await createKey(ns, 'long', LONG_KEY_NAME);
    }
    const keysOf = async (ns: string): Promise<ApiKey[]> => [await readyKey(ns, 'web'), await readyKey(ns, 'worker'), await readyKey(ns, 'long')];
    const stagingKeys = await keysOf(staging);
    const prodKeys = await keysOf(prod);
    expect(stagingKeys[0]?.status?.keyName).toMatch(new RegExp(`^${staging}-web\\.staging\\.[a-z0-9]{8}$`));
    expect(prodKeys[1]?.status?.keyName).toMatch(new RegExp(`^${prod}-worker\\.prod\\.[a-z0-9]{8}$`));
    // The longest keyName is cut so that the name holds the platform's 64 characters.
    expect(stagingKeys[2]?.status?.keyName).toMatch(new RegExp(`^${LONG_KEY_NAME.slice(0, 64 - 2 - 'staging'.length - 8)}\\.staging\\.[a-z0-9]{8}$`));
    expect(stagingKeys[2]?.status?.keyName).toHaveLength(64);
    // Made directly on the platform: by hand; in the format without a cluster name; forged in staging's.
    const byHand = await alice.createOrganizationKey(ORG, { keyName: 'console-made' });
    const unnamed = await alice.createOrganizationKey(ORG, { keyName: 'old-web-abcde123' });
    const forged = await alice.createOrganizationKey(ORG, { keyName: 'forged.staging.zzzzz123' });
    const live = await liveKeys();
    expect(live).toHaveLength(9);
    await createInventory(staging);
    await createInventory(prod);
    const counted = (i: Inventory): boolean => i.status?.live === 9 && i.status.managed === 3;
    const fromStaging = await inventoryUntil(staging, counted, '9 live, 3 managed');
    const fromProd = await inventoryUntil(prod, counted, '9 live, 3 managed');
    // staging: prod's 3 and the unnamed one are another cluster's; the forged one its own; one by hand.
    expect(fromStaging.status?.notManagedByOrigin).toEqual({ thisCluster: 1, otherCluster: 4, byHand: 1 });
    expect(fromProd.status?.notManagedByOrigin).toEqual({ thisCluster: 0, otherCluster: 5, byHand: 1 });
    const entry = (i: Inventory, id: number | undefined): Listed | undefined => i.status?.notManagedKeys?.find((k) => k.id === id);
    for (const key of prodKeys)
      expect(entry(fromStaging, key.status?.keyId)).toEqual(expect.objectContaining({ managed: false, origin: 'OtherCluster', cluster: 'prod' }));
    for (const key of stagingKeys)
      expect(entry(fromProd, key.status?.keyId)).toEqual(expect.objectContaining({ managed: false, origin: 'OtherCluster', cluster: 'staging' }));
    expect(entry(fromStaging, byHand.id)).toEqual(expect.objectContaining({ origin: 'ByHand' }));
    expect(entry(fromStaging, unnamed.id)).toEqual(expect.objectContaining({ origin: 'OtherCluster' }));
    expect(entry(fromStaging, unnamed.id)?.cluster).toBeUndefined();
    expect(entry(fromStaging, forged.id)).toEqual(expect.objectContaining({ origin: 'ThisCluster' }));
    expect(entry(fromProd, forged.id)).toEqual(expect.objectContaining({ origin: 'OtherCluster', cluster: 'staging' }));
    // kubectl get -o wide: another cluster's keys and keys by hand in columns of their own.
    const [header = '', row = ''] = (await kubectl(suite.cp, ['get', 'naki', 'org', '-n', staging, '-o', 'wide'])).trim().split('\n');
    const cells = row.trim().split(/\s{2,}/);
    const wide = Object.fromEntries(
      header
        .trim()
        .split(/\s{2,}/)
        .map((name, i) => [name, cells[i]]),
    );
    expect(wide).toEqual(expect.objectContaining({ 'NOT MANAGED': '6', 'OTHER CLUSTER': '4', 'BY HAND': '1' }));
    // The gauge: unmanaged, and split by origin into parts that add up to it.
    const scrape = await stagingMetrics.registry.metrics();
    const series = (state: string): string => `neon_key_operator_inventory_keys{namespace="${staging}",inventory="org",state="${state}"}`;
    for (const [state, count] of [
      ['unmanaged', 6],
      ['unmanaged_this_cluster', 1],
      ['unmanaged_other_cluster', 4],
      ['unmanaged_by_hand', 1],
      ['managed', 3],
      ['live', 9],
    ] as const) {
      expect(scrape).toContain(`${series(state)} ${count}\n`);
    }
    expect(scrape).not.toContain(ORG);
    // A name decides nothing: every key is still live after both inventories and the drift passes.
    expect((await liveKeys()).map((k) => k.id).sort()).toEqual(live.map((k) => k.id).sort());
  }, 180_000);

  it("revokes as an orphan a key with a resource's tag in its own format or the format without a name, never in another cluster's", async () => {
    const web = await readKey(staging, 'web');
    const tag = new Signer(signingKeys.staging).attemptTag(web.metadata.uid);
    const own = await alice.createOrganizationKey(ORG, { keyName: `left.staging.${tag}abc` });
    const upgraded = await alice.createOrganizationKey(ORG, { keyName: `left-${tag}abc` });
    const others = await alice.createOrganizationKey(ORG, { keyName: `left.prod.${tag}abc` });
    await eventually(
      async () => {
        const ids = (await liveKeys()).map((k) => k.id);
        return !ids.includes(own.id) && !ids.includes(upgraded.id) ? true : undefined;
      },
      60_000,
      "the orphans in staging's formats revoked",
    );
    const revokedAt = Date.now();
    // The key in prod's format was in the list that showed the other two; one more list after it still shows it.
    const after = await inventoryUntil(staging, (i) => Date.parse(i.status?.listedAt ?? '') >= revokedAt + 1_000, 'a list after the revokes');
    expect(after.status?.notManagedKeys?.find((k) => k.id === others.id)).toEqual(expect.objectContaining({ origin: 'OtherCluster', cluster: 'prod' }));
    expect((await liveKeys()).map((k) => k.id)).toContain(others.id);
  }, 120_000);

  it("restores prod from a backup under a new name: a key of its own for each resource, the old keys left live and listed as prod's", async () => {
    const names = ['web', 'worker', 'long'];
    const backup = await Promise.all(names.map((name) => readKey(prod, name)));
    const oldIds = backup.map((k) => k.status?.keyId);
    // The old cluster is gone; its keys stay live on the platform.
    await prodOperator.stop();
    const restored = await createNamespace(suite.cp, 'cluster-prod-r1');
    namespaces.push(restored);
    const aliceKey = suite.emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    await suite.core.createNamespacedSecret({ namespace: restored, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: aliceKey } } });
    // What a backup restores: spec, labels and annotations (the fulfilled create intent, signed for the old uid); no status, no key Secret.
    for (const key of backup) {
      await suite.apply('ApiKey', { name: key.metadata.name, namespace: restored, annotations: key.metadata.annotations ?? {} }, key.spec, restored);
    }
    await createInventory(restored);
    await start('prod-r1', restored, signingKeys.prod);
    const now = await Promise.all(names.map((name) => readyKey(restored, name)));
    const newIds = now.map((k) => k.status?.keyId);
    for (const key of now) expect(key.status?.keyName).toMatch(/\.prod-r1\.[a-z0-9]{8}$/);
    expect(newIds.filter((id) => oldIds.includes(id))).toEqual([]);
    const live = await liveKeys();
    // The old keys are live (nothing revoked them), each restored resource has exactly one key of its cluster's.
    expect(live.map((k) => k.id)).toEqual(expect.arrayContaining(oldIds as number[]));
    expect(
      live
        .filter((k) => k.name.includes('.prod-r1.'))
        .map((k) => k.id)
        .sort(),
    ).toEqual([...(newIds as number[])].sort());
    // Each restored resource's intent, signed for its old uid, was cleared without revoking anything: one InvalidAnnotation each.
    const invalid = (await suite.core.listNamespacedEvent({ namespace: restored, fieldSelector: 'involvedObject.kind=ApiKey,reason=InvalidAnnotation' })).items;
    expect(invalid.map((e) => e.involvedObject.name).sort()).toEqual([...names].sort());
    const report = await inventoryUntil(restored, (i) => i.status?.managed === 3 && i.status.live === live.length, `${live.length} live, 3 managed`);
    for (const id of oldIds)
      expect(report.status?.notManagedKeys?.find((k) => k.id === id)).toEqual(
        expect.objectContaining({ managed: false, origin: 'OtherCluster', cluster: 'prod' }),
      );
  }, 180_000);
});
