// The crash-safe create protocol (docs/design.md sections 3.1 and 3.2): the intent before the POST, the Secret
// before the status, and for an intent whose outcome is unknown, adoption (the Secret already
// holds the attempt's key) or recovery (revoke every key of the attempt's name, start again).
// Intents are signed for the resource's uid (create-intent.ts); the platform's answer is checked
// (created-key.ts); a POST is never retried blindly (docs/security.md).
import type { ReconcileResult } from '../runtime/controller.ts';
import {
  ANNOTATION_ABANDON_KEY,
  ANNOTATION_CREATE_PENDING,
  FINALIZER,
  MAX_LOST_ATTEMPTS,
  type KeyResource,
  type LostAttempt,
  type ReplacedKey,
} from '../resources/schema.ts';
import { deletingConditions, readyConditions, rotatingCondition, shownReason, type BlockedInputs } from './status/conditions.ts';
import { attemptName, defaultKeyName, encodeIntent } from './issuing/create-intent.ts';
import type { KeyPlatform } from './adapter.ts';
import { checkCreatedKey } from './issuing/created-key.ts';
import { capRefusal } from './issuing/credentials-source.ts';
import { keepCredentials } from './issuing/credentials-in-use.ts';
import { wrongCredentialsKind, type KeyKind } from './issuing/credentials-kind.ts';
import { MAX_REPLACED_KEYS, recordedKeyId, type Decision, type PendingAttempt } from './decision.ts';
import { attemptListFingerprint } from './observing/orphans.ts';
import { asPlatformFailure, failureReason, reportPlatformFailure } from './status/platform-failure.ts';
import { blockedInputs, keyIssuer, keyOrganization, platformOf, type Context, type KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeKeyRecord, writeStatus } from './status/resource-writes.ts';
import { switchFields } from './rotation/rotation.ts';
import { nextLook, rotationFields } from './rotation-schedule.ts';
import { immutableMode } from './secret/immutable-secret.ts';
import { deleteStaleSecret, SecretConflictError, secretHash, writeSecret } from './secret/secret-writer.ts';
import { usageConditions } from './observing/usage.ts';
import { mirrorOperationsOfNewKey } from './observing/in-sync.ts';

/** status.lostAttempts with `entry` added; decide() starts no create while the list is full, so the bound holds. */
function lostAttemptsWith(status: KeyResource['status'], entry: LostAttempt): LostAttempt[] {
  return [...(status?.lostAttempts ?? []).filter((l) => l.keyName !== entry.keyName), entry].slice(-MAX_LOST_ATTEMPTS);
}

/** status.lostAttempts without `names`: null (the field removed) when none is left, undefined when nothing changes. */
function lostAttemptsWithout(status: KeyResource['status'], names: readonly string[]): { lostAttempts: LostAttempt[] | null } | undefined {
  const kept = (status?.lostAttempts ?? []).filter((l) => !names.includes(l.keyName));
  if (kept.length === (status?.lostAttempts ?? []).length) return undefined;
  return { lostAttempts: kept.length > 0 ? kept : null };
}

/** Which credentials and list sent an attempt: only their list saying it has no key of its name drops it (orphans.ts lostAttemptKeys). */
function credentialsOfAttempt(deps: KeyDeps, ctx: Context, listScope: string): { credentialsFingerprint?: string } {
  const fingerprint = attemptListFingerprint(deps.signer, ctx.fingerprint, listScope);
  return fingerprint !== undefined ? { credentialsFingerprint: fingerprint } : {};
}

/** Keys made this long before their intent are not the intent's (clocks differ). */
const RECOVERY_CLOCK_MARGIN_MS = 5 * 60_000;

/**
 * A resource whose finalizer was to come with the intent (`addFinalizer`) gets it before a refusal
 * is reported instead: it is then as it was when the finalizer came first, on its own.
 */
async function withFinalizer(deps: KeyDeps, ctx: Context, addFinalizer: boolean): Promise<Context> {
  if (!addFinalizer) return ctx;
  return {
    ...ctx,
    resource: await updateMetadata(deps, ctx.resource, (m) => {
      m.finalizers = [...(m.finalizers ?? []), FINALIZER];
    }),
  };
}

