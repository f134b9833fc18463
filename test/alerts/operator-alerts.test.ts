// The alerts against a running operator: the operator process (the source entry point, as the
// Deployment runs it: test/harness/operator-process.ts) serves every metric the rules and the
// dashboard name, and controller-runtime's generic families; a real Prometheus, built from the Go
// module github.com/prometheus/prometheus, scrapes it with the scrape configuration that the
// chart's rendered ServiceMonitor implies (its honorLabels and relabelling, as prometheus-operator
// generates it: monitoring-tools.ts) and evaluates the chart's rules (rendered by helm with a short
// `for`). A tenant's key whose credentials Secret is missing fires NeonKeyOperatorCredentialsUnusable
// in the tenant's namespace; revoking a resource's credentials on the platform fires
// NeonKeyOperatorCredentialsRefused there too, and fixing them resolves it. Prometheus listens on
// loopback, keeps its data in a temporary folder, and is stopped at the end.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { parseAllDocuments, stringify } from 'yaml';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { OperatorProcess } from '../harness/operator-process.ts';
import { createNamespace, customObjects, eventually, installOperatorManifests, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT } from '../operator/support.ts';
import {
  alertRules,
  dashboardExprs,
  GENERIC_FAMILIES,
  helmTool,
  metricNames,
  prometheusBin,
  scrapeConfigsOf,
  type RuleGroup,
  type Service,
  type ServiceMonitor,
} from './monitoring-tools.ts';

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface Resource {
  status?: { keyId?: number; conditions?: Condition[] };
}
interface PromAlert {
  labels: Record<string, string>;
  state: string;
}

