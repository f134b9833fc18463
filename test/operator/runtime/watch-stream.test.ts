// The informers' watch request (src/operator/runtime/watch-stream.ts): its line splitter alone, then
// the watch against the real apiserver: objects projected with their size as sent, the ends it
// chooses (a line over the bound, a callback that throws, a refused path, a quiet stream), and a
// metadata-only watch that never receives an object's content. Last, a line that is not JSON, from
// a loopback server (a named fake: an apiserver does not send one).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig, type RequestContext, type V1ConfigMap } from '@kubernetes/client-node';
import { LineSplitter, ProjectingWatch } from '../../../src/operator/runtime/watch-stream.ts';
import { controlPlane } from '../../harness/index.ts';
import { loopbackKubeConfig, startRecordingServer } from '../../harness/recording-server.ts';

describe('LineSplitter', () => {
  const split = (chunks: string[], maxBytes = 1024): string[] => {
    const lines: string[] = [];
    const splitter = new LineSplitter(maxBytes, (line) => lines.push(line.toString('utf8')));
    for (const chunk of chunks) splitter.write(Buffer.from(chunk, 'utf8'));
    return lines;
  };

  it('hands on each line once it ends, whatever chunks it came in, and skips empty lines', () => {
    expect(split(['{"a":1}\n{"b"', ':2}\n\n{"c":', '3', '}\n{"d":4'])).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
    expect(split(['x\ny\n'])).toEqual(['x', 'y']);
  });

  it('keeps a character cut between two chunks whole', () => {
    const bytes = Buffer.from('{"name":"ü€"}\n', 'utf8');
    const lines: string[] = [];
    const splitter = new LineSplitter(1024, (line) => lines.push(line.toString('utf8')));
    for (let i = 0; i < bytes.length; i++) splitter.write(bytes.subarray(i, i + 1));
    expect(lines).toEqual(['{"name":"ü€"}']);
  });

  it('throws on a line over its bound, ended or not, and holds no more of it', () => {
    expect(() => split(['x'.repeat(2000) + '\n'])).toThrow(/a watch event of more than 1024 bytes/);
    expect(() => split(['x'.repeat(600), 'x'.repeat(600)])).toThrow(/a watch event of more than 1024 bytes/);
    expect(split(['x'.repeat(1024) + '\n'])).toEqual(['x'.repeat(1024)]);
  });
});

interface End {
  error: unknown;
}

