// Issue 24, attack 1: one tenant tries to make the shared operator run out of memory. The tenant may
// write ApiKeys and Secrets in its own namespace, and does: 120 Secrets of about 700 KiB each
// labelled managed-by the operator (84 MiB), an ApiKey with spec.secret.immutable whose credentials
// Secret has no entry (so no key is ever recorded, and every pass looks for the key's Secret among
// the managed ones), and that credentials Secret rewritten every 0.5 s for 30 s (each write wakes
// the resource). Before the fix the operator listed every managed Secret WITH its data on every
// pass, each write bought a pass, and its RSS went from 162 to 679 MiB in 33 s: OOM-killed under
// the chart's 256 MiB limit, then a crash loop.
//
// The operator runs as the Deployment runs it: its own process (the source entry point with the
// image's V8 flags, the ServiceAccount token of deploy/base: test/harness/operator-process.ts), its
// RSS sampled from /proc. It must stay under the chart's limit, never exit, and another team's key
// must still converge meanwhile. A real kube-apiserver + etcd, the emulator over HTTP.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { imageAllocatorEnv, imageNodeFlags, OperatorProcess } from '../harness/operator-process.ts';
import { createNamespace, customObjects, eventually, installOperatorManifests, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
/** The chart's memory limit (deploy/helm values.yaml, deploy/base). */
const LIMIT_MIB = 256;
const SECRETS = 120;
const SECRET_KIB = 700;
const REWRITE_EVERY_MS = 500;
const ATTACK_MS = 30_000;

interface Condition {
  type: string;
  status: string;
  reason: string;
  message?: string;
}
interface Resource {
  metadata: { finalizers?: string[] };
  status?: { keyId?: number; conditions?: Condition[] };
}

function rssMiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match === null ? Number.NaN : Number(match[1]) / 1024;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a tenant cannot make the operator run out of memory', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let core: CoreV1Api;
  let objects: CustomObjectsApi;
  let tenantNs: string;
  let victimNs: string;
  let scratch: string | undefined;
  let operator: OperatorProcess | undefined;
  let metricsPort = 0;
  const exits: string[] = [];

  const createKey = async (namespace: string, name: string, spec: Record<string, unknown>): Promise<void> => {
    await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'apikeys',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { name }, spec },
    });
  };
  const get = async (namespace: string, name: string): Promise<Resource> =>
    (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name })) as Resource;
  const ready = (namespace: string, name: string, timeoutMs: number): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(namespace, name);
        return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? r : undefined;
      },
      timeoutMs,
      `ApiKey ${namespace}/${name} Ready`,
    );
  /** reconcile_total of ApiKeys, from the operator's /metrics. */
  const reconciles = async (): Promise<number> => {
    const body = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    return body
      .split('\n')
      .filter((l) => l.startsWith('controller_runtime_reconcile_total{') && l.includes('controller="apikey"'))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    objects = customObjects(cp.kubeConfig);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    const aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    tenantNs = await createNamespace(cp, 'hostile');
    victimNs = await createNamespace(cp, 'victim');
    await core.createNamespacedSecret({ namespace: victimNs, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: aliceKey } } });

    const token = await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 1800);
    scratch = mkdtempSync(join(tmpdir(), 'nko-memory-'));
    const kubeconfig = join(scratch, 'kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(cp, token, 'operator'), { mode: 0o600 });
    metricsPort = await freePort();
    const healthPort = await freePort();
    operator = new OperatorProcess({
      // The image's V8 flags (the Dockerfile's ENTRYPOINT) and its malloc where this machine has it (imageAllocatorEnv).
      nodeFlags: imageNodeFlags(),
      args: [
        `--kubeconfig=${kubeconfig}`,
        `--platform-url=${emulator.baseUrl}`,
        `--watch-namespace=${tenantNs},${victimNs}`,
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${healthPort}`,
        '--drift-interval=60s',
      ],
      env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...imageAllocatorEnv().env },
      keep: 20_000,
    });
    void operator.exited.then(({ code, signal }) => exits.push(`exited (${code ?? signal})`));
    await operator.ready(healthPort, 60_000);
  }, 120_000);

  afterAll(async () => {
    // The resources go while the operator runs (their finalizers are its to remove) and while their
    // credentials are there (a namespace deleted first took the victim's credentials Secret with it,
    // and its keys waited for them: 30 s, then left behind), then the namespaces, then it stops.
    await Promise.all(
      [tenantNs, victimNs].map(async (ns) => {
        if (ns === undefined || objects === undefined) return;
        await objects.deleteCollectionNamespacedCustomObject({ group, version, namespace: ns, plural: 'apikeys' }).catch(() => undefined);
        if (operator?.child.exitCode !== null) return;
        await eventually(
          async () => {
            const left = (await objects.listNamespacedCustomObject({ group, version, namespace: ns, plural: 'apikeys' })) as { items: unknown[] };
            return left.items.length === 0 ? true : undefined;
          },
          30_000,
          `the ApiKeys of ${ns} gone`,
        ).catch(() => undefined);
      }),
    );
    for (const ns of [tenantNs, victimNs]) if (ns !== undefined) await core?.deleteNamespace({ name: ns }).catch(() => undefined);
    await operator?.stop(15_000);
    await emulator?.close();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  }, 90_000);

  it("120 managed-labelled Secrets of 700 KiB and a credentials Secret rewritten every 0.5 s: RSS stays under 256 MiB, the operator never exits, another team's key converges", async () => {
    const pid = operator?.pid;
    if (pid === undefined) throw new Error('no operator process');
    // Another team's key, Ready before the attack.
    await createKey(victimNs, 'before', { scope: 'Personal', keyName: 'before', credentialsSecretRef: { name: 'neon-admin' } });
    await ready(victimNs, 'before', 30_000);
    await sleep(2_000);
    const rssBefore = rssMiB(pid);

    // The tenant's Secrets: 120 × 700 KiB, labelled as the operator's.
    const payload = randomBytes(SECRET_KIB * 1024).toString('base64');
    for (let i = 0; i < SECRETS; i += 8) {
      await Promise.all(
        Array.from({ length: Math.min(8, SECRETS - i) }, (_, j) =>
          core.createNamespacedSecret({
            namespace: tenantNs,
            body: { metadata: { name: `bulk-${i + j}`, labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator' } }, data: { blob: payload } },
          }),
        ),
      );
    }
    // The credentials Secret without the entry, and an immutable-mode ApiKey naming it.
    await core.createNamespacedSecret({ namespace: tenantNs, body: { metadata: { name: 'creds' }, stringData: { other: 'x' } } });
    await createKey(tenantNs, 'hostile', { scope: 'Personal', keyName: 'hostile', credentialsSecretRef: { name: 'creds' }, secret: { immutable: true } });
    await eventually(
      async () => {
        const r = await get(tenantNs, 'hostile');
        return r.status?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'CredentialsMissing') === true ? r : undefined;
      },
      30_000,
      'the hostile ApiKey blocked on its credentials',
    );

    // The storm: the credentials rewritten every 0.5 s for 30 s; RSS sampled every 200 ms.
    const samples: number[] = [];
    const sampler = setInterval(() => {
      if (operator?.child.exitCode === null) samples.push(rssMiB(pid));
    }, 200);
    const reconcilesBefore = await reconciles();
    const started = Date.now();
    let writes = 0;
    // The storm lasts its 30 s and, on a slow machine, until the victim is Ready: the victim
    // converges while it goes on, however long that takes (a victim starved by it never would).
    let victimReady = false;
    let victimWaiting = false;
    let writesWhileVictimWaited = 0;
    const storm = (async (): Promise<void> => {
      while (Date.now() - started < ATTACK_MS || !victimReady) {
        const at = Date.now();
        await core.replaceNamespacedSecret({
          namespace: tenantNs,
          name: 'creds',
          body: { metadata: { name: 'creds' }, data: { other: Buffer.from(randomBytes(16).toString('hex')).toString('base64') } },
        });
        writes += 1;
        if (victimWaiting) writesWhileVictimWaited += 1;
        await sleep(Math.max(0, REWRITE_EVERY_MS - (Date.now() - at)));
      }
    })();
    // Meanwhile another team's new key converges, once the storm is under way (its 10th write).
    await eventually(async () => (writes >= 10 ? true : undefined), 200_000, 'the storm under way');
    const victimStarted = Date.now();
    victimWaiting = true;
    await createKey(victimNs, 'during', { scope: 'Personal', keyName: 'during', credentialsSecretRef: { name: 'neon-admin' } });
    await ready(victimNs, 'during', 200_000);
    victimWaiting = false;
    victimReady = true;
    const victimReadyMs = Date.now() - victimStarted;
    await storm;
    await sleep(2_000);
    clearInterval(sampler);
    const stormReconciles = (await reconciles()) - reconcilesBefore;
    const maxRss = Math.max(...samples);
    console.log(
      `operator RSS: ${rssBefore.toFixed(1)} MiB before the attack, max ${maxRss.toFixed(1)} MiB during it (${samples.length} samples), ` +
        `${rssMiB(pid).toFixed(1)} MiB after; ${writes} credentials writes in ${ATTACK_MS / 1000} s, ${stormReconciles} ApiKey reconciles meanwhile; ` +
        `another team's new key Ready in ${victimReadyMs} ms (${writesWhileVictimWaited} writes meanwhile)`,
    );

    expect(exits).toEqual([]);
    expect(operator?.child.exitCode).toBeNull();
    expect(samples.length).toBeGreaterThan(100);
    expect(maxRss).toBeLessThan(LIMIT_MIB);
    // The writes did not buy a pass each: a burst, then at most one per 5 s (runtime/wake-limiter.ts),
    // plus the refusal backoff's own retries and the victim's passes.
    expect(writes).toBeGreaterThanOrEqual(40);
    expect(stormReconciles).toBeLessThan(writes / 2);
    // The attacker's resource is still blocked, saying why; the victim's first key untouched.
    const hostile = await get(tenantNs, 'hostile');
    expect(hostile.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'CredentialsMissing' });
    expect((await ready(victimNs, 'before', 5_000)).status?.keyId).toBeDefined();
  }, 420_000);
});
