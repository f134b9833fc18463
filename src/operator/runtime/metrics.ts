// Prometheus metrics of the runtime, under controller-runtime's and client-go's names and labels, so
// that dashboards and alerts made for controller-runtime read them unchanged (docs/reference/metrics.md):
// controller_runtime_reconcile_*{controller}, workqueue_*{name,controller},
// leader_election_master_status{name}, and prom-client's process_* and nodejs_* families. A
// controller is named after the kind it reconciles, lower-cased (controller-runtime's builder does
// the same); the one work queue of all kinds reports each key under its kind's controller. What is
// the product's own (informers, the build) carries the product's prefix. Label values are bounded:
// kinds, queue and lease names.
//
// The names before controller-runtime's are still served, as duplicates, for one release
// (docs/upgrading.md); `deprecated: false` leaves them out.
import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import type { Priority, WorkQueueMetrics } from './queue.ts';

/** The product's durations (platform requests). */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** controller-runtime's buckets of controller_runtime_reconcile_time_seconds. */
const RECONCILE_TIME_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8,
  9, 10, 15, 20, 25, 30, 40, 50, 60,
];
/** client-go's buckets of the work queue's durations: 10 ns to 1,000 s, by tens. */
const WORKQUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));
/** The `priority` label of workqueue_depth: controller-runtime's priority queue's values (handler.LowPriority is -100). */
const PRIORITY_LABEL: Record<Priority, string> = { normal: '0', low: '-100' };

/**
 * How often the event loop's delay is sampled (nodejs_eventloop_lag_*). prom-client's default, 10 ms,
 * wakes an idle process 100 times a second, most of what the operator costs at rest
 * (docs/benchmarks.md). A stall shorter than 100 ms may be missed, which the reconcile and
 * work-queue durations show anyway.
 */
export const EVENT_LOOP_MONITORING_PRECISION_MS = 100;

/**
 * How a reconcile ended, as controller-runtime's reconcileHandler counts it: error (it threw),
 * requeue (back into the queue under a rate limiter: a retry, a refusal's backoff, a protocol's next
 * step), requeue_after (done, and looked at again after a set time), success (done).
 */
export type ReconcileOutcome = 'success' | 'error' | 'requeue' | 'requeue_after';

/** What a controller reports of its reconciles and workers, by the kind it reconciles. */
export interface ControllerMetrics {
  /** The kinds a controller reconciles, at its start: their series start at 0, as controller-runtime's do. */
  started(kinds: readonly string[]): void;
  reconciled(kind: string, outcome: ReconcileOutcome, seconds: number): void;
  /** A worker took (+1) or gave back (-1) a key of `kind`. */
  workers(kind: string, delta: 1 | -1): void;
}

export interface RuntimeMetrics {
  registry: Registry;
  controller: ControllerMetrics;
  /** This replica leads (true) or stands by (false): leader_election_master_status{name}. */
  setLeading(leading: boolean): void;
  /** Informer LIST-and-WATCH rounds that ended, by resource (kind) and reason (failed, expired, ended). */
  watchRestarts: Counter<'resource' | 'reason'>;
  /** LISTs sent by the informers (the first, and every relist), by resource. */
  informerLists: Counter<'resource'>;
  /** Caches whose watch has failed too long, by resource (counted when scraped, with this). */
  countStaleCachesWith(count: (() => Iterable<{ resource: string; value: number }>) | undefined): void;
  buildInfo: Gauge<'version' | 'revision' | 'node_version'>;
  /**
   * Hooks for a WorkQueue whose keys are `kind/namespace/name`: each key is reported under its
   * kind's controller. `name` names the queue in the deprecated series (e.g. `keys`).
   */
  workQueue(name: string): WorkQueueMetrics;
}

export interface RuntimeMetricsOptions {
  /** The product's own metrics start with it (e.g. `neon_key_operator_`). */
  prefix: string;
  /** The build's version and revision (build_info's labels; `unknown` when not given). */
  version?: string;
  revision?: string;
  /** The leader Lease's name (leader_election_master_status{name}); undefined: no leader election, no series. */
  leaseName?: string;
  /** Also register prom-client's process and Node.js metrics. Default true. */
  defaultMetrics?: boolean;
  /** Also serve the names the runtime's metrics had before controller-runtime's, for one release. Default true. */
  deprecated?: boolean;
}

/** controller-runtime's name of the controller of a kind: the kind, lower-cased. */
export function controllerName(kind: string): string {
  return kind.toLowerCase();
}

/** The kind of a work queue key `kind/namespace/name`. */
function kindOfKey(key: string): string {
  const slash = key.indexOf('/');
  return slash < 0 ? key : key.slice(0, slash);
}

