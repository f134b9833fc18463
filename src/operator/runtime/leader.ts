// Leader election on a coordination.k8s.io/v1 Lease, with the semantics of client-go's
// k8s.io/client-go/tools/leaderelection (docs/design.md section 5.4: standbys are ready but do not reconcile).
//
// - Acquire: a candidate may take the lease when it is free (no holder) or when the record it
//   observes has not changed for the record's own spec.leaseDurationSeconds (the holder's setting,
//   as client-go reads it, not the candidate's: during a rollout that changes
//   --leader-elect-lease-duration, a standby with a shorter setting must not take the lease from a
//   leader that renews on a longer one), measured on the candidate's OWN monotonic clock from the
//   moment it first saw that record (the "observed time" rule: no trust in the holder's wall
//   clock, only in the fact that the record stopped moving).
// - Every write is a replace carrying the resourceVersion that was read (optimistic concurrency):
//   of two candidates racing for an expired lease, the apiserver lets exactly one through (409).
// - Renew: the leader renews every retryPeriod; when it has not renewed successfully for
//   renewDeadline (< leaseDuration) it considers itself deposed, stops leading and run() returns.
//   Because renewDeadline < leaseDuration, an old leader stops before a standby can acquire.
// - isLeader() is the write fence (write-fence.ts): it turns false renewDeadline after the start of
//   the last successful renewal, by this process's monotonic clock, whether or not the renew loop
//   has run since (an event loop stalled past the lease wakes up with isLeader() already false).
// - release(): like client-go's ReleaseOnCancel, clears holderIdentity so a standby takes over at
//   its next retry instead of waiting for the lease to expire; only while this replica still
//   leads (a lease already lost is someone else's record).
import { setTimeout as sleepFor } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { coordinationClient, type CoordinationClient, type Lease } from './kube-client.ts';

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Name of the Lease object. */
  name: string;
  /** Unique per replica (e.g. the pod name plus a random suffix). */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  logger?: Logger;
  /** Called once this replica leads; `signal` aborts when it stops leading. Not awaited. */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /** Called once when leadership ends (lost, aborted or released), only if it had started. */
  onStoppedLeading(): void;
}

interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string | undefined;
  renewTime: string | undefined;
  leaseTransitions: number;
}

/** The part of a Lease the observed-time rule compares: any change restarts the expiry clock. */
function recordKey(lease: Lease): string {
  const spec = lease.spec ?? {};
  const time = (t: string | undefined): string => (t === undefined ? '' : new Date(t).toISOString());
  return JSON.stringify([spec.holderIdentity ?? '', spec.leaseDurationSeconds ?? 0, time(spec.acquireTime), time(spec.renewTime), spec.leaseTransitions ?? 0]);
}

/**
 * How long a record must stay unchanged before a candidate may take the lease: the duration the
 * holder wrote (client-go's observedTime + record.LeaseDurationSeconds), or the candidate's own
 * when the record carries none.
 */
function recordDurationMs(seconds: number | undefined, ownMs: number): number {
  return seconds !== undefined && seconds > 0 ? seconds * 1000 : ownMs;
}

/** A Lease's time as the apiserver takes it (MicroTime: six fractional digits, which a Date's JSON lacks). */
function microTime(date: Date): string {
  return date.toISOString().replace(/Z$/, '000Z');
}

function statusCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

