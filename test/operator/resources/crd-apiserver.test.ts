// The checked-in CRDs, applied with kubectl to a real kube-apiserver: the CEL rules refuse what
// they should, the defaults land, status is a subresource, the short names and category resolve.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { TEST_MIN_ROTATION_GRACE } from '../../harness/crds.ts';
import { parseGoDuration } from '../../../src/operator/go-duration.ts';
import { controlPlane, type ControlPlane } from '../../harness/index.ts';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createNamespace, customObjects, installOperatorManifests, kubectl, root } from '../support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ApiException) return `${error.code} ${String(error.body)}`;
    throw error;
  }
  throw new Error('expected the apiserver to refuse');
}

describe('the CRDs on a real apiserver', () => {
  let cp: ControlPlane;
  let objects: CustomObjectsApi;
  let namespace: string;
  const creds = { name: 'neon-admin' };

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    objects = customObjects(cp.kubeConfig);
    namespace = await createNamespace(cp, 'crd');
  });

  afterAll(async () => {
    await cp?.kubeConfig
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => undefined);
  });

  const apiKey = (name: string, spec: Record<string, unknown>) => ({ apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { name, namespace }, spec });
  const create = (plural: string, body: unknown) => objects.createNamespacedCustomObject({ group, version, namespace, plural, body });

  it('fills the defaults: deletionPolicy Revoke, credentials key apiKey', async () => {
    const created = (await create('apikeys', apiKey('defaults', { scope: 'Personal', credentialsSecretRef: creds }))) as { spec: Record<string, unknown> };
    expect(created.spec).toEqual({ scope: 'Personal', credentialsSecretRef: { name: 'neon-admin', key: 'apiKey' }, deletionPolicy: 'Revoke' });
  });

  it('requires organizationId for an Organization key', async () => {
    const error = await refusal(create('apikeys', apiKey('no-org', { scope: 'Organization', credentialsSecretRef: creds })));
    expect(error).toMatch(/^422 .*organizationId is required when scope is Organization/);
  });

  it('refuses organizationId on a Personal key', async () => {
    const error = await refusal(create('apikeys', apiKey('personal-org', { scope: 'Personal', organizationId: 'org-x', credentialsSecretRef: creds })));
    expect(error).toContain('organizationId is not allowed when scope is Personal');
  });

  it('refuses an unknown scope and deletionPolicy', async () => {
    expect(await refusal(create('apikeys', apiKey('bad-scope', { scope: 'Team', credentialsSecretRef: creds })))).toMatch(/^422 .*Team/);
    expect(await refusal(create('apikeys', apiKey('bad-policy', { scope: 'Personal', deletionPolicy: 'Keep', credentialsSecretRef: creds })))).toMatch(/^422 /);
  });

  it('refuses a rotation gracePeriod under the floor (0s included) and admits the floor; crds/ as checked in (floor 1m) passes a server-side dry run', async () => {
    // The run's CRDs carry the floor TEST_MIN_ROTATION_GRACE (test/harness/crds.ts): the same CEL
    // rule as crds/, whose own floor (1m) is checked in crd.test.ts. Applying crds/ for real here
    // would raise the floor under the other suites of the run (CRDs are cluster-wide).
    for (const gracePeriod of ['0s', '500ms']) {
      const error = await refusal(
        create('apikeys', apiKey(`grace-${gracePeriod}`, { scope: 'Personal', credentialsSecretRef: creds, rotation: { gracePeriod } })),
      );
      expect(error).toMatch(new RegExp(`^422 .*gracePeriod must be at least ${TEST_MIN_ROTATION_GRACE}`));
    }
    await create('apikeys', apiKey('grace-floor', { scope: 'Personal', credentialsSecretRef: creds, rotation: { gracePeriod: TEST_MIN_ROTATION_GRACE } }));
    expect(
      await kubectl(cp, ['apply', '--server-side', '--force-conflicts', '--field-manager=crd-dry-run', '--dry-run=server', '-f', join(root, 'crds')]),
    ).toContain('(server dry run)');
  });

  it("reads durations with the operator's grammar (Go's): the pattern and CEL's duration() agree with parseGoDuration", async () => {
    // Each value in spec.usage.unusedAfter (at least 1s by its rule): admitted exactly when the
    // operator reads it as a duration of at least 1s.
    const samples = [
      '1s',
      '90s',
      '1h30m',
      '1.5h',
      '.5h',
      '5.s',
      '720h',
      '1000ms',
      '1500000us',
      '2h45m30s',
      '0',
      '500ms',
      '300',
      '1d',
      '-1h',
      '+1h',
      '1 h',
      '1H',
      'h',
      '.s',
    ];
    const verdicts: string[] = [];
    for (const [i, unusedAfter] of samples.entries()) {
      const admitted = await create('apikeys', apiKey(`duration-${i}`, { scope: 'Personal', credentialsSecretRef: creds, usage: { unusedAfter } })).then(
        () => true,
        (error: unknown) => {
          if (error instanceof ApiException && error.code === 422) return false;
          throw error;
        },
      );
      verdicts.push(`${unusedAfter}: ${admitted ? 'admitted' : 'refused'}`);
    }
    expect(verdicts).toEqual(samples.map((d) => `${d}: ${(parseGoDuration(d) ?? 0) >= 1_000 ? 'admitted' : 'refused'}`));
    expect(verdicts.filter((v) => v.endsWith('admitted'))).toHaveLength(10);
  });

  it('keeps scope and organizationId immutable', async () => {
    const created = (await create('apikeys', apiKey('immutable', { scope: 'Organization', organizationId: 'org-a', credentialsSecretRef: creds }))) as {
      metadata: Record<string, unknown>;
      spec: Record<string, unknown>;
    };
    const replace = (spec: Record<string, unknown>) =>
      objects.replaceNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name: 'immutable', body: { ...created, spec } });
    expect(await refusal(replace({ ...created.spec, organizationId: 'org-b' }))).toContain('organizationId is immutable');
    expect(await refusal(replace({ ...created.spec, scope: 'Personal', organizationId: undefined }))).toContain('scope is immutable');
    // What may change, changes: the key name, the policy.
    const changed = (await replace({ ...created.spec, keyName: 'renamed', deletionPolicy: 'Retain' })) as { metadata: { generation: number } };
    expect(changed.metadata.generation).toBe(2);
  });

  it('keeps projectId and organizationId of a ProjectApiKey immutable', async () => {
    const body = {
      apiVersion: `${group}/${version}`,
      kind: 'ProjectApiKey',
      metadata: { name: 'project', namespace },
      spec: { organizationId: 'org-a', projectId: 'p-1', credentialsSecretRef: creds },
    };
    const created = (await create('projectapikeys', body)) as { spec: Record<string, unknown> };
    const replace = (spec: Record<string, unknown>) =>
      objects.replaceNamespacedCustomObject({ group, version, namespace, plural: 'projectapikeys', name: 'project', body: { ...created, spec } });
    expect(await refusal(replace({ ...created.spec, projectId: 'p-2' }))).toContain('projectId is immutable');
    expect(await refusal(replace({ ...created.spec, organizationId: 'org-b' }))).toContain('organizationId is immutable');
    expect(
      await refusal(
        create('projectapikeys', { ...body, metadata: { name: 'no-project', namespace }, spec: { organizationId: 'o', credentialsSecretRef: creds } }),
      ),
    ).toContain('projectId');
  });

  it('serves status as a subresource: a spec write does not change status', async () => {
    await create('apikeys', apiKey('status', { scope: 'Personal', credentialsSecretRef: creds }));
    const withStatus = (await objects.patchNamespacedCustomObjectStatus({
      group,
      version,
      namespace,
      plural: 'apikeys',
      name: 'status',
      body: [{ op: 'add', path: '/status', value: { keyId: 42, secretName: 'status' } }],
    })) as { status: Record<string, unknown>; metadata: { generation: number } };
    expect(withStatus.status).toEqual({ keyId: 42, secretName: 'status' });
    expect(withStatus.metadata.generation).toBe(1);
  });

  it('admits every manifest in examples/: three kustomizations that name no namespace and hold no Secret, and rotation.yaml', async () => {
    // Every file of examples/ is in one of its kustomizations, but rotation.yaml (its Deployment names an image of the user's).
    const kustomizations = ['examples', 'examples/platform-team', 'examples/namespace-credentials'];
    const listed = new Set<string>();
    for (const dir of kustomizations) {
      const text = await readFile(join(root, dir, 'kustomization.yaml'), 'utf8');
      for (const m of text.matchAll(/^ {2}- (\S+\.yaml)$/gm)) listed.add(join(dir, m[1] ?? ''));
      const objects = (await kubectl(cp, ['kustomize', join(root, dir)])).split(/^---$/m).map((d) => /^kind: (\S+)$/m.exec(d)?.[1]);
      expect([dir, objects.filter((k) => k === 'Secret' || k === 'Namespace')]).toEqual([dir, []]);
      // Only a cluster-scoped object names no namespace by nature; the others take the one kubectl is given.
      expect([dir, / {2}namespace: /.test(await kubectl(cp, ['kustomize', join(root, dir)]))]).toEqual([dir, false]);
    }
    const files = (await readdir(join(root, 'examples'), { recursive: true }))
      .filter((f) => f.endsWith('.yaml') && !f.endsWith('kustomization.yaml'))
      .map((f) => join('examples', f));
    expect(files.filter((f) => !listed.has(f)).sort()).toEqual(['examples/rotation.yaml']);
    for (const dir of kustomizations) {
      expect(await kubectl(cp, ['apply', '--dry-run=server', '-n', namespace, '-k', join(root, dir)])).toContain('(server dry run)');
    }
    expect(await kubectl(cp, ['apply', '--dry-run=server', '-n', namespace, '-f', join(root, 'examples/rotation.yaml')])).toContain('(server dry run)');
  });

  it('answers kubectl by short name and category with the printer columns', async () => {
    const byShortName = await kubectl(cp, ['get', 'nak', '-n', namespace]);
    expect(byShortName.split('\n')[0]).toMatch(/^NAME\s+READY\s+KEY ID\s+SECRET\s+LAST USED\s+AGE$/);
    expect(byShortName).toContain('status');
    expect(await kubectl(cp, ['get', 'neon', '-n', namespace, '-o', 'name'])).toContain('projectapikey.keys.neon.dev/project');
    expect(await kubectl(cp, ['get', 'npak', '-n', namespace, '-o', 'name'])).toContain('project');
    expect(await kubectl(cp, ['explain', 'apikeys.spec.deletionPolicy'])).toMatch(/Revoke it,\s+or Retain it/);
  });
});
