// Two clusters on one organization (`--only clusters`, docs/clusters.md): two operators, each in
// its own process with a cluster name of its own (alpha, beta) and `--organization-rate-share=0.5`,
// each watching a namespace of its own on one control plane (as two clusters would: apart but for
// the organization), against one emulator (`:memory:`, 10 key creations per second per
// organization, 100 ms added to every platform request). Each namespace's team applies
// `--clusters-keys` keys at once (500 by default), both floods together. Figures: each cluster's
// first apply → its last key Ready, as keys/s and as a fraction of its share (5/s); the emulator's
// 429s; every key Ready; and each cluster's ApiKeyInventory of the organization once both floods
// are done: the other's keys reported as another cluster's (with its name), none as made by hand.
// The host's load is sampled through the run (the 1-minute average, every 5 s) and written beside
// the figures.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthorizationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api, Watch } from '@kubernetes/client-node';
import { teamOf } from './fairness-flood-team.ts';
import { freePort, kubeconfigYaml, startControlPlane, type RunningControlPlane } from '../test/harness/controlplane.ts';
import { OPERATOR_SOURCE, OperatorProcess } from '../test/harness/operator-process.ts';
import { spawnChild } from './emulator.ts';
import type { BenchOptions } from './options.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const GROUP = 'keys.neon.dev';
const VERSION = 'v1alpha1';
const ORG = 'org-clusters-0001';
const ORG_RATE = 10;
const SHARE = 0.5;
const LATENCY_MS = 100;
const CLUSTERS = [
  { name: 'alpha', namespace: 'cluster-alpha' },
  { name: 'beta', namespace: 'cluster-beta' },
] as const;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

interface RequestCount {
  method: string;
  route: string;
  status: number;
  count: number;
}
interface Condition {
  type: string;
  status: string;
}
interface KeyObject {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  status?: { keyName?: string; conditions?: Condition[] };
}
interface InventoryStatus {
  listedAt?: string;
  live?: number;
  managed?: number;
  notManaged?: number;
  notManagedByOrigin?: { thisCluster: number; otherCluster: number; byHand: number };
  notManagedKeys?: { id: number; origin?: string; cluster?: string }[];
}

