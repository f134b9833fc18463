// What a tenant names does not grow a per-organization structure without bound, and does not get
// it into another organization's line (issue 41). spec.organizationId is the tenant's to write:
// - through the operator (a real kube-apiserver, the emulator over HTTP, the operator in-process):
//   a create for an organization its credentials are not a member of is refused before that
//   organization's line, beside an issuer of the tenant's own organization too, while the victim
//   organization's creates are all under way; and a few resources the tenant makes again and again
//   with 10,000 distinct ids (organizationId is immutable), each seen by the reconciler, leave the
//   structures per organization (RunningOperator.perOrganization) at their bounds (docs/security.md, Bounds);
// - the operator's own org key limiters (manager.ts operatorOrgKeyLimiters) with a real
//   PlatformClient against the emulator, driven directly as a create reaches them once its
//   membership is known: 10,000 distinct organizations keep only those with a create in the last
//   seconds (the limiter's memory), and one once all are idle. Before this, all 10,000 were kept.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type KubernetesObject } from '@kubernetes/client-node';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { operatorOrgKeyLimiters } from '../../src/operator/manager.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { type Condition, group, operatorSuite, readUntil, version } from './fixture.ts';

const VICTIM_ORG = 'org-victim-00000001';
const TENANT_ORG = 'org-tenant-00000002';
const SUITE_LABEL = 'keys.neon.dev/test-suite';
/**
 * Distinct organization ids the tenant names through its resources: 300 in CI (about 20 s), where
 * the bounds are the same constants as at any count; ORG_BOUNDS_IDS=10000 for the full run
 * (about 17 minutes: docs/testing.md).
 */
const NAMED = Number(process.env.ORG_BOUNDS_IDS ?? 300);
/** The tenant's namespaces for them (each namespace's steps are paced apart: runtime/queue.ts) and resources in each, made again with each next id. */
const NAMED_NAMESPACES = 5;
const PER_NAMESPACE = 4;

interface Resource {
  metadata: { name: string };
  status?: { keyId?: number; conditions?: Condition[] };
}
interface AdminKey {
  id: number;
  name: string;
  organizationId: string | null;
  userId: string | null;
  revoked: boolean;
}

