// The operator CLI: `npm run operator -- --kubeconfig ~/.kube/config --platform-url http://127.0.0.1:8080/api/v2`.
// Flags win over the environment (NEON_API_URL, KUBECONFIG, WATCH_NAMESPACE, WORKERS, DRIFT_INTERVAL).
// SIGTERM / SIGINT drain in-flight reconciles before exiting.
//
// Readiness (/readyz): ready means "this replica can do its job". The leader is ready once its
// informers have listed every watched kind with the operator's Kubernetes credentials (caches
// synced). A standby (--leader-elect, not holding the Lease) runs no informers, like a
// controller-runtime standby it is ready, as long as its Kubernetes credentials work: it can read
// the Lease it campaigns for. The operator has no platform credentials of its own (every resource
// names a Secret in its namespace), so a wrong or revoked platform key shows on that resource's
// conditions (KeyIssued, reason Unauthorized/Forbidden), never in readiness: one tenant's bad
// Secret or a platform outage must not take every replica out of its Service.
import { parseArgs } from 'node:util';
import { hostname } from 'node:os';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { startHealthServer, type HealthServer } from './runtime/health-server.ts';
import { LeaderElector } from './runtime/leader.ts';
import { reuseKubeConnections } from './runtime/kube-connections.ts';
import { createLogger } from './runtime/logger.ts';
import { startOperator, type RunningOperator } from './manager.ts';
import { createMetrics } from './keys/metrics.ts';
import { parseWatchNamespaces } from './runtime/watch-namespaces.ts';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    'platform-url': { type: 'string' },
    'metrics-bind-address': { type: 'string' },
    'health-probe-bind-address': { type: 'string' },
    workers: { type: 'string' },
    'watch-namespace': { type: 'string' },
    'leader-elect': { type: 'boolean' },
    'leader-election-id': { type: 'string' },
    'leader-elect-lease-duration': { type: 'string' },
    'leader-elect-renew-deadline': { type: 'string' },
    'leader-elect-retry-period': { type: 'string' },
    'drift-interval': { type: 'string' },
    'pending-grace': { type: 'string' },
    'unverified-after': { type: 'string' },
    'signing-key-secret': { type: 'string' },
    'allow-insecure-platform-url': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (values.help === true) {
  console.log(`neon-key-operator
  --kubeconfig <file>                  default: $KUBECONFIG, in-cluster, ~/.kube/config
  --platform-url <url>                 platform API base URL ending in /api/v2 (default: $NEON_API_URL or https://console.neon.tech/api/v2)
  --workers <n>                        concurrent reconciles (default: $WORKERS or 4)
  --watch-namespace <ns>[,<ns>...]     watch these namespaces only (default: $WATCH_NAMESPACE or all)
  --drift-interval <duration>          e.g. 300s, 5m (default: $DRIFT_INTERVAL or 5m)
  --pending-grace <duration>           how long another process's create intent is presumed in flight
                                       before it is recovered (default: $PENDING_GRACE or 2m; keep it
                                       longer than a create request can take)
  --unverified-after <duration>        how long drift checks of a key may fail (credentials refused,
                                       platform unavailable) before its conditions say it is no longer
                                       known to be live (default: $UNVERIFIED_AFTER or 2 drift intervals)
  --signing-key-secret <name>          Secret in $POD_NAMESPACE holding the key that signs what the
                                       operator writes on resources and Secrets; made when missing
                                       (default neon-key-operator-signing-key)
  --allow-insecure-platform-url        allow a plain http --platform-url to a host that is not loopback
                                       (the API keys would travel in clear text; e.g. an in-cluster emulator)
  --leader-elect                       elect a leader on a Lease (in $POD_NAMESPACE) before reconciling
  --leader-election-id <name>          name of the Lease (default neon-key-operator)
  --leader-elect-lease-duration <d>    how long standbys wait before taking an unrenewed Lease (default 15s)
  --leader-elect-renew-deadline <d>    how long the leader retries renewing before it stops leading (default 10s)
  --leader-elect-retry-period <d>      how often candidates try to acquire and the leader renews (default 2s)
  --metrics-bind-address <host:port>   Prometheus /metrics (default :8080)
  --health-probe-bind-address <h:p>    /healthz and /readyz (default :8081)`);
  process.exit(0);
}

function duration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) throw new Error(`not a duration: ${text} (e.g. 30s, 5m)`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h' | undefined ?? 's'];
  return Number(match[1]) * unit;
}

const logger = createLogger();
const kubeConfig = new KubeConfig();
const kubeconfigPath = values.kubeconfig ?? process.env.KUBECONFIG;
if (kubeconfigPath !== undefined && kubeconfigPath !== '') kubeConfig.loadFromFile(kubeconfigPath);
else kubeConfig.loadFromDefault();
// One keep-alive connection pool to the API server instead of a new one per request (kube-connections.ts).
reuseKubeConnections(kubeConfig);

