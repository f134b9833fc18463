// What a campaign runs against: its own control plane (etcd, kube-apiserver, kube-controller-manager
// on loopback, from test/harness), the CRDs and the RBAC of deploy/base, a kubeconfig holding a
// token of the operator's ServiceAccount, a namespace with the credentials Secret, and the platform
// emulator (in this process: the operator is the process that gets killed, not the platform).
import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, loadAllYaml } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../src/emulator/server.ts';
import { CRD_FILES, renderCrdYaml, type CrdKind } from '../src/operator/resources/crd.ts';
import { kubeconfigYaml, startControlPlane, type RunningControlPlane } from '../test/harness/controlplane.ts';
import { sleep } from './options.ts';

const run = promisify(execFile);
export const root = fileURLToPath(new URL('..', import.meta.url));
/** The floor of spec.rotation.gracePeriod in the campaign (1m in a cluster install): the workload's keys retire within seconds. */
export const CHAOS_MIN_ROTATION_GRACE = '1s';
export const NAMESPACE = 'chaos';
const OPERATOR_NAMESPACE = 'neon-key-operator-system';
const OPERATOR_SERVICE_ACCOUNT = 'neon-key-operator';

export interface Environment {
  controlPlane: RunningControlPlane;
  emulator: Emulator;
  /** system:masters, for the workload and the checks. */
  kubeConfig: KubeConfig;
  objects: CustomObjectsApi;
  core: CoreV1Api;
  /** The kubeconfig file the operator runs with (its ServiceAccount's token). */
  operatorKubeconfig: string;
  organizationId: string;
  /** Organization projects ProjectApiKeys are made for. */
  projectIds: string[];
  /** The personal key of an organization administrator: the credentials of every resource. */
  adminKey: string;
  stop(): Promise<void>;
}

export async function startEnvironment(out: string): Promise<Environment> {
  const binDir = execFileSync('bash', [join(root, 'test/controlplane/build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  const controlPlane = await startControlPlane({ binDir });
  let emulator: Emulator | undefined;
  try {
    const kubectl = async (input: string | undefined, ...args: string[]): Promise<string> => {
      const child = run(join(binDir, 'kubectl'), args, { env: { PATH: process.env.PATH, KUBECONFIG: controlPlane.info.kubeconfigPath, HOME: '/tmp' } });
      child.child.stdin?.end(input);
      return (await child).stdout;
    };
    // crds/ with the gracePeriod floor the operator runs with here (CHAOS_MIN_ROTATION_GRACE), so
    // rotations end within the workload's seconds.
    const crdYaml = (Object.keys(CRD_FILES) as CrdKind[]).map((kind) => renderCrdYaml(kind, { minRotationGrace: CHAOS_MIN_ROTATION_GRACE })).join('\n');
    await kubectl(crdYaml, 'apply', '--server-side', '--force-conflicts', '--field-manager=chaos', '-f', '-');
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(controlPlane.info.kubeconfigPath);
    const crds = kubeConfig.makeApiClient(ApiextensionsV1Api);
    for (const name of Object.values(CRD_FILES).map((file) => file.replace(/^keys\.neon\.dev_(.*)\.yaml$/, '$1.keys.neon.dev'))) {
      for (let i = 0; ; i += 1) {
        const crd = await crds.readCustomResourceDefinition({ name });
        if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true) break;
        if (i > 200) throw new Error(`CRD ${name} never Established`);
        await sleep(100);
      }
    }
    // Only the identity and RBAC of deploy/base: the operator runs here as a process, not a Pod.
    const base = loadAllYaml(await kubectl(undefined, 'kustomize', join(root, 'deploy/base'))) as { kind: string }[];
    const rbacKinds = new Set(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);
    await kubectl(
      base
        .filter((o) => rbacKinds.has(o.kind))
        .map((o) => JSON.stringify(o))
        .join('\n'),
      'apply',
      '--server-side',
      '--field-manager=chaos',
      '-f',
      '-',
    );
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const token = await core.createNamespacedServiceAccountToken({
      namespace: OPERATOR_NAMESPACE,
      name: OPERATOR_SERVICE_ACCOUNT,
      body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } },
    });
    const operatorKubeconfig = join(out, 'operator.kubeconfig');
    writeFileSync(operatorKubeconfig, kubeconfigYaml(controlPlane.info, token.status?.token ?? '', OPERATOR_SERVICE_ACCOUNT), { mode: 0o600 });

    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    const admin = emulator.bootstrap.users.find((u) => Object.values(u.orgRoles).includes('admin') && u.personalKey !== undefined);
    if (admin?.personalKey === undefined) throw new Error('the emulator seed has no organization administrator');
    const organizationId = Object.keys(admin.orgRoles)[0] ?? '';
    const projectIds = emulator.bootstrap.projects.filter((p) => p.organizationId === organizationId).map((p) => p.id);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await core.createNamespacedSecret({ namespace: NAMESPACE, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: admin.personalKey } } });
    const started = emulator;
    return {
      controlPlane,
      emulator,
      kubeConfig,
      core,
      objects: kubeConfig.makeApiClient(CustomObjectsApi),
      operatorKubeconfig,
      organizationId,
      projectIds,
      adminKey: admin.personalKey,
      stop: async () => {
        await started.close();
        await controlPlane.stop();
      },
    };
  } catch (error) {
    await emulator?.close();
    await controlPlane.stop();
    throw error;
  }
}
