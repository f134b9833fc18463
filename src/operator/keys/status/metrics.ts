// Prometheus metrics of the operator (docs/design.md section 5.5): the runtime's (runtime/metrics.ts,
// under controller-runtime's names) and the key domain's (drift checks, operations polls, platform
// requests, managed keys), whose names carry the prefix `neon_key_operator_`. managed_keys carries
// the resource's namespace as `namespace`, so that an alert reaches the team that owns it (the
// chart's ServiceMonitor keeps it with honorLabels). Label values are bounded and never carry a secret or an identifier:
// platform routes are TEMPLATES (`/projects/{project_id}/operations`), never concrete paths, and
// routeTemplate() below is the one place that turns a path into one.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { DURATION_BUCKETS, createRuntimeMetrics, type RuntimeMetrics } from '../../runtime/metrics.ts';

export const METRIC_PREFIX = 'neon_key_operator_';

export interface OperatorMetrics extends RuntimeMetrics {
  platformRequestsTotal: Counter<'method' | 'route' | 'status'>;
  platformRequestDuration: Histogram<'method' | 'route'>;
  /** Drift checks by outcome: live, absent (revoked or never seen), failed (credentials refused, platform unavailable). */
  driftChecks: Counter<'outcome'>;
  /** Operations polls by outcome: ok, key_refused (one owner's key refused, another tried), failed. */
  operationsPolls: Counter<'outcome'>;
  /** reason: the condition's, bounded to the operator's reasons or `Other` (conditions.ts knownReason). */
  managedKeys: Gauge<'namespace' | 'kind' | 'condition' | 'status' | 'reason'>;
  /**
   * Replaced keys that left status.retiringKeys, by outcome: revoked (no longer used), revoked_in_use
   * (maxGracePeriod ran out while it was still used: its consumers may now fail), gone (no longer on
   * the platform). An event, so a counter: the alert on revoked_in_use needs no resource's state.
   */
  retiredKeys: Counter<'outcome'>;
  /**
   * managed_keys is counted when it is scraped, with this (undefined: left as set). A count on a
   * timer cost CPU at rest whether anyone read it or not.
   */
  countManagedKeysWith(count: (() => Iterable<ManagedKeysCount>) | undefined): void;
  /** Records one platform request; `path` is turned into a template with routeTemplate(). */
  observePlatformRequest(method: string, path: string, status: number | string, seconds: number): void;
}

/** One series of managed_keys. */
export interface ManagedKeysCount {
  labels: { namespace: string; kind: string; condition: string; status: string; reason: string };
  value: number;
}

export interface CreateMetricsOptions {
  /** build_info's version and revision (src/operator/build.ts). */
  version?: string;
  revision?: string;
  /** The leader Lease's name, with leader election (leader_election_master_status{name}). */
  leaseName?: string;
  /** Also register prom-client's process and Node.js metrics. Default true. */
  defaultMetrics?: boolean;
  /** Also serve the runtime's names of before controller-runtime's, for one release. Default true. */
  deprecated?: boolean;
}

export function createMetrics(registry: Registry = new Registry(), options: CreateMetricsOptions = {}): OperatorMetrics {
  const runtime = createRuntimeMetrics(registry, { prefix: METRIC_PREFIX, ...options });
  const registers = [registry];
  const driftChecks = new Counter({
    name: `${METRIC_PREFIX}drift_checks_total`,
    help: 'Drift checks of recorded keys by outcome (live, absent, failed).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const operationsPolls = new Counter({
    name: `${METRIC_PREFIX}operations_polls_total`,
    help: "Operations polls of projects by outcome (ok; key_refused: one resource's key refused and another tried; failed).",
    labelNames: ['outcome'] as const,
    registers,
  });
  const platformRequestsTotal = new Counter({
    name: `${METRIC_PREFIX}platform_requests_total`,
    help: 'Requests to the platform API by method, route template (such as /organizations/{org_id}/api_keys, never an id) and HTTP status (or error code).',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  });
  const platformRequestDuration = new Histogram({
    name: `${METRIC_PREFIX}platform_request_duration_seconds`,
    help: 'Duration of requests to the platform API.',
    labelNames: ['method', 'route'] as const,
    buckets: DURATION_BUCKETS,
    registers,
  });
  let countManaged: (() => Iterable<ManagedKeysCount>) | undefined;
  const managedKeys = new Gauge({
    name: `${METRIC_PREFIX}managed_keys`,
    help: "Managed resources by namespace (the resource's), kind, condition type, status and reason (Other: not one of the operator's reasons), counted from the leader's caches when scraped.",
    labelNames: ['namespace', 'kind', 'condition', 'status', 'reason'] as const,
    registers,
    collect() {
      if (countManaged === undefined) return;
      this.reset();
      for (const { labels, value } of countManaged()) this.set(labels, value);
    },
  });
  const retiredKeys = new Counter({
    name: `${METRIC_PREFIX}retired_keys_total`,
    help: 'Replaced keys retired after a rotation, by outcome: revoked, revoked_in_use (revoked at maxGracePeriod while still used), gone (already off the platform).',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of ['revoked', 'revoked_in_use', 'gone']) retiredKeys.inc({ outcome }, 0);
  return {
    ...runtime,
    retiredKeys,
    platformRequestsTotal,
    driftChecks,
    operationsPolls,
    platformRequestDuration,
    managedKeys,
    countManagedKeysWith(count) {
      countManaged = count;
    },
    observePlatformRequest(method, path, status, seconds) {
      const route = routeTemplate(path);
      platformRequestsTotal.inc({ method: method.toUpperCase(), route, status: String(status) });
      platformRequestDuration.observe({ method: method.toUpperCase(), route }, seconds);
    },
  };
}

// Path segments that are fixed words of the API (docs/platform-api.md "Endpoints"); every other
// segment is an identifier and becomes a placeholder named after the collection before it.
const FIXED_SEGMENTS = new Set(['api_keys', 'organizations', 'projects', 'operations', 'branches', 'users', 'me', 'auth', 'members']);
const PLACEHOLDERS: Record<string, string> = {
  api_keys: '{key_id}',
  organizations: '{org_id}',
  projects: '{project_id}',
  operations: '{operation_id}',
  branches: '{branch_id}',
};

/**
 * The route template of a platform path: `/projects/p-1/operations?limit=5` →
 * `/projects/{project_id}/operations`. The query string is dropped; any segment that is not a
 * known word of the API becomes a placeholder, so no id, name or secret can reach a label.
 */
export function routeTemplate(path: string): string {
  const withoutQuery = path.split(/[?#]/, 1)[0] ?? '';
  const segments = withoutQuery.split('/').filter((s) => s !== '');
  const start = segments[0] === 'api' && segments[1] === 'v2' ? 2 : 0;
  const out: string[] = [];
  for (let i = start; i < segments.length; i++) {
    const segment = segments[i]!;
    if (FIXED_SEGMENTS.has(segment)) {
      out.push(segment);
      continue;
    }
    const previous = segments[i - 1];
    out.push((previous !== undefined ? PLACEHOLDERS[previous] : undefined) ?? '{id}');
  }
  return `/${out.join('/')}`;
}
