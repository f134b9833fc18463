// The roles a platform team gives its teams (deploy/base/tenant-roles.yaml, the chart's
// rbac.aggregateToDefaultRoles): with only the built-in `edit` ClusterRole bound in its namespace, a
// team member declares a key, sees it Ready and reads its Secret; it cannot write status (the key
// record) nor reach another namespace; with `view` it sees the keys and reads no Secret. Real
// identities (ServiceAccount tokens), real RBAC: the apiserver and kube-controller-manager's
// ClusterRole aggregation decide every answer.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, emulatorAdmin, eventually, installOperatorManifests, operatorKubeConfig } from '../operator/support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
interface Resource { metadata: { name: string }; status?: { keyId?: number; secretName?: string; conditions?: { type: string; status: string }[] } }

/** The HTTP status of a refused call; undefined when it succeeded. */
async function refusal(call: () => Promise<unknown>): Promise<number | undefined> {
  try {
    await call();
    return undefined;
  } catch (error) {
    if (error instanceof ApiException) return error.code;
    throw error;
  }
}

describe('tenant roles aggregated to the built-in view and edit ClusterRoles', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator | undefined;
  let team: string;
  let other: string;
  let editor: { objects: CustomObjectsApi; core: CoreV1Api };
  let viewer: { objects: CustomObjectsApi; core: CoreV1Api };

  const apiKey = (name: string): object => ({
    apiVersion: `${group}/${version}`,
    kind: 'ApiKey',
    metadata: { name },
    spec: { scope: 'Organization', organizationId: emulator.bootstrap.organizations[0]?.id, credentialsSecretRef: { name: 'neon-admin' } },
  });

  /** A ServiceAccount of `namespace` bound there to the built-in ClusterRole `role`, and its clients. */
  const member = async (namespace: string, name: string, role: 'edit' | 'view'): Promise<{ objects: CustomObjectsApi; core: CoreV1Api }> => {
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
    await cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({ namespace, body: {
      metadata: { name: `${name}-${role}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    } });
    const config: KubeConfig = cp.kubeConfigForToken(await cp.mintServiceAccountToken(namespace, name));
    return { objects: config.makeApiClient(CustomObjectsApi), core: config.makeApiClient(CoreV1Api) };
  };

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    team = await createNamespace(cp, 'team');
    other = await createNamespace(cp, 'other');
    editor = await member(team, 'developer', 'edit');
    viewer = await member(team, 'auditor', 'view');
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespaces: [team, other],
      workers: 2,
      logger: createLogger({ level: 'silent' }),
      identity: 'tenant-roles-suite',
    });
  });

  afterAll(async () => {
    await operator?.stop();
    const core = cp?.kubeConfig.makeApiClient(CoreV1Api);
    for (const ns of [team, other]) if (ns !== undefined) await core?.deleteNamespace({ name: ns }).catch(() => undefined);
    await emulator?.close();
  });

  it('edit: creates an ApiKey, sees it Ready and reads its Secret', async () => {
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    await editor.core.createNamespacedSecret({ namespace: team, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: alice } } });
    // The aggregation controller fills `edit` with the tenant role's rules a moment after it is applied.
    await eventually(async () => (await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', body: apiKey('ci-deployer') }))) === undefined || undefined, 20_000, 'edit allows creating an ApiKey');
    const ready = await eventually(async () => {
      const r = await editor.objects.getNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' }) as Resource;
      return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? r : undefined;
    }, 30_000, 'ApiKey Ready, as the editor reads it');
    const secret = await editor.core.readNamespacedSecret({ namespace: team, name: ready.status?.secretName ?? 'ci-deployer' });
    expect(Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8')).toMatch(/^[A-Za-z0-9_-]{32,256}$/);
    // and the other verbs of the role: a label patched (a JSON patch), the other kind listed.
    expect(await refusal(() => editor.objects.patchNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer', body: [{ op: 'add', path: '/metadata/labels', value: { team: 'a' } }] }))).toBeUndefined();
    expect(await refusal(() => editor.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'projectapikeys' }))).toBeUndefined();
  });

  it('edit: refused the status subresource (the key record) and every other namespace', async () => {
    const statusPatch = (): Promise<unknown> => editor.objects.patchNamespacedCustomObjectStatus({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer', body: { status: { keyId: 1 } } });
    expect(await refusal(statusPatch)).toBe(403);
    // An inventory: declared by the team, its report written by the operator only (docs/security.md, Inventories).
    const inventory = { apiVersion: `${group}/${version}`, kind: 'ApiKeyInventory', metadata: { name: 'audit' }, spec: { organizationId: 'org-demo-00000001', credentialsSecretRef: { name: 'neon-admin' } } };
    expect(await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeyinventories', body: inventory }))).toBeUndefined();
    expect(await refusal(() => editor.objects.patchNamespacedCustomObjectStatus({ group, version, namespace: team, plural: 'apikeyinventories', name: 'audit', body: { status: { managed: 0 } } }))).toBe(403);
    expect(await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: other, plural: 'apikeyinventories', body: inventory }))).toBe(403);
    expect(await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: other, plural: 'apikeys', body: apiKey('elsewhere') }))).toBe(403);
    expect(await refusal(() => editor.objects.listNamespacedCustomObject({ group, version, namespace: other, plural: 'apikeys' }))).toBe(403);
    expect(await refusal(() => editor.objects.listClusterCustomObject({ group, version, plural: 'apikeys' }))).toBe(403);
    expect(await refusal(() => editor.core.listNamespacedSecret({ namespace: other }))).toBe(403);
  });

  it('view: lists the ApiKeys, reads no Secret, changes nothing', async () => {
    const list = await viewer.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys' }) as { items: Resource[] };
    expect(list.items.map((r) => r.metadata.name)).toEqual(['ci-deployer']);
    expect(await refusal(() => viewer.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'projectapikeys' }))).toBeUndefined();
    expect(await refusal(() => viewer.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeyinventories' }))).toBeUndefined();
    expect(await refusal(() => viewer.objects.deleteNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeyinventories', name: 'audit' }))).toBe(403);
    expect(await refusal(() => viewer.core.readNamespacedSecret({ namespace: team, name: 'ci-deployer' }))).toBe(403);
    expect(await refusal(() => viewer.core.listNamespacedSecret({ namespace: team }))).toBe(403);
    expect(await refusal(() => viewer.objects.createNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', body: apiKey('not-mine') }))).toBe(403);
    expect(await refusal(() => viewer.objects.deleteNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' }))).toBe(403);
    expect(await refusal(() => viewer.objects.patchNamespacedCustomObjectStatus({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer', body: { status: { keyId: 1 } } }))).toBe(403);
  });

  it('edit: deletes its ApiKey, and the operator revokes the key', async () => {
    const before = await editor.objects.getNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' }) as Resource;
    const keyId = before.status?.keyId;
    expect(keyId).toBeDefined();
    await editor.objects.deleteNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' });
    await eventually(async () => (await refusal(() => editor.objects.getNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' }))) === 404 || undefined, 30_000, 'the ApiKey gone');
    const keys = await emulatorAdmin<{ id: number; revoked: boolean }[]>(emulator.adminUrl, 'GET', '/keys');
    expect(keys.find((k) => k.id === keyId)?.revoked).toBe(true);
  });
});
