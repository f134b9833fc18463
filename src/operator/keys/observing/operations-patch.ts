// An operations change at rest: when the only input that changed since a resource's last
// full InSync pass is its project's operations snapshot (at-rest.ts says 'operations', every other
// check held), the status a full pass would write differs from the one it rests on in two places
// only: the OperationsSettled condition and status.operations. A full pass would read the resource
// and two Secrets and patch status (4 requests per ProjectApiKey of the project, per change, several
// times a minute); this writes both with ONE JSON patch of the status subresource and no read.
//
// What makes it safe without a read: the patch first `test`s /metadata/resourceVersion against the
// version the resource rests on, so it lands on exactly the object the last full pass verified (or
// wrote) and on nothing else; the cache's projection of that version (keys/observing/cache-projection.ts: the
// type and status of each condition, in order; the generation) says where the condition is and
// whether its status changes. The condition is built by the same function as a full pass's
// (conditions.ts setConditions, from the poller's snapshot: operations-poller.ts), so it reads the
// same: reason, message, observedGeneration, and lastTransitionTime moved only when status changes.
// Any failure (a test that failed: 422; a resource gone; anything else) leaves the full pass to run,
// as before.
import type { Logger } from 'pino';
import { objectRef } from '../../runtime/own-writes.ts';
import type { KindName } from '../../resources/schema.ts';
import { operationsJson } from './at-rest.ts';
import { setConditions } from '../status/conditions.ts';
import type { JsonPatchOp } from '../kube-writes.ts';
import type { OperationsSnapshot } from './operations-poller.ts';
import type { CachedConditions, KeyDeps, RestInputs, Verified } from '../reconcile-context.ts';

/**
 * The JSON patch that writes `snapshot` into the status of the resource at `resourceVersion`, whose
 * conditions the cache shows as `cached` (pure). The condition's fields are replaced in place (its
 * position and its status tested too), or the condition appended when there is none yet.
 */
export function operationsPatch(
  resourceVersion: string,
  cached: Pick<CachedConditions, 'generation' | 'conditions'>,
  snapshot: OperationsSnapshot,
  now: Date,
): JsonPatchOp[] {
  // As writeStatus builds it: the resource's generation (0 when it has none).
  const [next] = setConditions([], [{ type: 'OperationsSettled', ...snapshot.settled }], cached.generation ?? 0, now);
  if (next === undefined) throw new Error('setConditions returned no condition');
  const ops: JsonPatchOp[] = [{ op: 'test', path: '/metadata/resourceVersion', value: resourceVersion }];
  const index = cached.conditions.findIndex((c) => c.type === 'OperationsSettled');
  const previous = cached.conditions[index];
  if (previous === undefined) {
    ops.push({ op: 'add', path: '/status/conditions/-', value: next });
  } else {
    const at = `/status/conditions/${index}`;
    // Redundant with the version's test while the cache is right; a cache that was not would fail here.
    ops.push({ op: 'test', path: `${at}/type`, value: 'OperationsSettled' }, { op: 'test', path: `${at}/status`, value: previous.status });
    ops.push(
      { op: 'replace', path: `${at}/status`, value: next.status },
      { op: 'replace', path: `${at}/reason`, value: next.reason },
      { op: 'replace', path: `${at}/message`, value: next.message },
      { op: 'replace', path: `${at}/observedGeneration`, value: next.observedGeneration },
    );
    if (previous.status !== next.status) ops.push({ op: 'replace', path: `${at}/lastTransitionTime`, value: next.lastTransitionTime });
  }
  // `add` replaces a member that exists (RFC 6902), as the full pass's merge patch replaces the list.
  ops.push({ op: 'add', path: '/status/operations', value: snapshot.operations });
  return ops;
}

/**
 * Writes the new operations snapshot of a resource at rest with one request; returns what it now
 * rests on (the version written, the snapshot mirrored), or undefined when a full pass must run.
 */
export async function patchOperations(
  deps: KeyDeps,
  inputs: RestInputs,
  request: { kind: string; namespace: string; name: string },
  verified: Verified,
  logger: Logger,
): Promise<Verified | undefined> {
  const { kind, namespace, name } = request;
  const project = verified.adapter.project;
  if (project === undefined || deps.operations === undefined) return undefined;
  const owner = `${namespace}/${name}`;
  const snapshot = deps.operations.pollers.snapshot(project.projectId, owner);
  const cached = inputs.cachedConditions(kind, namespace, name);
  // The cache must show the very version the resource rests on: not one that moved during the
  // check, nor the one our last write replaced (its event not delivered yet: writtenOver).
  if (snapshot === undefined || cached === undefined || cached.resourceVersion !== verified.resourceVersion) return undefined;
  const ops = operationsPatch(verified.resourceVersion, cached, snapshot, new Date(deps.now()));
  let patched;
  try {
    patched = await deps.kube.patchStatusOps(kind as KindName, namespace, name, ops);
  } catch (error) {
    // 422: a test failed (the resource moved on, or the cache was wrong); 404: gone. Either way the
    // full pass reads what is there now.
    logger.debug({ err: error }, 'operations patch did not apply; full pass');
    return undefined;
  }
  const written = patched.metadata.resourceVersion;
  if (written === undefined) return undefined;
  deps.ownWrites?.record(objectRef(kind, namespace, name), verified.resourceVersion, written);
  // The snapshot written, as the at-rest check compares it (operationsOf: JSON of the poller's object).
  return { ...verified, resourceVersion: written, writtenOver: verified.resourceVersion, operations: operationsJson(snapshot) };
}
