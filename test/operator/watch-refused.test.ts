// A namespace whose watch the apiserver refuses (the operator's RoleBinding there removed), then
// restored (issue 30): the informers of that namespace back off to one request per cap, /readyz
// names the stale caches, a Secret deleted meanwhile is repaired once the watch is back (by the
// watch: the drift interval is an hour, so no drift pass comes within the test), and the other
// namespace never notices. A real apiserver, the emulator over HTTP, one operator with Roles
// in two namespaces only (a ServiceAccount of this suite, bound to deploy/base's ClusterRole by a
// RoleBinding in each), and its real /readyz.
//
// The timings are shortened so the suite runs in under a minute; the issue's 5-minute outage with
// the operator's default timings is the same story with
//   NKO_WATCH_OUTAGE_SECONDS=300 NKO_WATCH_BACKOFF_MAX_SECONDS=60 NKO_CACHE_STALE_AFTER_SECONDS=180 \
//   NKO_WATCH_TIMEOUT_SECONDS=30 npm run jest -- test/operator/watch-refused.test.ts
// (docs/reliability.md "Stale caches" has its figures).
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Manager } from '../../src/operator/runtime/manager.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { createMetrics } from '../../src/operator/keys/status/metrics.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { freePort } from '../harness/controlplane.ts';
import { OPERATOR_NAMESPACE, eventually, intentSettled, onEveryRequest } from './support.ts';
import { capturedLog, group, operatorSuite, version } from './fixture.ts';

