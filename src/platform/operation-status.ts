// What each operation status means to a caller: one table, from docs/platform-api.md ("States and
// transitions › Operation status") and the official OpenAPI document's OperationStatus enum
// (test/platform/operation-status.test.ts checks that every status of the document has a row).
//
// - `running`: work is under way and the status will change (scheduling, running, cancelling).
// - `settled`: terminal and fine (finished, skipped, cancelled: nothing changes after them).
// - `retrying`: `failed`, a failure the platform will retry, so it will change again; it needs
//   attention while it lasts.
// - `gaveUp`: `error`, in the document's enum but not in the platform's description of the
//   statuses, and no transition out of it is known: the control plane gave up (the console's
//   "Error" label). Terminal, not fine.
// - `unknown`: anything else, e.g. a status added to the platform after this was written. Never
//   read as settled (it may be a failure) nor as running (it may never change): said as unknown.

/** The statuses the OpenAPI document enumerates. */
export type KnownOperationStatus = 'scheduling' | 'running' | 'finished' | 'failed' | 'error' | 'cancelling' | 'cancelled' | 'skipped';

export type OperationStatusClass = 'running' | 'settled' | 'retrying' | 'gaveUp' | 'unknown';

export const OPERATION_STATUS_CLASSES: Readonly<Record<KnownOperationStatus, Exclude<OperationStatusClass, 'unknown'>>> = {
  scheduling: 'running',
  running: 'running',
  cancelling: 'running',
  finished: 'settled',
  skipped: 'settled',
  cancelled: 'settled',
  failed: 'retrying',
  error: 'gaveUp',
};

/** The class of a status as the platform wrote it; a status not in the table is `unknown`. */
export function operationStatusClass(status: string): OperationStatusClass {
  return Object.hasOwn(OPERATION_STATUS_CLASSES, status) ? OPERATION_STATUS_CLASSES[status as KnownOperationStatus] : 'unknown';
}

/** No further change will occur: settled or given up (a wait for completion ends on these). */
export function isTerminalOperationStatus(status: string): boolean {
  const c = operationStatusClass(status);
  return c === 'settled' || c === 'gaveUp';
}
