// The kind e2e without Docker: the chart installed with helm, the operator run as a process with
// exactly the Deployment's args and env and the token of the chart's ServiceAccount, against the
// platform emulator. Proves that what the chart grants and passes is enough to issue and revoke a key.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { VersionApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { testCrdYaml } from '../harness/crds.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { OperatorProcess } from '../harness/operator-process.ts';
import { byKind, chartDir, parseYaml, tools, type K8sObject, type Tools } from './kube-tools.ts';

const suffix = randomBytes(3).toString('hex');
const ns = `chartop-${suffix}`;
const appNs = `chartop-${suffix}-app`;
// A second watched namespace: the operator runs an informer per namespace with a Role in each.
const otherAppNs = `chartop-${suffix}-app2`;
const release = `op-${suffix}`;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string } };
}
interface KeyResource {
  metadata: { name: string };
  status?: { keyId?: number; secretName?: string; conditions?: { type: string; status: string; reason: string; message: string }[] };
}

describe("the operator run with the chart's RBAC, args and env", () => {
  let cp: ControlPlane;
  let t: Tools;
  let emulator: Emulator;
  let operator: OperatorProcess | undefined;
  const operatorLog = (): string => operator?.output() ?? '';
  /** The operator's kubeconfig folder, removed in afterAll. */
  let scratch: string | undefined;

  const poll = async <T>(what: string, read: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; operator log:\n${operatorLog().slice(-4000)}`);
      if (operator?.child.exitCode !== null && operator?.child.exitCode !== undefined)
        throw new Error(`the operator exited (${operator.child.exitCode}) while waiting for ${what}:\n${operatorLog().slice(-4000)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  };

  beforeAll(async () => {
    cp = await controlPlane();
    const kubeVersion = (await cp.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion;
    t = tools(cp, kubeVersion);
    // --force-conflicts: other suites of this run apply the same files under their own field manager.
    await t.kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=deploy-test', '-f', '-'], testCrdYaml());
    await t.kubectl(['wait', '--for=condition=Established', '--timeout=30s', 'crd/apikeys.keys.neon.dev', 'crd/projectapikeys.keys.neon.dev']);
    await t.kubectl(['create', 'namespace', ns]);
    await t.kubectl(['create', 'namespace', appNs]);
    await t.kubectl(['create', 'namespace', otherAppNs]);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
  });

  afterAll(async () => {
    await operator?.stop(10_000);
    await emulator?.close();
    await t?.helm(['uninstall', release, '--namespace', ns, '--wait=false']).catch(() => undefined);
    await t?.kubectl(['delete', 'namespace', appNs, otherAppNs, ns, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    t?.dispose();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('issues a ProjectApiKey in each of two watched namespaces as the elected leader, serves probes and metrics on the pod IP, and revokes the key on delete', async () => {
    // The release watches the two application namespaces only: the narrowest RBAC the chart renders.
    // crds.enabled=false: the CRDs exist already (applied with kubectl); a release never takes them over.
    await t.helm([
      'install',
      release,
      chartDir,
      '--namespace',
      ns,
      '--set',
      'crds.enabled=false',
      '--set',
      'rbac.issuedKeysPolicy=false',
      '--set',
      `watchNamespaces={${appNs},${otherAppNs}}`,
    ]);
    const rendered = parseYaml(await t.helm(['get', 'manifest', release, '--namespace', ns]));
    const deployment = byKind(rendered, 'Deployment')[0] as K8sObject & {
      spec: { template: { spec: { serviceAccountName: string; containers: { args: string[]; env: EnvVar[] }[] } } };
    };
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    if (container === undefined) throw new Error('no container');

    // The Deployment's command line, with the platform URL replaced by the emulator's and the
    // ports by free ones; the bind addresses keep the chart's form ":PORT" (every interface).
    const [metricsPort, healthPort] = [await freePort(), await freePort()];
    const args = container.args.map((arg) => {
      if (arg.startsWith('--platform-url=')) return `--platform-url=${emulator.baseUrl}`;
      if (arg.startsWith('--metrics-bind-address=')) return arg.replace(/:\d+$/, `:${metricsPort}`);
      if (arg.startsWith('--health-probe-bind-address=')) return arg.replace(/:\d+$/, `:${healthPort}`);
      return arg;
    });
    expect(args).toEqual(expect.arrayContaining([`--metrics-bind-address=:${metricsPort}`, `--health-probe-bind-address=:${healthPort}`]));
    expect(args).toContain(`--watch-namespace=${[appNs, otherAppNs].sort().join(',')}`);
    const fields: Record<string, string> = { 'metadata.namespace': ns, 'metadata.name': `${release}-pod-0` };
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: tmpdir() };
    for (const variable of container.env) {
      env[variable.name] = variable.value ?? fields[variable.valueFrom?.fieldRef?.fieldPath ?? ''] ?? '';
    }

    const token = await cp.mintServiceAccountToken(ns, pod.serviceAccountName, 3600);
    scratch = mkdtempSync(join(tmpdir(), 'nko-chartop-'));
    const kubeconfig = join(scratch, 'operator.kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(cp, token, pod.serviceAccountName), { mode: 0o600 });
    operator = new OperatorProcess({ args: [`--kubeconfig=${kubeconfig}`, ...args], env });

    const admin = emulator.bootstrap.users.find((u) => Object.values(u.orgRoles).includes('admin') && u.personalKey !== undefined);
    const orgId = Object.entries(admin?.orgRoles ?? {}).find(([, role]) => role === 'admin')?.[0];
    const project = emulator.bootstrap.projects.find((p) => p.organizationId === orgId);
    if (admin?.personalKey === undefined || orgId === undefined || project === undefined)
      throw new Error('the emulator seed has no admin, organization or project');
    for (const namespace of [appNs, otherAppNs]) {
      await t.kubectl(['create', 'secret', 'generic', 'neon-admin', '-n', namespace, `--from-literal=apiKey=${admin.personalKey}`]);
    }
    const keyResource = (): string =>
      JSON.stringify({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ProjectApiKey',
        metadata: { name: 'chart-key' },
        spec: {
          organizationId: orgId,
          projectId: project.id,
          keyName: 'chart-key',
          credentialsSecretRef: { name: 'neon-admin', key: 'apiKey' },
          deletionPolicy: 'Revoke',
        },
      });
    await t.kubectl(['apply', '-n', appNs, '-f', '-'], keyResource());
    await t.kubectl(['apply', '-n', otherAppNs, '-f', '-'], keyResource());

    const readyIn = (namespace: string): Promise<KeyResource> =>
      poll(`ProjectApiKey ${namespace}/chart-key Ready`, async () => {
        const resource = JSON.parse(await t.kubectl(['get', 'projectapikey', 'chart-key', '-n', namespace, '-o', 'json'])) as KeyResource;
        return resource.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? resource : undefined;
      });
    const ready = await readyIn(appNs);
    const otherReady = await readyIn(otherAppNs);
    expect(otherReady.status?.keyId).not.toBe(ready.status?.keyId);
    // It reconciled as the leader, on a Lease in the release namespace that the chart's Role lets it hold.
    expect(args).toContain('--leader-elect');
    const holder = await t.kubectl(['get', 'lease', 'neon-key-operator', '-n', ns, '-o', 'jsonpath={.spec.holderIdentity}']);
    expect(holder).toBe(`${release}-pod-0`);
    const keyId = ready.status?.keyId;
    const secretName = ready.status?.secretName ?? 'chart-key';
    expect(typeof keyId).toBe('number');
    const secret = JSON.parse(await t.kubectl(['get', 'secret', secretName, '-n', appNs, '-o', 'json'])) as {
      metadata: { labels?: Record<string, string> };
      data?: Record<string, string>;
    };
    expect(secret.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('neon-key-operator');
    const issued = Buffer.from(Object.values(secret.data ?? {})[0] ?? '', 'base64').toString('utf8');
    expect(issued).toMatch(/^[a-z0-9]{64}$/);
    expect(operatorLog()).not.toContain(issued);
    const works = await fetch(`${emulator.baseUrl}/projects/${project.id}`, { headers: { authorization: `Bearer ${issued}` } });
    expect(works.status).toBe(200);

    // The kubelet probes and Prometheus scrapes the pod IP, not loopback: ":PORT" must listen on
    // every interface. This machine's first non-loopback IPv4 address plays the pod IP.
    const podIp =
      Object.values(networkInterfaces())
        .flat()
        .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.1';
    for (const [port, path] of [
      [healthPort, '/healthz'],
      [healthPort, '/readyz'],
      [metricsPort, '/metrics'],
    ] as const) {
      const response = await fetch(`http://${podIp}:${port}${path}`).catch((error: unknown) => {
        throw new Error(
          `GET http://${podIp}:${port}${path} (the chart's probe or scrape): ${error instanceof Error ? String(error.cause ?? error.message) : String(error)}`,
        );
      });
      expect([path, response.status]).toEqual([path, 200]);
      const body = await response.text();
      if (path === '/metrics') expect(body).toMatch(/^# TYPE \S+ \w+$/m);
      expect(body).not.toContain(issued);
    }
    // Each port serves its own paths only: a NetworkPolicy that opens the health port to the
    // kubelet (networkPolicy.healthFrom) must not open the metrics with it.
    for (const [port, path] of [
      [healthPort, '/metrics'],
      [metricsPort, '/healthz'],
      [metricsPort, '/readyz'],
    ] as const) {
      expect([port, path, (await fetch(`http://${podIp}:${port}${path}`)).status]).toEqual([port, path, 404]);
    }

    for (const namespace of [appNs, otherAppNs]) {
      await t.kubectl(['delete', 'projectapikey', 'chart-key', '-n', namespace, '--wait=false']);
      await poll(`ProjectApiKey ${namespace}/chart-key gone`, async () => {
        const left = await t.kubectl(['get', 'projectapikeys', '-n', namespace, '-o', 'name']);
        return left.trim() === '' ? true : undefined;
      });
    }
    const keys = (await (await fetch(`${emulator.adminUrl}/keys`)).json()) as { id: number; revoked: boolean }[];
    expect(keys.find((k) => k.id === keyId)?.revoked).toBe(true);
    expect(keys.find((k) => k.id === otherReady.status?.keyId)?.revoked).toBe(true);
    const revoked = await fetch(`${emulator.baseUrl}/projects/${project.id}`, { headers: { authorization: `Bearer ${issued}` } });
    expect(revoked.status).toBe(401);
  });
});
