// What a test suite uses to reach the control plane that the jest global setup started (or the
// cluster named by TEST_KUBECONFIG): an admin client, and clients holding the token of a
// ServiceAccount, so the operator runs with exactly the RBAC a manifest grants it.
import { readFileSync } from 'node:fs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { ControlPlaneInfo } from './controlplane.ts';

export const CONTROLPLANE_ENV = 'NKO_TEST_CONTROLPLANE';
/** Another Kubernetes version to run against (npm run test:k8s -- 1.30.14); unset: test/controlplane/go.mod's. */
export const K8S_VERSION_ENV = 'TEST_K8S_VERSION';

/** The gitVersion (v1.MINOR.PATCH) the started control plane must report. */
export function kubernetesVersionUnderTest(): string {
  const requested = process.env[K8S_VERSION_ENV];
  if (requested !== undefined && requested !== '') return `v${requested.replace(/^v/, '')}`;
  const goMod = readFileSync(new URL('../controlplane/go.mod', import.meta.url), 'utf8');
  const pinned = /^require k8s\.io\/kubernetes (v\S+)/m.exec(goMod)?.[1];
  if (pinned === undefined) throw new Error('test/controlplane/go.mod pins no k8s.io/kubernetes version');
  return pinned;
}

export interface ControlPlane extends ControlPlaneInfo {
  /** system:masters */
  kubeConfig: KubeConfig;
  kubeConfigForToken(token: string): KubeConfig;
  /** A token of the ServiceAccount, from the TokenRequest API. */
  mintServiceAccountToken(namespace: string, name: string, expirationSeconds?: number): Promise<string>;
}

let cached: ControlPlane | undefined;

export async function controlPlane(): Promise<ControlPlane> {
  if (cached !== undefined) return cached;
  const file = process.env[CONTROLPLANE_ENV];
  if (file === undefined || file === '') {
    throw new Error(`no control plane: this suite needs the jest global setup (run 'npm test' or 'npm run jest', not with TEST_CONTROLPLANE=off)`);
  }
  const info = JSON.parse(readFileSync(file, 'utf8')) as ControlPlaneInfo & { external?: boolean };
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(info.kubeconfigPath);

  const kubeConfigForToken = (token: string): KubeConfig => {
    const kc = new KubeConfig();
    const cluster = kubeConfig.getCurrentCluster();
    if (cluster === null) throw new Error('admin kubeconfig has no current cluster');
    kc.loadFromOptions({
      clusters: [{ ...cluster, name: 'test' }],
      users: [{ name: 'sa', token }],
      contexts: [{ name: 'test', cluster: 'test', user: 'sa' }],
      currentContext: 'test',
    });
    return kc;
  };

  const mintServiceAccountToken = async (namespace: string, name: string, expirationSeconds = 3600): Promise<string> => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const response = await core.createNamespacedServiceAccountToken({
      namespace,
      name,
      body: { spec: { audiences: [], expirationSeconds } },
    });
    const token = response.status?.token;
    if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
    return token;
  };

  cached = { ...info, kubeConfig, kubeConfigForToken, mintServiceAccountToken };
  return cached;
}
