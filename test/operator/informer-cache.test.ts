// The informers' caches keep what the controller reads and nothing else (src/operator/informer-cache.ts):
// no managedFields, no kubectl last-applied copy, and never a Secret's data. Against the real apiserver.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { makeTrimmedInformer, trimObject, trimSecret } from '../../src/operator/informer-cache.ts';
import { controlPlane } from '../harness/index.ts';

describe('trimObject and trimSecret', () => {
  it('drop managedFields and the last-applied annotation, keep everything else', () => {
    const obj = {
      apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ProjectApiKey',
      metadata: {
        name: 'a', namespace: 'n', resourceVersion: '7', generation: 2,
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"spec":{}}', 'keys.neon.dev/create-pending': '{}' },
        managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
      },
      spec: { projectId: 'p' },
      status: { keyId: 3 },
    };
    expect(trimObject(obj)).toEqual({
      apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ProjectApiKey',
      metadata: { name: 'a', namespace: 'n', resourceVersion: '7', generation: 2, annotations: { 'keys.neon.dev/create-pending': '{}' } },
      spec: { projectId: 'p' },
      status: { keyId: 3 },
    });
  });

  it('keep a Secret\'s identity, labels, annotations and owners, and none of its data', () => {
    const secret: V1Secret = {
      metadata: {
        name: 's', namespace: 'n', uid: 'u', resourceVersion: '9', labels: { l: 'v' }, annotations: { a: 'b' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'ux' }], managedFields: [{ manager: 'm' }],
      },
      type: 'Opaque',
      data: { apiKey: Buffer.from('s3cr3t').toString('base64') },
      stringData: { other: 's3cr3t' },
    };
    const trimmed = trimSecret(secret);
    expect(trimmed).toEqual({
      apiVersion: 'v1', kind: 'Secret', type: 'Opaque',
      metadata: { name: 's', namespace: 'n', uid: 'u', resourceVersion: '9', labels: { l: 'v' }, annotations: { a: 'b' }, ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'ux' }] },
    });
    expect(JSON.stringify(trimmed)).not.toContain(Buffer.from('s3cr3t').toString('base64'));
  });
});

describe('makeTrimmedInformer against the apiserver', () => {
  const namespace = 'informer-cache';
  const selector = 'app.kubernetes.io/managed-by=informer-cache-test';
  let core: CoreV1Api;
  let informer: ReturnType<typeof makeTrimmedInformer<V1Secret>> | undefined;

  beforeAll(async () => {
    const cp = await controlPlane();
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  afterAll(async () => {
    await informer?.stop();
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  const labelled = (name: string, value: string): V1Secret => ({
    metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'informer-cache-test' }, annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' } },
    stringData: { apiKey: value },
  });

  async function until<T>(what: string, f: () => T | undefined): Promise<T> {
    const deadline = performance.now() + 20_000;
    for (;;) {
      const v = f();
      if (v !== undefined) return v;
      if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  }

  it('caches listed and watched Secrets without data or managedFields, and sees updates and deletes', async () => {
    const cp = await controlPlane();
    // One Secret before the LIST, one after (seen through the watch); one unlabelled, never cached.
    await core.createNamespacedSecret({ namespace, body: labelled('listed', 'value-listed-0001') });
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'foreign', namespace }, stringData: { apiKey: 'value-foreign-0001' } } });
    informer = makeTrimmedInformer<V1Secret>(cp.kubeConfig, `/api/v1/namespaces/${namespace}/secrets`,
      () => core.listNamespacedSecret({ namespace, labelSelector: selector }) as never, trimSecret, selector);
    const events: string[] = [];
    informer.on('add', (s) => events.push(`add ${s.metadata?.name}`));
    informer.on('update', (s) => events.push(`update ${s.metadata?.name}`));
    informer.on('delete', (s) => events.push(`delete ${s.metadata?.name}`));
    await informer.start();
    await core.createNamespacedSecret({ namespace, body: labelled('watched', 'value-watched-0001') });
    const cache = informer;
    await until('the watched Secret', () => cache.get('watched', namespace));
    const current = await core.readNamespacedSecret({ namespace, name: 'watched' });
    await core.replaceNamespacedSecret({ namespace, name: 'watched', body: { ...current, metadata: { ...current.metadata, annotations: { ...current.metadata?.annotations, touched: 'yes' } } } });
    await until('the update', () => cache.get('watched', namespace)?.metadata?.annotations?.touched);

    const cached = cache.list(namespace);
    expect(cached.map((s) => s.metadata?.name).sort()).toEqual(['listed', 'watched']);
    for (const s of cached) {
      expect(s.data).toBeUndefined();
      expect(s.metadata?.managedFields).toBeUndefined();
      expect(s.metadata?.annotations?.['kubectl.kubernetes.io/last-applied-configuration']).toBeUndefined();
      expect(s.metadata?.resourceVersion).toMatch(/^\d+$/);
      expect(s.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('informer-cache-test');
    }
    expect(JSON.stringify(cached)).not.toMatch(/value-|dmFsdWUt/); // the values, plain or base64

    await core.deleteNamespacedSecret({ namespace, name: 'listed' });
    await until('the delete', () => (cache.get('listed', namespace) === undefined ? true : undefined));
    expect(events).toEqual(expect.arrayContaining(['add listed', 'add watched', 'update watched', 'delete listed']));
  });
});
