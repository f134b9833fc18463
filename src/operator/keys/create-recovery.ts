// Adoption and recovery of a create whose outcome is unknown (docs/design.md sections 3.1 and 3.2):
// the Secret already holds the attempt's key (adopt), or every key of the attempt's name is revoked
// and the create starts again (recover). Keys of this resource's attempts that nothing records, and
// replaced keys still live, are revoked here too; an unreadable intent is cleared.
import type { ReconcileResult } from '../runtime/workers.ts';
import { ANNOTATION_CREATE_PENDING, type KeyResource, type LostAttempt, type ReplacedKey } from '../resources/schema.ts';
import { deletingConditions, readyConditions, shownReason } from './status/conditions.ts';
import { MAX_REPLACED_KEYS } from './decision.ts';
import { recordedKeyId } from './decision-intent.ts';
import type { Decision, PendingAttempt } from './decision-types.ts';
import type { KeyPlatform } from './adapter.ts';
import { needsSlot } from './issuing/issuer-slots.ts';
import { attemptListFingerprint } from './observing/orphans.ts';
import { asPlatformFailure, failureReason, reportPlatformFailure } from './status/platform-failure.ts';
import { keyIssuer, keyOrganization, platformOf, type Context, type KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeKeyRecord, writeStatus } from './status/resource-writes.ts';
import { switchFields } from './rotation/rotation.ts';
import { immutableMode } from './secret/immutable-secret.ts';
import { deleteStaleSecret, secretHash } from './secret/secret-writer.ts';
import { revokeReplaced } from './create-record.ts';

/** status.lostAttempts without `names`: null (the field removed) when none is left, undefined when nothing changes. */
function lostAttemptsWithout(status: KeyResource['status'], names: readonly string[]): { lostAttempts: LostAttempt[] | null } | undefined {
  const kept = (status?.lostAttempts ?? []).filter((l) => !names.includes(l.keyName));
  if (kept.length === (status?.lostAttempts ?? []).length) return undefined;
  return { lostAttempts: kept.length > 0 ? kept : null };
}

/**
 * With keys this pass's credentials found (their list showed them) going to status.replacedKeys:
 * status.credentialsFingerprint names those credentials when status names none yet (no key was
 * ever recorded). Else a personal key's NOT_FOUND from other credentials put in the Secret later
 * would drop it from the list while it is live (observe.ts credentialsChanged; the hostile campaign,
 * seed 24: a key made with another person's key, then the tenant's own put back).
 */
function finderFingerprint(ctx: Pick<Context, 'resource' | 'fingerprint'>): { credentialsFingerprint?: string } {
  return ctx.resource.status?.credentialsFingerprint === undefined && ctx.fingerprint !== undefined ? { credentialsFingerprint: ctx.fingerprint } : {};
}

/** Keys made this long before their intent are not the intent's (clocks differ). */
const RECOVERY_CLOCK_MARGIN_MS = 5 * 60_000;

