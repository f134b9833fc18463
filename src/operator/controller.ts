// Informers feed a work queue of `kind/namespace/name`; N workers reconcile keys, one worker per
// key at a time (the queue guarantees it). Secrets are watched only through the managed-by label
// (never a cache of every Secret); a Secret event wakes the resource that owns it. Watching a list
// of namespaces runs one informer per namespace and kind: that needs list/watch in those
// namespaces only, so the operator can run with Roles there and no cluster-wide rights.
import { randomUUID } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type Informer, type KubeConfig, type ObjectCache, type KubernetesObject, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { makeTrimmedInformer, trimKeyResource, trimSecret } from './informer-cache.ts';
import type { KeyLifecycle, ReconcileResult } from './lifecycle.ts';
import { objectRef, type OwnWrites } from './own-writes.ts';
import { WorkQueue, type WorkQueueMetrics } from './queue.ts';
import { GROUP, KINDS, LABEL_MANAGED_BY, MANAGED_BY, VERSION, type KindName } from './resources/schema.ts';
import { ANNOTATION_OWNER } from './secret-writer.ts';

export interface ControllerOptions {
  kubeConfig: KubeConfig;
  lifecycle: KeyLifecycle;
  logger: Logger;
  workers: number;
  /** Watch these namespaces (one informer each per kind), or all when undefined. */
  namespaces?: readonly string[];
  onReconciled?(kind: KindName, result: 'success' | 'error' | 'requeue', seconds: number): void;
  /** Ceiling of the per-item backoff after platform refusals. */
  maxBackoffMs?: number;
  queueMetrics?: WorkQueueMetrics;
  /** The versions the lifecycle wrote: their events do not wake the key again (own-writes.ts). */
  ownWrites?: OwnWrites;
}

type Key = `${KindName}/${string}/${string}`;

interface WakeEvent {
  /** The object the event is about: the key resource itself (`ref` is the key) or its Secret. */
  ref: string;
  resourceVersion: string | undefined;
  deleted: boolean;
  /** The key resource's, for the backoff hold. */
  generation?: number | undefined;
  deleting?: boolean;
}

export class Controller {
  readonly #o: ControllerOptions;
  readonly #queue: WorkQueue<Key>;
  readonly #informers: Informer<KubernetesObject>[] = [];
  readonly #platformFailures = new Map<Key, number>();
  readonly #holds = new Map<Key, { until: number; generation: number | undefined; deleting: boolean }>();
  /** Keys being reconciled, with the informer events about them that arrived meanwhile. */
  readonly #working = new Map<Key, WakeEvent[]>();
  /** Per kind, one cache per watched namespace (or one for every namespace). */
  readonly #caches = new Map<KindName, (Informer<KubernetesObject> & ObjectCache<KubernetesObject>)[]>();
  #workers: Promise<void>[] = [];
  #stopped = false;
  #synced = false;

  constructor(options: ControllerOptions) {
    this.#o = options;
    this.#queue = new WorkQueue<Key>(options.queueMetrics !== undefined ? { metrics: options.queueMetrics } : {});
  }

  /**
   * Every informer has LISTed successfully. client-node's start() resolves even when the LIST fails
   * (it only emits 'error'), so a resource version is the proof that the cache holds a list.
   */
  get synced(): boolean {
    return this.#synced && this.#informers.every((i) => (i as Partial<{ latestResourceVersion(): string }>).latestResourceVersion?.() !== '');
  }

