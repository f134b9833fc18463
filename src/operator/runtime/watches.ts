// Watches declared as data (what to list and watch, the projection the cache keeps, which key an
// event wakes), the informer each is made into, and how its events map to the keys they wake.
import type { KubeConfig, Informer, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { makeMetadataInformer, makeTrimmedInformer } from './informer-cache.ts';
import { objectRef, type OwnWrites } from './own-writes.ts';
import type { ReferenceIndex } from './reference-index.ts';
import type { ReflectorOptions, WatchRestart } from './reflector.ts';
import type { WakeEvent } from './wake-gate.ts';
import type { WakeLimiter } from './wake-limiter.ts';

/** An informer with its cache: reflector.ts's (the interface of client-node's ListWatch), or a fake in tests. */
export type CachingInformer = Informer<KubernetesObject> & ObjectCache<KubernetesObject>;

interface WatchBase {
  /** What the informer LISTs (in pages) and watches. */
  path: string;
  /** What the cache keeps of each object (informer-cache.ts): never more than the controller reads. */
  project(obj: KubernetesObject): KubernetesObject;
  labelSelector?: string;
  /** LIST and watch metadata only (PartialObjectMetadata): the objects' content never reaches the process. */
  metadataOnly?: boolean;
}

/** Objects the reconciled ones name (an input): each wakes every key whose `index` holds `valueOf(obj)`. */
export interface Reference {
  index: string;
  valueOf(obj: KubernetesObject): string | undefined;
}

/**
 * A watch declared as data. `for`: objects of the reconciled kind, each waking its own key;
 * `indexes` name what each refers to, for references. `owns`: objects that belong to a reconciled
 * object (e.g. a Secret it writes), each waking its owner's key as `ownerOf` says (undefined:
 * nobody's); with `referencedBy`, the same objects are also inputs (one informer and one cache for
 * both: e.g. every Secret, some written by the controller, some named as credentials).
 * `referenced`: objects that are only inputs. An input's change may end a refusal, so it also ends
 * a refusal backoff.
 */
export type Watch =
  | (WatchBase & { type: 'for'; kind: string; indexes?: Readonly<Record<string, (obj: KubernetesObject) => readonly string[]>> })
  | (WatchBase & { type: 'owns'; kind: string; ownerOf(obj: KubernetesObject): string | undefined; referencedBy?: Reference })
  | (WatchBase & Reference & { type: 'referenced'; kind: string });

/** What the informers of the watches are made with (part of ControllerOptions). */
export interface InformerOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Makes the informer of a watch (default: a trimmed reflector.ts informer; tests pass fakes). */
  informerFor?(watch: Watch): CachingInformer;
  /** How the informers retry and time their watches (reflector.ts; tests shorten them). */
  reflector?: Pick<ReflectorOptions, 'backoff' | 'healthyWatchMs' | 'minWatchTimeoutSeconds' | 'inactivityMs' | 'bookmarks'>;
  /** Told of each informer's restarts and LISTs, by kind (metrics: never the namespace). */
  onWatchRestart?(kind: string, restart: WatchRestart): void;
  onList?(kind: string): void;
}

/** What a cache of reflector.ts tells of its health; a fake informer may not. */
export interface CacheHealth {
  hasSynced?(): boolean;
  failingSince?(): number | undefined;
  lastError?(): string | undefined;
}

/**
 * The informer of a watch in one namespace (undefined: every namespace); `onRecovered` is told when
 * its LIST or WATCH works again after failing, and for how long it failed.
 */
