// Fairness between namespaces of one organization (`--only fairness`, issue 25). The operator runs
// as its own process (the source entry point, test/harness/operator-process.ts, the token of the
// deploy/base ServiceAccount), the emulator as its own (`:memory:`, its rate limit of 10 key
// creations per second per organization), with 100 ms added to every platform request (issue 14's
// latency). One operator and one emulator for every scenario, one after the other, each in
// namespaces of its own:
//
// 0. one organization's wave alone: `--fair-flood` keys in one namespace, all at once → keys/s ÷ 10,
//    429s (issue 14's convergence at 100 ms: ≥ 0.95, 0 429s);
// 1. one flood: `--fair-flood` keys in one namespace while a second namespace applies one key every
//    2 s throughout → that namespace's apply → Ready (p50, p99, max); the flood's rate; 429s; and,
//    in a third, quiet namespace, repairs during the flood: a key whose Secret is deleted (→ a new
//    key in its Secret) and a key revoked outside (→ replaced), at `--fair-drift-interval`;
// 2. ten floods: `--fair-floods` namespaces apply `--fair-flood-each` keys each while another
//    applies one key every 2 s → its apply → Ready.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthorizationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api, Watch } from '@kubernetes/client-node';
import { asTeam, teamOf } from './fairness-flood-team.ts';
import { freePort, kubeconfigYaml, startControlPlane, type RunningControlPlane } from '../test/harness/controlplane.ts';
import { OPERATOR_SOURCE, OperatorProcess } from '../test/harness/operator-process.ts';
import { parseGoDuration } from '../src/operator/go-duration.ts';
import { spawnChild } from './emulator.ts';
import { percentile } from './load.ts';
import type { BenchOptions, FairnessBenchOptions } from './options.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const GROUP = 'keys.neon.dev';
const VERSION = 'v1alpha1';
const ORG = 'org-fair-0000001';
const ORG_RATE = 10;
const LATENCY_MS = 100;
const STEADY_EVERY_MS = 2_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ms = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '–' : `${fmt(n)} ms`);

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
  status?: { keyId?: number; conditions?: Condition[] };
}

interface OperatorSample {
  at: number;
  loopMaxMs: number;
  cpuS: number;
}