describe('what a tenant names per organization', () => {
  /** More of the tenant's namespaces, with the same credentials. */
  let victimNs: string;
  let tenantNs: string;
  let issuersNs: string;
  const namedNs: string[] = [];
  const suffix = Math.random().toString(36).slice(2, 8);
  const issuerName = `tenant-keys-${suffix}`;
  const records: ReconcileRecord[] = [];
  /** Per tenant resource (`namespace/name`), the organization ids the key reconciler was shown for it (the informers' cache, as it reads it). */
  const seen = new Map<string, Set<string>>();
  const waiters: { name: string; organization: string; resolve: () => void }[] = [];

  const adminApi = <T>(method: string, path: string, body?: unknown): Promise<T> => emulatorAdmin<T>(suite.emulator.adminUrl, method, path, body);
  const create = (namespace: string, name: string, spec: Record<string, unknown>): Promise<unknown> =>
    suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'apikeys',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { name }, spec },
    });
  const get = async (namespace: string, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name })) as Resource;
  const ready = (r: Resource): Condition | undefined => r.status?.conditions?.find((c) => c.type === 'Ready');
  const until = (namespace: string, name: string, test: (r: Resource) => boolean, what: string, timeoutMs = 60_000): Promise<Resource> =>
    readUntil(() => get(namespace, name), test, timeoutMs, `${namespace}/${name}: ${what}`);
  /** The reconciler was shown this organization id for the tenant's resource `name` (`namespace/name`). */
  const shown = (name: string, organization: string): Promise<void> =>
    new Promise((resolve) => {
      if (seen.get(name)?.has(organization) === true) resolve();
      else waiters.push({ name, organization, resolve });
    });

  // Declared before the fixture: jest runs afterAll hooks in the order declared, and this one needs the operator.
  afterAll(async () => {
    // The keys made here are revoked and their finalizers lifted by the operator before it stops.
    for (const [namespace, name] of [
      [tenantNs, 'own'],
      [victimNs, 'victim'],
    ] as const) {
      if (namespace === undefined) continue;
      await suite.objects.deleteNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name }).catch(() => undefined);
      await eventually(
        async () =>
          await get(namespace, name).then(
            () => undefined,
            () => true,
          ),
        60_000,
        `${name} gone`,
      ).catch(() => undefined);
    }
  });

  const suite = operatorSuite({
    namespaces: ['org-victim', 'org-tenant', 'org-issuers', ...Array.from({ length: NAMED_NAMESPACES }, (_, k) => `org-named-${k}`)],
    credentials: false,
    emulator: {
      seed: {
        organizations: [
          { id: VICTIM_ORG, name: 'Victim' },
          { id: TENANT_ORG, name: 'Tenant' },
        ],
        users: [
          { name: 'alice', orgRoles: { [VICTIM_ORG]: 'admin' } },
          { name: 'tina', orgRoles: { [TENANT_ORG]: 'admin' } },
          { name: 'ivan', orgRoles: { [TENANT_ORG]: 'admin' } },
        ],
        projects: [],
      },
    },
    before: async (s) => {
      [victimNs = '', tenantNs = '', issuersNs = ''] = s.namespaces;
      namedNs.push(...s.namespaces.slice(3));
      const tinaKey = s.userKey('tina');
      await suite.core.createNamespacedSecret({ namespace: victimNs, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: s.userKey('alice') } } });
      // The tenant's own credentials: an administrator of its own organization only.
      await suite.core.createNamespacedSecret({ namespace: tenantNs, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: tinaKey } } });
      for (const ns of namedNs) {
        await suite.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: tinaKey } } });
      }
      // And an issuer of its own organization, allowing its namespace Organization keys.
      await suite.core.createNamespacedSecret({
        namespace: issuersNs,
        body: { metadata: { name: 'tenant-issuer' }, stringData: { apiKey: s.userKey('ivan') } },
      });
      await suite.apply(
        'ClusterKeyIssuer',
        { name: issuerName, labels: { [SUITE_LABEL]: suffix } },
        {
          organizationId: TENANT_ORG,
          credentialsSecretRef: { name: 'tenant-issuer' },
          allow: [{ namespaces: { names: [tenantNs] }, kinds: ['Organization'] }],
        },
      );
    },
    operator: () => ({
      namespaces: [victimNs, tenantNs, issuersNs, ...namedNs],
      issuerSecretsNamespace: issuersNs,
      issuerLabelSelector: `${SUITE_LABEL}=${suffix}`,
      workers: 8,
      // One create of an organization under way at a time: the victim's one create fills its organization.
      createsPerOrganization: 1,
      logger: createLogger({ level: 'silent' }),
      identity: 'organization-bounds-suite',
      onReconcile: (record) => void records.push(record),
      cacheDelivery: (kind, namespace, name, cached: KubernetesObject | undefined) => {
        const organization = (cached as { spec?: { organizationId?: string } } | undefined)?.spec?.organizationId;
        if (kind === 'ApiKey' && namedNs.includes(namespace) && organization !== undefined) {
          const resource = `${namespace}/${name}`;
          let ids = seen.get(resource);
          if (ids === undefined) seen.set(resource, (ids = new Set()));
          ids.add(organization);
          for (let i = waiters.length - 1; i >= 0; i--) {
            const w = waiters[i]!;
            if (w.name === resource && w.organization === organization) {
              waiters.splice(i, 1);
              w.resolve();
            }
          }
        }
        return cached;
      },
    }),
    after: async (s) => {
      await s.objects.deleteClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name: issuerName }).catch(() => undefined);
      await s.objects
        .patchClusterCustomObject({
          group,
          version,
          plural: 'clusterkeyissuers',
          name: issuerName,
          body: [{ op: 'replace', path: '/metadata/finalizers', value: [] }],
        })
        .catch(() => undefined);
    },
  });

  beforeAll(async () => {
    await eventually(async () => (suite.operator.ready() ? true : undefined), 60_000, 'operator ready');
  });

  it("a create for an organization its credentials are not a member of never enters that organization's line, even while all its creates are under way: beside an issuer of the tenant's organization, or with its own credentials", async () => {
    // The tenant's own key through its issuer: from then on a new key of its namespace naming the
    // issuer's organization may wait for that organization's turn unread.
    await create(tenantNs, 'own', { scope: 'Organization', keyName: 'own', issuerRef: { name: issuerName } });
    await until(tenantNs, 'own', (r) => ready(r)?.status === 'True', 'Ready');

    // The victim organization's one create at a time (createsPerOrganization 1), held 20 s at the platform.
    await adminApi('PUT', '/faults', {
      rules: [{ method: 'POST', route: '/api/v2/organizations/:org_id/api_keys', kind: 'latency', latencyMs: 20_000, probability: 1, times: 1 }],
    });
    await create(victimNs, 'victim', { scope: 'Organization', organizationId: VICTIM_ORG, keyName: 'victim', credentialsSecretRef: { name: 'neon-admin' } });
    await eventually(
      async () => ((await adminApi<{ rules: { injected: number }[] }>('GET', '/faults')).rules[0]?.injected === 1 ? true : undefined),
      60_000,
      "the victim's create held at the platform",
    );

    // The tenant names the victim's organization beside its issuer, and with its own credentials.
    await create(tenantNs, 'beside-issuer', { scope: 'Organization', organizationId: VICTIM_ORG, keyName: 'beside-issuer', issuerRef: { name: issuerName } });
    await create(tenantNs, 'own-credentials', {
      scope: 'Organization',
      organizationId: VICTIM_ORG,
      keyName: 'own-credentials',
      credentialsSecretRef: { name: 'neon-admin' },
    });
    const besideIssuer = await until(tenantNs, 'beside-issuer', (r) => ready(r)?.reason === 'NotAllowed', 'NotAllowed');
    expect(ready(besideIssuer)?.message).toContain(`issues keys of organization ${TENANT_ORG}, not of spec.organizationId ${VICTIM_ORG}`);
    const ownCredentials = await until(tenantNs, 'own-credentials', (r) => ready(r)?.reason === 'NotAllowed', 'NotAllowed');
    expect(ready(ownCredentials)?.message).toContain(`do not belong to organization ${VICTIM_ORG}`);
    // Both refused while the victim's create still held its organization's only place.
    expect((await get(victimNs, 'victim')).status?.keyId).toBeUndefined();

    // Neither ever waited in a line: no pass of theirs was sent to one (ReconcileRecord.deferred).
    const theirs = records.filter((r) => r.namespace === tenantNs && (r.name === 'beside-issuer' || r.name === 'own-credentials'));
    expect(new Set(theirs.map((r) => r.name))).toEqual(new Set(['beside-issuer', 'own-credentials']));
    expect(theirs.filter((r) => r.deferred === true || r.createSent)).toEqual([]);

    // The victim's key is made once its create is answered; the victim organization has its key only.
    await until(victimNs, 'victim', (r) => ready(r)?.status === 'True', 'Ready', 120_000);
    const keys = await adminApi<AdminKey[]>('GET', '/keys');
    const alice = suite.emulator.bootstrap.users.find((u) => u.name === 'alice')?.id;
    expect(keys.filter((k) => k.organizationId === VICTIM_ORG).map((k) => k.userId)).toEqual([alice]);
    for (const name of ['beside-issuer', 'own-credentials'])
      await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: tenantNs, plural: 'apikeys', name });
  });

  it(`${NAMED.toLocaleString('en')} distinct organization ids named by a tenant, each shown to the reconciler: every structure per organization stays at its bound`, async () => {
    const names = namedNs.flatMap((namespace) => Array.from({ length: PER_NAMESPACE }, (_, i) => ({ namespace, name: `named-${i}` })));
    const perResource = Math.ceil(NAMED / names.length);
    const id = (resource: number, n: number): string => `org-named-${resource}-${n}`;
    let most = { limiters: 0, lines: 0, credentials: 0, organizations: 0, issuers: 0, pollers: 0 };
    const sample = (): void => {
      const now = suite.operator.perOrganization();
      most = {
        limiters: Math.max(most.limiters, now.limiters),
        lines: Math.max(most.lines, now.lines),
        credentials: Math.max(most.credentials, now.memberships.credentials),
        organizations: Math.max(most.organizations, now.memberships.organizations),
        issuers: Math.max(most.issuers, now.memberships.issuers),
        pollers: Math.max(most.pollers, now.pollers),
      };
    };
    // spec.organizationId is immutable: each resource is made again with the next id (no finalizer
    // is ever put on a refused one, so it goes at once). The next once the reconciler was shown this one.
    let named = 0;
    const t0 = performance.now();
    await Promise.all(
      names.map(async ({ namespace, name }, i) => {
        for (let n = 0; n < perResource && i * perResource + n < NAMED; n++) {
          if (n > 0) await suite.objects.deleteNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name });
          await create(namespace, name, { scope: 'Organization', organizationId: id(i, n), keyName: name, credentialsSecretRef: { name: 'neon-admin' } });
          await shown(`${namespace}/${name}`, id(i, n));
          named++;
          sample();
          if (named % 1_000 === 0) process.stdout.write(`organization-bounds: ${named} ids named in ${Math.round(performance.now() - t0)} ms\n`);
        }
      }),
    );
    const distinct = new Set([...seen.values()].flatMap((ids) => [...ids]));
    expect(named).toBe(NAMED);
    expect(distinct.size).toBeGreaterThanOrEqual(NAMED);
    // Refused, each of them: the credentials belong to the tenant's organization only.
    for (const { namespace, name } of names) await until(namespace, name, (r) => ready(r)?.reason === 'NotAllowed', 'NotAllowed');
    sample();
    // The bounds (docs/security.md, Bounds): a limiter and a line only for an organization a create
    // was let into (the victim's and the tenant's: two, whatever the tenant named); the answers of
    // GET /users/me/organizations of the two credentials values of namespaces (the issuer's are not
    // asked), one organization each; one issuer generation learnt; no project polled.
    expect(most).toEqual({ limiters: expect.any(Number), lines: expect.any(Number), credentials: 2, organizations: 2, issuers: 1, pollers: 0 });
    process.stdout.write(`organization-bounds: ${named} ids named, ${distinct.size} shown; most kept at once: ${JSON.stringify(most)}\n`);
    expect(most.limiters).toBeLessThanOrEqual(2);
    expect(most.lines).toBeLessThanOrEqual(2);
    for (const { namespace, name } of names) await suite.objects.deleteNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name });
  }, 3_600_000);

  it("the operator's org key limiters, driven directly with a real platform client: 10,000 distinct organizations at about 250 a second keep only those with a create in flight or answered within their memory, and one once all are idle", async () => {
    const limiterFor = operatorOrgKeyLimiters();
    const client = new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: suite.userKey('tina'), orgKeyLimiter: limiterFor });
    const COUNT = 10_000;
    /** Per create: when it was answered (undefined: in flight). */
    const answeredAt: (number | undefined)[] = [];
    const t0 = performance.now();
    let next = 0;
    let most = 0;
    let over: { size: number; held: number } | undefined;
    const worker = async (): Promise<void> => {
      while (next < COUNT) {
        const n = next++;
        // Paced (one every 4 ms): the run lasts longer than a limiter's memory, so what is kept is a part of what was named.
        const wait = t0 + 4 * n - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        answeredAt[n] = undefined;
        // Answered 403 (not a member): the limiter counts that answer as any other.
        await client.createOrganizationKey(`org-limited-${n}`, { keyName: `k-${n}` }).then(
          () => undefined,
          (error: unknown) => {
            if ((error as { status?: number }).status !== 403) throw error;
          },
        );
        answeredAt[n] = performance.now();
        // Held: in flight, or answered within the limiter's memory (10 s of round trips after its
        // window of 1 s) and the second between two look-overs, with half a second's margin.
        const since = performance.now() - 12_500;
        let held = 0;
        for (let i = 0; i < answeredAt.length; i++) if (i in answeredAt && (answeredAt[i] === undefined || (answeredAt[i] as number) > since)) held++;
        most = Math.max(most, limiterFor.size);
        if (limiterFor.size > held) over ??= { size: limiterFor.size, held };
      }
    };
    await Promise.all(Array.from({ length: 32 }, () => worker()));
    process.stdout.write(
      `organization-bounds: ${COUNT} organizations through the limiters in ${Math.round(performance.now() - t0)} ms, most kept at once ${most}\n`,
    );
    expect(over).toBeUndefined();
    // Idle past the limiter's memory: the next look-up drops them all.
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    await client.createOrganizationKey('org-limited-again', { keyName: 'again' }).catch(() => undefined);
    expect(limiterFor.size).toBe(1);
    expect(most).toBeLessThan(COUNT / 2);
  }, 600_000);
});
