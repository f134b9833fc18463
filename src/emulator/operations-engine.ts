// The control plane's operations (docs/platform-api.md "Operation", "States and transitions"). User
// actions start operations (project creation: create_timeline + start_compute; branch creation:
// create_branch running + start_compute scheduling); the control plane starts suspend_compute after
// inactivity and check_availability periodically. Each operation walks scheduling -> running ->
// finished on timers scaled by timeScale; an operation may fail (status failed, failures_count + 1)
// and is then retried to finished, which is how `failed` is "not terminal".
//
// `error`: the OpenAPI document's OperationStatus enumerates it beside `failed`; the platform does
// not describe it (docs/platform-api.md "Operation status"). The emulator gives it the one meaning
// that sets it apart from `failed`: the control plane gave up. An operation made to end in error (admin
// fail-next-operations with outcome "error") goes running -> error, with failures_count + 1 and
// its `error` message, and never changes again: no retry follows (docs/emulator.md, "The admin API").
import type { Logger } from 'pino';
import { isoMicros, nowMicros } from './clock.ts';
import { newUuid } from './identifiers.ts';
import type { OperationRow, OperationStatus, Store } from './store.ts';

export interface OperationSpec {
  action: string;
  branchId: string;
  endpointId?: string;
  status: 'scheduling' | 'running';
}

/** Durations at timeScale 1, in milliseconds, of the realistic platform. */
const SCHEDULING_MS: Record<string, number> = { start_compute: 500, suspend_compute: 200, check_availability: 800 };
const RUNNING_MS: Record<string, number> = {
  create_timeline: 1500,
  create_branch: 1200,
  start_compute: 2000,
  suspend_compute: 800,
  check_availability: 3000,
  delete_tenant: 1000,
};
const RETRY_AFTER_FAILURE_MS = 5000;
const SUSPEND_AFTER_INACTIVE_MS = 300_000;
const CHECK_AVAILABILITY_EVERY_MS = 600_000;
const CONTROL_PLANE_TICK_MS = 5_000;

const TERMINAL: ReadonlySet<OperationStatus> = new Set(['finished', 'skipped', 'cancelled']);

/** docs/platform-api.md "Operation status": no further change occurs from these. */
export function isTerminal(status: OperationStatus): boolean {
  return TERMINAL.has(status);
}

/** Statuses the emulator never moves an operation out of: the terminal ones, and `error` (see above). */
export function isFinal(status: OperationStatus): boolean {
  return isTerminal(status) || status === 'error';
}

/** The Operation object of the OpenAPI (total_duration_ms included; endpoint_id only when set). */
export function operationJson(op: OperationRow): Record<string, unknown> {
  const end = op.finished_us ?? (isFinal(op.status) ? op.updated_us : nowMicros());
  return {
    id: op.id,
    project_id: op.project_id,
    branch_id: op.branch_id,
    ...(op.endpoint_id !== null ? { endpoint_id: op.endpoint_id } : {}),
    action: op.action,
    status: op.status,
    ...(op.error !== null ? { error: op.error } : {}),
    failures_count: op.failures_count,
    created_at: isoMicros(op.created_us),
    updated_at: isoMicros(op.updated_us),
    total_duration_ms: Math.max(0, Math.round((end - op.created_us) / 1000)),
  };
}

export interface OperationsEngine {
  /** Inserts the operations (call inside the request's transaction) and schedules their progress. */
  start(projectId: string, specs: OperationSpec[]): OperationRow[];
  /** Whether the control plane starts its own operations (suspend compute, check availability). */
  readonly controlPlaneActivity: boolean;
  /** Turns the control plane's own operations on or off; operations already started run to their end. */
  setControlPlaneActivity(on: boolean): void;
  close(): void;
}

