// Issue 40, on a real kube-apiserver + etcd and the emulator over HTTP: an ApiKeyInventory may name a
// ClusterKeyIssuer, and list the whole organization with the issuer's credentials, only in the
// operator's own namespace (here a namespace of this suite, passed as the operator's). The platform
// team's inventory there reports the organization's keys and lists again as soon as the issuer's
// credentials or spec change; a tenant's inventory naming the issuer is refused (NotAllowed, a
// Warning) with no platform request at all, and learns nothing. The issuer counts the inventories of
// the operator's namespace that name it, and its deletion waits for them, never for a tenant's.
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually, replaceCustomObject } from './support.ts';
import { type Condition, group, operatorSuite, readUntil, version } from './fixture.ts';

const ORG = 'org-demo-00000001';
/** Long: nothing is listed or verified again on its own while the suite runs, so every list it sees was woken. */
const DRIFT_MS = 600_000;
/** This suite's issuers: its operator reconciles only these (the suites share one apiserver). */
const SUITE_LABEL = 'keys.neon.dev/test-suite';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Listed {
  id: number;
  name?: string;
  managed: boolean;
}
interface Inventory {
  metadata: { name: string; generation: number };
  spec: Record<string, unknown>;
  status?: {
    observedGeneration?: number;
    listedAt?: string;
    live?: number;
    notManaged?: number;
    notManagedKeys?: Listed[];
    unusedKeys?: Listed[];
    conditions?: Condition[];
  };
}
interface Issuer {
  metadata: { name: string; generation: number };
  spec: Record<string, unknown>;
  status?: { observedGeneration?: number; resources?: number; conditions?: Condition[] };
}

