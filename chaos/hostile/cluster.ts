// Who is who in a hostile-tenant campaign, on top of chaos's environment (control plane, CRDs, the
// operator's RBAC, the emulator): tenant namespaces, each with a ServiceAccount whose token has only
// a Role on ApiKeys, ProjectApiKeys, ApiKeyInventories and Secrets of its namespace (as test/operator/hostile-tenant.test.ts
// sets one up); in each tenant namespace, the platform team's workloads, which never consented to be
// restarted by a tenant's rotation; and victim namespaces of the same organization, holding the
// administrator's key of chaos's environment. Two modes of tenant: with namespace credentials (its
// own organization administrator on the platform, its key in the tenant's Secret neon-admin), and
// with issuers (no platform key at all; its Namespace labelled by the platform team for the
// ClusterKeyIssuers of issuers.ts, whose keys live where no tenant reads). A tenant with namespace
// credentials also holds the key of a user who belongs to no organization (foreign-creds), for the
// creates it names the victims' organization with. The admission policy of deploy/base that keeps
// the finalizer of a key an issuer made is applied here (chaos's environment applies only the RBAC
// of deploy/base), so tenants meet it; it exempts whoever may update the finalizers subresource: the
// operator (its ServiceAccount's token, with the RBAC of deploy/base) and the campaign's
// administrator (system:masters), not the tenants' Role.
// A tenant also writes Deployments, StatefulSets and DaemonSets of its namespace, as the built-in edit
// role lets a team do (its own workloads, consenting or not to restarts: the discover playbook). In
// each victim namespace a workload of each kind consents to restarts for DISCOVER_SECRET, the Secret
// name the tenants' discover playbooks use: only a rotation in its own namespace may restart them, and
// none does.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  loadAllYaml,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { root, type Environment } from '../environment.ts';
import { admin } from '../platform-faults.ts';
import { sleep } from '../options.ts';
import { ISSUER_LABEL, ISSUERS_NAMESPACE, issuerPolicies, MISSING_ISSUER, type IssuerPlan } from './issuers.ts';

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
  apps: AppsV1Api;
  /** The personal key of the tenant's organization administrator (in its Secret neon-admin); none in issuer mode. */
  userKey: string | undefined;
  /** The personal key of a user of no organization (in its Secret foreign-creds); none in issuer mode. */
  foreignKey: string | undefined;
}

/** The tenant's Secret holding a key of a user who belongs to no organization. */
export const FOREIGN_CREDENTIALS = 'foreign-creds';
export const FINALIZER = 'keys.neon.dev/finalizer';
/** The Secret name (spec.secret.name) the tenants' discover playbooks rotate, and the victims' consenting Deployment reads. */
export const DISCOVER_SECRET = 'app-db';
export const RESTART_CONSENT = 'keys.neon.dev/restart-on-rotation';

/** A workload that must never be restarted by a tenant: the platform team's (no consent), or a victim's consenting to DISCOVER_SECRET (`consents`). */
export interface PlatformWorkload {
  namespace: string;
  kind: 'Deployment' | 'StatefulSet' | 'DaemonSet';
  name: string;
  generation: number;
  template: string;
  consents?: string;
}

