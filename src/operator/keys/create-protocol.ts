// The crash-safe create protocol (docs/design.md sections 3.1 and 3.2): the intent before the POST, the Secret
// before the status (create-record.ts); an intent whose outcome is unknown is adopted or recovered
// (create-recovery.ts). Intents are signed for the resource's uid (create-intent.ts); the platform's
// answer is checked (created-key.ts); a POST is never retried blindly (docs/security.md).
import type { ReconcileResult } from '../runtime/controller.ts';
import { ANNOTATION_ABANDON_KEY, ANNOTATION_CREATE_PENDING, FINALIZER, MAX_LOST_ATTEMPTS, type KeyResource, type LostAttempt } from '../resources/schema.ts';
import { rotatingCondition, shownReason, type BlockedInputs } from './status/conditions.ts';
import { attemptName, defaultKeyName, encodeIntent } from './issuing/create-intent.ts';
import type { CreatedKey, KeyPlatform } from './adapter.ts';
import { checkCreatedKey } from './issuing/created-key.ts';
import { capRefusal } from './issuing/credentials-source.ts';
import { keepCredentials } from './issuing/credentials-in-use.ts';
import { wrongCredentialsKind, type KeyKind } from './issuing/credentials-kind.ts';
import { needsSlot } from './issuing/issuer-slots.ts';
import type { Decision, PendingAttempt } from './decision.ts';
import { attemptListFingerprint } from './observing/orphans.ts';
import { asPlatformFailure, reportPlatformFailure } from './status/platform-failure.ts';
import { blockedInputs, platformOf, type Context, type KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeKeyRecord, writeStatus } from './status/resource-writes.ts';
import { SecretConflictError, writeSecret, type WrittenSecret } from './secret/secret-writer.ts';
import { recordNewKey } from './create-record.ts';

/** status.lostAttempts with `entry` added; decide() starts no create while the list is full, so the bound holds. */
function lostAttemptsWith(status: KeyResource['status'], entry: LostAttempt): LostAttempt[] {
  return [...(status?.lostAttempts ?? []).filter((l) => l.keyName !== entry.keyName), entry].slice(-MAX_LOST_ATTEMPTS);
}

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
  if (slots === undefined || issuer?.cap === undefined || !needsSlot(ctx.observation.status.keyId, ctx.resource.status?.issuer, issuer.name)) return undefined;
  const { namespace, name } = ctx.resource.metadata;
  const key = `${ctx.resource.kind}/${namespace}/${name}`;
  if (!slots.claim(issuer.name, namespace, key, issuer.cap)) return 'refused';
  return { written: false, unclaim: () => slots.unclaim(key) };
}

/** The namespace's slots were all taken while this key waited for its turn: said as observe() would have. */
async function capReached(deps: KeyDeps, ctx: Context, blocked: BlockedInputs): Promise<ReconcileResult> {
  const issuer = ctx.source?.issuer;
  const { reason, message } = capRefusal(issuer?.name ?? '', ctx.resource.metadata.namespace, issuer?.cap ?? 0);
  await writeStatus(deps, ctx, { blocked, reason, message });
  await deps.events.record(ctx.resource, 'Warning', reason, message);
  return { type: 'Done', requeueAfterMs: deps.driftIntervalMs };
}

/** The attempt a create starts: its name, signed with the intent (create-intent.ts), and what it replaces. */
function attemptOf(
  deps: KeyDeps,
  ctx: Pick<Context, 'resource' | 'source'>,
  keyName: string | undefined,
  decision: Decision,
  replaces: number | undefined,
  rotation: { request?: string } | undefined,
): PendingAttempt {
  const { resource } = ctx;
  return {
    attempt: attemptName(keyName ?? defaultKeyName(resource), deps.signer.attemptTag(resource.metadata.uid), deps.signer.cluster),
    startedAt: new Date(deps.now()).toISOString(),
    holder: deps.identity,
    ...(replaces !== undefined ? { replaces } : {}),
    // Signed with the intent: only the operator's own rotation keeps a replaced key live.
    ...(rotation !== undefined && replaces !== undefined ? { rotation } : {}),
    // KeyAbandoned: the given-up key, so the intent fits the record it moves on from (decision.ts consistentIntent).
    ...(decision.action.type === 'Create' && decision.action.abandons !== undefined ? { abandons: decision.action.abandons } : {}),
    ...(ctx.source?.issuer !== undefined ? { issuer: ctx.source.issuer.name } : {}),
  };
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
  const pending = attemptOf(deps, ctx, ctx.spec.keyName, decision, replaces, rotation);
  const intended = await writeIntent(deps, ctx, pending, addFinalizer, slot);
  logger.info({ attempt: pending.attempt }, 'creating key');
  if (ctx.record !== undefined) ctx.record.createSent = true;
  const posted = await post(deps, ctx, intended, blocked, platform, credentialsId, pending);
  if ('result' in posted) return posted.result;
  const { created, current } = posted;
  // Step 4: the Secret at once; it is the durable record of the key (adoption reads it).
  // spec.secret.immutable: the key's own Secret, <name>-<key id>.
  let secret: WrittenSecret;
  try {
    const to = {
      resource,
      spec: ctx.spec,
      secretName: ctx.secretName,
      dataKey: ctx.secretKey,
      existing: ctx.observation.secret?.owned === true ? ctx.secret : undefined,
    };
    secret = await writeSecret(deps, to, { id: created.id, name: pending.attempt, secret: created.key, ...(replaces !== undefined ? { replaces } : {}) });
  } catch (error) {
    if (!(error instanceof SecretConflictError)) throw error;
    return await refuseForeignSecret(deps, { ...ctx, resource: current }, blocked, platform, created.id, error.secretName, pending.rotation !== undefined);
  }
  logger.debug({ keyId: created.id }, 'Secret written');
  // Step 5 (create-record.ts).
  return await recordNewKey(deps, ctx, current, platform, { pending, created, secret, replaces });
}

