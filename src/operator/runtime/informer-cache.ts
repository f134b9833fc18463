// Informers whose cache keeps only what the controller reads: a projection, the way
// controller-runtime's cache transforms (TransformStripManagedFields) and metadata-only watches do.
// client-node's ListWatch stores every object exactly as the apiserver sent it; at 10,000
// resources and as many Secrets, managedFields, status messages and Secret payloads were most of
// the operator's heap. None of it has a reader: the lifecycle reads the resource and the Secret it
// acts on fresh from the apiserver (the domain's reconciler), and a cached Secret's data would keep every
// issued key's secret in memory (one more place to leak from, e.g. a heap snapshot).
//
// What the runtime reads from the caches (controller.ts): names and resourceVersion (the
// informer's own bookkeeping), generation and deletionTimestamp (whether an event may wake a key
// that is backing off): identityMeta() below. The domain may compare a cached uid and
// resourceVersion with those it read fresh (keys/observing/at-rest.ts: nothing changed since, so a drift pass
// needs no read); the content it acts on is still read fresh. Each watch adds what its domain reads
// (keys/observing/cache-projection.ts).
import { HttpMethod, RequestContext, Watch, type KubeConfig, type KubernetesObject, type ListPromise, type V1ObjectMeta } from '@kubernetes/client-node';
import { fetch } from 'undici';
import { intern } from './intern.ts';
import { Reflector, type ReflectorOptions } from './reflector.ts';

/** The identity of an object as every cache keeps it: the informer's bookkeeping, and what a wake is judged on. */
export function identityMeta(meta: V1ObjectMeta | undefined): V1ObjectMeta {
  return {
    name: meta?.name,
    namespace: intern(meta?.namespace),
    uid: meta?.uid,
    resourceVersion: meta?.resourceVersion,
    ...(meta?.generation !== undefined ? { generation: meta.generation } : {}),
    ...(meta?.deletionTimestamp !== undefined ? { deletionTimestamp: meta.deletionTimestamp } : {}),
  };
}

/** A Watch that hands every object through `transform` before the informer sees (and caches) it. */
class TransformingWatch<T> extends Watch {
  readonly #transform: (obj: T) => T;

  constructor(kubeConfig: KubeConfig, transform: (obj: T) => T) {
    super(kubeConfig);
    this.#transform = transform;
  }

  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(path, queryParams, (phase, obj: unknown, watchObj) => {
      // ERROR carries a Status, BOOKMARK only a resourceVersion: neither is cached.
      callback(phase, phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED' ? this.#transform(obj as T) : obj, watchObj);
    }, done);
  }
}

/** An informer (reflector.ts), with `transform` applied to the LIST's items and to every watch event's object. */
export function makeTrimmedInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  list: ListPromise<T>,
  transform: (obj: T) => T,
  labelSelector?: string,
  options?: ReflectorOptions,
): Reflector<T> {
  const trimmedList: ListPromise<T> = async () => {
    const result = await list();
    result.items = result.items.map(transform);
    return result;
  };
  return new Reflector<T>(path, new TransformingWatch<T>(kubeConfig, transform), trimmedList, labelSelector, options);
}

// Metadata-only informers (client-go's metadatainformer): the apiserver answers a LIST or a watch
// with PartialObjectMetadata when asked for it in the Accept header, so the content of the objects
// (a Secret's data) is never sent, let alone parsed into this process's heap. No fallback to
// plain JSON: an apiserver that cannot answer so fails the request (406) rather than sending data.
const METADATA_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_WATCH_ACCEPT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
/** Objects per page of a metadata LIST (client-go's reflector pages by 500 too). */
const METADATA_PAGE = 500;

/**
 * The kube config as client-node's Watch uses it (the cluster, and the request's authentication),
 * with the Accept header of a metadata-only watch added to every request.
 */
function metadataWatchConfig(kubeConfig: KubeConfig): KubeConfig {
  const config = Object.create(kubeConfig) as KubeConfig;
  config.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
    await kubeConfig.applySecurityAuthentication(context);
    context.setHeaderParam('Accept', METADATA_WATCH_ACCEPT);
  };
  return config;
}

