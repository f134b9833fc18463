// The cost of an operations change to a project's keys (`--only project-index`, issue 30): which
// cached ProjectApiKeys a changed project (an operations snapshot, every 5 s while operations
// run) or a project gone from the platform's list wakes. Before issue 30, keys/watches.ts
// projectKeysIn copied every cached ProjectApiKey and scanned it for each call; now it asks the
// controller's project index. Both run here over the same controller and the same cache: 10,000
// ProjectApiKeys over 1,000 projects by default (10 keys a project), in 10 namespaces, fed to the
// real Controller through an in-memory informer (the lookup reads the cache and the index; no
// apiserver is involved in it).
import type { KubernetesObject } from '@kubernetes/client-node';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Controller } from '../src/operator/runtime/controller.ts';
import type { CachingInformer, Watch } from '../src/operator/runtime/watches.ts';
import { keyWatches, projectKeysIn } from '../src/operator/keys/watches.ts';
import { trimKeyResource } from '../src/operator/keys/observing/cache-projection.ts';
import { percentile } from './load.ts';
import type { BenchOptions } from './options.ts';

/** What projectKeysIn did before issue 30: a copy of every cached ProjectApiKey, scanned per call. */
function scanProjectKeysIn(controller: Pick<Controller, 'cached'>, projectIds: readonly string[], organizationId?: string): string[] {
  const keys: string[] = [];
  for (const obj of controller.cached('ProjectApiKey')) {
    const spec = (obj as { spec?: { projectId?: string; organizationId?: string } }).spec;
    const { namespace, name } = obj.metadata ?? {};
    if (spec?.projectId === undefined || !projectIds.includes(spec.projectId)) continue;
    if (organizationId !== undefined && spec.organizationId !== organizationId) continue;
    if (namespace !== undefined && name !== undefined) keys.push(`ProjectApiKey/${namespace}/${name}`);
  }
  return keys;
}

/** An informer whose cache is filled from a list at start(): what a LIST does, without an apiserver. */
class ListedInformer implements CachingInformer {
  readonly #items: KubernetesObject[];
  readonly #project: (obj: KubernetesObject) => KubernetesObject;
  readonly #adds: ((obj: KubernetesObject) => void)[] = [];
  readonly #objects = new Map<string, KubernetesObject>();

  constructor(items: KubernetesObject[], project: (obj: KubernetesObject) => KubernetesObject) {
    this.#items = items;
    this.#project = project;
  }

  on(verb: string, cb: (obj: never) => void): void {
    if (verb === 'add') this.#adds.push(cb as (obj: KubernetesObject) => void);
  }

  off(): void {}

