// High availability, the way the Deployment runs it: two operator PROCESSES (the source entry
// point with --leader-elect, test/harness/operator-process.ts) with the ServiceAccount token of
// deploy/base, against the real apiserver and the platform emulator. One holds the Lease and
// reconciles; the standby is ready but never calls the platform nor writes; SIGKILL of the leader
// hands over within the lease duration (plus a retry period), SIGTERM hands over at once (the Lease
// is released); no resource ever has two live keys. Also /readyz: not ready while a leader's caches
// are not synced, and not ready when a standby's Kubernetes credentials do not work.
//
// Short lease timings (--leader-elect-lease-duration and friends) keep it fast. The Lease keeps its
// default name (deploy/'s Role grants that name only) in a namespace of this suite (POD_NAMESPACE),
// holding a copy of deploy/base's leader-election Role, so that other suites' operators never
// compete for it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, RbacAuthorizationV1Api, Watch, type V1Lease } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LOG_REDACT_PATHS, startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { AUDITED_NAMESPACE, freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { OperatorProcess, PROCESS_START_MS } from '../harness/operator-process.ts';
import {
  createNamespace,
  customObjects,
  emulatorAdmin,
  eventually,
  installOperatorManifests,
  OPERATOR_NAMESPACE,
  OPERATOR_SERVICE_ACCOUNT,
} from './support.ts';

const LEASE_MS = 4_000;
const RENEW_MS = 3_000;
const RETRY_MS = 400;
// LeaderElector retries acquisition every retryPeriod * (1 + up to 1.2) (client-go's jitter).
const MAX_RETRY_MS = RETRY_MS * 2.2;

interface Replica {
  name: string;
  operator: OperatorProcess;
  health: number;
  metrics: number;
  log: () => string;
}

interface KeyResource {
  status?: { keyId?: number; conditions?: { type: string; status: string; reason: string }[] };
}
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}
/** A line of the emulator's log: `time` when the response ended, `ms` after the request came. */
interface PlatformLogLine {
  msg: string;
  time: number;
  method: string;
  route: string;
  status?: number;
  ms?: number;
  userAgent?: string;
}
/** An event of the apiserver's audit log (level Metadata). */
interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
}