  /** The resources of a kind as the informer last saw them. */
  cached(kind: KindName): readonly KubernetesObject[] {
    return (this.#caches.get(kind) ?? []).flatMap((cache) => cache.list());
  }

  /**
   * Wakes every ProjectApiKey of a project (its operations changed), in the low lane: one poll
   * wakes every key of the project (hundreds, in the bench), and a new or changed resource must
   * not wait behind that wave.
   */
  enqueueProject(projectId: string): void {
    for (const obj of this.cached('ProjectApiKey')) {
      const spec = (obj as { spec?: { projectId?: string } }).spec;
      if (spec?.projectId === projectId && obj.metadata?.namespace !== undefined && obj.metadata.name !== undefined) {
        this.#queue.add(`ProjectApiKey/${obj.metadata.namespace}/${obj.metadata.name}`, { priority: 'low' });
      }
    }
  }

  async start(): Promise<void> {
    const { kubeConfig } = this.#o;
    const objects = kubeConfig.makeApiClient(CustomObjectsApi);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    // undefined: one informer over every namespace.
    const scopes: (string | undefined)[] = this.#o.namespaces === undefined || this.#o.namespaces.length === 0 ? [undefined] : [...this.#o.namespaces];
    for (const namespace of scopes) this.#watchNamespace(namespace, objects, core);
    await Promise.all(this.#informers.map((i) => i.start()));
    this.#synced = true;
    this.#workers = Array.from({ length: this.#o.workers }, () => this.#work());
  }

  /** The informers of one namespace (or of every namespace): each kind, and the managed Secrets. */
  #watchNamespace(namespace: string | undefined, objects: CustomObjectsApi, core: CoreV1Api): void {
    const { kubeConfig } = this.#o;
    for (const kind of Object.keys(KINDS) as KindName[]) {
      const plural = KINDS[kind].plural;
      const path = namespace === undefined ? `/apis/${GROUP}/${VERSION}/${plural}` : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`;
      const list = (): Promise<{ items: KubernetesObject[]; metadata?: { resourceVersion?: string } }> => namespace === undefined
        ? objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural })
        : objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural });
      const informer = makeTrimmedInformer<KubernetesObject>(kubeConfig, path, list as never, trimKeyResource);
      const wake = (obj: KubernetesObject, deleted: boolean): void => {
        const meta = obj.metadata;
        if (meta?.name === undefined || meta.namespace === undefined) return;
        const key: Key = `${kind}/${meta.namespace}/${meta.name}`;
        if (deleted) this.#o.ownWrites?.forget(key);
        this.#wake(key, { ref: key, resourceVersion: meta.resourceVersion, deleted, generation: meta.generation, deleting: meta.deletionTimestamp !== undefined });
      };
      this.#caches.set(kind, [...this.#caches.get(kind) ?? [], informer]);
      informer.on('add', (obj: KubernetesObject) => wake(obj, false));
      informer.on('update', (obj: KubernetesObject) => wake(obj, false));
      informer.on('delete', (obj: KubernetesObject) => wake(obj, true));
      this.#watchErrors(informer, `${kind} informer`);
      this.#informers.push(informer);
    }
    const selector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
    const secretPath = namespace === undefined ? '/api/v1/secrets' : `/api/v1/namespaces/${namespace}/secrets`;
    const listSecrets = (): Promise<{ items: V1Secret[] }> => namespace === undefined
      ? core.listSecretForAllNamespaces({ labelSelector: selector })
      : core.listNamespacedSecret({ namespace, labelSelector: selector });
    const secrets = makeTrimmedInformer<V1Secret>(kubeConfig, secretPath, listSecrets as never, trimSecret, selector);
    const wakeOwner = (secret: V1Secret, deleted: boolean): void => {
      const owner = secret.metadata?.annotations?.[ANNOTATION_OWNER];
      const ns = secret.metadata?.namespace;
      if (owner === undefined || ns === undefined) return;
      const [kind, name] = owner.split('/');
      if ((kind !== 'ApiKey' && kind !== 'ProjectApiKey') || name === undefined) return;
      const ref = objectRef('Secret', ns, secret.metadata?.name ?? '');
      if (deleted) this.#o.ownWrites?.forget(ref);
      this.#wake(`${kind}/${ns}/${name}`, { ref, resourceVersion: secret.metadata?.resourceVersion, deleted });
    };
    secrets.on('add', (secret: V1Secret) => wakeOwner(secret, false));
    secrets.on('update', (secret: V1Secret) => wakeOwner(secret, false));
    secrets.on('delete', (secret: V1Secret) => wakeOwner(secret, true));
    this.#watchErrors(secrets as unknown as Informer<KubernetesObject>, 'Secret informer');
    this.#informers.push(secrets as unknown as Informer<KubernetesObject>);
  }

  /**
   * An informer event about a key resource or its Secret. Events that arrive while the key is
   * being reconciled are judged when that reconcile ends, once the versions it wrote are recorded:
   * the watch may deliver a write's event before its response. A version this process wrote does
   * not wake the key (own-writes.ts); neither does anything but a change of spec or a deletion
   * while the key backs off from a platform refusal.
   */
  #wake(key: Key, event: WakeEvent): void {
    const working = this.#working.get(key);
    if (working !== undefined && !event.deleted) {
      working.push(event);
      return;
    }
    if (!event.deleted && this.#o.ownWrites?.consume(event.ref, event.resourceVersion) === true) return;
    const hold = this.#holds.get(key);
    if (hold !== undefined && !event.deleted && Date.now() < hold.until
      && (event.ref !== key || (hold.generation === event.generation && hold.deleting === event.deleting))) return;
    this.#holds.delete(key);
    // Before the initial sync these are mostly the initial LISTs: low priority, as in controller-runtime's priorityqueue.
    this.#queue.add(key, { priority: this.#synced ? 'normal' : 'low' });
  }

  /** client-node's informer stops on a watch error other than 410: start it again after a pause. */
  #watchErrors(informer: Informer<KubernetesObject>, what: string): void {
    informer.on('error', (error: unknown) => {
      if (this.#stopped) return;
      this.#o.logger.warn({ err: error instanceof Error ? error.message : String(error) }, `${what} failed; restarting`);
      setTimeout(() => {
        if (!this.#stopped) informer.start().catch(() => undefined);
      }, 1_000).unref();
    });
  }

  async #work(): Promise<void> {
    for (;;) {
      const key = await this.#queue.get();
      if (key === undefined) return;
      const [kind, namespace, name] = key.split('/') as [KindName, string, string];
      const logger = this.#o.logger.child({ kind, namespace, name, reconcileId: randomUUID() });
      const started = performance.now();
      let result: ReconcileResult | undefined;
      this.#working.set(key, []);
      try {
        result = await this.#o.lifecycle.reconcile(kind, namespace, name, logger);
      } catch (error) {
        logger.error({ err: error instanceof Error ? { message: error.message, code: (error as { code?: unknown }).code } : String(error) }, 'reconcile failed');
      }
      const seconds = (performance.now() - started) / 1000;
      const seen = this.#working.get(key) ?? [];
      this.#working.delete(key);
      this.#schedule(key, result);
      for (const event of seen) this.#wake(key, event);
      this.#o.onReconciled?.(kind, result === undefined ? 'error' : result.type === 'Done' ? 'success' : 'requeue', seconds);
      this.#queue.done(key);
    }
  }

  #schedule(key: Key, result: ReconcileResult | undefined): void {
    if (this.#stopped) return;
    if (result === undefined || result.type === 'Retry') {
      this.#queue.addRateLimited(key);
      return;
    }
    if (result.type === 'Backoff') {
      // Platform refusals (401, 403, 429, outage): seconds to minutes, never a hot loop.
      const failures = (this.#platformFailures.get(key) ?? 0) + 1;
      this.#platformFailures.set(key, failures);
      const delay = Math.max(result.minDelayMs ?? 0, Math.min(this.#o.maxBackoffMs ?? 300_000, 1_000 * 2 ** (failures - 1)));
      const [kind, namespace, name] = key.split('/') as [KindName, string, string];
      const cached = this.#caches.get(kind)?.map((cache) => cache.get(name, namespace)).find((obj) => obj !== undefined);
      this.#holds.set(key, { until: Date.now() + delay, generation: cached?.metadata?.generation, deleting: cached?.metadata?.deletionTimestamp !== undefined });
      this.#queue.addAfter(key, delay);
      return;
    }
    this.#platformFailures.delete(key);
    this.#holds.delete(key);
    this.#queue.forget(key);
    if (result.requeueAfterMs !== undefined) {
      // Jitter spreads drift checks of many resources over the interval.
      // Low priority, as in controller-runtime's priorityqueue: a wave of drift checks must not delay events.
      this.#queue.addAfter(key, Math.round(result.requeueAfterMs * (0.9 + Math.random() * 0.2)), { priority: 'low' });
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#informers.map((i) => i.stop()));
    await this.#queue.shutDownWithDrain();
    await Promise.all(this.#workers);
  }
}
