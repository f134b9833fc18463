// Conditions tell the truth when the platform cannot be asked, and one tenant's broken key never
// degrades another tenant's operations mirror. A real apiserver, the emulator over HTTP, one
// operator serving two namespaces (two teams on one project of one organization).
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { createMetrics } from '../../src/operator/keys/status/metrics.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { eventually, intentSettled } from './support.ts';
import { capturedLog, type Condition, operatorSuite, PLURALS } from './fixture.ts';

const PROJECT = 'quiet-river-00000001';
type Kind = 'ApiKey' | 'ProjectApiKey';
interface Resource {
  metadata: { name: string; annotations?: Record<string, string> };
  status?: { keyId?: number; conditions?: Condition[]; operations?: { id: string; action: string; status: string }[] };
}
const DRIFT_MS = 1_000;
const UNVERIFIED_AFTER_MS = 2_000;
/** How long a wait below may take before its test fails saying what it waited for (not a bound on the operator). */
const WAIT_MS = 45_000;

describe('status tells the truth', () => {
  let teamA: string;
  let teamB: string;
  let alice: PlatformClient;
  const { logger, lines: logLines } = capturedLog('debug');
  const metrics = createMetrics(new Registry(), { defaultMetrics: false });
  /** Every reconcile of the operator, as it ended. */
  const records: ReconcileRecord[] = [];

  const requests = async (method: string, route: string): Promise<number> =>
    ((await (await fetch(`${suite.emulator.adminUrl}/requests`)).json()) as { method: string; route: string; count: number }[])
      .filter((r) => r.method === method && r.route === route)
      .reduce((n, r) => n + r.count, 0);
  const get = (ns: string, kind: Kind, name: string): Promise<Resource> => suite.get<Resource>(PLURALS[kind], name, ns);
  const create = (ns: string, kind: Kind, name: string, spec: Record<string, unknown>): Promise<unknown> => suite.apply(kind, { name }, spec, ns);
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const until = (ns: string, kind: Kind, name: string, test: (r: Resource) => boolean, what: string, timeoutMs = 20_000): Promise<Resource> =>
    suite.until<Resource>(PLURALS[kind], name, test, what, timeoutMs, ns);
  const ready = (r: Resource): boolean => condition(r, 'Ready')?.status === 'True' && intentSettled(r);
  /** A credentials Secret holding a fresh personal key of alice (an administrator), and that key's id. */
  const freshCredentials = async (ns: string, name: string): Promise<number> => {
    const key = await alice.createPersonalKey(`creds-${ns}-${name}`);
    await suite.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: { apiKey: key.key } } }).catch(async () => {
      await suite.core.replaceNamespacedSecret({ namespace: ns, name, body: { metadata: { name }, stringData: { apiKey: key.key } } });
    });
    return key.id;
  };
  const counter = async (name: string, outcome: string): Promise<number> =>
    (await metrics.registry.getSingleMetric(name)?.get())?.values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

  // No credentials Secret from the fixture: each test makes its own, of a fresh key it revokes.
  const suite = operatorSuite({
    namespaces: ['truth-a', 'truth-b'],
    credentials: false,
    before: async (s) => {
      [teamA = '', teamB = ''] = s.namespaces;
      alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
    },
    operator: () => ({
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
    }),
  });

  it('credentials revoked under a Ready resource: a clear condition at the bound, no request storm, Ready again once fixed', async () => {
    const credsId = await freshCredentials(teamA, 'neon-admin');
    await create(teamA, 'ApiKey', 'watched', {
      scope: 'Organization',
      organizationId: suite.org,
      keyName: 'watched',
      credentialsSecretRef: { name: 'neon-admin' },
    });
    const first = await until(teamA, 'ApiKey', 'watched', ready, 'Ready');
    const failedBefore = await counter('neon_key_operator_drift_checks_total', 'failed');
    const passes = (from: number): ReconcileRecord[] => records.slice(from).filter((r) => r.namespace === teamA && r.name === 'watched');

    // The credentials revoked, and the issued key with them: nothing can be verified any more.
    const recordsFrom = records.length;
    const revokedAt = Date.now();
    await alice.revokePersonalKey(credsId);
    await alice.revokeOrganizationKey(suite.org, first.status?.keyId ?? -1);
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
      organizationId: suite.org,
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
      organizationId: suite.org,
      projectId: PROJECT,
      keyName: 'victim-ops',
      credentialsSecretRef: { name: 'project-admin' },
    });
    await until(teamA, 'ProjectApiKey', 'victim-ops', (r) => ready(r) && condition(r, 'OperationsSettled')?.status === 'True', 'Ready and settled');
    const refusedBefore = await counter('neon_key_operator_operations_polls_total', 'key_refused');

    // The tenant breaks everything it has: its issued key and its credentials, revoked.
    await alice.revokeOrganizationKey(suite.org, tenant.status?.keyId ?? -1);
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
