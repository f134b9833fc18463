// Operations mirroring (docs/design.md section 4): ONE poller per project, however many ProjectApiKeys
// point at it. Each poller lists the newest `limit` operations of its project and reports a
// snapshot (the operations, and the OperationsSettled condition) to onUpdate, which writes the
// status of every ProjectApiKey of that project.
//
// What a status means comes from one table (src/platform/operation-status.ts): running,
// settled, retrying (`failed`), given up (`error`), or unknown (a status this operator does not know).
// Cadence: every fastIntervalMs (5 s, the suggested polling interval of docs/platform-api.md
// "Polling") while any recent operation is expected to change (running, or failed and retried),
// every slowIntervalMs otherwise: all settled, given up, or of an unknown status (which may never
// change: it must not keep the fast cadence forever). Platform errors back off exponentially from
// the fast interval up to the slow one (or Retry-After), so a broken credential never makes a hot
// loop. The reason of a failed list comes from the table shared with the key lifecycle
// (platform-reasons.ts).
//
// Ownership: ensure(projectId, owner, apiKey) / release(projectId, owner) keep the owners of a
// project (the reconciler passes `namespace/name` of each ProjectApiKey) with each one's issued key.
// Both are idempotent, which suits a level-triggered reconciler that calls ensure() on every pass;
// the poller runs while it has owners. An owner is of one project at a time (a ProjectApiKey names one):
// ensured for another project, it leaves the one before, so the pollers are at most the
// ProjectApiKeys with an issued key, whatever projects a resource was moved through.
//
// Whose key lists: owners of one project may be different teams. The poller lists with one owner's
// key (the last that worked); a key the platform refuses (401/403) is dropped and the next owner's
// key is tried in the same poll, so one tenant's revoked or broken key never degrades another's
// OperationsSettled. Only the owner whose own key was refused reads a failure (Unknown, with its
// reason) until its key is replaced. Failures that are not about a key (5xx, timeouts) are the
// platform's, reported on every owner, with backoff.
import type { Logger } from 'pino';
import { isPlatformError, operationStatusClass, type Operation, type OperationStatusClass, type PlatformClient } from '../../../platform/index.ts';
import type { OperationSummary as StatusOperationSummary } from '../../resources/key-status.ts';
import type { Reason } from '../status/conditions.ts';
import { platformFailureReason } from '../status/platform-reasons.ts';

/** The part of PlatformClient the poller uses. */
export type OperationsClient = Pick<PlatformClient, 'listOperations'>;

/**
 * An entry of status.operations of a ProjectApiKey (camelCase, as Kubernetes status fields are):
 * the schema's (resources/key-status.ts), every field filled by the poller.
 */
export type OperationSummary = Required<StatusOperationSummary>;

export interface SettledCondition {
  status: 'True' | 'False' | 'Unknown';
  reason: Reason;
  message: string;
}

export interface OperationsSnapshot {
  operations: OperationSummary[];
  settled: SettledCondition;
}

export interface OperationsPollersOptions {
  /** A client acting with an owner's issued key (kept while that owner's key stays the same). */
  clientForKey: (apiKey: string) => OperationsClient;
  /** Counts polls by outcome: listed, a key refused (another tried), or failed. */
  onPoll?: (outcome: 'ok' | 'key_refused' | 'failed') => void;
  /** Called when a project's snapshot changes; awaited before the next poll of that project. */
  onUpdate: (projectId: string, snapshot: OperationsSnapshot) => void | Promise<void>;
  fastIntervalMs?: number;
  slowIntervalMs?: number;
  /** How many of the newest operations count as "recent". Default 10. */
  limit?: number;
  logger?: Logger;
}

interface OwnerKey {
  /** The owner's issued key: another one replaces the client and clears a failure. */
  apiKey: string;
  /**
   * Made when this owner's key is first listed with: one poll lists with one key, so most owners
   * of a project never need one (a client per owner would hold heap for every key).
   */
  client?: OperationsClient;
  /** The platform refused this key (401/403): not tried again until the owner's key changes. */
  refused?: SettledCondition;
}

/** The refusal of an owner's key, if the platform refused it. */
function refusal(key: string | OwnerKey | undefined): SettledCondition | undefined {
  return typeof key === 'object' ? key.refused : undefined;
}