async function checkCredentialsKind(
  deps: KeyDeps,
  ctx: Context,
  blocked: BlockedInputs,
  platform: KeyPlatform,
  credentialsId: string,
  addFinalizer: boolean,
): Promise<ReconcileResult | undefined> {
  const { adapter } = ctx;
  let auth;
  try {
    auth = await deps.credentialsKinds.of(credentialsId, () => platform.getAuth());
  } catch (error) {
    const failure = asPlatformFailure(error);
    if (failure?.code === 'UNAUTHORIZED' || failure?.code === 'FORBIDDEN')
      return reportPlatformFailure(deps, await withFinalizer(deps, ctx, addFinalizer), failure, 'checking the credentials');
    // Not known: the create itself says what is wrong, if anything.
    ctx.logger.debug({ code: failure?.code }, 'GET /auth failed; creating without the credentials check');
    return undefined;
  }
  const kind: KeyKind = adapter?.project !== undefined ? 'Project' : adapter?.listScope === 'personal' ? 'Personal' : 'Organization';
  const message = wrongCredentialsKind(kind, auth);
  if (message === undefined) return undefined;
  const reported = await withFinalizer(deps, ctx, addFinalizer);
  await writeStatus(deps, reported, { blocked, reason: 'CredentialsWrongKind', message, hint: 'KeyIssued' });
  await deps.events.record(reported.resource, 'Warning', 'CredentialsWrongKind', message);
  // The credentials Secret is not watched: looked at again with backoff, as other refusals are.
  return { type: 'Backoff' };
}

/**
 * Step 2 to 5 of docs/design.md section 3.1. `addFinalizer`: a new resource's finalizer (step 1) goes in
 * the same metadata update as the intent (reconciler.ts): one write, and the finalizer is still on
 * the resource before the POST, so step 1 precedes step 3 as before.
 */
export async function create(
  deps: KeyDeps,
  ctx: Context,
  decision: Decision,
  replaces: number | undefined,
  rotation?: { request?: string },
  addFinalizer = false,
): Promise<ReconcileResult> {
  if (ctx.adapter === undefined || ctx.spec === undefined) throw new Error('create without a spec');
  // A first key through an issuer whose rule caps the namespace: its slot is taken now, before any
  // platform request, and kept from the intent on (issuing/issuer-slots.ts).
  const slot = keySlot(deps, ctx);
  // What a refusal's conditions keep of what this pass read (status/conditions.ts blockedConditions).
  const blocked = blockedInputs(ctx);
  if (slot === 'refused') return capReached(deps, ctx, blocked);
  try {
    const { platform, credentialsId } = platformOf(deps, ctx);
    // The wrong kind of credentials is said before anything is created (credentials-kind.ts).
    const wrongKind = await checkCredentialsKind(deps, ctx, blocked, platform, credentialsId, addFinalizer);
    if (wrongKind !== undefined) {
      slot?.unclaim();
      return wrongKind;
    }
    return await createClaimed(deps, ctx, blocked, decision, platform, credentialsId, replaces, rotation, addFinalizer, slot);
  } catch (error) {
    // Not written: a conflict, the apiserver; the slot is free again (the intent, once written, holds it).
    if (slot !== undefined && !slot.written) slot.unclaim();
    throw error;
  }
}

interface Slot {
  /** The intent holding it was written. */
  written: boolean;
  unclaim(): void;
}

/**
 * The slot of a key made under an issuer's cap: undefined when none is needed (no cap; it replaces a
 * key made through the same issuer, whose slot it keeps), 'refused' when none is free.
 */
function keySlot(deps: KeyDeps, ctx: Context): Slot | 'refused' | undefined {
  const issuer = ctx.source?.issuer;
  const { slots } = deps;
  if (slots === undefined || issuer?.cap === undefined || !needsSlot(ctx, issuer.name)) return undefined;
  const { namespace, name } = ctx.resource.metadata;
  const key = `${ctx.resource.kind}/${namespace}/${name}`;
  if (!slots.claim(issuer.name, namespace, key, issuer.cap)) return 'refused';
  return { written: false, unclaim: () => slots.unclaim(key) };
}

