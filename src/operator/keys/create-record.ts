// Step 5 of the crash-safe create (docs/design.md section 3.1): a key in its Secret is recorded in
// status, what it replaces revoked first. A replaced key the platform did not revoke joins
// status.replacedKeys in the record's patch, and a rotation's joins status.retiringKeys (rotation.ts):
// it is in status before and after, never only in the intent, which whoever may edit the resource
// can remove. Adoption (create-recovery.ts) records a key found in its Secret the same way.
import type { ReconcileResult } from '../runtime/workers.ts';
import { ANNOTATION_CREATE_PENDING, type KeyResource, type ReplacedKey } from '../resources/schema.ts';
import { readyConditions } from './status/conditions.ts';
import type { CreatedKey, KeyPlatform } from './adapter.ts';
import { MAX_REPLACED_KEYS } from './decision.ts';
import type { PendingAttempt } from './decision-types.ts';
import { asPlatformFailure, failureReason } from './status/platform-failure.ts';
import { keyIssuer, keyOrganization, type Context, type KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeKeyRecord } from './status/resource-writes.ts';
import { switchFields } from './rotation/rotation.ts';
import { nextLook, rotationFields } from './rotation-schedule.ts';
import { deleteStaleSecret, type WrittenSecret } from './secret/secret-writer.ts';
import { usageConditions } from './observing/usage.ts';
import { mirrorOperationsOfNewKey } from './observing/in-sync.ts';
import { verifiedAfterCreate } from './observing/at-rest.ts';

/**
 * status.replacedKeys once a key (`newKeyId`) is recorded over `status`: `keyId`, the key it replaces,
 * revoked first (none: undefined). One already gone is fine. One the platform did not revoke is
 * added, revoked again on a later pass (revokeReplacedKeys) or with the resource; the new key is
 * never among them. A NOT_FOUND means gone only to credentials that could see the key: decide()
 * replaces a key, and finishes an interrupted replacement, only with the credentials that issued it
 * or ones whose list shows it (credentialsCanRevoke in decision.ts; docs/security.md).
 */
export async function revokeReplaced(
  deps: KeyDeps,
  ctx: Pick<Context, 'adapter' | 'resource' | 'logger'>,
  platform: () => KeyPlatform,
  keyId: number | undefined,
  status: KeyResource['status'],
  newKeyId: number,
): Promise<{ replacedKeys?: ReplacedKey[] | null }> {
  const unrevoked = keyId !== undefined ? await revokeKey(deps, ctx, platform, keyId) : undefined;
  const kept = (status?.replacedKeys ?? []).filter((k) => k.keyId !== newKeyId && k.keyId !== unrevoked?.keyId);
  const next = unrevoked !== undefined ? [...kept, unrevoked] : kept;
  if (next.length === (status?.replacedKeys ?? []).length && next.every((k, i) => k.keyId === status?.replacedKeys?.[i]?.keyId)) return {};
  return { replacedKeys: next.length > 0 ? next.slice(-MAX_REPLACED_KEYS) : null };
}

/** Revokes the replaced key: undefined once it is gone, else the key as status will record it (status.replacedKeys). */
async function revokeKey(
  deps: KeyDeps,
  ctx: Pick<Context, 'adapter' | 'resource' | 'logger'>,
  platform: () => KeyPlatform,
  keyId: number,
): Promise<ReplacedKey | undefined> {
  const { adapter } = ctx;
  const status = ctx.resource.status;
  const unrevoked: ReplacedKey = {
    keyId,
    ...(status?.keyId === keyId && status.keyName !== undefined ? { keyName: status.keyName } : {}),
    since: new Date(deps.now()).toISOString(),
  };
  if (adapter === undefined) return unrevoked;
  try {
    await adapter.revoke(platform(), keyId);
    return undefined;
  } catch (error) {
    const failure = asPlatformFailure(error);
    if (failure?.code === 'NOT_FOUND') return undefined;
    ctx.logger.warn({ keyId, code: failure?.code }, 'the replaced key was not revoked; recorded in status.replacedKeys');
    await deps.events.record(
      ctx.resource,
      'Warning',
      failureReason(failure, `revoking replaced key ${keyId}`).reason,
      `could not revoke replaced key ${keyId} (${failure?.code ?? 'no answer'}); it stays in status.replacedKeys and is revoked on a later pass, or with the resource`,
    );
    return unrevoked;
  }
}

