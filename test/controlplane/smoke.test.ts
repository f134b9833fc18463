// The test control plane is a real one: the behaviours the operator depends on are those of
// kube-apiserver + etcd, not of a fake.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiException, ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api, VersionApi, Watch } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { controlPlane, kubernetesVersionUnderTest, type ControlPlane } from '../harness/index.ts';

const group = 'smoke.test.dev';
const version = 'v1';
const plural = 'widgets';

interface Widget {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; generation?: number; resourceVersion?: string; finalizers?: string[]; deletionTimestamp?: string };
  spec: { size: number; color: string };
  status?: { phase: string };
}

function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

async function rejection(promise: Promise<unknown>): Promise<ApiException<unknown>> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ApiException) return error;
    throw error;
  }
  throw new Error('expected the apiserver to refuse the request');
}

describe('the test control plane', () => {
  let cp: ControlPlane;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  const namespace = `smoke-${randomBytes(3).toString('hex')}`;

  const widget = (name: string, size: number): Widget => ({
    apiVersion: `${group}/${version}`,
    kind: 'Widget',
    metadata: { name, namespace },
    spec: { size, color: 'blue' },
  });

  beforeAll(async () => {
    cp = await controlPlane();
    objects = cp.kubeConfig.makeApiClient(CustomObjectsApi);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const crds = cp.kubeConfig.makeApiClient(ApiextensionsV1Api);
    await crds.createCustomResourceDefinition({
      body: {
        metadata: { name: `${plural}.${group}` },
        spec: {
          group,
          scope: 'Namespaced',
          names: { plural, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
          versions: [
            {
              name: version,
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: {
                      type: 'object',
                      required: ['size', 'color'],
                      properties: { size: { type: 'integer' }, color: { type: 'string' } },
                      x_kubernetes_validations: [
                        { rule: 'self.size <= 10', message: 'size must be at most 10' },
                        { rule: 'self.color == oldSelf.color', message: 'color is immutable' },
                      ],
                    },
                    status: { type: 'object', properties: { phase: { type: 'string' } } },
                  },
                },
              },
            },
          ],
        },
      },
    });
    // A CRD serves once its names are accepted and it is Established.
    for (let i = 0; ; i++) {
      const crd = await crds.readCustomResourceDefinition({ name: `${plural}.${group}` });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (i > 100) throw new Error('CRD never became Established');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  afterAll(async () => {
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await cp?.kubeConfig
      .makeApiClient(ApiextensionsV1Api)
      .deleteCustomResourceDefinition({ name: `${plural}.${group}` })
      .catch(() => undefined);
  });

  it('reports the Kubernetes version it was built at (test/controlplane/go.mod, or the one npm run test:k8s names)', async () => {
    const info = await cp.kubeConfig.makeApiClient(VersionApi).getCode();
    const expected = kubernetesVersionUnderTest();
    expect(expected).toMatch(/^v1\.\d+\.\d+$/);
    expect(info.gitVersion).toBe(expected);
    expect(info.major).toBe('1');
    expect(info.minor).toBe(expected.split('.')[1]);
  });

  it('rejects an object that breaks a CEL rule with the rule message', async () => {
    const error = await rejection(
      objects.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        body: widget('too-big', 11),
      }),
    );
    expect(error.code).toBe(422);
    expect(String(error.body)).toContain('size must be at most 10');
  });

  it('enforces a CEL transition rule on update', async () => {
    const created = (await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      body: widget('immutable', 1),
    })) as Widget;
    const error = await rejection(
      objects.replaceNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        name: 'immutable',
        body: { ...created, spec: { ...created.spec, color: 'red' } },
      }),
    );
    expect(error.code).toBe(422);
    expect(String(error.body)).toContain('color is immutable');
  });

  it('keeps generation when only the status subresource changes', async () => {
    const created = (await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      body: widget('status', 2),
    })) as Widget;
    expect(created.metadata.generation).toBe(1);
    const withStatus = (await objects.replaceNamespacedCustomObjectStatus({
      group,
      version,
      namespace,
      plural,
      name: 'status',
      body: { ...created, status: { phase: 'Ready' } },
    })) as Widget;
    expect(withStatus.status?.phase).toBe('Ready');
    expect(withStatus.metadata.generation).toBe(1);
    expect(withStatus.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);
    const specChanged = (await objects.replaceNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      name: 'status',
      body: { ...withStatus, spec: { ...withStatus.spec, size: 3 } },
    })) as Widget;
    expect(specChanged.metadata.generation).toBe(2);
  });

  it('refuses an update carrying a stale resourceVersion with 409 Conflict', async () => {
    const created = (await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      body: widget('conflict', 1),
    })) as Widget;
    await objects.replaceNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      name: 'conflict',
      body: { ...created, spec: { ...created.spec, size: 2 } },
    });
    const error = await rejection(
      objects.replaceNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        name: 'conflict',
        body: { ...created, spec: { ...created.spec, size: 3 } },
      }),
    );
    expect(error.code).toBe(409);
  });

  it('holds deletion while a finalizer remains', async () => {
    const name = 'finalized';
    const body = widget(name, 1);
    body.metadata.finalizers = ['smoke.test.dev/hold'];
    await objects.createNamespacedCustomObject({ group, version, namespace, plural, body });
    await objects.deleteNamespacedCustomObject({ group, version, namespace, plural, name });
    const held = (await objects.getNamespacedCustomObject({ group, version, namespace, plural, name })) as Widget;
    expect(held.metadata.deletionTimestamp).toBeDefined();
    await objects.replaceNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      name,
      body: { ...held, metadata: { ...held.metadata, finalizers: [] } },
    });
    const gone = await rejection(objects.getNamespacedCustomObject({ group, version, namespace, plural, name }));
    expect(gone.code).toBe(404);
  });

  it('streams watch events for changes made after the watch started', async () => {
    const seen: string[] = [];
    const list = (await objects.listNamespacedCustomObject({ group, version, namespace, plural })) as { metadata: { resourceVersion: string } };
    const watching = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`watch saw only ${seen.join(', ')}`)), 20_000);
      void new Watch(cp.kubeConfig)
        .watch(
          `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
          { resourceVersion: list.metadata.resourceVersion, allowWatchBookmarks: true },
          (type: string, object: Widget) => {
            if (object.metadata.name === 'watched') seen.push(type);
            if (seen.includes('DELETED')) {
              clearTimeout(timer);
              resolve();
            }
          },
          (error: unknown) => {
            if (error) reject(error);
          },
        )
        .then((controller) => {
          watchController = controller;
        });
    });
    let watchController: AbortController | undefined;
    // The watch is registered asynchronously; changes made a moment later are still after its resourceVersion.
    const created = (await objects.createNamespacedCustomObject({ group, version, namespace, plural, body: widget('watched', 1) })) as Widget;
    await objects.replaceNamespacedCustomObject({
      group,
      version,
      namespace,
      plural,
      name: 'watched',
      body: { ...created, spec: { ...created.spec, size: 5 } },
    });
    await objects.deleteNamespacedCustomObject({ group, version, namespace, plural, name: 'watched' });
    await watching;
    watchController?.abort();
    expect(seen).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
  });

  it('authorizes a ServiceAccount token by RBAC: allowed inside its Role, 403 outside', async () => {
    const rbac = cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'reader' } } });
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace }],
      },
    });
    const token = await cp.mintServiceAccountToken(namespace, 'reader', 600);
    const asReader = cp.kubeConfigForToken(token).makeApiClient(CoreV1Api);

    const configMaps = await asReader.listNamespacedConfigMap({ namespace });
    expect(Array.isArray(configMaps.items)).toBe(true);
    expect(statusOf(await rejection(asReader.listNamespacedSecret({ namespace })))).toBe(403);
    expect(statusOf(await rejection(asReader.listConfigMapForAllNamespaces()))).toBe(403);
    expect(statusOf(await rejection(asReader.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'x' } } })))).toBe(403);
  });
});
