// The informers' caches keep what the controller reads and nothing else, against the apiserver: a
// Secret's projection (src/operator/keys/observing/cache-projection.ts trimSecret) through
// src/operator/runtime/informer-cache.ts and paged-list.ts, never its data. The projections alone:
// test/operator/keys/observing/cache-projection.test.ts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { makeMetadataInformer, makeTrimmedInformer } from '../../src/operator/runtime/informer-cache.ts';
import { listMetadata } from '../../src/operator/runtime/paged-list.ts';
import { cachedOwner, trimSecret } from '../../src/operator/keys/observing/cache-projection.ts';
import { controlPlane } from '../harness/index.ts';

describe('makeTrimmedInformer against the apiserver', () => {
  const namespace = 'informer-cache';
  const selector = 'informer-cache-test=yes';
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
    metadata: {
      name,
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator', 'informer-cache-test': 'yes' },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}', 'keys.neon.dev/owner': `ProjectApiKey/${name}` },
    },
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
    informer = makeTrimmedInformer<V1Secret>(cp.kubeConfig, `/api/v1/namespaces/${namespace}/secrets`, trimSecret, selector);
    const events: string[] = [];
    informer.on('add', (s) => events.push(`add ${s.metadata?.name}`));
    informer.on('update', (s) => events.push(`update ${s.metadata?.name}`));
    informer.on('delete', (s) => events.push(`delete ${s.metadata?.name}`));
    await informer.start();
    await core.createNamespacedSecret({ namespace, body: labelled('watched', 'value-watched-0001') });
    const cache = informer;
    await until('the watched Secret', () => cache.get('watched', namespace));
    const current = await core.readNamespacedSecret({ namespace, name: 'watched' });
    await core.replaceNamespacedSecret({
      namespace,
      name: 'watched',
      body: {
        ...current,
        metadata: { ...current.metadata, annotations: { ...current.metadata?.annotations, 'keys.neon.dev/owner': 'ProjectApiKey/renamed' } },
      },
    });
    await until('the update', () => (cachedOwner(cache.get('watched', namespace) ?? {}) === 'ProjectApiKey/renamed' ? true : undefined));

    const cached = cache.list(namespace);
    expect(cached.map((s) => s.metadata?.name).sort()).toEqual(['listed', 'watched']);
    for (const s of cached) {
      expect(s.data).toBeUndefined();
      expect(s.metadata?.managedFields).toBeUndefined();
      expect(s.metadata?.annotations).toBeUndefined();
      expect(cachedOwner(s)).toBe(s.metadata?.name === 'listed' ? 'ProjectApiKey/listed' : 'ProjectApiKey/renamed');
      expect(s.metadata?.resourceVersion).toMatch(/^\d+$/);
    }
    expect(JSON.stringify(cached)).not.toMatch(/value-|dmFsdWUt/); // the values, plain or base64

    await core.deleteNamespacedSecret({ namespace, name: 'listed' });
    await until('the delete', () => (cache.get('listed', namespace) === undefined ? true : undefined));
    expect(events).toEqual(expect.arrayContaining(['add listed', 'add watched', 'update watched', 'delete listed']));
  });
});

describe('makeMetadataInformer against the apiserver', () => {
  const namespace = 'metadata-informer';
  let core: CoreV1Api;
  let informer: ReturnType<typeof makeMetadataInformer> | undefined;

  beforeAll(async () => {
    const cp = await controlPlane();
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  afterAll(async () => {
    await informer?.stop();
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('receives only metadata from its LIST (paged) and its watch: no Secret value ever reaches the process', async () => {
    const cp = await controlPlane();
    for (let i = 0; i < 3; i++)
      await core.createNamespacedSecret({ namespace, body: { metadata: { name: `listed-${i}` }, stringData: { apiKey: `value-listed-${i}-xyz` } } });
    // What the apiserver sent, as parsed, before any projection: the transform sees it first.
    const raw: string[] = [];
    informer = makeMetadataInformer(cp.kubeConfig, `/api/v1/namespaces/${namespace}/secrets`, (obj) => {
      raw.push(JSON.stringify(obj));
      return trimSecret(obj);
    });
    const seen: string[] = [];
    informer.on('add', (s) => seen.push(`add ${s.metadata?.name}`));
    informer.on('update', (s) => seen.push(`update ${s.metadata?.name}`));
    informer.on('delete', (s) => seen.push(`delete ${s.metadata?.name}`));
    await informer.start();
    expect(
      informer
        .list()
        .map((s) => s.metadata?.name)
        .sort(),
    ).toEqual(['listed-0', 'listed-1', 'listed-2']);
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'watched' }, stringData: { apiKey: 'value-watched-xyz' } } });
    const current = await core.readNamespacedSecret({ namespace, name: 'watched' });
    await core.replaceNamespacedSecret({ namespace, name: 'watched', body: { ...current, data: undefined, stringData: { apiKey: 'value-changed-xyz' } } });
    await core.deleteNamespacedSecret({ namespace, name: 'listed-0' });
    const deadline = performance.now() + 20_000;
    while (!seen.includes('delete listed-0') || !seen.includes('update watched')) {
      if (performance.now() > deadline) throw new Error(`timed out; seen ${seen.join(', ')}`);
      await sleep(20);
    }
    expect(seen).toEqual(expect.arrayContaining(['add listed-1', 'add watched', 'update watched', 'delete listed-0']));
    // Every object off the wire was PartialObjectMetadata: no data field, no value in any form.
    expect(raw.length).toBeGreaterThanOrEqual(6);
    for (const line of raw) {
      expect(JSON.parse(line)).toEqual(expect.objectContaining({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1' }));
      expect(JSON.parse(line)).not.toHaveProperty('data');
    }
    expect(raw.join('\n')).not.toMatch(/value-|dmFsdWUt/); // the values, plain or base64
  });

  it("lists page by page (continue tokens) into one list with the snapshot's resourceVersion", async () => {
    const cp = await controlPlane();
    const listed = await listMetadata(cp.kubeConfig, `/api/v1/namespaces/${namespace}/secrets`, undefined, 1)();
    const names = listed.items.map((s) => s.metadata?.name).sort();
    expect(names).toEqual(['listed-1', 'listed-2', 'watched']);
    expect(listed.metadata?.resourceVersion).toMatch(/^\d+$/);
    expect(JSON.stringify(listed)).not.toMatch(/value-|dmFsdWUt/);
  });

  it('lists an empty result (the apiserver answers items: null) as no items', async () => {
    const cp = await controlPlane();
    const listed = await listMetadata(cp.kubeConfig, `/api/v1/namespaces/${namespace}/secrets`, 'no-such-label=here')();
    expect(listed.items).toEqual([]);
    expect(listed.metadata?.resourceVersion).toMatch(/^\d+$/);
  });
});
