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
// that is backing off): identityMeta() below. Each watch adds what its domain reads
// (keys/cache-projection.ts).
import { ListWatch, Watch, type KubeConfig, type KubernetesObject, type ListPromise, type V1ObjectMeta } from '@kubernetes/client-node';

/** The identity of an object as every cache keeps it: the informer's bookkeeping, and what a wake is judged on. */
export function identityMeta(meta: V1ObjectMeta | undefined): V1ObjectMeta {
  return {
    name: meta?.name,
    namespace: meta?.namespace,
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

/** makeInformer(), with `transform` applied to the LIST's items and to every watch event's object. */
export function makeTrimmedInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  list: ListPromise<T>,
  transform: (obj: T) => T,
  labelSelector?: string,
): ListWatch<T> {
  const trimmedList: ListPromise<T> = async () => {
    const result = await list();
    result.items = result.items.map(transform);
    return result;
  };
  return new ListWatch<T>(path, new TransformingWatch<T>(kubeConfig, transform), trimmedList, false, labelSelector);
}
