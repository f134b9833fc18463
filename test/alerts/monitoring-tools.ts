// What the alert and dashboard suites share: promtool and prometheus built from the Go module
// github.com/prometheus/prometheus (test/prometheus/build.sh), helm from the test control plane's
// build (test/controlplane/build.sh; no apiserver needed to render the chart), the chart's rules
// and dashboard as files, and the metric names they use.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const chartDir = join(root, 'deploy/helm/neon-key-operator');
export const rulesFile = join(chartDir, 'files/prometheus-rules.yaml');
export const dashboardFile = join(chartDir, 'files/grafana-dashboard.json');
export const runbookFile = join(root, 'docs/runbook.md');
/** helm built from source assumes Kubernetes v1.20 without it, below the chart's kubeVersion. */
const KUBE_VERSION = '1.34.4';

export interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations: Record<string, string>;
}
export interface RuleGroup {
  name: string;
  rules: Rule[];
}

/** The bin folder of promtool and prometheus: built on first use (minutes), then reused. */
export function prometheusBin(): string {
  return execFileSync('bash', [join(root, 'test/prometheus/build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

function controlPlaneBin(): string {
  return execFileSync('bash', [join(root, 'test/controlplane/build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface Output {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(file: string, args: string[], env: NodeJS.ProcessEnv = { PATH: process.env.PATH }): Promise<Output> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** helm with a throwaway HOME, removed by dispose(). */
export function helmTool(): {
  template(set: string[], showOnly?: string, namespace?: string): Promise<Output>;
  lint(set: string[]): Promise<Output>;
  dispose(): void;
} {
  const helm = join(controlPlaneBin(), 'helm');
  const home = mkdtempSync(join(tmpdir(), 'nko-helm-'));
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
  };
  const sets = (set: string[]): string[] => set.flatMap((s) => ['--set', s]);
  return {
    template: (set, showOnly, namespace = 'ops') =>
      run(
        helm,
        [
          'template',
          'neon-key-operator',
          chartDir,
          '--namespace',
          namespace,
          '--kube-version',
          KUBE_VERSION,
          ...(showOnly !== undefined ? ['--show-only', showOnly] : []),
          ...sets(set),
        ],
        env,
      ),
    lint: (set) => run(helm, ['lint', '--strict', chartDir, '--kube-version', KUBE_VERSION, ...sets(set)], env),
    dispose: () => rmSync(home, { recursive: true, force: true }),
  };
}

export function ruleGroups(): RuleGroup[] {
  return (parse(readFileSync(rulesFile, 'utf8')) as { groups: RuleGroup[] }).groups;
}

export function alertRules(): Rule[] {
  return ruleGroups().flatMap((g) => g.rules);
}

/** Every PromQL expression of the dashboard's panels. */
export function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readFileSync(dashboardFile, 'utf8')) as { panels: { targets?: { expr: string }[] }[] };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
}

/**
 * The operator's metric names an expression uses (a histogram's _bucket/_sum/_count as written): its
 * own, and controller-runtime's, client-go's and prom-client's families it serves.
 */
export function metricNames(exprs: readonly string[]): string[] {
  return [
    ...new Set(exprs.flatMap((e) => e.match(/\b(?:neon_key_operator_|controller_runtime_|workqueue_|leader_election_|process_|nodejs_)[a-z0-9_]+/g) ?? [])),
  ].sort();
}

/** The families the operator serves under controller-runtime's, client-go's and prom-client's names (docs/reference/metrics.md). */
export const GENERIC_FAMILIES = [
  'controller_runtime_reconcile_total',
  'controller_runtime_reconcile_errors_total',
  'controller_runtime_reconcile_time_seconds',
  'controller_runtime_active_workers',
  'workqueue_depth',
  'workqueue_adds_total',
  'workqueue_queue_duration_seconds',
  'workqueue_work_duration_seconds',
  'workqueue_retries_total',
  'workqueue_unfinished_work_seconds',
  'workqueue_longest_running_processor_seconds',
  'leader_election_master_status',
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
  'process_start_time_seconds',
  'process_open_fds',
  'nodejs_eventloop_lag_p99_seconds',
  'nodejs_heap_size_used_bytes',
] as const;

export interface ServiceMonitorEndpoint {
  port?: string;
  path?: string;
  interval?: string;
  scrapeTimeout?: string;
  honorLabels?: boolean;
  relabelings?: Record<string, unknown>[];
  metricRelabelings?: Record<string, unknown>[];
}
export interface ServiceMonitor {
  metadata: { name: string; namespace: string };
  spec: {
    selector: { matchLabels?: Record<string, string> };
    namespaceSelector?: { matchNames?: string[] };
    jobLabel?: string;
    endpoints: ServiceMonitorEndpoint[];
  };
}
export interface Service {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: { ports: { name?: string; port: number }[] };
}

/** A Prometheus label name as prometheus-operator and Kubernetes service discovery spell a Kubernetes label in a meta label. */
const metaLabel = (label: string): string => label.replace(/[^a-zA-Z0-9_]/g, '_');

/**
 * The scrape configurations that prometheus-operator generates from a rendered ServiceMonitor (one
 * job per endpoint, `serviceMonitor/<namespace>/<name>/<index>`), for a pod behind the Service it
 * selects. Kubernetes service discovery is replaced by a static target carrying the meta labels that
 * the endpoints role would give it (the Service's name, namespace and labels, the port's name, the
 * pod's and container's names); the relabelling is prometheus-operator's (keep the selected Service
 * and port; namespace, service, pod, container, job, endpoint from the meta labels; the endpoint's own
 * relabelings after), with the endpoint's honorLabels, path, interval and metricRelabelings.
 */
export function scrapeConfigsOf(
  monitor: ServiceMonitor,
  service: Service,
  target: { address: string; pod: string; container: string },
): Record<string, unknown>[] {
  const port = (name: string | undefined): { name?: string; port: number } | undefined => service.spec.ports.find((p) => p.name === name);
  return monitor.spec.endpoints.map((endpoint, index) => {
    if (endpoint.port === undefined || port(endpoint.port) === undefined)
      throw new Error(`endpoint ${index} names port ${endpoint.port ?? '(none)'}, which Service ${service.metadata.name} does not have`);
    const meta: Record<string, string> = {
      __meta_kubernetes_namespace: service.metadata.namespace,
      __meta_kubernetes_service_name: service.metadata.name,
      __meta_kubernetes_endpoint_port_name: endpoint.port,
      __meta_kubernetes_pod_name: target.pod,
      __meta_kubernetes_pod_container_name: target.container,
    };
    for (const [label, value] of Object.entries(service.metadata.labels ?? {})) {
      meta[`__meta_kubernetes_service_label_${metaLabel(label)}`] = value;
      meta[`__meta_kubernetes_service_labelpresent_${metaLabel(label)}`] = 'true';
    }
    const selected = Object.entries(monitor.spec.selector.matchLabels ?? {}).map(([label, value]) => ({
      source_labels: [`__meta_kubernetes_service_label_${metaLabel(label)}`, `__meta_kubernetes_service_labelpresent_${metaLabel(label)}`],
      regex: `(${value});true`,
      action: 'keep',
    }));
    const namespaces = monitor.spec.namespaceSelector?.matchNames ?? [monitor.metadata.namespace];
    return {
      job_name: `serviceMonitor/${monitor.metadata.namespace}/${monitor.metadata.name}/${index}`,
      honor_labels: endpoint.honorLabels ?? false,
      metrics_path: endpoint.path ?? '/metrics',
      ...(endpoint.interval !== undefined ? { scrape_interval: endpoint.interval } : {}),
      ...(endpoint.scrapeTimeout !== undefined ? { scrape_timeout: endpoint.scrapeTimeout } : {}),
      static_configs: [{ targets: [target.address], labels: meta }],
      relabel_configs: [
        { source_labels: ['job'], target_label: '__tmp_prometheus_job_name' },
        ...selected,
        { source_labels: ['__meta_kubernetes_namespace'], regex: `(${namespaces.join('|')})`, action: 'keep' },
        { source_labels: ['__meta_kubernetes_endpoint_port_name'], regex: endpoint.port, action: 'keep' },
        { source_labels: ['__meta_kubernetes_namespace'], target_label: 'namespace' },
        { source_labels: ['__meta_kubernetes_service_name'], target_label: 'service' },
        { source_labels: ['__meta_kubernetes_pod_name'], target_label: 'pod' },
        { source_labels: ['__meta_kubernetes_pod_container_name'], target_label: 'container' },
        { source_labels: ['__meta_kubernetes_service_name'], target_label: 'job', replacement: '${1}' },
        ...(monitor.spec.jobLabel !== undefined
          ? [
              {
                source_labels: [`__meta_kubernetes_service_label_${metaLabel(monitor.spec.jobLabel)}`],
                target_label: 'job',
                regex: '(.+)',
                replacement: '${1}',
              },
            ]
          : []),
        { target_label: 'endpoint', replacement: endpoint.port },
        ...(endpoint.relabelings ?? []).map(relabelConfig),
      ],
      ...(endpoint.metricRelabelings !== undefined ? { metric_relabel_configs: endpoint.metricRelabelings.map(relabelConfig) } : {}),
    };
  });
}

/** A ServiceMonitor's RelabelConfig (camelCase) as Prometheus's relabel_config (snake_case). */
function relabelConfig(relabel: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(relabel).map(([key, value]) => [key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), value]));
}
