// Issue 41, "fat objects": a tenant makes objects near the apiserver's size limit of every kind the
// operator lists: 40 ApiKeys, 40 ProjectApiKeys and 40 ApiKeyInventories of about 1.3 MiB as stored
// (annotations up to the apiserver's 256 KiB, then 1,700 labels: etcd takes about 1.5 MiB) whose
// credentials Secret is missing, so no key is ever issued, and 40 Secrets of about 1 MiB of metadata.
// The operator starts beside them (a rollout, a leader change, a restart after a crash): its LISTs
// take every object at once, and it reconciles each. Then its watches are told 410 Gone, as the
// apiserver says when a watch cannot resume, and it relists. Both must fit the
// chart's 256 MiB limit, held for real: the operator runs in a memory cgroup of that size (where
// one can be made: root, cgroup v2 or v1), its peak RSS (VmHWM, kept by the kernel) read from /proc.
//
// The 410 comes from a loopback TLS proxy in front of the real kube-apiserver (a named fake: it
// forwards every request as is, and on demand ends the operator's watches of those kinds with the ERROR
// event the apiserver sends for an expired version); the relist behind it is the real apiserver's.
//
// The other kind the operator lists is a namespace's workloads, for a rotation's restart.discover:
// 100 Deployments of about 1.3 MiB (the same metadata) beside an ApiKey that rotates with discover,
// some of them consenting to the restart. The test control plane runs the deployment and
// replicaset controllers (no kubelet): Deployments of 0 replicas complete their rollouts, so the
// rotation runs to its end.
//
// In CI: 40 of each kind and 100 Deployments. FAT_OBJECTS_COUNT=200 FAT_OBJECTS_EVERY_KIND=1 makes 200
// of each kind and 200 Deployments: the larger run whose figures are in docs/reliability.md, too long
// for CI. FAT_OBJECTS_EVERY_KIND=0 makes the ApiKeys only (a quicker run by hand).
import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpsRequest, Agent, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { AppsV1Api, PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { memoryCage, processMemory, type MemoryCage } from '../../chaos/hostile/memory.ts';
import { freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { imageAllocatorEnv, imageNodeFlags, OperatorProcess } from '../harness/operator-process.ts';
import { restartAnnotation } from '../../src/operator/keys/rotation/consumers.ts';
import { controllerName } from '../../src/operator/runtime/metrics.ts';
import { emulatorAdmin, eventually, intentSettled, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT } from './support.ts';
import { type Condition, group, operatorSuite, PLURALS, version } from './fixture.ts';

const MIB = 1024 * 1024;
/** The chart's memory limit (deploy/helm values.yaml, deploy/base). */
const LIMIT_MIB = 256;
/** How many of each kind (FAT_OBJECTS_COUNT: a larger run, docs/reliability.md). */
const COUNT = Number(process.env.FAT_OBJECTS_COUNT ?? 40);
/**
 * The kinds made fat: every kind the operator lists (ApiKeys, ProjectApiKeys, ApiKeyInventories with
 * their credentials missing, Secrets of fat metadata); FAT_OBJECTS_EVERY_KIND=0: the ApiKeys only.
 */
const EVERY_KIND = process.env.FAT_OBJECTS_EVERY_KIND !== '0';
/** The Deployments beside the rotation with discover: 100, or FAT_OBJECTS_COUNT when larger. */
const DEPLOYMENTS = Math.max(100, COUNT);
/** The labels of an object near the size limit (about 1.3 MiB as stored with managedFields), and of a Secret of about 1 MiB. */
const LABELS_NEAR_LIMIT = 1_700;
const LABELS_SECRET = 1_200;
/** A larger run's cleanup and cases take longer than CI's (jest's timeouts only; the waits below are on events and counts). */
const LARGER = COUNT > 40;
/** How long one wait below may take before the case fails with what it waited for. */
const WAIT_MS = LARGER ? 3_600_000 : 600_000;
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Resource {
  metadata: { name: string };
  status?: { conditions?: Condition[] };
}

/**
 * Metadata of about 1.3 MiB as the apiserver stores it (`labels` 1,700): 250 KiB of annotations (the
 * limit is 256 KiB), labels of about 400 bytes (each named again in managedFields), room left under
 * etcd's 1.5 MiB for the rest and the operator's writes. 1,200 labels: about 1 MiB.
 */
function fatMetadata(name: string, labelCount: number): { name: string; labels: Record<string, string>; annotations: Record<string, string> } {
  const labels: Record<string, string> = {};
  // A label's prefix is a DNS subdomain (labels of at most 63 characters, 253 in all), its name at most 63.
  const prefix = ['p', 'q', 'r'].map((c) => c.repeat(60)).join('.');
  for (let i = 0; i < labelCount; i++) labels[`l${i}.${prefix}.${'s'.repeat(40)}.example/${'n'.repeat(60)}`] = 'v'.repeat(63);
  return { name, labels, annotations: { 'example.com/pad': 'a'.repeat(250 * 1024) } };
}

/** Each kind made fat: its spec (the key kinds and inventories name credentials that do not exist). */
const FAT_SPECS = {
  ApiKey: (name: string) => ({ scope: 'Personal', keyName: name, credentialsSecretRef: { name: 'absent' } }),
  ProjectApiKey: (name: string) => ({ organizationId: 'org-fat', projectId: 'fat-project-1', keyName: name, credentialsSecretRef: { name: 'absent' } }),
  ApiKeyInventory: () => ({ scope: 'Personal', credentialsSecretRef: { name: 'absent' } }),
} as const;
type FatKind = keyof typeof FAT_SPECS;

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
    const status = {
      type: 'ERROR',
      object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 },
    };
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
        res.once('close', () => {
          this.#watches.delete(res);
          answer.destroy();
        });
        answer.on('data', (chunk: Buffer) => {
          if (this.#watches.has(res)) res.write(chunk);
        });
        answer.once('end', () => {
          if (this.#watches.delete(res)) res.end();
        });
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

describe("a tenant's objects near the size limit, of every kind the operator lists, do not take it over its memory limit", () => {
  let apps: AppsV1Api;
  let namespace: string;
  let discoverNamespace: string | undefined;
  let scratch: string;
  let proxy: ExpiringProxy;
  let cage: MemoryCage;
  const operators: OperatorProcess[] = [];

  /** Starts an operator process (inside the cage) watching `watched` through `server`. */
  const startOperator = async (
    server: string,
    watched: string,
    flags: string[] = [],
  ): Promise<{ process: OperatorProcess; metrics: string; healthPort: number; log: () => string }> => {
    const token = await suite.cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 1800);
    const kubeconfig = join(scratch, `kubeconfig-${operators.length}`);
    writeFileSync(kubeconfig, kubeconfigYaml({ server, caData: suite.cp.caData }, token, 'operator'), { mode: 0o600 });
    const metricsPort = await freePort();
    const healthPort = await freePort();
    const operator = new OperatorProcess({
      // The image's V8 flags (the Dockerfile's ENTRYPOINT) and its malloc where this machine has it (imageAllocatorEnv).
      nodeFlags: imageNodeFlags(),
      args: [
        `--kubeconfig=${kubeconfig}`,
        `--platform-url=${suite.emulator.baseUrl}`,
        `--watch-namespace=${watched}`,
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${healthPort}`,
        '--drift-interval=60s',
        ...flags,
      ],
      wrap: (argv) => cage.wrap(argv),
      env: { PATH: process.env.PATH, LOG_LEVEL: 'info', ...imageAllocatorEnv().env },
      keep: 20_000,
    });
    operators.push(operator);
    return { process: operator, metrics: `http://127.0.0.1:${metricsPort}/metrics`, healthPort, log: () => operator.output() };
  };
  /** SIGTERM, SIGKILL after 5 s. */
  const stopOperator = async (operator: OperatorProcess): Promise<void> => {
    await operator.stop(5_000);
  };
  const counter = async (metrics: string, name: string, label: string): Promise<number> => {
    const body = await (await fetch(metrics)).text();
    return body
      .split('\n')
      .filter((l) => l.startsWith(`${name}{`) && l.includes(label))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };
  /** The operator's gauge of its keys whose Ready is False for missing credentials, in the tenant's namespace (from its cache). */
  const blockedGauge = async (metrics: string, kind: FatKind): Promise<number> => {
    const body = await (await fetch(metrics)).text();
    const labels = [`namespace="${namespace}"`, `kind="${kind}"`, 'condition="Ready"', 'reason="CredentialsMissing"'];
    return body
      .split('\n')
      .filter((l) => l.startsWith('neon_key_operator_managed_keys{') && labels.every((label) => l.includes(label)))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };
  /** The same, read from the apiserver, once, page by page. */
  const blocked = async (kind: FatKind): Promise<number> => {
    let n = 0;
    let next: string | undefined;
    do {
      const page = (await suite.objects.listNamespacedCustomObject({
        group,
        version,
        namespace,
        plural: PLURALS[kind],
        limit: 5,
        ...(next !== undefined ? { _continue: next } : {}),
      })) as { items: Resource[]; metadata?: { continue?: string } };
      n += page.items.filter((r) => r.status?.conditions?.some((c) => c.type === 'Ready' && c.reason === 'CredentialsMissing') === true).length;
      next = page.metadata?.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
    } while (next !== undefined);
    return n;
  };
  /** The process's peak RSS since it started (or since resetPeak()), MiB. */
  const peakMiB = (pid: number): number => (processMemory(pid)?.peak ?? Number.NaN) / MIB;
  const resetPeak = (pid: number): void => writeFileSync(`/proc/${pid}/clear_refs`, '5');
  /**
   * A create of the test's setup, again after a 5xx: the larger run's GiBs of revisions keep etcd
   * busy while the apiserver compacts them ("etcdserver: request timed out"). A create that landed
   * before its answer was lost is found on the next attempt (409), which is its success.
   */
  const create = async (write: () => Promise<unknown>): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await write();
        return;
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (attempt > 1 && code === 409) return;
        if (typeof code !== 'number' || code < 500 || attempt === 5) throw error;
        await new Promise((resolve) => setTimeout(resolve, 2_000 * attempt));
      }
    }
  };
  /** `creates` run 4 at a time. */
  const createAll = async (creates: readonly (() => Promise<unknown>)[]): Promise<void> => {
    for (let i = 0; i < creates.length; i += 4) await Promise.all(creates.slice(i, i + 4).map(create));
  };

  // Its operators are processes of their own (in the cage), started by the cases; the fat namespace
  // has no credentials Secret, the discover case's namespace is made by that case.
  const suite = operatorSuite({
    namespaces: ['fat'],
    credentials: false,
    before: async (s) => {
      namespace = s.namespace;
      apps = s.cp.kubeConfig.makeApiClient(AppsV1Api);
      scratch = mkdtempSync(join(tmpdir(), 'nko-fat-'));
      const certs = join(s.cp.dir, 'certs');
      const tls = {
        cert: readFileSync(join(certs, 'apiserver.crt'), 'utf8'),
        key: readFileSync(join(certs, 'apiserver.key'), 'utf8'),
        ca: Buffer.from(s.cp.caData, 'base64').toString('utf8'),
      };
      proxy = new ExpiringProxy(s.cp.server, tls, EVERY_KIND ? /\/(apikeys|projectapikeys|apikeyinventories|secrets)$/ : /\/apikeys$/);
      // FAT_OBJECTS_CAGE=off: no cgroup, the peak only measured (to see how far over the limit a change goes).
      cage = memoryCage(LIMIT_MIB * MIB, process.env.FAT_OBJECTS_CAGE !== 'off');
    },
    // The fat resources were never issued, so nothing needs revoking: the operators stop, the
    // finalizers are lifted here, and everything goes with the namespaces (the rotated key's too:
    // the emulator holding it goes with this run).
    after: async (s) => {
      await Promise.all(operators.map(stopOperator));
      const lift = async (ns: string, plural: string, name: string): Promise<unknown> =>
        await s.objects
          .patchNamespacedCustomObject({ group, version, namespace: ns, plural, name, body: { metadata: { finalizers: null } } }, merge)
          .catch(() => undefined);
      // The key kinds' (an inventory has no finalizer), 4 at a time: each is a rewrite of an object of 1.3 MiB.
      const lifts = [PLURALS.ApiKey, PLURALS.ProjectApiKey].flatMap((plural) =>
        Array.from({ length: COUNT }, (_, i) => () => lift(namespace, plural, `fat-${i}`)),
      );
      for (let i = 0; i < lifts.length; i += 4) await Promise.all(lifts.slice(i, i + 4).map((run) => run()));
      if (discoverNamespace !== undefined) {
        await lift(discoverNamespace, 'apikeys', 'discovered');
        await s.core.deleteNamespace({ name: discoverNamespace }).catch(() => undefined);
      }
      await proxy?.close();
      cage?.remove();
      if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
    },
    timeoutMs: 60_000,
    afterTimeoutMs: LARGER ? 3_600_000 : 300_000,
  });

  const kinds: FatKind[] = EVERY_KIND ? ['ApiKey', 'ProjectApiKey', 'ApiKeyInventory'] : ['ApiKey'];
  const what = `${COUNT} ${EVERY_KIND ? 'ApiKeys, ProjectApiKeys, ApiKeyInventories (~1.3 MiB) and Secrets (~1 MiB)' : 'ApiKeys of ~1.3 MiB'}`;

  it(
    `${what} whose credentials are missing: an operator started beside them, and its relist after a 410, stay under 256 MiB and are ready`,
    async () => {
      console.log(`memory limit: ${cage.how}`);
      // They are there before the operator starts, as after a rollout or a leader change.
      const creates: (() => Promise<unknown>)[] = [];
      const data = { blob: Buffer.alloc(64 * 1024).toString('base64') };
      for (let i = 0; i < COUNT; i++) {
        for (const kind of kinds) creates.push(() => suite.apply(kind, fatMetadata(`fat-${i}`, LABELS_NEAR_LIMIT), FAT_SPECS[kind](`fat-${i}`)));
        // Not named as a key's own Secret (its resource's name): that one is the operator's to write, and a Secret of the tenant's there is a conflict.
        if (EVERY_KIND)
          creates.push(() => suite.core.createNamespacedSecret({ namespace, body: { metadata: fatMetadata(`fat-secret-${i}`, LABELS_SECRET), data } }));
      }
      await createAll(creates);
      const sizes = await Promise.all(
        kinds.map(async (kind) => {
          const sent = await suite.get(PLURALS[kind], 'fat-0');
          return `${kind} ${(JSON.stringify(sent).length / MIB).toFixed(2)} MiB`;
        }),
      );
      if (EVERY_KIND)
        sizes.push(`Secret ${(JSON.stringify(await suite.core.readNamespacedSecret({ namespace, name: 'fat-secret-0' })).length / MIB).toFixed(2)} MiB`);
      console.log(`one object as the apiserver sends it: ${sizes.join(', ')}`);

      // The start: the process LISTs every kind, through the proxy.
      const operator = await startOperator(await proxy.listen(), namespace);
      const pid = operator.process.pid ?? 0;
      await operator.process.ready(operator.healthPort, WAIT_MS);
      // Every resource looked at once since the start (its reconcile counted), the keys blocked on their credentials.
      for (const kind of kinds) {
        const controller = `controller="${controllerName(kind)}"`;
        const reconciled = async (): Promise<true | undefined> =>
          (await counter(operator.metrics, 'controller_runtime_reconcile_total', controller)) >= COUNT ? true : undefined;
        await eventually(reconciled, WAIT_MS, `every ${kind} reconciled after the start`);
      }
      const keyKinds = kinds.filter((k) => k !== 'ApiKeyInventory');
      for (const kind of keyKinds) {
        await eventually(
          async () => ((await blockedGauge(operator.metrics, kind)) === COUNT ? true : undefined),
          WAIT_MS,
          `the ${COUNT} ${kind}s blocked on their credentials`,
        );
      }
      const restartPeak = peakMiB(pid);

      // The relist: the watches of those kinds expire (410), each LISTs again.
      resetPeak(pid);
      const listed = [...kinds, ...(EVERY_KIND ? ['Secret'] : [])];
      const lists = await Promise.all(listed.map((kind) => counter(operator.metrics, 'neon_key_operator_informer_lists_total', `resource="${kind}"`)));
      await eventually(async () => (proxy.expire() >= listed.length ? true : undefined), 30_000, 'the watches open through the proxy');
      for (const [k, kind] of listed.entries()) {
        const relisted = async (): Promise<true | undefined> =>
          (await counter(operator.metrics, 'neon_key_operator_informer_lists_total', `resource="${kind}"`)) > (lists[k] ?? 0) ? true : undefined;
        await eventually(relisted, WAIT_MS, `the relist of ${kind} after the 410`);
      }
      await operator.process.ready(operator.healthPort, WAIT_MS, 'the operator ready after the relist');
      const relistPeak = peakMiB(pid);
      console.log(
        `peak RSS with ${what}: ${restartPeak.toFixed(1)} MiB from the start until every one was reconciled; ` +
          `${relistPeak.toFixed(1)} MiB around the relist after a 410 (${cage.enforced ? `cgroup peak ${((cage.peakBytes() ?? 0) / MIB).toFixed(1)} MiB, OOM kills ${cage.oomKills()}` : 'no cgroup'})`,
      );

      expect(operator.process.child.exitCode).toBeNull();
      expect(cage.oomKills()).toBe(0);
      expect(restartPeak).toBeLessThan(LIMIT_MIB);
      expect(relistPeak).toBeLessThan(LIMIT_MIB);
      for (const kind of keyKinds) expect(await blocked(kind)).toBe(COUNT);
      // The fat resources stay where they are; this operator is done (the next case starts its own, in the same cgroup).
      await stopOperator(operator.process);
    },
    LARGER ? 10_800_000 : 1_200_000,
  );

  it(
    `a rotation with restart.discover beside ${DEPLOYMENTS} Deployments of ~1.3 MiB restarts the consenting ones and completes under 256 MiB`,
    async () => {
      const ns = `fat-discover-${randomBytes(3).toString('hex')}`;
      await create(() => suite.core.createNamespace({ body: { metadata: { name: ns } } }));
      discoverNamespace = ns;
      await create(() =>
        suite.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: suite.adminKey } } }),
      );
      // The Secret the rotated key lands in is `discovered`. Every 20th Deployment reads it and
      // consents (keys.neon.dev/restart-on-rotation), every 10th from the 5th reads it without
      // consent (skipped, named in the event), the rest read another Secret; all of 0 replicas.
      const name = (i: number): string => `fat-deploy-${String(i).padStart(3, '0')}`;
      const consenting = Array.from({ length: DEPLOYMENTS }, (_, i) => i)
        .filter((i) => i % 20 === 0)
        .map(name);
      const skipped = Array.from({ length: DEPLOYMENTS }, (_, i) => i)
        .filter((i) => i % 10 === 5)
        .map(name);
      const deployment = (i: number): V1Deployment => {
        const metadata = fatMetadata(name(i), LABELS_NEAR_LIMIT);
        const reads = i % 20 === 0 || i % 10 === 5 ? 'discovered' : 'platform-db';
        return {
          metadata: { ...metadata, annotations: { ...metadata.annotations, ...(i % 20 === 0 ? { 'keys.neon.dev/restart-on-rotation': 'discovered' } : {}) } },
          spec: {
            replicas: 0,
            selector: { matchLabels: { app: name(i) } },
            template: {
              metadata: { labels: { app: name(i) } },
              spec: {
                containers: [
                  { name: 'c', image: 'example.invalid/c:1', env: [{ name: 'NEON_API_KEY', valueFrom: { secretKeyRef: { name: reads, key: 'apiKey' } } }] },
                ],
              },
            },
          },
        };
      };
      await createAll(Array.from({ length: DEPLOYMENTS }, (_, i) => () => apps.createNamespacedDeployment({ namespace: ns, body: deployment(i) })));
      console.log(
        `one Deployment as the apiserver sends it: ${(JSON.stringify(await apps.readNamespacedDeployment({ namespace: ns, name: name(1) })).length / MIB).toFixed(2)} MiB`,
      );
      const generations = async (): Promise<Record<string, number | undefined>> =>
        Object.fromEntries(
          await Promise.all(skipped.map(async (n) => [n, (await apps.readNamespacedDeployment({ namespace: ns, name: n })).metadata?.generation] as const)),
        );
      const before = await generations();

      type Rotated = Resource & {
        metadata: { annotations?: Record<string, string> };
        status?: { keyId?: number; retiringKeys?: { keyId: number; restartedAt?: string; restarts?: { kind: string; name: string }[] }[] };
      };
      const get = (): Promise<Rotated> => suite.get<Rotated>('apikeys', 'discovered', ns);
      const rotating = (r: Resource): string | undefined => {
        const c = r.status?.conditions?.find((x) => x.type === 'Rotating');
        return c === undefined ? undefined : `${c.status} ${c.reason}`;
      };
      await create(() =>
        suite.apply(
          'ApiKey',
          { name: 'discovered' },
          {
            scope: 'Organization',
            organizationId: suite.org,
            keyName: 'discovered',
            credentialsSecretRef: { name: 'neon-admin' },
            rotation: { gracePeriod: '1s', restart: { discover: true } },
          },
          ns,
        ),
      );
      // The test CRDs take a gracePeriod of 1s (test/harness/crds.ts): the operator's floor lowered to match.
      const operator = await startOperator(suite.cp.server, ns, ['--min-rotation-grace=1s']);
      const pid = operator.process.pid ?? 0;
      const issued = await eventually(
        async () => {
          const r = await get();
          const ready = r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
          return ready && r.status?.keyId !== undefined && intentSettled(r) ? r : undefined;
        },
        WAIT_MS,
        `the key issued: ${operator.log().slice(-2_000)}`,
      );
      const old = issued.status?.keyId ?? 0;

      // The rotation: its restart step LISTs the namespace's workloads (the discover), reads and patches each consenting one.
      resetPeak(pid);
      await suite.objects.patchNamespacedCustomObject(
        { group, version, namespace: ns, plural: 'apikeys', name: 'discovered', body: { metadata: { annotations: { 'keys.neon.dev/rotate': 'fat' } } } },
        merge,
      );
      const restarted = await eventually(
        async () => {
          const r = await get();
          return r.status?.retiringKeys?.[0]?.restartedAt !== undefined ? r : undefined;
        },
        WAIT_MS,
        `the consumers restarted: ${operator.log().slice(-2_000)}`,
      );
      const fresh = restarted.status?.keyId ?? 0;
      const done = await eventually(
        async () => {
          const r = await get();
          return rotating(r) === 'False RotationComplete' ? r : undefined;
        },
        WAIT_MS,
        'the rotation complete (the rollouts of the consenting Deployments, then the grace)',
      );
      const rotationPeak = peakMiB(pid);
      console.log(
        `peak RSS through a rotation with discover beside ${DEPLOYMENTS} Deployments of ~1.3 MiB (${consenting.length} consenting, ${skipped.length} reading the Secret without consent): ` +
          `${rotationPeak.toFixed(1)} MiB (${cage.enforced ? `OOM kills ${cage.oomKills()}` : 'no cgroup'})`,
      );

      expect(operator.process.child.exitCode).toBeNull();
      expect(cage.oomKills()).toBe(0);
      expect(rotationPeak).toBeLessThan(LIMIT_MIB);
      // Every consenting Deployment restarted for the new key, each waited for; those without consent untouched.
      expect(fresh).not.toBe(old);
      expect(restarted.status?.retiringKeys?.[0]?.restarts?.map((r) => `${r.kind}/${r.name}`)).toEqual(consenting.map((n) => `Deployment/${n}`));
      for (const n of consenting) {
        expect((await apps.readNamespacedDeployment({ namespace: ns, name: n })).spec?.template.metadata?.annotations?.[restartAnnotation('discovered')]).toBe(
          String(fresh),
        );
      }
      expect(await generations()).toEqual(before);
      // The event names both: the skipped ones come from the LIST only (none is named in the spec), so every page of it was read.
      const listedNames = (names: readonly string[]): string => `${names.slice(0, 20).join(', ')}${names.length > 20 ? ` and ${names.length - 20} more` : ''}`;
      const events = (await suite.core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=discovered' })).items;
      expect(events.find((e) => e.reason === 'ConsumersRestarted')?.message).toBe(
        `restarted ${listedNames(consenting.map((n) => `Deployment/${n}`))} for key ${fresh}; ` +
          `not restarted, without keys.neon.dev/restart-on-rotation naming discovered: ${listedNames(skipped.map((n) => `Deployment/${n}`))}`,
      );
      // The old key revoked once those rollouts completed.
      expect(done.status?.keyId).toBe(fresh);
      expect(done.status?.retiringKeys).toEqual([]);
      const keys = await emulatorAdmin<{ id: number; revoked: boolean }[]>(suite.emulator.adminUrl, 'GET', '/keys');
      expect(keys.find((k) => k.id === old)?.revoked).toBe(true);
      expect(keys.find((k) => k.id === fresh)?.revoked).toBe(false);
    },
    LARGER ? 10_800_000 : 1_200_000,
  );
});