/** Kills a child and waits for its exit (SIGKILL after 5 s). */
async function stop(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

describe('the alerts on a running operator', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: OperatorProcess | undefined;
  const operatorOutput = (): string => operator?.output() ?? '';
  let prometheus: ChildProcess | undefined;
  let namespace: string;
  let scratch: string;
  let metricsPort: number;
  let prometheusOutput = '';
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let alice: PlatformClient;
  let org: string;
  /** Every API key the test handled: none may reach a log. */
  const keys: string[] = [];

  const metrics = async (): Promise<string> => await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const resource = async (name: string): Promise<Resource> =>
    (await objects.getNamespacedCustomObject({ group: 'keys.neon.dev', version: 'v1alpha1', namespace, plural: 'apikeys', name })) as Resource;
  const ready = (r: Resource): Condition | undefined => r.status?.conditions?.find((c) => c.type === 'Ready');
  /** A credentials Secret holding a fresh personal key of alice (an administrator); the key's id. */
  const freshCredentials = async (name: string): Promise<number> => {
    const key = await alice.createPersonalKey(`alerts-${name}-${Date.now()}`);
    keys.push(key.key);
    const body = { metadata: { name }, stringData: { apiKey: key.key } };
    await core.createNamespacedSecret({ namespace, body }).catch(async () => {
      await core.replaceNamespacedSecret({ namespace, name, body });
    });
    return key.id;
  };

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    const aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    keys.push(aliceKey);
    alice = new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: aliceKey, retry: { maxAttempts: 1 } });
    namespace = await createNamespace(cp, 'alerts');
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    scratch = mkdtempSync(join(tmpdir(), 'nko-alerts-'));

    const token = await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 900);
    writeFileSync(join(scratch, 'kubeconfig'), kubeconfigYaml(cp, token, 'operator'), { mode: 0o600 });
    const health = await freePort();
    metricsPort = await freePort();
    // A drift check every second, and a key unverifiable after two: the refusal shows in seconds.
    operator = new OperatorProcess({
      args: [
        '--kubeconfig',
        join(scratch, 'kubeconfig'),
        '--platform-url',
        emulator.baseUrl,
        '--watch-namespace',
        namespace,
        '--leader-elect',
        `--health-probe-bind-address=127.0.0.1:${health}`,
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        '--drift-interval',
        '1s',
        '--unverified-after',
        '2s',
      ],
      env: { PATH: process.env.PATH, POD_NAME: `alerts-${namespace}`, POD_NAMESPACE: OPERATOR_NAMESPACE, LOG_LEVEL: 'info' },
    });
    // Standbys are ready too: wait for the Lease (its Role names one Lease; another suite's operator may hold it a moment).
    await eventually(
      async () =>
        (await fetch(`http://127.0.0.1:${health}/readyz`)).ok && /^leader_election_master_status\{name="[^"]+"\} 1$/m.test(await metrics()) ? true : undefined,
      90_000,
      'the operator ready and leading',
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n--- operator:\n${operatorOutput().slice(-3_000)}`, { cause: error });
    });
  }, 150_000);

  afterAll(async () => {
    await stop(prometheus);
    await operator?.stop(5_000);
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('serves every metric that the alert rules and the dashboard name', async () => {
    // prom-client prints HELP and TYPE for every registered metric, also one with no series yet.
    const text = await metrics();
    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    const served = (name: string): boolean =>
      types.has(name) || ['_bucket', '_sum', '_count'].some((suffix) => name.endsWith(suffix) && types.get(name.slice(0, -suffix.length)) === 'histogram');
    const fromRules = metricNames(alertRules().map((r) => r.expr));
    const fromDashboard = metricNames(dashboardExprs());
    expect(fromRules).toEqual(
      expect.arrayContaining([
        'neon_key_operator_managed_keys',
        'neon_key_operator_retired_keys_total',
        'leader_election_master_status',
        'controller_runtime_reconcile_errors_total',
        'neon_key_operator_build_info',
        'neon_key_operator_platform_requests_total',
      ]),
    );
    expect(fromDashboard.length).toBeGreaterThanOrEqual(15);
    expect([...fromRules, ...fromDashboard].filter((name) => !served(name))).toEqual([]);
    // The labels the rules select on are the metric's own.
    expect(text).toMatch(/^# HELP neon_key_operator_managed_keys .*reason/m);
    expect(text).toMatch(/^neon_key_operator_retired_keys_total\{outcome="revoked_in_use"\} 0$/m);
    // Scraped with honorLabels, a series' own label wins over the target's: none but the key-state
    // series' namespace may be one (their namespace is the resource's).
    expect(text).not.toMatch(/^[a-z_]+\{[^}]*\b(job|instance|pod|service|endpoint|container)="/m);
    expect(
      [...text.matchAll(/^([a-z_]+)\{[^}]*\bnamespace="/gm)]
        .map((m) => m[1])
        .filter((name) => !/^neon_key_operator_(managed_keys|inventory_keys)$/.test(name!)),
    ).toEqual([]);
  });

  it("raises a tenant's alerts in the tenant's namespace through the chart's ServiceMonitor: a missing credentials Secret, credentials revoked (resolved when fixed)", async () => {
    // The chart rendered into the operator's namespace: its rules (the two alerts' `for` at 5s), and
    // its ServiceMonitor (scraping every second), the Service it selects and the Deployment behind it.
    const helm = helmTool();
    interface Rendered {
      kind: string;
      metadata: { name: string };
      spec?: { groups?: RuleGroup[]; template?: { spec: { containers: { name: string; ports?: { name: string }[] }[] } } };
    }
    let rendered: Rendered[];
    try {
      const out = await helm.template(
        [
          'metrics.prometheusRule.enabled=true',
          'metrics.prometheusRule.for.NeonKeyOperatorCredentialsRefused=5s',
          'metrics.prometheusRule.for.NeonKeyOperatorCredentialsUnusable=5s',
          'metrics.serviceMonitor.enabled=true',
          'metrics.serviceMonitor.interval=1s',
        ],
        undefined,
        OPERATOR_NAMESPACE,
      );
      expect(out.stderr).toBe('');
      expect(out.code).toBe(0);
      rendered = parseAllDocuments(out.stdout)
        .map((d) => d.toJS() as Rendered | null)
        .filter((d) => d !== null);
    } finally {
      helm.dispose();
    }
    const groups = rendered.find((d) => d.kind === 'PrometheusRule')?.spec?.groups ?? [];
    expect(groups.flatMap((g) => g.rules).find((r) => r.alert === 'NeonKeyOperatorCredentialsRefused')?.for).toBe('5s');
    const monitor = rendered.find((d) => d.kind === 'ServiceMonitor') as unknown as ServiceMonitor;
    expect(monitor.spec.endpoints[0]?.honorLabels).toBe(true);
    const service = rendered.find(
      (d) => d.kind === 'Service' && (d as unknown as Service).spec.ports.some((p) => p.name === monitor.spec.endpoints[0]?.port),
    ) as unknown as Service;
    const container =
      rendered.find((d) => d.kind === 'Deployment')?.spec?.template?.spec.containers.find((c) => c.ports?.some((p) => p.name === 'metrics'))?.name ?? '';
    expect(container).not.toBe('');
    const scrapeConfigs = scrapeConfigsOf(monitor, service, { address: `127.0.0.1:${metricsPort}`, pod: `alerts-${namespace}`, container });
    expect(scrapeConfigs).toEqual([expect.objectContaining({ honor_labels: true, scrape_interval: '1s', metrics_path: '/metrics' })]);
    writeFileSync(join(scratch, 'rules.yaml'), stringify({ groups }));
    writeFileSync(
      join(scratch, 'prometheus.yaml'),
      stringify({
        global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
        rule_files: [join(scratch, 'rules.yaml')],
        scrape_configs: scrapeConfigs,
      }),
    );
    const promPort = await freePort();
    const bin = prometheusBin();
    prometheus = spawn(
      join(bin, 'prometheus'),
      [
        `--config.file=${join(scratch, 'prometheus.yaml')}`,
        `--storage.tsdb.path=${join(scratch, 'data')}`,
        `--web.listen-address=127.0.0.1:${promPort}`,
        '--log.level=warn',
      ],
      { env: { PATH: process.env.PATH, HOME: scratch }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      prometheusOutput += chunk;
    });
    prometheus.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      prometheusOutput += chunk;
    });
    const api = async <T>(path: string): Promise<T> => {
      const body = (await (await fetch(`http://127.0.0.1:${promPort}/api/v1/${path}`)).json()) as { status: string; data: T };
      if (body.status !== 'success') throw new Error(`${path}: ${JSON.stringify(body)}`);
      return body.data;
    };
    const alertsNamed = async (name: string): Promise<PromAlert[]> =>
      (await api<{ alerts: PromAlert[] }>('alerts')).alerts.filter((a) => a.labels.alertname === name);
    const refused = async (): Promise<PromAlert[]> => await alertsNamed('NeonKeyOperatorCredentialsRefused');
    const query = async (promql: string): Promise<{ metric: Record<string, string> }[]> =>
      (await api<{ result: { metric: Record<string, string> }[] }>(`query?query=${encodeURIComponent(promql)}`)).result;
    try {
      const targets = await eventually(
        async () => {
          const active = (await api<{ activeTargets: { health: string; labels: Record<string, string> }[] }>('targets')).activeTargets;
          return active.some((t) => t.health === 'up') ? active : undefined;
        },
        30_000,
        'Prometheus scraping the operator',
      );
      // The target's labels, as prometheus-operator's relabelling gives them: the operator's namespace, its Service as job.
      expect(targets).toEqual([
        expect.objectContaining({
          labels: expect.objectContaining({
            namespace: OPERATOR_NAMESPACE,
            job: service.metadata.name,
            service: service.metadata.name,
            pod: `alerts-${namespace}`,
            container,
            endpoint: 'metrics',
          }),
        }),
      ]);
      const loaded = await api<{ groups: { rules: { name: string }[] }[] }>('rules');
      expect(loaded.groups.flatMap((g) => g.rules.map((r) => r.name)).sort()).toEqual(
        alertRules()
          .map((r) => r.alert)
          .sort(),
      );
      // The operator's own series keep the target's namespace.
      for (const name of ['neon_key_operator_build_info', 'leader_election_master_status', 'process_cpu_seconds_total']) {
        expect((await query(name)).map((r) => r.metric.namespace)).toEqual([OPERATOR_NAMESPACE]);
      }

      // A tenant's key whose credentials Secret does not exist: its team's alert, in its namespace.
      await objects.createNamespacedCustomObject({
        group: 'keys.neon.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'apikeys',
        body: {
          apiVersion: 'keys.neon.dev/v1alpha1',
          kind: 'ApiKey',
          metadata: { name: 'orphan' },
          spec: { scope: 'Organization', organizationId: org, keyName: 'orphan', credentialsSecretRef: { name: 'no-such-secret' } },
        },
      });
      await eventually(
        async () => (ready(await resource('orphan'))?.reason === 'CredentialsMissing' ? true : undefined),
        30_000,
        'the orphan ApiKey CredentialsMissing',
      );
      const unusable = await eventually(
        async () => {
          const alerts = await alertsNamed('NeonKeyOperatorCredentialsUnusable');
          return alerts.some((a) => a.state === 'firing') ? alerts : undefined;
        },
        60_000,
        'NeonKeyOperatorCredentialsUnusable firing',
      );
      expect(unusable).toEqual([
        expect.objectContaining({
          state: 'firing',
          labels: { alertname: 'NeonKeyOperatorCredentialsUnusable', namespace, kind: 'ApiKey', reason: 'CredentialsMissing', severity: 'warning' },
        }),
      ]);
      // The namespace arrived as `namespace`, never as exported_namespace.
      expect(await query('{exported_namespace!=""}')).toEqual([]);
      expect((await query('neon_key_operator_managed_keys{condition="Ready", reason="CredentialsMissing"}')).map((r) => r.metric.namespace)).toEqual([
        namespace,
      ]);

      const credentialsId = await freshCredentials('neon-admin');
      await objects.createNamespacedCustomObject({
        group: 'keys.neon.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'apikeys',
        body: {
          apiVersion: 'keys.neon.dev/v1alpha1',
          kind: 'ApiKey',
          metadata: { name: 'watched' },
          spec: { scope: 'Organization', organizationId: org, keyName: 'watched', credentialsSecretRef: { name: 'neon-admin' } },
        },
      });
      await eventually(async () => (ready(await resource('watched'))?.status === 'True' ? true : undefined), 30_000, 'the ApiKey Ready');
      // Prometheus has seen it Ready, and nothing fires.
      await eventually(
        async () =>
          (
            await api<{ result: unknown[] }>(
              'query?query=' + encodeURIComponent('neon_key_operator_managed_keys{condition="Ready",status="True",reason="Ready"} == 1'),
            )
          ).result.length === 1
            ? true
            : undefined,
        15_000,
        'Prometheus seeing the key Ready',
      );
      expect(await refused()).toEqual([]);

      await alice.revokePersonalKey(credentialsId);
      const revokedAt = Date.now();
      await eventually(
        async () => (ready(await resource('watched'))?.reason === 'CredentialsRefused' ? true : undefined),
        30_000,
        'Ready Unknown, CredentialsRefused',
      );
      const firing = await eventually(
        async () => {
          const alerts = await refused();
          return alerts.some((a) => a.state === 'firing') ? alerts : undefined;
        },
        60_000,
        'NeonKeyOperatorCredentialsRefused firing',
      );
      expect(firing).toEqual([
        expect.objectContaining({
          state: 'firing',
          labels: { alertname: 'NeonKeyOperatorCredentialsRefused', namespace, kind: 'ApiKey', reason: 'CredentialsRefused', severity: 'warning' },
        }),
      ]);
      // Not before its `for`: 2 s to turn unverifiable, then 5 s pending.
      expect(Date.now() - revokedAt).toBeGreaterThanOrEqual(5_000);

      await freshCredentials('neon-admin');
      await eventually(async () => (ready(await resource('watched'))?.status === 'True' ? true : undefined), 30_000, 'the ApiKey Ready again');
      await eventually(async () => ((await refused()).length === 0 ? true : undefined), 30_000, 'NeonKeyOperatorCredentialsRefused resolved');
    } catch (error) {
      throw new Error(
        `${error instanceof Error ? error.message : String(error)}\n--- prometheus:\n${prometheusOutput.slice(-3_000)}\n--- operator:\n${operatorOutput().slice(-3_000)}`,
        { cause: error },
      );
    }
    expect(keys.length).toBeGreaterThanOrEqual(3);
    for (const key of keys) expect(`${operatorOutput()}${prometheusOutput}${await metrics()}`).not.toContain(key);
  }, 240_000);

  it("serves the generic families under controller-runtime's names and labels, each with a sample (after the reconciles above)", async () => {
    const text = await metrics();
    const sampled = (family: string): boolean => new RegExp(`^${family}(_bucket|_sum|_count)?(\\{[^}]*\\})? \\S+$`, 'm').test(text);
    expect(GENERIC_FAMILIES.filter((family) => !text.includes(`# TYPE ${family} `) || !sampled(family))).toEqual([]);
    // The labels: controller-runtime's, a controller per kind (lower-cased), the queue's name, the lease's name.
    expect(text).toMatch(/^controller_runtime_reconcile_total\{controller="apikey",result="success"\} \d+$/m);
    expect(text).toMatch(/^controller_runtime_reconcile_errors_total\{controller="projectapikey"\} \d+$/m);
    expect(text).toMatch(/^controller_runtime_reconcile_time_seconds_bucket\{le="[^"]+",controller="apikey"\} \d+$/m);
    expect(text).toMatch(/^controller_runtime_active_workers\{controller="apikey"\} \d+$/m);
    expect(text).toMatch(/^workqueue_depth\{name="apikey",controller="apikey",priority="0"\} \d+$/m);
    for (const family of [
      'workqueue_adds_total',
      'workqueue_retries_total',
      'workqueue_unfinished_work_seconds',
      'workqueue_longest_running_processor_seconds',
    ]) {
      expect(text).toMatch(new RegExp(`^${family}\\{name="apikey",controller="apikey"\\} \\S+$`, 'm'));
    }
    expect(text).toMatch(/^leader_election_master_status\{name="[^"]+"\} 1$/m);
    // Not prefixed any more (their prefixed names are kept, deprecated, for one release).
    expect(text).toMatch(/^process_cpu_user_seconds_total \S+$/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds \S+$/m);
  });
});
