// The manager (controller-runtime's manager): owns a process's start, readiness, leader election
// and graceful shutdown, around whatever the domain runs once this replica may reconcile.
//
// Readiness (/readyz): ready means "this replica can do its job". The leader (or the only replica)
// is ready once what it runs says so (its informers have listed every watched kind: caches synced).
// A standby (leader election on, not holding the Lease) runs nothing; like a controller-runtime
// standby it is ready, as long as its Kubernetes credentials work: it can read the Lease it
// campaigns for. A leader whose cache is stale (its watch failing for longer than a bound,
// runtime/controller.ts staleCaches()) is not ready, and /readyz names that cache: it acts on a view
// of the cluster it can no longer refresh (docs/reliability.md "Stale caches"). Nothing else belongs
// in readiness: one tenant's bad input or an outage of a system the domain talks to must not take
// every replica out of its Service.
//
// Shutdown (SIGTERM, SIGINT), in controller-runtime's order: stop what runs (the reconciles in
// flight drain, the pollers and timers end) while the Lease is still renewed, then release the
// Lease so a standby takes over at once, close the servers, exit. The drain is bounded
// (drainTimeoutMs): past it, the write fence closes (runtime/write-fence.ts: nothing more is
// written) before the Lease is released, so the successor never overlaps a write of this process
// that passed the fence. Forced exit after shutdownTimeoutMs.
//
// Leadership lost (a renewal missed for the renew deadline, an event loop stalled past the lease):
// the fence is closed already (it reads the clock), the work's signal aborts, what runs stops, and
// the process exits to come back as a standby; the Lease is someone else's and is not touched.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { startHealthServer, type HealthServer, type Readiness } from './health-server.ts';
import { coordinationClient, type CoordinationClient } from './kube-client.ts';
import { LeaderElector } from './leader.ts';
import { NotLeadingError, type Leadership } from './write-fence.ts';

/** What the domain runs while this replica may reconcile. */
export interface Runnable {
  /** Informers listed and workers running. */
  ready(): boolean;
  /** The caches whose watch has failed too long, one line each (kind, namespace, since when): not ready. */
  staleCaches?(): string[];
  stop(): Promise<void>;
}

export interface LeaderElectionOptions {
  namespace: string;
  /** Name of the Lease. */
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export interface ManagerOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  registry: Registry;
  /** Where /healthz and /readyz are served (port 0: a free port); none: not served. */
  probes?: { host: string; port: number };
  /** Where /metrics is served, and nothing else (port 0: a free port); none: not served. */
  metrics?: { host: string; port: number };
  /**
   * Starts the domain's work; called once, when this replica leads (or at once without election).
   * The domain checks `leadership` before each write and ends its work when its signal aborts.
   */
  start(leadership: Leadership): Promise<Runnable>;
  /** Elect a leader on a Lease before starting; undefined: start at once. */
  leaderElection?: LeaderElectionOptions;
  /** Told when this replica starts or stops leading (e.g. the leader metric). */
  onLeading?(leading: boolean): void;
  /** How long shutdown may take before the process exits anyway. Default 25 s. */
  shutdownTimeoutMs?: number;
  /** How long the work may take to stop (the Lease renewed meanwhile) before writes are refused and the Lease released. Default 15 s. */
  drainTimeoutMs?: number;
  /** Ends the process (tests replace it). */
  exit?(code: number): void;
}

export class Manager {
  readonly #o: ManagerOptions;
  readonly #exit: (code: number) => void;
  readonly #stopAll = new AbortController();
  readonly #servers: HealthServer[] = [];
  readonly #leases: Pick<CoordinationClient, 'readNamespacedLease'> | undefined;
  #running: Runnable | undefined;
  /** start() under way or done: what shutdown waits for. */
  #starting: Promise<Runnable> | undefined;
  #elector: LeaderElector | undefined;
  #leading = false;
  #stopping = false;
  /** Closed past the drain bound: no write passes the fence any more, lease or not. */
  #fenceClosed = false;
  /** Aborts the work's signal: leadership lost, or the drain bound passed. */
  readonly #work = new AbortController();

  constructor(options: ManagerOptions) {
    this.#o = options;
    this.#exit = options.exit ?? ((code) => process.exit(code));
    this.#leases = options.leaderElection !== undefined ? coordinationClient(options.kubeConfig) : undefined;
  }

