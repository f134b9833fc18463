// Prometheus metrics of the runtime (controller-runtime's and client-go's names): reconciles, the
// work queue, leadership, the build. The prefix is the product's; the domain adds its own metrics
// to the same registry (keys/status/metrics.ts). Label values are bounded: kinds and queue names.
import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import type { WorkQueueMetrics } from './queue.ts';

export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * How often the event loop's delay is sampled (nodejs_eventloop_lag_*). prom-client's default, 10 ms,
 * wakes an idle process 100 times a second: 0.52 CPU s/min of a process doing nothing else, measured
 * on Node 24 (issue 14), more than half of the operator's whole budget at rest. At 100 ms the cost
 * is below what /proc can resolve (0.04 CPU s/min); a stall shorter than that may be missed, which
 * the reconcile and work-queue durations show anyway.
 */
export const EVENT_LOOP_MONITORING_PRECISION_MS = 100;

export interface RuntimeMetrics {
  registry: Registry;
  reconcileTotal: Counter<'kind' | 'result'>;
  reconcileDuration: Histogram<'kind'>;
  workQueueDepth: Gauge<'name'>;
  workQueueAdds: Counter<'name'>;
  workQueueLatency: Histogram<'name'>;
  workQueueWorkDuration: Histogram<'name'>;
  workQueueRetries: Counter<'name'>;
  leader: Gauge;
  /** Informer LIST-and-WATCH rounds that ended, by resource (kind) and reason (failed, expired, ended). */
  watchRestarts: Counter<'resource' | 'reason'>;
  /** LISTs sent by the informers (the first, and every relist), by resource. */
  informerLists: Counter<'resource'>;
  /** Caches whose watch has failed too long, by resource (counted when scraped, with this). */
  countStaleCachesWith(count: (() => Iterable<{ resource: string; value: number }>) | undefined): void;
  buildInfo: Gauge<'version' | 'revision' | 'node_version'>;
  /** Hooks for a WorkQueue named `name` (e.g. `keys`). */
  workQueue(name: string): WorkQueueMetrics;
}

export interface RuntimeMetricsOptions {
  /** Every metric's name starts with it (e.g. `neon_key_operator_`). */
  prefix: string;
  /** The build's version and revision (build_info's labels; `unknown` when not given). */
  version?: string;
  revision?: string;
  /** Also register prom-client's process and Node.js metrics (with the same prefix). Default true. */
  defaultMetrics?: boolean;
}

export function createRuntimeMetrics(registry: Registry, options: RuntimeMetricsOptions): RuntimeMetrics {
  const { prefix } = options;
  const registers = [registry];
  const reconcileTotal = new Counter({
    name: `${prefix}reconcile_total`,
    help: 'Reconciles by kind and result (success, error, requeue). A drift check of a key at rest is not a reconcile: drift_checks_total counts those.',
    labelNames: ['kind', 'result'] as const,
    registers,
  });
  const reconcileDuration = new Histogram({
    name: `${prefix}reconcile_duration_seconds`,
    help: 'Duration of one reconcile.',
    labelNames: ['kind'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const workQueueDepth = new Gauge({
    name: `${prefix}workqueue_depth`,
    help: 'Keys waiting in the work queue.',
    labelNames: ['name'] as const,
    registers,
  });
  const workQueueAdds = new Counter({
    name: `${prefix}workqueue_adds_total`,
    help: 'Keys added to the work queue (after deduplication).',
    labelNames: ['name'] as const,
    registers,
  });
  const workQueueLatency = new Histogram({
    name: `${prefix}workqueue_queue_duration_seconds`,
    help: 'How long a key waits in the work queue before a worker takes it.',
    labelNames: ['name'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const workQueueWorkDuration = new Histogram({
    name: `${prefix}workqueue_work_duration_seconds`,
    help: 'How long a worker holds a key.',
    labelNames: ['name'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  const workQueueRetries = new Counter({
    name: `${prefix}workqueue_retries_total`,
    help: 'Rate-limited requeues.',
    labelNames: ['name'] as const,
    registers,
  });
  const leader = new Gauge({
    name: `${prefix}leader`,
    help: '1 on the replica holding the leader Lease, 0 on standbys.',
    registers,
  });
  const watchRestarts = new Counter({
    name: `${prefix}watch_restarts_total`,
    help: 'Informer watches that ended, by resource (ApiKey, ProjectApiKey, Secret) and reason: failed (an error; retried after a backoff), expired (410: a relist follows), ended (closed after running a while). No namespace label: the log line of each failure names it.',
    labelNames: ['resource', 'reason'] as const,
    registers,
  });
  const informerLists = new Counter({
    name: `${prefix}informer_lists_total`,
    help: 'LISTs sent by the informers (the first one, and each relist), by resource.',
    labelNames: ['resource'] as const,
    registers,
  });
  let countStale: (() => Iterable<{ resource: string; value: number }>) | undefined;
  new Gauge({
    name: `${prefix}stale_caches`,
    help: 'Informer caches whose watch has failed for longer than --cache-stale-after, by resource (counted when scraped).',
    labelNames: ['resource'] as const,
    registers,
    collect() {
      if (countStale === undefined) return;
      this.reset();
      for (const { resource, value } of countStale()) this.set({ resource }, value);
    },
  });
  const buildInfo = new Gauge({
    name: `${prefix}build_info`,
    help: 'Always 1; the labels carry the build: version, revision (the git commit) and node_version.',
    labelNames: ['version', 'revision', 'node_version'] as const,
    registers,
  });
  buildInfo.set({ version: options.version ?? 'unknown', revision: options.revision ?? 'unknown', node_version: process.version }, 1);
  leader.set(0);

  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS });

  return {
    registry,
    reconcileTotal,
    reconcileDuration,
    workQueueDepth,
    workQueueAdds,
    workQueueLatency,
    workQueueWorkDuration,
    workQueueRetries,
    leader,
    watchRestarts,
    informerLists,
    countStaleCachesWith(count) {
      countStale = count;
    },
    buildInfo,
    workQueue(name) {
      return {
        depth: (n) => workQueueDepth.set({ name }, n),
        add: () => workQueueAdds.inc({ name }),
        queueLatency: (s) => workQueueLatency.observe({ name }, s),
        workDuration: (s) => workQueueWorkDuration.observe({ name }, s),
        retry: () => workQueueRetries.inc({ name }),
      };
    },
  };
}
