// Operations mirroring (DESIGN.md section 4): ONE poller per project, however many ProjectApiKeys
// point at it. Each poller lists the newest `limit` operations of its project and reports a
// snapshot (the operations, and the OperationsSettled condition) to onUpdate, which writes the
// status of every ProjectApiKey of that project.
//
// Cadence: every fastIntervalMs (5 s, the suggested polling interval of platform-api.md
// "Polling") while any recent operation is non-terminal, every slowIntervalMs once all are
// terminal (platform-api.md "Operation status": finished, skipped, cancelled; `failed` is NOT
// terminal, the platform retries it). Platform errors back off exponentially from the fast
// interval up to the slow one (or Retry-After), so a broken credential never makes a hot loop.
//
// Ownership: ensure(projectId, owner) / release(projectId, owner) keep a SET of owners per project
// (the reconciler passes `namespace/name` of each ProjectApiKey). Both are idempotent, which suits
// a level-triggered reconciler that calls ensure() on every pass; the poller runs while the set is
// non-empty. Without an owner argument the project id itself is the owner, i.e. plain set semantics.
import type { Logger } from 'pino';
import { TERMINAL_OPERATION_STATUSES, isPlatformError, type Operation, type PlatformClient } from '../platform/index.ts';

/** The part of PlatformClient the poller uses. */
export type OperationsClient = Pick<PlatformClient, 'listOperations' | 'getOperation'>;

/** What status.operations of a ProjectApiKey holds (camelCase, as Kubernetes status fields are). */
export interface OperationSummary {
  id: string;
  action: string;
  status: string;
  failuresCount: number;
  updatedAt: string;
}

export interface SettledCondition {
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export interface OperationsSnapshot {
  operations: OperationSummary[];
  settled: SettledCondition;
}

export interface OperationsPollersOptions {
  /** The client to poll a project with (a project-scoped key of it where one exists); undefined: none yet. */
  clientFor: (projectId: string) => OperationsClient | undefined;
  /** Called when a project's snapshot changes; awaited before the next poll of that project. */
  onUpdate: (projectId: string, snapshot: OperationsSnapshot) => void | Promise<void>;
  fastIntervalMs?: number;
  slowIntervalMs?: number;
  /** How many of the newest operations count as "recent". Default 10. */
  limit?: number;
  logger?: Logger;
  /** Wall clock in ms, for the ages in messages. */
  now?: () => number;
}

interface ProjectPoller {
  owners: Set<string>;
  /** Operations returned by requests that started work, followed until terminal. */
  tracked: Map<string, Operation>;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Monotonic time the pending timer fires at. */
  dueAt: number;
  polling: Promise<void> | undefined;
  /** Set by track() during a poll: poll again at the fast interval. */
  hurry: boolean;
  errors: number;
  last: OperationsSnapshot | undefined;
  lastJson: string;
  abort: AbortController;
}

const isTerminal = (status: string): boolean => TERMINAL_OPERATION_STATUSES.has(status);

/** `RATE_LIMITED` → `RateLimited`: condition reasons are CamelCase (Kubernetes API conventions). */
function reasonOf(code: string): string {
  return code
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
}

function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  return `${Math.floor(s / 3600)}h`;
}

/** OperationsSettled of a list of operations (pure; exported for its table tests). */
export function settledCondition(operations: readonly Operation[], now: number): SettledCondition {
  const pending = operations.filter((op) => !isTerminal(op.status));
  if (pending.length === 0) {
    return {
      status: 'True',
      reason: 'AllTerminal',
      message: operations.length === 0 ? 'no recent operations' : `all ${operations.length} recent operations are terminal`,
    };
  }
  // Name the failed operation first (it needs attention), else the one waiting longest.
  const failed = pending.filter((op) => op.status === 'failed');
  const pick = (ops: Operation[]): Operation => ops.reduce((a, b) => (Date.parse(b.created_at) < Date.parse(a.created_at) ? b : a));
  const op = pick(failed.length > 0 ? failed : pending);
  const others = pending.length - 1;
  const more = others > 0 ? ` (and ${others} more not terminal)` : '';
  const since = age(now - Date.parse(op.created_at));
  if (failed.length > 0) {
    return {
      status: 'False',
      reason: 'Failed',
      message: `${op.action} failed (failures_count ${op.failures_count}) for ${since}, the platform retries it${more}`,
    };
  }
  return { status: 'False', reason: 'InProgress', message: `${op.action} ${op.status} for ${since}${more}` };
}

const summary = (op: Operation): OperationSummary => ({
  id: op.id,
  action: op.action,
  status: op.status,
  failuresCount: op.failures_count,
  updatedAt: op.updated_at,
});

export class OperationsPollers {
  readonly #clientFor: OperationsPollersOptions['clientFor'];
  readonly #onUpdate: OperationsPollersOptions['onUpdate'];
  readonly #fastMs: number;
  readonly #slowMs: number;
  readonly #limit: number;
  readonly #logger: Logger | undefined;
  readonly #now: () => number;
  readonly #projects = new Map<string, ProjectPoller>();
  #stopped = false;

  constructor(options: OperationsPollersOptions) {
    this.#clientFor = options.clientFor;
    this.#onUpdate = options.onUpdate;
    this.#fastMs = options.fastIntervalMs ?? 5_000;
    this.#slowMs = Math.max(options.slowIntervalMs ?? 60_000, this.#fastMs);
    this.#limit = options.limit ?? 10;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
  }

