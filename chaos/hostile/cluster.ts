// Who is who in a hostile-tenant campaign, on top of chaos's environment (control plane, CRDs, the
// operator's RBAC, the emulator): tenant namespaces, each with a ServiceAccount whose token has only
// a Role on ApiKeys, ProjectApiKeys and Secrets of its namespace (as test/operator/hostile-tenant.test.ts
// sets one up) and its own organization administrator on the platform; in each tenant namespace, the
// platform team's workloads, which never consented to be restarted by a tenant's rotation; and victim
// namespaces of the same organization, holding the administrator's key of chaos's environment.
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { Environment } from '../environment.ts';
import { admin } from '../platform-faults.ts';
import { sleep } from '../options.ts';

export const GROUP = 'keys.neon.dev';
export const VERSION = 'v1alpha1';

export interface Tenant {
  index: number;
  namespace: string;
  /** The tenant's own clients: its ServiceAccount's token, nothing else. */
  objects: CustomObjectsApi;
  core: CoreV1Api;
  /** The personal key of the tenant's organization administrator (in its Secret neon-admin). */
  userKey: string;
}

export interface PlatformWorkload { namespace: string; kind: 'Deployment' | 'StatefulSet'; name: string; generation: number; template: string }

export interface Cast {
  tenants: Tenant[];
  victimNamespaces: string[];
  /** The platform team's workloads in the tenant namespaces, as they were made. */
  workloads: PlatformWorkload[];
  /** The platform team's Secret their workloads read (a tenant may name its own Secret so: a conflict). */
  workloadSecret: string;
  /** Highest platform key id before the campaign: every key above it was made during the run. */
  keysBefore: number;
}

/** A client configuration that authenticates with a bearer token only. */
function kubeConfigForToken(adminConfig: KubeConfig, token: string): KubeConfig {
  const cluster = adminConfig.getCurrentCluster();
  if (cluster === null) throw new Error('the admin kubeconfig has no current cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: 'hostile' }],
    users: [{ name: 'tenant', token }],
    contexts: [{ name: 'hostile', cluster: 'hostile', user: 'tenant' }],
    currentContext: 'hostile',
  });
  return kc;
}

export async function castRoles(env: Environment, tenants: number, victimNamespaces: number): Promise<Cast> {
  const core = env.core;
  const rbac = env.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  const apps = env.kubeConfig.makeApiClient(AppsV1Api);
  const workloadSecret = 'platform-db';
  const cast: Cast = { tenants: [], victimNamespaces: [], workloads: [], workloadSecret, keysBefore: 0 };

  for (let i = 0; i < victimNamespaces; i += 1) {
    const namespace = `victim-${i}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: env.adminKey } } });
    cast.victimNamespaces.push(namespace);
  }

  for (let i = 0; i < tenants; i += 1) {
    const namespace = `tenant-${i}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'tenant' } } });
    await rbac.createNamespacedRole({ namespace, body: {
      metadata: { name: 'tenant-edit' },
      rules: [
        { apiGroups: [GROUP], resources: ['apikeys', 'projectapikeys'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
        { apiGroups: [''], resources: ['events'], verbs: ['get', 'list'] },
      ],
    } });
    await rbac.createNamespacedRoleBinding({ namespace, body: {
      metadata: { name: 'tenant-edit' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant-edit' },
      subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace }],
    } });
    const token = await core.createNamespacedServiceAccountToken({ namespace, name: 'tenant', body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } } });
    const config = kubeConfigForToken(env.kubeConfig, token.status?.token ?? '');
    const tenantCore = config.makeApiClient(CoreV1Api);
    // The tenant's team has an administrator of the same organization as the victims.
    const user = await admin<{ personalKey: string }>(env.emulator, 'POST', '/users', { name: `tenant-${i}-admin`, orgRoles: { [env.organizationId]: 'admin' } });
    for (let attempt = 0; ; attempt += 1) {
      try {
        await tenantCore.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: user.personalKey } } });
        break;
      } catch (error) {
        if (attempt > 50) throw error;
        await sleep(100); // the Role not in force yet
      }
    }
    cast.tenants.push({ index: i, namespace, objects: config.makeApiClient(CustomObjectsApi), core: tenantCore, userKey: user.personalKey });

    // The platform team's workloads in the tenant's namespace (replicas 0: no node is needed, a
    // restart still shows as a new generation and pod template), reading the platform team's own
    // Secret. They declare no consent to be restarted by anyone's rotation.
    const template = {
      metadata: { labels: { app: 'platform-api' } },
      spec: { containers: [{ name: 'api', image: 'example.invalid/platform-api:1', envFrom: [{ secretRef: { name: workloadSecret } }] }] },
    };
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: workloadSecret }, stringData: { password: 'platform-team-secret' } } });
    const deployment = await apps.createNamespacedDeployment({ namespace, body: {
      metadata: { name: 'platform-api' }, spec: { replicas: 0, selector: { matchLabels: { app: 'platform-api' } }, template },
    } });
    const statefulSet = await apps.createNamespacedStatefulSet({ namespace, body: {
      metadata: { name: 'platform-store' }, spec: { replicas: 0, serviceName: 'platform-store', selector: { matchLabels: { app: 'platform-api' } }, template },
    } });
    cast.workloads.push(
      { namespace, kind: 'Deployment', name: 'platform-api', generation: deployment.metadata?.generation ?? 1, template: JSON.stringify(deployment.spec?.template) },
      { namespace, kind: 'StatefulSet', name: 'platform-store', generation: statefulSet.metadata?.generation ?? 1, template: JSON.stringify(statefulSet.spec?.template) },
    );
  }
  const keys = await admin<{ id: number }[]>(env.emulator, 'GET', '/keys');
  cast.keysBefore = Math.max(0, ...keys.map((k) => k.id));
  return cast;
}
