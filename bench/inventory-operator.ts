// The inventory on the whole operator (issue 28, `npm run bench -- --only inventory`): the operator
// as its own process (the image's node flags, the deploy/base ServiceAccount's token, as
// bench/operator.ts runs it), the local control plane and the emulator in its own process. One
// organization holds `others` keys made directly on the platform (POST .../api_keys, paced under the
// platform's 10 creates per second) and `managed` ProjectApiKeys the operator issues, spread over
// `namespaces` namespaces whose credentials Secrets hold the same administrator's key. The emulator
// has no switch for a higher creation rate (docs/emulator.md, Flags: the limit is the platform's, on
// the wall clock) and the operator's own limiter paces at 10/s too, so the keys are made at the real
// rate: about 17 minutes for 10,000.
// Then, at rest (every key Ready and past its first drift pass), two windows of `intervals` drift
// intervals each: without an inventory, then with one ApiKeyInventory of that organization on the
// same credentials. In each: the operator's RSS (/proc, sampled every 5 s), its live heap (a full GC
// through its inspector, then the heap used, and the RSS right after that GC), and the platform's
// requests by route as the emulator counts them (GET /admin/requests): the organization's key list
// is the drift list; an inventory that costs no request of its own leaves its count unchanged.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { kubeconfigYaml, freePort, startControlPlane, type RunningControlPlane } from '../test/harness/controlplane.ts';
import { imageNodeFlags, OPERATOR_BUNDLE, OperatorProcess } from '../test/harness/operator-process.ts';
import { parseGoDuration } from '../src/operator/go-duration.ts';
import { inspectorSession, limited, procCpuSeconds, procRssBytes, startEmulatorProcess, type EmulatorProcess, type RequestCount } from './operator.ts';
import type { BenchOptions } from './options.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const GROUP = 'keys.neon.dev';
const VERSION = 'v1alpha1';
const ORG = 'org-inventory-01';
const PROJECTS = ['inventory-1', 'inventory-2'];
const OPERATOR_NS = 'neon-key-operator-system';
const OPERATOR_SA = 'neon-key-operator';
const KEY_LIST_ROUTE = 'GET /api/v2/organizations/:org_id/api_keys';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const mb = (bytes: number) => fmt(bytes / 2 ** 20, 1);

/** Ready keys by the operator's own gauge (managed_keys{condition="Ready",status="True"}): no watch of 10,000 objects from the bench. */
async function readyKeys(metricsUrl: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  let sum = 0;
  for (const m of text.matchAll(/^neon_key_operator_managed_keys\{([^}]*)\} (\S+)$/gm)) {
    if (/condition="Ready"/.test(m[1] ?? '') && /status="True"/.test(m[1] ?? '')) sum += Number(m[2]);
  }
  return sum;
}

interface Window {
  load: [number, number];
  minutes: number;
  lists: number;
  requests: RequestCount[];
  rss: number[];
  rssAfterGc: number;
  liveHeap: number;
  cpuPerMinute: number;
}

