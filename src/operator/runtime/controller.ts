// A controller over any kind (controller-runtime's builder + reconcileHandler): informers declared
// as data (what to list and watch, the projection the cache keeps, which key an event wakes) feed a
// work queue of `kind/namespace/name`; N workers reconcile keys, one worker per key at a time (the
// queue guarantees it). A reconcile may give its worker back while it waits on a remote system
// (Worker.release): the key stays in flight, and the worker takes the next key. Watching a list of namespaces runs one informer per namespace and watch:
// that needs list/watch in those namespaces only, so the operator can run with Roles there and no
// cluster-wide rights. Nothing here knows what a key resource is: the domain declares its watches.
// Objects the reconciled ones refer to (an input such as a credentials Secret) are watched too,
// metadata only, and wake exactly the keys that refer to them (reference-index.ts).
import { randomUUID } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import { cachedBytes } from './informer-cache.ts';
import { ObjectBudget } from './object-budget.ts';
import { objectRef, type OwnWrites } from './own-writes.ts';
import { ReferenceIndex } from './reference-index.ts';
import { RefusalLimiter } from './refusal-limiter.ts';
import type { ControllerMetrics, ReconcileOutcome } from './metrics.ts';
import { WorkQueue, type WorkQueueMetrics } from './queue.ts';
import { WakeGate, type WakeEvent } from './wake-gate.ts';
import { WakeLimiter, type WakeClock, type WakeLimits } from './wake-limiter.ts';
import { watchInformer, wakeOf, type CacheHealth, type CachingInformer, type InformerOptions, type Watch } from './watches.ts';
import { reconcileOutcome, releasableWorker, type ReconcileResult, type Reconciler, type Worker } from './workers.ts';

// Re-exported for the files that import them from here.

export interface ControllerOptions extends InformerOptions {
  reconciler: Reconciler;
  /** The watches of one namespace, or of every namespace when `namespace` is undefined. */
  watches(namespace: string | undefined): Watch[];
  /** Watches of cluster-scoped kinds: one informer each, however many namespaces are watched. */
  clusterWatches?: Watch[];
  workers: number;
  /** Watch these namespaces (one informer each per watch), or all when undefined. */
  namespaces?: readonly string[];
  onReconciled?(kind: string, result: ReconcileOutcome, seconds: number): void;
  /** controller-runtime's reconcile and worker metrics, by kind (runtime/metrics.ts). */
  metrics?: ControllerMetrics;
  /** Ceiling of the per-item backoff after refusals (Backoff results). */
  maxBackoffMs?: number;
  /** The first refusal's backoff, doubled per refusal (default 1 s). */
  minBackoffMs?: number;
  queueMetrics?: WorkQueueMetrics;
  /** The versions the reconciler wrote: their events do not wake the key again (own-writes.ts). */
  ownWrites?: OwnWrites;
  /** How often changes of inputs may wake one key (wake-limiter.ts); default DEFAULT_WAKE_LIMITS. */
  inputWakes?: WakeLimits;
  /** The wake limiters' time and timers (tests move it themselves). */
  wakeClock?: WakeClock;
  /**
   * Bytes of large objects (as sent) the reconciles may have in hand at once (object-budget.ts):
   * each reads, writes and parses its object, so N workers on objects a tenant made large hold N
   * times several copies. Default 4 MiB.
   */
  largeObjectBudgetBytes?: number;
  /** Given to every reconcile (Worker.signal): aborts when this process may no longer act. */
  signal?: AbortSignal;
  /** A cache whose watch has failed this long is stale (staleCaches()). Default 3 minutes. */
  cacheStaleAfterMs?: number;
}

/** A cache whose watch has failed for longer than the bound (ControllerOptions.cacheStaleAfterMs). */
export interface StaleCache {
  kind: string;
  /** undefined: the cache of every namespace. */
  namespace: string | undefined;
  failingForMs: number;
  /** What failed last: an HTTP status or a message. */
  error: string | undefined;
}

