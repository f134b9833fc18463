// Jest global setup: one control plane for the whole run, shared by every integration suite through
// a small JSON file named in NKO_TEST_CONTROLPLANE (workers inherit the environment).
// TEST_CONTROLPLANE=off skips it (unit suites only); TEST_KUBECONFIG=<file> uses an existing cluster
// (kind, for example) instead of starting one.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlaneInfo, type RunningControlPlane } from './controlplane.ts';
import { CONTROLPLANE_ENV } from './index.ts';

declare global {
  var nkoControlPlane: RunningControlPlane | undefined;
}

const buildScript = fileURLToPath(new URL('../controlplane/build.sh', import.meta.url));

export default async function globalSetup(): Promise<void> {
  if (process.env.TEST_CONTROLPLANE === 'off') return;
  // Prints the folder of the binaries; builds them first when the pinned versions changed.
  const binDir = execFileSync('bash', [buildScript], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

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
    console.error(`\ncontrol plane ready in ${Date.now() - started} ms at ${info.server}`);
  }
  // Inside the control plane's folder, the file goes with it (also when the reaper cleans up).
  const file = join(info.dir !== '' ? info.dir : mkdtempSync(join(tmpdir(), 'nko-test-')), 'controlplane.json');
  writeFileSync(file, JSON.stringify(info), { mode: 0o600 });
  process.env[CONTROLPLANE_ENV] = file;
}