interface ProjectPoller {
  /**
   * Owner -> its issued key (undefined: registered before it has one): the key alone until it is
   * listed with or refused (most owners of a project never are: an object each is ~40 bytes a key).
   */
  owners: Map<string, string | OwnerKey | undefined>;
  /** The owner whose key listed last: tried first. */
  preferred: string | undefined;
  /** The last refusal of an owner's key, reported while no other key is left to try. */
  lastRefusal: unknown;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Monotonic time the pending timer fires at. */
  dueAt: number;
  polling: Promise<void> | undefined;
  /** Set by ensure() during a poll (a new or changed key): poll again at the fast interval. */
  hurry: boolean;
  errors: number;
  last: OperationsSnapshot | undefined;
  lastJson: string;
  abort: AbortController;
}

/** Operations in these classes will change soon: poll at the fast interval while one is recent. */
const CHANGING: ReadonlySet<OperationStatusClass> = new Set(['running', 'retrying']);

/** Whether any of the operations is expected to change soon (running, or failed and being retried). */
export function anyChanging(operations: readonly Pick<Operation, 'status'>[]): boolean {
  return operations.some((op) => CHANGING.has(operationStatusClass(op.status)));
}

/** A status as the platform wrote it, safe in a message: bounded, printable. */
function shown(status: string): string {
  const printable = status.replace(/[^\x20-\x7e]/g, '?');
  return JSON.stringify(printable.length > 40 ? `${printable.slice(0, 40)}...` : printable);
}

/**
 * When an operation was created, as a second-precision RFC 3339 time (or "an unknown time"). Not
 * an age: a message that changed with every poll would make every poll a new snapshot, and each
 * snapshot rewrites the status of every ProjectApiKey of the project.
 */
function createdAt(op: Operation): string {
  const ms = Date.parse(op.created_at);
  return Number.isFinite(ms) && ms >= 0 && ms < Date.UTC(10000, 0, 1) ? new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z') : 'an unknown time';
}

/**
 * OperationsSettled of a list of operations (pure; exported for its table tests). True only when
 * every recent operation settled fine. Otherwise, what needs attention first: an operation the
 * platform gave up on (False OperationError: it will not change again, and what depended on it
 * did not happen), one that failed and is retried (False Failed), one under way (False
 * InProgress), and last one whose status this operator does not know (Unknown
 * UnknownOperationStatus: neither settled nor known to be under way).
 */
export function settledCondition(operations: readonly Operation[]): SettledCondition {
  const byClass = (c: OperationStatusClass): Operation[] => operations.filter((op) => operationStatusClass(op.status) === c);
  const gaveUp = byClass('gaveUp');
  const retrying = byClass('retrying');
  const running = byClass('running');
  const unknown = byClass('unknown');
  const notSettled = operations.length - byClass('settled').length;
  if (notSettled === 0) {
    return {
      status: 'True',
      reason: 'AllTerminal',
      message: operations.length === 0 ? 'no recent operations' : `all ${operations.length} recent operations are terminal`,
    };
  }
  // Of a class, the operation waiting longest is named.
  const pick = (ops: Operation[]): Operation => ops.reduce((a, b) => (Date.parse(b.created_at) < Date.parse(a.created_at) ? b : a));
  const more = notSettled > 1 ? ` (and ${notSettled - 1} more not settled)` : '';
  if (gaveUp.length > 0) {
    const op = pick(gaveUp);
    return {
      status: 'False',
      reason: 'OperationError',
      // No age: the state is final, and a message that changes with every poll would rewrite every resource's status.
      message:
        `${op.action} ${op.id} ended in error (failures_count ${op.failures_count}): ` +
        `the platform gave up on it and it will not change again; what depended on it did not happen${more}`,
    };
  }
  if (retrying.length > 0) {
    const op = pick(retrying);
    return {
      status: 'False',
      reason: 'Failed',
      message: `${op.action} failed (failures_count ${op.failures_count}; created at ${createdAt(op)}), the platform retries it${more}`,
    };
  }
  if (running.length > 0) {
    const op = pick(running);
    return { status: 'False', reason: 'InProgress', message: `${op.action} ${op.status} (created at ${createdAt(op)})${more}` };
  }
  const op = pick(unknown);
  return {
    status: 'Unknown',
    reason: 'UnknownOperationStatus',
    message: `${op.action} ${op.id} has status ${shown(op.status)}, which this operator does not know: it cannot tell whether the operation settled${more}`,
  };
}