describe("an inventory through a ClusterKeyIssuer, in the operator's namespace only", () => {
  /** The operator's own namespace, where the issuer's Secrets live too. */
  let operatorNs: string;
  let tenantNs: string;
  let alice: PlatformClient;
  const secrets: string[] = [];
  const suffix = Math.random().toString(36).slice(2, 8);
  const issuer = `platform-${suffix}`;
  const issuers: string[] = [];
  const suite = operatorSuite({
    namespaces: ['inventory-operator', 'inventory-tenant'],
    credentials: false,
    before: async (s) => {
      [operatorNs = '', tenantNs = ''] = s.namespaces;
      alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
      await putSecret('org-admin', s.adminKey);
      await createIssuer(issuer, 'org-admin');
    },
    operator: () => ({
      namespaces: [operatorNs, tenantNs],
      // The operator's own namespace, as $POD_NAMESPACE names it in a pod.
      signingKeySecret: { namespace: operatorNs, name: 'neon-key-operator-signing-key' },
      signingKey: randomBytes(32),
      issuerSecretsNamespace: operatorNs,
      issuerLabelSelector: `${SUITE_LABEL}=${suffix}`,
      workers: 4,
      driftIntervalMs: DRIFT_MS,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'issuer-inventory',
    }),
    after: async (s) => {
      for (const name of issuers) {
        await s.objects.deleteClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name }).catch(() => undefined);
        await s.objects
          .patchClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name, body: [{ op: 'replace', path: '/metadata/finalizers', value: [] }] })
          .catch(() => undefined);
      }
    },
    timeoutMs: 90_000,
  });

  const ready = (r: { status?: { conditions?: Condition[] } }): Condition | undefined => r.status?.conditions?.find((c) => c.type === 'Ready');
  const inventory = async (namespace: string, name: string): Promise<Inventory> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeyinventories', name })) as Inventory;
  const until = (namespace: string, name: string, test: (i: Inventory) => boolean, what: string, timeoutMs = 30_000): Promise<Inventory> =>
    readUntil(() => inventory(namespace, name), test, timeoutMs, `${namespace}/${name}: ${what}`);
  const createInventory = (namespace: string, name: string, spec: Record<string, unknown>): Promise<unknown> =>
    suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'apikeyinventories',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKeyInventory', metadata: { name, namespace }, spec },
    });
  const readIssuer = async (name: string): Promise<Issuer> =>
    (await suite.objects.getClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name })) as Issuer;
  const createIssuer = async (name: string, secret: string): Promise<void> => {
    await suite.objects.createClusterCustomObject({
      group,
      version,
      plural: 'clusterkeyissuers',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ClusterKeyIssuer',
        metadata: { name, labels: { [SUITE_LABEL]: suffix } },
        // No rule: it mints nothing. An inventory is no minting: the policy does not apply to it.
        spec: { organizationId: ORG, credentialsSecretRef: { name: secret }, allow: [] },
      },
    });
    issuers.push(name);
  };
  const putSecret = async (name: string, apiKey: string): Promise<void> => {
    secrets.push(apiKey);
    try {
      await suite.core.createNamespacedSecret({ namespace: operatorNs, body: { metadata: { name }, stringData: { apiKey } } });
    } catch {
      await suite.core.replaceNamespacedSecret({ namespace: operatorNs, name, body: { metadata: { name }, stringData: { apiKey } } });
    }
  };
  /** A new administrator of the organization: its personal key. */
  const administrator = async (name: string): Promise<string> =>
    (await emulatorAdmin<{ personalKey: string }>(suite.emulator.adminUrl, 'POST', '/users', { name, orgRoles: { [ORG]: 'admin' } })).personalKey;
  const requests = async (filter: (r: { method: string; route: string }) => boolean = () => true): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(suite.emulator.adminUrl, 'GET', '/requests'))
      .filter(filter)
      .reduce((n, r) => n + r.count, 0);
  const lists = (): Promise<number> => requests((r) => r.method === 'GET' && /organizations\/[^/]+\/api_keys$/.test(r.route));
  const events = async (namespace: string, name: string): Promise<{ type: string; reason: string; message: string }[]> =>
    (await suite.core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.kind=ApiKeyInventory,involvedObject.name=${name}` })).items.map((e) => ({
      type: e.type ?? '',
      reason: e.reason ?? '',
      message: e.message ?? '',
    }));
  const shows = (i: Inventory, id: number): boolean => (i.status?.notManagedKeys ?? []).some((k) => k.id === id);
  /** The issuer verified for its current spec: no verification of it is under way. */
  const issuerSettled = (name: string): Promise<Issuer> =>
    eventually(
      async () => {
        const current = await readIssuer(name);
        return ready(current)?.status === 'True' && current.status?.observedGeneration === current.metadata.generation ? current : undefined;
      },
      30_000,
      `${name} Verified`,
    );

  it("in the operator's namespace: reports the organization's keys with the issuer's credentials, and lists again at once when the issuer's Secret or spec changes", async () => {
    const first = await alice.createOrganizationKey(ORG, { keyName: 'by-hand-first' });
    await issuerSettled(issuer);
    // organizationId left out: the issuer's.
    await createInventory(operatorNs, 'org', { issuerRef: { name: issuer } });
    const live = (await alice.listOrganizationKeys(ORG)).length;
    const listed = await until(operatorNs, 'org', (i) => ready(i)?.status === 'True' && i.status?.live === live, 'the organization listed');
    expect(ready(listed)).toEqual(expect.objectContaining({ reason: 'Listed' }));
    expect(shows(listed, first.id)).toBe(true);

    // A key made now is not in that list (the next is an interval away), until the issuer's Secret
    // holds another administrator's key: the issuer verifies it and wakes the inventory, which lists
    // with it.
    const second = await alice.createOrganizationKey(ORG, { keyName: 'by-hand-second' });
    const listsBefore = await lists();
    await putSecret('org-admin', await administrator(`platform-admin-2-${suffix}`));
    const relisted = await until(operatorNs, 'org', (i) => shows(i, second.id), 'listed again with the new credentials');
    expect(ready(relisted)?.status).toBe('True');
    expect(await lists()).toBeGreaterThan(listsBefore);

    // The issuer's spec names another Secret (a third administrator): listed again with it.
    const third = await alice.createOrganizationKey(ORG, { keyName: 'by-hand-third' });
    await putSecret('org-admin-3', await administrator(`platform-admin-3-${suffix}`));
    await suite.objects.patchClusterCustomObject(
      { group, version, plural: 'clusterkeyissuers', name: issuer, body: { spec: { credentialsSecretRef: { name: 'org-admin-3' } } } },
      mergePatch,
    );
    await until(operatorNs, 'org', (i) => shows(i, third.id), "listed again after the issuer's spec changed");

    // Another organization than the issuer's: refused, with a Warning.
    await createInventory(operatorNs, 'other-org', { issuerRef: { name: issuer }, organizationId: 'org-other-00000002' });
    const other = await until(operatorNs, 'other-org', (i) => ready(i)?.reason === 'NotAllowed', 'NotAllowed (another organization)');
    expect(ready(other)?.message).toContain(`holds credentials of organization ${ORG}`);
    expect(other.status?.live).toBeUndefined();
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: operatorNs, plural: 'apikeyinventories', name: 'other-org' });
  }, 120_000);

  it("in the operator's namespace: an issuer that does not exist yet is IssuerNotFound with a Warning, and is listed through once it is made", async () => {
    const later = `later-${suffix}`;
    await createInventory(operatorNs, 'later', { issuerRef: { name: later } });
    const missing = await until(operatorNs, 'later', (i) => ready(i)?.reason === 'IssuerNotFound', 'IssuerNotFound');
    expect(ready(missing)).toEqual(expect.objectContaining({ status: 'False', message: expect.stringContaining(`ClusterKeyIssuer ${later} does not exist`) }));
    await eventually(
      async () => ((await events(operatorNs, 'later')).some((e) => e.type === 'Warning' && e.reason === 'IssuerNotFound') ? true : undefined),
      10_000,
      'the IssuerNotFound Warning',
    );
    // Its first verification wakes the resources naming it (the interval is ten minutes away).
    await createIssuer(later, 'org-admin');
    await until(operatorNs, 'later', (i) => ready(i)?.status === 'True' && (i.status?.live ?? 0) > 0, 'listed once the issuer exists');
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: operatorNs, plural: 'apikeyinventories', name: 'later' });
  }, 60_000);

  it("in a tenant's namespace: refused (NotAllowed, a Warning), nothing listed or told, no platform request", async () => {
    // Nothing under way: the issuer verified, its inventory listed.
    await issuerSettled(issuer);
    await until(operatorNs, 'org', (i) => ready(i)?.status === 'True', "the platform team's inventory at rest");
    const before = await requests();

    await createInventory(tenantNs, 'org', { issuerRef: { name: issuer } });
    const refused = await until(tenantNs, 'org', (i) => ready(i)?.reason === 'NotAllowed' && i.status?.observedGeneration === 1, 'NotAllowed');
    expect(ready(refused)).toEqual(
      expect.objectContaining({ status: 'False', message: expect.stringContaining(`only an ApiKeyInventory in the operator's namespace (${operatorNs})`) }),
    );
    // An issuer that does not exist reads the same: a tenant does not learn which issuers exist.
    await replaceCustomObject<Inventory>(suite.objects, { group, version, namespace: tenantNs, plural: 'apikeyinventories', name: 'org' }, (current) => {
      current.spec.issuerRef = { name: `no-such-${suffix}` };
    });
    const unknown = await until(tenantNs, 'org', (i) => i.status?.observedGeneration === 2, 'the second spec seen');
    expect(ready(unknown)).toEqual(
      expect.objectContaining({ reason: 'NotAllowed', message: expect.stringContaining(`ClusterKeyIssuer no-such-${suffix} is not used for this inventory`) }),
    );
    const warnings = await eventually(
      async () => {
        const found = (await events(tenantNs, 'org')).filter((e) => e.type === 'Warning' && e.reason === 'NotAllowed');
        return found.length >= 2 ? found : undefined;
      },
      10_000,
      'a NotAllowed Warning for each spec',
    );
    expect(warnings.map((e) => e.message).join('\n')).toContain(issuer);

    // Two reconciles, and not one platform request.
    expect(await requests()).toBe(before);
    // Nothing listed, nothing of the organization told: no counts, no keys, no event about a key.
    expect(unknown.status).toEqual({ observedGeneration: 2, conditions: [expect.objectContaining({ type: 'Ready' })] });
    expect((await events(tenantNs, 'org')).filter((e) => e.reason !== 'NotAllowed')).toEqual([]);
    const told = JSON.stringify(unknown) + (await events(tenantNs, 'org')).map((e) => e.message).join('\n');
    expect(told).not.toContain('org-admin');
    for (const secret of secrets) expect(told).not.toContain(secret);
  }, 60_000);

  it("the issuer's deletion waits for the inventories of the operator's namespace naming it, never for a tenant's", async () => {
    await suite.objects.deleteClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name: issuer });
    const blocked = await eventually(
      async () => {
        const current = await readIssuer(issuer);
        return ready(current)?.reason === 'DeletionBlocked' ? current : undefined;
      },
      20_000,
      'DeletionBlocked',
    );
    expect(ready(blocked)?.message).toContain(`deletion waits for 1 resource that uses this issuer: ${operatorNs}/org`);
    expect(ready(blocked)?.message).not.toContain(tenantNs);
    // Counted as the key resources are (status.resources), the tenant's inventory not.
    expect(blocked.status?.resources).toBe(1);
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: operatorNs, plural: 'apikeyinventories', name: 'org' });
    await eventually(
      async () =>
        (await readIssuer(issuer).then(
          () => false,
          () => true,
        ))
          ? true
          : undefined,
      30_000,
      'the issuer gone',
    );
  }, 60_000);
});