/** The Secret holds the key of the pending attempt: record it (and revoke what it replaces). */
export async function adopt(deps: KeyDeps, ctx: Context, keyId: number, pending: PendingAttempt): Promise<ReconcileResult> {
  const { resource, secret, secretKey } = ctx;
  const encoded = secret?.data?.[secretKey];
  const value = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
  // A rotation's replaced key moves to status.retiringKeys, idempotently (rotation.ts).
  const replaced = await revokeReplaced(
    deps,
    ctx,
    () => platformOf(deps, ctx).platform,
    pending.replaces !== undefined && pending.replaces !== keyId && pending.rotation === undefined ? pending.replaces : undefined,
    resource.status,
    keyId,
  );
  const switched = switchFields(ctx, pending, keyId, deps.now());
  const current = await writeKeyRecord(
    deps,
    ctx,
    ctx.observation.deleting
      ? deletingConditions('Deleting', 'adopted the pending key before deleting')
      : [...readyConditions(keyId, ctx.secretName), ...switched.conditions],
    {
      ...switched.fields,
      keyId,
      keyName: pending.attempt,
      createdAt: resource.status?.keyId === keyId && resource.status.createdAt !== undefined ? resource.status.createdAt : pending.startedAt,
      secretName: ctx.secretName,
      ...(value !== '' ? { secretHash: secretHash(resource, value) } : {}),
      ...keyOrganization(ctx),
      ...keyIssuer(pending, resource.status),
      ...(ctx.fingerprint !== undefined ? { credentialsFingerprint: ctx.fingerprint } : {}),
      ...replaced,
    },
  );
  if (pending.rotation === undefined && immutableMode(ctx.spec)) await deleteStaleSecret(deps, ctx);
  await updateMetadata(deps, current, (m) => {
    delete m.annotations?.[ANNOTATION_CREATE_PENDING];
  });
  await deps.events.record(
    resource,
    'Normal',
    'KeyAdopted',
    `recorded key ${keyId} (${pending.attempt}) found in Secret ${ctx.secretName} after an interrupted create`,
  );
  return { type: 'Continue' };
}

/**
 * The outcome of the attempt is unknown: revoke every live key of that name (and of the names in
 * status.lostAttempts), clear the intent. A key the platform does not revoke now joins
 * status.replacedKeys, while it has room, and the create starts again without waiting for the
 * outage to end; revoked from there on a later pass (revokeReplacedKeys) or with the resource.
 */