describe('two operator processes with leader election', () => {
  const suffix = randomBytes(3).toString('hex');
  const leaseName = 'neon-key-operator';
  let leaseNamespace: string;
  let cp: ControlPlane;
  let emulator: Emulator;
  let namespace: string;
  let kubeconfig: string;
  /** The kubeconfig's folder, removed in afterAll. */
  let scratch: string | undefined;
  const replicas: Replica[] = [];
  const live: { prefix: string; max: number }[] = [];
  let sampler: ReturnType<typeof setInterval> | undefined;
  const platformLog: PlatformLogLine[] = [];
  const leases = (): CoordinationV1Api => cp.kubeConfig.makeApiClient(CoordinationV1Api);

  const holder = async (): Promise<string> => {
    try {
      return (await leases().readNamespacedLease({ namespace: leaseNamespace, name: leaseName })).spec?.holderIdentity ?? '';
    } catch {
      return '';
    }
  };

  /**
   * A namespace for a Lease, holding deploy/base's leader-election Role (as installed, rules
   * copied) bound to the ServiceAccount: the rights the operator has in its own namespace.
   */
  const leaseNamespaceFor = async (
    prefix: string,
    serviceAccount: { namespace: string; name: string } | { namespace: string; name: string }[],
  ): Promise<string> => {
    const rbac = cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const installed = await rbac.readNamespacedRole({ namespace: OPERATOR_NAMESPACE, name: 'neon-key-operator-leader-election' });
    const created = await createNamespace(cp, prefix);
    await rbac.createNamespacedRole({ namespace: created, body: { metadata: { name: 'leader-election' }, rules: installed.rules ?? [] } });
    await rbac.createNamespacedRoleBinding({
      namespace: created,
      body: {
        metadata: { name: 'leader-election' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leader-election' },
        subjects: [serviceAccount].flat().map((sa) => ({ kind: 'ServiceAccount', ...sa })),
      },
    });
    return created;
  };

  const start = (
    name: string,
    config: string,
    health: number,
    metrics: number,
    extra: string[] = [],
    podNamespace = leaseNamespace,
    watched = namespace,
  ): Replica => {
    // `extra` comes last: a flag given again there (a lease duration) wins.
    const operator = new OperatorProcess({
      args: [
        '--kubeconfig',
        config,
        '--platform-url',
        emulator.baseUrl,
        '--watch-namespace',
        watched,
        '--leader-elect',
        `--leader-elect-lease-duration=${LEASE_MS}ms`,
        `--leader-elect-renew-deadline=${RENEW_MS}ms`,
        `--leader-elect-retry-period=${RETRY_MS}ms`,
        `--health-probe-bind-address=127.0.0.1:${health}`,
        `--metrics-bind-address=127.0.0.1:${metrics}`,
        '--drift-interval',
        '5s',
        // A create the killed leader had in flight is recovered by its successor after this grace
        // (2m by default); the emulator answers a create in milliseconds.
        '--pending-grace=3s',
        ...extra,
      ],
      env: { PATH: process.env.PATH, POD_NAME: name, POD_NAMESPACE: podNamespace, LOG_LEVEL: 'info' },
    });
    const replica = { name, operator, health, metrics, log: () => operator.output() };
    replicas.push(replica);
    return replica;
  };

  /** Once the replica's process has loaded and serves its probes: what each bound of the tests counts from. */
  const up = async (r: Replica): Promise<Replica> => {
    await r.operator.alive(r.health, PROCESS_START_MS, `${r.name} serving /healthz`);
    return r;
  };
  const replica = async (name: string): Promise<Replica> => up(start(name, kubeconfig, await freePort(), await freePort()));

  const get = async (port: number, path: string): Promise<{ status: number; body: string }> => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: response.status, body: await response.text() };
  };
  const leaderGauge = async (r: Replica): Promise<number | undefined> => {
    const match = /^leader_election_master_status\{name="[^"]+"\} (\S+)$/m.exec((await get(r.metrics, '/metrics')).body);
    return match === null ? undefined : Number(match[1]);
  };
  /** The leader gauge, or undefined when the replica does not answer within 300 ms (stopped by SIGSTOP). */
  const gaugeNow = async (r: Replica): Promise<number | undefined> => {
    try {
      const response = await fetch(`http://127.0.0.1:${r.metrics}/metrics`, { signal: AbortSignal.timeout(300) });
      const match = /^leader_election_master_status\{name="[^"]+"\} (\S+)$/m.exec(await response.text());
      return match === null ? undefined : Number(match[1]);
    } catch {
      return undefined;
    }
  };
  const samples = (body: string, metric: string): string[] => body.split('\n').filter((line) => line.startsWith(`${metric}{`) || line.startsWith(`${metric} `));
  /**
   * The sum of a counter's samples whose labels include every `labels` pair, read from a replica's
   * /metrics (the Prometheus exposition: structured, unlike the log): how reconciles and key
   * creations are counted here.
   */
  const total = async (r: Replica, metric: string, labels: Record<string, string> = {}): Promise<number> =>
    samples((await get(r.metrics, '/metrics')).body, metric)
      .filter((line) => Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)))
      .reduce((n, line) => n + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  /** Keys created: POSTs to a key creation route the platform answered with a success. */
  const creates = async (r: Replica): Promise<number> =>
    samples((await get(r.metrics, '/metrics')).body, 'neon_key_operator_platform_requests_total')
      .filter((line) => line.includes('method="POST"') && /route="[^"]*\/api_keys"/.test(line) && /status="2\d\d"/.test(line))
      .reduce((n, line) => n + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);

  const adminKeys = async (): Promise<AdminKey[]> => (await (await fetch(`${emulator.adminUrl}/keys`)).json()) as AdminKey[];
  const liveKeys = (keys: AdminKey[], keyName: string): AdminKey[] => keys.filter((k) => !k.revoked && k.name.startsWith(`${keyName}-`));

  const createKey = async (name: string, inNamespace = namespace): Promise<void> => {
    await customObjects(cp.kubeConfig).createNamespacedCustomObject({
      group: 'keys.neon.dev',
      version: 'v1alpha1',
      namespace: inNamespace,
      plural: 'apikeys',
      body: {
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ApiKey',
        metadata: { name },
        spec: { scope: 'Personal', keyName: name, credentialsSecretRef: { name: 'neon-credentials' } },
      },
    });
    live.push({ prefix: name, max: 0 });
  };
  const ready = async (name: string, timeoutMs = 30_000, inNamespace = namespace): Promise<KeyResource> =>
    await eventually(
      async () => {
        const r = (await customObjects(cp.kubeConfig).getNamespacedCustomObject({
          group: 'keys.neon.dev',
          version: 'v1alpha1',
          namespace: inNamespace,
          plural: 'apikeys',
          name,
        })) as KeyResource;
        return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? r : undefined;
      },
      timeoutMs,
      `ApiKey ${name} Ready`,
    );
  /** A namespace watched by the replicas of one test, with the credentials Secret its ApiKeys name. */
  const keysNamespace = async (prefix: string): Promise<string> => {
    const created = await createNamespace(cp, prefix);
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice');
    await cp.kubeConfig
      .makeApiClient(CoreV1Api)
      .createNamespacedSecret({ namespace: created, body: { metadata: { name: 'neon-credentials' }, stringData: { apiKey: alice?.personalKey ?? '' } } });
    return created;
  };
  /** The ApiKeys of a namespace deleted and gone (a running leader revokes them and lifts their finalizers), then the namespace. */
  const removeKeys = async (inNamespace: string): Promise<void> => {
    const objects = customObjects(cp.kubeConfig);
    const listed = (await objects.listNamespacedCustomObject({ group: 'keys.neon.dev', version: 'v1alpha1', namespace: inNamespace, plural: 'apikeys' })) as {
      items: { metadata: { name: string } }[];
    };
    for (const item of listed.items)
      await objects
        .deleteNamespacedCustomObject({ group: 'keys.neon.dev', version: 'v1alpha1', namespace: inNamespace, plural: 'apikeys', name: item.metadata.name })
        .catch(() => undefined);
    await eventually(
      async () => {
        const left = (await objects.listNamespacedCustomObject({ group: 'keys.neon.dev', version: 'v1alpha1', namespace: inNamespace, plural: 'apikeys' })) as {
          items: unknown[];
        };
        return left.items.length === 0 ? true : undefined;
      },
      30_000,
      `the ApiKeys of ${inNamespace} gone`,
    );
    await cp.kubeConfig
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: inNamespace })
      .catch(() => undefined);
  };
  /** SIGTERM (after SIGCONT, should it be stopped), SIGKILL after 10 s. */
  const stopReplica = async (r: Replica): Promise<void> => {
    await r.operator.stop(10_000);
  };
  const leaseOf = async (inNamespace: string) => await leases().readNamespacedLease({ namespace: inNamespace, name: leaseName });
  const holderIn = async (inNamespace: string): Promise<string> => (await leaseOf(inNamespace).catch(() => undefined))?.spec?.holderIdentity ?? '';

  const logs = (): string =>
    replicas.map((r) => `--- ${r.name} (exit ${String(r.operator.child.exitCode ?? r.operator.child.signalCode)})\n${r.log().slice(-3000)}`).join('\n');

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    // The emulator's request log (with each request's user agent, which names the operator process)
    // and its fault injections: which replica wrote to the platform, and when.
    emulator = await startEmulator({
      db: ':memory:',
      timeScale: 0.01,
      controlPlaneActivity: false,
      logger: pino(
        { level: 'info', redact: LOG_REDACT_PATHS },
        {
          write: (line: string) => {
            const entry = JSON.parse(line) as PlatformLogLine;
            if (entry.msg === 'request' || entry.msg === 'injecting fault') platformLog.push(entry);
          },
        },
      ),
    });
    namespace = await createNamespace(cp, 'ha');
    leaseNamespace = await leaseNamespaceFor('ha-lease', { namespace: OPERATOR_NAMESPACE, name: OPERATOR_SERVICE_ACCOUNT });
    const token = await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 1800);
    scratch = mkdtempSync(join(tmpdir(), 'nko-ha-'));
    kubeconfig = join(scratch, 'kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(cp, token, 'operator'), { mode: 0o600 });
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice');
    await cp.kubeConfig
      .makeApiClient(CoreV1Api)
      .createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-credentials' }, stringData: { apiKey: alice?.personalKey ?? '' } } });
    // Every 100 ms, the most live keys any resource has had at once: must never exceed 1.
    sampler = setInterval(() => {
      void adminKeys().then(
        (keys) => {
          for (const entry of live) entry.max = Math.max(entry.max, liveKeys(keys, entry.prefix).length);
        },
        () => undefined,
      );
    }, 100);
  });

  afterAll(async () => {
    clearInterval(sampler);
    // Leave no finalizer behind: a surviving replica revokes what is left while the credentials are
    // there (removeKeys: the ApiKeys first, then the namespace), then everything stops.
    const survivor = replicas.find((r) => r.operator.running && r.name.startsWith('ha-'));
    if (survivor !== undefined && namespace !== undefined) await removeKeys(namespace).catch(() => undefined);
    for (const r of replicas) await stopReplica(r);
    if (leaseNamespace !== undefined)
      await cp.kubeConfig
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: leaseNamespace })
        .catch(() => undefined);
    await emulator?.close();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  }, 60_000);

  it('exactly one replica reconciles; the standby is ready, its leader gauge 0, and it never calls the platform', async () => {
    const [a, b] = await Promise.all([replica(`ha-a-${suffix}`), replica(`ha-b-${suffix}`)]);
    const leaderName = await eventually(
      async () => {
        const h = await holder();
        return h === '' ? undefined : h;
      },
      20_000,
      'a Lease holder',
    );
    const leader = leaderName === a.name ? a : b;
    const standby = leader === a ? b : a;
    expect([a.name, b.name]).toContain(leaderName);
    for (const r of [leader, standby]) {
      await eventually(async () => ((await get(r.health, '/readyz')).status === 200 ? true : undefined), 20_000, `${r.name} /readyz`).catch(
        (error: unknown) => {
          throw new Error(`${String(error)}\n${logs()}`);
        },
      );
      expect((await get(r.health, '/healthz')).status).toBe(200);
    }
    await eventually(async () => ((await leaderGauge(leader)) === 1 ? true : undefined), 10_000, 'leader gauge 1 on the leader');
    expect(await leaderGauge(standby)).toBe(0);

    for (const name of ['before-1', 'before-2', 'before-3']) await createKey(name);
    for (const name of ['before-1', 'before-2', 'before-3']) {
      await ready(name).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${logs()}`);
      });
    }
    const keys = await adminKeys();
    for (const name of ['before-1', 'before-2', 'before-3']) expect([name, liveKeys(keys, name).length]).toEqual([name, 1]);

    // The leader did the work; the standby made no platform request and reconciled nothing.
    const leaderMetrics = (await get(leader.metrics, '/metrics')).body;
    expect(leaderMetrics).toMatch(/neon_key_operator_platform_requests_total\{[^}]*method="POST"[^}]*route="\/api_keys"/);
    const standbyMetrics = (await get(standby.metrics, '/metrics')).body;
    expect(samples(standbyMetrics, 'neon_key_operator_platform_requests_total')).toEqual([]);
    expect(samples(standbyMetrics, 'controller_runtime_reconcile_total')).toEqual([]);
    // The standby's controller never ran: nothing was ever queued.
    expect(await total(standby, 'workqueue_adds_total')).toBe(0);
    // The leader reconciled each resource and created its three keys.
    expect(await total(leader, 'controller_runtime_reconcile_total', { controller: 'apikey' })).toBeGreaterThanOrEqual(3);
    expect(await creates(leader)).toBe(3);
    expect(await holder()).toBe(leader.name);
  }, 210_000);

  it('SIGKILL of the leader: the standby takes over once the lease expires, not before, and new resources become Ready', async () => {
    const current = await holder();
    const old = replicas.find((r) => r.name === current);
    const standby = replicas.find((r) => r.name !== current && r.operator.child.exitCode === null);
    if (old === undefined || standby === undefined) throw new Error(`no leader/standby pair (holder ${current})\n${logs()}`);
    const renewedBefore = (await leases().readNamespacedLease({ namespace: leaseNamespace, name: leaseName })).spec?.leaseTransitions ?? 0;

    // Resources created just before the crash: whatever the leader had in flight, never two live keys.
    for (const name of ['crash-1', 'crash-2']) await createKey(name);
    const killedAt = performance.now();
    await old.operator.kill('SIGKILL');
    // Waited for without a bound of its own (the test's timeout ends it): how soon is a measurement.
    await eventually(async () => ((await holder()) === standby.name ? true : undefined), 60_000, 'the standby holding the Lease');
    const takeoverMs = performance.now() - killedAt;
    await eventually(async () => ((await leaderGauge(standby)) === 1 ? true : undefined), 10_000, 'leader gauge 1 on the new leader');
    await eventually(async () => ((await get(standby.health, '/readyz')).status === 200 ? true : undefined), 10_000, 'the new leader ready (caches synced)');
    const readyMs = performance.now() - killedAt;
    console.log(
      `SIGKILL failover: Lease taken over after ${Math.round(takeoverMs)} ms, new leader ready after ${Math.round(readyMs)} ms (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)`,
    );
    // By expiry, not eagerly: the killed leader's last renewal was at most one retry before the
    // kill, and the standby waits until that record has not moved for a lease duration on its own
    // clock. A lower bound, which a slow machine cannot break (slowness only adds).
    expect(takeoverMs).toBeGreaterThanOrEqual(LEASE_MS - MAX_RETRY_MS);
    const lease = await leases().readNamespacedLease({ namespace: leaseNamespace, name: leaseName });
    expect(lease.spec?.leaseTransitions).toBe(renewedBefore + 1);

    for (const name of ['after-1', 'after-2']) await createKey(name);
    for (const name of ['after-1', 'after-2']) {
      const r = await ready(name).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${logs()}`);
      });
      expect(typeof r.status?.keyId).toBe('number');
    }
    // Resources the killed leader may have had in flight: adopted or recovered by the new leader
    // (docs/design.md section 3.2), Ready with exactly one live key.
    for (const name of ['crash-1', 'crash-2'])
      await ready(name).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${logs()}`);
      });
    const keys = await adminKeys();
    for (const name of ['before-1', 'before-2', 'before-3', 'after-1', 'after-2', 'crash-1', 'crash-2'])
      expect([name, liveKeys(keys, name).length]).toEqual([name, 1]);
    // The new leader's controller runs: it reconciled, and created at least the keys of after-1 and after-2.
    expect(await total(standby, 'controller_runtime_reconcile_total', { controller: 'apikey' })).toBeGreaterThanOrEqual(4);
    expect(await creates(standby)).toBeGreaterThanOrEqual(2);
  }, 90_000);

  it('SIGTERM of the leader releases the Lease: a standby takes the released Lease, not an expired one', async () => {
    const current = await holder();
    const leader = replicas.find((r) => r.name === current);
    if (leader === undefined) throw new Error(`no leader (holder ${current})`);
    // The killed replica comes back, as a standby (a Deployment would restart it).
    const standby = await replica(`ha-c-${suffix}`);
    await eventually(async () => ((await get(standby.health, '/readyz')).status === 200 ? true : undefined), 20_000, 'the new standby ready');
    expect(await leaderGauge(standby)).toBe(0);
    expect(await holder()).toBe(leader.name);
    // Every version of the Lease from now on, in order (a watch misses none): the handover is shown
    // by its cause, the leader's release (no holder), followed by the standby's acquisition.
    const from = await leases().readNamespacedLease({ namespace: leaseNamespace, name: leaseName });
    const holders: string[] = [];
    const leaseWatch = await new Watch(cp.kubeConfig).watch(
      `/apis/coordination.k8s.io/v1/namespaces/${leaseNamespace}/leases`,
      { fieldSelector: `metadata.name=${leaseName}`, resourceVersion: from.metadata?.resourceVersion },
      (phase: string, lease: V1Lease) => {
        if (phase === 'ADDED' || phase === 'MODIFIED') holders.push(lease.spec?.holderIdentity ?? '');
      },
      () => undefined,
    );

    const termAt = performance.now();
    leader.operator.signal('SIGTERM');
    await eventually(async () => ((await holder()) === standby.name ? true : undefined), 60_000, 'the standby holding the Lease');
    const handoverMs = performance.now() - termAt;
    await leader.operator.exited;
    await eventually(async () => (holders.includes(standby.name) ? true : undefined), 60_000, 'the watch to see the standby hold the Lease');
    leaseWatch.abort();
    console.log(`SIGTERM handover: Lease taken over after ${Math.round(handoverMs)} ms (lease ${LEASE_MS} ms)`);
    expect(leader.operator.child.exitCode).toBe(0);
    expect(leader.log()).toContain('released leader lease');
    // The leader renewed, released, and the next holder is the standby: it took a released Lease,
    // not an expired one (an expired record would go from the leader straight to the standby).
    const changes = holders.filter((h, i) => i === 0 || h !== holders[i - 1]);
    expect(changes.slice(-2)).toEqual(['', standby.name]);
    expect(changes.slice(0, -2).every((h) => h === leader.name)).toBe(true);

    await eventually(async () => ((await leaderGauge(standby)) === 1 ? true : undefined), 10_000, 'leader gauge 1 on the new leader');
    await createKey('after-term');
    await ready('after-term').catch((error: unknown) => {
      throw new Error(`${String(error)}\n${logs()}`);
    });
    const keys = await adminKeys();
    expect(liveKeys(keys, 'after-term')).toHaveLength(1);
    // Over the whole suite, sampled every 100 ms: no resource ever had two live keys.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(live.filter((entry) => entry.max > 1)).toEqual([]);
  }, 210_000);

  it('readyz: a leader whose caches cannot sync is not ready; a standby whose credentials do not work is not ready', async () => {
    // A ServiceAccount that may hold a Lease but not list the custom resources: it becomes leader
    // of its own Lease (in a namespace of its own) and its informers never sync.
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    const saName = `ha-lease-only-${suffix}`;
    await core.createNamespacedServiceAccount({ namespace: OPERATOR_NAMESPACE, body: { metadata: { name: saName } } });
    const ownLeaseNamespace = await leaseNamespaceFor('ha-nosync', { namespace: OPERATOR_NAMESPACE, name: saName });
    const dir = mkdtempSync(join(tmpdir(), 'nko-ha-ready-'));
    try {
      const leaseOnly = join(dir, 'lease-only');
      writeFileSync(leaseOnly, kubeconfigYaml(cp, await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, saName, 600), 'lease-only'), { mode: 0o600 });
      const bogus = join(dir, 'bogus');
      writeFileSync(bogus, kubeconfigYaml(cp, 'not-a-valid-token', 'bogus'), { mode: 0o600 });

      const unsynced = start(`nosync-${suffix}`, leaseOnly, await freePort(), await freePort(), [], ownLeaseNamespace);
      const broken = start(`bogus-${suffix}`, bogus, await freePort(), await freePort());
      try {
        await Promise.all([up(unsynced), up(broken)]);
        await eventually(async () => ((await leaderGauge(unsynced)) === 1 ? true : undefined), 20_000, 'the lease-only replica leading');
        // Leading but caches not synced: not ready, however long it waits.
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const notSynced = await get(unsynced.health, '/readyz');
        expect(notSynced.status).toBe(503);
        expect(notSynced.body).toContain('caches not synced');
        expect((await get(unsynced.health, '/healthz')).status).toBe(200);

        const notAuthorized = await eventually(
          async () => {
            const r = await get(broken.health, '/readyz').catch(() => undefined);
            return r?.status === 503 ? r : undefined;
          },
          20_000,
          'the bogus-token standby answering 503',
        );
        expect(notAuthorized.body).toContain('HTTP 401');
        expect((await get(broken.health, '/healthz')).status).toBe(200);
        expect(await leaderGauge(broken)).toBe(0);
      } finally {
        for (const r of [unsynced, broken]) await r.operator.kill('SIGKILL');
      }
    } finally {
      await core.deleteNamespace({ name: ownLeaseNamespace }).catch(() => undefined);
      await core.deleteNamespacedServiceAccount({ namespace: OPERATOR_NAMESPACE, name: saName }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it('a rollout that lengthens the lease duration: a standby still on the shorter one never takes the Lease from a leader that stalls within its own', async () => {
    // The new version leads with a 15 s lease (renew deadline 12 s); a replica of the old version,
    // with 4 s, is its standby (as during a rollout with surge). The leader stalls for 7.5 s:
    // longer than the old setting, well within its own. A standby that judged expiry by its own
    // setting would take the Lease at about 5 s, while the stalled leader, once resumed, still leads
    // (its renew deadline has not passed): two leaders. The standby must read the record's duration.
    const leaseNs = await leaseNamespaceFor('ha-rollout-lease', { namespace: OPERATOR_NAMESPACE, name: OPERATOR_SERVICE_ACCOUNT });
    const watched = await keysNamespace('ha-rollout');
    const longer = ['--leader-elect-lease-duration=15s', '--leader-elect-renew-deadline=12s', `--leader-elect-retry-period=${RETRY_MS}ms`];
    const leader = start(`rollout-new-${suffix}`, kubeconfig, await freePort(), await freePort(), longer, leaseNs, watched);
    let standby: Replica | undefined;
    let sampling = true;
    try {
      await up(leader);
      await eventually(async () => ((await holderIn(leaseNs)) === leader.name ? true : undefined), 20_000, 'the new replica holding the Lease');
      await eventually(async () => ((await get(leader.health, '/readyz')).status === 200 ? true : undefined), 20_000, 'the leader ready');
      expect((await leaseOf(leaseNs)).spec?.leaseDurationSeconds).toBe(15);
      standby = await up(start(`rollout-old-${suffix}`, kubeconfig, await freePort(), await freePort(), [], leaseNs, watched));
      await eventually(async () => ((await get(standby!.health, '/readyz')).status === 200 ? true : undefined), 20_000, 'the old replica ready as a standby');
      // Let the standby observe a few renewals.
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 4));
      expect(await gaugeNow(standby)).toBe(0);

      // Every 100 ms: the Lease's holder, and how many replicas say they lead.
      const holders = new Set<string>();
      let mostLeaders = 0;
      const pair = [leader, standby];
      const sampled = (async () => {
        while (sampling) {
          const [h, gauges] = await Promise.all([holderIn(leaseNs), Promise.all(pair.map(gaugeNow))]);
          if (h !== '') holders.add(h);
          mostLeaders = Math.max(mostLeaders, gauges.filter((g) => g === 1).length);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      leader.operator.signal('SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, 7_500));
      leader.operator.signal('SIGCONT');
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      sampling = false;
      await sampled;
      expect([...holders]).toEqual([leader.name]);
      expect(mostLeaders).toBe(1);
      expect(leader.operator.child.exitCode).toBeNull();
      expect(await gaugeNow(leader)).toBe(1);
      expect(await gaugeNow(standby)).toBe(0);
      // The resumed leader still does the work.
      await createKey('rollout-after', watched);
      await ready('rollout-after', 30_000, watched).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${logs()}`);
      });
      expect(liveKeys(await adminKeys(), 'rollout-after')).toHaveLength(1);
      await removeKeys(watched);
    } finally {
      sampling = false;
      await stopReplica(leader);
      if (standby !== undefined) await stopReplica(standby);
      await cp.kubeConfig
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: leaseNs })
        .catch(() => undefined);
    }
  }, 360_000);

  it('a leader stalled past its lease (SIGSTOP, then SIGCONT) writes nothing to the apiserver or the platform once the standby has taken over', async () => {
    // Each replica has its own ServiceAccount in the namespace the test control plane audits (the
    // apiserver's audit log: every write, by whom, when received) and names its process in its
    // user agent to the platform (the emulator's request log).
    const auditLog = cp.auditLogPath;
    if (auditLog === undefined) throw new Error('this test reads the apiserver audit log of the test control plane (not available with TEST_KUBECONFIG)');
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    const rbac = cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespace({ body: { metadata: { name: AUDITED_NAMESPACE } } }).catch((error: unknown) => {
      if ((error as { code?: number }).code !== 409) throw error;
    });
    const accounts = [`stall-a-${suffix}`, `stall-b-${suffix}`];
    for (const name of accounts) await core.createNamespacedServiceAccount({ namespace: AUDITED_NAMESPACE, body: { metadata: { name } } });
    const binding = `nko-stall-${suffix}`;
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: binding },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'neon-key-operator' },
        subjects: accounts.map((name) => ({ kind: 'ServiceAccount', namespace: AUDITED_NAMESPACE, name })),
      },
    });
    const leaseNs = await leaseNamespaceFor(
      'ha-stall-lease',
      accounts.map((name) => ({ namespace: AUDITED_NAMESPACE, name })),
    );
    const watched = await keysNamespace('ha-stall');
    const dir = mkdtempSync(join(tmpdir(), 'nko-ha-stall-'));
    const started: Replica[] = [];
    try {
      const configs: string[] = [];
      for (const name of accounts) {
        const file = join(dir, name);
        writeFileSync(file, kubeconfigYaml(cp, await cp.mintServiceAccountToken(AUDITED_NAMESPACE, name, 1800), name), { mode: 0o600 });
        configs.push(file);
      }
      // RBAC is evaluated by an informer-fed cache: the first requests of a new binding may be denied.
      const a = start(`stall-a-${suffix}`, configs[0]!, await freePort(), await freePort(), [], leaseNs, watched);
      started.push(a);
      await up(a);
      await eventually(async () => ((await holderIn(leaseNs)) === a.name ? true : undefined), 30_000, 'replica a holding the Lease');
      await eventually(async () => ((await get(a.health, '/readyz')).status === 200 ? true : undefined), 30_000, 'replica a ready');
      const b = start(`stall-b-${suffix}`, configs[1]!, await freePort(), await freePort(), [], leaseNs, watched);
      started.push(b);
      await up(b);
      await eventually(async () => ((await get(b.health, '/readyz')).status === 200 ? true : undefined), 30_000, 'replica b ready as a standby');
      await createKey('stall-0', watched);
      await ready('stall-0', 30_000, watched).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${logs()}`);
      });

      // Creates that the platform answers only after 3 s: the leader has them in flight, waiting,
      // when it is stopped; the answers come while it is stopped.
      const route = '/api/v2/api_keys';
      const injectedBefore = platformLog.filter((l) => l.msg === 'injecting fault' && l.route === route).length;
      await emulatorAdmin(emulator.adminUrl, 'PUT', '/faults', { rules: [{ method: 'POST', route, probability: 1, kind: 'latency', latencyMs: 3_000 }] });
      const names = ['stall-1', 'stall-2', 'stall-3', 'stall-4', 'stall-5', 'stall-6'];
      try {
        for (const name of names) await createKey(name, watched);
        await eventually(
          async () => (platformLog.filter((l) => l.msg === 'injecting fault' && l.route === route).length - injectedBefore >= names.length ? true : undefined),
          20_000,
          "the leader's creates in flight",
        );
        a.operator.signal('SIGSTOP');
      } finally {
        await emulatorAdmin(emulator.adminUrl, 'DELETE', '/faults');
      }
      const stoppedAt = performance.now();
      await eventually(async () => ((await holderIn(leaseNs)) === b.name ? true : undefined), LEASE_MS * 4, 'replica b holding the Lease');
      const takeover = await leaseOf(leaseNs);
      const acquiredAt = new Date(takeover.spec?.acquireTime ?? 0).getTime();
      console.log(`stalled leader: the standby took the Lease ${Math.round(performance.now() - stoppedAt)} ms after SIGSTOP (lease ${LEASE_MS} ms)`);
      // The new leader finishes what the stalled one started (its intents, after the pending grace).
      for (const name of names)
        await ready(name, 40_000, watched).catch((error: unknown) => {
          throw new Error(`${String(error)}\n${logs()}`);
        });
      const stalledMs = performance.now() - stoppedAt;
      a.operator.signal('SIGCONT');
      // It wakes up to a lease it lost: it stops, and exits to come back as a standby.
      let giveUp: ReturnType<typeof setTimeout> | undefined;
      const exited = await Promise.race([
        a.operator.exited.then(() => true),
        new Promise<false>((resolve) => {
          giveUp = setTimeout(() => resolve(false), 30_000);
        }),
      ]);
      clearTimeout(giveUp);
      expect([exited, a.operator.child.exitCode]).toEqual([true, 1]);
      console.log(`stalled leader: stopped for ${Math.round(stalledMs)} ms; exited with ${String(a.operator.child.exitCode)} after SIGCONT`);

      // The audit: what each replica's ServiceAccount wrote, and when the apiserver received it.
      const userOf = (name: string): string => `system:serviceaccount:${AUDITED_NAMESPACE}:${name}`;
      const events = readFileSync(auditLog, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as AuditEvent);
      const by = (name: string): AuditEvent[] => events.filter((e) => e.user.username === userOf(name));
      const received = (e: AuditEvent): number => Date.parse(e.requestReceivedTimestamp);
      const show = (e: AuditEvent): string =>
        `${e.requestReceivedTimestamp} ${e.verb} ${e.objectRef?.resource ?? ''}${e.objectRef?.subresource !== undefined ? `/${e.objectRef.subresource}` : ''} ${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''} -> ${String(e.responseStatus?.code)}`;
      // The audit sees both replicas write (the old leader before, the new one after the takeover).
      expect(by(accounts[0]!).filter((e) => received(e) < acquiredAt && e.objectRef?.resource === 'secrets').length).toBeGreaterThan(0);
      expect(by(accounts[1]!).filter((e) => received(e) > acquiredAt && e.objectRef?.resource === 'apikeys').length).toBeGreaterThan(0);
      // Nothing from the old leader after the new one acquired the Lease. A renewal of the Lease it
      // may have had on the wire when it was stopped is refused by the resourceVersion (409): not a write.
      const late = by(accounts[0]!).filter((e) => received(e) >= acquiredAt && !(e.objectRef?.resource === 'leases' && e.responseStatus?.code === 409));
      expect(late.map(show)).toEqual([]);

      // The platform: the old leader's process is named in its user agent.
      const fromA = platformLog.filter((l) => l.msg === 'request' && (l.userAgent ?? '').includes(`(${a.name}-`));
      expect(fromA.filter((l) => l.method === 'POST').length).toBeGreaterThan(0);
      const lateWrites = fromA.filter((l) => l.method !== 'GET' && l.time - (l.ms ?? 0) >= acquiredAt);
      expect(lateWrites.map((l) => `${new Date(l.time - (l.ms ?? 0)).toISOString()} ${l.method} ${l.route} -> ${String(l.status)}`)).toEqual([]);

      // And each resource has exactly one live key, which its Secret holds (the platform accepts it).
      const keys = await adminKeys();
      for (const name of ['stall-0', ...names]) expect([name, liveKeys(keys, name).length]).toEqual([name, 1]);
      for (const name of ['stall-0', ...names]) {
        const secret = await core.readNamespacedSecret({ namespace: watched, name });
        const apiKey = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
        const auth = await fetch(`${emulator.baseUrl}/auth`, { headers: { authorization: `Bearer ${apiKey}` } });
        await auth.body?.cancel();
        expect([name, auth.status]).toEqual([name, 200]);
      }
      await removeKeys(watched);
    } finally {
      for (const r of started) await stopReplica(r);
      await core.deleteNamespace({ name: leaseNs }).catch(() => undefined);
      await core.deleteNamespace({ name: watched }).catch(() => undefined);
      await rbac.deleteClusterRoleBinding({ name: binding }).catch(() => undefined);
      for (const name of accounts) await core.deleteNamespacedServiceAccount({ namespace: AUDITED_NAMESPACE, name }).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 420_000);
});
