// Informers whose cache keeps only what the controller reads (controller-runtime's cache
// transforms, e.g. TransformStripManagedFields). client-node's ListWatch stores every object
// exactly as the apiserver sent it; at 10,000 resources and as many Secrets, managedFields and
// last-applied annotations are a large share of the operator's heap, and a cached Secret's data
// would keep every issued key's secret in memory for no reader at all: the lifecycle reads the
// Secret it acts on fresh from the apiserver (lifecycle.ts), the Secret informer only wakes owners.
import { ListWatch, Watch, type KubeConfig, type KubernetesObject, type ListPromise, type V1Secret } from '@kubernetes/client-node';

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** A resource as the caches keep it: without managedFields and kubectl's last-applied copy. */
export function trimObject<T extends KubernetesObject>(obj: T): T {
  const meta = obj.metadata;
  if (meta === undefined) return obj;
  delete meta.managedFields;
  if (meta.annotations?.[LAST_APPLIED] !== undefined) delete meta.annotations[LAST_APPLIED];
  return obj;
}

/**
 * A managed Secret as the cache keeps it: identity, labels, annotations and owners; never its data
 * (a secret value in the operator's heap is one more place it could leak from, e.g. a heap snapshot).
 */
export function trimSecret(secret: V1Secret): V1Secret {
  const meta = trimObject(secret).metadata ?? {};
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: meta.name,
      namespace: meta.namespace,
      uid: meta.uid,
      resourceVersion: meta.resourceVersion,
      ...(meta.labels !== undefined ? { labels: meta.labels } : {}),
      ...(meta.annotations !== undefined ? { annotations: meta.annotations } : {}),
      ...(meta.ownerReferences !== undefined ? { ownerReferences: meta.ownerReferences } : {}),
      ...(meta.deletionTimestamp !== undefined ? { deletionTimestamp: meta.deletionTimestamp } : {}),
    },
    ...(secret.type !== undefined ? { type: secret.type } : {}),
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
