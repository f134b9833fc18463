// Who is who in a hostile-tenant campaign, on top of chaos's environment (control plane, CRDs, the
// operator's RBAC, the emulator): tenant namespaces, each with a ServiceAccount whose token has only
// a Role on ApiKeys, ProjectApiKeys, ApiKeyInventories and Secrets of its namespace (as test/operator/hostile-tenant.test.ts
// sets one up); in each tenant namespace, the platform team's workloads, which never consented to be
// restarted by a tenant's rotation; and victim namespaces of the same organization, holding the
// administrator's key of chaos's environment. Two modes of tenant: with namespace credentials (its
// own organization administrator on the platform, its key in the tenant's Secret neon-admin), and
// with issuers (no platform key at all; its Namespace labelled by the platform team for the
// ClusterKeyIssuers of issuers.ts, whose keys live where no tenant reads).
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { Environment } from '../environment.ts';
import { admin } from '../platform-faults.ts';
import { sleep } from '../options.ts';
import { ISSUER_LABEL, ISSUERS_NAMESPACE, issuerPolicies, type IssuerPlan } from './issuers.ts';

export const GROUP = 'keys.neon.dev';
export const VERSION = 'v1alpha1';

export interface Tenant {
  index: number;
  namespace: string;
  /** credentials: it holds an administrator's key (spec.credentialsSecretRef); issuer: no platform key (spec.issuerRef). */
  mode: 'credentials' | 'issuer';
  /** The tenant's own clients: its ServiceAccount's token, nothing else. */
  objects: CustomObjectsApi;
  core: CoreV1Api;
  /** The personal key of the tenant's organization administrator (in its Secret neon-admin); none in issuer mode. */
  userKey: string | undefined;
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
  /** The platform team's ClusterKeyIssuers (issuers.ts). */
  issuers: IssuerPlan[];
  /** The labels the platform team put on each Namespace of the campaign (tenants cannot write them). */
  namespaceLabels: Map<string, Record<string, string>>;
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

/** Tenants `tenant-0`... hold namespace credentials, the `issuerTenants` after them use issuers. */
export async function castRoles(env: Environment, tenants: number, victimNamespaces: number, issuerTenants = 0): Promise<Cast> {
  const core = env.core;
  const rbac = env.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  const apps = env.kubeConfig.makeApiClient(AppsV1Api);
  const workloadSecret = 'platform-db';
  const cast: Cast = { tenants: [], victimNamespaces: [], workloads: [], workloadSecret, keysBefore: 0, issuers: [], namespaceLabels: new Map() };

  for (let i = 0; i < victimNamespaces; i += 1) {
    const namespace = `victim-${i}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: env.adminKey } } });
    cast.victimNamespaces.push(namespace);
    cast.namespaceLabels.set(namespace, {});
  }

  // The issuers, before the tenants that use them: a user each, its key in the operator's namespace.
  const issuerNamespaces = Array.from({ length: issuerTenants }, (_, i) => `tenant-${tenants + i}`);
  for (const { name, allow } of issuerPolicies(issuerNamespaces, cast.victimNamespaces, env.projectIds)) {
    const user = await admin<{ id: string; personalKey: string }>(env.emulator, 'POST', '/users', { name: `issuer-${name}`, orgRoles: { [env.organizationId]: 'admin' } });
    const secretName = `issuer-${name}`;
    await core.createNamespacedSecret({ namespace: ISSUERS_NAMESPACE, body: { metadata: { name: secretName }, stringData: { apiKey: user.personalKey } } });
    await env.objects.createClusterCustomObject({ group: GROUP, version: VERSION, plural: 'clusterkeyissuers', body: {
      apiVersion: `${GROUP}/${VERSION}`, kind: 'ClusterKeyIssuer', metadata: { name },
      spec: { organizationId: env.organizationId, credentialsSecretRef: { name: secretName }, allow },
    } });
    cast.issuers.push({ name, userId: user.id, userKey: user.personalKey, secretName, allow });
  }

  for (let i = 0; i < tenants + issuerTenants; i += 1) {
    const namespace = `tenant-${i}`;
    const mode = i < tenants ? 'credentials' : 'issuer';
    // The platform team's label on an issuer tenant's Namespace: tenant-keys selects it.
    const labels: Record<string, string> = mode === 'issuer' ? { [ISSUER_LABEL]: 'tenant-keys' } : {};
    await core.createNamespace({ body: { metadata: { name: namespace, labels } } });
    cast.namespaceLabels.set(namespace, labels);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'tenant' } } });
    await rbac.createNamespacedRole({ namespace, body: {
      metadata: { name: 'tenant-edit' },
      rules: [
        { apiGroups: [GROUP], resources: ['apikeys', 'projectapikeys', 'apikeyinventories'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
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
    // A tenant with namespace credentials: its team has an administrator of the same organization
    // as the victims. An issuer tenant holds no platform key.
    const user = mode === 'credentials' ? await admin<{ personalKey: string }>(env.emulator, 'POST', '/users', { name: `tenant-${i}-admin`, orgRoles: { [env.organizationId]: 'admin' } }) : undefined;
    for (let attempt = 0; ; attempt += 1) {
      try {
        if (user !== undefined) await tenantCore.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: user.personalKey } } });
        else await tenantCore.listNamespacedSecret({ namespace });
        break;
      } catch (error) {
        if (attempt > 50) throw error;
        await sleep(100); // the Role not in force yet
      }
    }
    cast.tenants.push({ index: i, namespace, mode, objects: config.makeApiClient(CustomObjectsApi), core: tenantCore, userKey: user?.personalKey });

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