/** A DaemonSet pod template's node selector no node matches: no pod runs (the control plane has no nodes anyway). */
export const NO_NODE = { 'example.com/no-such-node': 'true' };

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
    const consumerTemplate = (app: string, nodeSelector?: Record<string, string>) => ({
      metadata: { labels: { app } },
      spec: {
        ...(nodeSelector !== undefined ? { nodeSelector } : {}),
        containers: [{ name: 'app', image: 'example.invalid/consumer-app:1', envFrom: [{ secretRef: { name: DISCOVER_SECRET } }] }],
      },
    });
    const consenting = (name: string) => ({ name, annotations: { [RESTART_CONSENT]: DISCOVER_SECRET } });
    const consumers = [
      {
        kind: 'Deployment' as const,
        made: await apps.createNamespacedDeployment({
          namespace,
          body: {
            metadata: consenting('consumer-app'),
            spec: { replicas: 0, selector: { matchLabels: { app: 'consumer-app' } }, template: consumerTemplate('consumer-app') },
          },
        }),
      },
      {
        kind: 'StatefulSet' as const,
        made: await apps.createNamespacedStatefulSet({
          namespace,
          body: {
            metadata: consenting('consumer-store'),
            spec: {
              replicas: 0,
              serviceName: 'consumer-store',
              selector: { matchLabels: { app: 'consumer-store' } },
              template: consumerTemplate('consumer-store'),
            },
          },
        }),
      },
      {
        kind: 'DaemonSet' as const,
        made: await apps.createNamespacedDaemonSet({
          namespace,
          body: {
            metadata: consenting('consumer-agent'),
            spec: { selector: { matchLabels: { app: 'consumer-agent' } }, template: consumerTemplate('consumer-agent', NO_NODE) },
          },
        }),
      },
    ];
    for (const { kind, made } of consumers) {
      cast.workloads.push({
        namespace,
        kind,
        name: made.metadata?.name ?? '',
        generation: made.metadata?.generation ?? 1,
        template: JSON.stringify(made.spec?.template),
        consents: DISCOVER_SECRET,
      });
    }
  }

  // The issuers, before the tenants that use them: a user each, its key in the operator's namespace.
  const issuerNamespaces = Array.from({ length: issuerTenants }, (_, i) => `tenant-${tenants + i}`);
  for (const { name, allow } of issuerPolicies(issuerNamespaces, cast.victimNamespaces, env.projectIds)) {
    const user = await admin<{ id: string; personalKey: string }>(env.emulator, 'POST', '/users', {
      name: `issuer-${name}`,
      orgRoles: { [env.organizationId]: 'admin' },
    });
    const secretName = `issuer-${name}`;
    await core.createNamespacedSecret({ namespace: ISSUERS_NAMESPACE, body: { metadata: { name: secretName }, stringData: { apiKey: user.personalKey } } });
    await env.objects.createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'clusterkeyissuers',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ClusterKeyIssuer',
        metadata: { name },
        spec: { organizationId: env.organizationId, credentialsSecretRef: { name: secretName }, allow },
      },
    });
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
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'tenant-edit' },
        rules: [
          {
            apiGroups: [GROUP],
            resources: ['apikeys', 'projectapikeys', 'apikeyinventories'],
            verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
          },
          { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
          { apiGroups: [''], resources: ['events'], verbs: ['get', 'list'] },
          {
            apiGroups: ['apps'],
            resources: ['deployments', 'statefulsets', 'daemonsets'],
            verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
          },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'tenant-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant-edit' },
        subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace }],
      },
    });
    const token = await core.createNamespacedServiceAccountToken({
      namespace,
      name: 'tenant',
      body: { spec: { audiences: [], expirationSeconds: 24 * 3600 } },
    });
    const config = kubeConfigForToken(env.kubeConfig, token.status?.token ?? '');
    const tenantCore = config.makeApiClient(CoreV1Api);
    // A tenant with namespace credentials: its team has an administrator of the same organization
    // as the victims. An issuer tenant holds no platform key.
    const user =
      mode === 'credentials'
        ? await admin<{ personalKey: string }>(env.emulator, 'POST', '/users', { name: `tenant-${i}-admin`, orgRoles: { [env.organizationId]: 'admin' } })
        : undefined;
    // And a user of no organization (issue 41: creates naming the victims' organization with credentials that do not belong to it).
    const foreign =
      mode === 'credentials' ? await admin<{ personalKey: string }>(env.emulator, 'POST', '/users', { name: `tenant-${i}-foreign`, orgRoles: {} }) : undefined;
    for (let attempt = 0; ; attempt += 1) {
      try {
        if (user !== undefined)
          await tenantCore.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: user.personalKey } } });
        else await tenantCore.listNamespacedSecret({ namespace });
        break;
      } catch (error) {
        if (attempt > 50) throw error;
        await sleep(100); // the Role not in force yet
      }
    }
    if (foreign !== undefined)
      await tenantCore.createNamespacedSecret({ namespace, body: { metadata: { name: FOREIGN_CREDENTIALS }, stringData: { apiKey: foreign.personalKey } } });
    cast.tenants.push({
      index: i,
      namespace,
      mode,
      objects: config.makeApiClient(CustomObjectsApi),
      core: tenantCore,
      apps: config.makeApiClient(AppsV1Api),
      userKey: user?.personalKey,
      foreignKey: foreign?.personalKey,
    });

    // The platform team's workloads in the tenant's namespace (replicas 0: no node is needed, a
    // restart still shows as a new generation and pod template), reading the platform team's own
    // Secret. They declare no consent to be restarted by anyone's rotation.
    const template = {
      metadata: { labels: { app: 'platform-api' } },
      spec: { containers: [{ name: 'api', image: 'example.invalid/platform-api:1', envFrom: [{ secretRef: { name: workloadSecret } }] }] },
    };
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: workloadSecret }, stringData: { password: 'platform-team-secret' } } });
    const deployment = await apps.createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name: 'platform-api' },
        spec: { replicas: 0, selector: { matchLabels: { app: 'platform-api' } }, template },
      },
    });
    const statefulSet = await apps.createNamespacedStatefulSet({
      namespace,
      body: {
        metadata: { name: 'platform-store' },
        spec: { replicas: 0, serviceName: 'platform-store', selector: { matchLabels: { app: 'platform-api' } }, template },
      },
    });
    cast.workloads.push(
      {
        namespace,
        kind: 'Deployment',
        name: 'platform-api',
        generation: deployment.metadata?.generation ?? 1,
        template: JSON.stringify(deployment.spec?.template),
      },
      {
        namespace,
        kind: 'StatefulSet',
        name: 'platform-store',
        generation: statefulSet.metadata?.generation ?? 1,
        template: JSON.stringify(statefulSet.spec?.template),
      },
    );
  }
  if (cast.tenants.length > 0) await issuedKeysPolicy(env, cast.tenants[0]!);
  const keys = await admin<{ id: number }[]>(env.emulator, 'GET', '/keys');
  cast.keysBefore = Math.max(0, ...keys.map((k) => k.id));
  return cast;
}

