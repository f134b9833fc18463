// The emulator in a cluster, from the documented manifest (deploy/emulator/emulator.yaml, which
// docs/install.md applies): the apiserver admits it (in a namespace enforcing the restricted Pod
// Security Standard), and its container's very command, run here, serves the platform API on an
// address other pods reach, the way a pod IP is reached (this machine's first non-loopback IPv4
// address plays it). Without --host it would listen on loopback only: unreachable, as shown.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { VersionApi } from '@kubernetes/client-node';
import { freePort } from '../harness/controlplane.ts';
import { controlPlane } from '../harness/index.ts';
import { chartDir, parseYaml, root, tools, type K8sObject, type Tools } from './kube-tools.ts';

interface Container {
  name: string;
  image: string;
  command: string[];
  args: string[];
  ports: { containerPort: number }[];
}
type Deployment = K8sObject & { spec: { template: { spec: { containers: Container[] } } } };

const manifestPath = join(root, 'deploy/emulator/emulator.yaml');
const objects = parseYaml(readFileSync(manifestPath, 'utf8'));
const deployment = objects.find((o) => o.kind === 'Deployment') as Deployment;
const container = deployment.spec.template.spec.containers[0] as Container;
const podIp = Object.values(networkInterfaces())
  .flat()
  .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address;

/** Runs the container's command with node from src/ (dist/ is the image's build of the same file), on `port`. */
function runDocumented(args: string[]): { child: ChildProcess; bootstrap: Promise<{ baseUrl: string }> } {
  const script = container.command.at(-1);
  expect(container.command).toEqual(['/usr/bin/tini', '--', 'node', 'dist/emulator/main.js']);
  expect(script).toBe('dist/emulator/main.js');
  const child = spawn(join(root, 'node_modules/.bin/node'), [join(root, 'src/emulator/main.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const bootstrap = new Promise<{ baseUrl: string }>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve(JSON.parse(out.slice(0, nl)) as { baseUrl: string });
    });
    child.on('exit', (code) => reject(new Error(`emulator exited with ${code}: ${err.slice(-2000)}`)));
  });
  return { child, bootstrap };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

describe('the emulator manifest (deploy/emulator/emulator.yaml)', () => {
  let t: Tools;

  beforeAll(async () => {
    const cp = await controlPlane();
    t = tools(cp, (await cp.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion);
  });

  afterAll(async () => {
    await t?.kubectl(['delete', '-f', manifestPath, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    t?.dispose();
  });

  it("is admitted by the apiserver, restricted Pod Security included, with the chart's image", async () => {
    const chart = readFileSync(join(chartDir, 'Chart.yaml'), 'utf8');
    expect(container.image).toBe(`ghcr.io/neon-key-operator/neon-key-operator:${/^appVersion: "?([^"\s]+)"?$/m.exec(chart)?.[1]}`);
    // PodSecurity checks a Deployment's pod template with a warning (it enforces on pods): none.
    const applied = await t.kubectlOutput(['apply', '-f', manifestPath]);
    expect(applied.stderr).not.toMatch(/PodSecurity|Warning/);
    const pods = await t.kubectl(['-n', 'neon-emulator', 'get', 'deployment', 'emulator', '-o', 'jsonpath={.metadata.name}']);
    expect(pods).toBe('emulator');
  });

  it('serves the platform API on every interface at the port its Service names, from the documented command', async () => {
    expect(podIp).toBeDefined();
    const port = await freePort();
    const servicePort = (objects.find((o) => o.kind === 'Service') as K8sObject & { spec: { ports: { targetPort: string }[] } }).spec.ports[0]?.targetPort;
    expect(servicePort).toBe('http');
    expect(container.ports).toEqual([expect.objectContaining({ containerPort: 8080 })]);
    expect(container.args).toContain('--port=8080');
    // The documented args, on a free port instead of 8080 (this machine's 8080 may be taken).
    const args = container.args.map((a) => (a === '--port=8080' ? `--port=${port}` : a));
    const documented = runDocumented(args);
    try {
      await documented.bootstrap;
      const response = await fetch(`http://${podIp}:${port}/api/v2/projects`);
      // Reached: the platform API answers (401: no key given).
      expect(response.status).toBe(401);
    } finally {
      await stop(documented.child);
    }
    // The same command without --host: listening on 127.0.0.1 only, which another pod cannot reach.
    const loopback = runDocumented(args.filter((a) => !a.startsWith('--host')));
    try {
      await loopback.bootstrap;
      expect((await fetch(`http://127.0.0.1:${port}/api/v2/projects`)).status).toBe(401);
      await expect(fetch(`http://${podIp}:${port}/api/v2/projects`)).rejects.toThrow();
    } finally {
      await stop(loopback.child);
    }
  });
});
