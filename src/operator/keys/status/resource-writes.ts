// The writes to a key resource itself: metadata (finalizer, intent annotation) by an UPDATE that
// carries the resourceVersion read, and status by an UPDATE of the status subresource at that
// version (a merge patch without it, for the one record that must land over edits: writeKeyRecord).
// Each version written is recorded (runtime/own-writes.ts) so its watch event does not wake the key.
import { objectRef } from '../../runtime/own-writes.ts';
import { ANNOTATION_CREATE_PENDING, FINALIZER, type KeyResource } from '../../resources/schema.ts';
import { nextConditions, type Blocked, type ConditionType, type ConditionUpdate } from './conditions.ts';
import { sameJson } from '../../resources/same-json.ts';
import { statusCode } from '../kube-writes.ts';
import { ownerOf, type Context, type KeyDeps } from '../reconcile-context.ts';

/** An UPDATE carrying the resourceVersion that was read (409 on any concurrent change). */
export async function updateMetadata(deps: KeyDeps, resource: KeyResource, change: (metadata: KeyResource['metadata']) => void): Promise<KeyResource> {
  const copy = structuredClone(resource);
  change(copy.metadata);
  const updated = await deps.kube.replaceResource(copy);
  deps.ownWrites?.record(
    objectRef(updated.kind, updated.metadata.namespace, updated.metadata.name),
    resource.metadata.resourceVersion,
    updated.metadata.resourceVersion,
  );
  return updated;
}

/** Drops the finalizer (and the resource's claim on its project's operations poller). */
export async function removeFinalizer(deps: KeyDeps, resource: KeyResource): Promise<void> {
  const projectId = resource.kind === 'ProjectApiKey' ? resource.spec.projectId : undefined;
  if (projectId !== undefined) deps.operations?.pollers.release(projectId, ownerOf(resource));
  try {
    // The operator lets go of the resource: its intent (a new key's, left fulfilled: decision.ts
    // fulfilledIntent) goes in the same write, should another finalizer keep the resource a while.
    await updateMetadata(deps, resource, (m) => {
      m.finalizers = (m.finalizers ?? []).filter((f) => f !== FINALIZER);
      if (m.annotations !== undefined) delete m.annotations[ANNOTATION_CREATE_PENDING];
    });
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
  }
}

/**
 * `patch` applied to `target` as a JSON merge patch (RFC 7386): a member set to null is removed, an
 * object is merged member by member, anything else replaces. What the apiserver makes of a merge
 * patch of status, made here so that status can be written whole (writeStatus).
 */
export function mergePatched(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const merged: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete merged[key];
    else if (value !== undefined) merged[key] = mergePatched(merged[key], value);
  }
  return merged;
}

/**
 * Writes status when it changed (`drop`: condition types to remove); returns the resource as it
 * now is, and notes the version written in `ctx.statusWritten`. `conditions`: the updates, or a blocked
 * outcome whose conditions are made here (conditions.ts nextConditions).
 */
export async function writeStatus(
  deps: KeyDeps,
  ctx: Pick<Context, 'resource' | 'statusWritten'>,
  conditions: ConditionUpdate[] | Blocked,
  fields: Record<string, unknown> = {},
  drop: readonly ConditionType[] = [],
  unconditional = false,
): Promise<KeyResource> {
  const { resource } = ctx;
  const generation = resource.metadata.generation ?? 0;
  const status = resource.status ?? {};
  const next = {
    ...status,
    ...fields,
    observedGeneration: generation,
    conditions: nextConditions(status.conditions, conditions, generation, new Date(deps.now())).filter((c) => !drop.includes(c.type as ConditionType)),
  };
  // Compared as values, not as text: the apiserver keeps a custom resource as JSON re-encoded from Go
  // maps (every object's keys sorted), so the status read back never has the key order of the one
  // built here; a textual comparison sent a (no-op) patch on every pass of every key.
  if (sameJson(next, { ...status, observedGeneration: status.observedGeneration, conditions: status.conditions })) return resource;
  // With the resourceVersion read, as every write here: the status describes that version, and a
  // write that cannot land on another one leaves exactly the version it reports (own-writes.ts). A
  // PUT of the status subresource at that version: the status as the merge patch of `next` would
  // leave it, without the apiserver's work of applying a patch. Unconditional: a merge patch with
  // no version, which an edit between the read and the write cannot refuse.
  const patched = unconditional
    ? await deps.kube.patchStatus(resource, next)
    : await deps.kube.replaceStatus(resource, mergePatched(status, next) as Record<string, unknown>);
  deps.ownWrites?.record(
    objectRef(patched.kind, patched.metadata.namespace, patched.metadata.name),
    resource.metadata.resourceVersion,
    patched.metadata.resourceVersion,
  );
  ctx.statusWritten = patched.metadata.resourceVersion;
  return patched;
}

/**
 * The status that records a key just made or adopted (create-protocol.ts step 5): it must land. Its
 * write carries the version read before the POST, and whoever may edit the resource may edit it in
 * that window (a label, the intent annotation put back or removed: hostile campaign seed 24, where
 * the conflict left the new key in the Secret only, and the next pass replaced it without revoking
 * it). So on a conflict the resource is read afresh and, when the uid and the record the key moves
 * on from are still the ones read, the record is written without the version precondition: status
 * is the operator's alone (tenants cannot write it) and this pass holds the key (the work queue),
 * so an unchanged record means no other pass decided about the key; the check replaces the
 * precondition, and a tenant who edits in a loop cannot make the write conflict again. A changed
 * record, or another uid, throws the conflict as before. The status keeps the generation the key was
 * issued for: a spec edited in the window is observed by the next pass.
 */
export async function writeKeyRecord(
  deps: KeyDeps,
  ctx: Pick<Context, 'resource' | 'statusWritten' | 'logger'> & { afresh?: boolean },
  conditions: ConditionUpdate[],
  fields: Record<string, unknown>,
): Promise<KeyResource> {
  const read = ctx.resource;
  try {
    return await writeStatus(deps, ctx, conditions, fields);
  } catch (error) {
    if (statusCode(error) !== 409) throw error;
    const fresh = await deps.kube.readResource(read.kind, read.metadata.namespace, read.metadata.name);
    if (fresh === undefined || fresh.metadata.uid !== read.metadata.uid || !sameJson(recordOf(fresh), recordOf(read))) throw error;
    ctx.logger.info({ keyId: fields.keyId }, 'the resource was edited since the intent; recording the key on it as read afresh');
    const again = {
      resource: { ...fresh, metadata: { ...fresh.metadata, generation: read.metadata.generation } } as KeyResource,
      statusWritten: ctx.statusWritten,
    };
    const written = await writeStatus(deps, again, conditions, fields, [], true);
    ctx.statusWritten = again.statusWritten;
    // Written over edits this pass did not see: nothing the pass read may be rested on (at-rest.ts).
    ctx.afresh = true;
    return written;
  }
}

/** What status records of keys: the key, its attempt, the retiring keys. */
function recordOf(resource: KeyResource): unknown[] {
  const status = resource.status ?? {};
  return [status.keyId, status.keyName, (status.retiringKeys ?? []).map((k) => k.keyId)];
}
