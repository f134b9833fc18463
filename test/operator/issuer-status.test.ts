// Issue 40, on a real kube-apiserver + etcd and the emulator over HTTP: a ClusterKeyIssuer says
// whether its credentials can mint keys. An administrator's personal key makes it Ready, naming
// its user; a member's key, an organization key and a revoked key each make it not Ready with a
// reason of its own, and so does the administrator's demotion; at rest its status is not written
// again; and its deletion waits, with its finalizer, for the last resource that names it.
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Registry } from 'prom-client';
import { createMetrics, type OperatorMetrics } from '../../src/operator/keys/status/metrics.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { group, operatorSuite, readUntil, version } from './fixture.ts';

const plural = 'clusterkeyissuers';
const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';
const DRIFT_MS = 1_500;
const suffix = randomBytes(3).toString('hex');
/** This suite's issuers carry it, and its operator reconciles only those (issuers are cluster-wide; the suites share the apiserver). */
const LABEL = 'keys.neon.dev/test-suite';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime: string;
}
interface Issuer {
  metadata: { name: string; generation: number; resourceVersion: string; finalizers?: string[]; deletionTimestamp?: string };
  status?: {
    observedGeneration?: number;
    user?: { id?: string; email?: string; role?: string };
    verifiedAt?: string;
    resources?: number;
    conditions?: Condition[];
  };
}

