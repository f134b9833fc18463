// helm and kubectl, the real binaries the harness built (controlPlane().binDir), run against the
// test apiserver: the deploy suites test the manifests with the tools users run them with.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAllYaml } from '@kubernetes/client-node';
import type { ControlPlane } from '../harness/index.ts';

export const root = fileURLToPath(new URL('../../', import.meta.url));
export const chartDir = join(root, 'deploy/helm/neon-key-operator');
export const baseDir = join(root, 'deploy/base');

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

export interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

export interface Tools {
  helm(args: string[], input?: string): Promise<string>;
  kubectl(args: string[], input?: string): Promise<string>;
  /** kubectl, with its warnings (stderr) too. */
  kubectlOutput(args: string[], input?: string): Promise<Output>;
  /** helm template of the chart with the given --set values, parsed. */
  template(release: string, namespace: string, set?: string[]): Promise<K8sObject[]>;
  /** Removes helm's throwaway HOME (call it in afterAll). */
  dispose(): void;
}

export class CommandError extends Error {
  readonly stderr: string;
  constructor(command: string, code: number | null, stderr: string) {
    super(`${command} exited ${code}: ${stderr.trim()}`);
    this.stderr = stderr;
  }
}

interface Output {
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<Output> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve({ stdout, stderr });
      else reject(new CommandError(`${file.split('/').pop()} ${args.join(' ')}`, code, stderr + stdout));
    });
    // A command that exits without reading its stdin (helm template) closes the pipe first: the
    // write then fails with EPIPE, which would otherwise be thrown. Its exit status tells.
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
  });
}

export function parseYaml(text: string): K8sObject[] {
  // loadAllYaml reads every document as an object: drop the empty ones (a lone comment) first.
  const documents = text.split(/^---[^\n]*$/m).filter((d) => d.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('#')));
  return documents.flatMap((d) => loadAllYaml(d) as K8sObject[]);
}

export function tools(cp: ControlPlane, kubeVersion: string): Tools {
  // helm keeps a cache, a config and a data folder under HOME: a throwaway one, never the user's.
  const home = mkdtempSync(join(tmpdir(), 'nko-helm-'));
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
    KUBECONFIG: cp.kubeconfigPath,
  };
  const helm = async (args: string[], input?: string): Promise<string> => (await run(join(cp.binDir, 'helm'), args, env, input)).stdout;
  const kubectlOutput = (args: string[], input?: string): Promise<Output> => run(join(cp.binDir, 'kubectl'), args, env, input);
  const kubectl = async (args: string[], input?: string): Promise<string> => (await kubectlOutput(args, input)).stdout;
  return {
    helm,
    kubectl,
    kubectlOutput,
    // --kube-version: helm built from source (no release ldflags) would otherwise assume v1.20,
    // below the chart's kubeVersion; a real install takes the cluster's.
    template: async (release, namespace, set = []) =>
      parseYaml(await helm(['template', release, chartDir, '--namespace', namespace, '--kube-version', kubeVersion, ...set.flatMap((s) => ['--set', s])])),
    dispose: () => {
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** Rules as comparable sets: one entry per (apiGroup, resource, verb), `@name` per resourceName. */
export function permissions(rules: PolicyRule[]): string[] {
  const out = new Set<string>();
  for (const rule of rules) {
    for (const group of rule.apiGroups ?? ['']) {
      for (const resource of rule.resources ?? []) {
        for (const verb of rule.verbs) {
          for (const name of rule.resourceNames ?? [undefined]) out.add(`${group}|${resource}|${verb}${name !== undefined ? `@${name}` : ''}`);
        }
      }
    }
  }
  return [...out].sort();
}

export const byKind = (objects: K8sObject[], kind: string): K8sObject[] => objects.filter((o) => o.kind === kind);
