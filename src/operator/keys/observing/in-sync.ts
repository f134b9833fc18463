// A live key whose Secret holds it: Ready, with what drift found recorded (the credentials that
// can see it), and for a ProjectApiKey, the operations of its project mirrored into its status
// (docs/design.md section 4; operations-poller.ts polls them).
import type { ReconcileResult } from '../../runtime/workers.ts';
import { readyConditions, rotatingCondition, type ConditionUpdate } from '../status/conditions.ts';
import { nextLook, rotationFields } from '../rotation-schedule.ts';
import { keyOrganization, ownerOf, type Context, type KeyDeps } from '../reconcile-context.ts';
import { writeStatus } from '../status/resource-writes.ts';
import { secretValue } from '../secret/secret-writer.ts';
import { statusTimestamp, usageConditions, usageFields } from './usage.ts';

/**
 * Records the key as ready and mirrors its project's operations; `also`: what a step of a rotation
 * adds (rotation.ts), with when to look again.
 */
export async function inSync(
  deps: KeyDeps,
  ctx: Context,
  keyId: number,
  also?: { conditions: ConditionUpdate[]; fields: Record<string, unknown>; requeueAfterMs: number },
): Promise<ReconcileResult> {
  const status = ctx.resource.status ?? {};
  const extra: Record<string, unknown> = { keyId, secretName: ctx.secretName, ...rotationFields(ctx, {}), ...also?.fields };
  if (status.secretHash === undefined && ctx.observation.secret?.hash !== undefined) extra.secretHash = ctx.observation.secret.hash;
  // Only under the signature: status.keyName decides which intents fit the record (decision-intent.ts consistentIntent).
  const seen = ctx.observation.secret;
  if (status.keyName === undefined && seen?.verified === true && seen.keyId === keyId && seen.keyName !== undefined) extra.keyName = seen.keyName;
  // Seen live with these credentials: they can see (and revoke) it, so they are its credentials now.
  // (Found in their list, not merely too young to be missed from it.)
  if (ctx.fingerprint !== undefined && ctx.listed !== undefined && status.credentialsFingerprint !== ctx.fingerprint) {
    extra.credentialsFingerprint = ctx.fingerprint;
  }
  // Seen live in this organization's list: its organization, for a key recorded before status said it.
  if (status.organizationId === undefined && ctx.listed !== undefined) Object.assign(extra, keyOrganization(ctx));
  // The key's use, from the list the drift check made (usage.ts): written only when it moved by the
  // granularity; InUse from the fresh value.
  Object.assign(extra, usageFields(ctx.listed, status));
  const conditions = [
    ...readyConditions(keyId, ctx.secretName),
    ...usageConditions(ctx.spec, statusTimestamp(ctx.listed?.last_used_at) ?? status.lastUsedAt, status.createdAt, deps.now()),
    ...(also?.conditions ?? []),
  ];
  const scheduleError = ctx.rotation.schedule.error ?? ctx.rotation.graceError;
  if (scheduleError !== undefined && also === undefined) {
    conditions.push(rotatingCondition(false, 'InvalidSpec', scheduleError));
    await deps.events.record(ctx.resource, 'Warning', 'InvalidSpec', scheduleError);
  }
  const mirrored = mirrorOperations(deps, ctx, secretValue(ctx));
  if (mirrored !== undefined) {
    extra.operations = mirrored.operations;
    conditions.push(mirrored.condition);
  }
  // Without spec.usage.unusedAfter there is no InUse condition (one left from before goes).
  await writeStatus(deps, ctx, conditions, extra, ctx.spec?.usage?.unusedAfter === undefined ? ['InUse'] : []);
  // A scheduled rotation due before the next drift check is looked at when it is due.
  return { type: 'Done', requeueAfterMs: nextLook(deps, ctx.rotation.schedule.nextAt, also?.requeueAfterMs) };
}

/**
 * A ProjectApiKey's operations as its status mirrors them: its project's poller ensured with the
 * issued key, and the poller's snapshot as this resource sees it (undefined: not polled yet, or not
 * a ProjectApiKey). ONE poller per project (operations-poller.ts), listing with the issued keys of
 * the project: least privilege, and proof each key works. A key that fails degrades only its own
 * resource.
 */
export function mirrorOperations(
  deps: KeyDeps,
  ctx: Pick<Context, 'adapter' | 'resource'>,
  issued: string,
): { operations: unknown[]; condition: ConditionUpdate; snapshot: object } | undefined {
  const project = ctx.adapter?.project;
  if (project === undefined || issued === '' || deps.operations === undefined) return undefined;
  const owner = ownerOf(ctx.resource);
  deps.operations.pollers.ensure(project.projectId, owner, issued);
  const snapshot = deps.operations.pollers.snapshot(project.projectId, owner);
  return snapshot === undefined ? undefined : { operations: snapshot.operations, condition: { type: 'OperationsSettled', ...snapshot.settled }, snapshot };
}

/** How long a new ProjectApiKey's status write waits for the first poll of a project not polled yet. */
export const FIRST_POLL_WAIT_MS = 2_000;
const FIRST_POLL_LOOK_MS = 5;

/**
 * mirrorOperations for a key just issued, whose status is about to be written: a project polled
 * already has its snapshot at once (the new key is one more owner); the first key of a project
 * waits for the poll that ensure() starts at once, at most FIRST_POLL_WAIT_MS. Otherwise the
 * snapshot would come moments after the create's status write and cost a second status write of
 * every new key; should the poll take longer, that second write is what happens.
 */
export async function mirrorOperationsOfNewKey(
  deps: KeyDeps,
  ctx: Pick<Context, 'adapter' | 'resource'>,
  issued: string,
): Promise<ReturnType<typeof mirrorOperations>> {
  const first = mirrorOperations(deps, ctx, issued);
  const projectId = ctx.adapter?.project?.projectId;
  if (first !== undefined || projectId === undefined || deps.operations === undefined) return first;
  const owner = ownerOf(ctx.resource);
  const deadline = performance.now() + FIRST_POLL_WAIT_MS;
  while (performance.now() < deadline) {
    // The poller's own promise is not part of its interface (operations-poller.ts): its snapshot is looked at.
    await new Promise((resolve) => setTimeout(resolve, FIRST_POLL_LOOK_MS));
    const snapshot = deps.operations.pollers.snapshot(projectId, owner);
    if (snapshot !== undefined) return { operations: snapshot.operations, condition: { type: 'OperationsSettled', ...snapshot.settled }, snapshot };
  }
  return undefined;
}