export class Controller {
  readonly #o: ControllerOptions;
  readonly #queue: WorkQueue<string>;
  readonly #informers: CachingInformer[] = [];
  /** What each informer watches: its kind, and its namespace (undefined: every namespace). */
  readonly #scopes = new Map<CachingInformer, { kind: string; namespace: string | undefined }>();
  readonly #refusals: RefusalLimiter<string>;
  /** Which informer events wake a key: held while it is reconciled, or while it backs off (wake-gate.ts). */
  readonly #gate: WakeGate;
  /** Per reconciled kind, one cache per watched namespace (or one for every namespace). */
  readonly #caches = new Map<string, CachingInformer[]>();
  /** Per kind of any watch, its caches (what `cachedMeta` looks in). */
  readonly #allCaches = new Map<string, CachingInformer[]>();
  /** The indexes of the reconciled objects' references, by index name (`referenced` watches). */
  readonly #indexes = new Map<string, ReferenceIndex>();
  /** Wakes by an input's change, per key: a burst at once, then at most one per interval (wake-limiter.ts). */
  readonly #inputWakes: WakeLimiter;
  /**
   * Wakes by an owned object's change (an object naming the key its owner), per key, limited apart
   * from the inputs' so that neither takes the other's tokens: whoever may write an object of the
   * namespace may name any resource there its owner, and writing it in a loop must not reconcile
   * that resource once per write.
   */
  readonly #ownerWakes: WakeLimiter;
  /** Large objects in the reconciles' hands (object-budget.ts). */
  readonly #objectBudget: ObjectBudget;
  #workers: Promise<void>[] = [];
  #stopped = false;
  #synced = false;

