// The key lifecycle as users meet it: a real kube-apiserver + etcd (the harness), the platform
// emulator over HTTP, the operator in-process with a token of the ServiceAccount that deploy/base
// creates (so its RBAC is proven sufficient). No mocks.
import { afterAll, describe, expect, it } from '@jest/globals';
import { writeFileSync } from 'node:fs';
import { type KubeConfig } from '@kubernetes/client-node';
import type { KeyResource } from '../../src/operator/resources/schema.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { buildSecret } from '../../src/operator/keys/secret/secret-writer.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { crashedIntent, emulatorAdmin, eventually, operatorKubeConfig, operatorSigner, intentSettled } from './support.ts';
import { capturedLog, group, operatorSuite, version } from './fixture.ts';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
}
interface Resource {
  metadata: { name: string; generation: number; annotations?: Record<string, string>; finalizers?: string[] };
  spec: Record<string, unknown>;
  status?: { keyId?: number; keyName?: string; secretName?: string; secretHash?: string; observedGeneration?: number; conditions?: Condition[] };
}
interface AdminKey {
  id: number;
  name: string;
  kind: string;
  organizationId: string | null;
  projectId: string | null;
  revoked: boolean;
}

describe('the key lifecycle against a real apiserver and the emulator', () => {
  let operatorConfig: KubeConfig;
  const { logger, lines: logLines } = capturedLog('debug');
  const records: ReconcileRecord[] = [];
  const issuedSecrets = new Set<string>();

  const admin = <T>(method: string, path: string, body?: unknown): Promise<T> => emulatorAdmin<T>(suite.emulator.adminUrl, method, path, body);
  const keysNamed = async (prefix: string): Promise<AdminKey[]> => (await admin<AdminKey[]>('GET', '/keys')).filter((k) => k.name.startsWith(`${prefix}-`));
  const requestCount = async (method: string, route: string): Promise<number> =>
    (await admin<{ method: string; route: string; count: number }[]>('GET', '/requests'))
      .filter((r) => r.method === method && r.route === route)
      .reduce((n, r) => n + r.count, 0);

  const credentials = async (name: string, key: string): Promise<void> => {
    await suite.core.createNamespacedSecret({ namespace: suite.namespace, body: { metadata: { name }, stringData: { apiKey: key } } });
  };
  const plural = (kind: string): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
  const create = async (
    kind: 'ApiKey' | 'ProjectApiKey',
    name: string,
    spec: Record<string, unknown>,
    metadata: Record<string, unknown> = {},
  ): Promise<void> => {
    await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: plural(kind),
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name, namespace: suite.namespace, ...metadata }, spec },
    });
  };
  const get = async (kind: string, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind), name })) as Resource;
  const settled = (r: Resource): boolean => intentSettled(r);
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const untilCondition = (kind: string, name: string, type: string, test: (c: Condition, r: Resource) => boolean, timeoutMs = 20_000): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(kind, name);
        const c = condition(r, type);
        return c !== undefined && test(c, r) ? r : undefined;
      },
      timeoutMs,
      `${kind} ${name} ${type}`,
    );
  const untilReady = (kind: string, name: string, timeoutMs?: number): Promise<Resource> =>
    // Settled: Ready for this generation, and the intent cleared (the last step of the protocol).
    untilCondition(kind, name, 'Ready', (c, r) => c.status === 'True' && r.status?.observedGeneration === r.metadata.generation && intentSettled(r), timeoutMs);
  const secretValue = async (name: string, key = 'apiKey'): Promise<string> => {
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
    const value = Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
    if (value !== '') issuedSecrets.add(value);
    return value;
  };
  const untilGone = (kind: string, name: string): Promise<true> =>
    eventually(
      async () => {
        try {
          await get(kind, name);
          return undefined;
        } catch (error) {
          if ((error as { code?: number }).code === 404) return true;
          throw error;
        }
      },
      20_000,
      `${kind} ${name} deleted`,
    );
  const remove = (kind: string, name: string) =>
    suite.objects.deleteNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind), name });
  /**
   * The reconciles of a resource, as the operator reports each one (onReconcile, typed; never its
   * log text): when each started, what it decided first, whether it sent a create.
   */
  const reconcilesOf = (name: string): { startedAt: number; action: string; created: boolean }[] =>
    records
      .filter((r) => r.namespace === suite.namespace && r.name === name)
      .map((r) => ({ startedAt: r.startedAt, action: r.actions[0] ?? '', created: r.createSent }))
      .sort((a, b) => a.startedAt - b.startedAt);
  const platformAs = (apiKey: string) => new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey, retry: { maxAttempts: 1 } });

  const suite = operatorSuite({
    namespaces: ['lifecycle'],
    credentials: false,
    before: async (s) => {
      await credentials('neon-admin', s.adminKey);
      await credentials('neon-member', s.userKey('bob'));
      await credentials('neon-bogus', 'x'.repeat(64));
    },
    operator: async (s) => {
      operatorConfig = await operatorKubeConfig(s.cp);
      return {
        kubeConfig: operatorConfig,
        namespace: s.namespace,
        workers: 4,
        driftIntervalMs: 1_500,
        pendingGraceMs: 5_000,
        maxBackoffMs: 4_000,
        logger,
        identity: 'operator-a',
        onReconcile: (record) => records.push(record),
      };
    },
  });

  afterAll(() => {
    // OPERATOR_TEST_LOG=<file> keeps the operator's log of this run for a failure's post-mortem.
    if (process.env.OPERATOR_TEST_LOG !== undefined) writeFileSync(process.env.OPERATOR_TEST_LOG, logLines.join(''));
  });

  it('an organization ApiKey becomes Ready with a working key in its Secret', async () => {
    await create('ApiKey', 'ci-deployer', {
      scope: 'Organization',
      organizationId: suite.org,
      keyName: 'ci-deployer',
      credentialsSecretRef: { name: 'neon-admin' },
    });
    const ready = await untilReady('ApiKey', 'ci-deployer');
    expect(ready.metadata.finalizers).toContain('keys.neon.dev/finalizer');
    // The intent stays, fulfilled: its attempt is the key status records (issue 14).
    expect(ready.status?.keyName).toMatch(/^ci-deployer-[a-z0-9]{8}$/);
    expect(JSON.parse(ready.metadata.annotations?.['keys.neon.dev/create-pending'] ?? '{}')).toMatchObject({ attempt: ready.status?.keyName });
    expect(condition(ready, 'KeyIssued')?.status).toBe('True');
    expect(condition(ready, 'SecretSynced')?.status).toBe('True');
    expect(ready.status?.secretName).toBe('ci-deployer');
    expect(ready.status?.secretHash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    const value = await secretValue('ci-deployer');
    expect(value).toMatch(/^[a-z0-9]{64}$/);
    // The key works: an organization key lists the organization's projects.
    const projects = await platformAs(value).listProjects({ orgId: suite.org });
    expect(projects.length).toBeGreaterThan(0);
    const keys = await keysNamed('ci-deployer');
    expect(keys).toEqual([expect.objectContaining({ id: ready.status?.keyId, kind: 'organization', revoked: false })]);
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'ci-deployer' });
    expect(secret.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('neon-key-operator');
    expect(secret.metadata?.annotations?.['keys.neon.dev/key-id']).toBe(String(ready.status?.keyId));
    expect(secret.metadata?.ownerReferences?.[0]).toEqual(expect.objectContaining({ kind: 'ApiKey', name: 'ci-deployer', controller: true }));
  });

  it('its own writes do not wake it: after the create, the next reconcile is the drift check', async () => {
    // The create writes the intent, the Secret and the status; each comes back as a watch event
    // while the reconcile runs. Were they taken as changes, the key would be reconciled again at
    // once (a few ms later); the drift check comes 1.5 s (+-10%) after the create.
    const second = await eventually(async () => reconcilesOf('ci-deployer')[1], 10_000, 'a second reconcile of ci-deployer');
    const first = reconcilesOf('ci-deployer')[0];
    expect(first?.created).toBe(true);
    expect(second.created).toBe(false);
    expect(second.startedAt - (first?.startedAt ?? 0)).toBeGreaterThanOrEqual(1_000);
  });

  it('status lost (a backup restored without it) is re-recorded from the Secret, no new key', async () => {
    const before = await get('ApiKey', 'ci-deployer');
    await suite.objects.patchNamespacedCustomObjectStatus({
      group,
      version,
      namespace: suite.namespace,
      plural: 'apikeys',
      name: 'ci-deployer',
      body: [{ op: 'remove', path: '/status' }],
    });
    const after = await untilReady('ApiKey', 'ci-deployer');
    expect(after.status?.keyId).toBe(before.status?.keyId);
    expect(await keysNamed('ci-deployer')).toEqual([expect.objectContaining({ id: before.status?.keyId, revoked: false })]);
  });

  it('a Secret of the target name that the operator does not manage is never overwritten', async () => {
    await suite.core.createNamespacedSecret({ namespace: suite.namespace, body: { metadata: { name: 'squatted' }, stringData: { apiKey: 'not ours' } } });
    await create('ApiKey', 'squatted', { scope: 'Personal', keyName: 'squatted', credentialsSecretRef: { name: 'neon-admin' } });
    const blocked = await untilCondition('ApiKey', 'squatted', 'Ready', (c) => c.reason === 'SecretConflict');
    expect(condition(blocked, 'SecretSynced')?.reason).toBe('SecretConflict');
    expect(await secretValue('squatted')).toBe('not ours');
    expect(await keysNamed('squatted')).toEqual([]);
    await remove('ApiKey', 'squatted');
    await untilGone('ApiKey', 'squatted');
    expect(await secretValue('squatted')).toBe('not ours');
  });

  it('a personal ApiKey deleted is revoked and its Secret is gone', async () => {
    await create('ApiKey', 'laptop', { scope: 'Personal', keyName: 'laptop', credentialsSecretRef: { name: 'neon-admin' } });
    const ready = await untilReady('ApiKey', 'laptop');
    const value = await secretValue('laptop');
    expect((await platformAs(value).listPersonalKeys()).length).toBeGreaterThan(0);
    await remove('ApiKey', 'laptop');
    await untilGone('ApiKey', 'laptop');
    expect(await keysNamed('laptop')).toEqual([expect.objectContaining({ id: ready.status?.keyId, kind: 'personal', revoked: true })]);
    await expect(suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'laptop' })).rejects.toMatchObject({ code: 404 });
  });

  it('an ApiKey with deletionPolicy Retain leaves the key live and its Secret in place', async () => {
    await create('ApiKey', 'keeper', {
      scope: 'Organization',
      organizationId: suite.org,
      keyName: 'keeper',
      deletionPolicy: 'Retain',
      credentialsSecretRef: { name: 'neon-admin' },
      secret: { name: 'keeper-secret', key: 'token' },
    });
    const ready = await untilReady('ApiKey', 'keeper');
    const value = await secretValue('keeper-secret', 'token');
    await remove('ApiKey', 'keeper');
    await untilGone('ApiKey', 'keeper');
    // Longer than the garbage collector needs to act on an owner reference.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'keeper-secret' });
    expect(secret.metadata?.ownerReferences ?? []).toEqual([]);
    expect(Buffer.from(secret.data?.token ?? '', 'base64').toString('utf8')).toBe(value);
    expect(await keysNamed('keeper')).toEqual([expect.objectContaining({ id: ready.status?.keyId, revoked: false })]);
    expect((await platformAs(value).listProjects({ orgId: suite.org })).length).toBeGreaterThan(0);
  });

  it('a create response lost after the platform committed is recovered: the orphan revoked, one live key', async () => {
    await admin('PUT', '/faults', {
      rules: [{ method: 'POST', route: '/api/v2/organizations/:org_id/api_keys', probability: 1, kind: 'drop-after-commit', times: 1 }],
    });
    try {
      await create('ApiKey', 'dropped', { scope: 'Organization', organizationId: suite.org, keyName: 'dropped', credentialsSecretRef: { name: 'neon-admin' } });
      const ready = await untilReady('ApiKey', 'dropped');
      const keys = await keysNamed('dropped');
      expect(keys).toHaveLength(2);
      expect(keys.filter((k) => !k.revoked)).toEqual([expect.objectContaining({ id: ready.status?.keyId })]);
      expect((await platformAs(await secretValue('dropped')).listProjects({ orgId: suite.org })).length).toBeGreaterThan(0);
    } finally {
      await admin('DELETE', '/faults');
    }
  });

  /**
   * A resource as a crashed process leaves it: finalizer, a signed intent (signed for the uid, so
   * the resource is made first, waiting on credentials that do not exist yet), then the real
   * credentials. `before` runs once the uid is known (e.g. to write the Secret that process wrote).
   */
  const crashed = async (
    name: string,
    spec: Record<string, unknown>,
    pending: { attempt: string; startedAt: string; holder: string },
    before?: (r: Resource & { metadata: { uid: string } }) => Promise<void>,
  ): Promise<void> => {
    await create('ApiKey', name, { ...spec, credentialsSecretRef: { name: 'neon-not-yet' } }, { finalizers: ['keys.neon.dev/finalizer'] });
    const current = (await untilCondition('ApiKey', name, 'Ready', (c) => c.reason === 'CredentialsMissing')) as Resource & { metadata: { uid: string } };
    await before?.(current);
    const signer = await operatorSigner(suite.cp);
    await suite.objects.replaceNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: 'apikeys',
      name,
      body: {
        ...current,
        metadata: { ...current.metadata, annotations: { ...current.metadata.annotations, ...crashedIntent(signer, current.metadata.uid, pending) } },
        spec,
      },
    });
  };

  it('an intent whose key already reached the Secret is adopted, nothing revoked', async () => {
    const attempt = 'adoptee-abcd1234';
    const made = await platformAs(suite.adminKey).createOrganizationKey(suite.org, { keyName: attempt });
    issuedSecrets.add(made.key);
    const spec = { scope: 'Organization', organizationId: suite.org, keyName: 'adoptee', credentialsSecretRef: { name: 'neon-admin' } };
    // What a process that crashed between writing the Secret and recording the status leaves behind.
    await crashed('adoptee', spec, { attempt, startedAt: new Date().toISOString(), holder: 'crashed-operator' }, async (r) => {
      const signer = await operatorSigner(suite.cp);
      await suite.core.createNamespacedSecret({
        namespace: suite.namespace,
        body: buildSecret(
          { apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { ...r.metadata, namespace: suite.namespace }, spec } as unknown as KeyResource,
          'adoptee',
          'apiKey',
          { id: made.id, name: attempt, secret: made.key },
          signer,
        ),
      });
    });
    await untilReady('ApiKey', 'adoptee');
    // Ready is recorded before the fulfilled intent is cleared (create-protocol.ts, adopt): a read
    // between the two writes sees Ready with the intent still on; the intent must then go.
    const ready = await eventually(
      async () => {
        const r = await get('ApiKey', 'adoptee');
        return r.metadata.annotations?.['keys.neon.dev/create-pending'] === undefined ? r : undefined;
      },
      10_000,
      'the adopted intent cleared',
    );
    expect(ready.status?.keyId).toBe(made.id);
    expect(ready.metadata.annotations?.['keys.neon.dev/create-pending']).toBeUndefined();
    expect(await keysNamed('adoptee')).toEqual([expect.objectContaining({ id: made.id, revoked: false })]);
  });

  it('an intent left by a crashed process with no Secret is recovered once its grace has passed', async () => {
    const attempt = 'orphaned-wxyz9876';
    const made = await platformAs(suite.adminKey).createOrganizationKey(suite.org, { keyName: attempt });
    issuedSecrets.add(made.key);
    await crashed(
      'orphaned',
      { scope: 'Organization', organizationId: suite.org, keyName: 'orphaned', credentialsSecretRef: { name: 'neon-admin' } },
      { attempt, startedAt: new Date().toISOString(), holder: 'crashed-operator' },
    );
    // Within the grace period the operator waits: the other process may still be working.
    const waiting = await untilCondition('ApiKey', 'orphaned', 'Ready', (c) => c.reason === 'Creating');
    expect(waiting.metadata.annotations?.['keys.neon.dev/create-pending']).toContain(attempt);
    const ready = await untilReady('ApiKey', 'orphaned', 20_000);
    expect(ready.status?.keyId).not.toBe(made.id);
    const keys = await keysNamed('orphaned');
    expect(keys.find((k) => k.id === made.id)?.revoked).toBe(true);
    expect(keys.filter((k) => !k.revoked)).toEqual([expect.objectContaining({ id: ready.status?.keyId })]);
  });

  it.each([
    ['Unauthorized', 'a revoked or wrong credentials key', { scope: 'Organization', keyName: 'unauth', credentialsSecretRef: { name: 'neon-bogus' } }],
    ['Forbidden', 'a member asking for an organization key', { scope: 'Organization', keyName: 'forbidden', credentialsSecretRef: { name: 'neon-member' } }],
  ])('%s: %s is reported with a bounded number of platform calls', async (reason, _story, spec) => {
    const name = String(spec.keyName);
    // Credentials the platform rejects are caught by the organization check (GET
    // /users/me/organizations, issue 41) before any create; a member's key passes it and the
    // credentials check (a person's key), and meets the create's 403.
    const [method, route] = reason === 'Unauthorized' ? ['GET', '/api/v2/users/me/organizations'] : ['POST', '/api/v2/organizations/:org_id/api_keys'];
    const before = await requestCount(method, route);
    await create('ApiKey', name, { ...spec, organizationId: suite.org });
    const blocked = await untilCondition('ApiKey', name, 'KeyIssued', (c) => c.reason === reason);
    expect(condition(blocked, 'Ready')).toEqual(expect.objectContaining({ status: 'False', reason }));
    expect(condition(blocked, 'KeyIssued')?.message).toMatch(/credentials|administrator/);
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    // Backoff 1 s, 2 s, 4 s: three or four attempts in ~5 s, not a hot loop.
    const calls = (await requestCount(method, route)) - before;
    expect(calls).toBeGreaterThanOrEqual(1);
    expect(calls).toBeLessThanOrEqual(4);
    // Never two attempts within the first backoff step: the intent and status each attempt writes
    // must not wake the key again (they did: a second attempt ~0.1 s after each).
    // A first create is decided as AddFinalizer (the finalizer goes with its intent); refused before
    // its intent (the organization check), each attempt stays one.
    const attempts = reconcilesOf(name)
      .filter((r) => r.action === 'Create' || r.action === 'AddFinalizer')
      .map((r) => r.startedAt);
    if (reason === 'Unauthorized') expect(reconcilesOf(name).some((r) => r.created)).toBe(false);
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < attempts.length; i++) expect(attempts[i]! - attempts[i - 1]!).toBeGreaterThanOrEqual(900);
    expect(await keysNamed(name)).toEqual([]);
    // A refused attempt clears its intent (an attempt may be under way right now: wait it out).
    await untilCondition('ApiKey', name, 'KeyIssued', (c, r) => c.reason === reason && settled(r), 5_000);
    // Deleting a resource that never got a key needs no platform call.
    await remove('ApiKey', name);
    await untilGone('ApiKey', name);
  });

  it('NotFound: a ProjectApiKey for a project outside the organization says so', async () => {
    await create('ProjectApiKey', 'nowhere', {
      organizationId: suite.org,
      projectId: 'no-such-project-123',
      keyName: 'nowhere',
      credentialsSecretRef: { name: 'neon-admin' },
    });
    const blocked = await untilCondition('ProjectApiKey', 'nowhere', 'KeyIssued', (c) => c.reason === 'NotFound');
    expect(condition(blocked, 'KeyIssued')?.message).toContain('404');
  });

  it('RateLimited: a 429 on create is reported, then the key is issued', async () => {
    await admin('PUT', '/faults', {
      rules: [{ method: 'POST', route: '/api/v2/organizations/:org_id/api_keys', probability: 1, kind: 'status', status: 429, times: 3 }],
    });
    try {
      await create('ApiKey', 'throttled', {
        scope: 'Organization',
        organizationId: suite.org,
        keyName: 'throttled',
        credentialsSecretRef: { name: 'neon-admin' },
      });
      await untilReady('ApiKey', 'throttled', 30_000);
      expect((await keysNamed('throttled')).filter((k) => !k.revoked)).toHaveLength(1);
    } finally {
      await admin('DELETE', '/faults');
    }
  });

  it('missing credentials are reported, and the key is issued once they exist', async () => {
    await create('ApiKey', 'patient', { scope: 'Personal', keyName: 'patient', credentialsSecretRef: { name: 'neon-later' } });
    const blocked = await untilCondition('ApiKey', 'patient', 'Ready', (c) => c.reason === 'CredentialsMissing');
    expect(condition(blocked, 'Ready')?.message).toContain('does not exist');
    await credentials('neon-later', suite.adminKey);
    await untilReady('ApiKey', 'patient', 20_000);
  });

  it('a ProjectApiKey becomes Ready with a key scoped to its project', async () => {
    const project = suite.emulator.bootstrap.projects.find((p) => p.organizationId === suite.org);
    if (project === undefined) throw new Error('no org project in the seed');
    await create('ProjectApiKey', 'app', { organizationId: suite.org, projectId: project.id, keyName: 'app', credentialsSecretRef: { name: 'neon-admin' } });
    const ready = await untilReady('ProjectApiKey', 'app');
    const value = await secretValue('app');
    expect((await platformAs(value).getProject(project.id)).id).toBe(project.id);
    expect(await keysNamed('app')).toEqual([expect.objectContaining({ id: ready.status?.keyId, kind: 'project', projectId: project.id, revoked: false })]);
  });

  it("a ProjectApiKey mirrors its project's operations: a new branch shows, then settles", async () => {
    const project = suite.emulator.bootstrap.projects.find((p) => p.organizationId === suite.org);
    if (project === undefined) throw new Error('no org project in the seed');
    const { operations } = await platformAs(suite.adminKey).createBranch(project.id);
    const ids = operations.map((o) => o.id);
    expect(operations.map((o) => o.action)).toEqual(expect.arrayContaining(['create_branch', 'start_compute']));
    const settled = await untilCondition(
      'ProjectApiKey',
      'app',
      'OperationsSettled',
      (c, r) =>
        c.status === 'True' &&
        ids.every(
          (id) => (r.status as { operations?: { id: string; status: string }[] }).operations?.some((o) => o.id === id && o.status === 'finished') === true,
        ),
      30_000,
    );
    expect(condition(settled, 'Ready')?.status).toBe('True');
  });

  it('drift: a project moved out of the organization is reported on its ProjectApiKey', async () => {
    const project = suite.emulator.bootstrap.projects.filter((p) => p.organizationId === suite.org)[1];
    if (project === undefined) throw new Error('the seed has fewer than two org projects');
    await create('ProjectApiKey', 'mover', {
      organizationId: suite.org,
      projectId: project.id,
      keyName: 'mover',
      credentialsSecretRef: { name: 'neon-admin' },
    });
    await untilReady('ProjectApiKey', 'mover');
    await admin('POST', `/projects/${project.id}/transfer`, { organizationId: null });
    const moved = await untilCondition('ProjectApiKey', 'mover', 'KeyIssued', (c) => c.reason === 'ProjectNotInOrganization', 20_000);
    expect(condition(moved, 'Ready')?.status).toBe('False');
    expect(condition(moved, 'KeyIssued')?.message).toContain('no longer owned by the organization');
  });

  it('drift: a key revoked outside, a Secret deleted, a Secret edited are each repaired', async () => {
    await create('ApiKey', 'drifty', { scope: 'Organization', organizationId: suite.org, keyName: 'drifty', credentialsSecretRef: { name: 'neon-admin' } });
    const first = await untilReady('ApiKey', 'drifty');
    const firstId = first.status?.keyId ?? -1;
    await secretValue('drifty');

    await platformAs(suite.adminKey).revokeOrganizationKey(suite.org, firstId);
    const second = await untilCondition('ApiKey', 'drifty', 'Ready', (c, r) => c.status === 'True' && r.status?.keyId !== firstId && settled(r), 20_000);
    const secondId = second.status?.keyId ?? -1;
    await secretValue('drifty');

    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name: 'drifty' });
    const third = await untilCondition('ApiKey', 'drifty', 'Ready', (c, r) => c.status === 'True' && r.status?.keyId !== secondId && settled(r), 20_000);
    const thirdId = third.status?.keyId ?? -1;
    await secretValue('drifty');

    await suite.core.patchNamespacedSecret({
      namespace: suite.namespace,
      name: 'drifty',
      body: [{ op: 'replace', path: '/data/apiKey', value: Buffer.from('edited by hand').toString('base64') }],
    });
    const fourth = await untilCondition('ApiKey', 'drifty', 'Ready', (c, r) => c.status === 'True' && r.status?.keyId !== thirdId && settled(r), 20_000);
    const value = await secretValue('drifty');
    expect((await platformAs(value).listProjects({ orgId: suite.org })).length).toBeGreaterThan(0);

    const keys = await keysNamed('drifty');
    expect(keys.filter((k) => !k.revoked).map((k) => k.id)).toEqual([fourth.status?.keyId]);
    expect(keys).toHaveLength(4);
    const events = await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: 'involvedObject.name=drifty' });
    const reasons = events.items.map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['RevokedExternally', 'SecretMissing', 'SecretTampered']));
  });

  it('a key deleted while the platform is down is revoked when it returns', async () => {
    await create('ApiKey', 'outage', { scope: 'Organization', organizationId: suite.org, keyName: 'outage', credentialsSecretRef: { name: 'neon-admin' } });
    const ready = await untilReady('ApiKey', 'outage');
    await admin('PUT', '/faults', { rules: [{ method: 'DELETE', probability: 1, kind: 'status', status: 503 }] });
    try {
      await remove('ApiKey', 'outage');
      const deleting = await untilCondition('ApiKey', 'outage', 'Ready', (c) => c.reason === 'Deleting' && c.message.includes('PlatformUnavailable'));
      expect(deleting.metadata.finalizers).toContain('keys.neon.dev/finalizer');
    } finally {
      await admin('DELETE', '/faults');
    }
    await untilGone('ApiKey', 'outage');
    expect(await keysNamed('outage')).toEqual([expect.objectContaining({ id: ready.status?.keyId, revoked: true })]);
  });

  it('a person releases a resource whose credentials are gone, without revoking', async () => {
    await create('ApiKey', 'stranded', {
      scope: 'Organization',
      organizationId: suite.org,
      keyName: 'stranded',
      credentialsSecretRef: { name: 'neon-stranded' },
    });
    await credentials('neon-stranded', suite.adminKey);
    const ready = await untilReady('ApiKey', 'stranded', 20_000);
    // The operator keeps the credentials Secret while its key lives (keys.neon.dev/credentials-in-use):
    // gone for good only when someone lifts that finalizer from it, as its owner may. Deleted first,
    // then lifted: a pass woken by the lift puts the finalizer back on a Secret that still lives
    // (the key does), never on one being deleted.
    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name: 'neon-stranded' });
    const kept = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'neon-stranded' });
    expect(kept.metadata?.finalizers).toContain('keys.neon.dev/credentials-in-use');
    await suite.core.replaceNamespacedSecret({
      namespace: suite.namespace,
      name: 'neon-stranded',
      body: { ...kept, metadata: { ...kept.metadata, finalizers: [] } },
    });
    await eventually(
      async () =>
        await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'neon-stranded' }).then(
          () => undefined,
          (e: { code?: number }) => (e.code === 404 ? true : undefined),
        ),
      20_000,
      'the credentials Secret gone once its finalizer is lifted',
    );
    await remove('ApiKey', 'stranded');
    await untilCondition('ApiKey', 'stranded', 'Ready', (c) => c.reason === 'Deleting' && c.message.includes('CredentialsMissing'));
    await suite.objects.patchNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: 'apikeys',
      name: 'stranded',
      body: [{ op: 'add', path: '/metadata/annotations', value: { 'keys.neon.dev/release-without-revoke': 'true' } }],
    });
    await untilGone('ApiKey', 'stranded');
    expect(await keysNamed('stranded')).toEqual([expect.objectContaining({ id: ready.status?.keyId, revoked: false })]);
  });

  it("a credentials Secret deleted while a key issued with it lives is kept until the key is revoked: the resource's delete revokes, then the Secret goes", async () => {
    await create('ApiKey', 'kept-creds', {
      scope: 'Organization',
      organizationId: suite.org,
      keyName: 'kept-creds',
      credentialsSecretRef: { name: 'neon-kept' },
    });
    await credentials('neon-kept', suite.adminKey);
    const ready = await untilReady('ApiKey', 'kept-creds', 20_000);
    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name: 'neon-kept' });
    const terminating = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'neon-kept' });
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();
    expect(terminating.metadata?.finalizers).toEqual(['keys.neon.dev/credentials-in-use']);
    await remove('ApiKey', 'kept-creds');
    await untilGone('ApiKey', 'kept-creds');
    expect(await keysNamed('kept-creds')).toEqual([expect.objectContaining({ id: ready.status?.keyId, revoked: true })]);
    await eventually(
      async () =>
        await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'neon-kept' }).then(
          () => undefined,
          (e: { code?: number }) => (e.code === 404 ? true : undefined),
        ),
      20_000,
      'the credentials Secret gone once no key needs it',
    );
  });

  it('two operator instances reconciling the same resources never create two keys for one resource', async () => {
    const second = await suite.startOperator({
      kubeConfig: operatorConfig,
      namespace: suite.namespace,
      workers: 4,
      driftIntervalMs: 1_500,
      pendingGraceMs: 5_000,
      maxBackoffMs: 4_000,
      logger,
      identity: 'operator-b',
    });
    try {
      const names = Array.from({ length: 8 }, (_, i) => `twin-${i}`);
      await Promise.all(
        names.map((name) =>
          create('ApiKey', name, { scope: 'Organization', organizationId: suite.org, keyName: name, credentialsSecretRef: { name: 'neon-admin' } }),
        ),
      );
      for (const name of names) {
        const ready = await untilReady('ApiKey', name, 30_000);
        await secretValue(name);
        const keys = await keysNamed(name);
        expect([name, keys.filter((k) => !k.revoked).map((k) => k.id)]).toEqual([name, [ready.status?.keyId]]);
        expect([name, keys.length]).toEqual([name, 1]);
      }
    } finally {
      await second.stop();
    }
  });

  it('at rest, drift costs one key list per credentials and organization per interval, not one per key', async () => {
    const live = (
      (await suite.objects.listNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys' })) as { items: Resource[] }
    ).items.filter((r) => r.spec.scope === 'Organization' && condition(r, 'Ready')?.status === 'True');
    expect(live.length).toBeGreaterThanOrEqual(8);
    await admin('DELETE', '/requests');
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    const requests = await admin<{ method: string; route: string; status: number; count: number }[]>('GET', '/requests');
    const lists = requests.filter((r) => r.method === 'GET' && r.route === '/api/v2/organizations/:org_id/api_keys').reduce((n, r) => n + r.count, 0);
    // Interval 1.5 s over 4.5 s: about 3 lists for the one (credentials, organization), whatever the number of keys.
    expect(lists).toBeGreaterThanOrEqual(1);
    expect(lists).toBeLessThanOrEqual(5);
    expect(requests.filter((r) => r.method === 'POST' && r.route === '/api/v2/organizations/:org_id/api_keys' && r.status < 400)).toEqual([]);
  });

  it('no secret value appears in logs, events or status', async () => {
    const secrets = [...issuedSecrets, suite.adminKey, suite.userKey('bob')];
    expect(issuedSecrets.size).toBeGreaterThan(5);
    const logs = logLines.join('');
    expect(logs.length).toBeGreaterThan(1000);
    const events = JSON.stringify((await suite.core.listNamespacedEvent({ namespace: suite.namespace })).items);
    const statuses = JSON.stringify([
      ...((await suite.objects.listNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys' })) as { items: unknown[] }).items,
      ...((await suite.objects.listNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'projectapikeys' })) as { items: unknown[] })
        .items,
    ]);
    const reported = JSON.stringify(records);
    expect(records.length).toBeGreaterThan(10);
    for (const secret of secrets) {
      expect(reported.includes(secret)).toBe(false);
      expect(logs.includes(secret)).toBe(false);
      expect(events.includes(secret)).toBe(false);
      expect(statuses.includes(secret)).toBe(false);
    }
  });
});
