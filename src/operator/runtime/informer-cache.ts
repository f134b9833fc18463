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
//
// An object is projected as it arrives, at LIST as at watch: a LIST goes in pages read as streams,
// one object held at a time (paged-list.ts), so neither a start nor a relist holds a namespace's
// objects as sent, whatever size a tenant gave them.
import type { KubeConfig, KubernetesObject, RequestContext, V1ObjectMeta } from '@kubernetes/client-node';
import { intern } from './intern.ts';
import { listMetadata, pagedList } from './paged-list.ts';
import { Reflector, type ReflectorOptions } from './reflector.ts';
import { ProjectingWatch } from './watch-stream.ts';

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

/**
 * The size as sent (bytes of JSON) of the object a cached projection was made from, as last listed
 * or watched: what a reconcile of it may have to hold (object-budget.ts). Whole-object informers only.
 */
const sizes = new WeakMap<object, number>();

/** The size as sent of the object a cached projection was made from, if known. */
export function cachedBytes(projection: KubernetesObject | undefined): number | undefined {
  return projection === undefined ? undefined : sizes.get(projection);
}

/** `transform`, the projection's object size recorded. */
function sized<T extends KubernetesObject>(transform: (obj: T) => T): (obj: T, bytes: number) => T {
  return (obj, bytes) => {
    const kept = transform(obj);
    sizes.set(kept, bytes);
    return kept;
  };
}

/**
 * Objects per page of a LIST of whole objects: a page is at most 50 × the largest object as sent
 * (about 2 MiB as JSON), read as a stream and never held: one object at a time (paged-list.ts).
 */
const OBJECT_PAGE = 50;

/** An informer (reflector.ts) whose LIST goes in pages and whose LIST items and watch events are each passed through `transform` as they arrive. */
export function makeTrimmedInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  transform: (obj: T) => T,
  labelSelector?: string,
  options?: ReflectorOptions,
): Reflector<T> {
  const project = sized(transform);
  const list = pagedList<T>(kubeConfig, path, {
    pageSize: OBJECT_PAGE,
    project: (obj, bytes) => project(obj as T, bytes),
    ...(labelSelector !== undefined ? { labelSelector } : {}),
  });
  return new Reflector<T>(path, new ProjectingWatch<T>(kubeConfig, project), list, labelSelector, options);
}

// Metadata-only informers (client-go's metadatainformer): the apiserver answers a LIST or a watch
// with PartialObjectMetadata when asked for it in the Accept header, so the content of the objects
// (a Secret's data) is never sent, let alone parsed into this process's heap. No fallback to
// plain JSON: an apiserver that cannot answer so fails the request (406) rather than sending data.
const METADATA_WATCH_ACCEPT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

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
  const list = listMetadata(kubeConfig, path, labelSelector, undefined, (obj) => transform(obj as T));
  return new Reflector<T>(path, new ProjectingWatch<T>(metadataWatchConfig(kubeConfig), transform), list, labelSelector, options);
}
