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
// resourceVersion with those it read fresh (keys/at-rest.ts: nothing changed since, so a drift pass
// needs no read); the content it acts on is still read fresh. Each watch adds what its domain reads
// (keys/cache-projection.ts).
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

/** A LIST of `path` answered as PartialObjectMetadataList, page by page. */
export function listMetadata(kubeConfig: KubeConfig, path: string, labelSelector?: string, pageSize = METADATA_PAGE): ListPromise<KubernetesObject> {
  return async () => {
    const server = kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('no current cluster');
    const items: KubernetesObject[] = [];
    let resourceVersion: string | undefined;
    let next: string | undefined;
    do {
      const url = new URL(server + path);
      url.searchParams.set('limit', String(pageSize));
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
      // Raw JSON (not client-node's model): the list's continue token is `continue`, and an empty
      // PartialObjectMetadataList carries `items: null`.
      const page = await response.json() as { items?: KubernetesObject[] | null; metadata?: { resourceVersion?: string; continue?: string } };
      items.push(...page.items ?? []);
      resourceVersion = page.metadata?.resourceVersion;
      next = page.metadata?.continue !== undefined && page.metadata.continue !== '' ? page.metadata.continue : undefined;
    } while (next !== undefined);
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
  const list = listMetadata(kubeConfig, path, labelSelector) as ListPromise<T>;
  const trimmedList: ListPromise<T> = async () => {
    const result = await list();
    result.items = result.items.map(transform);
    return result;
  };
  return new Reflector<T>(path, new TransformingWatch<T>(metadataWatchConfig(kubeConfig), transform), trimmedList, labelSelector, options);
}
