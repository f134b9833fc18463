// What a reconciler is to the controller (controller.ts): the request it gets, the result it
// returns, and the worker it runs on, which it may give back while it waits (Worker.release).
import type { Logger } from 'pino';
import type { ReconcileOutcome } from './metrics.ts';

/** What the worker does with the key after a reconcile. */
export type ReconcileResult =
  | { type: 'Done'; requeueAfterMs?: number }
  /** Retry soon with the queue's per-item backoff (conflicts, apiserver hiccups): a failure. */
  | { type: 'Retry' }
  /** The next step of a protocol, at once (under the queue's global rate limit): not a failure. */
  | { type: 'Continue' }
  /** A refusal by a remote system: retry after at least this long (the controller grows it per failure). */
  | { type: 'Backoff'; minDelayMs?: number };

/** Which object a reconcile is about. */
export interface Request {
  kind: string;
  /** '' for a cluster-scoped object. */
  namespace: string;
  name: string;
}

/**
 * The worker running a reconcile. A reconcile that must wait on something slow and outside the
 * apiserver (a remote system's rate limit) gives the worker back for that wait, so the other keys
 * do not queue behind it.
 */
export interface Worker {
  /**
   * Awaits `wait` without holding the worker: the worker takes the next key at once, and this
   * reconcile goes on, once `wait` settles, outside the pool of N workers. The key stays in flight
   * (no other worker reconciles it until this reconcile ends). Nothing here bounds how many
   * reconciles wait so: the caller does (the key domain bounds them per organization).
   */
  release<T>(wait: Promise<T>): Promise<T>;
  /** Aborts once this process may no longer act (leadership lost, runtime/write-fence.ts): the reconcile should end. */
  signal?: AbortSignal;
}

export interface Reconciler {
  reconcile(request: Request, logger: Logger, worker?: Worker): Promise<ReconcileResult>;
}

/** How controller-runtime's reconcileHandler would count a result (undefined: the reconcile threw). */
export function reconcileOutcome(result: ReconcileResult | undefined): ReconcileOutcome {
  if (result === undefined) return 'error';
  if (result.type !== 'Done') return 'requeue';
  return result.requeueAfterMs !== undefined ? 'requeue_after' : 'success';
}

/**
 * A worker for one reconcile, and the promise that settles when the reconcile gives it back
 * (Worker.release): the pool's worker is free then, or once the reconcile ends, whichever comes first.
 */
export function releasableWorker(signal: AbortSignal | undefined): { worker: Worker; released: Promise<void> } {
  let freeWorker!: () => void;
  const released = new Promise<void>((resolve) => {
    freeWorker = resolve;
  });
  const worker: Worker = {
    release: (wait) => {
      freeWorker();
      return wait;
    },
    ...(signal !== undefined ? { signal } : {}),
  };
  return { worker, released };
}