/** A key just made (`created`, for the attempt `pending`) and in its Secret (`secret`); `replaces`: the key it replaces. */
export interface NewKey {
  pending: PendingAttempt;
  created: CreatedKey;
  secret: WrittenSecret;
  replaces: number | undefined;
}

/**
 * The new key recorded: what a repair replaces is revoked, then status, then the intent is cleared.
 * A new key (nothing replaced): status.keyName = the attempt fulfils the intent (decision.ts
 * fulfilledIntent), which stays on the resource instead of costing a write to clear it. `current`:
 * the resource as the intent left it; `platform`: the credentials' client the key was made with.
 */
export async function recordNewKey(deps: KeyDeps, ctx: Context, current: KeyResource, platform: KeyPlatform, key: NewKey): Promise<ReconcileResult> {
  const { resource, logger } = ctx;
  const { pending, created, secret, replaces } = key;
  const rotating = pending.rotation !== undefined;
  const replaced = await revokeReplaced(deps, ctx, () => platform, replaces !== undefined && !rotating ? replaces : undefined, current.status, created.id);
  const place = { ...keyOrganization(ctx), ...keyIssuer(pending, current.status) };
  const switched = switchFields(ctx, pending, created.id, deps.now());
  const createdAt = created.created_at ?? new Date(deps.now()).toISOString();
  // Not a rotation: the schedule counts from this key (or the last rotation); a request made
  // before the first key existed is handled by issuing it.
  const schedule = !rotating
    ? rotationFields(ctx, replaces === undefined && ctx.rotation.request !== undefined ? { lastRequest: ctx.rotation.request } : {}, createdAt)
    : {};
  const usage = usageConditions(ctx.spec, undefined, createdAt, deps.now());
  // A ProjectApiKey's operations in this same patch: its status is written once (in-sync.ts).
  const mirrored = await mirrorOperationsOfNewKey(deps, ctx, created.key);
  const conditions = [...readyConditions(created.id, secret.name), ...usage, ...switched.conditions, ...(mirrored !== undefined ? [mirrored.condition] : [])];
  // Recorded even when the resource was edited since the intent (writeKeyRecord): the key exists.
  const target: Parameters<typeof writeKeyRecord>[1] = { ...ctx, resource: current };
  const recorded = await writeKeyRecord(deps, target, conditions, {
    ...(mirrored !== undefined ? { operations: mirrored.operations } : {}),
    ...schedule,
    ...switched.fields,
    keyId: created.id,
    keyName: pending.attempt,
    createdAt,
    ...(created.created_by !== undefined ? { createdBy: created.created_by } : {}),
    secretName: secret.name,
    secretHash: secret.hash,
    ...place,
    ...(ctx.fingerprint !== undefined ? { credentialsFingerprint: ctx.fingerprint } : {}),
    ...replaced,
  });
  logger.debug({ keyId: created.id }, 'status written');
  // A first key (nothing replaced, no rotation): the pass that would verify it next rests on what the create wrote instead.
  if (replaces === undefined && !rotating && target.afresh !== true && deps.rest !== undefined)
    ctx.restsAfterCreate = verifiedAfterCreate(deps, ctx, {
      recorded,
      writtenOver: current.metadata.resourceVersion,
      keyId: created.id,
      createdAt,
      secretName: secret.name,
      secret: secret.version,
      operations: mirrored?.snapshot,
    });
  if (replaces !== undefined)
    await updateMetadata(deps, recorded, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    });
  // spec.secret.immutable: a rotation's replaced Secret stays until its key is revoked (rotation.ts).
  if (!rotating || !secret.immutable) await deleteStaleSecret(deps, ctx, secret.name);
  await deps.events.record(
    resource,
    'Normal',
    'KeyIssued',
    `issued key ${created.id} (${pending.attempt}) into Secret ${secret.name}` +
      (replaces === undefined ? '' : rotating ? `; key ${replaces} retires once its consumers moved` : `; revoked key ${replaces}`),
  );
  if (rotating) return { type: 'Continue' };
  const nextAt = recorded.status?.rotation?.nextRotationAt ?? undefined;
  return { type: 'Done', requeueAfterMs: nextLook(deps, nextAt !== undefined ? Date.parse(nextAt) : undefined) };
}
