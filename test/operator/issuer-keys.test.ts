// Issue 40, on a real kube-apiserver + etcd (with its namespace and garbage collector controllers)
// and the emulator over HTTP: a tenant bound to the built-in `edit` role, in a namespace holding no
// platform credential, gets a working project key through a ClusterKeyIssuer whose policy allows
// its namespace and project; requests the policy does not allow (another project, an organization
// key where only Project is allowed, a namespace no rule matches, an issuer that does not exist) are
// refused with NotAllowed / IssuerNotFound and cost no platform create; a rule's cap holds under 30
// concurrent creates, and a freed slot goes to one waiter; a resource moved from namespace
// credentials to an issuer of the same user keeps its key.
import { describe, expect, it } from '@jest/globals';
import { PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions, type CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { soleLeadership } from '../../src/operator/runtime/write-fence.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { createNamespace, customObjects, emulatorAdmin, eventually, operatorKubeConfig, replaceCustomObject } from './support.ts';
import { type Condition, group, operatorSuite, readUntil, version } from './fixture.ts';

const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';
const OTHER_PROJECT = 'bold-meadow-00000002';
const DRIFT_MS = 2_000;
const LABEL = 'keys.neon.dev/test-issuer';
/** This suite's issuers: its operator reconciles only these (the suites share one apiserver). */
const SUITE_LABEL = 'keys.neon.dev/test-suite';

interface KeyObject {
  metadata: { name: string; namespace: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec: Record<string, unknown>;
  status?: { keyId?: number; issuer?: string; conditions?: Condition[] };
}

describe('keys through a ClusterKeyIssuer, for tenants without a platform credential', () => {
  let issuersNs: string;
  let teamA: string;
  let teamB: string;
  let teamC: string;
  let alice: PlatformClient;
  const tenants = new Map<string, Promise<CustomObjectsApi>>();
  const records: ReconcileRecord[] = [];
  const issuers: string[] = [];
  const suffix = Math.random().toString(36).slice(2, 8);

  const plural = (kind: string): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
  const read = async (kind: string, namespace: string, name: string): Promise<KeyObject> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: plural(kind), name })) as KeyObject;
  const condition = (r: KeyObject, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const until = (kind: string, namespace: string, name: string, test: (r: KeyObject) => boolean, what: string, timeoutMs = 30_000): Promise<KeyObject> =>
    readUntil(() => read(kind, namespace, name), test, timeoutMs, `${namespace}/${name}: ${what}`);
  const ready = (r: KeyObject): boolean => condition(r, 'Ready')?.status === 'True';
  const refusedWith =
    (reason: string) =>
    (r: KeyObject): boolean =>
      condition(r, 'Ready')?.reason === reason;
  /** Creates are POSTs to the organization's keys: the only platform request that mints. */
  const creates = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(suite.emulator.adminUrl, 'GET', '/requests'))
      .filter((r) => r.method === 'POST' && /organizations\/[^/]+\/api_keys$/.test(r.route))
      .reduce((n, r) => n + r.count, 0);
  const warnings = async (namespace: string, name: string, reason: string): Promise<string[]> =>
    (await suite.core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name},reason=${reason},type=Warning` })).items.map(
      (e) => e.message ?? '',
    );
  const createIssuer = async (name: string, spec: Record<string, unknown>): Promise<void> => {
    await suite.objects.createClusterCustomObject({
      group,
      version,
      plural: 'clusterkeyissuers',
      body: { apiVersion: `${group}/${version}`, kind: 'ClusterKeyIssuer', metadata: { name, labels: { [SUITE_LABEL]: suffix } }, spec },
    });
    issuers.push(name);
  };
  /** A tenant bound to the built-in `edit` ClusterRole in its namespace, and nothing else. */
  const tenant = async (namespace: string): Promise<CustomObjectsApi> => {
    const rbac = suite.cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await suite.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'developer' } } });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'developer-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ kind: 'ServiceAccount', name: 'developer', namespace }],
      },
    });
    const kc: KubeConfig = suite.cp.kubeConfigForToken(await suite.cp.mintServiceAccountToken(namespace, 'developer', 3600));
    return customObjects(kc);
  };
  const projectKey = (namespace: string, name: string, spec: Record<string, unknown>) => ({
    apiVersion: `${group}/${version}`,
    kind: 'ProjectApiKey',
    metadata: { name, namespace },
    spec,
  });
  const asTenant = async (namespace: string, kind: string, name: string, spec: Record<string, unknown>): Promise<void> => {
    if (!tenants.has(namespace)) tenants.set(namespace, tenant(namespace));
    const api = await tenants.get(namespace)!;
    await api.createNamespacedCustomObject({ group, version, namespace, plural: plural(kind), body: { ...projectKey(namespace, name, spec), kind } });
  };

  const suite = operatorSuite({
    namespaces: ['issuers', 'issuer-a', 'issuer-b', 'issuer-c'],
    credentials: false,
    before: async (s) => {
      [issuersNs = '', teamA = '', teamB = '', teamC = ''] = s.namespaces;
      // The platform team's label on the Namespace object (tenants with `edit` cannot change it).
      for (const ns of [teamA, teamB]) {
        const current = await s.core.readNamespace({ name: ns });
        await s.core.replaceNamespace({
          name: ns,
          body: { ...current, metadata: { ...current.metadata, labels: { ...current.metadata?.labels, [LABEL]: suffix } } },
        });
      }
      alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
      await s.core.createNamespacedSecret({ namespace: issuersNs, body: { metadata: { name: 'org-admin' }, stringData: { apiKey: s.adminKey } } });
    },
    operator: () => ({
      namespaces: [issuersNs, teamA, teamB, teamC],
      issuerSecretsNamespace: issuersNs,
      issuerLabelSelector: `${SUITE_LABEL}=${suffix}`,
      workers: 8,
      driftIntervalMs: DRIFT_MS,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'issuer-keys',
      onReconcile: (record) => {
        records.push(record);
      },
    }),
    after: async (s) => {
      for (const name of issuers) await s.objects.deleteClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name }).catch(() => undefined);
      // Without the operator, nothing lifts the issuers' finalizers: a person's way out.
      for (const name of issuers) {
        const current = (await s.objects.getClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name }).catch(() => undefined)) as
          { metadata: Record<string, unknown> } | undefined;
        if (current !== undefined)
          await s.objects
            .replaceClusterCustomObject({
              group,
              version,
              plural: 'clusterkeyissuers',
              name,
              body: { ...current, metadata: { ...current.metadata, finalizers: [] } },
            })
            .catch(() => undefined);
      }
    },
    timeoutMs: 90_000,
  });

  it('gives a tenant with only `edit`, in a namespace with no platform credential, a working project key; refuses what the policy does not allow, with no create', async () => {
    const issuer = `team-projects-${suffix}`;
    await createIssuer(issuer, {
      organizationId: ORG,
      credentialsSecretRef: { name: 'org-admin' },
      allow: [{ namespaces: { selector: { matchLabels: { [LABEL]: suffix } } }, kinds: ['Project'], projects: [PROJECT] }],
    });
    expect((await suite.core.listNamespacedSecret({ namespace: teamA })).items.filter((s) => s.type !== 'kubernetes.io/service-account-token')).toEqual([]);
    await asTenant(teamA, 'ProjectApiKey', 'app', { projectId: PROJECT, issuerRef: { name: issuer } });
    const app = await until('ProjectApiKey', teamA, 'app', ready, 'Ready');
    // The key works for its project, and it is the one status records.
    const secret = await suite.core.readNamespacedSecret({ namespace: teamA, name: 'app' });
    const key = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
    const asKey = new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: key, retry: { maxAttempts: 1 } });
    await expect(asKey.getProject(PROJECT)).resolves.toMatchObject({ id: PROJECT });
    expect((await alice.listOrganizationKeys(ORG)).map((k) => k.id)).toContain(app.status?.keyId);

    const before = await creates();
    await asTenant(teamA, 'ProjectApiKey', 'other-project', { projectId: OTHER_PROJECT, issuerRef: { name: issuer } });
    await asTenant(teamA, 'ApiKey', 'org-key', { scope: 'Organization', issuerRef: { name: issuer } });
    await asTenant(teamC, 'ProjectApiKey', 'unlisted', { projectId: PROJECT, issuerRef: { name: issuer } });
    await asTenant(teamC, 'ProjectApiKey', 'no-issuer', { projectId: PROJECT, issuerRef: { name: `missing-${suffix}` } });
    const refused: [string, string, string, string, RegExp][] = [
      ['ProjectApiKey', teamA, 'other-project', 'NotAllowed', new RegExp(`ClusterKeyIssuer ${issuer} does not allow Project keys of project ${OTHER_PROJECT}`)],
      [
        'ApiKey',
        teamA,
        'org-key',
        'NotAllowed',
        new RegExp(`ClusterKeyIssuer ${issuer} does not allow Organization keys in namespace ${teamA}: its rules for this namespace allow only Project keys`),
      ],
      ['ProjectApiKey', teamC, 'unlisted', 'NotAllowed', new RegExp(`ClusterKeyIssuer ${issuer} does not allow namespace ${teamC}`)],
      ['ProjectApiKey', teamC, 'no-issuer', 'IssuerNotFound', new RegExp(`ClusterKeyIssuer missing-${suffix} does not exist`)],
    ];
    for (const [kind, ns, name, reason, message] of refused) {
      const r = await until(kind, ns, name, refusedWith(reason), reason);
      expect(condition(r, 'Ready')).toMatchObject({ status: 'False', reason });
      expect(condition(r, 'KeyIssued')).toMatchObject({ status: 'False', reason });
      expect(condition(r, 'Ready')?.message).toMatch(message);
      expect(r.status?.keyId).toBeUndefined();
      await eventually(
        async () => ((await warnings(ns, name, reason)).some((m) => message.test(m)) ? true : undefined),
        10_000,
        `${name}: a Warning event ${reason}`,
      );
      // No create was ever sent for it, nor anything but a refusal decided.
      const mine = records.filter((x) => x.namespace === ns && x.name === name);
      expect(mine.length).toBeGreaterThan(0);
      expect(mine.filter((x) => x.createSent)).toEqual([]);
      expect(new Set(mine.flatMap((x) => x.actions))).toEqual(new Set(['Blocked']));
    }
    expect(await creates()).toBe(before);
  }, 120_000);

  it("holds a rule's cap of 5 under 30 concurrent creates: 5 keys, 25 KeyLimitReached, 5 platform creates; a freed slot goes to one waiter", async () => {
    const issuer = `capped-${suffix}`;
    await createIssuer(issuer, {
      organizationId: ORG,
      credentialsSecretRef: { name: 'org-admin' },
      allow: [{ namespaces: { names: [teamB] }, kinds: ['Project'], maxKeysPerNamespace: 5 }],
    });
    const before = await creates();
    const names = Array.from({ length: 30 }, (_, i) => `race-${i}`);
    await Promise.all(names.map((name) => asTenant(teamB, 'ProjectApiKey', name, { projectId: PROJECT, issuerRef: { name: issuer } })));
    const settled = async (): Promise<KeyObject[] | undefined> => {
      const all = await Promise.all(names.map((name) => read('ProjectApiKey', teamB, name)));
      return all.every((r) => ready(r) || refusedWith('KeyLimitReached')(r)) ? all : undefined;
    };
    const all = await eventually(settled, 90_000, 'every racer Ready or refused');
    const holders = all.filter(ready);
    expect(holders).toHaveLength(5);
    expect(all.filter(refusedWith('KeyLimitReached'))).toHaveLength(25);
    for (const r of all.filter(refusedWith('KeyLimitReached'))) {
      expect(condition(r, 'Ready')?.message).toMatch(new RegExp(`namespace ${teamB} holds 5 keys through ClusterKeyIssuer ${issuer}`));
      expect(r.status?.keyId).toBeUndefined();
    }
    expect(await creates()).toBe(before + 5);

    // One key goes: its slot goes to exactly one of the 25 waiting.
    const freed = holders[0]!;
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: teamB, plural: 'projectapikeys', name: freed.metadata.name });
    const after = await eventually(
      async () => {
        const left = await Promise.all(names.filter((n) => n !== freed.metadata.name).map((name) => read('ProjectApiKey', teamB, name)));
        return left.filter(ready).length === 5 ? left : undefined;
      },
      60_000,
      'a waiter took the freed slot',
    );
    expect(after.filter(ready)).toHaveLength(5);
    expect(after.filter(refusedWith('KeyLimitReached'))).toHaveLength(24);
    expect(await creates()).toBe(before + 6);
    const live = (await alice.listOrganizationKeys(ORG)).map((k) => k.id);
    expect(live).not.toContain(freed.status?.keyId);
    // The waiters' creates stayed at one: the others were refused again, not created and revoked.
    for (const r of after.filter(ready)) expect(live).toContain(r.status?.keyId);
  }, 180_000);

  it('keeps the key, same id, when a resource moves from namespace credentials to an issuer of the same user', async () => {
    const issuer = `org-keys-${suffix}`;
    await createIssuer(issuer, {
      organizationId: ORG,
      credentialsSecretRef: { name: 'org-admin' },
      allow: [{ namespaces: { names: [teamC] }, kinds: ['Organization'] }],
    });
    await suite.core.createNamespacedSecret({ namespace: teamC, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: suite.adminKey } } });
    await suite.apply(
      'ApiKey',
      { name: 'deployer', namespace: teamC },
      { scope: 'Organization', organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } },
      teamC,
    );
    const first = await until('ApiKey', teamC, 'deployer', ready, 'Ready with namespace credentials');
    const before = await creates();
    await replaceCustomObject<KeyObject>(suite.objects, { group, version, namespace: teamC, plural: 'apikeys', name: 'deployer' }, (r) => {
      const { credentialsSecretRef: _dropped, ...spec } = r.spec;
      r.spec = { ...spec, issuerRef: { name: issuer } };
    });
    // Moved: reconciled with the issuer's credentials (its generation observed), still Ready, same key.
    const moved = await until(
      'ApiKey',
      teamC,
      'deployer',
      (r) => ready(r) && (condition(r, 'Ready') as Condition & { observedGeneration?: number }).observedGeneration === 2,
      'Ready after the move',
    );
    expect(moved.status?.keyId).toBe(first.status?.keyId);
    expect(await creates()).toBe(before);
    expect((await alice.listOrganizationKeys(ORG)).map((k) => k.id)).toContain(first.status?.keyId);
  }, 90_000);
  it('revokes a key an issuer made with its resource: moved to namespace credentials and annotated release-without-revoke, it is still revoked', async () => {
    const issuer = `org-keys-${suffix}`;
    await suite.apply('ApiKey', { name: 'leaver', namespace: teamC }, { scope: 'Organization', issuerRef: { name: issuer } }, teamC);
    const issued = await until('ApiKey', teamC, 'leaver', ready, 'Ready through the issuer');
    expect(issued.status?.issuer).toBe(issuer);
    // To credentials of the namespace (the same user: the key stays), asking to be let go unrevoked.
    await replaceCustomObject<KeyObject>(suite.objects, { group, version, namespace: teamC, plural: 'apikeys', name: 'leaver' }, (r) => {
      const { issuerRef: _dropped, ...spec } = r.spec;
      r.spec = { ...spec, organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } };
      r.metadata.annotations = { ...r.metadata.annotations, 'keys.neon.dev/release-without-revoke': 'true' };
    });
    const moved = await until(
      'ApiKey',
      teamC,
      'leaver',
      (r) => ready(r) && (condition(r, 'Ready') as Condition & { observedGeneration?: number }).observedGeneration === 2,
      'Ready with namespace credentials',
    );
    expect(moved.status).toMatchObject({ keyId: issued.status?.keyId, issuer });
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: teamC, plural: 'apikeys', name: 'leaver' });
    await eventually(
      async () =>
        await read('ApiKey', teamC, 'leaver').then(
          () => undefined,
          () => true,
        ),
      30_000,
      'leaver deleted',
    );
    expect((await alice.listOrganizationKeys(ORG)).map((k) => k.id)).not.toContain(issued.status?.keyId);
  }, 90_000);
  it("a key through an issuer rests (the issuer's verification does not wake it); a policy that stops allowing it reports NotAllowed and leaves the key live, and its delete still revokes it", async () => {
    const issuer = `team-projects-${suffix}`;
    const app = await read('ProjectApiKey', teamA, 'app');
    const keyId = app.status?.keyId;
    const mine = (since: number) => records.filter((r) => r.namespace === teamA && r.name === 'app' && r.startedAt >= since);
    // Two drift intervals of passes, every one at rest: no apiserver read, no platform request but the drift list.
    await eventually(
      async () => {
        const recent = mine(Date.now() - 2.2 * DRIFT_MS);
        return recent.length >= 2 && recent.every((r) => r.atRest === true) ? true : undefined;
      },
      30_000,
      'app at rest',
    );
    const issuerVersion = async (): Promise<string | undefined> =>
      (
        (await suite.objects.getClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name: issuer })) as {
          metadata: { resourceVersion?: string };
        }
      ).metadata.resourceVersion;
    // The issuer's status written (its verifiedAt, as once an hour): its keys stay at rest.
    const before = await issuerVersion();
    const current = (await suite.objects.getClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name: issuer })) as {
      status?: Record<string, unknown>;
    };
    await suite.objects.patchClusterCustomObjectStatus(
      {
        group,
        version,
        plural: 'clusterkeyissuers',
        name: issuer,
        body: { status: { ...current.status, verifiedAt: new Date(Date.now() - 3_600_000).toISOString() } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(await issuerVersion()).not.toBe(before);
    const statusWritten = Date.now();
    await eventually(
      async () => (mine(statusWritten).filter((r) => r.atRest === true).length >= 2 ? true : undefined),
      30_000,
      'app checked at rest twice after the status write',
    );
    expect(mine(statusWritten).filter((r) => r.atRest !== true)).toEqual([]);

    // The policy no longer allows project keys there: reported, never revoked because of it.
    await suite.objects.patchClusterCustomObject(
      { group, version, plural: 'clusterkeyissuers', name: issuer, body: { spec: { allow: [{ namespaces: { names: [teamC] }, kinds: ['Project'] }] } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const refused = await until('ProjectApiKey', teamA, 'app', refusedWith('NotAllowed'), 'NotAllowed once the policy changed');
    expect(refused.status?.keyId).toBe(keyId);
    expect((await alice.listOrganizationKeys(ORG)).map((k) => k.id)).toContain(keyId);
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: teamA, plural: 'projectapikeys', name: 'app' });
    await eventually(
      async () =>
        await read('ProjectApiKey', teamA, 'app').then(
          () => undefined,
          () => true,
        ),
      30_000,
      'app deleted',
    );
    expect((await alice.listOrganizationKeys(ORG)).map((k) => k.id)).not.toContain(keyId);
  }, 120_000);
  it("the cap holds across a leader change: 30 concurrent creates against 5, the leader fenced and gone in the race (as a lost Lease leaves it), a new leader settles them: 5 keys, 25 KeyLimitReached, every key ever made a holder's", async () => {
    const raceNs = await createNamespace(suite.cp, 'issuer-race');
    const label = `race-${suffix}`;
    const issuer = `race-${suffix}`;
    await suite.apply(
      'ClusterKeyIssuer',
      { name: issuer, labels: { [SUITE_LABEL]: label } },
      {
        organizationId: ORG,
        credentialsSecretRef: { name: 'org-admin' },
        allow: [{ namespaces: { names: [raceNs] }, kinds: ['Project'], maxKeysPerNamespace: 5 }],
      },
    );
    issuers.push(issuer);
    // A leader as the runtime runs one: every write fenced by its leadership (runtime/write-fence.ts).
    const leader = async (identity: string, stopped: AbortController): Promise<RunningOperator> =>
      startOperator({
        kubeConfig: await operatorKubeConfig(suite.cp),
        platformBaseUrl: suite.emulator.baseUrl,
        namespaces: [issuersNs, raceNs],
        issuerSecretsNamespace: issuersNs,
        issuerLabelSelector: `${SUITE_LABEL}=${label}`,
        workers: 8,
        driftIntervalMs: DRIFT_MS,
        pendingGraceMs: 2_000,
        maxBackoffMs: 2_000,
        logger: createLogger({ level: 'silent' }),
        identity,
        leadership: soleLeadership(stopped.signal),
      });
    const firstLease = new AbortController();
    let first: RunningOperator | undefined = await leader('race-first', firstLease);
    let second: RunningOperator | undefined;
    try {
      const names = Array.from({ length: 30 }, (_, i) => `racer-${i}`);
      await Promise.all(names.map((name) => asTenant(raceNs, 'ProjectApiKey', name, { projectId: PROJECT, issuerRef: { name: issuer } })));
      // The leader loses its Lease once the race's first create reached the platform: from that
      // moment it writes nothing (a create in flight may still be answered, its outcome unrecorded).
      const made = async (): Promise<{ id: number; name: string; revoked: boolean }[]> =>
        (await emulatorAdmin<{ id: number; name: string; revoked: boolean }[]>(suite.emulator.adminUrl, 'GET', '/keys')).filter((k) =>
          k.name.startsWith(`${raceNs}-`),
        );
      await eventually(async () => ((await made()).length > 0 ? true : undefined), 30_000, 'a first create of the race');
      firstLease.abort();
      await first.stop();
      first = undefined;
      second = await leader('race-second', new AbortController());
      const settled = await eventually(
        async () => {
          const all = await Promise.all(names.map((name) => read('ProjectApiKey', raceNs, name)));
          return all.every((r) => ready(r) || refusedWith('KeyLimitReached')(r)) ? all : undefined;
        },
        90_000,
        'every racer Ready or refused',
      );
      const holders = settled.filter(ready);
      expect(holders).toHaveLength(5);
      expect(settled.filter(refusedWith('KeyLimitReached'))).toHaveLength(25);
      // Every key the platform ever made for the race (revoked ones too: a create the first leader
      // left in flight, recovered by the second) is a holder's; 5 are live.
      const keys = await made();
      const owners = new Set(keys.map((k) => k.name.slice(`${raceNs}-`.length).replace(/-[a-z0-9]{8}$/, '')));
      expect([...owners].sort()).toEqual(holders.map((r) => r.metadata.name).sort());
      expect(keys.filter((k) => !k.revoked)).toHaveLength(5);
      // A delete refused is said with the keys still live, should they not all go.
      const refusedDeletes: string[] = [];
      for (const name of names)
        await suite.objects
          .deleteNamespacedCustomObject({ group, version, namespace: raceNs, plural: 'projectapikeys', name })
          .catch((error: unknown) => refusedDeletes.push(`${name}: ${(error as { code?: unknown }).code ?? String(error)}`));
      await eventually(
        async () => {
          const live = (await made()).filter((k) => !k.revoked);
          if (live.length === 0) return true;
          // What each resource still there says (its finalizer holds it until its key is revoked).
          const lingering = await Promise.all(
            names.map(async (name) => {
              const r = await read('ProjectApiKey', raceNs, name).catch(() => undefined);
              const c = r === undefined ? undefined : condition(r, 'Ready');
              return r === undefined ? undefined : `${name} (key ${String(r.status?.keyId)}): ${c?.reason ?? 'no Ready'}: ${c?.message ?? ''}`;
            }),
          );
          throw new Error(
            `still live: ${live.map((k) => k.name).join(', ')}; deletes refused: ${refusedDeletes.join(', ') || 'none'}; ` +
              `resources left: ${lingering.filter((l) => l !== undefined).join('; ') || 'none'}`,
          );
        },
        60_000,
        "the race's keys revoked",
      );
    } finally {
      await first?.stop();
      await second?.stop();
      await suite.core.deleteNamespace({ name: raceNs }).catch(() => undefined);
    }
  }, 240_000);
});