describe('a watch request against the apiserver', () => {
  const namespace = `watch-stream-${randomBytes(3).toString('hex')}`;
  const path = `/api/v1/namespaces/${namespace}/configmaps`;
  let core: CoreV1Api;
  let kubeConfig: KubeConfig;

  beforeAll(async () => {
    const cp = await controlPlane();
    kubeConfig = cp.kubeConfig;
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  afterAll(async () => {
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  /** The namespace's ConfigMaps' version now: a watch from it sees only what comes after. */
  const version = async (): Promise<string> => (await core.listNamespacedConfigMap({ namespace })).metadata?.resourceVersion ?? '';

  /** Opens a watch; resolves `ended` with what done() was given. */
  async function open(
    watch: ProjectingWatch<V1ConfigMap>,
    resourceVersion: string,
    onEvent: (phase: string, obj: unknown) => void,
    params: Record<string, string | number | boolean> = {},
  ): Promise<{ controller: AbortController; ended: Promise<End>; dones: () => number }> {
    let dones = 0;
    let resolve: (end: End) => void = () => undefined;
    const ended = new Promise<End>((r) => (resolve = r));
    const controller = await watch.watch(path, { resourceVersion, ...params }, onEvent, (error) => {
      dones++;
      resolve({ error });
    });
    return { controller, ended, dones: () => dones };
  }

  it('projects each object as it arrives, with its size as sent, and passes the phases on', async () => {
    const sizes = new Map<string, number[]>();
    const watch = new ProjectingWatch<V1ConfigMap>(kubeConfig, (obj, bytes) => {
      const name = obj.metadata?.name ?? '';
      sizes.set(name, [...(sizes.get(name) ?? []), bytes]);
      return { metadata: { name, resourceVersion: obj.metadata?.resourceVersion } };
    });
    const seen: string[] = [];
    const objects: unknown[] = [];
    const from = await version();
    const { controller, ended, dones } = await open(watch, from, (phase, obj) => {
      seen.push(phase);
      objects.push(obj);
    });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'padded' }, data: { blob: 'd'.repeat(200 * 1024) } } });
    await core.patchNamespacedConfigMap({ namespace, name: 'padded', body: [{ op: 'add', path: '/metadata/labels', value: { touched: 'yes' } }] });
    await core.deleteNamespacedConfigMap({ namespace, name: 'padded' });
    await until(() => seen.length >= 3);
    expect(seen).toEqual(['ADDED', 'MODIFIED', 'DELETED']);
    // Only the projection went on: no data, no labels.
    expect(objects.every((o) => JSON.stringify(o).length < 200)).toBe(true);
    // The size as sent: the event's line, at least the object's JSON.
    const padded = sizes.get('padded') ?? [];
    expect(padded).toHaveLength(3);
    expect(padded.every((n) => n > 200 * 1024 && n < 210 * 1024)).toBe(true);
    controller.abort();
    await ended;
    expect(dones()).toBe(1);
  });

  it('ends on a line over the bound after handing on what came before it', async () => {
    const watch = new ProjectingWatch<V1ConfigMap>(kubeConfig, (obj) => obj, 16 * 1024);
    const seen: string[] = [];
    const { ended } = await open(watch, await version(), (_phase, obj) => seen.push((obj as V1ConfigMap).metadata?.name ?? ''));
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'small' }, data: { a: 'b' } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'large' }, data: { blob: 'd'.repeat(64 * 1024) } } });
    const { error } = await ended;
    expect(String(error)).toMatch(/a watch event of more than 16384 bytes/);
    expect(seen).toEqual(['small']);
  });

  it('ends with the error its callback throws, where client-node let it pass', async () => {
    const watch = new ProjectingWatch<V1ConfigMap>(kubeConfig, (obj) => obj);
    const { ended } = await open(watch, await version(), () => {
      throw new Error('a handler failed');
    });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'thrown' }, data: { a: 'b' } } });
    expect(String((await ended).error)).toContain('a handler failed');
  });

  it("ends with the apiserver's status when it refuses the watch", async () => {
    const watch = new ProjectingWatch<V1ConfigMap>(kubeConfig, (obj) => obj);
    let resolve: (error: unknown) => void = () => undefined;
    const ended = new Promise<unknown>((r) => (resolve = r));
    await watch.watch('/api/v1/namespaces/x/no-such-resource', {}, () => undefined, resolve);
    expect(await ended).toMatchObject({ statusCode: 404 });
  });

  it('ends as timed out when nothing came for requestTimeoutMs', async () => {
    const watch = new ProjectingWatch<V1ConfigMap>(kubeConfig, (obj) => obj);
    watch.requestTimeoutMs = 300;
    const { ended } = await open(watch, await version(), () => undefined, { allowWatchBookmarks: false });
    expect((await ended).error).toMatchObject({ name: 'TimeoutError' });
  });

  it("asks for metadata only through its KubeConfig: no object's content arrives", async () => {
    const metadataOnly = Object.create(kubeConfig) as KubeConfig;
    metadataOnly.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
      await kubeConfig.applySecurityAuthentication(context);
      context.setHeaderParam('Accept', 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1');
    };
    const objects: unknown[] = [];
    const watch = new ProjectingWatch<V1ConfigMap>(metadataOnly, (obj) => obj);
    const { controller, ended } = await open(watch, await version(), (_phase, obj) => objects.push(obj));
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'content' }, data: { blob: 'secret-looking-content' } } });
    await until(() => objects.length >= 1);
    expect(objects[0]).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 'content' } });
    expect(JSON.stringify(objects)).not.toContain('secret-looking-content');
    controller.abort();
    await ended;
  });
});

describe('a watch stream with a line that is not JSON (a fake server)', () => {
  it('ends the watch after the events before it, and its error quotes nothing of the line', async () => {
    const server = await startRecordingServer([], (_request, res) => {
      res.setHeader('content-type', 'application/json');
      res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'first', resourceVersion: '5' } } })}\n`);
      res.write('{"type":"ADDED","object":{"data":{"token":"napi_not-to-be-quoted"}},,}\n');
    });
    try {
      const kubeConfig = loopbackKubeConfig(server.port);
      const seen: unknown[] = [];
      let resolve: (error: unknown) => void = () => undefined;
      const ended = new Promise<unknown>((r) => (resolve = r));
      await new ProjectingWatch<V1ConfigMap>(kubeConfig, (obj) => obj).watch('/api/v1/configmaps', {}, (_phase, obj) => seen.push(obj), resolve);
      const error = await ended;
      expect(seen).toEqual([{ metadata: { name: 'first', resourceVersion: '5' } }]);
      expect(String(error)).toMatch(/a watch event that is not JSON \(\d+ bytes\)/);
      expect(String(error)).not.toContain('napi_');
      expect(String((error as Error).stack)).not.toContain('napi_');
    } finally {
      await server.close();
    }
  });
});

/** Polls a condition on events already counted (no wall-clock bound but jest's own timeout). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}
