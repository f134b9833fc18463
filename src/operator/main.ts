// The operator CLI: `npm run operator -- --kubeconfig ~/.kube/config --platform-url http://127.0.0.1:8080/api/v2`.
// Flags win over the environment (NEON_API_URL, KUBECONFIG, WATCH_NAMESPACE, WORKERS, DRIFT_INTERVAL).
// SIGTERM / SIGINT drain in-flight reconciles before exiting.
import { parseArgs } from 'node:util';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { startHealthServer, type HealthServer } from './health-server.ts';
import { LeaderElector } from './leader.ts';
import { createLogger } from './logger.ts';
import { startOperator, type RunningOperator } from './manager.ts';
import { createMetrics } from './metrics.ts';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    'platform-url': { type: 'string' },
    'metrics-bind-address': { type: 'string' },
    'health-probe-bind-address': { type: 'string' },
    workers: { type: 'string' },
    'watch-namespace': { type: 'string' },
    'leader-elect': { type: 'boolean' },
    'drift-interval': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (values.help === true) {
  console.log(`neon-key-operator
  --kubeconfig <file>                  default: $KUBECONFIG, in-cluster, ~/.kube/config
  --platform-url <url>                 platform API base URL ending in /api/v2 (default: $NEON_API_URL or https://console.neon.tech/api/v2)
  --workers <n>                        concurrent reconciles (default: $WORKERS or 4)
  --watch-namespace <ns>               watch one namespace (default: $WATCH_NAMESPACE or all)
  --drift-interval <duration>          e.g. 300s, 5m (default: $DRIFT_INTERVAL or 5m)
  --leader-elect                       elect a leader on a Lease before reconciling
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

function bindAddress(text: string): { host: string; port: number } {
  const index = text.lastIndexOf(':');
  const host = text.slice(0, index).replace(/^\[|\]$/g, '');
  return { host: host === '' ? '0.0.0.0' : host, port: Number(text.slice(index + 1)) };
}

const workers = Number(values.workers ?? process.env.WORKERS ?? 4);
if (!Number.isInteger(workers) || workers < 1) throw new Error('--workers must be a positive integer');
const namespace = values['watch-namespace'] ?? process.env.WATCH_NAMESPACE;
const identity = process.env.POD_NAME ?? hostname();
const registry = new Registry();
const metrics = createMetrics(registry);

let operator: RunningOperator | undefined;
const leaderElect = values['leader-elect'] === true;
const start = async (): Promise<RunningOperator> => await startOperator({
  kubeConfig,
  platformBaseUrl: values['platform-url'] ?? process.env.NEON_API_URL ?? 'https://console.neon.tech/api/v2',
  workers,
  ...(namespace !== undefined && namespace !== '' ? { namespace } : {}),
  driftIntervalMs: duration(values['drift-interval'] ?? process.env.DRIFT_INTERVAL ?? '5m'),
  logger,
  metrics,
});

const servers: HealthServer[] = [];
const health = bindAddress(values['health-probe-bind-address'] ?? ':8081');
const metricsAddress = bindAddress(values['metrics-bind-address'] ?? ':8080');
for (const address of [health, metricsAddress]) {
  if (address.port === 0 && servers.length > 0) continue;
  servers.push(await startHealthServer({
    ...address,
    registry,
    healthz: () => true,
    // Standbys are ready (DESIGN.md section 5): they serve probes and wait for the lease.
    readyz: async () => (operator === undefined && leaderElect) || operator?.ready() === true
      ? { ok: true } : { ok: false, reasons: ['informers not synced'] },
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
    namespace: process.env.POD_NAMESPACE ?? 'neon-key-operator-system',
    name: 'neon-key-operator',
    identity,
    logger,
    onStartedLeading: async () => {
      metrics.leader.set(1);
      operator = await start();
    },
    // Like client-go: a replica that lost the lease exits, and comes back as a standby.
    onStoppedLeading: () => {
      metrics.leader.set(0);
      shutdown('lost leadership', 1);
    },
  });
  void elector.run(stopAll.signal);
} else {
  operator = await start();
}
