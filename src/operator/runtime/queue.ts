// The work queue of the controller, with the semantics of client-go's workqueue
// (k8s.io/client-go/util/workqueue), which controller-runtime builds on (docs/design.md section 5.2):
//
// - a key is deduplicated while it waits ("dirty" set);
// - a key is never handed to two workers at once: an add() while it is being processed marks it
//   dirty, and done() puts it back in the queue;
// - addAfter() delays an add (requeue-after); of two delays for one key the earlier wins;
// - addRateLimited() delays by max(per-item exponential backoff 5 ms .. 5 min, token bucket
//   10 qps burst 100), like DefaultControllerRateLimiter, but with a bucket per flow (below), not
//   one per controller; forget() resets the item; addPaced() delays by the token bucket only (a
//   next step, not a failure).
//
// Plus two priorities, like controller-runtime's priorityqueue (pkg/controller/priorityqueue):
// with 1,000+ resources, the periodic drift requeues and the informers' initial LIST would
// otherwise queue a new resource, a spec change or a deletion behind all of them.
//
// - add(key, { priority: 'low' }) and addAfter(key, ms, { priority: 'low' }) use the low lane;
//   get() hands out a low key when no normal one waits, one in every LOW_SHARE handouts while
//   both lanes have keys, and one that has waited LOW_MAX_WAIT_MS before normal ones (so that a
//   stream of normal adds, a tenant writing its own resources in a loop, cannot starve the keys a
//   restart listed, however few reconciles a second the operator manages); each lane is FIFO;
// - a key waits in one lane at most: a normal add of a key waiting in the low lane promotes it
//   (its queue latency still counts from the first add); a low add never demotes;
// - a key re-added while in flight is re-queued by done() with the highest priority it was
//   re-added with; two delayed adds of one key merge into one, at the earlier time and the higher
//   priority.
//
// And fair turns between flows, like the fairness by namespace proposed for
// controller-runtime's priority queue: with `flowOf` (the controller's: a key's namespace), each
// lane is one FIFO per flow, and get() takes from the flows in turn. One namespace that applies
// 1,000 resources (or whose keys are all woken at once) then delays another namespace's key by one
// key per namespace waiting, not by its whole backlog. Without `flowOf`, every key is one flow.
//
// One deliberate difference from client-go: once shut down, get() returns undefined at once even if
// keys are still queued. Reconcile is level-triggered (docs/design.md section 5.2), so a dropped key costs
// nothing: the next leader lists every resource at start-up and reconciles it anyway, while handing
// out new work during SIGTERM would only delay the exit.
import { FairLine, type TurnRule } from './fair-line.ts';
import { ControllerRateLimiter, realTimers, type RateLimiterOptions, type Timers } from './rate-limiter.ts';

export { ControllerRateLimiter, type RateLimiterOptions, type Timers } from './rate-limiter.ts';

export interface WorkQueueMetrics {
  /**
   * Keys waiting, in both lanes (not counting delayed or in-flight keys), after `key` entered (+1)
   * or left (-1) the lane of `priority`.
   */
  depth(n: number, key: string, priority: Priority, delta: 1 | -1): void;
  /** A key entered the queue (after deduplication). */
  add(key: string): void;
  /** Seconds a key waited between entering the queue and get(). */
  queueLatency(seconds: number, key: string): void;
  /** Seconds between get() and done(). */
  workDuration(seconds: number, key: string): void;
  /** addRateLimited() was called. */
  retry(key: string): void;
  /**
   * Given, once, what reads the keys in flight (handed out, not done) and for how many seconds
   * each has been: client-go's unfinished work, read when the metrics are scraped.
   */
  readUnfinishedWith?(read: () => Iterable<[string, number]>): void;
}

export interface WorkQueueOptions {
  rateLimiter?: RateLimiterOptions;
  /** The flow of a key: keys of different flows waiting in one lane are handed out in turns. Default: one flow. */
  flowOf?: (key: string) => string;
  metrics?: WorkQueueMetrics;
  timers?: Timers;
}

export type Priority = 'normal' | 'low';

/** While both lanes have keys, one handout in this many is a low one. */
export const LOW_SHARE = 8;