/**
 * The most one page of a metadata LIST may weigh as sent (its JSON). Metadata is the tenant's to
 * size: up to 256 KiB of annotations, labels and managedFields per object, so 500 of them could be
 * hundreds of MiB in one page. A page over this is dropped as it arrives and asked for again with
 * half as many objects (one object's metadata is well under it: an object is at most ~1.5 MiB).
 */
const MAX_PAGE_BYTES = 8 * 1024 * 1024;

/** The body of a response, or undefined (the rest of it not read) once it is over `maxBytes`. */
async function boundedBody(response: Awaited<ReturnType<typeof fetch>>, maxBytes: number): Promise<string | undefined> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel();
    return undefined;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  // Leaving the loop early cancels the stream: the rest of the page is never read.
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > maxBytes) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}

/**
 * A LIST of `path` answered as PartialObjectMetadataList, page by page, each page's objects passed
 * through `project` as the page arrives: only the projection of a page is kept while the next one
 * is read, never the whole list as sent (an object projected to undefined is not kept at all).
 */
export function listMetadata<T extends KubernetesObject = KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  labelSelector?: string,
  pageSize = METADATA_PAGE,
  project: (obj: KubernetesObject) => T | undefined = (obj) => obj as T,
  maxPageBytes = MAX_PAGE_BYTES,
): ListPromise<T> {
  return async () => {
    const server = kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('no current cluster');
    const items: T[] = [];
    let resourceVersion: string | undefined;
    let next: string | undefined;
    let limit = pageSize;
    for (;;) {
      const url = new URL(server + path);
      url.searchParams.set('limit', String(limit));
      if (labelSelector !== undefined) url.searchParams.set('labelSelector', labelSelector);
      if (next !== undefined) url.searchParams.set('continue', next);
      const context = new RequestContext(url.toString(), HttpMethod.GET);
      await kubeConfig.applySecurityAuthentication(context);
      context.setHeaderParam('Accept', METADATA_LIST_ACCEPT);
      const response = await fetch(url, { method: 'GET', headers: context.getHeaders(), dispatcher: context.getDispatcher() });
      if (response.status !== 200) {
        await response.body?.cancel();
        throw Object.assign(new Error(`metadata list of ${path}: HTTP ${response.status}`), { statusCode: response.status });
      }
      const body = await boundedBody(response, maxPageBytes);
      if (body === undefined) {
        // The same continue token with a smaller limit: the same snapshot, from the same place.
        if (limit === 1) throw new Error(`metadata list of ${path}: one object's metadata is over ${maxPageBytes} bytes`);
        limit = Math.ceil(limit / 2);
        continue;
      }
      // Raw JSON (not client-node's model): the list's continue token is `continue`, and an empty
      // PartialObjectMetadataList carries `items: null`.
      const page = JSON.parse(body) as { items?: KubernetesObject[] | null; metadata?: { resourceVersion?: string; continue?: string } };
      for (const item of page.items ?? []) {
        const kept = project(item);
        if (kept !== undefined) items.push(kept);
      }
      resourceVersion = page.metadata?.resourceVersion;
      next = page.metadata?.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
      if (next === undefined) break;
    }
    return { apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadataList', metadata: { resourceVersion }, items };
  };
}

/**
 * makeTrimmedInformer() over metadata only: its LIST and watch ask the apiserver for
 * PartialObjectMetadata, so no object's content ever reaches the process; `transform` then keeps
 * what the controller reads of the metadata.
 */
export function makeMetadataInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  transform: (obj: T) => T,
  labelSelector?: string,
  options?: ReflectorOptions,
): Reflector<T> {
  // Each page is projected as it arrives (listMetadata), so the LIST never holds more than one page as sent.
  const list = listMetadata(kubeConfig, path, labelSelector, METADATA_PAGE, (obj) => transform(obj as T));
  return new Reflector<T>(path, new TransformingWatch<T>(metadataWatchConfig(kubeConfig), transform), list, labelSelector, options);
}
