// Issue 28, on a real kube-apiserver + etcd and the emulator over HTTP: an ApiKeyInventory shows
// every live key of an organization, managed (recorded by an ApiKey of this cluster, in either of two
// namespaces) or made directly on the platform, used or never used; it follows keys created and
// revoked on both sides, costs no platform request beyond the drift list the keys already take, says
// which credentials cannot list (missing, refused, the wrong kind of key), and never shows which
// namespace manages a key nor any secret.
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { createMetrics, type OperatorMetrics } from '../../src/operator/keys/status/metrics.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually, kubectl } from './support.ts';
import { type Condition, group, operatorSuite, readUntil, version } from './fixture.ts';

const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';
const DRIFT_MS = 1_500;

interface Listed {
  id: number;
  name: string;
  kind: string;
  projectId?: string;
  createdAt: string;
  createdBy?: string;
  lastUsedAt?: string;
  managed: boolean;
}
interface Inventory {
  metadata: { name: string; generation: number };
  status?: {
    observedGeneration?: number;
    listedAt?: string;
    live?: number;
    managed?: number;
    notManaged?: number;
    unused?: number;
    neverUsed?: number;
    notManagedKeys?: Listed[];
    unusedKeys?: Listed[];
    conditions?: Condition[];
  };
}

describe("an inventory of the organization's keys", () => {
  const metrics: OperatorMetrics = createMetrics(new Registry(), { defaultMetrics: false });
  let teamA: string;
  let teamB: string;
  let alice: PlatformClient;
  const suite = operatorSuite({
    namespaces: ['inventory-a', 'inventory-b'],
    before: async (s) => {
      [teamA = '', teamB = ''] = s.namespaces;
      alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
    },
    operator: () => ({
      namespaces: [teamA, teamB],
      workers: 4,
      driftIntervalMs: DRIFT_MS,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'inventory',
      metrics,
    }),
    timeoutMs: 60_000,
  });

  const byHand: { id: number; key: string }[] = [];

  const createKey = (namespace: string, name: string): Promise<unknown> =>
    suite.apply('ApiKey', { name, namespace }, { scope: 'Organization', organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } }, namespace);
  const keyIdOf = async (namespace: string, name: string): Promise<number> =>
    eventually(
      async () => {
        const r = (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name })) as {
          status?: { keyId?: number; conditions?: Condition[] };
        };
        return r.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? r.status.keyId : undefined;
      },
      30_000,
      `${namespace}/${name} Ready`,
    );
  const createInventory = (name: string, spec: Record<string, unknown>): Promise<unknown> =>
    suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: teamA,
      plural: 'apikeyinventories',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKeyInventory', metadata: { name, namespace: teamA }, spec },
    });
  const inventory = async (name: string): Promise<Inventory> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: teamA, plural: 'apikeyinventories', name })) as Inventory;
  const ready = (i: Inventory): Condition | undefined => i.status?.conditions?.find((c) => c.type === 'Ready');
  const until = (name: string, test: (i: Inventory) => boolean, what: string, timeoutMs = 20_000): Promise<Inventory> =>
    readUntil(() => inventory(name), test, timeoutMs, `${name}: ${what}`);
  const platformKeys = async (): Promise<number[]> => (await alice.listOrganizationKeys(ORG)).map((k) => k.id);
  const listRequests = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(suite.emulator.adminUrl, 'GET', '/requests'))
      .filter((r) => r.method === 'GET' && /organizations\/[^/]+\/api_keys$/.test(r.route))
      .reduce((n, r) => n + r.count, 0);
  const events = async (reason: string): Promise<string[]> =>
    (await suite.core.listNamespacedEvent({ namespace: teamA, fieldSelector: `involvedObject.kind=ApiKeyInventory,reason=${reason}` })).items.map(
      (e) => e.message ?? '',
    );
  const credentials = (namespace: string, name: string, apiKey: string): Promise<unknown> =>
    suite.core.createNamespacedSecret({ namespace, body: { metadata: { name }, stringData: { apiKey } } });

  it('counts and lists keys managed in two namespaces, made by hand, used and never used; follows creates and revokes on both sides; no list of its own', async () => {
    await createKey(teamA, 'web');
    await createKey(teamB, 'worker');
    const managedA = await keyIdOf(teamA, 'web');
    const managedB = await keyIdOf(teamB, 'worker');
    // Made directly on the platform: one used since, one never used, one project-scoped.
    const used = await alice.createOrganizationKey(ORG, { keyName: 'console-used' });
    const neverUsed = await alice.createOrganizationKey(ORG, { keyName: 'console-never-used' });
    const scoped = await alice.createOrganizationKey(ORG, { keyName: 'script-project', projectId: PROJECT });
    byHand.push(used, neverUsed, scoped);
    const use = (): Promise<unknown> =>
      new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: used.key, retry: { maxAttempts: 1 } }).listProjects({ orgId: ORG });
    await use();
    // Keeps the used key used within unusedAfter while the never-used ones age past it.
    const keepUsing = setInterval(() => {
      use().catch(() => undefined);
    }, 1_000);
    try {
      await createInventory('org', { organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' }, unusedAfter: '6s' });
      const live = await platformKeys();
      expect(live).toEqual(expect.arrayContaining([managedA, managedB, used.id, neverUsed.id, scoped.id]));
      const first = await until(
        'org',
        (i) => ready(i)?.status === 'True' && i.status?.live === live.length && i.status.notManaged === live.length - 2,
        'the first report',
      );
      expect(ready(first)).toEqual(expect.objectContaining({ reason: 'Listed' }));
      expect(first.status).toEqual(expect.objectContaining({ observedGeneration: first.metadata.generation, managed: 2, notManaged: live.length - 2 }));
      const notManaged = first.status?.notManagedKeys ?? [];
      expect(notManaged.map((k) => k.id)).toEqual(expect.arrayContaining([used.id, neverUsed.id, scoped.id]));
      expect(notManaged.map((k) => k.id)).not.toEqual(expect.arrayContaining([managedA]));
      expect(notManaged.map((k) => k.id)).not.toContain(managedB);
      // Newest first: the project-scoped key was made last.
      expect(notManaged[0]).toEqual(
        expect.objectContaining({
          id: scoped.id,
          name: 'script-project',
          kind: 'Project',
          projectId: PROJECT,
          managed: false,
          createdBy: expect.stringContaining('alice'),
        }),
      );
      expect(notManaged.find((k) => k.id === used.id)).toEqual(expect.objectContaining({ kind: 'Organization', lastUsedAt: expect.any(String) }));
      expect(notManaged.find((k) => k.id === neverUsed.id)?.lastUsedAt).toBeUndefined();
      expect(first.status?.neverUsed).toBeGreaterThanOrEqual(4);
      // Past unusedAfter: the never-used keys (by hand and managed, never used since issued) are unused; the used one is not.
      const aged = await until('org', (i) => (i.status?.unusedKeys ?? []).some((k) => k.id === neverUsed.id), 'the never-used key unused');
      const unusedIds = (aged.status?.unusedKeys ?? []).map((k) => k.id);
      expect(unusedIds).toEqual(expect.arrayContaining([neverUsed.id, scoped.id, managedA, managedB]));
      expect(unusedIds).not.toContain(used.id);
      expect(aged.status?.unusedKeys?.find((k) => k.id === managedA)?.managed).toBe(true);
      expect(aged.status?.unused).toBe(unusedIds.length);
      // A managed key that went unused is an event (it aged past unusedAfter after the first list).
      await eventually(async () => ((await events('KeyUnused')).some((m) => m.includes(`key ${managedA} `)) ? true : undefined), 10_000, 'KeyUnused event');

      // Printer columns.
      const table = await kubectl(suite.cp, ['get', 'naki', 'org', '-n', teamA]);
      expect(table.split('\n')[0]).toMatch(/READY\s+LIVE\s+MANAGED\s+NOT MANAGED\s+UNUSED\s+AGE/);

      // Cost: over six drift intervals, the organization's key list is taken about once per interval,
      // shared by the two namespaces' keys (same credentials) and the inventory: no list of its own.
      const before = await listRequests();
      await new Promise((resolve) => setTimeout(resolve, 6 * DRIFT_MS));
      const lists = (await listRequests()) - before;
      expect(lists).toBeGreaterThanOrEqual(3);
      expect(lists).toBeLessThanOrEqual(6 + 2);

      // Both sides move: a key made by hand appears (an event names it), a key by hand is revoked,
      // a new ApiKey in team B is managed, team A's ApiKey is deleted (its key revoked).
      const later = await alice.createOrganizationKey(ORG, { keyName: 'console-later' });
      byHand.push(later);
      await alice.revokeOrganizationKey(ORG, neverUsed.id);
      await createKey(teamB, 'batch');
      const managedB2 = await keyIdOf(teamB, 'batch');
      await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: teamA, plural: 'apikeys', name: 'web' });
      await eventually(async () => ((await platformKeys()).includes(managedA) ? undefined : true), 30_000, "team A's key revoked");
      const liveNow = await platformKeys();
      const moved = await until(
        'org',
        (i) => i.status?.live === liveNow.length && i.status.managed === 2 && (i.status.notManagedKeys ?? []).some((k) => k.id === later.id),
        'the report after the moves',
      );
      expect(moved.status?.notManaged).toBe(liveNow.length - 2);
      const ids = (moved.status?.notManagedKeys ?? []).map((k) => k.id);
      expect(ids).not.toContain(neverUsed.id);
      expect(ids).not.toContain(managedB2);
      expect(ids).not.toContain(managedA);
      expect(liveNow).toContain(managedB2);
      await eventually(
        async () => ((await events('KeyNotManaged')).some((m) => m.includes(`key ${later.id} "console-later"`)) ? true : undefined),
        10_000,
        'KeyNotManaged event',
      );

      // The tenant learns what alice's key could list, and whether a key is managed here: never which
      // namespace manages it, never a secret. (A managed key's platform name is the platform's: by
      // default <namespace>-<name>, which these credentials list anyway; docs/inventory.md.)
      const shown = JSON.stringify(moved) + (await events('KeyNotManaged')).join('\n') + (await events('KeyUnused')).join('\n');
      let scrubbed = shown;
      for (const k of await alice.listOrganizationKeys(ORG)) scrubbed = scrubbed.replaceAll(k.name, "<the platform's name>");
      expect(scrubbed).not.toContain(teamB);
      // Deleting team A's ApiKey (its key revoked) never read as a key by hand appearing.
      expect((await events('KeyNotManaged')).filter((m) => m.includes(`key ${managedA} `))).toEqual([]);
      const secrets = [suite.adminKey, ...byHand.map((k) => k.key)];
      for (const name of ['worker', 'batch'])
        secrets.push(Buffer.from((await suite.core.readNamespacedSecret({ namespace: teamB, name })).data?.apiKey ?? '', 'base64').toString('utf8'));
      for (const secret of secrets) expect(shown).not.toContain(secret);

      // The gauge: by state, the inventory named by namespace and name; no organization label unless asked for.
      const scrape = await metrics.registry.metrics();
      expect(scrape).toContain(`neon_key_operator_inventory_keys{namespace="${teamA}",inventory="org",state="unmanaged"} ${liveNow.length - 2}`);
      expect(scrape).toContain(`neon_key_operator_inventory_keys{namespace="${teamA}",inventory="org",state="managed"} 2`);
      expect(scrape).not.toContain(ORG);
    } finally {
      clearInterval(keepUsing);
    }
  }, 120_000);

  it("credentials missing, refused, or of the wrong kind: Ready False with the keys' reasons; fixed credentials are listed at once", async () => {
    await createInventory('missing', { organizationId: ORG, credentialsSecretRef: { name: 'not-yet' } });
    const missing = await until('missing', (i) => ready(i)?.reason === 'CredentialsMissing', 'CredentialsMissing');
    expect(ready(missing)?.status).toBe('False');
    // The Secret's watch wakes it (no wait for a requeue).
    await credentials(teamA, 'not-yet', suite.adminKey);
    await until('missing', (i) => ready(i)?.status === 'True', 'Ready once the Secret exists', 10_000);

    // An entry no API key is that long (1 MiB): refused before any platform client is made.
    await suite.core.createNamespacedSecret({
      namespace: teamA,
      body: { metadata: { name: 'huge' }, data: { apiKey: Buffer.alloc(768 * 1024, 'a').toString('base64') } },
    });
    await createInventory('huge', { organizationId: ORG, credentialsSecretRef: { name: 'huge' } });
    const huge = await until('huge', (i) => ready(i)?.status === 'False', 'not a key');
    expect(ready(huge)).toEqual(expect.objectContaining({ reason: 'CredentialsMissing', message: expect.stringContaining('is not a platform API key') }));

    // A key the platform does not know: 401.
    await credentials(
      teamA,
      'unknown-key',
      randomBytes(48)
        .toString('base64')
        .replace(/[^a-z0-9]/g, '')
        .padEnd(64, 'a')
        .slice(0, 64)
        .toLowerCase(),
    );
    await createInventory('refused', { organizationId: ORG, credentialsSecretRef: { name: 'unknown-key' } });
    const refused = await until('refused', (i) => ready(i)?.status === 'False' && ready(i)?.reason !== undefined, 'refused');
    expect(ready(refused)).toEqual(expect.objectContaining({ reason: 'CredentialsRefused', message: expect.stringContaining('401') }));

    // A project-scoped key cannot list its organization's keys (403), and GET /auth says it is an organization-kind key.
    const projectKey = await alice.createOrganizationKey(ORG, { keyName: 'inventory-wrong-kind', projectId: PROJECT });
    byHand.push(projectKey);
    await credentials(teamA, 'project-key', projectKey.key);
    await createInventory('wrong-kind', { organizationId: ORG, credentialsSecretRef: { name: 'project-key' } });
    const wrong = await until('wrong-kind', (i) => ready(i)?.status === 'False', 'wrong kind');
    expect(ready(wrong)).toEqual(
      expect.objectContaining({ reason: 'CredentialsWrongKind', message: expect.stringContaining('project-scoped key cannot list') }),
    );
    // Personal scope with that key: the wrong kind too (personal keys are listed with a personal key).
    await createInventory('personal-wrong-kind', { scope: 'Personal', credentialsSecretRef: { name: 'project-key' } });
    const personal = await until('personal-wrong-kind', (i) => ready(i)?.status === 'False', 'wrong kind (personal)');
    expect(ready(personal)).toEqual(expect.objectContaining({ reason: 'CredentialsWrongKind', message: expect.stringContaining('needs a personal API key') }));
    // Nothing a failed list could show: no counts, no lists.
    for (const i of [missing, refused, wrong, personal]) expect(i.status?.live).toBeUndefined();
    expect(JSON.stringify([refused, wrong, personal])).not.toContain(projectKey.key);

    // Personal scope with a personal key: alice's own personal keys, none of them managed here.
    await createInventory('personal', { scope: 'Personal', credentialsSecretRef: { name: 'neon-admin' } });
    const own = await until('personal', (i) => ready(i)?.status === 'True', 'personal listed');
    expect(own.status?.live).toBeGreaterThanOrEqual(1);
    expect(own.status?.notManagedKeys?.every((k) => k.kind === 'Personal' && !k.managed)).toBe(true);

    // Its spec changed to the organization: a first list again, not an event for each of its keys.
    // (Once the shared organization list shows every key made so far: a key made after the list the
    // switched inventory first reads is news, and rightly an event.)
    const orgKeys = await platformKeys();
    await until('org', (i) => i.status?.live === orgKeys.length, 'the shared organization list current');
    const current = (await suite.objects.getNamespacedCustomObject({
      group,
      version,
      namespace: teamA,
      plural: 'apikeyinventories',
      name: 'personal',
    })) as Inventory & { spec: unknown };
    await suite.objects.replaceNamespacedCustomObject({
      group,
      version,
      namespace: teamA,
      plural: 'apikeyinventories',
      name: 'personal',
      body: { ...current, spec: { scope: 'Organization', organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } } },
    });
    const switched = await until(
      'personal',
      (i) => i.status?.observedGeneration === 2 && ready(i)?.status === 'True' && i.status.live === orgKeys.length,
      'the organization listed',
    );
    expect(switched.status?.notManagedKeys?.some((k) => k.kind === 'Organization')).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 2 * DRIFT_MS));
    const notManagedEvents = (
      await suite.core.listNamespacedEvent({
        namespace: teamA,
        fieldSelector: 'involvedObject.kind=ApiKeyInventory,involvedObject.name=personal,reason=KeyNotManaged',
      })
    ).items;
    expect(notManagedEvents.map((e) => e.message)).toEqual([]);
  }, 90_000);
});