/**
 * A low key that has waited this long is handed out before normal ones: on an operator doing a few
 * reconciles a second, one handout in LOW_SHARE still left what a restart listed waiting a minute.
 */
export const LOW_MAX_WAIT_MS = 5_000;

export interface AddOptions {
  /** Default 'normal'. */
  priority?: Priority;
}

interface Delayed {
  readyAt: number;
  priority: Priority;
  handle: unknown;
}

/** A key waiting in a lane. */
interface Entry<K> {
  readonly key: K;
  readonly priority: Priority;
}

/** Flows served in turns: the one served least lately first, a flow that starts waiting at the back (fair-line.ts). */
const ROUND_ROBIN: TurnRule<undefined> = { open: () => undefined, served: () => undefined };

export class WorkQueue<K extends string> {
  /** The keys waiting in each lane, in turns between flows. */
  readonly #normal: FairLine<K>;
  readonly #low: FairLine<K>;
  /** The entry of each waiting key (in one lane or the other). */
  readonly #waiting = new Map<K, Entry<K>>();
  /** Keys that need processing (waiting, or re-added while in flight), with their highest priority. */
  readonly #dirty = new Map<K, Priority>();
  readonly #processing = new Map<K, number>();
  readonly #addedAt = new Map<K, number>();
  readonly #delayed = new Map<K, Delayed>();
  readonly #waiters: ((key: K | undefined) => void)[] = [];
  readonly #drainWaiters: (() => void)[] = [];
  readonly #limiter: ControllerRateLimiter<K>;
  readonly #metrics: WorkQueueMetrics | undefined;
  readonly #timers: Timers;
  #shuttingDown = false;
  /** Normal keys handed out in a row while low ones waited (LOW_SHARE). */
  #normalStreak = 0;
  /** Keys waiting in the low lane. */
  #lowWaiting = 0;

  constructor(options: WorkQueueOptions = {}) {
    this.#timers = options.timers ?? realTimers;
    this.#metrics = options.metrics;
    const flowOf = options.flowOf ?? (() => '');
    this.#limiter = new ControllerRateLimiter<K>(options.rateLimiter, () => this.#timers.now(), flowOf);
    this.#metrics?.readUnfinishedWith?.(() => this.#unfinished());
    this.#normal = new FairLine<K>(ROUND_ROBIN, flowOf);
    this.#low = new FairLine<K>(ROUND_ROBIN, flowOf);
  }

