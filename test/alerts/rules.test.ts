// The chart's alert rules and dashboard as Prometheus, Grafana and helm read them: `promtool check
// rules` and `promtool test rules` (test/alerts/rules.promtool.yaml, with a case where each alert
// fires), each alert linked to its own section of docs/runbook.md, only the operator's own reasons
// named, and the PrometheusRule and dashboard ConfigMap the chart renders from the same files.
// promtool is built from the Go module github.com/prometheus/prometheus; helm is the control
// plane's. Needs no apiserver.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { knownReason } from '../../src/operator/keys/status/conditions.ts';
import { INVENTORY_METRIC, INVENTORY_STATES } from '../../src/operator/inventory/metrics.ts';
import {
  alertRules,
  chartDir,
  dashboardFile,
  helmTool,
  prometheusBin,
  root,
  ruleGroups,
  rulesFile,
  run,
  runbookFile,
  type RuleGroup,
} from './monitoring-tools.ts';

const promtoolCases = join(root, 'test/alerts/rules.promtool.yaml');
const home = (parse(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')) as { home: string }).home;

describe('the alert rules', () => {
  let promtool: string;
  let scratch: string;

  beforeAll(() => {
    promtool = join(prometheusBin(), 'promtool');
    scratch = mkdtempSync(join(tmpdir(), 'nko-rules-'));
  }, 30 * 60_000);

  afterAll(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('pass promtool check rules', async () => {
    const out = await run(promtool, ['check', 'rules', rulesFile]);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(`SUCCESS: ${alertRules().length} rules found`);
  });

  it('pass promtool test rules, with a case where each alert fires and one where it does not', async () => {
    const out = await run(promtool, ['test', 'rules', promtoolCases]);
    expect(`${out.stdout}${out.stderr}`).toContain('SUCCESS');
    expect(out.code).toBe(0);
    const cases = (
      parse(readFileSync(promtoolCases, 'utf8')) as { tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[] }
    ).tests.flatMap((t) => t.alert_rule_test);
    const alerts = alertRules()
      .map((r) => r.alert)
      .sort();
    expect(alerts.length).toBeGreaterThanOrEqual(12);
    expect([...new Set(cases.filter((c) => c.exp_alerts.length > 0).map((c) => c.alertname))].sort()).toEqual(alerts);
    expect([...new Set(cases.filter((c) => c.exp_alerts.length === 0).map((c) => c.alertname))].sort()).toEqual(alerts);
  });

  it('fail promtool test rules when an alert is broken (the cases can fail)', async () => {
    // The refused-credentials alert made to wait an hour: its case expects it after 10 minutes.
    const broken = readFileSync(rulesFile, 'utf8').replace(/(alert: NeonKeyOperatorCredentialsRefused[\s\S]*?)for: 10m/, '$1for: 1h');
    expect(broken).not.toBe(readFileSync(rulesFile, 'utf8'));
    writeFileSync(join(scratch, 'rules.yaml'), broken);
    const cases = readFileSync(promtoolCases, 'utf8').replace('../../deploy/helm/neon-key-operator/files/prometheus-rules.yaml', 'rules.yaml');
    writeFileSync(join(scratch, 'cases.yaml'), cases);
    const out = await run(promtool, ['test', 'rules', join(scratch, 'cases.yaml')]);
    expect(out.code).not.toBe(0);
    expect(`${out.stdout}${out.stderr}`).toContain('NeonKeyOperatorCredentialsRefused');
  });

  it('each have a summary, a description and a runbook_url to their own section of docs/runbook.md', () => {
    const runbook = readFileSync(runbookFile, 'utf8');
    const sections = [...runbook.matchAll(/^## (\S+)$/gm)].map((m) => m[1]);
    for (const rule of alertRules()) {
      expect(rule.annotations.summary).toMatch(/\w/);
      expect(rule.annotations.description?.length).toBeGreaterThan(80);
      expect(rule.labels?.severity).toMatch(/^(warning|critical)$/);
      // GitHub's anchor of a heading `## NeonKeyOperatorX` is its lower-cased text.
      expect(rule.annotations.runbook_url).toBe(`${home}/blob/main/docs/runbook.md#${rule.alert.toLowerCase()}`);
      expect(sections).toContain(rule.alert);
      const section = runbook.split(`\n## ${rule.alert}\n`)[1]?.split('\n## ')[0] ?? '';
      for (const part of ['**Meaning.**', '**Impact.**', '**Diagnosis.**', '**Fix.**']) expect(section).toContain(part);
      expect(section).toContain('kubectl ');
    }
    // And no section for an alert that does not exist.
    expect(sections.sort()).toEqual(
      alertRules()
        .map((r) => r.alert)
        .sort(),
    );
  });

  it('name only reasons the operator writes (a misspelt reason would never match)', () => {
    const named = alertRules().flatMap((r) => [...r.expr.matchAll(/reason(?:=|!=|=~|!~)"([^"]+)"/g)].flatMap((m) => m[1]?.split('|') ?? []));
    expect(named.length).toBeGreaterThan(20);
    for (const reason of named) expect(knownReason(reason)).toBe(reason);
  });

  it("the dashboard's inventory panel shows the not-managed keys split by origin, each once, adding up to unmanaged", async () => {
    const dashboard = JSON.parse(readFileSync(dashboardFile, 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const expr = dashboard.panels.find((p) => p.title === 'Keys not managed, by origin')?.targets?.[0]?.expr ?? '';
    expect(expr).toContain(INVENTORY_METRIC);
    // The panel's query with "All" chosen, on one inventory's series as the operator writes them and this operator's build_info.
    const series = (state: string, value: number): object => ({
      series: `${INVENTORY_METRIC}{namespace="team-a",job="nko",instance="a",inventory="org",state="${state}"}`,
      values: `${value}x5`,
    });
    const counts = { live: 9, managed: 3, unmanaged: 6, unused: 2, unmanaged_this_cluster: 1, unmanaged_other_cluster: 4, unmanaged_by_hand: 1 };
    const split = { unmanaged_this_cluster: 1, unmanaged_other_cluster: 4, unmanaged_by_hand: 1 };
    expect(Object.keys(counts).sort()).toEqual([...INVENTORY_STATES].sort());
    expect(Object.values(split).reduce((a, b) => a + b)).toBe(counts.unmanaged);
    writeFileSync(
      join(scratch, 'panel.yaml'),
      stringify({
        rule_files: [],
        tests: [
          {
            interval: '1m',
            input_series: [
              ...Object.entries(counts).map(([state, value]) => series(state, value)),
              { series: 'neon_key_operator_build_info{namespace="nko",job="nko",instance="a"}', values: '1x5' },
            ],
            promql_expr_test: [
              {
                expr: expr.replaceAll('$tenant', '.*').replaceAll('$namespace', '.*'),
                eval_time: '2m',
                exp_samples: Object.entries(split).map(([state, value]) => ({ labels: `{namespace="team-a",inventory="org",state="${state}"}`, value })),
              },
            ],
          },
        ],
      }),
    );
    const out = await run(promtool, ['test', 'rules', join(scratch, 'panel.yaml')]);
    expect(`${out.stdout}${out.stderr}`).toContain('SUCCESS');
    expect(out.code).toBe(0);
  });

  it('name only states the inventory gauge writes', () => {
    const exprs = alertRules()
      .map((r) => r.expr)
      .filter((e) => e.includes(INVENTORY_METRIC));
    const named = exprs.flatMap((e) => [...e.matchAll(/state(?:=|!=|=~|!~)"([^"]+)"/g)].flatMap((m) => m[1]?.split('|') ?? []));
    expect(named).toContain('unmanaged_by_hand');
    for (const state of named) expect(INVENTORY_STATES).toContain(state);
  });
});

describe('the chart', () => {
  let helm: ReturnType<typeof helmTool>;
  let promtool: string;
  let scratch: string;

  beforeAll(() => {
    helm = helmTool();
    promtool = join(prometheusBin(), 'promtool');
    scratch = mkdtempSync(join(tmpdir(), 'nko-rules-'));
  }, 30 * 60_000);

  afterAll(() => {
    helm?.dispose();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  interface Rendered {
    apiVersion: string;
    kind: string;
    metadata: { name: string; namespace: string; labels: Record<string, string>; annotations?: Record<string, string> };
    spec?: { groups: RuleGroup[] };
    data?: Record<string, string>;
  }
  const render = async (set: string[], showOnly: string): Promise<Rendered> => {
    const out = await helm.template(set, showOnly);
    if (out.code !== 0) throw new Error(`helm template: ${out.stderr}`);
    const documents = parseAllDocuments(out.stdout)
      .map((d) => d.toJS() as Rendered | null)
      .filter((d) => d !== null);
    expect(documents).toHaveLength(1);
    return documents[0]!;
  };

  it('renders neither a PrometheusRule nor a dashboard by default', async () => {
    const out = await helm.template([]);
    expect(out.code).toBe(0);
    expect(out.stdout).not.toContain('kind: PrometheusRule');
    expect(out.stdout).not.toContain('grafana_dashboard');
    for (const file of ['templates/prometheusrule.yaml', 'templates/grafana-dashboard.yaml']) {
      expect((await helm.template([], file)).code).not.toBe(0); // "could not find template": nothing rendered
    }
  });

  it('passes helm lint --strict with the PrometheusRule and the dashboard', async () => {
    const out = await helm.lint([
      'metrics.prometheusRule.enabled=true',
      'metrics.grafanaDashboard.enabled=true',
      'metrics.prometheusRule.for.NeonKeyOperatorNoLeader=1m',
    ]);
    expect(out.stdout).toContain('0 chart(s) failed');
    expect(out.code).toBe(0);
  });

  it('wraps the rules file, unchanged, into a PrometheusRule that promtool accepts', async () => {
    const rule = await render(
      ['metrics.prometheusRule.enabled=true', 'metrics.prometheusRule.labels.release=kube-prometheus-stack'],
      'templates/prometheusrule.yaml',
    );
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(rule.kind).toBe('PrometheusRule');
    expect(rule.metadata).toMatchObject({ name: 'neon-key-operator', namespace: 'ops' });
    expect(rule.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack', 'app.kubernetes.io/name': 'neon-key-operator' });
    expect(rule.spec?.groups).toEqual(ruleGroups());
    writeFileSync(join(scratch, 'rendered.yaml'), stringify({ groups: rule.spec?.groups }));
    const out = await run(promtool, ['check', 'rules', join(scratch, 'rendered.yaml')]);
    expect(out.code).toBe(0);
  });

  it("sets an alert's for, leaves alerts out, labels every alert and moves the runbook links, as values say", async () => {
    const rule = await render(
      [
        'metrics.prometheusRule.enabled=true',
        'metrics.prometheusRule.namespace=monitoring',
        'metrics.prometheusRule.for.NeonKeyOperatorCredentialsRefused=30s',
        'metrics.prometheusRule.disabled={NeonKeyOperatorPlatformRateLimited}',
        'metrics.prometheusRule.ruleLabels.team=platform',
        'metrics.prometheusRule.runbookBaseUrl=https://wiki.example.com/neon/runbook/',
      ],
      'templates/prometheusrule.yaml',
    );
    expect(rule.metadata.namespace).toBe('monitoring');
    const rules = rule.spec?.groups.flatMap((g) => g.rules) ?? [];
    const byName = new Map(rules.map((r) => [r.alert, r]));
    expect(byName.get('NeonKeyOperatorCredentialsRefused')?.for).toBe('30s');
    expect(byName.get('NeonKeyOperatorCredentialsChanged')?.for).toBe('10m');
    expect(byName.has('NeonKeyOperatorPlatformRateLimited')).toBe(false);
    expect(rules).toHaveLength(alertRules().length - 1);
    for (const r of rules) {
      expect(r.labels).toEqual({ team: 'platform', severity: expect.stringMatching(/^(warning|critical)$/) });
      expect(r.annotations.runbook_url).toBe(`https://wiki.example.com/neon/runbook#${r.alert.toLowerCase()}`);
    }
  });

  it('leaves out NeonKeyOperatorNoLeader without leader election (no replica would report leading)', async () => {
    const rule = await render(['metrics.prometheusRule.enabled=true', 'leaderElection.enabled=false'], 'templates/prometheusrule.yaml');
    const names = rule.spec?.groups.flatMap((g) => g.rules.map((r) => r.alert)) ?? [];
    expect(names).not.toContain('NeonKeyOperatorNoLeader');
    expect(names).toContain('NeonKeyOperatorReconcileErrors');
  });

  it('refuses a for or disabled entry that names no alert, and a for that is no duration', async () => {
    for (const set of [['metrics.prometheusRule.for.NeonKeyOperatorCredentialRefused=5m'], ['metrics.prometheusRule.disabled={NoSuchAlert}']]) {
      const out = await helm.template(['metrics.prometheusRule.enabled=true', ...set]);
      expect(out.code).not.toBe(0);
      expect(out.stderr).toMatch(/no alert named (NeonKeyOperatorCredentialRefused|NoSuchAlert)/);
    }
    const out = await helm.template(['metrics.prometheusRule.enabled=true', 'metrics.prometheusRule.for.NeonKeyOperatorNoLeader=soon']);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain("values don't meet the specifications of the schema");
  });

  it("puts the dashboard, unchanged, in a ConfigMap that Grafana's sidecar picks up", async () => {
    const map = await render(
      ['metrics.grafanaDashboard.enabled=true', 'metrics.grafanaDashboard.namespace=grafana', 'metrics.grafanaDashboard.annotations.grafana_folder=Operators'],
      'templates/grafana-dashboard.yaml',
    );
    expect(map.kind).toBe('ConfigMap');
    expect(map.metadata).toMatchObject({ name: 'neon-key-operator-dashboard', namespace: 'grafana', annotations: { grafana_folder: 'Operators' } });
    expect(map.metadata.labels).toMatchObject({ grafana_dashboard: '1', 'app.kubernetes.io/name': 'neon-key-operator' });
    const json = map.data?.['neon-key-operator.json'] ?? '';
    expect(JSON.parse(json)).toEqual(JSON.parse(readFileSync(dashboardFile, 'utf8')));
    const dashboard = JSON.parse(json) as { uid: string; title: string; panels: { title: string; type: string; targets?: { expr: string }[] }[] };
    expect(dashboard.uid).toBe('neon-key-operator');
    // What the dashboard is for: convergence, keys by condition and reason, rotations, inventories'
    // keys not managed by origin, platform requests by status, queue depth; the generic families under
    // controller-runtime's names, this operator's targets only (another controller serves them too).
    const exprs = dashboard.panels
      .flatMap((p) => p.targets ?? [])
      .map((t) => t.expr)
      .join('\n');
    for (const wanted of [
      /controller_runtime_reconcile_total/,
      /controller_runtime_reconcile_time_seconds_bucket/,
      /workqueue_depth/,
      /leader_election_master_status/,
      /sum by \(kind, reason\) \(neon_key_operator_managed_keys\{[^}]*condition="Ready", status!="True"\}/,
      /sum by \(condition, status\) \(neon_key_operator_managed_keys/,
      /condition="Rotating"/,
      /retired_keys_total/,
      /sum by \(status\) \(rate\(neon_key_operator_platform_requests_total/,
      /max by \(namespace, inventory, state\) \(neon_key_operator_inventory_keys\{[^}]*state=~"unmanaged_\.\+"\}/,
    ])
      expect(exprs).toMatch(wanted);
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) expect(panel.targets?.length).toBeGreaterThan(0);
    for (const expr of exprs.split('\n').filter((e) => /\b(controller_runtime_|workqueue_|leader_election_|process_|nodejs_)/.test(e))) {
      expect(expr).toContain('and on (job, instance) neon_key_operator_build_info');
    }
    expect(exprs).not.toMatch(/neon_key_operator_(reconcile|workqueue|leader|process|nodejs)/);
  });

  it("renders a ServiceMonitor whose endpoint honors the series' labels (a key-state series keeps its resource's namespace)", async () => {
    const monitor = (await render(['metrics.serviceMonitor.enabled=true'], 'templates/servicemonitor.yaml')) as unknown as {
      spec: { endpoints: { port: string; honorLabels?: boolean }[] };
    };
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: 'metrics', honorLabels: true })]);
  });
});