const seconds = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number of seconds`);
  return value * 1000;
};
const OUTAGE_MS = seconds('NKO_WATCH_OUTAGE_SECONDS', 14);
const CAP_MS = seconds('NKO_WATCH_BACKOFF_MAX_SECONDS', 2);
const STALE_MS = seconds('NKO_CACHE_STALE_AFTER_SECONDS', 4);
/** The watches must end for a removed RoleBinding to be noticed: an open watch goes on. */
const WATCH_TIMEOUT_MS = seconds('NKO_WATCH_TIMEOUT_SECONDS', 2);
const INITIAL_MS = Math.min(1_000, CAP_MS / 8);
/** An hour: only the watch's return (its events, or the relist) can bring the repair within the test. */
const DRIFT_MS = seconds('NKO_DRIFT_INTERVAL_SECONDS', 3_600);
/** How long a wait below may take before the test fails saying what it waited for (not a bound on the operator). */
const WAIT_MS = 45_000;
const LONG = OUTAGE_MS > 60_000;

interface Attempt {
  at: number;
  path: string;
  verb: 'list' | 'watch';
}
interface Resource {
  metadata: { annotations?: Record<string, string> };
  status?: { conditions?: { type: string; status: string }[]; secretName?: string; keyId?: number; keyName?: string };
}

describe('a namespace whose watch is refused', () => {
  let manager: Manager | undefined;
  let rbac: RbacAuthorizationV1Api;
  let teamA: string;
  let teamB: string;
  let serviceAccount: string;
  let healthPort: number;
  const attempts: Attempt[] = [];
  const records: ReconcileRecord[] = [];
  const { logger, lines: logLines } = capturedLog('info');
  const metrics = createMetrics(new Registry(), { defaultMetrics: false });

  const binding = (namespace: string): Parameters<RbacAuthorizationV1Api['createNamespacedRoleBinding']>[0] => ({
    namespace,
    body: {
      metadata: { name: serviceAccount },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'neon-key-operator' },
      subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace: OPERATOR_NAMESPACE }],
    },
  });
  const readyz = async (): Promise<{ status: number; body: string }> => {
    const response = await fetch(`http://127.0.0.1:${healthPort}/readyz`);
    return { status: response.status, body: await response.text() };
  };
  const ready = (r: Resource): boolean => r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && intentSettled(r);
  const getKey = (ns: string, name: string): Promise<Resource> => suite.get<Resource>('apikeys', name, ns);
  const secretExists = async (ns: string, name: string): Promise<boolean> => {
    try {
      await suite.core.readNamespacedSecret({ namespace: ns, name });
      return true;
    } catch {
      return false;
    }
  };
  const informerPaths = (ns: string): string[] => [
    `/apis/${group}/${version}/namespaces/${ns}/apikeys`,
    `/apis/${group}/${version}/namespaces/${ns}/projectapikeys`,
    `/apis/${group}/${version}/namespaces/${ns}/apikeyinventories`,
    `/api/v1/namespaces/${ns}/secrets`,
  ];

  // The operator runs under a Manager (its real /readyz), as this suite's own ServiceAccount: the
  // fixture stops it first, `after` shuts the Manager down and removes the ServiceAccount.
  const suite = operatorSuite({
    namespaces: ['refused-a', 'refused-b'],
    // Each namespace's credentials are a fresh personal key of alice, made below.
    credentials: false,
    before: async (s) => {
      [teamA = '', teamB = ''] = s.namespaces;
      rbac = s.cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
      const alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
      // An operator with Roles in these two namespaces only: deploy/base's ServiceAccount is bound cluster-wide.
      serviceAccount = `nko-refused-${randomBytes(3).toString('hex')}`;
      await s.core.createNamespacedServiceAccount({ namespace: OPERATOR_NAMESPACE, body: { metadata: { name: serviceAccount } } });
      for (const ns of [teamA, teamB]) {
        await rbac.createNamespacedRoleBinding(binding(ns));
        const key = await alice.createPersonalKey(`creds-${ns}`);
        await s.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: key.key } } });
        await s.apply(
          'ApiKey',
          { name: 'app' },
          { scope: 'Organization', organizationId: s.org, keyName: `app-${ns}`, credentialsSecretRef: { name: 'neon-admin' } },
          ns,
        );
      }
      const kubeConfig = s.cp.kubeConfigForToken(await s.cp.mintServiceAccountToken(OPERATOR_NAMESPACE, serviceAccount, 3600));
      // Every LIST and WATCH an informer sends (a GET of an informer's path; a GET of one object has its name after it).
      onEveryRequest(kubeConfig, (context) => {
        const url = new URL(context.getUrl());
        if (context.getHttpMethod() !== 'GET') return;
        for (const ns of [teamA, teamB]) {
          if (informerPaths(ns).includes(url.pathname))
            attempts.push({ at: Date.now(), path: url.pathname, verb: url.searchParams.get('watch') === 'true' ? 'watch' : 'list' });
        }
      });
      healthPort = await freePort();
      manager = new Manager({
        kubeConfig,
        logger,
        registry: metrics.registry,
        probes: { host: '127.0.0.1', port: healthPort },
        start: () =>
          s.startOperator({
            kubeConfig,
            namespaces: [teamA, teamB],
            workers: 4,
            driftIntervalMs: DRIFT_MS,
            pendingGraceMs: 2_000,
            maxBackoffMs: 4_000,
            signingKey: randomBytes(32),
            cacheStaleAfterMs: STALE_MS,
            informers: { backoff: { initialMs: INITIAL_MS, maxMs: CAP_MS }, minWatchTimeoutSeconds: WATCH_TIMEOUT_MS / 1000, healthyWatchMs: 1_000 },
            logger,
            metrics,
            identity: 'watch-refused',
            onReconcile: (record) => records.push(record),
          }),
        exit: () => undefined,
      });
      await manager.run();
    },
    after: async (s) => {
      manager?.shutdown('test over');
      await eventually(
        async () =>
          await fetch(`http://127.0.0.1:${healthPort}/readyz`).then(
            () => undefined,
            () => true,
          ),
        10_000,
        'health server closed',
      ).catch(() => undefined);
      if (serviceAccount !== undefined)
        await s.core.deleteNamespacedServiceAccount({ namespace: OPERATOR_NAMESPACE, name: serviceAccount }).catch(() => undefined);
    },
  });

  it(
    `backs off to one request per ${CAP_MS / 1000} s per informer, /readyz names the stale caches, and a Secret deleted meanwhile is repaired once the watch is back`,
    async () => {
      for (const ns of [teamA, teamB]) await eventually(async () => (ready(await getKey(ns, 'app')) ? true : undefined), 30_000, `${ns}/app Ready`);
      const secretB = (await getKey(teamB, 'app')).status?.secretName ?? 'app';
      expect(await secretExists(teamB, secretB)).toBe(true);
      await eventually(async () => ((await readyz()).status === 200 ? true : undefined), 10_000, 'ready');

      // The outage: the operator may no longer list or watch (or read, or write) in team B.
      await rbac.deleteNamespacedRoleBinding({ namespace: teamB, name: serviceAccount });
      const outageStart = Date.now();
      // The watches open when it began go on until their server-side timeout; the first refusal follows.
      const refusedLine = (line: string): boolean => {
        if (!line.includes('watch failed; retrying') || !line.includes(teamB)) return false;
        const { reason, time } = JSON.parse(line) as { reason?: string; time?: number };
        return reason === 'failed' && (time ?? 0) >= outageStart;
      };
      await eventually(async () => (logLines.some(refusedLine) ? true : undefined), WATCH_TIMEOUT_MS * 2 + WAIT_MS, 'a refused watch in team B');
      // When the operator logged it (this test may see the line later, on a loaded machine).
      const firstRefusal = Math.min(...logLines.filter(refusedLine).map((l) => (JSON.parse(l) as { time: number }).time));
      // A Secret deleted meanwhile: the operator cannot see it go.
      await suite.core.deleteNamespacedSecret({ namespace: teamB, name: secretB });

      // Stale once the watch has failed for the bound: /readyz says which caches, and only those.
      const notReady = await eventually(
        async () => {
          const r = await readyz();
          return r.status === 503 && r.body.includes(`Secret cache of namespace ${teamB} is stale`) ? r : undefined;
        },
        STALE_MS + 3 * CAP_MS + WAIT_MS,
        '/readyz naming the stale Secret cache of team B',
      );
      expect(Date.now() - firstRefusal).toBeGreaterThanOrEqual(STALE_MS - 1_000);
      expect(notReady.body).toMatch(new RegExp(`Secret cache of namespace ${teamB} is stale: its watch has failed for \\d+ s \\(.*403.*\\)`));
      expect(notReady.body).not.toContain(teamA);
      const staleGauge = (await metrics.registry.getSingleMetric('neon_key_operator_stale_caches')?.get())?.values.find(
        (v) => v.labels.resource === 'Secret',
      )?.value;
      expect(staleGauge).toBe(1);

      const remaining = OUTAGE_MS - (Date.now() - outageStart);
      if (remaining > 0) await new Promise((resolve) => setTimeout(resolve, remaining));
      const outageEnd = Date.now();
      await rbac.createNamespacedRoleBinding(binding(teamB));

      // Each informer of team B: the pauses between its attempts double up to the cap, and at the cap
      // it sends at most one request per cap (a LIST, or a WATCH from its last version).
      const report: string[] = [];
      const kinds: Record<string, string> = { apikeys: 'ApiKey', projectapikeys: 'ProjectApiKey', apikeyinventories: 'ApiKeyInventory', secrets: 'Secret' };
      for (const path of informerPaths(teamB)) {
        // From this informer's first refusal (the attempt refused is logged within milliseconds; the
        // one before it opened a watch that lasted at least a server-side timeout).
        const kind = kinds[path.split('/').at(-1) ?? ''];
        const refusals = logLines
          .filter(refusedLine)
          .map((l) => JSON.parse(l) as { kind?: string; time?: number; reason?: string })
          .filter((l) => l.kind === kind && l.reason === 'failed' && (l.time ?? 0) >= outageStart);
        const from = (refusals[0]?.time ?? firstRefusal) - 500;
        const times = attempts.filter((a) => a.path === path && a.at >= from && a.at <= outageEnd).map((a) => a.at);
        const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0));
        // Reached the cap after about log2(cap / initial) pauses; from then on no gap is shorter than it.
        const atCap = gaps.slice(Math.ceil(Math.log2(CAP_MS / INITIAL_MS)) + 1);
        for (const gap of atCap) expect(gap).toBeGreaterThanOrEqual(CAP_MS - 50);
        const minutes = (outageEnd - firstRefusal) / 60_000;
        report.push(
          `${path.split('/').at(-1)}: ${times.length} requests over ${(minutes * 60).toFixed(0)} s, gaps ${gaps.map((g) => (g / 1000).toFixed(1)).join(', ')} s`,
        );
        // At most one per cap once there, plus the climb to it: a count, over the time the outage
        // lasted from this informer's first refusal (a loaded machine makes fewer, never more).
        expect(times.length).toBeLessThanOrEqual(Math.ceil((outageEnd - from) / CAP_MS) + Math.ceil(Math.log2(CAP_MS / INITIAL_MS)) + 2);
      }
      // One log line per failure, no more.
      const failureLines = logLines.filter(refusedLine).length;
      const teamBAttempts = attempts.filter((a) => a.path.includes(`/namespaces/${teamB}/`) && a.at >= firstRefusal - CAP_MS && a.at <= outageEnd).length;
      expect(failureLines).toBeLessThanOrEqual(teamBAttempts + 3);
      // Team A never noticed: its watches were never refused (the short watch timeouts of this suite
      // may meet the apiserver's own throttling, a 429, which is retried the same way).
      expect(logLines.filter((l) => l.includes('watch failed; retrying') && l.includes(teamA) && l.includes('403'))).toEqual([]);
      expect(condition(await getKey(teamA, 'app'))).toBe('True');

      // Back: the watch returns (after at most a pause at the cap), readiness with it, and the deleted
      // Secret is written again, woken by the watch's return: no drift pass comes within an hour.
      const back = await eventually(async () => ((await readyz()).status === 200 ? Date.now() : undefined), CAP_MS + WAIT_MS, 'ready again');
      await eventually(
        async () => ((await secretExists(teamB, (await getKey(teamB, 'app')).status?.secretName ?? secretB)) ? true : undefined),
        WAIT_MS,
        'the Secret repaired',
      ).catch((error: unknown) => {
        // What the operator did meanwhile, to tell why.
        const since = outageEnd - 5_000;
        process.stderr.write(
          `${records
            .filter((r) => r.namespace === teamB && r.endedAt >= since)
            .map((r) => JSON.stringify({ ...r, startedAt: r.startedAt - outageEnd, endedAt: r.endedAt - outageEnd }))
            .join('\n')}\n`,
        );
        process.stderr.write(
          `${logLines
            .filter((l) => l.includes(teamB) && (JSON.parse(l) as { time: number }).time >= since)
            .slice(-30)
            .join('')}\n`,
        );
        throw error;
      });
      const repaired = Date.now();
      const repair = records
        .filter((r) => r.namespace === teamB && r.endedAt >= back - 5_000 && r.startedAt <= repaired)
        .map(
          (r) =>
            `${((r.startedAt - back) / 1000).toFixed(1)}..${((r.endedAt - back) / 1000).toFixed(1)} s ${r.actions.join('+')} ${r.result}${r.restBroken !== undefined ? ` (${r.restBroken})` : ''}`,
        );
      const lists = (await metrics.registry.getSingleMetric('neon_key_operator_informer_lists_total')?.get())?.values.map(
        (v) => `${v.labels.resource} ${v.value}`,
      );
      const restarts = (await metrics.registry.getSingleMetric('neon_key_operator_watch_restarts_total')?.get())?.values.map(
        (v) => `${v.labels.resource}/${v.labels.reason} ${v.value}`,
      );
      const summary = [
        `outage ${((outageEnd - outageStart) / 1000).toFixed(0)} s (first refusal after ${((firstRefusal - outageStart) / 1000).toFixed(1)} s); cap ${CAP_MS / 1000} s, stale after ${STALE_MS / 1000} s`,
        ...report,
        `log lines "watch failed" for team B: ${failureLines}`,
        `ready again ${((back - outageEnd) / 1000).toFixed(1)} s after the RoleBinding returned; Secret repaired ${((repaired - back) / 1000).toFixed(1)} s after that`,
        `informer LISTs: ${lists?.join(', ')}; watch restarts: ${restarts?.join(', ')}`,
        `reconciles of team B's key from the watch's return to the repair: ${repair.join('; ')}`,
        `team B's LISTs and WATCHes from the RoleBinding's return (s after ready again): ${attempts
          .filter((a) => a.path.includes(`/namespaces/${teamB}/`) && a.at >= outageEnd)
          .map((a) => `${a.path.split('/').at(-1)} ${a.verb}@${((a.at - back) / 1000).toFixed(1)}`)
          .join(', ')}`,
      ];
      if (LONG || process.env.NKO_WATCH_REPORT === '1') process.stderr.write(`[watch-refused] ${summary.join('\n[watch-refused] ')}\n`);
      // Repaired (the wait above) by the event of the deletion or the relist that finds the Secret
      // gone, not by a drift check: with an interval of an hour, none comes within the test.
    },
    OUTAGE_MS + STALE_MS + 4 * CAP_MS + 5 * WAIT_MS,
  );
});

function condition(r: { status?: { conditions?: { type: string; status: string }[] } }): string | undefined {
  return r.status?.conditions?.find((c) => c.type === 'Ready')?.status;
}