export async function fairnessBenchmark(opts: BenchOptions, o: FairnessBenchOptions): Promise<string> {
  const { log } = opts;
  const dir = mkdtempSync(join(tmpdir(), 'nko-bench-fairness-'));
  let cp: RunningControlPlane | undefined;
  let emulator: Awaited<ReturnType<typeof spawnChild>> | undefined;
  let operator: OperatorProcess | undefined;
  const watches: AbortController[] = [];
  let stopped = false;
  const floodChildren = new Set<ChildProcess>();
  const killOperator = () => {
    operator?.killNow();
    for (const child of floodChildren) if (child.exitCode === null) child.kill('SIGKILL');
  };
  process.once('exit', killOperator);
  try {
    const binDir = await new Promise<string>((resolve, reject) =>
      execFile('bash', [join(ROOT, 'test/controlplane/build.sh')], { encoding: 'utf8' }, (err, stdout) =>
        err === null ? resolve(stdout.trim()) : reject(err),
      ),
    );
    log('fairness: starting control plane');
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
      JSON.stringify({ organizations: [{ id: ORG, name: 'fair' }], users: [{ name: 'bench', email: 'bench@example.com', orgRoles: { [ORG]: 'admin' } }] }),
    );
    emulator = await spawnChild(['src/emulator/main.ts', '--port=0', '--db=:memory:', `--seed=${seedFile}`, '--log-level=error']);
    const boot = emulator.firstLine as { baseUrl: string; adminUrl: string; users: { name: string; personalKey: string }[] };
    const adminKey = boot.users.find((u) => u.name === 'bench')?.personalKey ?? '';
    const requests = async (): Promise<RequestCount[]> => (await (await fetch(`${boot.adminUrl}/requests`)).json()) as RequestCount[];
    const count = (rs: RequestCount[], pick: (r: RequestCount) => boolean) => rs.filter(pick).reduce((s, r) => s + r.count, 0);
    const is429 = (r: RequestCount) => r.status === 429;
    const isCreate = (r: RequestCount) => r.method === 'POST' && r.route.endsWith('/api_keys') && r.status === 200;
    await fetch(`${boot.adminUrl}/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rules: [{ probability: 1, kind: 'latency', latencyMs: LATENCY_MS }] }),
    });

    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-f', join(ROOT, 'crds')]);
    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-k', join(ROOT, 'deploy/base')]);
    await kubectl(['wait', '--for=condition=Established', 'crd/apikeys.keys.neon.dev', '--timeout=60s']);
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const authz = kc.makeApiClient(AuthorizationV1Api);
    /** The keys of a namespace as its team applies them (impersonated: see namespace()). */
    const teamObjects = new Map<string, CustomObjectsApi>();
    const objectsOf = (ns: string): CustomObjectsApi => {
      let api = teamObjects.get(ns);
      if (api === undefined) {
        api = asTeam(kc, ns).makeApiClient(CustomObjectsApi);
        teamObjects.set(ns, api);
      }
      return api;
    };

    // Ready and key of every ApiKey, as watched (every namespace).
    const readyAt = new Map<string, number>();
    const readyWall = new Map<string, number>();
    /** When the bench's watch first saw each ApiKey (wall clock): its lag behind the apply's answer (--fair-stages). */
    const seenWall = new Map<string, number>();
    const keyIdOf = new Map<string, number>();
    const secretKeyAt = new Map<string, { t: number; keyId: string }[]>();
    const watch = new Watch(kc);
    const startWatch = async (
      path: string,
      query: Record<string, string>,
      onEvent: (obj: KeyObject & Record<string, unknown>) => void,
      from?: string,
    ): Promise<void> => {
      let last = from;
      const again = () => {
        if (!stopped) void startWatch(path, query, onEvent, last).catch(() => setTimeout(again, 1_000));
      };
      watches.push(
        await watch.watch(
          path,
          { ...query, allowWatchBookmarks: 'true', ...(last !== undefined ? { resourceVersion: last } : {}) },
          (type, obj) => {
            const object = obj as KeyObject & Record<string, unknown> & { code?: number };
            if (type === 'ERROR') {
              if (object.code === 410) last = undefined;
              return;
            }
            last = object.metadata?.resourceVersion ?? last;
            if (type !== 'BOOKMARK') onEvent(object);
          },
          () => setTimeout(again, 200),
        ),
      );
    };
    await startWatch(`/apis/${GROUP}/${VERSION}/apikeys`, {}, (obj) => {
      const id = `${obj.metadata.namespace}/${obj.metadata.name}`;
      if (!seenWall.has(id)) seenWall.set(id, Date.now());
      if (obj.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !readyAt.has(id)) {
        readyAt.set(id, performance.now());
        readyWall.set(id, Date.now());
      }
      if (obj.status?.keyId !== undefined) keyIdOf.set(id, obj.status.keyId);
    });
    await startWatch('/api/v1/secrets', { labelSelector: 'app.kubernetes.io/managed-by=neon-key-operator' }, (obj) => {
      const id = `${obj.metadata.namespace}/${obj.metadata.name}`;
      const annotations = (obj.metadata as { annotations?: Record<string, string> }).annotations ?? {};
      const keyId = annotations['keys.neon.dev/key-id'];
      if (keyId === undefined) return;
      const seen = secretKeyAt.get(id) ?? [];
      if (seen.at(-1)?.keyId !== keyId) seen.push({ t: performance.now(), keyId });
      secretKeyAt.set(id, seen);
    });

    /**
     * A team's namespace: its credentials Secret, and its team (the user team-<namespace>) bound to
     * the built-in `edit` role there, which the tenant roles of deploy/base aggregate the keys into.
     * Every key of the scenarios is applied by its namespace's team, not by the bench's
     * system:masters user: a team's requests are a flow of the apiserver's global-default priority
     * level (API Priority and Fairness), as a team's kubectl or GitOps tool would be, while the
     * operator's ServiceAccount is a flow of workload-low. An exempt flood would be a flood no
     * tenant can send.
     */
    const namespace = async (name: string): Promise<void> => {
      await core.createNamespace({ body: { metadata: { name } } });
      await core.createNamespacedSecret({ namespace: name, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: adminKey } } });
      await rbac.createNamespacedRoleBinding({
        namespace: name,
        body: {
          metadata: { name: 'team' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: teamOf(name) }],
        },
      });
      // The aggregated rule reaches `edit` through kube-controller-manager: wait until the team may create keys.
      for (let i = 0; ; i++) {
        const review = await authz.createSubjectAccessReview({
          body: {
            spec: {
              user: teamOf(name),
              groups: ['system:authenticated'],
              resourceAttributes: { namespace: name, verb: 'create', group: GROUP, resource: 'apikeys' },
            },
          },
        });
        if (review.status?.allowed === true) break;
        if (i > 300) throw new Error(`${teamOf(name)} may not create ApiKeys in ${name} after 30 s`);
        await sleep(100);
      }
    };
    /** When the create was sent, and when the apiserver answered it. */
    const acceptedAt = new Map<string, number>();
    const acceptedWall = new Map<string, number>();
    /** The operator's metrics scraped every second during scenario 2 (--fair-stages). */
    const operatorSamples: OperatorSample[] = [];
    const sentWall = new Map<string, number>();
    /** From the operator's log (info: 'creating key', with the reconcile's namespace and name): apply answered → create sent, in ms, of the keys of `ns`, sorted. */
    const untilCreate = (ns: string): number[] => {
      const out: number[] = [];
      for (const line of readFileSync(join(dir, 'operator.log'), 'utf8').split('\n')) {
        if (!line.includes('"creating key"') || !line.includes(`"namespace":"${ns}"`)) continue;
        try {
          const entry = JSON.parse(line) as { time: number; namespace: string; name: string };
          const accepted = acceptedWall.get(`${entry.namespace}/${entry.name}`);
          if (accepted !== undefined) out.push(entry.time - accepted);
        } catch {
          // a partial line
        }
      }
      return out.sort((a, b) => a - b);
    };
    /**
     * Diagnosis (--fair-stages): each key of `ns` split into stages from the operator's debug log,
     * printed: p50, p99 and max of each stage, and the slowest keys stage by stage.
     */
    const stages = (ns: string): void => {
      // 'turn': a key sent to the organization's line was woken for its turn (manager.ts); 'read': the
      // pass that goes on to observe (for a key sent to the line, the one a worker took up after its
      // turn), once the resource is read or taken from the cache.
      const STAGES = ['first reconcile', 'turn', 'read', 'decided', 'creating key', 'key created', 'Secret written', 'status written'] as const;
      const at = new Map<string, Map<string, number>>();
      for (const line of readFileSync(join(dir, 'operator.log'), 'utf8').split('\n')) {
        if (!line.includes(`"namespace":"${ns}"`)) continue;
        let entry: { time: number; namespace: string; name: string; msg: string };
        try {
          entry = JSON.parse(line) as typeof entry;
        } catch {
          continue;
        }
        const id = `${entry.namespace}/${entry.name}`;
        const seen = at.get(id) ?? new Map<string, number>();
        at.set(id, seen);
        if (!seen.has('first reconcile')) seen.set('first reconcile', entry.time);
        if ((STAGES as readonly string[]).includes(entry.msg) && !seen.has(entry.msg)) seen.set(entry.msg, entry.time);
      }
      const rows: { id: string; steps: number[]; total: number }[] = [];
      for (const [id, seen] of at) {
        const accepted = acceptedWall.get(id);
        const ready = readyWall.get(id);
        if (accepted === undefined || ready === undefined) continue;
        // A key admitted at once had no turn to wait for: its turn is its first reconcile.
        const times = [accepted, ...STAGES.map((s) => seen.get(s) ?? (s === 'turn' ? seen.get('first reconcile') : undefined) ?? Number.NaN), ready];
        rows.push({ id, steps: times.slice(1).map((t, i) => t - (times[i] as number)), total: ready - accepted });
      }
      const names = [
        '→ first reconcile',
        '→ turn (waited)',
        '→ read (a worker)',
        '→ decided (Secrets)',
        '→ creating key',
        '→ key created',
        '→ Secret written',
        '→ status written',
        '→ Ready seen',
      ];
      log(`   stages of namespace ${ns} (${rows.length} keys, ms from the step before; apply answered first):`);
      names.forEach((n, i) => {
        const xs = rows
          .map((r) => r.steps[i] as number)
          .filter(Number.isFinite)
          .sort((a, b) => a - b);
        log(`     ${n.padEnd(20)} p50 ${ms(percentile(xs, 50))}, p99 ${ms(percentile(xs, 99))}, max ${ms(xs.at(-1))}`);
      });
      for (const r of rows.sort((a, b) => b.total - a.total).slice(0, 8))
        log(`     slow ${r.id}: ${fmt(r.total)} ms = ${r.steps.map((x) => fmt(x)).join(' + ')}`);
    };
    /**
     * Diagnosis (--fair-stages): how late the watches see new ApiKeys of `namespaces`, by when the
     * apply was answered (5 s buckets from `t0`): the bench's own watch, and the operator's
     * informer (its debug 'event' log).
     */
    const watchLag = (namespaces: string[], t0: number): void => {
      const operatorSeen = new Map<string, number>();
      for (const line of readFileSync(join(dir, 'operator.log'), 'utf8').split('\n')) {
        if (!line.includes('"msg":"event"')) continue;
        try {
          const entry = JSON.parse(line) as { time: number; namespace: string; name: string };
          const id = `${entry.namespace}/${entry.name}`;
          if (!operatorSeen.has(id)) operatorSeen.set(id, entry.time);
        } catch {
          /* a partial line */
        }
      }
      const buckets = new Map<number, { bench: number[]; operator: number[]; apply: number[] }>();
      for (const [id, accepted] of acceptedWall) {
        if (!namespaces.includes(id.split('/')[0] as string)) continue;
        const bucket = Math.floor((accepted - t0) / 5_000);
        const b = buckets.get(bucket) ?? { bench: [], operator: [], apply: [] };
        const sent = sentWall.get(id);
        if (sent !== undefined) b.apply.push(accepted - sent);
        buckets.set(bucket, b);
        const bench = seenWall.get(id);
        const op = operatorSeen.get(id);
        if (bench !== undefined) b.bench.push(bench - accepted);
        if (op !== undefined) b.operator.push(op - accepted);
      }
      // The operator's event loop and CPU over the same buckets (its metrics, scraped every second while the floods ran).
      const loop = new Map<number, { lagMs: number; cpuS: number; seconds: number }>();
      for (let i = 1; i < operatorSamples.length; i++) {
        const [before, after] = [operatorSamples[i - 1], operatorSamples[i]] as [OperatorSample, OperatorSample];
        const bucket = Math.floor((after.at - t0) / 5_000);
        const l = loop.get(bucket) ?? { lagMs: 0, cpuS: 0, seconds: 0 };
        l.lagMs = Math.max(l.lagMs, after.loopMaxMs);
        l.cpuS += after.cpuS - before.cpuS;
        l.seconds += (after.at - before.at) / 1000;
        loop.set(bucket, l);
      }
      log(
        "   watch lag (ms from the apply's answer to the first event), by when the apply was answered; the operator's event loop delay (max) and CPU in that bucket:",
      );
      for (const [bucket, b] of [...buckets].sort((x, y) => x[0] - y[0])) {
        b.bench.sort((x, y) => x - y);
        b.operator.sort((x, y) => x - y);
        b.apply.sort((x, y) => x - y);
        const l = loop.get(bucket);
        const loopText = l !== undefined && l.seconds > 0 ? `; loop delay max ${ms(l.lagMs)}, CPU ${fmt((100 * l.cpuS) / l.seconds)} %` : '';
        log(
          `     ${String(bucket * 5).padStart(4)}–${bucket * 5 + 5} s: ${b.bench.length} applies (sent → answered p50 ${ms(percentile(b.apply, 50))} max ${ms(b.apply.at(-1))}); bench p50 ${ms(percentile(b.bench, 50))} max ${ms(b.bench.at(-1))}; operator p50 ${ms(percentile(b.operator, 50))} max ${ms(b.operator.at(-1))}${loopText}`,
        );
      }
    };
    const applyKey = async (ns: string, name: string): Promise<number> => {
      const at = performance.now();
      await objectsOf(ns).createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'apikeys',
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'ApiKey',
          metadata: { name },
          spec: { scope: 'Organization', organizationId: ORG, keyName: name, credentialsSecretRef: { name: 'neon-admin' } },
        },
      });
      acceptedAt.set(`${ns}/${name}`, performance.now());
      acceptedWall.set(`${ns}/${name}`, Date.now());
      sentWall.set(`${ns}/${name}`, Date.now() - (performance.now() - at));
      return at;
    };
    /**
     * Flooding namespaces apply `names` each, 32 at a time, from a process of their own
     * (bench/fairness-flood.ts): the measuring process applies only the steady keys and watches.
     */
    const applyMany = (namespaces: string[], names: string[]): Promise<void> =>
      new Promise((resolve, reject) => {
        const child = spawn(
          process.execPath,
          [join(ROOT, 'bench/fairness-flood.ts'), JSON.stringify({ kubeconfig: info.kubeconfigPath, organization: ORG, namespaces, names })],
          { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_OPTIONS: '' } },
        );
        floodChildren.add(child);
        let buffered = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          buffered += chunk.toString('utf8');
          for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
            const { id, sent, answered } = JSON.parse(buffered.slice(0, nl)) as { id: string; sent: number; answered: number };
            buffered = buffered.slice(nl + 1);
            sentWall.set(id, sent);
            acceptedWall.set(id, answered);
          }
        });
        child.once('exit', (code) => {
          floodChildren.delete(child);
          if (code === 0) resolve();
          else reject(new Error(`the flood of ${namespaces.join(', ')} exited with ${code}`));
        });
      });
    const allReady = async (ids: string[], deadlineMs: number): Promise<boolean> => {
      const end = performance.now() + deadlineMs;
      while (performance.now() < end) {
        if (ids.every((id) => readyAt.has(id))) return true;
        await sleep(250);
      }
      return false;
    };
    /** One key every 2 s in `ns` until `until` resolves; apply → Ready of each (ms), once Ready; and from the apiserver's answer to the apply. */
    const steady = (ns: string, until: Promise<unknown>): Promise<{ lat: number[]; fromAccepted: number[] }> =>
      (async () => {
        let done = false;
        void until.then(
          () => {
            done = true;
          },
          () => {
            done = true;
          },
        );
        const applied: [string, number][] = [];
        for (let i = 0; !done; i++) {
          const name = `steady-${String(i).padStart(3, '0')}`;
          applied.push([`${ns}/${name}`, await applyKey(ns, name)]);
          await sleep(STEADY_EVERY_MS);
        }
        await allReady(
          applied.map(([id]) => id),
          60_000,
        );
        const sorted = (xs: number[]) => xs.sort((a, b) => a - b);
        return {
          lat: sorted(applied.map(([id, at]) => (readyAt.get(id) ?? Number.POSITIVE_INFINITY) - at)),
          fromAccepted: sorted(applied.map(([id]) => (readyAt.get(id) ?? Number.POSITIVE_INFINITY) - (acceptedAt.get(id) ?? Number.NaN))),
        };
      })();

    // The operator, as its ServiceAccount, in its own process.
    const token = (await kubectl(['create', 'token', 'neon-key-operator', '-n', 'neon-key-operator-system', '--duration=2h'])).trim();
    const operatorKubeconfig = join(dir, 'operator.kubeconfig');
    writeFileSync(operatorKubeconfig, kubeconfigYaml(info, token, 'neon-key-operator'), { mode: 0o600 });
    const [metricsPort, healthPort] = [await freePort(), await freePort()];
    // With --profile the operator runs with --cpu-prof: its profile of the whole run is written when SIGTERM stops it (below).
    const profile = opts.profileDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${opts.profileDir}`, '--cpu-prof-name=operator-fairness.cpuprofile'] : [];
    operator = new OperatorProcess({
      nodeFlags: profile,
      args: [
        `--kubeconfig=${operatorKubeconfig}`,
        `--platform-url=${boot.baseUrl}`,
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${healthPort}`,
        `--drift-interval=${o.driftInterval}`,
      ],
      env: { ...process.env, NODE_OPTIONS: '', LOG_LEVEL: o.stages === true ? 'debug' : 'info' },
      keep: 0,
      log: join(dir, 'operator.log'),
    });
    await operator.ready(healthPort, 60_000);
    // Diagnosis (--fair-stages): the operator's event loop delay (prom-client's, reset at each scrape) and CPU seconds.
    const sampleOperator = async (): Promise<void> => {
      const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(
        (r) => r.text(),
        () => '',
      );
      const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
      const sample = { at: Date.now(), loopMaxMs: 1000 * value('nodejs_eventloop_lag_max_seconds'), cpuS: value('process_cpu_seconds_total') };
      if (Number.isFinite(sample.loopMaxMs) && Number.isFinite(sample.cpuS)) operatorSamples.push(sample);
    };
    const driftMs = parseGoDuration(o.driftInterval) ?? 300_000;
    const rows: string[] = [];

    const runs = (n: number) => o.scenarios === undefined || o.scenarios.includes(n);
    // ---- 0. one wave alone (issue 14's convergence at 100 ms).
    if (runs(0)) {
      await namespace('alone');
      const names = Array.from({ length: o.flood }, (_, i) => `k-${String(i).padStart(4, '0')}`);
      await fetch(`${boot.adminUrl}/requests`, { method: 'DELETE' });
      log(`fairness 0: ${o.flood} keys of one namespace alone`);
      const t0 = performance.now();
      await applyMany(['alone'], names);
      const ok = await allReady(
        names.map((n) => `alone/${n}`),
        o.flood * 1_000,
      );
      const last = Math.max(...names.map((n) => readyAt.get(`alone/${n}`) ?? Number.NaN));
      const rs = await requests();
      const rate = o.flood / ((last - t0) / 1000);
      log(`   ${fmt((last - t0) / 1000, 1)} s, ${fmt(rate / ORG_RATE, 3)} of 10/s, 429s ${count(rs, is429)}`);
      rows.push(
        `| 0. one namespace alone: ${fmt(o.flood)} keys at once (issue 14's convergence at ${LATENCY_MS} ms) | ${ok ? '' : 'NOT ALL READY; '}first apply → last Ready ${fmt((last - t0) / 1000, 1)} s: **${fmt(rate / ORG_RATE, 3)} of 10/s**, **${count(rs, is429)} 429s**, ${fmt(count(rs, isCreate))} creates | ≥ 0.95, 0 429s |`,
      );
    }

    // ---- 1. one flood, a steady namespace, repairs in a quiet one.
    if (runs(1)) {
      for (const ns of ['flood', 'steady', 'quiet']) await namespace(ns);
      await applyKey('quiet', 'secret-deleted');
      await applyKey('quiet', 'revoked-outside');
      await allReady(['quiet/secret-deleted', 'quiet/revoked-outside'], 60_000);
      // At rest or not: the repairs start 20 s into the flood either way.
      await fetch(`${boot.adminUrl}/requests`, { method: 'DELETE' });
      const names = Array.from({ length: o.flood }, (_, i) => `k-${String(i).padStart(4, '0')}`);
      log(`fairness 1: ${o.flood} keys in namespace flood, one key every 2 s in namespace steady, repairs in namespace quiet`);
      const t0 = performance.now();
      const flooding = (async () => {
        await applyMany(['flood'], names);
        return await allReady(
          names.map((n) => `flood/${n}`),
          o.flood * 1_000,
        );
      })();
      const steadyLatencies = steady('steady', flooding);
      const repairs = (async () => {
        await sleep(20_000);
        const deletedKey = String(keyIdOf.get('quiet/secret-deleted'));
        const deletedAt = performance.now();
        await core.deleteNamespacedSecret({ namespace: 'quiet', name: 'secret-deleted' });
        const revokedKey = keyIdOf.get('quiet/revoked-outside');
        const revokedAt = performance.now();
        await fetch(`${boot.baseUrl}/organizations/${ORG}/api_keys/${revokedKey}`, { method: 'DELETE', headers: { authorization: `Bearer ${adminKey}` } });
        const end = performance.now() + driftMs + 60_000;
        let secretBack: number | undefined;
        let replaced: number | undefined;
        while (performance.now() < end && (secretBack === undefined || replaced === undefined)) {
          secretBack ??= secretKeyAt.get('quiet/secret-deleted')?.find((s) => s.t > deletedAt && s.keyId !== deletedKey)?.t;
          replaced ??= secretKeyAt.get('quiet/revoked-outside')?.find((s) => s.t > revokedAt && s.keyId !== String(revokedKey))?.t;
          await sleep(100);
        }
        return {
          secretDeleted: secretBack === undefined ? undefined : secretBack - deletedAt,
          revoked: replaced === undefined ? undefined : replaced - revokedAt,
        };
      })();
      const ok = await flooding;
      const last = Math.max(...names.map((n) => readyAt.get(`flood/${n}`) ?? Number.NaN));
      const { lat, fromAccepted } = await steadyLatencies;
      const repaired = await repairs;
      const rs = await requests();
      const seconds = (last - t0) / 1000;
      const creates = count(rs, isCreate);
      log(
        `   flood ${fmt(seconds, 1)} s (${fmt(o.flood / seconds / ORG_RATE, 3)} of 10/s); steady p50 ${ms(percentile(lat, 50))} p99 ${ms(percentile(lat, 99))} max ${ms(Math.max(...lat))} (from accepted p99 ${ms(percentile(fromAccepted, 99))}); Secret deleted ${ms(repaired.secretDeleted)}, revoked ${ms(repaired.revoked)}; 429s ${count(rs, is429)}`,
      );
      rows.push(
        `| 1. one flood: namespace steady's apply → Ready, one key every 2 s (${lat.length} keys) while namespace flood applies ${fmt(o.flood)} | p50 ${ms(percentile(lat, 50))}, **p99 ${ms(percentile(lat, 99))}, max ${ms(Math.max(...lat))}**; from the apiserver's answer to the apply: p50 ${ms(percentile(fromAccepted, 50))}, p99 ${ms(percentile(fromAccepted, 99))} | p99 ≤ 1.5 s, max ≤ 3 s |`,
      );
      if (o.stages === true) stages('steady');
      const toCreate = untilCreate('steady');
      rows.push(
        `| 1. namespace steady: the apiserver's answer to the apply → the operator sends the platform create (its log) | p50 ${ms(percentile(toCreate, 50))}, p99 ${ms(percentile(toCreate, 99))}, max ${ms(Math.max(...toCreate))} | |`,
      );
      rows.push(
        `| 1. the flood: first apply → its last key Ready | ${ok ? '' : 'NOT ALL READY; '}${fmt(seconds, 1)} s: ${fmt(o.flood / seconds / ORG_RATE, 3)} of 10/s for the flood alone, **${fmt(creates / seconds / ORG_RATE, 3)} of 10/s** with the steady namespace's and the repairs' creates (${fmt(creates)} in all); **${count(rs, is429)} 429s** | ≥ 0.95, 0 429s |`,
      );
      rows.push(`| 1. repair in namespace quiet during the flood: Secret deleted → a new key in its Secret | **${ms(repaired.secretDeleted)}** | ≤ 2 s |`);
      rows.push(
        `| 1. repair in namespace quiet during the flood: key revoked outside → a new key in its Secret (drift interval ${o.driftInterval}) | **${ms(repaired.revoked)}** | ≤ ${fmt(driftMs / 1000 + 2)} s |`,
      );
    }

    // ---- 2. ten floods and a steady namespace.
    if (runs(2)) {
      const floods = Array.from({ length: o.floods }, (_, i) => `flood-${String(i + 1).padStart(2, '0')}`);
      for (const ns of [...floods, 'eleventh']) await namespace(ns);
      await fetch(`${boot.adminUrl}/requests`, { method: 'DELETE' });
      log(`fairness 2: ${o.floods} namespaces × ${o.floodEach} keys, one key every 2 s in namespace eleventh`);
      const names = Array.from({ length: o.floodEach }, (_, i) => `k-${String(i).padStart(4, '0')}`);
      const t0 = performance.now();
      const t0Wall = Date.now();
      const sampling = o.stages === true ? setInterval(() => void sampleOperator(), 1_000) : undefined;
      if (o.stages === true) await sampleOperator();
      const flooding = (async () => {
        await applyMany(floods, names);
        return await allReady(
          floods.flatMap((ns) => names.map((n) => `${ns}/${n}`)),
          o.floods * o.floodEach * 1_000,
        );
      })();
      const { lat, fromAccepted } = await steady('eleventh', flooding);
      const ok = await flooding;
      clearInterval(sampling);
      const last = Math.max(...floods.flatMap((ns) => names.map((n) => readyAt.get(`${ns}/${n}`) ?? Number.NaN)));
      const rs = await requests();
      const seconds = (last - t0) / 1000;
      if (o.stages === true) {
        stages('eleventh');
        watchLag([...floods, 'eleventh'], t0Wall);
      }
      log(
        `   floods ${fmt(seconds, 1)} s; eleventh p50 ${ms(percentile(lat, 50))} p99 ${ms(percentile(lat, 99))} max ${ms(Math.max(...lat))} (from accepted p99 ${ms(percentile(fromAccepted, 99))}); 429s ${count(rs, is429)}`,
      );
      rows.push(
        `| 2. ten floods: namespace eleventh's apply → Ready, one key every 2 s (${lat.length} keys) while ${o.floods} namespaces apply ${fmt(o.floodEach)} keys each | p50 ${ms(percentile(lat, 50))}, **p99 ${ms(percentile(lat, 99))}**, max ${ms(Math.max(...lat))} (from the apiserver's answer to the apply: p99 ${ms(percentile(fromAccepted, 99))}); the floods ${ok ? '' : 'NOT ALL READY, '}${fmt(seconds, 1)} s (${fmt(count(rs, isCreate) / seconds / ORG_RATE, 3)} of 10/s), ${count(rs, is429)} 429s | p99 ≤ 2 s |`,
      );
    }

    if (runs(2)) {
      const toCreate = untilCreate('eleventh');
      rows.push(
        `| 2. namespace eleventh: the apiserver's answer to the apply → the operator sends the platform create (its log) | p50 ${ms(percentile(toCreate, 50))}, p99 ${ms(percentile(toCreate, 99))}, max ${ms(Math.max(...toCreate))} | |`,
      );
    }
    // Who was served at which priority level (API Priority and Fairness): the teams' applies must be
    // global-default, not exempt, or the flood is not one a tenant can send.
    const byLevel = new Map<string, number>();
    for (const line of (await kubectl(['get', '--raw', '/metrics'])).split('\n')) {
      if (!line.startsWith('apiserver_flowcontrol_dispatched_requests_total{')) continue;
      const level = /priority_level="([^"]+)"/.exec(line)?.[1] ?? '?';
      byLevel.set(level, (byLevel.get(level) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
    }
    const levels = [...byLevel]
      .sort((a, b) => b[1] - a[1])
      .map(([level, n]) => `${level} ${fmt(n)}`)
      .join(', ');
    log(`fairness: apiserver requests by priority level: ${levels}`);
    return [
      `One organization; the emulator in its own process (\`:memory:\`, 10 key creations per second per organization) with ${LATENCY_MS} ms added to every platform request; the operator in its own process (\`node ${OPERATOR_SOURCE}\`, 16 workers, \`--drift-interval=${o.driftInterval}\`, the deploy/base ServiceAccount's token); the local control plane on loopback. Apply → Ready from the bench's watch of every ApiKey (apply: when the create was sent); a repair ends when the bench's watch of the managed Secrets sees another key id in the Secret. Keys are applied 32 at a time per flooding namespace, from a process of their own (the measuring process applies only the steady keys), each namespace's by its team (a user bound to \`edit\` there, impersonated), so the apiserver serves them at the priority level of a tenant's tools. Requests the apiserver dispatched, by priority level: ${levels}.`,
      '',
      '| scenario | measured | goal |',
      '|---|---|---|',
      ...rows,
    ].join('\n');
  } finally {
    stopped = true;
    for (const w of watches) w.abort();
    // SIGTERM first: the operator's profile (--profile) is written on its way out.
    if (opts.profileDir !== undefined) await operator?.stop(15_000);
    killOperator();
    process.off('exit', killOperator);
    await emulator?.stop().catch(() => undefined);
    await cp?.stop().catch(() => undefined);
    // Diagnosis: the operator's debug log outlives the run (its own temp folder is removed).
    if (o.stages === true) {
      const kept = join(tmpdir(), 'nko-fairness-operator.log');
      try {
        copyFileSync(join(dir, 'operator.log'), kept);
        log(`fairness: the operator's log is kept in ${kept}`);
      } catch {
        /* no log */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