  add(key: K, options: AddOptions = {}): void {
    if (this.#shuttingDown) return;
    const priority = options.priority ?? 'normal';
    const dirty = this.#dirty.get(key);
    if (dirty !== undefined) {
      if (priority === 'normal' && dirty === 'low') this.#promote(key);
      return;
    }
    this.#metrics?.add(key);
    this.#dirty.set(key, priority);
    if (this.#processing.has(key)) return; // done() re-queues it
    this.#enqueue(key, priority);
  }

  addAfter(key: K, delayMs: number, options: AddOptions = {}): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key, options);
      return;
    }
    const priority = options.priority ?? 'normal';
    const readyAt = this.#timers.now() + delayMs;
    const existing = this.#delayed.get(key);
    if (existing !== undefined) {
      if (priority === 'normal') existing.priority = 'normal';
      if (existing.readyAt <= readyAt) return; // the earlier requeue already covers this one
      this.#timers.clearTimeout(existing.handle);
    }
    const delayed: Delayed = { readyAt, priority: existing?.priority ?? priority, handle: undefined };
    delayed.handle = this.#timers.setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key, { priority: delayed.priority });
    }, delayMs);
    this.#delayed.set(key, delayed);
  }

  addRateLimited(key: K): void {
    this.#metrics?.retry(key);
    this.addAfter(key, this.#limiter.when(key));
  }

  /**
   * Adds key under its flow's token bucket only: the next step of a protocol, which is no
   * failure, so neither counts as one nor waits for the key's failures (forget() is the caller's).
   */
  addPaced(key: K): void {
    this.addAfter(key, this.#limiter.pace(key));
  }

  forget(key: K): void {
    this.#limiter.forget(key);
  }

  numRequeues(key: K): number {
    return this.#limiter.numRequeues(key);
  }

  /**
   * The next key to process (normal priority first, then low), or undefined once the queue is
   * shut down. Call done(key) after.
   */
  get(): Promise<K | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const key = this.#next();
    if (key !== undefined) return Promise.resolve(this.#start(key));
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  done(key: K): void {
    const started = this.#processing.get(key);
    if (started === undefined) return;
    this.#processing.delete(key);
    this.#metrics?.workDuration((this.#timers.now() - started) / 1000, key);
    const priority = this.#dirty.get(key);
    if (priority !== undefined && !this.#shuttingDown) this.#enqueue(key, priority);
    if (this.#processing.size === 0) this.#drainWaiters.splice(0).forEach((resolve) => resolve());
  }

  /** Keys waiting to be handed out, in both lanes (not delayed, not in flight). */
  len(): number {
    return this.#waiting.size;
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Stops handing out keys; ignores further adds; idle get() calls resolve to undefined. */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    for (const { handle } of this.#delayed.values()) this.#timers.clearTimeout(handle);
    this.#delayed.clear();
    this.#normal.clear();
    this.#low.clear();
    this.#lowWaiting = 0;
    let waiting = this.#waiting.size;
    for (const entry of this.#waiting.values()) this.#metrics?.depth(--waiting, entry.key, entry.priority, -1);
    this.#waiting.clear();
    this.#dirty.clear();
    this.#addedAt.clear();
    this.#waiters.splice(0).forEach((resolve) => resolve(undefined));
  }

  /** shutDown(), then resolves once every key handed out has been marked done. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  #enqueue(key: K, priority: Priority): void {
    this.#addedAt.set(key, this.#timers.now());
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) {
      waiter(this.#start(key));
      return;
    }
    this.#push(key, priority);
  }

  /**
   * Normal first; a low key once LOW_SHARE - 1 normal ones went in a row while it waited, or once
   * the low key whose turn it is has waited LOW_MAX_WAIT_MS.
   */
  #next(): K | undefined {
    if (this.#lowWaiting === 0) {
      this.#normalStreak = 0;
      return this.#normal.next();
    }
    const head = this.#low.peek();
    const aged = head !== undefined && this.#timers.now() - (this.#addedAt.get(head) ?? Infinity) >= LOW_MAX_WAIT_MS;
    if (this.#normalStreak < LOW_SHARE - 1 && !aged) {
      const key = this.#normal.next();
      if (key !== undefined) {
        this.#normalStreak++;
        return key;
      }
    }
    this.#normalStreak = 0;
    const low = this.#low.next();
    if (low === undefined) return this.#normal.next();
    this.#lowWaiting--;
    return low;
  }

  /** A normal add of a key that is dirty at low priority: waiting, it moves to the normal lane. */
  #promote(key: K): void {
    this.#dirty.set(key, 'normal');
    const entry = this.#waiting.get(key);
    if (entry === undefined) return; // in flight: done() re-queues it at normal priority
    this.#low.delete(key);
    this.#lowWaiting--;
    this.#waiting.delete(key);
    this.#metrics?.depth(this.#waiting.size, key, 'low', -1);
    this.#push(key, 'normal'); // #addedAt is kept: latency counts from the first add
  }

  #push(key: K, priority: Priority): void {
    this.#waiting.set(key, { key, priority });
    if (priority === 'low') this.#lowWaiting++;
    (priority === 'normal' ? this.#normal : this.#low).add(key);
    this.#metrics?.depth(this.#waiting.size, key, priority, 1);
  }

  /** The keys in flight, with the seconds since each was handed out. */
  *#unfinished(): Iterable<[string, number]> {
    const now = this.#timers.now();
    for (const [key, started] of this.#processing) yield [key, (now - started) / 1000];
  }

  #start(key: K): K {
    this.#dirty.delete(key);
    const entry = this.#waiting.get(key);
    this.#waiting.delete(key);
    const now = this.#timers.now();
    const addedAt = this.#addedAt.get(key);
    this.#addedAt.delete(key);
    if (addedAt !== undefined) this.#metrics?.queueLatency((now - addedAt) / 1000, key);
    this.#processing.set(key, now);
    if (entry !== undefined) this.#metrics?.depth(this.#waiting.size, key, entry.priority, -1);
    return key;
  }
}