/**
 * Step 2: the intent, with the resourceVersion we read (a conflict means someone else moved; never
 * create then), and the namespace's credentials kept while this key may live: before anything is
 * minted with them, so before the POST, written beside the intent (two apiserver writes at once,
 * not in a row). Returns the resource as the intent left it.
 */
async function writeIntent(
  deps: KeyDeps,
  ctx: Pick<Context, 'resource' | 'credentialsSecret' | 'logger'>,
  pending: PendingAttempt,
  addFinalizer: boolean,
  slot: Slot | undefined,
): Promise<KeyResource> {
  const { resource, logger } = ctx;
  // The kept credentials' failure is held as a value from the start: a rejection nobody awaits yet
  // (the intent's write is still under way) would otherwise be unhandled and end the process.
  const keptFailure: Promise<{ error: unknown } | undefined> =
    deps.credentialsUsers !== undefined
      ? keepCredentials(deps.kube, ctx.credentialsSecret, logger, deps.ownWrites).then(
          () => undefined,
          (error: unknown) => ({ error }),
        )
      : Promise.resolve(undefined);
  const intent = encodeIntent(deps.signer, resource.metadata.uid, pending);
  const current = await updateMetadata(deps, resource, (m) => {
    if (addFinalizer && !(m.finalizers ?? []).includes(FINALIZER)) m.finalizers = [...(m.finalizers ?? []), FINALIZER];
    m.annotations = { ...m.annotations, [ANNOTATION_CREATE_PENDING]: intent };
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
  return current;
}

/**
 * Step 3: the POST, and the platform's answer checked. An answer that may have made a key leaves the
 * intent for recovery (never a blind retry of the POST); a refusal, or a key that is not what was
 * asked for (revoked at once), clears it and is reported. `current`: the resource as the intent left it.
 */
async function post(
  deps: KeyDeps,
  ctx: Context,
  current: KeyResource,
  blocked: BlockedInputs,
  platform: KeyPlatform,
  credentialsId: string,
  pending: PendingAttempt,
): Promise<{ result: ReconcileResult } | { created: CreatedKey; current: KeyResource }> {
  const { resource, logger } = ctx;
  const adapter = ctx.adapter!;
  let created;
  try {
    created = await adapter.create(platform, pending.attempt);
    logger.debug({ keyId: created.id }, 'key created');
    // Watched from now on: revoked before any list shows it, it is repaired within one interval (drift.ts, issued()).
    deps.drift.issued(credentialsId, adapter, platform, created.id, `${resource.kind}/${resource.metadata.namespace}/${resource.metadata.name}`);
  } catch (error) {
    const failure = asPlatformFailure(error);
    if (failure === undefined || failure.disposition === 'ambiguous') {
      logger.warn({ attempt: pending.attempt, code: failure?.code }, 'create outcome unknown; recovering');
      // And in status, in this pass: the intent is the tenant's to strip or replace, status.lostAttempts
      // is not. One status write, on this path only.
      // Which credentials and list sent it: only their list saying it has no key of its name drops it (orphans.ts lostAttemptKeys).
      const sentBy = attemptListFingerprint(deps.signer, ctx.fingerprint, adapter.listScope);
      await writeKeyRecord(deps, { ...ctx, resource: current }, [], {
        lostAttempts: lostAttemptsWith(current.status, {
          keyName: pending.attempt,
          since: pending.startedAt,
          ...(sentBy !== undefined ? { credentialsFingerprint: sentBy } : {}),
        }),
      });
      await deps.events.record(
        resource,
        'Warning',
        'CreateOutcomeUnknown',
        `creating key ${pending.attempt} failed ambiguously (${failure?.code ?? 'error'}); recorded in status.lostAttempts, ` +
          'the operator will revoke any key of that name and try again',
      );
      return { result: { type: 'Retry' } };
    }
    // A definite refusal: no key was made. Clear the intent and report.
    const cleared = await updateMetadata(deps, current, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    });
    return { result: await reportPlatformFailure(deps, { ...ctx, resource: cleared }, failure, 'issuing a key') };
  }
  // The platform's answer is input too: a key that is not what was asked for (another name, scope
  // or project, or no key at all) is revoked at once and never written to the Secret.
  const mismatch = checkCreatedKey(created, { name: pending.attempt, ...(adapter.project !== undefined ? { projectId: adapter.project.projectId } : {}) });
  if (mismatch === undefined) return { created, current };
  logger.warn({ attempt: pending.attempt, keyId: created.id, mismatch }, 'created key does not match the request; revoking it');
  try {
    await adapter.revoke(platform, created.id);
  } catch (error) {
    // The intent stays: recovery revokes every key of the attempt's name.
    if (asPlatformFailure(error)?.code !== 'NOT_FOUND') throw error;
  }
  const cleared = await updateMetadata(deps, current, (m) => {
    delete m.annotations?.[ANNOTATION_CREATE_PENDING];
  });
  const message = `the platform answered the create of ${pending.attempt} with a key that does not match the request (${mismatch}); that key (${created.id}) was revoked`;
  await writeStatus(deps, { ...ctx, resource: cleared }, { blocked, reason: 'PlatformResponseInvalid', message, hint: 'KeyIssued' });
  await deps.events.record(resource, 'Warning', 'PlatformResponseInvalid', message);
  return { result: { type: 'Backoff' } };
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
