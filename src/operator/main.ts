// The operator CLI: `npm run operator -- --kubeconfig ~/.kube/config --platform-url http://127.0.0.1:8080/api/v2`.
// Flags win over the environment (NEON_API_URL, KUBECONFIG, WATCH_NAMESPACE, WORKERS, DRIFT_INTERVAL).
// SIGTERM / SIGINT drain in-flight reconciles before exiting. Start, readiness, leader election and
// shutdown are the runtime's manager (runtime/manager.ts); this file reads flags and wires.
//
// The operator has no platform credentials of its own (every resource names a Secret in its
// namespace), so a wrong or revoked platform key shows on that resource's conditions (KeyIssued,
// reason Unauthorized/Forbidden), never in readiness (runtime/manager.ts says what ready means).
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Manager } from './runtime/manager.ts';
import type { Leadership } from './runtime/write-fence.ts';
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
    'min-rotation-grace': { type: 'string' },
    'cache-stale-after': { type: 'string' },
    'watch-backoff-max': { type: 'string' },
    'signing-key-secret': { type: 'string' },
    'allow-insecure-platform-url': { type: 'boolean' },
    'inventory-organization-label': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (values.help === true) {
  console.log(`neon-key-operator
  --kubeconfig <file>                  default: $KUBECONFIG, in-cluster, ~/.kube/config
  --platform-url <url>                 platform API base URL ending in /api/v2 (default: $NEON_API_URL or https://console.neon.tech/api/v2)
  --workers <n>                        concurrent reconciles (default: $WORKERS or 16)
  --watch-namespace <ns>[,<ns>...]     watch these namespaces only (default: $WATCH_NAMESPACE or all)
  --drift-interval <duration>          e.g. 300s, 5m (default: $DRIFT_INTERVAL or 5m)
  --inventory-organization-label       label the inventory gauge with the organization id (default off)
  --pending-grace <duration>           how long another process's create intent is presumed in flight
                                       before it is recovered (default: $PENDING_GRACE or 2m; keep it
                                       longer than a create request can take)
  --unverified-after <duration>        how long drift checks of a key may fail (credentials refused,
                                       platform unavailable) before its conditions say it is no longer
                                       known to be live (default: $UNVERIFIED_AFTER or 2 drift intervals)
  --min-rotation-grace <duration>      the shortest a replaced key stays live after a rotation's switch:
                                       a shorter spec.rotation.gracePeriod is raised to it and reported
                                       (default: $MIN_ROTATION_GRACE or 1m, the CRD's floor; at least 1s;
                                       lower it only with CRDs rendered with the same floor, for tests)
  --cache-stale-after <duration>       how long an informer's watch may fail before its cache is stale:
                                       /readyz answers 503 naming it, and its keys are not trusted at
                                       rest (default: $CACHE_STALE_AFTER or 3m)
  --watch-backoff-max <duration>       the longest pause between retries of a failing LIST or WATCH
                                       (doubling from 1s; default: $WATCH_BACKOFF_MAX or 60s)
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

const workers = Number(values.workers ?? process.env.WORKERS ?? 16);
if (!Number.isInteger(workers) || workers < 1) throw new Error('--workers must be a positive integer');
const namespaces = parseWatchNamespaces(values['watch-namespace'] ?? process.env.WATCH_NAMESPACE);
const identity = process.env.POD_NAME ?? hostname();
const registry = new Registry();
const metrics = createMetrics(registry);

const leaderElect = values['leader-elect'] === true;
const leaseNamespace = process.env.POD_NAMESPACE ?? 'neon-key-operator-system';
const unverifiedAfter = values['unverified-after'] ?? process.env.UNVERIFIED_AFTER;
const cacheStaleAfter = values['cache-stale-after'] ?? process.env.CACHE_STALE_AFTER;
const watchBackoffMax = values['watch-backoff-max'] ?? process.env.WATCH_BACKOFF_MAX;
const minRotationGraceMs = duration(values['min-rotation-grace'] ?? process.env.MIN_ROTATION_GRACE ?? '1m');
if (minRotationGraceMs < 1_000) throw new Error('--min-rotation-grace must be at least 1s');
// The process's identity in intents and in the platform's logs (its user agent): the pod's name, and
// a suffix of its own, since a restarted container is another process.
const processIdentity = `${identity}-${randomBytes(4).toString('hex')}`;
const start = async (leadership: Leadership): Promise<RunningOperator> => await startOperator({
  kubeConfig,
  identity: processIdentity,
  leadership,
  platformBaseUrl: values['platform-url'] ?? process.env.NEON_API_URL ?? 'https://console.neon.tech/api/v2',
  workers,
  ...(namespaces !== undefined ? { namespaces } : {}),
  driftIntervalMs: duration(values['drift-interval'] ?? process.env.DRIFT_INTERVAL ?? '5m'),
  pendingGraceMs: duration(values['pending-grace'] ?? process.env.PENDING_GRACE ?? '2m'),
  ...(unverifiedAfter !== undefined ? { unverifiedAfterMs: duration(unverifiedAfter) } : {}),
  minRotationGraceMs,
  ...(cacheStaleAfter !== undefined ? { cacheStaleAfterMs: duration(cacheStaleAfter) } : {}),
  ...(watchBackoffMax !== undefined ? { informers: { backoff: { maxMs: Math.max(1_000, duration(watchBackoffMax)) } } } : {}),
  signingKeySecret: { namespace: leaseNamespace, name: values['signing-key-secret'] ?? 'neon-key-operator-signing-key' },
  allowInsecurePlatformUrl: values['allow-insecure-platform-url'] === true || process.env.ALLOW_INSECURE_PLATFORM_URL === 'true',
  logger,
  metrics,
  inventoryOrganizationLabel: values['inventory-organization-label'] === true,
});

const manager = new Manager({
  kubeConfig,
  logger,
  registry,
  addresses: [bindAddress(values['health-probe-bind-address'] ?? ':8081'), bindAddress(values['metrics-bind-address'] ?? ':8080')],
  start,
  ...(leaderElect ? {
    leaderElection: {
      namespace: leaseNamespace,
      name: values['leader-election-id'] ?? 'neon-key-operator',
      identity,
      // client-go / controller-runtime defaults; LeaderElector rejects lease <= renew <= retry.
      leaseDurationMs: duration(values['leader-elect-lease-duration'] ?? '15s'),
      renewDeadlineMs: duration(values['leader-elect-renew-deadline'] ?? '10s'),
      retryPeriodMs: duration(values['leader-elect-retry-period'] ?? '2s'),
    },
  } : {}),
  onLeading: (leading) => metrics.leader.set(leading ? 1 : 0),
});
process.on('SIGTERM', () => manager.shutdown('SIGTERM'));
process.on('SIGINT', () => manager.shutdown('SIGINT'));
await manager.run();