export async function clustersBenchmark(opts: BenchOptions, keys: number): Promise<string> {
  const { log } = opts;
  const dir = mkdtempSync(join(tmpdir(), 'nko-bench-clusters-'));
  let cp: RunningControlPlane | undefined;
  let emulator: Awaited<ReturnType<typeof spawnChild>> | undefined;
  const operators: OperatorProcess[] = [];
  const children = new Set<ChildProcess>();
  const watches: AbortController[] = [];
  let stopped = false;
  const kill = () => {
    for (const operator of operators) operator.killNow();
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  };
  process.once('exit', kill);
  const loads: number[] = [];
  const sampler = setInterval(() => loads.push(loadavg()[0] ?? 0), 5_000);
  try {
    const binDir = await new Promise<string>((resolve, reject) =>
      execFile('bash', [join(ROOT, 'test/controlplane/build.sh')], { encoding: 'utf8' }, (err, stdout) =>
        err === null ? resolve(stdout.trim()) : reject(err),
      ),
    );
    log('clusters: starting control plane');
    cp = await startControlPlane({ binDir });
    const info = cp.info;
    const kubectl = (args: string[]) =>
      new Promise<string>((resolve, reject) => {
        execFile(
          join(binDir, 'kubectl'),
          args,
          { encoding: 'utf8', env: { ...process.env, KUBECONFIG: info.kubeconfigPath, HOME: '/tmp' }, maxBuffer: 1 << 26 },
          (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`kubectl ${args.join(' ')}: ${stderr.trim() || err.message}`))),
        );
      });
    const seedFile = join(dir, 'seed.json');
    writeFileSync(
      seedFile,
      JSON.stringify({ organizations: [{ id: ORG, name: 'clusters' }], users: [{ name: 'bench', email: 'bench@example.com', orgRoles: { [ORG]: 'admin' } }] }),
    );
    emulator = await spawnChild(['src/emulator/main.ts', '--port=0', '--db=:memory:', `--seed=${seedFile}`, '--log-level=error']);
    const boot = emulator.firstLine as { baseUrl: string; adminUrl: string; users: { name: string; personalKey: string }[] };
    const adminKey = boot.users.find((u) => u.name === 'bench')?.personalKey ?? '';
    const requests = async (): Promise<RequestCount[]> => (await (await fetch(`${boot.adminUrl}/requests`)).json()) as RequestCount[];
    const count = (rs: RequestCount[], pick: (r: RequestCount) => boolean) => rs.filter(pick).reduce((s, r) => s + r.count, 0);
    await fetch(`${boot.adminUrl}/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rules: [{ probability: 1, kind: 'latency', latencyMs: LATENCY_MS }] }),
    });

    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-f', join(ROOT, 'crds')]);
    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-k', join(ROOT, 'deploy/base')]);
    await kubectl(['wait', '--for=condition=Established', 'crd/apikeys.keys.neon.dev', 'crd/apikeyinventories.keys.neon.dev', '--timeout=60s']);
    // Two clusters have two signing keys: the second operator's is granted to the same ServiceAccount by name, as deploy/base grants the first's.
    const secondKey = 'neon-key-operator-signing-key-beta';
    const grant = join(dir, 'second-signing-key.yaml');
    writeFileSync(
      grant,
      [
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: Role',
        'metadata: {name: bench-second-signing-key, namespace: neon-key-operator-system}',
        `rules: [{apiGroups: [""], resources: [secrets], resourceNames: [${secondKey}], verbs: [get]}]`,
        '---',
        'apiVersion: rbac.authorization.k8s.io/v1',
        'kind: RoleBinding',
        'metadata: {name: bench-second-signing-key, namespace: neon-key-operator-system}',
        'roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: bench-second-signing-key}',
        'subjects: [{kind: ServiceAccount, name: neon-key-operator, namespace: neon-key-operator-system}]',
        '',
      ].join('\n'),
    );
    await kubectl(['apply', '-f', grant]);
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const authz = kc.makeApiClient(AuthorizationV1Api);
    const objects = kc.makeApiClient(CustomObjectsApi);

    // Each namespace: its credentials, its team bound to `edit` (the keys are applied as the team), its inventory.
    for (const { namespace } of CLUSTERS) {
      await core.createNamespace({ body: { metadata: { name: namespace } } });
      await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: adminKey } } });
      await rbac.createNamespacedRoleBinding({
        namespace,
        body: {
          metadata: { name: 'team' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: teamOf(namespace) }],
        },
      });
      for (let i = 0; ; i++) {
        const review = await authz.createSubjectAccessReview({
          body: {
            spec: {
              user: teamOf(namespace),
              groups: ['system:authenticated'],
              resourceAttributes: { namespace, verb: 'create', group: GROUP, resource: 'apikeys' },
            },
          },
        });
        if (review.status?.allowed === true) break;
        if (i > 300) throw new Error(`${teamOf(namespace)} may not create ApiKeys in ${namespace} after 30 s`);
        await sleep(100);
      }
      await objects.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: 'apikeyinventories',
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'ApiKeyInventory',
          metadata: { name: 'org' },
          spec: { organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } },
        },
      });
    }

    // Ready of every ApiKey, as watched.
    const readyAt = new Map<string, number>();
    const keyNames = new Map<string, string>();
    const watch = new Watch(kc);
    const startWatch = async (from?: string): Promise<void> => {
      let last = from;
      const again = () => {
        if (!stopped) void startWatch(last).catch(() => setTimeout(again, 1_000));
      };
      watches.push(
        await watch.watch(
          `/apis/${GROUP}/${VERSION}/apikeys`,
          { allowWatchBookmarks: 'true', ...(last !== undefined ? { resourceVersion: last } : {}) },
          (type, obj) => {
            const object = obj as KeyObject & { code?: number };
            if (type === 'ERROR') {
              if (object.code === 410) last = undefined;
              return;
            }
            last = object.metadata?.resourceVersion ?? last;
            if (type === 'BOOKMARK') return;
            const id = `${object.metadata.namespace}/${object.metadata.name}`;
            if (object.status?.keyName !== undefined) keyNames.set(id, object.status.keyName);
            if (object.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !readyAt.has(id))
              readyAt.set(id, performance.now());
          },
          () => setTimeout(again, 200),
        ),
      );
    };
    await startWatch();

    // The operators, as the deploy/base ServiceAccount, each in its own process.
    const token = (await kubectl(['create', 'token', 'neon-key-operator', '-n', 'neon-key-operator-system', '--duration=2h'])).trim();
    const operatorKubeconfig = join(dir, 'operator.kubeconfig');
    writeFileSync(operatorKubeconfig, kubeconfigYaml(info, token, 'neon-key-operator'), { mode: 0o600 });
    for (const [i, { name, namespace }] of CLUSTERS.entries()) {
      const [metricsPort, healthPort] = [await freePort(), await freePort()];
      const operator = new OperatorProcess({
        args: [
          `--kubeconfig=${operatorKubeconfig}`,
          `--platform-url=${boot.baseUrl}`,
          `--metrics-bind-address=127.0.0.1:${metricsPort}`,
          `--health-probe-bind-address=127.0.0.1:${healthPort}`,
          '--drift-interval=30s',
          `--watch-namespace=${namespace}`,
          `--cluster-name=${name}`,
          `--organization-rate-share=${SHARE}`,
          `--signing-key-secret=${i === 0 ? 'neon-key-operator-signing-key' : secondKey}`,
        ],
        env: { ...process.env, NODE_OPTIONS: '', LOG_LEVEL: 'info' },
        keep: 0,
        log: join(dir, `operator-${name}.log`),
      });
      operators.push(operator);
      await operator.ready(healthPort, 60_000, `operator ${name} ready`);
    }

    // Both floods at once, each namespace's applied by its team, 32 at a time, from a process of its own (bench/fairness-flood.ts).
    const names = Array.from({ length: keys }, (_, i) => `k-${String(i).padStart(4, '0')}`);
    await fetch(`${boot.adminUrl}/requests`, { method: 'DELETE' });
    log(`clusters: ${keys} keys in each of ${CLUSTERS.map((c) => c.namespace).join(' and ')} at once, shares ${SHARE}`);
    const loadsBefore = loads.length;
    const spawnedAt = performance.now();
    const spawnedWall = Date.now();
    /** When the first apply was sent (wall clock, from the flood's lines): the figures count from it, not from the flood process's start. */
    let firstSent = Number.POSITIVE_INFINITY;
    await new Promise<void>((resolve, reject) => {
      const job = { kubeconfig: info.kubeconfigPath, organization: ORG, namespaces: CLUSTERS.map((c) => c.namespace), names };
      const child = spawn(process.execPath, [join(ROOT, 'bench/fairness-flood.ts'), JSON.stringify(job)], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, NODE_OPTIONS: '' },
      });
      children.add(child);
      let buffered = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          firstSent = Math.min(firstSent, (JSON.parse(buffered.slice(0, nl)) as { sent: number }).sent);
          buffered = buffered.slice(nl + 1);
        }
      });
      child.once('exit', (code) => {
        children.delete(child);
        if (code === 0) resolve();
        else reject(new Error(`the floods exited with ${code}`));
      });
    });
    const t0 = spawnedAt + (firstSent - spawnedWall);
    log(`   the first apply was sent ${fmt(t0 - spawnedAt)} ms after the flood's process was started`);
    const ids = (namespace: string) => names.map((n) => `${namespace}/${n}`);
    const deadline = performance.now() + keys * 1_000;
    while (performance.now() < deadline && !CLUSTERS.every((c) => ids(c.namespace).every((id) => readyAt.has(id)))) await sleep(250);
    const rs = await requests();
    const loadsDuring = loads.slice(loadsBefore);
    const rows: string[] = [];
    const shareRate = ORG_RATE * SHARE;
    const figures = CLUSTERS.map(({ name, namespace }) => {
      const ready = ids(namespace).filter((id) => readyAt.has(id));
      const last = Math.max(...ready.map((id) => readyAt.get(id) as number));
      const seconds = (last - t0) / 1000;
      const named = ready.filter((id) => new RegExp(`\\.${name}\\.[a-z0-9]{8}$`).test(keyNames.get(id) ?? '')).length;
      return { name, namespace, ready: ready.length, seconds, rate: ready.length / seconds, named };
    });
    for (const f of figures) {
      log(
        `   ${f.name}: ${f.ready}/${keys} Ready in ${fmt(f.seconds, 1)} s: ${fmt(f.rate, 2)} keys/s, ${fmt(f.rate / shareRate, 3)} of its share (${shareRate}/s); ${f.named} named .${f.name}.`,
      );
    }
    const four29 = count(rs, (r) => r.status === 429);
    const creates = count(rs, (r) => r.method === 'POST' && r.route.endsWith('/api_keys') && r.status === 200);

    // Each inventory once a list taken after both floods shows every key.
    const doneAt = Date.now();
    const inventories = new Map<string, InventoryStatus>();
    for (const { namespace } of CLUSTERS) {
      const end = performance.now() + 180_000;
      for (;;) {
        const inventory = (await objects.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace,
          plural: 'apikeyinventories',
          name: 'org',
        })) as { status?: InventoryStatus };
        const s = inventory.status;
        if (s !== undefined && Date.parse(s.listedAt ?? '') >= doneAt - 1_000 && s.live === 2 * keys) {
          inventories.set(namespace, s);
          break;
        }
        if (performance.now() > end) {
          inventories.set(namespace, s ?? {});
          break;
        }
        await sleep(1_000);
      }
    }
    const inventoryText = CLUSTERS.map(({ name, namespace }) => {
      const s = inventories.get(namespace) ?? {};
      const other = CLUSTERS.find((c) => c.name !== name)?.name;
      const entries = s.notManagedKeys ?? [];
      const asOther = entries.filter((k) => k.origin === 'OtherCluster' && k.cluster === other).length;
      log(
        `   inventory of ${name}: live ${s.live}, managed ${s.managed}, not managed ${s.notManaged} (${JSON.stringify(s.notManagedByOrigin)}); ${asOther} of ${entries.length} listed as ${other}'s`,
      );
      const origins = s.notManagedByOrigin;
      return (
        `${name}'s: live ${fmt(s.live ?? 0)}, managed ${fmt(s.managed ?? 0)}, not managed ${fmt(s.notManaged ?? 0)}: ` +
        `**${fmt(origins?.otherCluster ?? 0)} another cluster's, ${fmt(origins?.byHand ?? 0)} by hand**, ${fmt(origins?.thisCluster ?? 0)} named like its own ` +
        `(the ${entries.length} listed: ${asOther} as ${other}'s)`
      );
    });
    for (const f of figures) {
      const ready = f.ready === keys ? 'every key Ready' : `**${f.ready} of ${keys} Ready**`;
      rows.push(
        `| ${f.name} (\`--organization-rate-share=${SHARE}\`): ${fmt(keys)} keys in namespace ${f.namespace} | ${ready} (${f.named} named \`<keyName>.${f.name}.<tag>\`); ` +
          `first apply → last Ready ${fmt(f.seconds, 1)} s: ${fmt(f.rate, 2)} keys/s, **${fmt(f.rate / shareRate, 3)} of its share** (${shareRate}/s) | ≥ 0.95, every key Ready |`,
      );
    }
    rows.push(`| both: the organization's creates, 429s | ${fmt(creates)} creates; **${four29} 429s** | 0 429s |`);
    rows.push(
      `| each ApiKeyInventory of the organization, after both floods | ${inventoryText.join('; ')} | the other's ${fmt(keys)} as another cluster's, none by hand |`,
    );
    const loadText = loadsDuring.length > 0 ? `${fmt(Math.min(...loadsDuring), 1)}–${fmt(Math.max(...loadsDuring), 1)}` : '–';
    log(`clusters: host load (1-minute average) during the floods ${loadText}`);
    return [
      `One organization; the emulator in its own process (\`:memory:\`, 10 key creations per second per organization) with ${LATENCY_MS} ms added to every platform request; ` +
        `two operators, each in its own process (\`node ${OPERATOR_SOURCE}\`, 16 workers, \`--drift-interval=30s\`, the deploy/base ServiceAccount's token, a signing key of its own), ` +
        `each with \`--watch-namespace\` of its own namespace, \`--cluster-name\` alpha or beta and \`--organization-rate-share=${SHARE}\`: two clusters apart but for the organization. ` +
        `The local control plane on loopback. Each namespace's ${fmt(keys)} keys are applied by its team (a user bound to \`edit\` there, impersonated), 32 at a time per namespace, ` +
        "both namespaces at once, from a process of their own. Apply → Ready from the bench's watch of every ApiKey (first apply: when the first create of either flood was sent). " +
        `Host load (1-minute average, sampled every 5 s) during the floods: **${loadText}**.`,
      '',
      '| scenario | measured | goal |',
      '|---|---|---|',
      ...rows,
    ].join('\n');
  } finally {
    stopped = true;
    clearInterval(sampler);
    for (const w of watches) w.abort();
    for (const operator of operators) await operator.stop(15_000);
    kill();
    process.off('exit', kill);
    await emulator?.stop().catch(() => undefined);
    await cp?.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