export async function recover(deps: KeyDeps, ctx: Context, pending: PendingAttempt): Promise<ReconcileResult> {
  const { resource, adapter, logger } = ctx;
  if (adapter === undefined) throw new Error('recover without a spec');
  const { platform, credentialsId } = platformOf(deps, ctx);
  let keys;
  try {
    keys = await adapter.list(platform);
  } catch (error) {
    return reportPlatformFailure(deps, ctx, asPlatformFailure(error), `recovering attempt ${pending.attempt}`, error);
  }
  const listedAt = deps.now();
  const lost = resource.status?.lostAttempts ?? [];
  // The attempt's name is random and signed for this resource, so only its own keys carry it;
  // and none made well before the intent (clocks differ: a margin of RECOVERY_CLOCK_MARGIN_MS).
  // The same for each lost attempt, from when it was sent.
  const notBefore = new Map<string, number>([
    ...lost.map((l): [string, number] => [l.keyName, Date.parse(l.since) - RECOVERY_CLOCK_MARGIN_MS]),
    [pending.attempt, Date.parse(pending.startedAt) - RECOVERY_CLOCK_MARGIN_MS],
  ]);
  // Never the recorded key (status wrote this attempt's key before the Secret was lost: it is
  // replaced as a missing Secret's key is, new key first), nor a key retiring after a rotation
  // (status.retiringKeys: its retirement revokes it, once its consumers moved).
  const recorded = recordedKeyId(ctx.observation);
  const retiring = [...(ctx.observation.retiringKeyIds ?? []), ...(ctx.observation.replacedKeyIds ?? [])];
  const orphans: { id: number; name: string }[] = keys.filter(
    (k) =>
      notBefore.has(k.name) &&
      k.id !== recorded &&
      !retiring.includes(k.id) &&
      (k.created_at === undefined || !(Date.parse(k.created_at) < (notBefore.get(k.name) ?? 0))),
  );
  // The key this attempt was replacing: once status records another key (step 5 ran before the
  // interruption, then the Secret was lost), only this intent remembers it, and clearing the
  // intent would leave it live and unrecorded. It was being replaced anyway: revoke it too.
  if (
    pending.replaces !== undefined &&
    pending.replaces !== recorded &&
    !retiring.includes(pending.replaces) &&
    !orphans.some((k) => k.id === pending.replaces)
  ) {
    orphans.push({ id: pending.replaces, name: `(replaced key ${pending.replaces})` });
  }
  const refused: { id: number; name: string; failure: ReturnType<typeof asPlatformFailure>; error: unknown }[] = [];
  for (const orphan of orphans) {
    try {
      await adapter.revoke(platform, orphan.id);
    } catch (error) {
      const failure = asPlatformFailure(error);
      if (failure?.code !== 'NOT_FOUND') refused.push({ ...orphan, failure, error });
    }
  }
  const revoked = orphans.filter((o) => !refused.some((r) => r.id === o.id));
  deps.drift.revokedTagged(
    credentialsId,
    adapter.listScope,
    revoked.map((o) => o.id),
  );
  // Not revoked now: recorded in status.replacedKeys if the bound leaves room for all of them, else as before: report, back off.
  const held = resource.status?.replacedKeys ?? [];
  const added = refused.filter((r) => !held.some((k) => k.keyId === r.id));
  const first = refused[0];
  if (first !== undefined && held.length + added.length > MAX_REPLACED_KEYS) {
    return reportPlatformFailure(deps, ctx, first.failure, `revoking orphaned key ${first.id}`, first.error);
  }
  const since = new Date(listedAt).toISOString();
  const replacedKeys =
    added.length > 0 ? [...held, ...added.map((r): ReplacedKey => ({ keyId: r.id, ...(notBefore.has(r.name) ? { keyName: r.name } : {}), since }))] : undefined;
  // A lost attempt leaves status.lostAttempts once its key is revoked or recorded in replacedKeys, or
  // once this list (of the credentials that sent it, taken --pending-grace after it) shows none.
  const fingerprint = attemptListFingerprint(deps.signer, ctx.fingerprint, adapter.listScope);
  const settled = lost
    .filter(
      (l) =>
        orphans.some((o) => o.name === l.keyName) ||
        (l.credentialsFingerprint !== undefined && l.credentialsFingerprint === fingerprint && listedAt >= Date.parse(l.since) + deps.pendingGraceMs),
    )
    .map((l) => l.keyName);
  const dropped = lostAttemptsWithout(resource.status, settled);
  let current = resource;
  if (replacedKeys !== undefined || dropped !== undefined) {
    current = await writeKeyRecord(deps, ctx, [], { ...(replacedKeys !== undefined ? { replacedKeys, ...finderFingerprint(ctx) } : {}), ...dropped });
  }
  logger.info({ attempt: pending.attempt, revoked: revoked.map((k) => k.id), recorded: added.map((k) => k.id) }, 'recovered interrupted create');
  // A key under an issuer's cap: its slot stays its own for the create that starts again (issuer-slots.ts).
  const issuer = ctx.source?.issuer;
  if (issuer?.cap !== undefined && needsSlot(ctx.observation.status.keyId, resource.status?.issuer, issuer.name))
    deps.slots?.keep(issuer.name, resource.metadata.namespace, `${resource.kind}/${resource.metadata.namespace}/${resource.metadata.name}`);
  await updateMetadata(deps, current, (m) => {
    delete m.annotations?.[ANNOTATION_CREATE_PENDING];
  });
  if (first !== undefined) {
    await deps.events.record(
      resource,
      'Warning',
      failureReason(first.failure, `revoking key ${first.id}`).reason,
      `could not revoke key(s) ${refused.map((r) => r.id).join(', ')} of interrupted attempt ${pending.attempt} (${first.failure?.code ?? 'no answer'}); ` +
        'recorded in status.replacedKeys, revoked on a later pass or with the resource; starting again',
    );
  }
  await deps.events.record(
    resource,
    'Warning',
    'CreateRecovered',
    orphans.length === 0
      ? `attempt ${pending.attempt} left no key on the platform; starting again`
      : `revoked ${revoked.length} key(s) of interrupted attempt ${pending.attempt} (ids ${revoked.map((k) => k.id).join(', ') || 'none'}), whose secret was lost` +
          `${revoked.some((k) => k.id === pending.replaces) ? ` (with key ${pending.replaces}, which it was replacing)` : ''}; starting again`,
  );
  return { type: 'Continue' };
}

