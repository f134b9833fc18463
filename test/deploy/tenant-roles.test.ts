// The roles a platform team gives its teams (deploy/base/tenant-roles.yaml, the chart's
// rbac.aggregateToDefaultRoles): with only the built-in `edit` ClusterRole bound in its namespace, a
// team member declares a key, sees it Ready and reads its Secret; it cannot write status (the key
// record) nor reach another namespace; with `view` it sees the keys and reads no Secret. Neither
// may touch a ClusterKeyIssuer (cluster-scoped: the platform team's, through the opt-in
// issuer-admin ClusterRole) or read a Secret of the issuers' namespace. Real identities
// (ServiceAccount tokens), real RBAC: the apiserver and kube-controller-manager's ClusterRole
// aggregation decide every answer.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, emulatorAdmin, eventually, installOperatorManifests, OPERATOR_NAMESPACE, operatorKubeConfig } from '../operator/support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const issuers = { group, version, plural: 'clusterkeyissuers' };
/** deploy/base/issuer-admin-role.yaml */
const ISSUER_ADMIN_ROLE = 'neon-key-operator-issuer-admin';
interface Resource {
  metadata: { name: string };
  status?: { keyId?: number; secretName?: string; conditions?: { type: string; status: string }[] };
}

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
  let issuerAdminBinding: string | undefined;

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
    await cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: `${name}-${role}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name, namespace }],
      },
    });
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
    if (issuerAdminBinding !== undefined)
      await cp.kubeConfig
        .makeApiClient(RbacAuthorizationV1Api)
        .deleteClusterRoleBinding({ name: issuerAdminBinding })
        .catch(() => undefined);
    const core = cp?.kubeConfig.makeApiClient(CoreV1Api);
    for (const ns of [team, other]) if (ns !== undefined) await core?.deleteNamespace({ name: ns }).catch(() => undefined);
    await emulator?.close();
  });

  it('edit: creates an ApiKey, sees it Ready and reads its Secret', async () => {
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    await editor.core.createNamespacedSecret({ namespace: team, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: alice } } });
    // The aggregation controller fills `edit` with the tenant role's rules a moment after it is applied.
    await eventually(
      async () =>
        (await refusal(() =>
          editor.objects.createNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', body: apiKey('ci-deployer') }),
        )) === undefined || undefined,
      20_000,
      'edit allows creating an ApiKey',
    );
    const ready = await eventually(
      async () => {
        const r = (await editor.objects.getNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' })) as Resource;
        return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? r : undefined;
      },
      30_000,
      'ApiKey Ready, as the editor reads it',
    );
    const secret = await editor.core.readNamespacedSecret({ namespace: team, name: ready.status?.secretName ?? 'ci-deployer' });
    expect(Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8')).toMatch(/^[A-Za-z0-9_-]{32,256}$/);
    // and the other verbs of the role: a label patched (a JSON patch), the other kind listed.
    expect(
      await refusal(() =>
        editor.objects.patchNamespacedCustomObject({
          group,
          version,
          namespace: team,
          plural: 'apikeys',
          name: 'ci-deployer',
          body: [{ op: 'add', path: '/metadata/labels', value: { team: 'a' } }],
        }),
      ),
    ).toBeUndefined();
    expect(await refusal(() => editor.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'projectapikeys' }))).toBeUndefined();
  });

  it('edit: refused the status subresource (the key record) and every other namespace', async () => {
    const statusPatch = (): Promise<unknown> =>
      editor.objects.patchNamespacedCustomObjectStatus({
        group,
        version,
        namespace: team,
        plural: 'apikeys',
        name: 'ci-deployer',
        body: { status: { keyId: 1 } },
      });
    expect(await refusal(statusPatch)).toBe(403);
    // An inventory: declared by the team, its report written by the operator only (docs/security.md, Inventories).
    const inventory = {
      apiVersion: `${group}/${version}`,
      kind: 'ApiKeyInventory',
      metadata: { name: 'audit' },
      spec: { organizationId: 'org-demo-00000001', credentialsSecretRef: { name: 'neon-admin' } },
    };
    expect(
      await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeyinventories', body: inventory })),
    ).toBeUndefined();
    expect(
      await refusal(() =>
        editor.objects.patchNamespacedCustomObjectStatus({
          group,
          version,
          namespace: team,
          plural: 'apikeyinventories',
          name: 'audit',
          body: { status: { managed: 0 } },
        }),
      ),
    ).toBe(403);
    expect(
      await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: other, plural: 'apikeyinventories', body: inventory })),
    ).toBe(403);
    expect(
      await refusal(() => editor.objects.createNamespacedCustomObject({ group, version, namespace: other, plural: 'apikeys', body: apiKey('elsewhere') })),
    ).toBe(403);
    expect(await refusal(() => editor.objects.listNamespacedCustomObject({ group, version, namespace: other, plural: 'apikeys' }))).toBe(403);
    expect(await refusal(() => editor.objects.listClusterCustomObject({ group, version, plural: 'apikeys' }))).toBe(403);
    expect(await refusal(() => editor.core.listNamespacedSecret({ namespace: other }))).toBe(403);
  });

  it('view: lists the ApiKeys, reads no Secret, changes nothing', async () => {
    const list = (await viewer.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys' })) as { items: Resource[] };
    expect(list.items.map((r) => r.metadata.name)).toEqual(['ci-deployer']);
    expect(await refusal(() => viewer.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'projectapikeys' }))).toBeUndefined();
    expect(await refusal(() => viewer.objects.listNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeyinventories' }))).toBeUndefined();
    expect(
      await refusal(() => viewer.objects.deleteNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeyinventories', name: 'audit' })),
    ).toBe(403);
    expect(await refusal(() => viewer.core.readNamespacedSecret({ namespace: team, name: 'ci-deployer' }))).toBe(403);
    expect(await refusal(() => viewer.core.listNamespacedSecret({ namespace: team }))).toBe(403);
    expect(
      await refusal(() => viewer.objects.createNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', body: apiKey('not-mine') })),
    ).toBe(403);
    expect(await refusal(() => viewer.objects.deleteNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' }))).toBe(
      403,
    );
    expect(
      await refusal(() =>
        viewer.objects.patchNamespacedCustomObjectStatus({
          group,
          version,
          namespace: team,
          plural: 'apikeys',
          name: 'ci-deployer',
          body: { status: { keyId: 1 } },
        }),
      ),
    ).toBe(403);
  });

  it("edit and view: nothing on ClusterKeyIssuers, no Secret of the issuers' namespace; the platform team's issuer-admin role may write issuers", async () => {
    // A ServiceAccount bound cluster-wide to the opt-in role: what a platform team would hold.
    const rbac = cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespacedServiceAccount({ namespace: other, body: { metadata: { name: 'platform' } } });
    issuerAdminBinding = `${ISSUER_ADMIN_ROLE}-${other}`;
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: issuerAdminBinding },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: ISSUER_ADMIN_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: 'platform', namespace: other }],
      },
    });
    const platform = cp.kubeConfigForToken(await cp.mintServiceAccountToken(other, 'platform')).makeApiClient(CustomObjectsApi);
    const body = (name: string): object => ({
      apiVersion: `${group}/${version}`,
      kind: 'ClusterKeyIssuer',
      metadata: { name },
      spec: {
        organizationId: 'org-demo-00000001',
        credentialsSecretRef: { name: 'neon-platform' },
        allow: [{ namespaces: { selector: { matchLabels: { 'keys.neon.dev/issuer': 'team-keys' } } }, kinds: ['Project'] }],
      },
    });
    // Every write is a dry run on a name that does not exist: nothing is stored for the operators of
    // other suites to reconcile. RBAC decides before the object is looked up (403), so an allowed
    // identity gets past it to the 404 (or to the dry run's success).
    const name = `tenant-roles-${team}`;
    // deletecollection is asked of the teams only: a platform identity's would reach every issuer of the shared cluster.
    const attempts = (objects: CustomObjectsApi, teams: boolean): Record<string, () => Promise<unknown>> => ({
      create: () => objects.createClusterCustomObject({ ...issuers, body: body(name), dryRun: 'All' }),
      update: () => objects.replaceClusterCustomObject({ ...issuers, name, body: body(name), dryRun: 'All' }),
      patch: () => objects.patchClusterCustomObject({ ...issuers, name, body: [{ op: 'add', path: '/spec/allow', value: [] }], dryRun: 'All' }),
      delete: () => objects.deleteClusterCustomObject({ ...issuers, name, dryRun: 'All' }),
      ...(teams ? { deletecollection: () => objects.deleteCollectionClusterCustomObject({ ...issuers, dryRun: 'All' }) } : {}),
      get: () => objects.getClusterCustomObject({ ...issuers, name }),
      list: () => objects.listClusterCustomObject({ ...issuers }),
      'patch status': () => objects.patchClusterCustomObjectStatus({ ...issuers, name, body: { status: { resources: 0 } } }),
    });
    const answers = async (objects: CustomObjectsApi, teams = true): Promise<Record<string, number | undefined>> =>
      Object.fromEntries(await Promise.all(Object.entries(attempts(objects, teams)).map(async ([verb, call]) => [verb, await refusal(call)] as const)));
    const refusedAll = { create: 403, update: 403, patch: 403, delete: 403, deletecollection: 403, get: 403, list: 403, 'patch status': 403 };
    // The binding counts once the authorizer's informer has it.
    await eventually(
      async () => (await refusal(() => platform.listClusterCustomObject({ ...issuers }))) === undefined || undefined,
      10_000,
      'the issuer-admin binding',
    );
    expect(await answers(platform, false)).toEqual({ create: undefined, update: 404, patch: 404, delete: 404, get: 404, list: undefined, 'patch status': 403 });
    expect(await answers(editor.objects)).toEqual(refusedAll);
    expect(await answers(viewer.objects)).toEqual(refusedAll);
    // The built-in roles, as aggregated: no rule names issuers.
    for (const role of ['view', 'edit', 'admin']) {
      const rules = (await rbac.readClusterRole({ name: role })).rules ?? [];
      expect([role, rules.flatMap((r) => r.resources ?? []).filter((r) => r.startsWith('clusterkeyissuers') || r === '*')]).toEqual([role, []]);
    }
    // A policy's namespace selector matches labels the team cannot set: its own Namespace is not writable with edit.
    expect(
      await refusal(() =>
        editor.core.patchNamespace({ name: team, body: [{ op: 'add', path: '/metadata/labels/keys.neon.dev~1issuer', value: 'team-keys' }], dryRun: 'All' }),
      ),
    ).toBe(403);
    // The issuers' credentials live in the operator's namespace (--issuer-secrets-namespace's default): out of every team's reach.
    for (const member of [editor, viewer]) {
      expect(await refusal(() => member.core.listNamespacedSecret({ namespace: OPERATOR_NAMESPACE }))).toBe(403);
      expect(await refusal(() => member.core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: 'neon-platform' }))).toBe(403);
      expect(
        await refusal(() =>
          member.core.createNamespacedSecret({
            namespace: OPERATOR_NAMESPACE,
            body: { metadata: { name: 'neon-platform' }, stringData: { apiKey: 'x' } },
            dryRun: 'All',
          }),
        ),
      ).toBe(403);
    }
  });

  it('edit: deletes its ApiKey, and the operator revokes the key', async () => {
    const before = (await editor.objects.getNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' })) as Resource;
    const keyId = before.status?.keyId;
    expect(keyId).toBeDefined();
    await editor.objects.deleteNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' });
    await eventually(
      async () =>
        (await refusal(() => editor.objects.getNamespacedCustomObject({ group, version, namespace: team, plural: 'apikeys', name: 'ci-deployer' }))) === 404 ||
        undefined,
      30_000,
      'the ApiKey gone',
    );
    const keys = await emulatorAdmin<{ id: number; revoked: boolean }[]>(emulator.adminUrl, 'GET', '/keys');
    expect(keys.find((k) => k.id === keyId)?.revoked).toBe(true);
  });
});