function bindAddress(text: string): { host: string; port: number } {
  const index = text.lastIndexOf(':');
  const host = text.slice(0, index).replace(/^\[|\]$/g, '');
  return { host: host === '' ? '0.0.0.0' : host, port: Number(text.slice(index + 1)) };
}

const workers = Number(values.workers ?? process.env.WORKERS ?? 4);
if (!Number.isInteger(workers) || workers < 1) throw new Error('--workers must be a positive integer');
const namespaces = parseWatchNamespaces(values['watch-namespace'] ?? process.env.WATCH_NAMESPACE);
const identity = process.env.POD_NAME ?? hostname();
const registry = new Registry();
const metrics = createMetrics(registry);

let operator: RunningOperator | undefined;
const leaderElect = values['leader-elect'] === true;
const leaseNamespace = process.env.POD_NAMESPACE ?? 'neon-key-operator-system';
const leaseName = values['leader-election-id'] ?? 'neon-key-operator';
// client-go / controller-runtime defaults; LeaderElector rejects lease <= renew <= retry.
const leaseDurationMs = duration(values['leader-elect-lease-duration'] ?? '15s');
const renewDeadlineMs = duration(values['leader-elect-renew-deadline'] ?? '10s');
const retryPeriodMs = duration(values['leader-elect-retry-period'] ?? '2s');
let leading = false;
const unverifiedAfter = values['unverified-after'] ?? process.env.UNVERIFIED_AFTER;
const start = async (): Promise<RunningOperator> => await startOperator({
  kubeConfig,
  platformBaseUrl: values['platform-url'] ?? process.env.NEON_API_URL ?? 'https://console.neon.tech/api/v2',
  workers,
  ...(namespaces !== undefined ? { namespaces } : {}),
  driftIntervalMs: duration(values['drift-interval'] ?? process.env.DRIFT_INTERVAL ?? '5m'),
  pendingGraceMs: duration(values['pending-grace'] ?? process.env.PENDING_GRACE ?? '2m'),
  ...(unverifiedAfter !== undefined ? { unverifiedAfterMs: duration(unverifiedAfter) } : {}),
  signingKeySecret: { namespace: leaseNamespace, name: values['signing-key-secret'] ?? 'neon-key-operator-signing-key' },
  allowInsecurePlatformUrl: values['allow-insecure-platform-url'] === true || process.env.ALLOW_INSECURE_PLATFORM_URL === 'true',
  logger,
  metrics,
});

// See the top of this file for what ready means.
const leases = kubeConfig.makeApiClient(CoordinationV1Api);
const readyz = async (): Promise<{ ok: boolean; reasons?: string[] }> => {
  if (!leaderElect || leading) {
    return operator?.ready() === true ? { ok: true } : { ok: false, reasons: ['caches not synced'] };
  }
  // Standby (DESIGN.md section 5): ready, provided its Kubernetes credentials work.
  try {
    await leases.readNamespacedLease({ name: leaseName, namespace: leaseNamespace });
    return { ok: true };
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (code === 404) return { ok: true }; // authorized; the first candidate creates it
    return { ok: false, reasons: [`standby cannot read Lease ${leaseNamespace}/${leaseName}: ${typeof code === 'number' ? `HTTP ${code}` : error instanceof Error ? error.message : String(error)}`] };
  }
};

const servers: HealthServer[] = [];
const health = bindAddress(values['health-probe-bind-address'] ?? ':8081');
const metricsAddress = bindAddress(values['metrics-bind-address'] ?? ':8080');
for (const address of [health, metricsAddress]) {
  if (address.port === 0 && servers.length > 0) continue;
  servers.push(await startHealthServer({
    ...address,
    registry,
    healthz: () => true,
    readyz,
  }));
}

const stopAll = new AbortController();
let stopping = false;
const shutdown = (signal: string, code = 0): void => {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'draining in-flight reconciles');
  const force = setTimeout(() => process.exit(1), 25_000);
  force.unref();
  stopAll.abort();
  (async () => {
    await operator?.stop();
    await elector?.release().catch(() => undefined);
    await Promise.all(servers.map((s) => s.close()));
  })().then(() => process.exit(code), (error: unknown) => {
    logger.error({ err: error instanceof Error ? error.message : String(error) }, 'shutdown failed');
    process.exit(1);
  });
};
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

let elector: LeaderElector | undefined;
if (leaderElect) {
  elector = new LeaderElector({
    kubeConfig,
    namespace: leaseNamespace,
    name: leaseName,
    identity,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    logger,
    onStartedLeading: async () => {
      leading = true;
      metrics.leader.set(1);
      operator = await start();
    },
    // Like client-go: a replica that lost the lease exits, and comes back as a standby.
    onStoppedLeading: () => {
      leading = false;
      metrics.leader.set(0);
      shutdown('lost leadership', 1);
    },
  });
  void elector.run(stopAll.signal);
} else {
  operator = await start();
}