/**
 * deploy/base/issued-keys-policy.yaml applied as it is, and in force: a probe resource naming an
 * issuer, made by the administrator with the operator's finalizer, whose finalizer the tenant may
 * not remove (403). The probe is removed by the administrator (system:masters: exempt).
 */
async function issuedKeysPolicy(env: Environment, tenant: Tenant): Promise<void> {
  const api = env.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const objects = loadAllYaml(readFileSync(join(root, 'deploy/base/issued-keys-policy.yaml'), 'utf8')) as { kind: string }[];
  for (const o of objects) {
    if (o.kind === 'ValidatingAdmissionPolicy') await api.createValidatingAdmissionPolicy({ body: o as V1ValidatingAdmissionPolicy });
    if (o.kind === 'ValidatingAdmissionPolicyBinding') await api.createValidatingAdmissionPolicyBinding({ body: o as V1ValidatingAdmissionPolicyBinding });
  }
  const at = { group: GROUP, version: VERSION, namespace: tenant.namespace, plural: 'projectapikeys', name: 'policy-probe' };
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  await env.objects.createNamespacedCustomObject({
    ...at,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'ProjectApiKey',
      metadata: { name: at.name, finalizers: [FINALIZER] },
      spec: { projectId: env.projectIds[0], issuerRef: { name: MISSING_ISSUER } },
    },
  });
  for (let attempt = 0; ; attempt += 1) {
    try {
      await tenant.objects.patchNamespacedCustomObject({ ...at, body: { metadata: { finalizers: null } } }, merge);
      // Not in force yet: the finalizer back, and again.
      await env.objects.patchNamespacedCustomObject({ ...at, body: { metadata: { finalizers: [FINALIZER] } } }, merge);
    } catch (error) {
      if (error instanceof ApiException && error.code === 403 && String(error.body).includes(FINALIZER)) break;
      if (attempt > 100) throw error;
    }
    if (attempt > 100) throw new Error("the issued keys' admission policy is not in force after 20 s");
    await sleep(200);
  }
  await env.objects.patchNamespacedCustomObject({ ...at, body: { metadata: { finalizers: null } } }, merge);
  await env.objects.deleteNamespacedCustomObject(at).catch(() => undefined);
}