  /** Starts polling projectId (at once) unless already polled; idempotent per owner. */
  ensure(projectId: string, owner: string = projectId): void {
    if (this.#stopped) return;
    this.#poller(projectId).owners.add(owner);
  }

  /** Removes owner; the last owner gone (and nothing tracked) stops the project's poller. */
  release(projectId: string, owner: string = projectId): void {
    const poller = this.#projects.get(projectId);
    if (poller === undefined) return;
    poller.owners.delete(owner);
    this.#retireIfIdle(projectId, poller);
  }

  /**
   * Follows operations returned by a request that started work (e.g. createBranch) to a terminal
   * status; the project is polled at the fast interval until they are, even without an owner.
   */
  track(projectId: string, operations: readonly Operation[]): void {
    if (this.#stopped) return;
    const poller = this.#poller(projectId);
    for (const op of operations) if (!isTerminal(op.status)) poller.tracked.set(op.id, op);
    if (poller.polling !== undefined) poller.hurry = true;
    else this.#schedule(projectId, poller, Math.min(this.#fastMs, Math.max(0, poller.dueAt - performance.now())));
  }

  /** The latest snapshot of a project, if it has been polled. */
  snapshot(projectId: string): OperationsSnapshot | undefined {
    return this.#projects.get(projectId)?.last;
  }

  /** Projects being polled. */
  projects(): string[] {
    return [...this.#projects.keys()];
  }

  /** Stops every poller and waits for polls in flight (their onUpdate included). */
  async stop(): Promise<void> {
    this.#stopped = true;
    const inFlight: Promise<void>[] = [];
    for (const poller of this.#projects.values()) {
      clearTimeout(poller.timer);
      poller.abort.abort();
      if (poller.polling !== undefined) inFlight.push(poller.polling);
    }
    this.#projects.clear();
    await Promise.allSettled(inFlight);
  }

  #poller(projectId: string): ProjectPoller {
    let poller = this.#projects.get(projectId);
    if (poller === undefined) {
      poller = {
        owners: new Set(),
        tracked: new Map(),
        timer: undefined,
        dueAt: 0,
        polling: undefined,
        hurry: false,
        errors: 0,
        last: undefined,
        lastJson: '',
        abort: new AbortController(),
      };
      this.#projects.set(projectId, poller);
      this.#schedule(projectId, poller, 0);
    }
    return poller;
  }

  #retireIfIdle(projectId: string, poller: ProjectPoller): boolean {
    if (poller.owners.size > 0 || poller.tracked.size > 0) return false;
    clearTimeout(poller.timer);
    poller.abort.abort();
    if (this.#projects.get(projectId) === poller) this.#projects.delete(projectId);
    return true;
  }

  #schedule(projectId: string, poller: ProjectPoller, delayMs: number): void {
    clearTimeout(poller.timer);
    poller.dueAt = performance.now() + delayMs;
    poller.timer = setTimeout(() => {
      poller.timer = undefined;
      poller.polling = this.#poll(projectId, poller).finally(() => {
        poller.polling = undefined;
      });
    }, delayMs);
  }

  async #poll(projectId: string, poller: ProjectPoller): Promise<void> {
    poller.hurry = false;
    let snapshot: OperationsSnapshot;
    let nextMs: number;
    const client = this.#clientFor(projectId);
    try {
      if (client === undefined) {
        throw Object.assign(new Error(`no credentials to list the operations of project ${projectId} yet`), { code: 'NO_CREDENTIALS' });
      }
      const signal = poller.abort.signal;
      const page = await client.listOperations(projectId, { limit: this.#limit, signal });
      const operations = [...page.operations];
      // A tracked operation pushed out of the newest page by newer ones is fetched on its own.
      for (const id of [...poller.tracked.keys()]) {
        const listed = operations.find((op) => op.id === id);
        const current = listed ?? (await client.getOperation(projectId, id, { signal }).catch((error: unknown) => {
          if (isPlatformError(error) && error.code === 'NOT_FOUND') return undefined;
          throw error;
        }));
        if (current === undefined || isTerminal(current.status)) poller.tracked.delete(id);
        else poller.tracked.set(id, current);
        if (listed === undefined && current !== undefined) operations.push(current);
      }
      snapshot = { operations: operations.map(summary), settled: settledCondition(operations, this.#now()) };
      poller.errors = 0;
      nextMs = snapshot.settled.status === 'True' ? this.#slowMs : this.#fastMs;
    } catch (error) {
      if (poller.abort.signal.aborted) return;
      const code = isPlatformError(error) ? error.code : typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'ERROR';
      poller.errors += 1;
      const backoff = Math.min(this.#fastMs * 2 ** (poller.errors - 1), this.#slowMs);
      nextMs = Math.max(backoff, isPlatformError(error) ? (error.retryAfterMs ?? 0) : 0);
      this.#logger?.warn({ projectId, code, retryInMs: nextMs }, 'listing operations failed');
      snapshot = {
        operations: poller.last?.operations ?? [],
        settled: { status: 'Unknown', reason: reasonOf(code), message: `cannot list the operations of project ${projectId}: ${error instanceof Error ? error.message : String(error)}` },
      };
    }
    if (poller.abort.signal.aborted) return;

    const json = JSON.stringify(snapshot);
    if (json !== poller.lastJson) {
      poller.last = snapshot;
      poller.lastJson = json;
      try {
        await this.#onUpdate(projectId, snapshot);
      } catch (error) {
        this.#logger?.error({ err: error, projectId }, 'onUpdate of operations snapshot failed');
      }
    }
    if (poller.abort.signal.aborted || this.#retireIfIdle(projectId, poller)) return;
    if (poller.hurry) nextMs = Math.min(nextMs, this.#fastMs);
    this.#schedule(projectId, poller, nextMs);
  }
}
