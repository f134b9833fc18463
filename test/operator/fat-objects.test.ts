// Issue 41, "fat objects": a tenant makes 40 ApiKeys of about 1 MiB each (annotations up to the
// apiserver's 256 KiB, then as many labels as the object's limit leaves room for) whose credentials
// Secret is missing, so no key is ever issued. The operator starts beside them (a rollout, a leader
// change, a restart after a crash): its LIST takes every ApiKey at once, and it reconciles each.
// Then its watch is told 410 Gone, as the apiserver says when a watch cannot resume, and it
// relists. Both must fit the
// chart's 256 MiB limit, held for real: the operator runs in a memory cgroup of that size (where
// one can be made: root, cgroup v2 or v1), its peak RSS (VmHWM, kept by the kernel) read from /proc.
//
// The 410 comes from a loopback TLS proxy in front of the real kube-apiserver (a named fake: it
// forwards every request as is, and on demand ends the operator's watches of those kinds with the ERROR
// event the apiserver sends for an expired version); the relist behind it is the real apiserver's.
//
// In CI: 40 ApiKeys. FAT_OBJECTS_COUNT=200 FAT_OBJECTS_EVERY_KIND=1 makes as many of every kind the
// operator lists (ProjectApiKeys, ApiKeyInventories, Secrets of fat metadata too): the larger run
// whose figures are in docs/reliability.md, too long for CI.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpsRequest, Agent, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { memoryCage, processMemory, type MemoryCage } from '../../chaos/hostile/memory.ts';
import { freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, eventually, installOperatorManifests, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, root } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const MIB = 1024 * 1024;
/** The chart's memory limit (deploy/helm values.yaml, deploy/base). */
const LIMIT_MIB = 256;
/** How many of each kind (FAT_OBJECTS_COUNT: a larger run, docs/reliability.md). */
const COUNT = Number(process.env.FAT_OBJECTS_COUNT ?? 40);
/**
 * The kinds made fat: ApiKeys in CI (the reproduced case); FAT_OBJECTS_EVERY_KIND=1 adds as many
 * ProjectApiKeys, ApiKeyInventories (their credentials missing too) and Secrets of fat metadata.
 */
const EVERY_KIND = process.env.FAT_OBJECTS_EVERY_KIND === '1';
/** The image's V8 flags (the Dockerfile's ENTRYPOINT). */
const IMAGE_NODE_FLAGS = ['--max-semi-space-size=4', '--optimize-for-size'];

interface Condition { type: string; status: string; reason: string }
interface Resource { metadata: { name: string }; status?: { conditions?: Condition[] } }

/**
 * An ApiKey of about 1.1 MiB as the apiserver sends it: 250 KiB of annotations (the limit is 256
 * KiB), 1,200 labels of about 400 bytes (each named again in managedFields), room left under etcd's
 * 1.5 MiB for the rest.
 */
function fatMetadata(name: string): Record<string, unknown> {
  const labels: Record<string, string> = {};
  // A label's prefix is a DNS subdomain (labels of at most 63 characters, 253 in all), its name at most 63.
  const prefix = ['p', 'q', 'r'].map((c) => c.repeat(60)).join('.');
  for (let i = 0; i < 1_200; i++) labels[`l${i}.${prefix}.${'s'.repeat(40)}.example/${'n'.repeat(60)}`] = 'v'.repeat(63);
  return { name, labels, annotations: { 'example.com/pad': 'a'.repeat(250 * 1024) } };
}

/** Each kind made fat: its plural, and its body (the key kinds and inventories name credentials that do not exist). */
const FAT_KINDS = {
  ApiKey: { plural: 'apikeys', spec: (name: string) => ({ scope: 'Personal', keyName: name, credentialsSecretRef: { name: 'absent' } }) },
  ProjectApiKey: { plural: 'projectapikeys', spec: (name: string) => ({ organizationId: 'org-fat', projectId: 'fat-project-1', keyName: name, credentialsSecretRef: { name: 'absent' } }) },
  ApiKeyInventory: { plural: 'apikeyinventories', spec: () => ({ scope: 'Personal', credentialsSecretRef: { name: 'absent' } }) },
} as const;
type FatKind = keyof typeof FAT_KINDS;