/**
 * status.replacedKeys with the orphans not revoked added, in the room the bound leaves: a key
 * recorded there already is never pushed out for one, which its tag finds again while unrecorded.
 */
function orphansRecorded(status: KeyResource['status'], keyIds: readonly number[], since: string): { replacedKeys: ReplacedKey[]; added: number[] } {
  const kept = status?.replacedKeys ?? [];
  const added = keyIds.filter((id) => !kept.some((k) => k.keyId === id)).slice(0, Math.max(0, MAX_REPLACED_KEYS - kept.length));
  return { replacedKeys: [...kept, ...added.map((keyId) => ({ keyId, since }))], added };
}

/**
 * Keys of this resource's attempts that nothing records (their intent was stripped or replaced
 * before its create was resolved): revoked, as recovery would have (docs/design.md section 3.1).
 * Never in a Secret. Those the platform does not revoke now join status.replacedKeys in this pass,
 * revoked from there on a later pass (revokeReplacedKeys) or with the resource: found with the
 * credentials of this pass, which are the ones status names (decide() asks for them). Being
 * deleted, status does not change: the resource stays until they are revoked.
 */
export async function revokeOrphans(
  deps: KeyDeps,
  ctx: Context,
  keyIds: readonly number[],
  lost: readonly { keyId: number; keyName: string }[] = [],
  noKey: readonly string[] = [],
): Promise<ReconcileResult> {
  const { adapter, resource, logger } = ctx;
  if (adapter === undefined) throw new Error('revoke without a spec');
  const { platform, credentialsId } = platformOf(deps, ctx);
  const { revoked, gone, failed } = await revokeEach(adapter, platform, keyIds, true);
  // status.lostAttempts: the names known to have left no key, and those whose key is gone or recorded by id now.
  const settledNames = (recordedIds: readonly number[]): string[] => [
    ...noKey,
    ...lost.filter((k) => gone.includes(k.keyId) || recordedIds.includes(k.keyId)).map((k) => k.keyName),
  ];
  if (failed !== undefined) {
    if (revoked.length > 0) deps.drift.revokedTagged(credentialsId, adapter.listScope, revoked);
    const unrevoked = keyIds.filter((id) => !gone.includes(id));
    // Being deleted, the resource stays until they are revoked, and every pass finds them again at any age.
    const recorded = ctx.observation.deleting
      ? { replacedKeys: [], added: [] }
      : orphansRecorded(resource.status, unrevoked, new Date(deps.now()).toISOString());
    const inReplaced = recorded.replacedKeys.map((k) => k.keyId);
    const dropped = ctx.observation.deleting ? undefined : lostAttemptsWithout(resource.status, settledNames(inReplaced));
    if (recorded.added.length > 0 || dropped !== undefined) {
      await writeStatus(deps, ctx, [], {
        ...(recorded.added.length > 0 ? { replacedKeys: recorded.replacedKeys, ...finderFingerprint(ctx) } : {}),
        ...dropped,
      });
    }
    logger.warn({ keyId: failed.keyId, code: failed.failure?.code, recorded: recorded.added }, 'a key of an interrupted create is still not revoked');
    await deps.events.record(
      resource,
      'Warning',
      failureReason(failed.failure, `revoking key ${failed.keyId}`).reason,
      `could not revoke key(s) ${unrevoked.join(', ')} of an interrupted create whose intent is gone (${failed.failure?.code ?? 'no answer'}); ` +
        (recorded.added.length > 0 ? `recorded in status.replacedKeys (${recorded.added.join(', ')}), ` : '') +
        'revoked on a later pass, or with the resource',
    );
    return backoffAfter(failed.failure);
  }
  deps.drift.revokedTagged(credentialsId, adapter.listScope, keyIds);
  const dropped = ctx.observation.deleting ? undefined : lostAttemptsWithout(resource.status, settledNames([]));
  if (dropped !== undefined) await writeStatus(deps, ctx, [], dropped);
  logger.info({ revoked, settled: dropped !== undefined ? settledNames([]) : [] }, 'revoked keys of an interrupted create whose intent was gone');
  if (revoked.length > 0) {
    await deps.events.record(
      resource,
      'Warning',
      'CreateRecovered',
      `revoked key(s) ${revoked.join(', ')}, made by an interrupted create of this resource whose intent annotation was removed or replaced; recorded nowhere, or by name only (status.lostAttempts)`,
    );
  }
  return { type: 'Continue' };
}

