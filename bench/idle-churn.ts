// Idle with churn (`--only idle-churn [--idle-churn-minutes 30]`, issue 30): the operator at rest in
// its namespace while Secrets churn in another one. Its informers must never relist (no 410: the
// bookmarks keep each watch's version inside the apiserver's window) and /readyz must never fail.
//
// Two operators run side by side in this process, over the same control plane and the same churn,
// each watching a namespace of its own with the same keys: one with the informers as shipped
// (runtime/reflector.ts defaults: bookmarks, a 5-10 min server-side timeout), one as client-node's
// ListWatch ran them before issue 30 (no bookmarks; a watch dropped after 30 s without data and
// resumed from the version of the last change it saw). Only the informers differ.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { startEmulator } from '../src/emulator/server.ts';
import { createMetrics, type OperatorMetrics } from '../src/operator/keys/status/metrics.ts';
import { startOperator, type OperatorOptions, type RunningOperator } from '../src/operator/manager.ts';
import { Manager } from '../src/operator/runtime/manager.ts';
import { startControlPlane, type RunningControlPlane } from '../test/harness/controlplane.ts';
import type { BenchOptions } from './options.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const KEYS = 10;
/** Secret writes in the churn namespace per second. */
const CHURN_PER_SECOND = 5;

interface Contender {
  name: string;
  namespace: string;
  informers: OperatorOptions['informers'];
  metrics: OperatorMetrics;
  operator?: RunningOperator;
  manager?: Manager;
  notReady: { at: number; reasons: string[] }[];
  samples: number;
}