/** Whether a key made through `issuer` takes a slot: a first key, or one replacing a key made elsewhere (status.issuer). */
function needsSlot(ctx: Pick<Context, 'resource' | 'observation'>, issuer: string): boolean {
  return ctx.observation.status.keyId === undefined || ctx.resource.status?.issuer !== issuer;
}

/** The namespace's slots were all taken while this key waited for its turn: said as observe() would have. */
async function capReached(deps: KeyDeps, ctx: Context, blocked: BlockedInputs): Promise<ReconcileResult> {
  const issuer = ctx.source?.issuer;
  const { reason, message } = capRefusal(issuer?.name ?? '', ctx.resource.metadata.namespace, issuer?.cap ?? 0);
  await writeStatus(deps, ctx, { blocked, reason, message });
  await deps.events.record(ctx.resource, 'Warning', reason, message);
  return { type: 'Done', requeueAfterMs: deps.driftIntervalMs };
}

async function createClaimed(
  deps: KeyDeps,
  ctx: Context,
  blocked: BlockedInputs,
  decision: Decision,
  platform: KeyPlatform,
  credentialsId: string,
  replaces: number | undefined,
  rotation: { request?: string } | undefined,
  addFinalizer: boolean,
  slot: Slot | undefined,
): Promise<ReconcileResult> {
  const { resource, adapter, logger } = ctx;
  if (adapter === undefined || ctx.spec === undefined) throw new Error('create without a spec');
  if (rotation !== undefined) {
    await deps.events.record(resource, 'Normal', 'RotationStarted', decision.message);
    logger.info({ replaces }, 'rotating key');
  } else if (decision.reason !== 'Creating') {
    // Drift: say what was found before repairing it.
    await deps.events.record(resource, 'Warning', shownReason(decision.reason), decision.message);
    logger.info({ reason: decision.reason, replaces }, 'repairing drift');
  }
  const pending: PendingAttempt = {
    attempt: attemptName(ctx.spec.keyName ?? defaultKeyName(resource), deps.signer.attemptTag(resource.metadata.uid), deps.signer.cluster),
    startedAt: new Date(deps.now()).toISOString(),
    holder: deps.identity,
    ...(replaces !== undefined ? { replaces } : {}),
    // Signed with the intent: only the operator's own rotation keeps a replaced key live.
    ...(rotation !== undefined && replaces !== undefined ? { rotation } : {}),
    // KeyAbandoned: the given-up key, so the intent fits the record it moves on from (decision.ts consistentIntent).
    ...(decision.action.type === 'Create' && decision.action.abandons !== undefined ? { abandons: decision.action.abandons } : {}),
    ...(ctx.source?.issuer !== undefined ? { issuer: ctx.source.issuer.name } : {}),
  };
  // The namespace's credentials are kept while this key may live: before anything is minted with
  // them, so before the POST, written beside the intent (two apiserver writes at once, not in a row).
  // Its failure is held as a value from the start: a rejection nobody awaits yet (the intent's write
  // is still under way) would otherwise be unhandled and end the process.
  const keptFailure: Promise<{ error: unknown } | undefined> =
    deps.credentialsUsers !== undefined
      ? keepCredentials(deps.kube, ctx.credentialsSecret, logger, deps.ownWrites).then(
          () => undefined,
          (error: unknown) => ({ error }),
        )
      : Promise.resolve(undefined);
  // The intent, with the resourceVersion we read: a conflict means someone else moved; never create then.
  let current = await updateMetadata(deps, resource, (m) => {
    if (addFinalizer && !(m.finalizers ?? []).includes(FINALIZER)) m.finalizers = [...(m.finalizers ?? []), FINALIZER];
    m.annotations = { ...m.annotations, [ANNOTATION_CREATE_PENDING]: encodeIntent(deps.signer, resource.metadata.uid, pending) };
    // Given up for the key it named; a later key is not given up by it.
    delete m.annotations[ANNOTATION_ABANDON_KEY];
  }).catch(async (error: unknown) => {
    await keptFailure;
    throw error;
  });
  const notKept = await keptFailure;
  if (notKept !== undefined) {
    // Not kept: no POST, and the intent is taken back (the slot with it); one left behind is recovered as any unfinished attempt.
    await updateMetadata(deps, current, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    }).catch(() => {
      if (slot !== undefined) slot.written = true;
    });
    throw notKept.error;
  }
  if (slot !== undefined) slot.written = true;
  logger.info({ attempt: pending.attempt }, 'creating key');
  if (ctx.record !== undefined) ctx.record.createSent = true;

  let created;
  try {
    created = await adapter.create(platform, pending.attempt);
    logger.debug({ keyId: created.id }, 'key created');
    // Watched from now on: revoked before any list shows it, it is repaired within one interval (drift.ts, issued()).
    deps.drift.issued(credentialsId, adapter, platform, created.id, `${resource.kind}/${resource.metadata.namespace}/${resource.metadata.name}`);
  } catch (error) {
    const failure = asPlatformFailure(error);
    if (failure === undefined || failure.disposition === 'ambiguous') {
      // The key may exist: leave the intent for recovery (never a blind retry of the POST).
      logger.warn({ attempt: pending.attempt, code: failure?.code }, 'create outcome unknown; recovering');
      // And in status, in this pass: the intent is the tenant's to strip or replace, status.lostAttempts
      // is not. One status write, on this path only.
      await writeKeyRecord(deps, { ...ctx, resource: current }, [], {
        lostAttempts: lostAttemptsWith(current.status, {
          keyName: pending.attempt,
          since: pending.startedAt,
          ...credentialsOfAttempt(deps, ctx, adapter.listScope),
        }),
      });
      await deps.events.record(
        resource,
        'Warning',
        'CreateOutcomeUnknown',
        `creating key ${pending.attempt} failed ambiguously (${failure?.code ?? 'error'}); recorded in status.lostAttempts, ` +
          'the operator will revoke any key of that name and try again',
      );
      return { type: 'Retry' };
    }
    // A definite refusal: no key was made. Clear the intent and report.
    current = await updateMetadata(deps, current, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    });
    return reportPlatformFailure(deps, { ...ctx, resource: current }, failure, 'issuing a key');
  }

  // The platform's answer is input too: a key that is not what was asked for (another name, scope
  // or project, or no key at all) is revoked at once and never written to the Secret.
  const mismatch = checkCreatedKey(created, { name: pending.attempt, ...(adapter.project !== undefined ? { projectId: adapter.project.projectId } : {}) });
  if (mismatch !== undefined) {
    logger.warn({ attempt: pending.attempt, keyId: created.id, mismatch }, 'created key does not match the request; revoking it');
    try {
      await adapter.revoke(platform, created.id);
    } catch (error) {
      // The intent stays: recovery revokes every key of the attempt's name.
      if (asPlatformFailure(error)?.code !== 'NOT_FOUND') throw error;
    }
    current = await updateMetadata(deps, current, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    });
    const message = `the platform answered the create of ${pending.attempt} with a key that does not match the request (${mismatch}); that key (${created.id}) was revoked`;
    await writeStatus(deps, { ...ctx, resource: current }, { blocked, reason: 'PlatformResponseInvalid', message, hint: 'KeyIssued' });
    await deps.events.record(resource, 'Warning', 'PlatformResponseInvalid', message);
    return { type: 'Backoff' };
  }

  // Step 4: the Secret at once; it is the durable record of the key (adoption reads it).
  // spec.secret.immutable: the key's own Secret, <name>-<key id>.
  let target: string;
  try {
    const to = {
      resource,
      spec: ctx.spec,
      secretName: ctx.secretName,
      dataKey: ctx.secretKey,
      existing: ctx.observation.secret?.owned === true ? ctx.secret : undefined,
    };
    target = await writeSecret(deps, to, { id: created.id, name: pending.attempt, secret: created.key, ...(replaces !== undefined ? { replaces } : {}) });
  } catch (error) {
    if (!(error instanceof SecretConflictError)) throw error;
    return await refuseForeignSecret(deps, { ...ctx, resource: current }, blocked, platform, created.id, error.secretName, pending.rotation !== undefined);
  }
  logger.debug({ keyId: created.id }, 'Secret written');
  const hash = secretHash(resource, created.key);
  // Step 5: what a repair replaces is revoked, then status, then the intent is cleared. A replaced
  // key the platform did not revoke joins status.replacedKeys in the record's patch, and a
  // rotation's joins status.retiringKeys (rotation.ts): it is in status before and after, never
  // only in the intent, which whoever may edit the resource can remove.
  // A new key (nothing replaced): status.keyName = the attempt fulfils the intent (decision.ts
  // fulfilledIntent), which stays on the resource instead of costing a write to clear it.
  const unrevoked = replaces !== undefined && pending.rotation === undefined ? await revokeReplaced(deps, ctx, replaces) : undefined;
  const switched = switchFields(ctx, pending, created.id, deps.now());
  const createdAt = created.created_at ?? new Date(deps.now()).toISOString();
  // Not a rotation: the schedule counts from this key (or the last rotation); a request made
  // before the first key existed is handled by issuing it.
  const schedule =
    pending.rotation === undefined
      ? rotationFields(ctx, replaces === undefined && ctx.rotation.request !== undefined ? { lastRequest: ctx.rotation.request } : {}, createdAt)
      : {};
  // A ProjectApiKey's operations in this same patch: its status is written once (in-sync.ts).
  const mirrored = await mirrorOperationsOfNewKey(deps, ctx, created.key);
  // Recorded even when the resource was edited since the intent (writeKeyRecord): the key exists.
  current = await writeKeyRecord(
    deps,
    { ...ctx, resource: current },
    [
      ...readyConditions(created.id, target),
      ...usageConditions(ctx.spec, undefined, createdAt, deps.now()),
      ...switched.conditions,
      ...(mirrored !== undefined ? [mirrored.condition] : []),
    ],
    {
      ...(mirrored !== undefined ? { operations: mirrored.operations } : {}),
      ...schedule,
      ...switched.fields,
      keyId: created.id,
      keyName: pending.attempt,
      createdAt,
      ...(created.created_by !== undefined ? { createdBy: created.created_by } : {}),
      secretName: target,
      secretHash: hash,
      ...keyOrganization(ctx),
      ...keyIssuer(pending, current.status),
      ...(ctx.fingerprint !== undefined ? { credentialsFingerprint: ctx.fingerprint } : {}),
      ...replacedFields(current.status, unrevoked, created.id),
    },
  );
  logger.debug({ keyId: created.id }, 'status written');
  if (replaces !== undefined)
    await updateMetadata(deps, current, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    });
  // spec.secret.immutable: a rotation's replaced Secret stays until its key is revoked (rotation.ts).
  if (pending.rotation === undefined || !immutableMode(ctx.spec)) await deleteStaleSecret(deps, ctx, target);
  await deps.events.record(
    resource,
    'Normal',
    'KeyIssued',
    `issued key ${created.id} (${pending.attempt}) into Secret ${target}` +
      (replaces === undefined ? '' : pending.rotation !== undefined ? `; key ${replaces} retires once its consumers moved` : `; revoked key ${replaces}`),
  );
  if (pending.rotation !== undefined) return { type: 'Continue' };
  const next = (current.status?.rotation?.nextRotationAt ?? undefined) !== undefined ? Date.parse(current.status!.rotation!.nextRotationAt!) : undefined;
  return { type: 'Done', requeueAfterMs: nextLook(deps, next) };
}

