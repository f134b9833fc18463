// An informer with client-go's reflector behaviour (tools/cache/reflector.go), in place of
// client-node's ListWatch. What ListWatch did, and what this does instead:
//
// - A watch error stopped the ListWatch (an 'error' event) and the controller restarted it after a
//   fixed second, with ListWatch's own delay reset by start(): a refused namespace got a request
//   and a log line every second from every informer. Here a failed LIST or WATCH is retried after
//   an exponential, capped, jittered pause (watch-backoff.ts), reset only by a watch that stayed
//   open a while.
// - Every watch asks for bookmarks (`allowWatchBookmarks`) and a server-side timeout of 5 to 10
//   minutes (client-go's). The apiserver then sends a bookmark about every minute, carrying its
//   current resourceVersion for the resource, so a quiet watch keeps a fresh version and its next
//   start never falls out of the apiserver's window. Without them, a quiet watch resumes from the
//   version of the last change it saw, which Secret churn elsewhere pushes out of the window: a
//   410, then a full relist.
// - A watch that cannot resume (410 Gone, or a version the apiserver does not have yet) relists,
//   and the relist replaces the cache: what was deleted meanwhile is reported deleted. The old
//   version is kept until the relist lands, so the cache stays synced meanwhile.
// - The cache knows how long its watch has been failing (failingSince): a cache whose watch has
//   failed longer than the controller's bound is stale (controller.ts), and neither readiness nor the
//   at-rest check trusts it.
// - A watch request's stream is read by watch-stream.ts rather than client-node's Watch: a line it
//   cannot read, or an error of a handler, ends the watch (client-node passed over both).
import type { KubernetesObject, ListPromise, ObjectCache } from '@kubernetes/client-node';
import { WatchBackoff, type WatchBackoffOptions } from './watch-backoff.ts';
import type { WatchSource } from './watch-stream.ts';

/** How one LIST-and-WATCH round ended, for logs and metrics. */
export interface WatchRestart {
  /** failed: an error or a watch that ended at once; expired: the version is gone, a relist follows; ended: a watch that ran and closed. */
  reason: 'failed' | 'expired' | 'ended';
  /** What failed: an HTTP status or an error message (never an object's content). */
  error?: string;
  /** The pause before the next request. */
  delayMs: number;
  /** Failures in a row so far. */
  failures: number;
  /** How long the watch that ended was open, and the events and bookmarks it delivered (a watch that opened). */
  openMs?: number;
  events?: number;
}

export interface ReflectorOptions {
  backoff?: WatchBackoffOptions;
  /** A watch that stayed open this long resets the backoff. Default 30 s. */
  healthyWatchMs?: number;
  /** Each watch asks the apiserver to close it after this many seconds, times 1 to 2 at random. Default 300. */
  minWatchTimeoutSeconds?: number;
  /**
   * A watch silent this long is dropped by the client and started again from its version (a dead
   * connection). Bookmarks arrive about every minute, so only a dead one is this quiet. Default 150 s.
   */
  inactivityMs?: number;
  /** Ask for bookmarks. Default true; false only to measure what they spare (bench/idle-churn.ts). */
  bookmarks?: boolean;
  now?: () => number;
  /** Starts the pause between rounds; returns a function that cancels it. Default setTimeout (tests watch the pauses). */
  pauseTimer?: (done: () => void, ms: number) => () => void;
  /** Told after each round, before the pause. */
  onRestart?(restart: WatchRestart): void;
  /** Told of each LIST sent (the first one, and every relist). */
  onList?(): void;
  /** Told when the cache is current again after its watch had failed, with how long it had. */
  onRecovered?(failedForMs: number): void;
}

type Verb = 'add' | 'update' | 'delete' | 'change' | 'error' | 'connect';
type Callback<T> = (obj: T) => void;

function defaultPauseTimer(done: () => void, ms: number): () => void {
  const timer = setTimeout(done, ms);
  return () => clearTimeout(timer);
}

/** A watch open this long without an error has been accepted: the cache is current again. */
const CONFIRM_OPEN_MS = 1_000;
/** A watch that ends sooner than this without an event is a failure (client-go: "very short watch"). */
const SHORT_WATCH_MS = 1_000;

