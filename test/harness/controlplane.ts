// A real Kubernetes control plane for tests: etcd, kube-apiserver and (for owner-reference garbage
// collection and namespace deletion) kube-controller-manager, started on free 127.0.0.1 ports in a
// temporary folder, the way envtest runs its binaries. Every process started here is stopped by
// stop(), by the exit handlers installed in start(), and, should this process be SIGKILLed, by the
// reaper (reaper.ts) that watches it.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';

export interface ControlPlaneInfo {
  /** https://127.0.0.1:PORT */
  server: string;
  /** base64 PEM of the self-signed serving certificate chain */
  caData: string;
  /** bearer token of a system:masters user */
  adminToken: string;
  /** an admin kubeconfig file, for kubectl and helm */
  kubeconfigPath: string;
  /** folder holding kubectl and helm */
  binDir: string;
  /** the temporary folder holding data, certificates and logs (empty for an external cluster) */
  dir: string;
  /**
   * The apiserver's audit log (JSON lines, one per request at ResponseComplete): the writes of
   * ServiceAccounts of AUDITED_NAMESPACE only, so that it stays small. Absent for an external cluster.
   */
  auditLogPath?: string;
}

/**
 * Requests of the ServiceAccounts of this namespace that write (create, update, patch, delete) are
 * in the audit log: a test that must know which process wrote what gives each its own
 * ServiceAccount here (test/operator/ha.test.ts, the stalled leader).
 */
export const AUDITED_NAMESPACE = 'nko-audited';

const AUDIT_POLICY = JSON.stringify({
  apiVersion: 'audit.k8s.io/v1',
  kind: 'Policy',
  omitStages: ['RequestReceived'],
  rules: [
    { level: 'Metadata', userGroups: [`system:serviceaccounts:${AUDITED_NAMESPACE}`], verbs: ['create', 'update', 'patch', 'delete', 'deletecollection'] },
    { level: 'None' },
  ],
});

export type ControlPlaneProcess = 'etcd' | 'kube-apiserver' | 'kube-controller-manager';

export interface RunningControlPlane {
  info: ControlPlaneInfo;
  stop(): Promise<void>;
  /**
   * Stops one process (SIGTERM, or SIGKILL with `kill`) and starts it again with the same flags,
   * ports and data folder, then waits until the apiserver is ready again (chaos campaigns).
   */
  restart(name: ControlPlaneProcess, options?: { kill?: boolean }): Promise<void>;
}

interface StartOptions {
  binDir: string;
  /** kube-controller-manager runs only its garbage collector, namespace, deployment, replicaset and clusterrole-aggregation controllers (no scheduler, no kubelet) */
  controllerManager?: boolean;
  startTimeoutMs?: number;
  /** kube-apiserver serves Go's pprof at /debug/pprof to an admin (benchmarks' --profile); off otherwise, as clusters run it. */
  profiling?: boolean;
}

const here = fileURLToPath(new URL('.', import.meta.url));

// The kernel picks a listening port at random from its ephemeral range, so two calls of a process can get
// the same one (a control plane asks for three in a row): a port is handed out once per process.
const handedOut = new Set<number>();

export async function freePort(): Promise<number> {
  for (;;) {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    server.close();
    if (address === null || typeof address === 'string') throw new Error('no port assigned');
    if (handedOut.has(address.port)) continue;
    handedOut.add(address.port);
    return address.port;
  }
}

export function kubeconfigYaml(info: Pick<ControlPlaneInfo, 'server' | 'caData'>, token: string, user = 'admin'): string {
  // JSON is valid YAML; kubectl, helm and client-node all read it.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server: info.server, 'certificate-authority-data': info.caData } }],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: 'test', context: { cluster: 'test', user } }],
      'current-context': 'test',
    },
    null,
    2,
  );
}

