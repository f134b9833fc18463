// A metadata LIST (src/operator/runtime/informer-cache.ts listMetadata) against the real apiserver:
// each page is projected as it arrives, and a page heavier than the cap (metadata is the tenant's to
// size: 256 KiB of annotations an object) is dropped as it arrives and asked again with half as many
// objects, from the same continue token.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { listMetadata } from '../../../src/operator/runtime/informer-cache.ts';
import { controlPlane } from '../../harness/index.ts';

describe('a metadata LIST of objects a tenant sized', () => {
  const namespace = `metadata-list-${randomBytes(3).toString('hex')}`;
  const path = `/api/v1/namespaces/${namespace}/secrets`;
  let core: CoreV1Api;
  let kubeConfig: KubeConfig;

  beforeAll(async () => {
    const cp = await controlPlane();
    kubeConfig = cp.kubeConfig;
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    // Ten Secrets with 40 KiB of annotations each: about 400 KiB of metadata in one page of 500.
    for (let i = 0; i < 10; i++) {
      await core.createNamespacedSecret({ namespace, body: { metadata: { name: `padded-${i}`, annotations: { pad: 'p'.repeat(40 * 1024) } }, stringData: { value: `secret-${i}` } } });
    }
  });

  afterAll(async () => {
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('keeps only the projection of each page, and lists everything through pages smaller than the cap', async () => {
    const sizes: number[] = [];
    const project = (obj: KubernetesObject): KubernetesObject => {
      sizes.push(JSON.stringify(obj).length);
      return { metadata: { name: obj.metadata?.name } };
    };
    // A cap of 100 KiB: the first page (500 asked, 10 sent, ~400 KiB) is dropped, then 250, ... 2 fit.
    const listed = await listMetadata(kubeConfig, path, undefined, 500, project, 100 * 1024)();
    expect(listed.items.map((s) => s.metadata?.name).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `padded-${i}`).sort());
    expect(listed.items.every((s) => Object.keys(s.metadata ?? {}).length === 1)).toBe(true);
    // Every object was projected exactly once: a dropped page was never parsed.
    expect(sizes).toHaveLength(10);
    expect(sizes.every((n) => n > 40 * 1024)).toBe(true);
    expect(listed.metadata?.resourceVersion).toMatch(/^\d+$/);
  });

  it('fails, never holds more, when one object alone is over the cap', async () => {
    await expect(listMetadata(kubeConfig, path, undefined, 500, (obj) => obj, 16 * 1024)()).rejects.toThrow(/one object's metadata is over 16384 bytes/);
  });

  it('drops the objects the projection drops (undefined)', async () => {
    const listed = await listMetadata(kubeConfig, path, undefined, 3, (obj) => (obj.metadata?.name === 'padded-4' ? obj : undefined))();
    expect(listed.items.map((s) => s.metadata?.name)).toEqual(['padded-4']);
  });
});