export function watchInformer(o: InformerOptions, watch: Watch, namespace: string | undefined, onRecovered: (failedForMs: number) => void): CachingInformer {
  const made = o.informerFor?.(watch);
  if (made !== undefined) return made;
  const { logger, onWatchRestart, onList } = o;
  const options: ReflectorOptions = {
    ...o.reflector,
    onRestart: (restart) => {
      onWatchRestart?.(watch.kind, restart);
      // One line per failure: at most one a minute per informer once the backoff is at its cap.
      if (restart.reason !== 'ended')
        logger.warn(
          {
            kind: watch.kind,
            namespace: namespace ?? '(all)',
            reason: restart.reason,
            err: restart.error,
            failures: restart.failures,
            retryInMs: restart.delayMs,
          },
          'watch failed; retrying',
        );
      // Its timeout every 5 to 10 minutes, or the apiserver dropping a watch that fell behind a burst.
      else
        logger.debug(
          { kind: watch.kind, namespace: namespace ?? '(all)', openMs: restart.openMs, events: restart.events, retryInMs: restart.delayMs },
          'watch ended; resuming',
        );
    },
    onList: () => onList?.(watch.kind),
    onRecovered,
  };
  if (watch.metadataOnly === true) return makeMetadataInformer<KubernetesObject>(o.kubeConfig, watch.path, watch.project, watch.labelSelector, options);
  return makeTrimmedInformer<KubernetesObject>(o.kubeConfig, watch.path, watch.project, watch.labelSelector, options);
}

/** What the events of a watch wake, and through what (the controller's). */
export interface WakeRoutes {
  /** The reference index of that name (made on first use). */
  index(name: string): ReferenceIndex;
  wake(key: string, event: WakeEvent): void;
  inputWakes: WakeLimiter;
  ownerWakes: WakeLimiter;
  ownWrites: OwnWrites | undefined;
  logger: Logger;
}

/** The function an informer event of `watch` goes to: it updates the indexes and wakes the keys the event is about. */
export function wakeOf(watch: Watch, routes: WakeRoutes): (obj: KubernetesObject, deleted: boolean) => void {
  if (watch.type === 'for') {
    const indexes = Object.entries(watch.indexes ?? {}).map(([name, valuesOf]) => ({ index: routes.index(name), valuesOf }));
    return (obj, deleted) => {
      const meta = obj.metadata;
      if (meta?.name === undefined) return;
      // A cluster-scoped object has no namespace: its key is `kind//name`, its request's namespace ''.
      const namespace = meta.namespace ?? '';
      const key = objectRef(watch.kind, namespace, meta.name);
      // Every watch event passes here: its debug line (bench/fairness.ts --fair-stages) is built only when it is written.
      if (routes.logger.isLevelEnabled('debug'))
        routes.logger.debug({ kind: watch.kind, namespace, name: meta.name, resourceVersion: meta.resourceVersion }, 'event');
      for (const { index, valuesOf } of indexes) {
        if (deleted) index.delete(key);
        else index.set(key, valuesOf(obj));
      }
      if (deleted) routes.ownWrites?.forget(key);
      routes.wake(key, {
        ref: key,
        resourceVersion: meta.resourceVersion,
        deleted,
        generation: meta.generation,
        deleting: meta.deletionTimestamp !== undefined,
      });
    };
  } else {
    const ownerOf = watch.type === 'owns' ? watch.ownerOf : undefined;
    const reference = watch.type === 'owns' ? watch.referencedBy : watch;
    const index = reference !== undefined ? routes.index(reference.index) : undefined;
    return (obj, deleted) => {
      const ns = obj.metadata?.namespace;
      if (ns === undefined) return;
      const ref = objectRef(watch.kind, ns, obj.metadata?.name ?? '');
      const resourceVersion = obj.metadata?.resourceVersion;
      // A quiet write of ours to an input (a finalizer put on a credentials Secret) changed nothing
      // the keys that name it read: it wakes none of them (own-writes.ts recordQuiet).
      const ownInput = routes.ownWrites?.quiet(ref, resourceVersion) === true;
      const owner = ownerOf?.(obj);
      if (owner !== undefined) {
        if (deleted) routes.ownWrites?.forget(ref);
        // Our own writes take no token (they wake nobody: WakeGate.admit); the first others' go at once.
        const event = { ref, resourceVersion, deleted };
        if (!deleted && routes.ownWrites?.mine(ref, resourceVersion) === true) routes.wake(owner, event);
        else routes.ownerWakes.admit(owner, () => routes.wake(owner, event));
      }
      const value = reference?.valueOf(obj);
      if (index === undefined || value === undefined || ownInput) return;
      for (const key of index.keysOf(value)) routes.inputWakes.admit(key, () => routes.wake(key, { ref, resourceVersion, deleted, input: true }));
    };
  }
}