export async function startControlPlane(options: StartOptions): Promise<RunningControlPlane> {
  // A free port can still be taken by another process (a parallel test's server) before etcd or the
  // apiserver binds it: then the start is tried again on new ports, twice at most. Any other exit fails.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (error) {
      if (attempt === 3 || !String(error).includes('address already in use')) throw error;
      console.error(`control plane: a port was taken, starting again: ${String(error)}`);
    }
  }
}

async function startOnce(options: StartOptions): Promise<RunningControlPlane> {
  const startTimeoutMs = options.startTimeoutMs ?? 90_000;
  const dir = await mkdtemp(join(tmpdir(), 'nko-controlplane-'));
  const children: ChildProcess[] = [];
  const launched = new Map<string, { args: string[]; child: ChildProcess }>();
  const restarting = new Set<ChildProcess>();
  let stopped = false;

  const launch = (name: string, args: string[]): ChildProcess => {
    const log = createWriteStream(join(dir, `${name}.log`), { flags: 'a' });
    const child = spawn(join(options.binDir, name), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    children.push(child);
    launched.set(name, { args, child });
    child.once('exit', (code, signal) => {
      if (!stopped && !restarting.has(child)) console.error(`control plane: ${name} exited (${code ?? signal}); log in ${join(dir, `${name}.log`)}`);
    });
    return child;
  };

  const killAll = (signal: NodeJS.Signals): void => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  // Exit paths of this process that skip stop(): a thrown error, Ctrl-C, a TERM from a runner.
  const onExit = (): void => killAll('SIGKILL');
  const onSignal = (signal: NodeJS.Signals): void => {
    killAll('SIGKILL');
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.once('exit', onExit);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // The reverse order of start: the apiserver stops serving before etcd goes.
    for (const child of [...children].reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await once(child, 'exit');
      clearTimeout(timer);
    }
    process.removeListener('exit', onExit);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    await rm(dir, { recursive: true, force: true });
  };

  let untilReady: ((until: number) => Promise<void>) | undefined;
  const restart = async (name: ControlPlaneProcess, restartOptions: { kill?: boolean } = {}): Promise<void> => {
    const entry = launched.get(name);
    if (entry === undefined || stopped) throw new Error(`control plane: no ${name} to restart`);
    const old = entry.child;
    restarting.add(old);
    if (old.exitCode === null && old.signalCode === null) {
      const exited = once(old, 'exit');
      old.kill(restartOptions.kill === true ? 'SIGKILL' : 'SIGTERM');
      const timer = setTimeout(() => old.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    children.splice(children.indexOf(old), 1);
    const child = launch(name, entry.args);
    // The reaper started with the control plane knows the old pid only: one more for the new one.
    spawn(process.execPath, [join(here, 'reaper.ts'), String(process.pid), dir, String(child.pid)], { detached: true, stdio: 'ignore' }).unref();
    await untilReady?.(Date.now() + startTimeoutMs);
  };

  try {
    const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
    launch('etcd', [
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
      '--unsafe-no-fsync',
      // Every version of an object is kept until the apiserver compacts (every 5 min): the fat-objects
      // suite rewrites objects of about 1.3 MiB (finalizer, status), more than etcd's default 2 GiB
      // quota in its larger run, which would then refuse every write (NOSPACE).
      '--quota-backend-bytes=8589934592',
      '--log-level=warn',
    ]);

    // Service-account tokens (TokenRequest) are signed with this key and verified with its public half.
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    const adminToken = randomBytes(24).toString('hex');
    await writeFile(join(dir, 'tokens.csv'), `${adminToken},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });
    await writeFile(join(dir, 'audit-policy.json'), AUDIT_POLICY);
    const auditLogPath = join(dir, 'audit.log');

    const server = `https://127.0.0.1:${apiPort}`;
    launch('kube-apiserver', [
      `--etcd-servers=http://127.0.0.1:${etcdClient}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--secure-port=${apiPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      // Nothing runs pods, so nothing needs the default/kubernetes Service's endpoints; and from
      // 1.37 the apiserver refuses a loopback advertise address with its endpoint reconciler.
      '--endpoint-reconciler-type=none',
      '--authorization-mode=RBAC',
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--disable-admission-plugins=ServiceAccount',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      `--profiling=${String(options.profiling === true)}`,
      `--audit-policy-file=${join(dir, 'audit-policy.json')}`,
      `--audit-log-path=${auditLogPath}`,
      '--audit-log-format=json',
      '--audit-log-mode=blocking',
    ]);

    // kube-apiserver writes its self-signed serving certificate (with its CA) into --cert-dir at start.
    const certFile = join(dir, 'certs', 'apiserver.crt');
    const deadline = Date.now() + startTimeoutMs;
    let ca: string | undefined;
    while (ca === undefined) {
      ca = await readFile(certFile, 'utf8').catch(() => undefined);
      if (ca === undefined) await waitOrFail(deadline, children, 'kube-apiserver serving certificate', dir);
    }
    const serving = ca;
    untilReady = async (until: number): Promise<void> => {
      const agent = new Agent({ connect: { ca: serving } });
      try {
        for (;;) {
          const ready = await request(`${server}/readyz`, {
            dispatcher: agent,
            headers: { authorization: `Bearer ${adminToken}` },
          }).then(
            async (r) => {
              await r.body.dump();
              return r.statusCode === 200;
            },
            () => false,
          );
          if (ready) break;
          await waitOrFail(until, children, 'kube-apiserver /readyz', dir);
        }
      } finally {
        await agent.close();
      }
    };
    await untilReady(deadline);

    const caData = Buffer.from(ca).toString('base64');
    const kubeconfigPath = join(dir, 'admin.kubeconfig');
    await writeFile(kubeconfigPath, kubeconfigYaml({ server, caData }, adminToken), { mode: 0o600 });

    if (options.controllerManager !== false) {
      launch('kube-controller-manager', [
        `--kubeconfig=${kubeconfigPath}`,
        // deployment, replicaset: the rollouts a key rotation restarts (test/operator/rotation.test.ts).
        // clusterrole-aggregation: fills the built-in view/edit/admin with the tenant roles (test/deploy/tenant-roles.test.ts).
        '--controllers=garbagecollector,namespace,deployment,replicaset,clusterrole-aggregation',
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        `--secure-port=${await freePort()}`,
        `--cert-dir=${join(dir, 'kcm-certs')}`,
        '--use-service-account-credentials=false',
      ]);
    }

    // Should this process die without running its exit handlers (SIGKILL), the reaper stops the
    // children and removes the folder.
    const reaper = spawn(process.execPath, [join(here, 'reaper.ts'), String(process.pid), dir, ...children.map((c) => String(c.pid))], {
      detached: true,
      stdio: 'ignore',
    });
    reaper.unref();

    return {
      info: { server, caData, adminToken, kubeconfigPath, binDir: options.binDir, dir, auditLogPath },
      stop,
      restart,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function waitOrFail(deadline: number, children: ChildProcess[], what: string, dir: string): Promise<void> {
  const dead = children.find((c) => c.exitCode !== null || c.signalCode !== null);
  if (dead !== undefined) {
    // The folder goes with stop(): the end of the process's own log says why (a port taken, a flag refused).
    const name = dead.spawnfile.split('/').at(-1) ?? dead.spawnfile;
    const log = await readFile(join(dir, `${name}.log`), 'utf8').catch(() => '');
    const tail = log.trimEnd().split('\n').slice(-8).join('\n');
    throw new Error(
      `control plane: ${name} exited (${dead.exitCode ?? dead.signalCode}) while waiting for ${what}${tail === '' ? '' : `; the end of its log:\n${tail}`}`,
    );
  }
  if (Date.now() > deadline) throw new Error(`control plane: timed out waiting for ${what}`);
  await new Promise((resolve) => setTimeout(resolve, 100));
}