export class LeaderElector {
  readonly #api: CoordinationClient;
  readonly #options: LeaderElectorOptions;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #logger: Logger | undefined;
  /** The last Lease read or written, and when (monotonic ms) its record last changed. */
  #observed: Lease | undefined;
  #observedKey = '';
  #observedAt = 0;
  #leading = false;
  #lastRenew = 0;
  readonly #stop = new AbortController();
  #running: Promise<void> | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#options = options;
    this.#leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.#renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.#retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (!(this.#leaseDurationMs > this.#renewDeadlineMs && this.#renewDeadlineMs > this.#retryPeriodMs && this.#retryPeriodMs > 0)) {
      // The same validation as client-go's NewLeaderElector: without it two leaders can overlap.
      throw new Error('leader election needs leaseDurationMs > renewDeadlineMs > retryPeriodMs > 0');
    }
    this.#logger = options.logger;
    this.#api = coordinationClient(options.kubeConfig);
  }

  /**
   * True while this replica holds the lease. Turns false the moment renewals have failed for
   * renewDeadline, even before the renew loop notices, so callers never act on a stale lease.
   */
  isLeader(): boolean {
    return this.#leading && performance.now() - this.#lastRenew < this.#renewDeadlineMs;
  }

  /**
   * Campaigns until `signal` aborts or leadership is lost; resolves then (like client-go, it does
   * not campaign again: the process is expected to exit and restart).
   */
  run(signal: AbortSignal): Promise<void> {
    if (this.#running !== undefined) return Promise.reject(new Error('LeaderElector.run() may be called once'));
    this.#running = this.#run(AbortSignal.any([signal, this.#stop.signal]));
    return this.#running;
  }

  /**
   * Stops campaigning and, if this replica holds the lease, gives it up by clearing holderIdentity
   * (guarded by resourceVersion: if someone else moved, there is nothing of ours to release).
   */
  async release(): Promise<void> {
    // Judged before the renew loop stops (stopping it ends leading): a lease lost meanwhile, or
    // expired by our own clock, is not ours to write any more.
    const leading = this.isLeader();
    this.#stop.abort();
    await this.#running;
    const lease = this.#observed;
    if (!leading || lease?.spec?.holderIdentity !== this.#options.identity) return;
    const now = microTime(new Date());
    try {
      const released = await this.#api.replaceNamespacedLease({
        name: this.#options.name,
        namespace: this.#options.namespace,
        body: {
          ...lease,
          spec: {
            ...lease.spec,
            holderIdentity: undefined,
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
          },
        },
      });
      this.#observe(released);
      this.#logger?.info({ lease: this.#options.name }, 'released leader lease');
    } catch (error) {
      this.#logger?.warn({ err: error, lease: this.#options.name }, 'could not release leader lease');
    }
  }

  async #run(signal: AbortSignal): Promise<void> {
    // Acquire: retry with jitter (client-go: JitterUntil(retryPeriod, 1.2)) so standbys spread out.
    while (!signal.aborted) {
      if (await this.#tryAcquireOrRenew(signal)) break;
      await this.#sleep(this.#retryPeriodMs * (1 + Math.random() * 1.2), signal);
    }
    if (signal.aborted) return;

    this.#leading = true;
    this.#logger?.info({ lease: this.#options.name, identity: this.#options.identity }, 'became leader');
    const leading = new AbortController();
    Promise.resolve()
      .then(() => this.#options.onStartedLeading(leading.signal))
      .catch((error: unknown) => this.#logger?.error({ err: error }, 'onStartedLeading failed'));

    // Renew every retryPeriod; lose leadership once no renewal succeeded for renewDeadline.
    while (!signal.aborted) {
      await this.#sleep(this.#retryPeriodMs, signal);
      if (signal.aborted) break;
      const remaining = this.#renewDeadlineMs - (performance.now() - this.#lastRenew);
      const renewed = remaining > 0 && (await this.#withTimeout(this.#tryAcquireOrRenew(signal), remaining));
      if (!renewed && performance.now() - this.#lastRenew >= this.#renewDeadlineMs) {
        this.#logger?.warn({ lease: this.#options.name, identity: this.#options.identity }, 'failed to renew leader lease: stopping');
        break;
      }
    }
    this.#leading = false;
    leading.abort();
    try {
      this.#options.onStoppedLeading();
    } catch (error) {
      this.#logger?.error({ err: error }, 'onStoppedLeading failed');
    }
  }

  /** One step of client-go's tryAcquireOrRenew; true if this replica holds the lease after it. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { name, namespace, identity } = this.#options;
    const record = (previous: LeaseRecord | undefined): LeaseRecord => {
      const now = microTime(new Date());
      const keep = previous !== undefined && previous.holderIdentity === identity;
      return {
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(this.#leaseDurationMs / 1000),
        acquireTime: keep ? previous.acquireTime : now,
        renewTime: now,
        leaseTransitions: previous === undefined ? 0 : keep ? previous.leaseTransitions : previous.leaseTransitions + 1,
      };
    };
    const started = performance.now();
    try {
      let current: Lease;
      try {
        current = await this.#api.readNamespacedLease({ name, namespace });
      } catch (error) {
        if (statusCode(error) !== 404) throw error;
        if (signal.aborted) return false;
        const created = await this.#api.createNamespacedLease({
          namespace,
          body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace }, spec: record(undefined) },
        });
        this.#observe(created);
        this.#lastRenew = started;
        return true;
      }
      this.#observe(current);
      const spec = current.spec ?? {};
      const holder = spec.holderIdentity ?? '';
      if (holder !== '' && holder !== identity && performance.now() - this.#observedAt < recordDurationMs(spec.leaseDurationSeconds, this.#leaseDurationMs)) {
        return false; // held by another replica and not expired by the observed-time rule
      }
      if (signal.aborted) return false;
      const previous: LeaseRecord = {
        holderIdentity: holder,
        leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
        acquireTime: spec.acquireTime,
        renewTime: spec.renewTime,
        leaseTransitions: spec.leaseTransitions ?? 0,
      };
      // A released lease (no holder) counts as a transition when someone else held it before;
      // client-go counts any change of holder, and an empty holder is not us.
      const updated = await this.#api.replaceNamespacedLease({
        name,
        namespace,
        body: { ...current, spec: { ...spec, ...record(previous) } },
      });
      this.#observe(updated);
      this.#lastRenew = started;
      return true;
    } catch (error) {
      const code = statusCode(error);
      if (code === 409) this.#logger?.debug({ lease: name }, 'leader lease changed under us (409)');
      else this.#logger?.warn({ err: error, lease: name }, 'leader lease request failed');
      return false;
    }
  }

  #observe(lease: Lease): void {
    this.#observed = lease;
    const key = recordKey(lease);
    if (key !== this.#observedKey) {
      this.#observedKey = key;
      this.#observedAt = performance.now();
    }
  }

  async #sleep(ms: number, signal: AbortSignal): Promise<void> {
    await sleepFor(ms, undefined, { signal }).catch(() => undefined);
  }

  /** False when `ms` passes first; the request itself is left to finish (its result is ignored). */
  async #withTimeout(work: Promise<boolean>, ms: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    try {
      return await Promise.race([work, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