export function createRuntimeMetrics(registry: Registry, options: RuntimeMetricsOptions): RuntimeMetrics {
  const { prefix } = options;
  const registers = [registry];
  const deprecated = options.deprecated ?? true;
  const instead = (name: string): string => `Deprecated, removed in the next release: use ${name}.`;

  const reconcileTotal = new Counter({
    name: 'controller_runtime_reconcile_total',
    help:
      'Total number of reconciliations per controller (the kind, lower-cased), by result: success, error (the ' +
      "reconcile threw), requeue (rate-limited: a retry, a refusal's backoff, a next step), requeue_after (done, looked " +
      'at again after a set time). A drift check of a key at rest is not a reconcile: drift_checks_total counts those.',
    labelNames: ['controller', 'result'] as const,
    registers,
  });
  const reconcileErrors = new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total number of reconciliation errors per controller (reconciles that threw).',
    labelNames: ['controller'] as const,
    registers,
  });
  const reconcileTime = new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Length of time per reconciliation per controller.',
    labelNames: ['controller'] as const,
    buckets: RECONCILE_TIME_BUCKETS,
    registers,
  });
  const activeWorkers = new Gauge({
    name: 'controller_runtime_active_workers',
    help: 'Number of currently used workers per controller (the workers are one pool shared by the controllers).',
    labelNames: ['controller'] as const,
    registers,
  });
  const depth = new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of workqueue by workqueue and priority (0: normal, -100: low: periodic checks and the initial LISTs).',
    labelNames: ['name', 'controller', 'priority'] as const,
    registers,
  });
  const adds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue (a key already waiting is not added again).',
    labelNames: ['name', 'controller'] as const,
    registers,
  });
  const latency = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested.',
    labelNames: ['name', 'controller'] as const,
    buckets: WORKQUEUE_BUCKETS,
    registers,
  });
  const workDuration = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes.',
    labelNames: ['name', 'controller'] as const,
    buckets: WORKQUEUE_BUCKETS,
    registers,
  });
  let readUnfinished: (() => Iterable<[string, number]>) | undefined;
  /** Seconds in flight per controller, and the longest, from the queue's keys in flight (when scraped). */
  const unfinishedByController = (): Map<string, { total: number; longest: number }> => {
    const out = new Map<string, { total: number; longest: number }>();
    for (const controller of known) out.set(controller, { total: 0, longest: 0 });
    for (const [key, seconds] of readUnfinished?.() ?? []) {
      const controller = controllerName(kindOfKey(key));
      const sums = out.get(controller) ?? { total: 0, longest: 0 };
      sums.total += seconds;
      sums.longest = Math.max(sums.longest, seconds);
      out.set(controller, sums);
    }
    return out;
  };
  new Gauge({
    name: 'workqueue_unfinished_work_seconds',
    help:
      "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large " +
      'values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.',
    labelNames: ['name', 'controller'] as const,
    registers,
    collect() {
      this.reset();
      for (const [controller, { total }] of unfinishedByController()) this.set({ name: controller, controller }, total);
    },
  });
  new Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'How many seconds has the longest running processor for workqueue been running.',
    labelNames: ['name', 'controller'] as const,
    registers,
    collect() {
      this.reset();
      for (const [controller, { longest }] of unfinishedByController()) this.set({ name: controller, controller }, longest);
    },
  });
  const retries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue (rate-limited requeues after a failure).',
    labelNames: ['name', 'controller'] as const,
    registers,
  });
  const masterStatus =
    options.leaseName === undefined
      ? undefined
      : new Gauge({
          name: 'leader_election_master_status',
          help:
            'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 ' +
            "indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
          labelNames: ['name'] as const,
          registers,
        });
  masterStatus?.set({ name: options.leaseName ?? '' }, 0);

  const old = deprecated ? deprecatedMetrics(prefix, registers, instead) : undefined;

  const watchRestarts = new Counter({
    name: `${prefix}watch_restarts_total`,
    help:
      'Informer watches that ended, by resource (ApiKey, ProjectApiKey, Secret) and reason: failed (an error; retried after a backoff), ' +
      'expired (410: a relist follows), ended (closed after running a while). No namespace label: the log line of each failure names it.',
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

  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS });
    if (deprecated) collectDefaultMetrics({ register: registry, prefix, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS });
  }

  /** The controllers seen so far: each has a series in every family, 0 until something happens. */
  const known = new Set<string>();
  const see = (controller: string): void => {
    if (known.has(controller)) return;
    known.add(controller);
    for (const result of ['success', 'error', 'requeue', 'requeue_after']) reconcileTotal.inc({ controller, result }, 0);
    reconcileErrors.inc({ controller }, 0);
    activeWorkers.inc({ controller }, 0);
    for (const priority of Object.values(PRIORITY_LABEL)) depth.inc({ name: controller, controller, priority }, 0);
    adds.inc({ name: controller, controller }, 0);
    retries.inc({ name: controller, controller }, 0);
  };

  return {
    registry,
    controller: {
      started(kinds) {
        for (const kind of kinds) see(controllerName(kind));
      },
      reconciled(kind, outcome, seconds) {
        const controller = controllerName(kind);
        see(controller);
        reconcileTotal.inc({ controller, result: outcome });
        if (outcome === 'error') reconcileErrors.inc({ controller });
        reconcileTime.observe({ controller }, seconds);
        // The old counter had no requeue_after: a reconcile that was done counted as a success.
        old?.reconcileTotal.inc({ kind, result: outcome === 'requeue_after' ? 'success' : outcome });
        old?.reconcileDuration.observe({ kind }, seconds);
      },
      workers(kind, delta) {
        const controller = controllerName(kind);
        see(controller);
        activeWorkers.inc({ controller }, delta);
      },
    },
    setLeading(leading) {
      masterStatus?.set({ name: options.leaseName ?? '' }, leading ? 1 : 0);
      old?.leader.set(leading ? 1 : 0);
    },
    watchRestarts,
    informerLists,
    countStaleCachesWith(count) {
      countStale = count;
    },
    buildInfo,
    workQueue(name) {
      const labels = (key: string): { name: string; controller: string } => {
        const controller = controllerName(kindOfKey(key));
        see(controller);
        return { name: controller, controller };
      };
      return {
        depth: (n, key, priority, delta) => {
          depth.inc({ ...labels(key), priority: PRIORITY_LABEL[priority] }, delta);
          old?.depth.set({ name }, n);
        },
        add: (key) => {
          adds.inc(labels(key));
          old?.adds.inc({ name });
        },
        queueLatency: (seconds, key) => {
          latency.observe(labels(key), seconds);
          old?.latency.observe({ name }, seconds);
        },
        workDuration: (seconds, key) => {
          workDuration.observe(labels(key), seconds);
          old?.workDuration.observe({ name }, seconds);
        },
        retry: (key) => {
          retries.inc(labels(key));
          old?.retries.inc({ name });
        },
        readUnfinishedWith: (read) => {
          readUnfinished = read;
        },
      };
    },
  };
}