function fatObject(kind: FatKind, name: string): Record<string, unknown> {
  return { apiVersion: `${group}/${version}`, kind, metadata: fatMetadata(name), spec: FAT_KINDS[kind].spec(name) };
}

/** The loopback proxy: every request forwarded; expire() ends the watches of the fat kinds open through it with a 410. */
class ExpiringProxy {
  readonly #server: Server;
  readonly #upstream: URL;
  readonly #agent: Agent;
  readonly #watches = new Set<ServerResponse>();
  expired = 0;

  readonly #watched: RegExp;

  /** `watched`: the paths of the watches expire() ends. */
  constructor(upstream: string, tls: { cert: string; key: string; ca: string }, watched: RegExp) {
    this.#upstream = new URL(upstream);
    this.#watched = watched;
    this.#agent = new Agent({ keepAlive: true, ca: tls.ca });
    this.#server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => this.#forward(req, res));
  }

  async listen(): Promise<string> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    return `https://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Ends every such watch open now with the apiserver's 410 ERROR event; how many. */
  expire(): number {
    const status = { type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 } };
    const open = [...this.#watches];
    for (const res of open) res.end(`${JSON.stringify(status)}\n`);
    this.#watches.clear();
    this.expired += open.length;
    return open.length;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    this.#server.close();
    this.#agent.destroy();
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.#upstream);
    const watch = url.searchParams.get('watch') === 'true' && this.#watched.test(url.pathname);
    // Plain bodies (no gzip): a 410 can be written into a watch's stream.
    const headers = { ...req.headers, host: this.#upstream.host };
    delete headers['accept-encoding'];
    const upstream = httpsRequest(url, { method: req.method, headers, agent: this.#agent }, (answer: IncomingMessage) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (watch && answer.statusCode === 200) {
        this.#watches.add(res);
        res.once('close', () => { this.#watches.delete(res); answer.destroy(); });
        answer.on('data', (chunk: Buffer) => { if (this.#watches.has(res)) res.write(chunk); });
        answer.once('end', () => { if (this.#watches.delete(res)) res.end(); });
        return;
      }
      // An answer the apiserver cuts short (its request timeout) is cut short here too, not left open.
      answer.once('aborted', () => res.destroy());
      answer.once('error', () => res.destroy());
      answer.pipe(res);
    });
    upstream.once('error', () => res.destroy());
    req.pipe(upstream);
  }
}

describe('a tenant\'s ApiKeys of 1 MiB each do not take the operator over its memory limit', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;
  let scratch: string;
  let proxy: ExpiringProxy;
  let cage: MemoryCage;
  const operators: ChildProcess[] = [];

  /** Starts an operator process (inside the cage) watching the tenant's namespace through `server`. */
  const startOperator = async (server: string): Promise<{ child: ChildProcess; metrics: string; health: string; log: () => string }> => {
    const token = await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 1800);
    const kubeconfig = join(scratch, `kubeconfig-${operators.length}`);
    writeFileSync(kubeconfig, kubeconfigYaml({ server, caData: cp.caData }, token, 'operator'), { mode: 0o600 });
    const metricsPort = await freePort();
    const healthPort = await freePort();
    const argv = cage.wrap([process.execPath, ...IMAGE_NODE_FLAGS, join(root, 'src/operator/main.ts'),
      `--kubeconfig=${kubeconfig}`, `--platform-url=${emulator.baseUrl}`, `--watch-namespace=${namespace}`,
      `--metrics-bind-address=127.0.0.1:${metricsPort}`, `--health-probe-bind-address=127.0.0.1:${healthPort}`, '--drift-interval=60s']);
    const child = spawn(argv[0] ?? '', argv.slice(1), { env: { PATH: process.env.PATH, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => { log = (log + chunk).slice(-20_000); });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { log = (log + chunk).slice(-20_000); });
    operators.push(child);
    return { child, metrics: `http://127.0.0.1:${metricsPort}/metrics`, health: `http://127.0.0.1:${healthPort}`, log: () => log };
  };
  const stopOperator = async (child: ChildProcess): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  const counter = async (metrics: string, name: string, label: string): Promise<number> => {
    const body = await (await fetch(metrics)).text();
    return body.split('\n').filter((l) => l.startsWith(`${name}{`) && l.includes(label)).reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };
  /** The operator's gauge of its keys whose Ready is False for missing credentials, in the tenant's namespace (from its cache). */
  const blockedGauge = async (metrics: string, kind: FatKind): Promise<number> => {
    const body = await (await fetch(metrics)).text();
    return body.split('\n').filter((l) => l.startsWith('neon_key_operator_managed_keys{') && l.includes(`namespace="${namespace}"`) && l.includes(`kind="${kind}"`) && l.includes('condition="Ready"') && l.includes('reason="CredentialsMissing"'))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };
  /** The same, read from the apiserver, once, page by page. */
  const blocked = async (): Promise<number> => {
    let n = 0;
    let next: string | undefined;
    do {
      const page = await objects.listNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', limit: 5, ...(next !== undefined ? { _continue: next } : {}) }) as { items: Resource[]; metadata?: { continue?: string } };
      n += page.items.filter((r) => r.status?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'CredentialsMissing') === true).length;
      next = page.metadata?.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
    } while (next !== undefined);
    return n;
  };
  /** The process's peak RSS since it started (or since resetPeak()), MiB. */
  const peakMiB = (pid: number): number => (processMemory(pid)?.peak ?? Number.NaN) / MIB;
  const resetPeak = (pid: number): void => writeFileSync(`/proc/${pid}/clear_refs`, '5');

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    namespace = await createNamespace(cp, 'fat');
    scratch = mkdtempSync(join(tmpdir(), 'nko-fat-'));
    const certs = join(cp.dir, 'certs');
    proxy = new ExpiringProxy(cp.server, { cert: readFileSync(join(certs, 'apiserver.crt'), 'utf8'), key: readFileSync(join(certs, 'apiserver.key'), 'utf8'), ca: Buffer.from(cp.caData, 'base64').toString('utf8') },
      EVERY_KIND ? /\/(apikeys|projectapikeys|apikeyinventories|secrets)$/ : /\/apikeys$/);
    // FAT_OBJECTS_CAGE=off: no cgroup, the peak only measured (to see how far over the limit a change goes).
    cage = memoryCage(LIMIT_MIB * MIB, process.env.FAT_OBJECTS_CAGE !== 'off');
  }, 60_000);

  afterAll(async () => {
    // Nothing was issued, so nothing needs revoking: the operators stop, their finalizers are lifted here, and everything goes with the namespace.
    await Promise.all(operators.map(stopOperator));
    for (const { plural } of Object.values(FAT_KINDS)) {
      for (let i = 0; i < COUNT; i++) {
        await objects?.patchNamespacedCustomObject({ group, version, namespace, plural, name: `fat-${i}`, body: { metadata: { finalizers: null } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch)).catch(() => undefined);
      }
    }
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await proxy?.close();
    await emulator?.close();
    cage?.remove();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  }, EVERY_KIND || COUNT > 40 ? 900_000 : 120_000);

  const kinds: FatKind[] = EVERY_KIND ? ['ApiKey', 'ProjectApiKey', 'ApiKeyInventory'] : ['ApiKey'];
  const what = `${COUNT} ${EVERY_KIND ? 'ApiKeys, ProjectApiKeys, ApiKeyInventories and Secrets' : 'ApiKeys'} of ~1 MiB`;

  it(`${what} whose credentials are missing: an operator started beside them, and its relist after a 410, stay under 256 MiB and are ready`, async () => {
    console.log(`memory limit: ${cage.how}`);
    console.log(`one ApiKey as sent: ${(JSON.stringify(fatObject('ApiKey', 'fat-0')).length / MIB).toFixed(2)} MiB before managedFields`);
    // They are there before the operator starts, as after a rollout or a leader change.
    const creates: (() => Promise<unknown>)[] = [];
    for (let i = 0; i < COUNT; i++) {
      for (const kind of kinds) creates.push(() => objects.createNamespacedCustomObject({ group, version, namespace, plural: FAT_KINDS[kind].plural, body: fatObject(kind, `fat-${i}`) }));
      if (EVERY_KIND) creates.push(() => core.createNamespacedSecret({ namespace, body: { metadata: fatMetadata(`fat-${i}`), data: { blob: Buffer.alloc(64 * 1024).toString('base64') } } }));
    }
    for (let i = 0; i < creates.length; i += 4) await Promise.all(creates.slice(i, i + 4).map((create) => create()));

    // The start: the process LISTs every kind, through the proxy.
    const operator = await startOperator(await proxy.listen());
    const pid = operator.child.pid ?? 0;
    await eventually(async () => ((await fetch(`${operator.health}/readyz`)).ok ? true : undefined), 300_000, `the operator ready: ${operator.log().slice(-2_000)}`);
    // Every resource looked at once since the start (its reconcile counted), the keys blocked on their credentials.
    for (const kind of kinds) await eventually(async () => ((await counter(operator.metrics, 'neon_key_operator_reconcile_total', `kind="${kind}"`)) >= COUNT ? true : undefined), 300_000, `every ${kind} reconciled after the start`);
    for (const kind of kinds.filter((k) => k !== 'ApiKeyInventory')) await eventually(async () => ((await blockedGauge(operator.metrics, kind)) === COUNT ? true : undefined), 300_000, `the ${COUNT} ${kind}s blocked on their credentials`);
    const restartPeak = peakMiB(pid);

    // The relist: the watches of those kinds expire (410), each LISTs again.
    resetPeak(pid);
    const listed = [...kinds, ...EVERY_KIND ? ['Secret'] : []];
    const lists = await Promise.all(listed.map((kind) => counter(operator.metrics, 'neon_key_operator_informer_lists_total', `resource="${kind}"`)));
    await eventually(async () => (proxy.expire() >= listed.length ? true : undefined), 30_000, 'the watches open through the proxy');
    for (const [k, kind] of listed.entries()) {
      await eventually(async () => ((await counter(operator.metrics, 'neon_key_operator_informer_lists_total', `resource="${kind}"`)) > (lists[k] ?? 0) ? true : undefined), 300_000, `the relist of ${kind} after the 410`);
    }
    await eventually(async () => ((await fetch(`${operator.health}/readyz`)).ok ? true : undefined), 120_000, 'the operator ready after the relist');
    const relistPeak = peakMiB(pid);
    console.log(`peak RSS with ${what}: ${restartPeak.toFixed(1)} MiB from the start until every one was reconciled; `
      + `${relistPeak.toFixed(1)} MiB around the relist after a 410 (${cage.enforced ? `cgroup peak ${((cage.peakBytes() ?? 0) / MIB).toFixed(1)} MiB, OOM kills ${cage.oomKills()}` : 'no cgroup'})`);

    expect(operator.child.exitCode).toBeNull();
    expect(cage.oomKills()).toBe(0);
    expect(restartPeak).toBeLessThan(LIMIT_MIB);
    expect(relistPeak).toBeLessThan(LIMIT_MIB);
    expect(await blocked()).toBe(COUNT);
  }, EVERY_KIND || COUNT > 40 ? 3_600_000 : 600_000);
});