async function counter(metrics: OperatorMetrics, name: string): Promise<Map<string, number>> {
  const values = (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  return new Map(values.map((v) => [Object.values(v.labels).join('/'), v.value]));
}

function diff(before: Map<string, number>, after: Map<string, number>): string {
  const parts = [...after]
    .map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k} ${v}`);
  return parts.length === 0 ? 'none' : parts.join(', ');
}

export async function idleChurnBenchmark(opts: BenchOptions, minutes: number): Promise<string> {
  const { log } = opts;
  const dir = mkdtempSync(join(tmpdir(), 'nko-bench-idle-churn-'));
  let cp: RunningControlPlane | undefined;
  let emulator: Awaited<ReturnType<typeof startEmulator>> | undefined;
  const contenders: Contender[] = [
    {
      name: 'as shipped (bookmarks, 5-10 min watches)',
      namespace: 'idle-shipped',
      informers: {},
      metrics: createMetrics(new Registry(), { defaultMetrics: false }),
      notReady: [],
      samples: 0,
    },
    {
      name: 'as before issue 30 (no bookmarks, dropped after 30 s of silence)',
      namespace: 'idle-before',
      informers: { bookmarks: false, inactivityMs: 30_000 },
      metrics: createMetrics(new Registry(), { defaultMetrics: false }),
      notReady: [],
      samples: 0,
    },
  ];
  let churning = true;
  try {
    const binDir = await new Promise<string>((resolve, reject) =>
      execFile('bash', [join(ROOT, 'test/controlplane/build.sh')], { encoding: 'utf8' }, (err, stdout) =>
        err === null ? resolve(stdout.trim()) : reject(err),
      ),
    );
    log('idle-churn: starting control plane');
    cp = await startControlPlane({ binDir });
    const info = cp.info;
    const kubectl = (args: string[]): Promise<string> =>
      new Promise((resolve, reject) => {
        execFile(
          join(binDir, 'kubectl'),
          args,
          { encoding: 'utf8', env: { ...process.env, KUBECONFIG: info.kubeconfigPath, HOME: '/tmp' } },
          (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`kubectl ${args.join(' ')}: ${stderr.trim() || err.message}`))),
        );
      });
    await kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=bench', '-f', join(ROOT, 'crds')]);
    await kubectl(['wait', '--for=condition=Established', 'crd/apikeys.keys.neon.dev', 'crd/projectapikeys.keys.neon.dev', '--timeout=60s']);
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const objects = kc.makeApiClient(CustomObjectsApi);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    const org = emulator.bootstrap.organizations[0]?.id ?? '';
    const adminKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    await core.createNamespace({ body: { metadata: { name: 'churn' } } });
    const silent = pino({ level: 'warn' });
    for (const c of contenders) {
      await core.createNamespace({ body: { metadata: { name: c.namespace } } });
      await core.createNamespacedSecret({ namespace: c.namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: adminKey } } });
      for (let i = 0; i < KEYS; i++) {
        await objects.createNamespacedCustomObject({
          group: 'keys.neon.dev',
          version: 'v1alpha1',
          namespace: c.namespace,
          plural: 'apikeys',
          body: {
            apiVersion: 'keys.neon.dev/v1alpha1',
            kind: 'ApiKey',
            metadata: { name: `key-${i}` },
            spec: { scope: 'Organization', organizationId: org, keyName: `${c.namespace}-${i}`, credentialsSecretRef: { name: 'neon-admin' } },
          },
        });
      }
      const operatorKc = new KubeConfig();
      operatorKc.loadFromFile(info.kubeconfigPath);
      c.manager = new Manager({
        kubeConfig: operatorKc,
        logger: silent,
        registry: c.metrics.registry,
        start: async () => {
          c.operator = await startOperator({
            kubeConfig: operatorKc,
            platformBaseUrl: emulator!.baseUrl,
            namespaces: [c.namespace],
            workers: 4,
            signingKey: Buffer.alloc(32, 7),
            logger: silent,
            metrics: c.metrics,
            identity: `idle-${c.namespace}`,
            ...(c.informers !== undefined ? { informers: c.informers } : {}),
          });
          return c.operator;
        },
        exit: () => undefined,
      });
      await c.manager.run();
    }
    // Every key Ready before the idle phase.
    const deadline = Date.now() + 120_000;
    for (const c of contenders) {
      for (;;) {
        const list = (await objects.listNamespacedCustomObject({ group: 'keys.neon.dev', version: 'v1alpha1', namespace: c.namespace, plural: 'apikeys' })) as {
          items: { status?: { conditions?: { type: string; status: string }[] } }[];
        };
        if (list.items.filter((r) => r.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True')).length === KEYS) break;
        if (Date.now() > deadline) throw new Error(`${c.namespace}: keys not Ready in time`);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
    log(`idle-churn: ${KEYS} keys Ready in each namespace; idle for ${minutes} min with ${CHURN_PER_SECOND} Secret writes/s in namespace churn`);
    const before = await Promise.all(
      contenders.map(async (c) => ({
        lists: await counter(c.metrics, 'neon_key_operator_informer_lists_total'),
        restarts: await counter(c.metrics, 'neon_key_operator_watch_restarts_total'),
      })),
    );
    // The churn: Secrets in another namespace created, updated and deleted, round after round.
    let writes = 0;
    let writeErrors = 0;
    const churn = (async () => {
      let i = 0;
      while (churning) {
        const name = `churn-${i % 20}`;
        const round = Math.floor(i / 20) % 3;
        try {
          if (round === 0) await core.createNamespacedSecret({ namespace: 'churn', body: { metadata: { name }, stringData: { v: String(i) } } });
          else if (round === 1) await core.replaceNamespacedSecret({ namespace: 'churn', name, body: { metadata: { name }, stringData: { v: String(i) } } });
          else await core.deleteNamespacedSecret({ namespace: 'churn', name });
          writes++;
        } catch {
          writeErrors++;
        }
        i++;
        await new Promise((resolve) => setTimeout(resolve, 1_000 / CHURN_PER_SECOND));
      }
    })();
    const started = Date.now();
    const end = started + minutes * 60_000;
    let nextReport = started + 60_000;
    while (Date.now() < end) {
      for (const c of contenders) {
        const r = await c.manager!.readyz();
        c.samples++;
        if (!r.ok) c.notReady.push({ at: Date.now() - started, reasons: r.reasons ?? [] });
      }
      if (Date.now() >= nextReport) {
        nextReport += 60_000;
        const lists = await Promise.all(
          contenders.map(async (c, k) => diff(before[k]!.lists, await counter(c.metrics, 'neon_key_operator_informer_lists_total'))),
        );
        log(
          `idle-churn: ${((Date.now() - started) / 60_000).toFixed(0)} min, ${writes} churn writes; relists: ${contenders.map((c, k) => `${c.namespace} ${lists[k]}`).join('; ')}; not ready: ${contenders.map((c) => `${c.namespace} ${c.notReady.length}`).join(', ')}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    churning = false;
    await churn;
    const rows: string[] = [];
    for (const [k, c] of contenders.entries()) {
      const lists = diff(before[k]!.lists, await counter(c.metrics, 'neon_key_operator_informer_lists_total'));
      const restarts = diff(before[k]!.restarts, await counter(c.metrics, 'neon_key_operator_watch_restarts_total'));
      const reasons = [...new Set(c.notReady.flatMap((n) => n.reasons))];
      rows.push(
        `| ${c.name} | ${lists} | ${restarts} | ${c.notReady.length} of ${c.samples}${reasons.length > 0 ? ` (${reasons.slice(0, 3).join('; ')})` : ''} |`,
      );
    }
    return [
      `${minutes} min idle: ${KEYS} Ready ApiKeys in each operator's namespace, nothing changes there; meanwhile ${writes.toLocaleString('en-US')} Secret writes (create, replace, delete; ${CHURN_PER_SECOND}/s${writeErrors > 0 ? `, ${writeErrors} refused` : ''}) in another namespace, which move the Secrets' resourceVersion on. Two operators in one process (each its own namespace, the default drift interval of 5 min), the local control plane (its apiserver's default watch cache). /readyz is the manager's readiness, sampled every second.`,
      '',
      '| informers | LISTs after the start (relists, by resource) | watch restarts (resource/reason) | /readyz not ready |',
      '|---|---|---|---|',
      ...rows,
    ].join('\n');
  } finally {
    churning = false;
    for (const c of contenders) await c.operator?.stop().catch(() => undefined);
    await emulator?.close().catch(() => undefined);
    await cp?.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