describe("a ClusterKeyIssuer's Ready condition", () => {
  const metrics: OperatorMetrics = createMetrics(new Registry(), { defaultMetrics: false });
  let secretsNs: string;
  let tenant: string;
  const suite = operatorSuite({
    namespaces: ['issuer-secrets', 'issuer-users'],
    credentials: false,
    before: async (s) => {
      [secretsNs = '', tenant = ''] = s.namespaces;
    },
    operator: () => ({
      // The issuers' namespace is watched too: a change of a credentials Secret wakes its issuer.
      namespaces: [secretsNs, tenant],
      issuerSecretsNamespace: secretsNs,
      issuerLabelSelector: `${LABEL}=${suffix}`,
      workers: 4,
      driftIntervalMs: DRIFT_MS,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'issuer-status',
      metrics,
    }),
    // The operator is gone: its finalizer would hold the issuers for ever.
    after: async (s) => {
      for (const issuer of issuers) {
        const current = (await s.objects.getClusterCustomObject({ group, version, plural, name: issuer }).catch(() => undefined)) as
          { metadata: Record<string, unknown> } | undefined;
        if (current === undefined) continue;
        await s.objects
          .replaceClusterCustomObject({ group, version, plural, name: issuer, body: { ...current, metadata: { ...current.metadata, finalizers: [] } } })
          .catch(() => undefined);
        await s.objects.deleteClusterCustomObject({ group, version, plural, name: issuer }).catch(() => undefined);
      }
    },
    timeoutMs: 60_000,
  });

  const issuers: string[] = [];
  /** Every API key this suite handed out: none may show in a status or an event. */
  const apiKeys: string[] = [];

  const name = (base: string): string => `${base}-${suffix}`;
  const read = async (issuer: string): Promise<Issuer> => (await suite.objects.getClusterCustomObject({ group, version, plural, name: issuer })) as Issuer;
  const ready = (i: Issuer): Condition | undefined => i.status?.conditions?.find((c) => c.type === 'Ready');
  const until = (issuer: string, test: (i: Issuer) => boolean, what: string, timeoutMs = 20_000): Promise<Issuer> =>
    readUntil(() => read(issuer), test, timeoutMs, `${issuer}: ${what}`);
  const withReason =
    (reason: string) =>
    (i: Issuer): boolean =>
      ready(i)?.reason === reason && i.status?.observedGeneration === i.metadata.generation;
  /** A user of the organization (or of none), with their first personal key. */
  const user = async (base: string, role?: 'admin' | 'member'): Promise<{ id: string; personalKey: string }> => {
    const made = await emulatorAdmin<{ id: string; personalKey: string }>(suite.emulator.adminUrl, 'POST', '/users', {
      name: name(base),
      ...(role !== undefined ? { orgRoles: { [ORG]: role } } : {}),
    });
    apiKeys.push(made.personalKey);
    return made;
  };
  /** An issuer whose credentials Secret (of the same name) holds `apiKey`. */
  const createIssuer = async (issuer: string, apiKey: string, allow: unknown[] = []): Promise<void> => {
    await suite.core.createNamespacedSecret({ namespace: secretsNs, body: { metadata: { name: issuer }, stringData: { apiKey } } });
    await suite.objects.createClusterCustomObject({
      group,
      version,
      plural,
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ClusterKeyIssuer',
        metadata: { name: issuer, labels: { [LABEL]: suffix } },
        spec: { organizationId: ORG, credentialsSecretRef: { name: issuer }, allow },
      },
    });
    issuers.push(issuer);
  };
  const gone = async (issuer: string): Promise<boolean> => {
    try {
      await read(issuer);
      return false;
    } catch (error) {
      if ((error as { code?: unknown }).code === 404) return true;
      throw error;
    }
  };
  /** The events of an issuer (in `default`, where the events of cluster-scoped objects go). */
  const events = async (issuer: string): Promise<{ type?: string; reason?: string; message?: string }[]> =>
    (await suite.core.listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.kind=ClusterKeyIssuer,involvedObject.name=${issuer}` })).items;
  const verifications = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(suite.emulator.adminUrl, 'GET', '/requests'))
      .filter((r) => r.method === 'GET' && r.route.endsWith('/users/me'))
      .reduce((n, r) => n + r.count, 0);
  const gauge = async (): Promise<Record<string, number>> => {
    const metric = await metrics.registry.getSingleMetric('neon_key_operator_issuer_ready')?.get();
    return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.issuer), v.value]));
  };
  const expectNoKeyIn = (text: string): void => {
    for (const key of apiKeys) expect(text).not.toContain(key);
  };

  it('is True (Verified) for a personal key of an administrator, naming the user; the finalizer is held and the gauge says 1', async () => {
    const admin = await user('platform-admin', 'admin');
    const issuer = name('platform');
    await createIssuer(issuer, admin.personalKey);
    const i = await until(issuer, withReason('Verified'), 'Ready');
    expect(ready(i)).toEqual(expect.objectContaining({ status: 'True', message: expect.stringContaining(`${name('platform-admin')}@example.com`) }));
    expect(i.status).toEqual(
      expect.objectContaining({
        user: { id: admin.id, email: `${name('platform-admin')}@example.com`, role: 'admin' },
        resources: 0,
        verifiedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      }),
    );
    expect(i.metadata.finalizers).toContain('keys.neon.dev/issuer-in-use');
    await eventually(async () => ((await gauge())[issuer] === 1 ? true : undefined), 5_000, 'issuer_ready 1');
  });

  it("is False with a reason of its own for a member's key, an organization key and a revoked key; and for the administrator once demoted, with a Warning", async () => {
    const member = await user('member', 'member');
    const alice = new PlatformClient({
      baseUrl: suite.emulator.baseUrl,
      apiKey: suite.adminKey,
      retry: { maxAttempts: 1 },
    });
    const orgKey = await alice.createOrganizationKey(ORG, { keyName: name('not-for-issuers') });
    apiKeys.push(orgKey.key);
    const revoked = await user('revoked', 'admin');
    const own = new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: revoked.personalKey, retry: { maxAttempts: 1 } });
    await own.revokePersonalKey((await own.listPersonalKeys())[0]?.id ?? 0);
    const cases: [string, string, string, RegExp][] = [
      [
        name('member'),
        member.personalKey,
        'NotAnAdministrator',
        new RegExp(`${name('member')}@example\\.com \\(user ${member.id}\\), a member of ${ORG}, not an administrator`),
      ],
      [name('org-key'), orgKey.key, 'CredentialsWrongKind', /an organization key .*; an issuer needs a personal key of an administrator/],
      [name('revoked'), revoked.personalKey, 'CredentialsRefused', /refused the credentials \(401\).*: the key is invalid or revoked/],
    ];
    for (const [issuer, apiKey] of cases) await createIssuer(issuer, apiKey);
    for (const [issuer, , reason, message] of cases) {
      const i = await until(issuer, withReason(reason), reason);
      expect([issuer, ready(i)?.status, ready(i)?.message]).toEqual([issuer, 'False', expect.stringMatching(message)]);
      expectNoKeyIn(JSON.stringify(i));
    }
    expect((await read(name('member'))).status?.user).toEqual({ id: member.id, email: `${name('member')}@example.com`, role: 'member' });
    expect((await read(name('revoked'))).status?.user).toBeUndefined();
    const warned = await eventually(
      async () => {
        const e = await events(name('revoked'));
        return e.length > 0 ? e : undefined;
      },
      10_000,
      'a Warning',
    );
    expect(warned).toEqual([expect.objectContaining({ type: 'Warning', reason: 'CredentialsRefused' })]);
    expectNoKeyIn(JSON.stringify(warned));
    const values = await gauge();
    expect(cases.map(([issuer]) => values[issuer])).toEqual([0, 0, 0]);

    // The administrator demoted on the platform: the next verification (one drift interval) sees it.
    const platform = name('platform');
    const adminId = (await read(platform)).status?.user?.id ?? '';
    await emulatorAdmin(suite.emulator.adminUrl, 'PUT', `/organizations/${ORG}/members/${adminId}`, { role: 'member' });
    await until(platform, withReason('NotAnAdministrator'), 'demoted');
    await emulatorAdmin(suite.emulator.adminUrl, 'PUT', `/organizations/${ORG}/members/${adminId}`, { role: 'admin' });
    await until(platform, withReason('Verified'), 'promoted again');
    expect((await events(platform)).map((e) => [e.type, e.reason])).toEqual(
      expect.arrayContaining([
        ['Warning', 'NotAnAdministrator'],
        ['Normal', 'Verified'],
      ]),
    );

    // Issuers nothing uses go at once: their finalizer is removed.
    for (const [issuer] of cases) await suite.objects.deleteClusterCustomObject({ group, version, plural, name: issuer });
    for (const [issuer] of cases) await eventually(async () => ((await gone(issuer)) ? true : undefined), 20_000, `${issuer} deleted`);
  });

  it('writes no status at rest: over two verifications its resourceVersion stays', async () => {
    const issuer = name('platform');
    const before = await until(issuer, withReason('Verified'), 'Ready');
    // Only this issuer is left to verify: each verification is one GET /users/me.
    const start = await verifications();
    await eventually(async () => ((await verifications()) >= start + 2 ? true : undefined), 10 * DRIFT_MS, 'two verifications');
    const after = await read(issuer);
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.status?.verifiedAt).toBe(before.status?.verifiedAt);
  });

  it('holds its deletion while a ProjectApiKey names it, says so in status, and completes once the key resource is gone', async () => {
    const admin = await user('held-admin', 'admin');
    const issuer = name('held');
    await createIssuer(issuer, admin.personalKey);
    await until(issuer, withReason('Verified'), 'Ready');
    // Only the reference matters here: the issuer allows nothing, so no key is minted through it.
    await suite.apply('ProjectApiKey', { name: 'db', namespace: tenant }, { projectId: PROJECT, issuerRef: { name: issuer } }, tenant);
    await until(issuer, (i) => i.status?.resources === 1, 'one resource counted');
    await suite.objects.deleteClusterCustomObject({ group, version, plural, name: issuer });
    const blocked = await until(issuer, withReason('DeletionBlocked'), 'deletion blocked');
    expect(blocked.metadata.deletionTimestamp).toBeDefined();
    expect(blocked.metadata.finalizers).toContain('keys.neon.dev/issuer-in-use');
    expect(ready(blocked)).toEqual(
      expect.objectContaining({
        status: 'False',
        message: `deletion waits for 1 resource that uses this issuer: ${tenant}/db; delete them, or point their spec.issuerRef elsewhere`,
      }),
    );
    await eventually(
      async () => ((await events(issuer)).some((e) => e.type === 'Warning' && e.reason === 'DeletionBlocked') ? true : undefined),
      10_000,
      'a DeletionBlocked Warning',
    );

    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: tenant, plural: 'projectapikeys', name: 'db' });
    await eventually(
      async () => {
        try {
          await suite.objects.getNamespacedCustomObject({ group, version, namespace: tenant, plural: 'projectapikeys', name: 'db' });
          return undefined;
        } catch (error) {
          return (error as { code?: unknown }).code === 404 ? true : undefined;
        }
      },
      30_000,
      'the ProjectApiKey deleted',
    );
    await eventually(async () => ((await gone(issuer)) ? true : undefined), 20_000, `${issuer} deleted once nothing uses it`);
    await eventually(async () => ((await gauge())[issuer] === undefined ? true : undefined), 5_000, 'its gauge series gone');
  });
});
