// A LIST in pages, each object projected as it arrives (src/operator/runtime/paged-list.ts): against
// the real apiserver, whole objects and metadata only, of objects a tenant sized; and against a
// loopback server (a named fake: the apiserver cannot be made to expire a continue token on demand)
// a continue token answered 410 Gone, which starts the LIST again from its first page.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, type KubeConfig, type KubernetesObject, type V1ConfigMap } from '@kubernetes/client-node';
import { listMetadata, pagedList } from '../../../src/operator/runtime/paged-list.ts';
import { controlPlane } from '../../harness/index.ts';
import { loopbackKubeConfig } from '../../harness/recording-server.ts';

describe('a paged LIST of objects a tenant sized', () => {
  const namespace = `paged-list-${randomBytes(3).toString('hex')}`;
  let core: CoreV1Api;
  let kubeConfig: KubeConfig;

  beforeAll(async () => {
    const cp = await controlPlane();
    kubeConfig = cp.kubeConfig;
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    // Ten ConfigMaps of about 300 KiB each: 40 KiB of annotations, 256 KiB of data.
    for (let i = 0; i < 10; i++) {
      await core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name: `padded-${i}`, annotations: { pad: 'p'.repeat(40 * 1024) } }, data: { blob: 'd'.repeat(256 * 1024) } },
      });
    }
  });

  afterAll(async () => {
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('hands every whole object to the projection once, page by page, and keeps only what it returns', async () => {
    const seen: number[] = [];
    const listed = await pagedList(kubeConfig, `/api/v1/namespaces/${namespace}/configmaps`, {
      pageSize: 3,
      project: (obj) => {
        seen.push(JSON.stringify(obj).length);
        return /^padded-[0-4]$/.test((obj as V1ConfigMap).metadata?.name ?? '') ? { metadata: { name: obj.metadata?.name } } : undefined;
      },
    })();
    expect(listed.items.map((o) => o.metadata?.name).sort()).toEqual(['padded-0', 'padded-1', 'padded-2', 'padded-3', 'padded-4']);
    expect(listed.items.every((o) => Object.keys(o.metadata ?? {}).length === 1)).toBe(true);
    // Each of the ten seen whole, once; half of them dropped by the projection.
    expect(seen).toHaveLength(10);
    expect(seen.every((n) => n > 296 * 1024)).toBe(true);
    expect(listed.metadata?.resourceVersion).toMatch(/^\d+$/);
  });

  it("asks metadata only when told: no object's content is sent", async () => {
    const listed = await listMetadata(kubeConfig, `/api/v1/namespaces/${namespace}/configmaps`, undefined, 4)();
    expect(listed.items.filter((o) => o.metadata?.name?.startsWith('padded-') === true)).toHaveLength(10);
    expect(JSON.stringify(listed)).not.toContain('ddddd');
    expect(listed.items.every((o) => (o as KubernetesObject & { data?: unknown }).data === undefined)).toBe(true);
  });

  it('fails, never holds more, when one object is over the bound', async () => {
    await expect(listMetadata(kubeConfig, `/api/v1/namespaces/${namespace}/configmaps`, undefined, 500, (obj) => obj, 16 * 1024)()).rejects.toThrow(
      /an object over 16384 bytes/,
    );
  });
});

describe('a continue token the apiserver no longer serves (410)', () => {
  let server: Server;
  let kubeConfig: KubeConfig;
  const requests: string[] = [];
  /** How many continue requests are answered 410 before one is served. */
  let expiring = 0;

  const page = (names: string[], next?: string): string =>
    JSON.stringify({
      kind: 'ConfigMapList',
      apiVersion: 'v1',
      metadata: { resourceVersion: next === undefined ? '20' : '10', ...(next !== undefined ? { continue: next } : {}) },
      items: names.map((name) => ({ metadata: { name, namespace: 'n', resourceVersion: '5' } })),
    });

  beforeAll(async () => {
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      requests.push(url.search);
      res.setHeader('content-type', 'application/json');
      if (url.searchParams.get('continue') === null) return res.end(page(['a', 'b'], 'token-1'));
      if (expiring > 0) {
        expiring--;
        res.statusCode = 410;
        return res.end(
          JSON.stringify({
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            reason: 'Expired',
            code: 410,
            message: 'The provided continue parameter is too old',
          }),
        );
      }
      return res.end(page(['c']));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    kubeConfig = loopbackKubeConfig((server.address() as AddressInfo).port);
  });

  afterAll(() => {
    server?.closeAllConnections();
    server?.close();
  });

  it('starts the LIST again from its first page, keeping nothing of the older snapshot', async () => {
    requests.length = 0;
    expiring = 1;
    const listed = await pagedList(kubeConfig, '/api/v1/configmaps', { pageSize: 2, project: (obj) => obj })();
    expect(listed.items.map((o) => o.metadata?.name)).toEqual(['a', 'b', 'c']);
    expect(listed.metadata?.resourceVersion).toBe('20');
    expect(requests).toEqual(['?limit=2', '?limit=2&continue=token-1', '?limit=2', '?limit=2&continue=token-1']);
  });

  it('fails with the 410 when every start expires (the informer backs off, then lists again)', async () => {
    expiring = 100;
    await expect(pagedList(kubeConfig, '/api/v1/configmaps', { pageSize: 2, project: (obj) => obj })()).rejects.toMatchObject({ statusCode: 410 });
  });
});
