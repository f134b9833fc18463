// Jest global setup: one control plane for the whole run, shared by every integration suite through
// a small JSON file named in NKO_TEST_CONTROLPLANE (workers inherit the environment).
// TEST_CONTROLPLANE=off skips it (unit suites only); TEST_KUBECONFIG=<file> uses an existing cluster
// (kind, for example) instead of starting one; TEST_K8S_VERSION=<1.MINOR.PATCH> starts another
// Kubernetes version's control plane (npm run test:k8s, test/controlplane/k8s.sh).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig, VersionApi } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlaneInfo, type RunningControlPlane } from './controlplane.ts';
import { CONTROLPLANE_ENV, K8S_VERSION_ENV, kubernetesVersionUnderTest } from './index.ts';

declare global {
  var nkoControlPlane: RunningControlPlane | undefined;
}

const buildScript = fileURLToPath(new URL('../controlplane/build.sh', import.meta.url));
const buildVersionScript = fileURLToPath(new URL('../controlplane/build-version.sh', import.meta.url));

export default async function globalSetup(): Promise<void> {
  if (process.env.TEST_CONTROLPLANE === 'off') return;
  // Prints the folder of the binaries; builds them first when the pinned versions changed.
  const version = process.env[K8S_VERSION_ENV];
  const build = version !== undefined && version !== '' ? [buildVersionScript, version] : [buildScript];
  const binDir = execFileSync('bash', build, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

  let info: ControlPlaneInfo;
  const external = process.env.TEST_KUBECONFIG;
  if (external !== undefined && external !== '') {
    const kc = new KubeConfig();
    kc.loadFromFile(external);
    const cluster = kc.getCurrentCluster();
    if (cluster === null) throw new Error(`TEST_KUBECONFIG ${external} has no current cluster`);
    info = { server: cluster.server, caData: cluster.caData ?? '', adminToken: kc.getCurrentUser()?.token ?? '', kubeconfigPath: external, binDir, dir: '' };
  } else {
    const started = Date.now();
    globalThis.nkoControlPlane = await startControlPlane({ binDir });
    info = globalThis.nkoControlPlane.info;
    // A run that names a version must never pass on another one's apiserver.
    const kc = new KubeConfig();
    kc.loadFromFile(info.kubeconfigPath);
    const served = (await kc.makeApiClient(VersionApi).getCode()).gitVersion;
    const expected = kubernetesVersionUnderTest();
    if (served !== expected) {
      await globalThis.nkoControlPlane.stop();
      throw new Error(`control plane: kube-apiserver in ${binDir} serves ${served}, not ${expected}`);
    }
    console.error(`\ncontrol plane ${served} ready in ${Date.now() - started} ms at ${info.server}`);
  }
  // Inside the control plane's folder, the file goes with it (also when the reaper cleans up).
  const file = join(info.dir !== '' ? info.dir : mkdtempSync(join(tmpdir(), 'nko-test-')), 'controlplane.json');
  writeFileSync(file, JSON.stringify(info), { mode: 0o600 });
  process.env[CONTROLPLANE_ENV] = file;
}