/** The Secret holds the key of the pending attempt: record it (and revoke what it replaces). */
export async function adopt(deps: KeyDeps, ctx: Context, keyId: number, pending: PendingAttempt): Promise<ReconcileResult> {
  const { resource, secret, secretKey } = ctx;
  const encoded = secret?.data?.[secretKey];
  const value = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
  // A rotation's replaced key moves to status.retiringKeys, idempotently (rotation.ts).
  const unrevoked =
    pending.replaces !== undefined && pending.replaces !== keyId && pending.rotation === undefined
      ? await revokeReplaced(deps, ctx, pending.replaces)
      : undefined;
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
      ...replacedFields(resource.status, unrevoked, keyId),
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
  const fingerprint = credentialsOfAttempt(deps, ctx, adapter.listScope).credentialsFingerprint;
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
    current = await writeKeyRecord(deps, ctx, [], { ...(replacedKeys !== undefined ? { replacedKeys } : {}), ...dropped });
  }
  logger.info({ attempt: pending.attempt, revoked: revoked.map((k) => k.id), recorded: added.map((k) => k.id) }, 'recovered interrupted create');
  // A key under an issuer's cap: its slot stays its own for the create that starts again (issuer-slots.ts).
  const issuer = ctx.source?.issuer;
  if (issuer?.cap !== undefined && needsSlot(ctx, issuer.name))
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
 * spec.secret.immutable: the new key's Secret name is taken by a Secret this resource does not own.
 * It is never adopted nor overwritten; the key just made is in no Secret, so it is revoked at once
 * (the intent stays until then: recovery revokes it should this fail), and SecretConflict is reported.
 */