/** The runtime's metrics as they were named before controller-runtime's names, kept for one release. */
function deprecatedMetrics(prefix: string, registers: Registry[], instead: (name: string) => string) {
  const leader = new Gauge({
    name: `${prefix}leader`,
    help: `1 on the replica holding the leader Lease, 0 on standbys. ${instead('leader_election_master_status')}`,
    registers,
  });
  leader.set(0);
  return {
    reconcileTotal: new Counter({
      name: `${prefix}reconcile_total`,
      help: `Reconciles by kind and result (success, error, requeue). ${instead('controller_runtime_reconcile_total')}`,
      labelNames: ['kind', 'result'] as const,
      registers,
    }),
    reconcileDuration: new Histogram({
      name: `${prefix}reconcile_duration_seconds`,
      help: `Duration of one reconcile. ${instead('controller_runtime_reconcile_time_seconds')}`,
      labelNames: ['kind'] as const,
      buckets: DURATION_BUCKETS,
      registers,
    }),
    depth: new Gauge({
      name: `${prefix}workqueue_depth`,
      help: `Keys waiting in the work queue. ${instead('workqueue_depth')}`,
      labelNames: ['name'] as const,
      registers,
    }),
    adds: new Counter({
      name: `${prefix}workqueue_adds_total`,
      help: `Keys added to the work queue (after deduplication). ${instead('workqueue_adds_total')}`,
      labelNames: ['name'] as const,
      registers,
    }),
    latency: new Histogram({
      name: `${prefix}workqueue_queue_duration_seconds`,
      help: `How long a key waits in the work queue before a worker takes it. ${instead('workqueue_queue_duration_seconds')}`,
      labelNames: ['name'] as const,
      buckets: DURATION_BUCKETS,
      registers,
    }),
    workDuration: new Histogram({
      name: `${prefix}workqueue_work_duration_seconds`,
      help: `How long a worker holds a key. ${instead('workqueue_work_duration_seconds')}`,
      labelNames: ['name'] as const,
      buckets: DURATION_BUCKETS,
      registers,
    }),
    retries: new Counter({
      name: `${prefix}workqueue_retries_total`,
      help: `Rate-limited requeues. ${instead('workqueue_retries_total')}`,
      labelNames: ['name'] as const,
      registers,
    }),
    leader,
  };
}