  async start(): Promise<void> {
    for (const item of this.#items) {
      const obj = this.#project(item);
      this.#objects.set(`${obj.metadata?.namespace}/${obj.metadata?.name}`, obj);
      for (const cb of this.#adds) cb(obj);
    }
  }

  async stop(): Promise<void> {}

  list(): KubernetesObject[] {
    return [...this.#objects.values()];
  }

  get(name: string, namespace?: string): KubernetesObject | undefined {
    return this.#objects.get(`${namespace}/${name}`);
  }
}

export interface ProjectIndexSizes {
  keys: number;
  projects: number;
  namespaces: number;
  organizations: number;
}

export async function projectIndexBenchmark(
  opts: BenchOptions,
  sizes: ProjectIndexSizes = { keys: 10_000, projects: 1_000, namespaces: 10, organizations: 10 },
): Promise<string> {
  const { keys, projects, namespaces, organizations } = sizes;
  const projectId = (p: number): string => `project-${String(p).padStart(8, '0')}`;
  const orgOf = (p: number): string => `org-${p % organizations}`;
  const byNamespace = new Map<string, KubernetesObject[]>();
  for (let i = 0; i < keys; i++) {
    const ns = `team-${i % namespaces}`;
    const p = i % projects;
    const obj = {
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ProjectApiKey',
      metadata: { name: `key-${i}`, namespace: ns, uid: `uid-${i}`, resourceVersion: String(i + 1), generation: 1 },
      spec: { projectId: projectId(p), organizationId: orgOf(p), keyName: `key-${i}`, credentialsSecretRef: { name: 'neon-admin' } },
    } as KubernetesObject;
    byNamespace.set(ns, [...(byNamespace.get(ns) ?? []), obj]);
  }
  const controller = new Controller({
    kubeConfig: new KubeConfig(),
    reconciler: { reconcile: async () => ({ type: 'Done' }) },
    watches: (namespace) => keyWatches(namespace),
    logger: pino({ level: 'silent' }),
    workers: 4,
    namespaces: [...byNamespace.keys()],
    informerFor: (watch: Watch) =>
      new ListedInformer(watch.kind === 'ProjectApiKey' ? (byNamespace.get(/namespaces\/([^/]+)\//.exec(watch.path)?.[1] ?? '') ?? []) : [], trimKeyResource),
  });
  await controller.start();
  if (controller.cached('ProjectApiKey').length !== keys)
    throw new Error(`cached ${controller.cached('ProjectApiKey').length} ProjectApiKeys, expected ${keys}`);

  type Lookup = (ids: readonly string[], org?: string) => string[];
  const variants: [string, Lookup][] = [
    ['before: scan of every cached ProjectApiKey', (ids, org) => scanProjectKeysIn(controller, ids, org)],
    ['after: project index', (ids, org) => projectKeysIn(controller, ids, org)],
  ];
  // The same answer from both, for every project.
  for (let p = 0; p < projects; p++) {
    const a = variants[0]![1]([projectId(p)])
      .sort()
      .join();
    const b = variants[1]![1]([projectId(p)])
      .sort()
      .join();
    if (a !== b) throw new Error(`the lookups disagree for ${projectId(p)}`);
  }

  const rows: string[] = [];
  const results = new Map<string, number>();
  for (const [name, lookup] of variants) {
    // One operations change: the keys of one project (what OperationsPollers.onUpdate wakes), for every project once.
    const roundsOne: number[][] = [];
    // A drift list reporting 10 projects of one organization gone.
    const roundsGone: number[][] = [];
    for (let round = 0; round < opts.rounds; round++) {
      const one: number[] = [];
      for (let p = 0; p < projects; p++) {
        const t = process.hrtime.bigint();
        lookup([projectId(p)]);
        one.push(Number(process.hrtime.bigint() - t) / 1_000);
      }
      roundsOne.push(one);
      const gone: number[] = [];
      for (let p = 0; p + 10 * organizations <= projects && gone.length < 100; p += 10 * organizations) {
        const ids = Array.from({ length: 10 }, (_, k) => projectId(p + k * organizations));
        const t = process.hrtime.bigint();
        lookup(ids, orgOf(p));
        gone.push(Number(process.hrtime.bigint() - t) / 1_000);
      }
      roundsGone.push(gone);
    }
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const best = roundsOne.reduce((a, b) => (mean(a) <= mean(b) ? a : b));
    const bestGone = roundsGone.reduce((a, b) => (mean(a) <= mean(b) ? a : b));
    results.set(name, mean(best));
    opts.log(`project-index: ${name}: mean ${mean(best).toFixed(1)} µs per change (rounds ${roundsOne.map((r) => mean(r).toFixed(1)).join(', ')})`);
    rows.push(
      `| ${name} | **${mean(best).toFixed(1)} µs** (p99 ${percentile(
        [...best].sort((a, b) => a - b),
        99,
      ).toFixed(
        1,
      )}; rounds ${roundsOne.map((r) => mean(r).toFixed(1)).join(', ')}) | ${((mean(best) * projects) / 1_000).toFixed(1)} ms | ${mean(bestGone).toFixed(1)} µs |`,
    );
  }
  await controller.stop();
  const before = results.get(variants[0]![0]) ?? 0;
  const after = results.get(variants[1]![0]) ?? 1;
  return [
    `${keys.toLocaleString('en-US')} ProjectApiKeys cached over ${projects.toLocaleString('en-US')} projects (${keys / projects} keys each) in ${namespaces} namespaces and ${organizations} organizations; the real Controller and keys/watches.ts, caches filled by an in-memory LIST (no apiserver in the lookup). Best of ${opts.rounds} rounds; each round looks up every project once.`,
    '',
    '| lookup | one operations change (the keys of one project) | every project changing once | a drift list: 10 projects of an organization gone |',
    '|---|---|---|---|',
    ...rows,
    '',
    `The index is ${(before / after).toFixed(0)}× faster per change; the scan grew with every cached ProjectApiKey, the index with the keys of the changed project only.`,
  ].join('\n');
}
