// Conditions tell the truth when the platform cannot be asked, and one tenant's broken key never
// degrades another tenant's operations mirror. A real apiserver, the emulator over HTTP, one
// operator serving two namespaces (two teams on one project of one organization).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { createMetrics, type OperatorMetrics } from '../../src/operator/keys/status/metrics.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, eventually, installOperatorManifests, operatorKubeConfig, intentSettled } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const PROJECT = 'quiet-river-00000001';
type Kind = 'ApiKey' | 'ProjectApiKey';
interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}
interface Resource {
  metadata: { name: string; annotations?: Record<string, string> };
  status?: { keyId?: number; conditions?: Condition[]; operations?: { id: string; action: string; status: string }[] };
}
const plural = (kind: Kind): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
const DRIFT_MS = 1_000;
const UNVERIFIED_AFTER_MS = 2_000;
/** How long a wait below may take before its test fails saying what it waited for (not a bound on the operator). */
const WAIT_MS = 45_000;

describe('status tells the truth', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator;
  let metrics: OperatorMetrics;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let teamA: string;
  let teamB: string;
  let org: string;
  let alice: PlatformClient;
  const logLines: string[] = [];
  /** Every reconcile of the operator, as it ended. */
  const records: ReconcileRecord[] = [];
  const logger = createLogger({
    level: 'debug',
    destination: new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    }),
  });

  const requests = async (method: string, route: string): Promise<number> =>
    ((await (await fetch(`${emulator.adminUrl}/requests`)).json()) as { method: string; route: string; count: number }[])
      .filter((r) => r.method === method && r.route === route)
      .reduce((n, r) => n + r.count, 0);
  const get = async (ns: string, kind: Kind, name: string): Promise<Resource> =>
    (await objects.getNamespacedCustomObject({ group, version, namespace: ns, plural: plural(kind), name })) as Resource;
  const create = (ns: string, kind: Kind, name: string, spec: Record<string, unknown>): Promise<unknown> =>
    objects.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: plural(kind),
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name }, spec },
    });
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const until = (ns: string, kind: Kind, name: string, test: (r: Resource) => boolean, what: string, timeoutMs = 20_000): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(ns, kind, name);
        return test(r) ? r : undefined;
      },
      timeoutMs,
      `${ns}/${name}: ${what}`,
    );
  const ready = (r: Resource): boolean => condition(r, 'Ready')?.status === 'True' && intentSettled(r);
  /** A credentials Secret holding a fresh personal key of alice (an administrator), and that key's id. */
  const freshCredentials = async (ns: string, name: string): Promise<number> => {
    const key = await alice.createPersonalKey(`creds-${ns}-${name}`);
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: { apiKey: key.key } } }).catch(async () => {
      await core.replaceNamespacedSecret({ namespace: ns, name, body: { metadata: { name }, stringData: { apiKey: key.key } } });
    });
    return key.id;
  };
  const counter = async (name: string, outcome: string): Promise<number> =>
    (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    alice = new PlatformClient({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '',
      retry: { maxAttempts: 1 },
    });
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    teamA = await createNamespace(cp, 'truth-a');
    teamB = await createNamespace(cp, 'truth-b');
    metrics = createMetrics(new Registry(), { defaultMetrics: false });
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespaces: [teamA, teamB],
      workers: 4,
      driftIntervalMs: DRIFT_MS,
      unverifiedAfterMs: UNVERIFIED_AFTER_MS,
      pendingGraceMs: 2_000,
      maxBackoffMs: 4_000,
      logger,
      metrics,
      identity: 'truthful-status',
      onReconcile: (record) => records.push(record),
    });
  });

  afterAll(async () => {
    await operator?.stop();
    for (const ns of [teamA, teamB]) if (ns !== undefined) await core?.deleteNamespace({ name: ns }).catch(() => undefined);
    await emulator?.close();
  });

  it('credentials revoked under a Ready resource: a clear condition at the bound, no request storm, Ready again once fixed', async () => {
    const credsId = await freshCredentials(teamA, 'neon-admin');
    await create(teamA, 'ApiKey', 'watched', { scope: 'Organization', organizationId: org, keyName: 'watched', credentialsSecretRef: { name: 'neon-admin' } });
    const first = await until(teamA, 'ApiKey', 'watched', ready, 'Ready');
    const failedBefore = await counter('neon_key_operator_drift_checks_total', 'failed');
    const passes = (from: number): ReconcileRecord[] => records.slice(from).filter((r) => r.namespace === teamA && r.name === 'watched');

    // The credentials revoked, and the issued key with them: nothing can be verified any more.
    const recordsFrom = records.length;
    const revokedAt = Date.now();
    await alice.revokePersonalKey(credsId);
    await alice.revokeOrganizationKey(org, first.status?.keyId ?? -1);
    /** How many reconciles had ended when the last read that did not show Unknown began. */
    let endedBeforeLastRead = recordsFrom;
    const unknown = await eventually(
      async () => {
        const ended = records.length;
        const r = await get(teamA, 'ApiKey', 'watched');
        if (condition(r, 'Ready')?.status === 'Unknown') return r;
        endedBeforeLastRead = ended;
        return undefined;
      },
      WAIT_MS,
      'Ready Unknown',
    );
    const unknownAfterMs = Date.now() - revokedAt;
    console.log(`credentials revoked: Ready Unknown after ${unknownAfterMs} ms (unverified-after ${UNVERIFIED_AFTER_MS} ms, drift ${DRIFT_MS} ms)`);
    // Not before the bound (a slow machine cannot make it sooner).
    expect(unknownAfterMs).toBeGreaterThanOrEqual(UNVERIFIED_AFTER_MS - 100);
    // And at the bound, told by the passes rather than the clock: the checks fail from the first pass
    // that could not verify the key (Unverifiable); a pass that starts a bound after that one ended has
    // failed for at least the bound, so the first such pass writes Unknown, before it ends. No read
    // that began after it ended may have shown anything else.
    const due = await eventually(
      async () => {
        const since = passes(recordsFrom);
        const failing = since.find((r) => r.actions.includes('Unverifiable'));
        return failing === undefined ? undefined : since.find((r) => r.startedAt - failing.endedAt >= UNVERIFIED_AFTER_MS);
      },
      WAIT_MS,
      'a pass a bound after the first failed check',
    );
    expect(due.actions).toEqual(['Unverifiable']);
    expect(records.indexOf(due)).toBeGreaterThanOrEqual(endedBeforeLastRead);
    expect(condition(unknown, 'Ready')).toEqual(
      expect.objectContaining({ reason: 'CredentialsRefused', message: expect.stringMatching(/no longer known to be live.*refused the credentials \(401\)/) }),
    );
    expect(condition(unknown, 'KeyIssued')).toEqual(expect.objectContaining({ status: 'Unknown', reason: 'CredentialsRefused' }));
    expect(unknown.status?.keyId).toBe(first.status?.keyId);
    expect(await counter('neon_key_operator_drift_checks_total', 'failed')).toBeGreaterThan(failedBefore);

    // No storm, nothing minted or revoked on the strength of a failed check: at most one list per
    // drift interval, over five more passes of the resource (each would have minted or revoked, had
    // it taken the failed check for an absent key). The intervals are counted from the time that
    // went by, however long: a slow machine lists less in them, never more.
    const lists = await requests('GET', '/api/v2/organizations/:org_id/api_keys');
    const creates = await requests('POST', '/api/v2/organizations/:org_id/api_keys');
    const revokes = await requests('DELETE', '/api/v2/organizations/:org_id/api_keys/:key_id');
    const quietFrom = records.length;
    const quietStart = performance.now();
    await eventually(async () => (passes(quietFrom).length >= 5 ? true : undefined), WAIT_MS, 'five more passes of the resource');
    const intervals = Math.ceil((performance.now() - quietStart) / DRIFT_MS);
    expect(passes(quietFrom).every((r) => r.actions.join() === 'Unverifiable')).toBe(true);
    expect((await requests('GET', '/api/v2/organizations/:org_id/api_keys')) - lists).toBeLessThanOrEqual(intervals + 1);
    expect(await requests('POST', '/api/v2/organizations/:org_id/api_keys')).toBe(creates);
    expect(await requests('DELETE', '/api/v2/organizations/:org_id/api_keys/:key_id')).toBe(revokes);
    expect(condition(await get(teamA, 'ApiKey', 'watched'), 'Ready')?.status).toBe('Unknown');

    // Fixed credentials: the check succeeds, finds the key revoked, and repairs it on its own.
    await freshCredentials(teamA, 'neon-admin');
    const again = await until(teamA, 'ApiKey', 'watched', (r) => ready(r) && r.status?.keyId !== first.status?.keyId, 'Ready with a new key', WAIT_MS);
    expect(condition(again, 'KeyIssued')?.reason).toBe('KeyLive');
  }, 180_000);

  it("one tenant's broken key never degrades another tenant's OperationsSettled, through a branch creation", async () => {
    const tenantCredsId = await freshCredentials(teamB, 'neon-admin');
    await freshCredentials(teamA, 'project-admin');
    // The tenant's key comes first, so the project's poller lists with it.
    await create(teamB, 'ProjectApiKey', 'tenant-ops', {
      organizationId: org,
      projectId: PROJECT,
      keyName: 'tenant-ops',
      credentialsSecretRef: { name: 'neon-admin' },
    });
    const tenant = await until(
      teamB,
      'ProjectApiKey',
      'tenant-ops',
      (r) => ready(r) && condition(r, 'OperationsSettled') !== undefined,
      'Ready with operations',
    );
    await create(teamA, 'ProjectApiKey', 'victim-ops', {
      organizationId: org,
      projectId: PROJECT,
      keyName: 'victim-ops',
      credentialsSecretRef: { name: 'project-admin' },
    });
    await until(teamA, 'ProjectApiKey', 'victim-ops', (r) => ready(r) && condition(r, 'OperationsSettled')?.status === 'True', 'Ready and settled');
    const refusedBefore = await counter('neon_key_operator_operations_polls_total', 'key_refused');

    // The tenant breaks everything it has: its issued key and its credentials, revoked.
    await alice.revokeOrganizationKey(org, tenant.status?.keyId ?? -1);
    await alice.revokePersonalKey(tenantCredsId);
    const seen: string[] = [];
    const sample = setInterval(() => {
      void get(teamA, 'ProjectApiKey', 'victim-ops').then(
        (r) => {
          const c = condition(r, 'OperationsSettled');
          if (c !== undefined) seen.push(`${c.status}/${c.reason}`);
        },
        () => undefined,
      );
    }, 100);
    try {
      // The poller meets the tenant's revoked key, and lists with the victim's instead.
      await eventually(
        async () => ((await counter('neon_key_operator_operations_polls_total', 'key_refused')) > refusedBefore ? true : undefined),
        20_000,
        'a refused key met by the poller',
      );
      const branch = await alice.createBranch(PROJECT);
      const ids = branch.operations.map((o) => o.id);
      const mirrored = await until(
        teamA,
        'ProjectApiKey',
        'victim-ops',
        (r) =>
          ids.every((id) => r.status?.operations?.some((o) => o.id === id && o.status === 'finished') === true) &&
          condition(r, 'OperationsSettled')?.status === 'True',
        "the branch's operations mirrored, finished",
        30_000,
      );
      expect(condition(mirrored, 'OperationsSettled')?.reason).toBe('AllTerminal');
    } finally {
      clearInterval(sample);
    }
    expect(seen.length).toBeGreaterThan(10);
    expect(seen.filter((s) => s.startsWith('Unknown'))).toEqual([]);
    // The tenant's own resource says what is wrong with it.
    await until(teamB, 'ProjectApiKey', 'tenant-ops', (r) => condition(r, 'Ready')?.status !== 'True', 'tenant not Ready', 20_000);
  });

  it('no secret value in the log', () => {
    const all = logLines.join('');
    expect(all).not.toMatch(/\b[a-z0-9]{64}\b/);
  });
});