async function refuseForeignSecret(
  deps: KeyDeps,
  ctx: Context,
  blocked: BlockedInputs,
  platform: KeyPlatform,
  keyId: number,
  secretName: string,
  rotating: boolean,
): Promise<ReconcileResult> {
  try {
    await ctx.adapter?.revoke(platform, keyId);
  } catch (error) {
    if (asPlatformFailure(error)?.code !== 'NOT_FOUND') throw error;
  }
  const current = await updateMetadata(deps, ctx.resource, (m) => {
    delete m.annotations?.[ANNOTATION_CREATE_PENDING];
  });
  const message =
    `Secret ${secretName}, where key ${keyId} was to go, exists and is not controlled by this resource (no controller owner reference with its uid); ` +
    `key ${keyId} was revoked. Delete that Secret; a new key is issued then`;
  ctx.logger.warn({ secretName, keyId }, 'the Secret name of a new key is taken; revoked the key');
  // A rotation's: the recorded key stays live and Ready, the rotation says what stopped it.
  await writeStatus(
    deps,
    { ...ctx, resource: current },
    rotating ? [rotatingCondition(false, 'SecretConflict', message)] : { blocked, reason: 'SecretConflict', message, hint: 'KeyIssued' },
  );
  await deps.events.record(ctx.resource, 'Warning', 'SecretConflict', message);
  return { type: 'Backoff' };
}