export function startOperationsEngine(store: Store, opts: { timeScale: number; controlPlaneActivity: boolean; logger: Logger }): OperationsEngine {
  const scale = (ms: number) => Math.max(1, Math.round(ms * opts.timeScale));
  const timers = new Map<string, NodeJS.Timeout>();
  let closed = false;

  const schedule = (opId: string, delayMs: number) => {
    if (closed) return;
    const t = setTimeout(() => {
      timers.delete(opId);
      try {
        advance(opId);
      } catch (err) {
        opts.logger.error({ err, opId }, 'operation could not advance');
      }
    }, delayMs);
    timers.set(opId, t);
  };

  const delayFor = (op: OperationRow) =>
    op.status === 'scheduling'
      ? scale(SCHEDULING_MS[op.action] ?? 500)
      : op.status === 'failed'
        ? scale(RETRY_AFTER_FAILURE_MS)
        : scale(RUNNING_MS[op.action] ?? 1000);

  function advance(opId: string): void {
    if (closed) return;
    const op = store.operationById(opId);
    if (op === undefined || isFinal(op.status)) return;
    const now = nowMicros();
    const next = {
      status: op.status,
      failures_count: op.failures_count,
      error: op.error,
      updated_us: now,
      finished_us: op.finished_us,
      fail_times: op.fail_times,
    };
    if (op.status === 'scheduling' || op.status === 'failed') {
      next.status = 'running';
    } else if (op.gives_up === 1) {
      next.status = 'error';
      next.failures_count += 1;
      next.finished_us = now;
      next.error = `${op.action} failed on the control plane (injected) and will not be retried`;
    } else if (op.fail_times > 0) {
      next.status = 'failed';
      next.failures_count += 1;
      next.fail_times -= 1;
      next.error = `${op.action} failed on the control plane (injected); it will be retried`;
    } else {
      next.status = 'finished';
      next.finished_us = now;
      next.error = null;
    }
    store.updateOperation(op.id, next);
    if (next.status === 'finished') onFinished(op, now);
    else if (next.status !== 'error') schedule(op.id, delayFor({ ...op, ...next }));
  }

  function onFinished(op: OperationRow, nowUs: number): void {
    if (op.endpoint_id === null) return;
    const ms = Math.floor(nowUs / 1000);
    if (op.action === 'start_compute') store.setEndpointState(op.endpoint_id, 'active', ms);
    else if (op.action === 'suspend_compute') store.setEndpointState(op.endpoint_id, 'idle', ms);
  }

  function start(projectId: string, specs: OperationSpec[]): OperationRow[] {
    const rows: OperationRow[] = [];
    for (const spec of specs) {
      const created = store.nextCreatedMicros(projectId, nowMicros());
      const row: Omit<OperationRow, 'seq'> = {
        id: newUuid(),
        project_id: projectId,
        branch_id: spec.branchId,
        endpoint_id: spec.endpointId ?? null,
        action: spec.action,
        status: spec.status,
        failures_count: 0,
        error: null,
        created_us: created,
        updated_us: created,
        finished_us: null,
        // One budget per operation: an operation set to end in error does not also fail once first.
        gives_up: 0,
        fail_times: 0,
      };
      if (store.takeErrorNext(projectId)) row.gives_up = 1;
      else if (store.takeFailNext(projectId)) row.fail_times = 1;
      store.insertOperation(row);
      rows.push({ ...row, seq: 0 });
    }
    // Timers fire after the current request's transaction has committed (they are macrotasks).
    for (const row of rows) schedule(row.id, delayFor(row));
    return rows;
  }

  // Operations left open by a previous process resume where they stopped.
  for (const op of store.openOperations()) schedule(op.id, delayFor(op));

  // The control plane's own load (docs/platform-api.md "Kinds of operation": Suspend compute after a
  // period of inactivity; Check availability, periodic, only for branches with a compute).
  let tick: NodeJS.Timeout | undefined;
  const setActivity = (on: boolean) => {
    if (on === (tick !== undefined) || closed) return;
    if (!on) {
      clearInterval(tick);
      tick = undefined;
      return;
    }
    tick = setInterval(
      () => {
        try {
          controlPlaneTick();
        } catch (err) {
          opts.logger.error({ err }, 'control plane tick failed');
        }
      },
      Math.max(10, scale(CONTROL_PLANE_TICK_MS)),
    );
  };
  setActivity(opts.controlPlaneActivity);

  function controlPlaneTick(): void {
    const nowMs = Date.now();
    for (const ep of store.liveEndpoints()) {
      if (ep.state === 'active' && nowMs - ep.last_active_ms >= scale(SUSPEND_AFTER_INACTIVE_MS)) {
        store.transaction(() => {
          // Marked idle at once so the next tick does not suspend it twice; the operation records the work.
          store.setEndpointState(ep.id, 'idle', nowMs);
          start(ep.project_id, [{ action: 'suspend_compute', branchId: ep.branch_id, endpointId: ep.id, status: 'scheduling' }]);
        });
      }
      if (nowMs - ep.last_check_ms >= scale(CHECK_AVAILABILITY_EVERY_MS)) {
        store.transaction(() => {
          store.setEndpointChecked(ep.id, nowMs);
          start(ep.project_id, [{ action: 'check_availability', branchId: ep.branch_id, endpointId: ep.id, status: 'scheduling' }]);
        });
      }
    }
  }

  return {
    start,
    get controlPlaneActivity() {
      return tick !== undefined;
    },
    setControlPlaneActivity: setActivity,
    close() {
      closed = true;
      if (tick !== undefined) clearInterval(tick);
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
