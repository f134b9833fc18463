// The operator CLI: `npm run operator -- --kubeconfig ~/.kube/config --platform-url http://127.0.0.1:8080/api/v2`.
// The flags, their environment variables and defaults are flags.ts's (docs/reference/flags.md).
// SIGTERM / SIGINT drain in-flight reconciles before exiting. Start, readiness, leader election and
// shutdown are the runtime's manager (runtime/manager.ts); this file reads flags and wires.
//
// The operator has no platform credentials of its own (every resource names a Secret in its
// namespace), so a wrong or revoked platform key shows on that resource's conditions (KeyIssued,
// reason Unauthorized/Forbidden), never in readiness (runtime/manager.ts says what ready means).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Manager } from './runtime/manager.ts';
import type { Leadership } from './runtime/write-fence.ts';
import { reuseKubeConnections } from './runtime/kube-connections.ts';
import { loadKubeConfig } from './runtime/kubeconfig.ts';
import { createLogger } from './runtime/logger.ts';
import { startOperator, type RunningOperator } from './manager.ts';
import { createMetrics } from './keys/index.ts';
import { parseWatchNamespaces } from './runtime/watch-namespaces.ts';
import { FlagError, helpText, readFlags, type OperatorFlags } from './flags.ts';
import { BUILD } from './build.ts';

let flags: OperatorFlags | 'help' | 'version';
try {
  flags = readFlags(process.argv.slice(2), process.env);
} catch (error) {
  if (!(error instanceof FlagError)) throw error;
  console.error(`neon-key-operator: ${error.message}`);
  process.exit(2);
}
if (flags === 'help' || flags === 'version') {
  process.stdout.write(flags === 'help' ? helpText() : `neon-key-operator ${BUILD.version} (revision ${BUILD.revision})\n`);
  process.exit(0);
}

const logger = createLogger();
// An error that escaped every handler is said in the log as JSON, with its stack, and the process
// ends as Node would end it (exit 1, restarted by its Deployment). Node's own report prints the
// source line of the throw: in the bundle, megabytes of minified code, cut off by the container's log.
for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (error: unknown) => {
    logger.fatal({ err: error, event }, 'unexpected error; exiting');
    process.exit(1);
  });
}
const kubeConfig = new KubeConfig();
loadKubeConfig(kubeConfig, flags.kubeconfig);
// One keep-alive connection pool to the API server, TLS material read once a minute, and the user
// agent of the API clients (kube-connections.ts, kube-client.ts).
reuseKubeConnections(kubeConfig, { userAgent: `neon-key-operator/${BUILD.version}` });

const namespaces = parseWatchNamespaces(flags.namespaces);
const identity = process.env.POD_NAME ?? hostname();
const registry = new Registry();
const metrics = createMetrics(registry, {
  version: BUILD.version,
  revision: BUILD.revision,
  ...(flags.leaderElect ? { leaseName: flags.leaderElectionId } : {}),
});

const leaseNamespace = process.env.POD_NAMESPACE ?? 'neon-key-operator-system';
// The process's identity in intents and in the platform's logs (its user agent): the pod's name, and
// a suffix of its own, since a restarted container is another process.
const processIdentity = `${identity}-${randomBytes(4).toString('hex')}`;
const f = flags;
const start = async (leadership: Leadership): Promise<RunningOperator> =>
  await startOperator({
    kubeConfig,
    identity: processIdentity,
    leadership,
    platformBaseUrl: f.platformUrl,
    workers: f.workers,
    ...(namespaces !== undefined ? { namespaces } : {}),
    driftIntervalMs: f.driftIntervalMs,
    pendingGraceMs: f.pendingGraceMs,
    ...(f.unverifiedAfterMs !== undefined ? { unverifiedAfterMs: f.unverifiedAfterMs } : {}),
    minRotationGraceMs: f.minRotationGraceMs,
    ...(f.cacheStaleAfterMs !== undefined ? { cacheStaleAfterMs: f.cacheStaleAfterMs } : {}),
    ...(f.watchBackoffMaxMs !== undefined ? { informers: { backoff: { maxMs: f.watchBackoffMaxMs } } } : {}),
    signingKeySecret: { namespace: leaseNamespace, name: f.signingKeySecret },
    allowInsecurePlatformUrl: f.allowInsecurePlatformUrl,
    logger,
    metrics,
    inventoryOrganizationLabel: f.inventoryOrganizationLabel,
    ...(f.issuerSecretsNamespace !== undefined ? { issuerSecretsNamespace: f.issuerSecretsNamespace } : {}),
    ...(f.issuerLabelSelector !== undefined ? { issuerLabelSelector: f.issuerLabelSelector } : {}),
    allowNamespaceCredentials: f.allowNamespaceCredentials,
    clusterName: f.clusterName,
    organizationRateShare: f.organizationRateShare,
  });

const manager = new Manager({
  kubeConfig,
  logger,
  registry,
  probes: f.health,
  metrics: f.metrics,
  start,
  ...(f.leaderElect
    ? {
        leaderElection: {
          namespace: leaseNamespace,
          name: f.leaderElectionId,
          identity,
          // client-go / controller-runtime defaults; LeaderElector rejects lease <= renew <= retry.
          leaseDurationMs: f.leaseDurationMs,
          renewDeadlineMs: f.renewDeadlineMs,
          retryPeriodMs: f.retryPeriodMs,
        },
      }
    : {}),
  onLeading: (leading) => metrics.setLeading(leading),
});
process.on('SIGTERM', () => manager.shutdown('SIGTERM'));
process.on('SIGINT', () => manager.shutdown('SIGINT'));
await manager.run();
