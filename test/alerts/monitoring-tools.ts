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
export interface RuleGroup { name: string; rules: Rule[] }

/** The bin folder of promtool and prometheus: built on first use (minutes), then reused. */
export function prometheusBin(): string {
  return execFileSync('bash', [join(root, 'test/prometheus/build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

function controlPlaneBin(): string {
  return execFileSync('bash', [join(root, 'test/controlplane/build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

export interface Output { code: number | null; stdout: string; stderr: string }

export function run(file: string, args: string[], env: NodeJS.ProcessEnv = { PATH: process.env.PATH }): Promise<Output> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** helm with a throwaway HOME, removed by dispose(). */
export function helmTool(): { template(set: string[], showOnly?: string): Promise<Output>; lint(set: string[]): Promise<Output>; dispose(): void } {
  const helm = join(controlPlaneBin(), 'helm');
  const home = mkdtempSync(join(tmpdir(), 'nko-helm-'));
  const env = { PATH: process.env.PATH, HOME: home, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config'), HELM_DATA_HOME: join(home, 'data') };
  const sets = (set: string[]): string[] => set.flatMap((s) => ['--set', s]);
  return {
    template: (set, showOnly) => run(helm, ['template', 'neon-key-operator', chartDir, '--namespace', 'ops', '--kube-version', KUBE_VERSION,
      ...(showOnly !== undefined ? ['--show-only', showOnly] : []), ...sets(set)], env),
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

/** The operator's metric names an expression uses (a histogram's _bucket/_sum/_count as written). */
export function metricNames(exprs: readonly string[]): string[] {
  return [...new Set(exprs.flatMap((e) => e.match(/\bneon_key_operator_[a-z0-9_]+/g) ?? []))].sort();
}