export async function inventoryBenchmark(opts: BenchOptions): Promise<string> {
  const o = opts.inventory;
  const log = opts.log;
  const dir = mkdtempSync(join(tmpdir(), 'nko-bench-inventory-'));
  let cp: RunningControlPlane | undefined;
  let emulator: EmulatorProcess | undefined;
  let operator: OperatorProcess | undefined;
  let ok = false;
  const killOperator = () => operator?.killNow();
  process.once('exit', killOperator);
  try {
    const driftMs = parseGoDuration(o.driftInterval);
    if (driftMs === undefined) throw new Error(`--inventory-drift-interval: not a duration: ${o.driftInterval}`);
    const binDir = await new Promise<string>((resolve, reject) =>
      execFile('bash', [join(ROOT, 'test/controlplane/build.sh')], { encoding: 'utf8' }, (err, stdout) =>
        err === null ? resolve(stdout.trim()) : reject(err),
      ),
    );
    log('starting control plane and emulator; building dist/ (npm run build) meanwhile');
    const building = new Promise<void>((resolve, reject) =>
      execFile('npm', ['run', '--silent', 'build'], { cwd: ROOT }, (err, _stdout, stderr) =>
        err === null ? resolve() : reject(new Error(`npm run build: ${err.message}\n${stderr}`)),
      ),
    );
    cp = await startControlPlane({ binDir });
    const info = cp.info;
    const kubectl = (args: string[]) =>
      new Promise<string>((resolve, reject) => {
        execFile(
          join(binDir, 'kubectl'),
          args,
          { encoding: 'utf8', env: { ...process.env, KUBECONFIG: info.kubeconfigPath, HOME: '/tmp' }, maxBuffer: 1 << 28 },
          (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`kubectl ${args.join(' ')}: ${stderr.trim() || err.message}`))),
        );
      });
    emulator = await startEmulatorProcess(dir, {
      organizations: [{ id: ORG, name: ORG }],
      users: [{ name: 'bench', email: 'bench@example.com', orgRoles: { [ORG]: 'admin' } }],
      projects: PROJECTS.map((id) => ({ id, name: id, organizationId: ORG, ownerUserId: 'bench' })),
    });
    const emu = emulator;
    const adminKey = emu.bootstrap.users.find((u) => u.name === 'bench')?.personalKey;
    if (adminKey === undefined) throw new Error('no personal key for the bench user');
    const requests = async (): Promise<RequestCount[]> => (await (await fetch(`${emu.adminUrl}/requests`)).json()) as RequestCount[];
    const resetRequests = async () => {
      await fetch(`${emu.adminUrl}/requests`, { method: 'DELETE' });
    };

    // The keys by hand: one create at a time, at most 9 a second, a 429's Retry-After honoured.
    log(`${fmt(o.others)} keys made directly on the platform (at most 9 creates a second)`);
    const tOthers = performance.now();
    for (let i = 0; i < o.others; i++) {
      const started = performance.now();
      for (;;) {
        const res = await fetch(`${emu.baseUrl}/organizations/${ORG}/api_keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ key_name: `by-hand-${String(i).padStart(5, '0')}`, ...(i % 2 === 0 ? { project_id: PROJECTS[0] } : {}) }),
        });
        await res.arrayBuffer();
        if (res.ok) break;
        if (res.status !== 429) throw new Error(`creating key by hand ${i}: HTTP ${res.status}`);
        await sleep(Number(res.headers.get('retry-after') ?? '1') * 1000);
      }
      const wait = started + 111 - performance.now();
      if (wait > 0) await sleep(wait);
    }
    log(`   made in ${fmt((performance.now() - tOthers) / 1000, 1)} s`);

    log('installing CRDs and deploy/base');
    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-f', join(ROOT, 'crds')]);
    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-k', join(ROOT, 'deploy/base')]);
    await kubectl([
      'wait',
      '--for=condition=Established',
      'crd/apikeys.keys.neon.dev',
      'crd/projectapikeys.keys.neon.dev',
      'crd/apikeyinventories.keys.neon.dev',
      '--timeout=60s',
    ]);
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const objects = kc.makeApiClient(CustomObjectsApi);
    const namespaces = Array.from({ length: o.namespaces }, (_, i) => `team-${String(i).padStart(2, '0')}`);
    for (const ns of namespaces) {
      await core.createNamespace({ body: { metadata: { name: ns } } });
      await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: adminKey } } });
    }

    const token = (await kubectl(['create', 'token', OPERATOR_SA, '-n', OPERATOR_NS, '--duration=4h'])).trim();
    const operatorKubeconfig = join(dir, 'operator.kubeconfig');
    writeFileSync(operatorKubeconfig, kubeconfigYaml(info, token, OPERATOR_SA), { mode: 0o600 });
    const [metricsPort, healthPort, inspectPort] = [await freePort(), await freePort(), await freePort()];
    const operatorLog = join(dir, 'operator.log');
    await building;
    const nodeFlags = imageNodeFlags();
    operator = new OperatorProcess({
      entry: OPERATOR_BUNDLE,
      nodeFlags: [...nodeFlags, `--inspect=127.0.0.1:${inspectPort}`],
      args: [
        `--kubeconfig=${operatorKubeconfig}`,
        `--platform-url=${emu.baseUrl}`,
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${healthPort}`,
        `--drift-interval=${o.driftInterval}`,
      ],
      env: { ...process.env, NODE_OPTIONS: '' },
      keep: 0,
      log: operatorLog,
    });
    const pid = operator.pid as number;
    const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    await operator.ready(healthPort, 60_000, `the operator ready (log ${operatorLog})`);
    log(`operator pid ${pid} ready (node flags ${nodeFlags.join(' ')}; log ${operatorLog})`);
    await sleep(2_000);
    const inspector = await inspectorSession(inspectPort);
    const liveHeap = async (): Promise<number> => {
      await inspector.call('HeapProfiler.collectGarbage');
      return ((await inspector.call('Runtime.getHeapUsage')) as { usedSize: number }).usedSize;
    };
    const rss0 = procRssBytes(pid);
    const live0 = await liveHeap();
    log(`   no keys: RSS ${mb(rss0)} MiB, live heap ${mb(live0)} MiB`);

    // The managed keys: ProjectApiKeys of the organization's two projects, spread over the namespaces.
    log(`${fmt(o.managed)} ProjectApiKeys in ${o.namespaces} namespaces (32 parallel creates; the operator issues them at the platform's 10/s)`);
    const tManaged = performance.now();
    const keys = Array.from({ length: o.managed }, (_, i) => i);
    await limited(keys, 32, async (i) => {
      const namespace = namespaces[i % o.namespaces] as string;
      const name = `app-${String(i).padStart(5, '0')}`;
      await objects.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: 'projectapikeys',
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'ProjectApiKey',
          metadata: { name, namespace },
          spec: { organizationId: ORG, projectId: PROJECTS[i % PROJECTS.length], keyName: name, credentialsSecretRef: { name: 'neon-admin' } },
        },
      });
    });
    log(`   created in ${fmt((performance.now() - tManaged) / 1000, 1)} s`);
    let ready = 0;
    let lastLog = performance.now();
    while (ready < o.managed) {
      if (operator.child.exitCode !== null) throw new Error(`operator exited (${operator.child.exitCode}); log ${operatorLog}`);
      if (performance.now() - tManaged > o.deadlineSeconds * 1000) throw new Error(`only ${ready} of ${o.managed} keys Ready after ${o.deadlineSeconds} s`);
      await sleep(5_000);
      ready = await readyKeys(metricsUrl);
      if (performance.now() - lastLog > 60_000) {
        lastLog = performance.now();
        log(`   ${fmt(ready)} / ${fmt(o.managed)} Ready`);
      }
    }
    const convergedS = (performance.now() - tManaged) / 1000;
    log(`   all Ready after ${fmt(convergedS, 1)} s (${fmt(o.managed / convergedS, 2)} keys/s)`);
    // At rest: every key past its first drift pass (a full one; jittered up to 1.1 intervals).
    const settle = 1.1 * driftMs + 15_000;
    log(`   waiting ${fmt(settle / 1000)} s for the first drift pass of every key`);
    await sleep(settle);

    const measure = async (label: string): Promise<Window> => {
      log(`${label}: ${o.intervals} drift intervals`);
      await resetRequests();
      const loadBefore = loadavg()[0] ?? 0;
      const rss: number[] = [];
      const t = performance.now();
      const cpu = procCpuSeconds(pid);
      while (performance.now() - t < o.intervals * driftMs) {
        rss.push(procRssBytes(pid));
        await sleep(5_000);
      }
      const minutes = (performance.now() - t) / 60_000;
      const cpuPerMinute = (procCpuSeconds(pid) - cpu) / minutes;
      const rs = (await requests()).sort((a, b) => b.count - a.count);
      const lists = rs.filter((r) => `${r.method} ${r.route}` === KEY_LIST_ROUTE).reduce((s, r) => s + r.count, 0);
      const live = await liveHeap();
      await sleep(1_000);
      const rssAfterGc = procRssBytes(pid);
      log(
        `   RSS mean ${mb(rss.reduce((a, b) => a + b, 0) / rss.length)} MiB (max ${mb(Math.max(...rss))}), after a full GC ${mb(rssAfterGc)} MiB; live heap ${mb(live)} MiB; key lists ${lists} in ${fmt(minutes, 1)} min; CPU ${fmt(cpuPerMinute, 2)} s/min`,
      );
      return { load: [loadBefore, loadavg()[0] ?? 0], minutes, lists, requests: rs, rss, rssAfterGc, liveHeap: live, cpuPerMinute };
    };
    const without = await measure('without an inventory');

    log('an ApiKeyInventory of the organization on the same credentials');
    await resetRequests();
    const tInventory = performance.now();
    await objects.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: namespaces[0] as string,
      plural: 'apikeyinventories',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKeyInventory',
        metadata: { name: 'organization', namespace: namespaces[0] },
        spec: { organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } },
      },
    });
    type Status = {
      live?: number;
      managed?: number;
      notManaged?: number;
      unused?: number;
      notManagedKeys?: unknown[];
      conditions?: { type: string; status: string; reason: string; message: string }[];
    };
    let status: Status = {};
    for (;;) {
      status =
        (
          (await objects.getNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: namespaces[0] as string,
            plural: 'apikeyinventories',
            name: 'organization',
          })) as { status?: Status }
        ).status ?? {};
      if (status.live !== undefined) break;
      if (performance.now() - tInventory > 2 * driftMs + 60_000)
        throw new Error(`the inventory has no report after ${fmt((performance.now() - tInventory) / 1000)} s: ${JSON.stringify(status.conditions)}`);
      await sleep(500);
    }
    const reportS = (performance.now() - tInventory) / 1000;
    const firstLists = (await requests()).filter((r) => `${r.method} ${r.route}` === KEY_LIST_ROUTE).reduce((s, r) => s + r.count, 0);
    const ready0 = status.conditions?.find((c) => c.type === 'Ready');
    log(
      `   report after ${fmt(reportS, 1)} s: live ${status.live}, managed ${status.managed}, not managed ${status.notManaged}, unused ${status.unused}; Ready ${ready0?.status} ${ready0?.reason}; key lists meanwhile ${firstLists}`,
    );
    const counted = status.live === o.managed + o.others && status.managed === o.managed && status.notManaged === o.others;
    if (!counted)
      throw new Error(
        `the inventory counts ${JSON.stringify({ live: status.live, managed: status.managed, notManaged: status.notManaged })}, not ${o.managed} managed + ${o.others} others`,
      );
    const withInventory = await measure('with the inventory');
    inspector.close();

    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const routes = (w: Window) => w.requests.map((r) => `${r.method} ${r.route} ${fmt(r.count / w.minutes, 2)}`).join(', ') || 'none';
    const row = (label: string, a: string, b: string, note = '') => `| ${label} | ${a} | ${b} |${note ? ` ${note}` : ''}`;
    const perInterval = (w: Window) => fmt(w.lists / ((w.minutes * 60_000) / driftMs), 2);
    ok = true;
    return [
      `The operator (\`${OPERATOR_BUNDLE}\` with the image's node flags \`${nodeFlags.join(' ')}\`, \`--drift-interval=${o.driftInterval}\`) runs as its own process with the token of the deploy/base ServiceAccount; the local control plane and the emulator (its own process, \`:memory:\`, one organization with ${PROJECTS.length} projects) are on loopback. The organization holds ${fmt(o.others)} keys made directly on the platform (half project-scoped) and ${fmt(o.managed)} ProjectApiKeys the operator issued, in ${o.namespaces} namespaces whose credentials Secrets hold the same administrator's key (one drift list). The emulator has no switch for a faster creation rate and the operator paces at the platform's 10/s, so the keys were made at the real rate: all Ready ${fmt(convergedS)} s after they were applied. Each window below is ${o.intervals} drift intervals at rest (every key past its first drift pass); the inventory is applied between them and was Ready after ${fmt(reportS, 1)} s (live ${fmt(status.live ?? 0)}, managed ${fmt(status.managed ?? 0)}, not managed ${fmt(status.notManaged ?? 0)}, unused ${fmt(status.unused ?? 0)}). RSS from /proc/<pid>/status every 5 s; live heap through the operator's inspector (a full GC, then the heap used), and the RSS a second after that GC; platform requests as the emulator counts them.`,
      '',
      '| measurement | without an inventory | with the inventory |',
      '|---|---|---|',
      row(
        'operator RSS over the window: mean (min – max)',
        `**${mb(mean(without.rss))} MiB** (${mb(Math.min(...without.rss))} – ${mb(Math.max(...without.rss))})`,
        `**${mb(mean(withInventory.rss))} MiB** (${mb(Math.min(...withInventory.rss))} – ${mb(Math.max(...withInventory.rss))})`,
      ),
      row('RSS a second after a full GC, at the end of the window', `${mb(without.rssAfterGc)} MiB`, `${mb(withInventory.rssAfterGc)} MiB`),
      row(
        'live heap (after a full GC)',
        `${mb(without.liveHeap)} MiB`,
        `**${mb(withInventory.liveHeap)} MiB (${withInventory.liveHeap >= without.liveHeap ? '+' : ''}${mb(withInventory.liveHeap - without.liveHeap)})**`,
      ),
      row(
        `the organization's key list (\`${KEY_LIST_ROUTE}\`): requests / drift intervals`,
        `**${without.lists} in ${fmt(without.minutes, 1)} min (${perInterval(without)} per interval)**`,
        `**${withInventory.lists} in ${fmt(withInventory.minutes, 1)} min (${perInterval(withInventory)} per interval)**`,
      ),
      row('every platform request, per minute', routes(without), routes(withInventory)),
      row('operator CPU (shares the machine: see its load)', `${fmt(without.cpuPerMinute, 2)} s/min`, `${fmt(withInventory.cpuPerMinute, 2)} s/min`),
      row(
        "the machine's 1-minute load average at the start / end of the window",
        `${fmt(without.load[0], 1)} / ${fmt(without.load[1], 1)}`,
        `${fmt(withInventory.load[0], 1)} / ${fmt(withInventory.load[1], 1)}`,
      ),
      '',
      `Before any key: RSS ${mb(rss0)} MiB, live heap ${mb(live0)} MiB. Key lists from the inventory's creation to its first report: ${firstLists} (the list the drift checks took kept each key's use only; the inventory's first read takes it once more).`,
    ].join('\n');
  } finally {
    await operator?.stop(15_000);
    process.off('exit', killOperator);
    await emulator?.close().catch(() => undefined);
    await cp?.stop().catch(() => undefined);
    if (ok && process.env.BENCH_KEEP_DIR === undefined) rmSync(dir, { recursive: true, force: true });
    else log(`kept ${dir} (operator log, kubeconfig)`);
  }
}
