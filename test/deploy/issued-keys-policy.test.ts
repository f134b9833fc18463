// The admission policy of deploy/base/issued-keys-policy.yaml (the chart's rbac.issuedKeysPolicy): a
// key a ClusterKeyIssuer made is revoked with its resource, so the operator's finalizer stays on such
// a resource until the operator removes it. A team member with the built-in `edit` role tries to
// remove it (from a resource naming an issuer, from one whose key an issuer made and that names
// credentials of the namespace now, from one being deleted) and is refused; the same member may edit
// anything else, and remove it where the team's own credentials made the key. The operator's
// ServiceAccount and a cluster administrator (system:masters) may remove it. Real identities,
// the real apiserver's admission: no operator runs here, the objects are the test's.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, CustomObjectsApi, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions } from '@kubernetes/client-node';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, eventually, installOperatorManifests, operatorKubeConfig } from '../operator/support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const FINALIZER = 'keys.neon.dev/finalizer';
const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';

interface Resource {
  metadata: { name: string; finalizers?: string[]; deletionTimestamp?: string; labels?: Record<string, string> };
}

/** The HTTP status and message of a refused call; undefined when it succeeded. */
async function refusal(call: () => Promise<unknown>): Promise<{ code: number; message: string } | undefined> {
  try {
    await call();
    return undefined;
  } catch (error) {
    if (error instanceof ApiException) return { code: error.code, message: String(error.body) };
    throw error;
  }
}

describe("the issued keys' admission policy: the finalizer of a key an issuer made is the operator's to remove", () => {
  let cp: ControlPlane;
  let team: string;
  let admin: CustomObjectsApi;
  let editor: CustomObjectsApi;
  let operator: CustomObjectsApi;

  const path = (name: string) => ({ group, version, namespace: team, plural: 'projectapikeys', name });
  /** A ProjectApiKey created by the administrator with the operator's finalizer, as the operator leaves one. */
  const resource = async (name: string, source: Record<string, unknown>, issuer?: string): Promise<void> => {
    await admin.createNamespacedCustomObject({
      group,
      version,
      namespace: team,
      plural: 'projectapikeys',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ProjectApiKey',
        metadata: { name, finalizers: [FINALIZER] },
        spec: { organizationId: ORG, projectId: PROJECT, ...source },
      },
    });
    if (issuer !== undefined) {
      await admin.patchNamespacedCustomObjectStatus(
        { ...path(name), body: { status: { keyId: 1, issuer } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    }
  };
  /** An UPDATE without the finalizer (the verb the operator has; `edit` has it too). */
  const strip = async (api: CustomObjectsApi, name: string): Promise<unknown> => {
    const current = (await admin.getNamespacedCustomObject(path(name))) as Resource;
    current.metadata.finalizers = (current.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
    return await api.replaceNamespacedCustomObject({ ...path(name), body: current });
  };
  const finalizers = async (name: string): Promise<string[] | undefined> =>
    ((await admin.getNamespacedCustomObject(path(name))) as Resource).metadata.finalizers;

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    team = await createNamespace(cp, 'issued');
    admin = cp.kubeConfig.makeApiClient(CustomObjectsApi);
    operator = (await operatorKubeConfig(cp)).makeApiClient(CustomObjectsApi);
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({ namespace: team, body: { metadata: { name: 'developer' } } });
    await cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: team,
      body: {
        metadata: { name: 'developer-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ kind: 'ServiceAccount', name: 'developer', namespace: team }],
      },
    });
    editor = cp.kubeConfigForToken(await cp.mintServiceAccountToken(team, 'developer')).makeApiClient(CustomObjectsApi);
    // The apiserver loads a new policy a moment after it is applied, and `edit` gets the tenant
    // role's rules from the aggregation controller: wait until a probe's finalizer is refused.
    await resource('probe', { issuerRef: { name: 'team' } });
    await eventually(
      async () => {
        const refused = await refusal(() => strip(editor, 'probe'));
        if (refused?.code === 403 && refused.message.includes('keys.neon.dev/finalizer stays')) return true;
        if (refused === undefined)
          await admin.patchNamespacedCustomObject(
            { ...path('probe'), body: { metadata: { finalizers: [FINALIZER] } } },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          );
        return undefined;
      },
      30_000,
      'the policy enforced',
    );
  });

  afterAll(async () => {
    if (team === undefined) return;
    for (const item of ((await admin.listNamespacedCustomObject({ group, version, namespace: team, plural: 'projectapikeys' })) as { items: Resource[] })
      .items) {
      await admin
        .patchNamespacedCustomObject(
          { ...path(item.metadata.name), body: [{ op: 'replace', path: '/metadata/finalizers', value: [] }] },
          setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
        )
        .catch(() => undefined);
    }
    await cp.kubeConfig
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: team })
      .catch(() => undefined);
  });

  it('refuses a team member removing it from a resource naming an issuer, and lets the same member edit the rest', async () => {
    await resource('named', { issuerRef: { name: 'team' } });
    const refused = await refusal(() => strip(editor, 'named'));
    expect(refused?.code).toBe(403);
    expect(refused?.message).toContain('the finalizer keys.neon.dev/finalizer stays until the operator revoked the key a ClusterKeyIssuer made');
    expect(await finalizers('named')).toEqual([FINALIZER]);
    // Anything else: a label, another finalizer of the team's beside it.
    expect(
      await refusal(() =>
        editor.patchNamespacedCustomObject(
          { ...path('named'), body: { metadata: { labels: { team: 'a' }, finalizers: [FINALIZER, 'example.com/mine'] } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
      ),
    ).toBeUndefined();
    expect(await finalizers('named')).toEqual([FINALIZER, 'example.com/mine']);
  });

  it('refuses it where an issuer made the key and the resource names credentials of the namespace now (status.issuer)', async () => {
    await resource('moved', { credentialsSecretRef: { name: 'neon-admin' } }, 'team');
    expect((await refusal(() => strip(editor, 'moved')))?.code).toBe(403);
    expect(await finalizers('moved')).toEqual([FINALIZER]);
  });

  it('refuses it on a resource being deleted: the operator revokes first', async () => {
    await resource('leaving', { issuerRef: { name: 'team' } });
    await editor.deleteNamespacedCustomObject(path('leaving'));
    expect(((await admin.getNamespacedCustomObject(path('leaving'))) as Resource).metadata.deletionTimestamp).toBeDefined();
    expect((await refusal(() => strip(editor, 'leaving')))?.code).toBe(403);
    expect(await finalizers('leaving')).toEqual([FINALIZER]);
  });

  it('lets the team remove it where its own credentials made the key', async () => {
    await resource('own', { credentialsSecretRef: { name: 'neon-admin' } });
    expect(await refusal(() => strip(editor, 'own'))).toBeUndefined();
    expect(await finalizers('own')).toBeUndefined();
  });

  it("lets the operator's ServiceAccount and a cluster administrator remove it", async () => {
    await resource('by-operator', { issuerRef: { name: 'team' } }, 'team');
    expect(await refusal(() => strip(operator, 'by-operator'))).toBeUndefined();
    expect(await finalizers('by-operator')).toBeUndefined();
    await resource('by-admin', { issuerRef: { name: 'team' } }, 'team');
    expect(await refusal(() => strip(admin, 'by-admin'))).toBeUndefined();
    expect(await finalizers('by-admin')).toBeUndefined();
  });
});