  /** Serves the probes, then starts the domain's work (after winning the Lease, with election). */
  async run(): Promise<void> {
    const { probes, metrics } = this.#o;
    const probeHandlers = { healthz: () => true, readyz: () => this.readyz() };
    // The same address for both (not port 0): one server serves both, as asked.
    const shared = probes !== undefined && metrics !== undefined && probes.port !== 0 && probes.port === metrics.port && probes.host === metrics.host;
    if (probes !== undefined)
      this.#servers.push(await startHealthServer({ ...probes, probes: probeHandlers, ...(shared ? { registry: this.#o.registry } : {}) }));
    if (metrics !== undefined && !shared) this.#servers.push(await startHealthServer({ ...metrics, registry: this.#o.registry }));
    const election = this.#o.leaderElection;
    if (election === undefined) {
      await this.#start();
      return;
    }
    this.#elector = new LeaderElector({
      kubeConfig: this.#o.kubeConfig,
      ...election,
      logger: this.#o.logger,
      onStartedLeading: async (signal) => {
        this.#leading = true;
        this.#o.onLeading?.(true);
        if (signal.aborted) this.#work.abort(new NotLeadingError());
        else signal.addEventListener('abort', () => this.#work.abort(new NotLeadingError()), { once: true });
        await this.#start();
      },
      // Like client-go: a replica that lost the lease exits, and comes back as a standby.
      onStoppedLeading: () => {
        this.#leading = false;
        this.#o.onLeading?.(false);
        this.shutdown('lost leadership', 1);
      },
    });
    void this.#elector.run(this.#stopAll.signal);
  }

  /** The work's leadership: the elector's lease by this process's clock, until the fence closes. */
  #leadership(): Leadership {
    return {
      signal: this.#work.signal,
      check: () => {
        if (this.#fenceClosed) throw new NotLeadingError('this replica is shutting down past its drain: write refused');
        if (this.#elector !== undefined && !this.#elector.isLeader()) throw new NotLeadingError();
      },
    };
  }

  async #start(): Promise<void> {
    this.#starting = this.#o.start(this.#leadership());
    this.#running = await this.#starting;
  }

  /** See the top of this file for what ready means. */
  async readyz(): Promise<Readiness> {
    const election = this.#o.leaderElection;
    if (election === undefined || this.#leases === undefined || this.#leading) {
      if (this.#running?.ready() !== true) return { ok: false, reasons: ['caches not synced'] };
      // A stale cache (docs/reliability.md "Stale caches"): the leader acts on what it may no longer see.
      const stale = this.#running.staleCaches?.() ?? [];
      return stale.length === 0 ? { ok: true } : { ok: false, reasons: stale };
    }
    // Standby (docs/design.md section 5.4): ready, provided its Kubernetes credentials work.
    try {
      await this.#leases.readNamespacedLease({ name: election.name, namespace: election.namespace });
      return { ok: true };
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (code === 404) return { ok: true }; // authorized; the first candidate creates it
      return {
        ok: false,
        reasons: [
          `standby cannot read Lease ${election.namespace}/${election.name}: ${typeof code === 'number' ? `HTTP ${code}` : error instanceof Error ? error.message : String(error)}`,
        ],
      };
    }
  }

  /** Drains and exits with `code`; idempotent (the first signal wins). */
  shutdown(signal: string, code = 0): void {
    if (this.#stopping) return;
    this.#stopping = true;
    const { logger } = this.#o;
    logger.info({ signal }, 'draining in-flight reconciles');
    const force = setTimeout(() => this.#exit(1), this.#o.shutdownTimeoutMs ?? 25_000);
    force.unref();
    (async () => {
      // The Lease is still renewed while the work stops (the elector runs until release()).
      const drained = await this.#drain(this.#o.drainTimeoutMs ?? 15_000);
      if (!drained) logger.warn({ drainTimeoutMs: this.#o.drainTimeoutMs ?? 15_000 }, 'drain timed out: refusing further writes before releasing the lease');
      this.#fenceClosed = true;
      this.#work.abort(new NotLeadingError('this process is stopping'));
      await this.#elector?.release().catch(() => undefined);
      this.#stopAll.abort();
      await Promise.all(this.#servers.map((s) => s.close()));
      if (drained === 'failed') throw new Error('stopping the work failed');
    })().then(
      () => this.#exit(code),
      async (error: unknown) => {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, 'shutdown failed');
        await Promise.all(this.#servers.map((s) => s.close())).catch(() => undefined);
        this.#exit(1);
      },
    );
  }

  /** Stops the work (a start under way first ends); true once stopped, false past `boundMs`, 'failed' when stopping threw. */
  async #drain(boundMs: number): Promise<boolean | 'failed'> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), boundMs);
    });
    const stopping = (async (): Promise<true | 'failed'> => {
      try {
        await (await this.#starting)?.stop();
        return true;
      } catch (error) {
        this.#o.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'stopping the work failed');
        return 'failed';
      }
    })();
    try {
      return await Promise.race([stopping, bound]);
    } finally {
      clearTimeout(timer);
    }
  }
}