/**
 * Revokes the key an attempt replaced; one already gone is fine. A NOT_FOUND means gone only to
 * credentials that could see the key: decide() replaces a key, and finishes an interrupted
 * replacement, only with the credentials that issued it or ones whose list shows it
 * (credentialsCanRevoke in decision.ts; docs/security.md, hostile campaign seed 24).
 */
/**
 * Revokes the key a repair replaces: undefined once it is gone, else the key as status will record
 * it (status.replacedKeys), revoked again on a later pass (revokeReplacedKeys) or with the resource.
 */
async function revokeReplaced(deps: KeyDeps, ctx: Context, keyId: number): Promise<ReplacedKey | undefined> {
  const { adapter } = ctx;
  const status = ctx.resource.status;
  const unrevoked: ReplacedKey = {
    keyId,
    ...(status?.keyId === keyId && status.keyName !== undefined ? { keyName: status.keyName } : {}),
    since: new Date(deps.now()).toISOString(),
  };
  if (adapter === undefined) return unrevoked;
  try {
    await adapter.revoke(platformOf(deps, ctx).platform, keyId);
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

/** status.replacedKeys once a key is recorded: the unrevoked replaced key added, the new key never among them. */
function replacedFields(status: KeyResource['status'], unrevoked: ReplacedKey | undefined, newKeyId: number): { replacedKeys?: ReplacedKey[] | null } {
  const kept = (status?.replacedKeys ?? []).filter((k) => k.keyId !== newKeyId && k.keyId !== unrevoked?.keyId);
  const next = unrevoked !== undefined ? [...kept, unrevoked] : kept;
  if (next.length === (status?.replacedKeys ?? []).length && next.every((k, i) => k.keyId === status?.replacedKeys?.[i]?.keyId)) return {};
  return { replacedKeys: next.length > 0 ? next.slice(-MAX_REPLACED_KEYS) : null };
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
      await writeStatus(deps, ctx, [], { ...(recorded.added.length > 0 ? { replacedKeys: recorded.replacedKeys } : {}), ...dropped });
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