/**
 * A pass with status.replacedKeys: each is revoked (NOT_FOUND: gone already) and dropped from status;
 * what the platform still refuses stays, for the next pass.
 */
export async function revokeReplacedKeys(deps: KeyDeps, ctx: Context, keyIds: readonly number[]): Promise<ReconcileResult> {
  const { adapter, resource } = ctx;
  if (adapter === undefined) throw new Error('revoke without a spec');
  const { platform, credentialsId } = platformOf(deps, ctx);
  const { gone, failed } = await revokeEach(adapter, platform, keyIds, ctx.observation.credentialsChanged !== true);
  if (gone.length > 0) {
    // An interrupted create's key recorded here leaves the list of tagged keys too (orphanKeys).
    deps.drift.revokedTagged(credentialsId, adapter.listScope, gone);
    const left = (resource.status?.replacedKeys ?? []).filter((k) => !gone.includes(k.keyId));
    await writeStatus(deps, ctx, [], { replacedKeys: left.length > 0 ? left : null });
    await deps.events.record(resource, 'Normal', 'KeyRevoked', `revoked replaced key(s) ${gone.join(', ')}`);
  }
  if (failed === undefined) return { type: 'Continue' };
  ctx.logger.warn({ keyId: failed.keyId, code: failed.failure?.code }, 'a replaced key is still not revoked');
  return backoffAfter(failed.failure);
}

/**
 * Revokes each key: `revoked` the platform revoked now, `gone` those and the ones it no longer has
 * (NOT_FOUND, when `trustNotFound`: credentials that issued them), `failed` the first it refused.
 */
async function revokeEach(
  adapter: NonNullable<Context['adapter']>,
  platform: KeyPlatform,
  keyIds: readonly number[],
  trustNotFound: boolean,
): Promise<{ revoked: number[]; gone: number[]; failed?: { keyId: number; failure: ReturnType<typeof asPlatformFailure> } }> {
  const revoked: number[] = [];
  const gone: number[] = [];
  let failed: { keyId: number; failure: ReturnType<typeof asPlatformFailure> } | undefined;
  for (const keyId of keyIds) {
    try {
      await adapter.revoke(platform, keyId);
      revoked.push(keyId);
      gone.push(keyId);
    } catch (error) {
      const failure = asPlatformFailure(error);
      if (failure?.code === 'NOT_FOUND' && trustNotFound) gone.push(keyId);
      else failed ??= { keyId, failure };
    }
  }
  return { revoked, gone, ...(failed !== undefined ? { failed } : {}) };
}

function backoffAfter(failure: ReturnType<typeof asPlatformFailure>): ReconcileResult {
  return { type: 'Backoff', ...(failure?.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
}

/** The intent annotation is unreadable or not signed for this resource: cleared, nothing revoked. */
export async function clearPending(deps: KeyDeps, ctx: Context, decision: Decision): Promise<ReconcileResult> {
  await deps.events.record(ctx.resource, 'Warning', shownReason(decision.reason), decision.message);
  await updateMetadata(deps, ctx.resource, (m) => {
    delete m.annotations?.[ANNOTATION_CREATE_PENDING];
  });
  return { type: 'Continue' };
}