interface WatchEnd {
  error: unknown;
  status: { code?: number; message?: string } | undefined;
  events: number;
  openMs: number;
}

function describe(error: unknown, status: WatchEnd['status']): string {
  if (status !== undefined) return `watch ERROR ${status.code ?? ''} ${status.message ?? ''}`.trim();
  const code = (error as { statusCode?: unknown; code?: unknown } | null)?.statusCode ?? (error as { code?: unknown } | null)?.code;
  if (typeof code === 'number') return `HTTP ${code}`;
  return error instanceof Error ? error.message : String(error);
}

function statusCode(error: unknown): number | undefined {
  const e = error as { statusCode?: unknown; code?: unknown } | null;
  const code = e?.statusCode ?? e?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The apiserver cannot serve a watch from this version: it is too old (410) or not there yet. */
function unresumable(error: unknown, status: WatchEnd['status']): boolean {
  if (status?.code === 410 || statusCode(error) === 410) return true;
  return status?.code === 504 && /too large resource version/i.test(status.message ?? '');
}

export class Reflector<T extends KubernetesObject> implements ObjectCache<T> {
  readonly #path: string;
  readonly #watch: WatchSource;
  readonly #listFn: ListPromise<T>;
  readonly #labelSelector: string | undefined;
  readonly #o: ReflectorOptions;
  readonly #now: () => number;
  readonly #backoff: WatchBackoff;
  readonly #callbacks = new Map<Verb, Callback<T>[]>();
  #objects = new Map<string, Map<string, T>>();
  #resourceVersion = '';
  #needsList = true;
  /** The next (or current) watch starts from a LIST's version. */
  #watchFromList = false;
  #synced = false;
  #stopped = true;
  /** Which start() the running loop belongs to: a loop of an earlier start, stopped meanwhile, ends. */
  #runs = 0;
  #failingSince: number | undefined;
  #lastError: string | undefined;
  #openSince: number | undefined;
  #request: AbortController | undefined;
  #wakeSleep: (() => void) | undefined;

  constructor(path: string, watch: WatchSource, list: ListPromise<T>, labelSelector?: string, options: ReflectorOptions = {}) {
    this.#path = path;
    this.#watch = watch;
    this.#listFn = list;
    this.#labelSelector = labelSelector;
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#backoff = new WatchBackoff(options.backoff);
    // A watch ends after requestTimeoutMs without data (client-node's default, 30 s, is shorter
    // than the bookmarks' minute: every quiet watch would end).
    watch.requestTimeoutMs = options.inactivityMs ?? 150_000;
  }

  on(verb: Verb, cb: Callback<T>): void {
    if (verb === 'change') {
      for (const v of ['add', 'update', 'delete'] as const) this.on(v, cb);
      return;
    }
    this.#callbacks.set(verb, [...(this.#callbacks.get(verb) ?? []), cb]);
  }

  off(verb: Verb, cb: Callback<T>): void {
    if (verb === 'change') {
      for (const v of ['add', 'update', 'delete'] as const) this.off(v, cb);
      return;
    }
    this.#callbacks.set(
      verb,
      (this.#callbacks.get(verb) ?? []).filter((c) => c !== cb),
    );
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#objects.get(namespace ?? '')?.get(name);
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined && namespace !== '') return [...(this.#objects.get(namespace)?.values() ?? [])];
    return [...this.#objects.values()].flatMap((objects) => [...objects.values()]);
  }

  latestResourceVersion(): string {
    return this.#resourceVersion;
  }

  /** A LIST has filled the cache once. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /**
   * Since when the LIST or WATCH has been failing (undefined: the cache is current, or its watch is
   * being started again after a clean end).
   */
  failingSince(): number | undefined {
    if (this.#failingSince !== undefined && this.#openSince !== undefined && this.#now() - this.#openSince >= CONFIRM_OPEN_MS) this.#current();
    return this.#failingSince;
  }

  /** What failed last (an HTTP status or a message), while failing. */
  lastError(): string | undefined {
    return this.failingSince() === undefined ? undefined : this.#lastError;
  }

  /** Starts the LIST-and-WATCH loop; resolves once the first LIST has succeeded or failed (it is retried). */
  start(): Promise<void> {
    if (!this.#stopped) return Promise.resolve();
    this.#stopped = false;
    const run = ++this.#runs;
    return new Promise((resolve) => {
      void this.#run(run, resolve);
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#request?.abort();
    this.#request = undefined;
    this.#wakeSleep?.();
  }

  #current(): void {
    if (this.#failingSince !== undefined) this.#o.onRecovered?.(this.#now() - this.#failingSince);
    this.#failingSince = undefined;
    this.#lastError = undefined;
  }

  #failing(what: string): void {
    this.#failingSince ??= this.#now();
    this.#lastError = what;
  }

  async #run(run: number, firstListed: () => void): Promise<void> {
    const over = (): boolean => this.#stopped || run !== this.#runs;
    // Started again after a stop: the cache holds its list already.
    if (!this.#needsList) firstListed();
    while (!over()) {
      if (this.#needsList) {
        try {
          await this.#list();
        } catch (error) {
          firstListed();
          if (over()) return;
          this.#failing(`list: ${describe(error, undefined)}`);
          await this.#pause({ reason: 'failed', error: `list: ${describe(error, undefined)}` });
          continue;
        }
        firstListed();
        if (over()) return;
      }
      const fromList = this.#watchFromList;
      this.#watchFromList = false;
      const end = await this.#watchOnce();
      if (over()) return;
      // A watch that stayed open a while ends a run of failures, however it ended.
      const healthy = end.openMs >= (this.#o.healthyWatchMs ?? 30_000);
      if (healthy) this.#backoff.reset();
      if (unresumable(end.error, end.status)) {
        // The cache is not current until the relist lands. The apiserver answered, so relist at
        // once; unless this watch started from a LIST's own version and saw nothing: no loop of LISTs.
        this.#needsList = true;
        this.#failing(describe(end.error, end.status));
        await this.#pause({ reason: 'expired', error: describe(end.error, end.status) }, healthy || !fromList || end.events > 0);
        continue;
      }
      const clean = end.error === null || end.error === undefined || (end.error as { name?: unknown }).name === 'TimeoutError';
      if (end.status !== undefined || !clean || (end.events === 0 && end.openMs < SHORT_WATCH_MS)) {
        const what = clean && end.status === undefined ? `watch closed after ${end.openMs} ms without an event` : describe(end.error, end.status);
        this.#failing(what);
        await this.#pause({ reason: 'failed', error: what });
        continue;
      }
      // A watch that ran and closed: its server-side timeout, silence past inactivityMs, or the
      // apiserver dropping a watcher that fell behind (its watch cache closes one whose buffer stays
      // full past a dispatch budget, as a burst of thousands of creates does). One that delivered
      // events resumes from its version at once, as client-go's reflector does: backing it off in a
      // burst that closes it every few seconds would leave every key of the burst seconds late, the
      // one another team applied meanwhile too. The backoff is
      // for failures: a watch closed soon without an event waits it (above), and so does one that
      // stayed open a while without an event and not long enough to count as healthy.
      this.#current();
      await this.#pause({ reason: 'ended', openMs: end.openMs, events: end.events }, healthy || end.events > 0);
    }
  }

  /** Tells the round's end, then waits the backoff's pause (none after a healthy watch). */
  async #pause(restart: Omit<WatchRestart, 'delayMs' | 'failures'>, immediately = false): Promise<void> {
    const delayMs = immediately ? 0 : this.#backoff.next();
    this.#o.onRestart?.({ ...restart, delayMs, failures: this.#backoff.failures });
    if (delayMs === 0 || this.#stopped) return;
    await new Promise<void>((resolve) => {
      const cancel = (this.#o.pauseTimer ?? defaultPauseTimer)(resolve, delayMs);
      this.#wakeSleep = () => {
        cancel();
        resolve();
      };
    });
    this.#wakeSleep = undefined;
  }

  async #list(): Promise<void> {
    this.#o.onList?.();
    const list = await this.#listFn();
    if (this.#stopped) return;
    const fresh = new Map<string, Map<string, T>>();
    for (const obj of list.items) {
      const ns = obj.metadata?.namespace ?? '';
      let objects = fresh.get(ns);
      if (objects === undefined) {
        objects = new Map();
        fresh.set(ns, objects);
      }
      objects.set(obj.metadata?.name ?? '', obj);
    }
    const old = this.#objects;
    this.#objects = fresh;
    this.#resourceVersion = list.metadata?.resourceVersion ?? '';
    this.#needsList = false;
    this.#watchFromList = true;
    this.#synced = true;
    this.#current();
    // What the relist no longer shows was deleted meanwhile; the rest is added or changed.
    for (const [ns, objects] of old) {
      for (const [name, obj] of objects) if (fresh.get(ns)?.has(name) !== true) this.#emit('delete', obj);
    }
    for (const [ns, objects] of fresh) {
      for (const [name, obj] of objects) {
        const before = old.get(ns)?.get(name);
        if (before === undefined) this.#emit('add', obj);
        else if (before.metadata?.resourceVersion === undefined || before.metadata.resourceVersion !== obj.metadata?.resourceVersion) this.#emit('update', obj);
      }
    }
  }

  #emit(verb: 'add' | 'update' | 'delete', obj: T): void {
    for (const cb of this.#callbacks.get(verb) ?? []) cb(obj);
  }

  #watchOnce(): Promise<WatchEnd> {
    const startedAt = this.#now();
    let events = 0;
    let status: WatchEnd['status'];
    return new Promise<WatchEnd>((resolve) => {
      let ended = false;
      const done = (error: unknown): void => {
        if (ended) return;
        ended = true;
        this.#openSince = undefined;
        this.#request = undefined;
        resolve({ error, status, events, openMs: this.#now() - startedAt });
      };
      const params: Record<string, string | number | boolean> = {
        resourceVersion: this.#resourceVersion,
        allowWatchBookmarks: this.#o.bookmarks ?? true,
        timeoutSeconds: Math.round((this.#o.minWatchTimeoutSeconds ?? 300) * (1 + Math.random())),
      };
      if (this.#labelSelector !== undefined) params.labelSelector = this.#labelSelector;
      this.#watch
        .watch(
          this.#path,
          params,
          (phase: string, obj: unknown) => {
            if (ended || this.#stopped) return;
            if (phase === 'ERROR') {
              status = obj as WatchEnd['status'];
              return;
            }
            const object = obj as T;
            const version = object.metadata?.resourceVersion;
            if (phase === 'ADDED' || phase === 'MODIFIED') this.#upsert(object);
            else if (phase === 'DELETED') this.#delete(object);
            else if (phase !== 'BOOKMARK') return;
            events++;
            this.#current();
            if (version !== undefined && version !== '') this.#resourceVersion = version;
          },
          done,
        )
        .then((request) => {
          if (ended) return;
          if (this.#stopped) {
            request.abort();
            return;
          }
          this.#request = request;
          this.#openSince = this.#now();
          // Open for a second without an error: current again (failingSince() says so), told at once.
          if (this.#failingSince !== undefined) setTimeout(() => this.failingSince(), CONFIRM_OPEN_MS + 10).unref();
        }, done);
    });
  }

  #upsert(obj: T): void {
    const ns = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    let objects = this.#objects.get(ns);
    if (objects === undefined) {
      objects = new Map();
      this.#objects.set(ns, objects);
    }
    const before = objects.get(name);
    objects.set(name, obj);
    if (before === undefined) this.#emit('add', obj);
    else if (before.metadata?.resourceVersion === undefined || before.metadata.resourceVersion !== obj.metadata?.resourceVersion) this.#emit('update', obj);
  }

  #delete(obj: T): void {
    const ns = obj.metadata?.namespace ?? '';
    const objects = this.#objects.get(ns);
    const before = objects?.get(obj.metadata?.name ?? '');
    if (objects === undefined || before === undefined) return;
    objects.delete(obj.metadata?.name ?? '');
    if (objects.size === 0) this.#objects.delete(ns);
    this.#emit('delete', obj);
  }
}