  constructor(options: ControllerOptions) {
    this.#o = options;
    // Keys are kind/namespace/name; the queue hands them out in turns between namespaces (runtime/queue.ts).
    this.#queue = new WorkQueue<string>({
      flowOf: (key) => key.slice(key.indexOf('/') + 1, key.indexOf('/', key.indexOf('/') + 1)),
      ...(options.queueMetrics !== undefined ? { metrics: options.queueMetrics } : {}),
    });
    this.#refusals = new RefusalLimiter({
      ...(options.maxBackoffMs !== undefined ? { maxDelayMs: options.maxBackoffMs } : {}),
      ...(options.minBackoffMs !== undefined ? { baseDelayMs: options.minBackoffMs } : {}),
    });
    this.#inputWakes = new WakeLimiter(options.inputWakes, options.wakeClock);
    this.#ownerWakes = new WakeLimiter(options.inputWakes, options.wakeClock);
    this.#gate = new WakeGate(options.ownWrites);
    this.#objectBudget = new ObjectBudget(options.largeObjectBudgetBytes ?? 4 * 1024 * 1024);
  }

  /**
   * Every informer has LISTed successfully once (an informer's start() resolves after its first
   * LIST, failed or not). A relist does not unsync a cache: it keeps its objects until the new list
   * replaces them (reflector.ts). A fake without hasSynced(): a resource version is the proof.
   */
  /** How long an informer's LIST or WATCH may fail before its cache is stale (cacheStaleAfterMs). */
  get #staleAfterMs(): number {
    return this.#o.cacheStaleAfterMs ?? 180_000;
  }

  /** Since when the informer's cache is stale, or undefined (a fake informer never is). */
  #staleSince(informer: CachingInformer, now: number): number | undefined {
    const since = (informer as CacheHealth).failingSince?.();
    return since !== undefined && now - since >= this.#staleAfterMs ? since : undefined;
  }

  get synced(): boolean {
    return (
      this.#synced &&
      this.#informers.every((i) => (i as CacheHealth).hasSynced?.() ?? (i as Partial<{ latestResourceVersion(): string }>).latestResourceVersion?.() !== '')
    );
  }

  /**
   * The caches whose LIST or WATCH has been failing for longer than the bound: what they hold may be
   * long out of date (a namespace whose Role was removed, an apiserver refusing the watch). Neither
   * readiness nor the at-rest check trusts them (keys/observing/at-rest.ts).
   */
  staleCaches(): StaleCache[] {
    const now = Date.now();
    const stale: StaleCache[] = [];
    for (const informer of this.#informers) {
      const since = this.#staleSince(informer, now);
      if (since === undefined) continue;
      const scope = this.#scopes.get(informer);
      if (scope !== undefined) stale.push({ ...scope, failingForMs: now - since, error: (informer as CacheHealth).lastError?.() });
    }
    return stale;
  }

  /** Whether the cache of `kind` in `namespace` is stale (staleCaches()). */
  cacheStale(kind: string, namespace: string): boolean {
    const now = Date.now();
    return (this.#allCaches.get(kind) ?? []).some((informer) => {
      const scope = this.#scopes.get(informer);
      return (scope?.namespace === undefined || scope.namespace === namespace) && this.#staleSince(informer, now) !== undefined;
    });
  }

  /** The objects of a reconciled kind as the informers last saw them. */
  cached(kind: string): readonly KubernetesObject[] {
    return (this.#caches.get(kind) ?? []).flatMap((cache) => cache.list());
  }

  /**
   * The metadata of one object (of any watched kind) as the caches hold it (their projection:
   * never more than identity and what the domain declared), or undefined when no cache holds it.
   */
  cachedMeta(kind: string, namespace: string, name: string): KubernetesObject['metadata'] | undefined {
    return this.cachedObject(kind, namespace, name)?.metadata;
  }

  /** One object (of any watched kind) as the caches hold it: their projection; undefined when no cache holds it. */
  cachedObject(kind: string, namespace: string, name: string): KubernetesObject | undefined {
    for (const cache of this.#allCaches.get(kind) ?? []) {
      const obj = cache.get(name, namespace);
      if (obj !== undefined) return obj;
    }
    return undefined;
  }

  /** The keys whose objects name `value` in `index` (a `for` watch's indexes): O(keys found), no scan. */
  indexed(index: string, value: string): readonly string[] {
    return this.#indexes.get(index)?.keysOf(value) ?? [];
  }

  /** Every object every cache holds: what this process keeps of the cluster (tests, heap audits). */
  cacheContents(): readonly KubernetesObject[] {
    return this.#informers.flatMap((informer) => informer.list());
  }

  /**
   * Queues a key in the low lane: a wave of keys woken by something other than their own change
   * (e.g. every resource of a project) must not delay a new or changed resource.
   */
  enqueueLow(key: string): void {
    this.#queue.add(key, { priority: 'low' });
  }

  /**
   * Queues a key in the normal lane: one the domain held back until its turn came (a create paced
   * to a remote system's rate limit). Not ahead of the others: a key of another organization, a
   * repair or a deletion must not wait behind a wave's turns either.
   */
  enqueue(key: string): void {
    this.#queue.add(key);
  }

  async start(): Promise<void> {
    // undefined: one informer per watch over every namespace.
    const scopes: (string | undefined)[] = this.#o.namespaces === undefined || this.#o.namespaces.length === 0 ? [undefined] : [...this.#o.namespaces];
    for (const namespace of scopes) {
      for (const watch of this.#o.watches(namespace)) this.#watch(watch, namespace);
    }
    for (const watch of this.#o.clusterWatches ?? []) this.#watch(watch, undefined);
    await Promise.all(this.#informers.map((i) => i.start()));
    this.#o.metrics?.started([...this.#caches.keys()]);
    this.#synced = true;
    this.#workers = Array.from({ length: this.#o.workers }, () => this.#work());
  }

  #index(name: string): ReferenceIndex {
    let index = this.#indexes.get(name);
    if (index === undefined) {
      index = new ReferenceIndex();
      this.#indexes.set(name, index);
    }
    return index;
  }

  #informer(watch: Watch, namespace: string | undefined): CachingInformer {
    return watchInformer(this.#o, watch, namespace, (failedForMs) => {
      if (failedForMs >= this.#staleAfterMs) this.#lookAgain(watch.kind, namespace, failedForMs);
    });
  }

  /**
   * A stale cache is current again: what it missed while its watch failed may have come back as
   * events (a resumed watch) or not at all (a change it saw go by while the keys could not act on
   * it, e.g. a Secret deleted while the namespace's Role was removed, whose key then failed and
   * backs off for minutes). Every reconciled object of that namespace is looked at again now, in
   * the low lane, as a relist's replace does in client-go: level-triggered, so a key with nothing
   * to do ends at its at-rest check.
   */
  #lookAgain(kind: string, namespace: string | undefined, failedForMs: number): void {
    if (this.#stopped) return;
    let woken = 0;
    for (const [reconciled, caches] of this.#caches) {
      for (const cache of caches) {
        const scope = this.#scopes.get(cache);
        if (namespace !== undefined && scope?.namespace !== undefined && scope.namespace !== namespace) continue;
        for (const obj of cache.list(namespace)) {
          const { name, namespace: ns } = obj.metadata ?? {};
          if (name === undefined) continue;
          this.#queue.add(objectRef(reconciled, ns ?? '', name), { priority: 'low' });
          woken++;
        }
      }
    }
    this.#o.logger.info(
      { kind, namespace: namespace ?? '(all)', failedForS: Math.round(failedForMs / 1000), woken },
      "stale cache current again; looking at its namespace's objects again",
    );
  }

  #watch(watch: Watch, namespace: string | undefined): void {
    const informer = this.#informer(watch, namespace);
    this.#scopes.set(informer, { kind: watch.kind, namespace });
    const wake = wakeOf(watch, {
      index: (name) => this.#index(name),
      wake: (key, event) => this.#wake(key, event),
      inputWakes: this.#inputWakes,
      ownerWakes: this.#ownerWakes,
      ownWrites: this.#o.ownWrites,
      logger: this.#o.logger,
    });
    if (watch.type === 'for') this.#caches.set(watch.kind, [...(this.#caches.get(watch.kind) ?? []), informer]);
    this.#allCaches.set(watch.kind, [...(this.#allCaches.get(watch.kind) ?? []), informer]);
    informer.on('add', (obj: KubernetesObject) => wake(obj, false));
    informer.on('update', (obj: KubernetesObject) => wake(obj, false));
    informer.on('delete', (obj: KubernetesObject) => wake(obj, true));
    this.#watchErrors(informer, `${watch.kind} informer`);
    this.#informers.push(informer);
  }

  /** An informer event about a reconciled object or one it owns: the key is queued if the gate lets it wake (WakeGate.admit). */
  #wake(key: string, event: WakeEvent): void {
    if (!this.#gate.admit(key, event)) return;
    // Before the initial sync these are mostly the initial LISTs: low priority, as in controller-runtime's priorityqueue.
    this.#queue.add(key, { priority: this.#synced ? 'normal' : 'low' });
  }

  /**
   * An informer that stops on a watch error (client-node's ListWatch, a fake) is started again after
   * a pause. reflector.ts's never emits 'error': it retries on its own, with a backoff.
   */
  #watchErrors(informer: CachingInformer, what: string): void {
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
      // The worker is free once the reconcile ends or releases it (Worker.release), whichever comes first.
      const kind = key.slice(0, key.indexOf('/'));
      this.#o.metrics?.workers(kind, 1);
      const { worker, released } = releasableWorker(this.#o.signal);
      await Promise.race([this.#reconcileOne(key, worker), released]);
      this.#o.metrics?.workers(kind, -1);
    }
  }

  /** One reconcile of key, then what its result says; never throws. */
  async #reconcileOne(key: string, worker: Worker): Promise<void> {
    const [kind, namespace, name] = key.split('/') as [string, string, string];
    const logger = this.#o.logger.child({ kind, namespace, name, reconcileId: randomUUID() });
    const started = performance.now();
    let result: ReconcileResult | undefined;
    this.#gate.begin(key);
    // A large object waits for its share of the budget with its worker given back: other keys go on.
    const weight = this.#objectBudget.weight(cachedBytes(this.cachedObject(kind, namespace, name)));
    try {
      const turn = this.#objectBudget.take(weight);
      if (turn !== undefined) await worker.release(turn);
      result = await this.#o.reconciler.reconcile({ kind, namespace, name }, logger, worker);
    } catch (error) {
      logger.error({ err: error instanceof Error ? { message: error.message, code: (error as { code?: unknown }).code } : String(error) }, 'reconcile failed');
    } finally {
      this.#objectBudget.give(weight);
    }
    const seconds = (performance.now() - started) / 1000;
    const seen = this.#gate.end(key);
    this.#schedule(key, kind, namespace, name, result);
    for (const event of seen) this.#wake(key, event);
    const outcome = reconcileOutcome(result);
    this.#o.metrics?.reconciled(kind, outcome, seconds);
    this.#o.onReconciled?.(kind, outcome, seconds);
    this.#queue.done(key);
  }

  #schedule(key: string, kind: string, namespace: string, name: string, result: ReconcileResult | undefined): void {
    if (this.#stopped) return;
    // controller-runtime's reconcileHandler: a failure is rate-limited by the queue's limiter, which
    // owns the failure counts; a refusal by the refusal limiter; a success forgets both.
    if (result === undefined || result.type === 'Retry') {
      this.#queue.addRateLimited(key);
      return;
    }
    if (result.type === 'Continue') {
      this.#queue.addPaced(key);
      return;
    }
    if (result.type === 'Backoff') {
      const delay = this.#refusals.when(key, result.minDelayMs);
      const cached = this.#caches
        .get(kind)
        ?.map((cache) => cache.get(name, namespace))
        .find((obj) => obj !== undefined);
      this.#gate.hold(key, {
        until: Date.now() + delay,
        generation: cached?.metadata?.generation,
        deleting: cached?.metadata?.deletionTimestamp !== undefined,
      });
      this.#queue.addAfter(key, delay);
      return;
    }
    this.#refusals.forget(key);
    this.#gate.unhold(key);
    this.#queue.forget(key);
    if (result.requeueAfterMs !== undefined) {
      // Jitter spreads periodic checks of many objects over the interval.
      // Low priority, as in controller-runtime's priorityqueue: a wave of periodic checks must not delay events.
      this.#queue.addAfter(key, Math.round(result.requeueAfterMs * (0.9 + Math.random() * 0.2)), { priority: 'low' });
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#inputWakes.stop();
    this.#ownerWakes.stop();
    await Promise.all(this.#informers.map((i) => i.stop()));
    await this.#queue.shutDownWithDrain();
    await Promise.all(this.#workers);
  }
}