const summary = (op: Operation): OperationSummary => ({
  id: op.id,
  action: op.action,
  status: op.status,
  failuresCount: op.failures_count,
  updatedAt: op.updated_at,
});

export class OperationsPollers {
  readonly #clientForKey: OperationsPollersOptions['clientForKey'];
  readonly #onPoll: OperationsPollersOptions['onPoll'];
  readonly #onUpdate: OperationsPollersOptions['onUpdate'];
  readonly #fastMs: number;
  readonly #slowMs: number;
  readonly #limit: number;
  readonly #logger: Logger | undefined;
  readonly #projects = new Map<string, ProjectPoller>();
  /** The project each owner is of. */
  readonly #ownerProject = new Map<string, string>();
  #stopped = false;

  constructor(options: OperationsPollersOptions) {
    this.#clientForKey = options.clientForKey;
    this.#onPoll = options.onPoll;
    this.#onUpdate = options.onUpdate;
    this.#fastMs = options.fastIntervalMs ?? 5_000;
    this.#slowMs = Math.max(options.slowIntervalMs ?? 60_000, this.#fastMs);
    this.#limit = options.limit ?? 10;
    this.#logger = options.logger;
  }

  /**
   * Starts polling projectId (at once) unless already polled; idempotent per owner. `apiKey`: the
   * owner's issued key, which the poller may list with; a different key replaces it.
   */
  ensure(projectId: string, owner: string, apiKey?: string): void {
    if (this.#stopped) return;
    const before = this.#ownerProject.get(owner);
    if (before !== undefined && before !== projectId) this.release(before, owner);
    this.#ownerProject.set(owner, projectId);
    const poller = this.#poller(projectId);
    const current = poller.owners.get(owner);
    if (apiKey === undefined) {
      if (!poller.owners.has(owner)) poller.owners.set(owner, undefined);
      return;
    }
    if (current === apiKey || (typeof current === 'object' && current.apiKey === apiKey)) return;
    poller.owners.set(owner, apiKey);
    // A first key, or one replacing a refused key: poll soon, so the owner's condition follows.
    if (current === undefined || refusal(current) !== undefined) this.#hurry(projectId, poller);
  }

  /** Removes owner; the last owner gone stops the project's poller. */
  release(projectId: string, owner: string): void {
    if (this.#ownerProject.get(owner) === projectId) this.#ownerProject.delete(owner);
    const poller = this.#projects.get(projectId);
    if (poller === undefined) return;
    poller.owners.delete(owner);
    if (poller.preferred === owner) poller.preferred = undefined;
    this.#retireIfIdle(projectId, poller);
  }

  #hurry(projectId: string, poller: ProjectPoller): void {
    if (poller.polling !== undefined) poller.hurry = true;
    else this.#schedule(projectId, poller, Math.min(this.#fastMs, Math.max(0, poller.dueAt - performance.now())));
  }

  /**
   * The latest snapshot of a project as `owner` should see it, if the project has been polled: the
   * project's, unless the platform refused the owner's own key (then Unknown, with that reason, and
   * no operations: its key cannot read them).
   */
  snapshot(projectId: string, owner?: string): OperationsSnapshot | undefined {
    const poller = this.#projects.get(projectId);
    const refused = owner !== undefined ? refusal(poller?.owners.get(owner)) : undefined;
    if (refused !== undefined) return { operations: [], settled: refused };
    return poller?.last;
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
    this.#ownerProject.clear();
    await Promise.allSettled(inFlight);
  }

  #poller(projectId: string): ProjectPoller {
    let poller = this.#projects.get(projectId);
    if (poller === undefined) {
      poller = {
        owners: new Map(),
        preferred: undefined,
        lastRefusal: undefined,
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

  /** The owners whose key was refused, as one string ('' when none): taken on every poll, so without copying the owners (a project may have thousands). */
  #refusedOwners(poller: ProjectPoller): string {
    let refused = '';
    poller.owners.forEach((key, owner) => {
      if (refusal(key) !== undefined) refused += refused === '' ? owner : `\n${owner}`;
    });
    return refused;
  }

  /** The owners whose key may list, the preferred one first; the rest only when it is refused (most polls list with the first). */
  *#candidates(poller: ProjectPoller): Generator<[string, OwnerKey]> {
    const usable = (key: string | OwnerKey | undefined): key is string | OwnerKey => key !== undefined && refusal(key) === undefined;
    // The key as an object from its first use on (its client, its refusal); set in place, the order kept.
    const entry = (owner: string, key: string | OwnerKey): OwnerKey => {
      if (typeof key !== 'string') return key;
      const made = { apiKey: key };
      poller.owners.set(owner, made);
      return made;
    };
    const first = poller.preferred;
    const preferred = first !== undefined ? poller.owners.get(first) : undefined;
    if (first !== undefined && usable(preferred)) yield [first, entry(first, preferred)];
    for (const [owner, key] of poller.owners) if (owner !== first && usable(key)) yield [owner, entry(owner, key)];
  }

  /**
   * Lists with the preferred owner's key, then the others'; a key refused with 401/403 is marked
   * refused (its owner alone reads the failure) and the next is tried. Any other failure is the
   * platform's and ends the poll.
   */
  async #listWithSomeKey(
    projectId: string,
    poller: ProjectPoller,
    signal: AbortSignal,
  ): Promise<{ page: Awaited<ReturnType<OperationsClient['listOperations']>> }> {
    let lastRefusal: unknown;
    for (const [owner, key] of this.#candidates(poller)) {
      try {
        key.client ??= this.#clientForKey(key.apiKey);
        const page = await key.client.listOperations(projectId, { limit: this.#limit, signal });
        poller.preferred = owner;
        return { page };
      } catch (error) {
        if (!isPlatformError(error) || (error.code !== 'UNAUTHORIZED' && error.code !== 'FORBIDDEN')) throw error;
        lastRefusal = error;
        key.refused = {
          status: 'Unknown',
          reason: platformFailureReason(error),
          message:
            `this resource's key cannot list the operations of project ${projectId} (${error.status ?? error.code}${error.requestId !== undefined ? `, request ${error.requestId}` : ''}); ` +
            'it is no longer used to poll them until it is replaced',
        };
        if (poller.preferred === owner) poller.preferred = undefined;
        this.#onPoll?.('key_refused');
        this.#logger?.warn({ projectId, owner, code: error.code }, 'an owner key was refused listing operations; trying another');
      }
    }
    if (lastRefusal !== undefined) {
      poller.lastRefusal = lastRefusal;
      throw lastRefusal;
    }
    // Every key refused: still the refusal (not "no credentials"), without asking again.
    if (poller.lastRefusal !== undefined && [...poller.owners.values()].some((key) => refusal(key) !== undefined)) throw poller.lastRefusal;
    throw Object.assign(new Error(`no credentials to list the operations of project ${projectId} yet`), { code: 'NO_CREDENTIALS' });
  }

  #retireIfIdle(projectId: string, poller: ProjectPoller): boolean {
    if (poller.owners.size > 0) return false;
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
    const refusedBefore = this.#refusedOwners(poller);
    try {
      const signal = poller.abort.signal;
      const { page } = await this.#listWithSomeKey(projectId, poller, signal);
      const operations = [...page.operations];
      snapshot = { operations: operations.map(summary), settled: settledCondition(operations) };
      poller.errors = 0;
      this.#onPoll?.('ok');
      nextMs = anyChanging(operations) ? this.#fastMs : this.#slowMs;
    } catch (error) {
      if (poller.abort.signal.aborted) return;
      const code = isPlatformError(error) ? error.code : typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : 'ERROR';
      // The reason of a platform failure reads as on every other condition (platform-reasons.ts).
      const reason: Reason = isPlatformError(error) ? platformFailureReason(error) : code === 'NO_CREDENTIALS' ? 'NoCredentials' : 'Error';
      poller.errors += 1;
      this.#onPoll?.('failed');
      const backoff = Math.min(this.#fastMs * 2 ** (poller.errors - 1), this.#slowMs);
      nextMs = Math.max(backoff, isPlatformError(error) ? (error.retryAfterMs ?? 0) : 0);
      this.#logger?.warn({ projectId, code, retryInMs: nextMs }, 'listing operations failed');
      snapshot = {
        operations: poller.last?.operations ?? [],
        settled: {
          status: 'Unknown',
          reason,
          message: `cannot list the operations of project ${projectId}: ${error instanceof Error ? error.message : String(error)}`,
        },
      };
    }
    if (poller.abort.signal.aborted) return;

    // A refused key changes what its owner sees even when the project's snapshot does not.
    const json = JSON.stringify(snapshot);
    if (json !== poller.lastJson || this.#refusedOwners(poller) !== refusedBefore) {
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
