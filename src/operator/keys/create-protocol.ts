// The crash-safe create protocol (docs/design.md sections 3.1 and 3.2): what is refused before anything
// is created (create-checks.ts), the intent before the POST (create-post.ts), the Secret before the
// status (create-record.ts); an intent whose outcome is unknown is adopted or recovered
// (create-recovery.ts). Intents are signed for the resource's uid (create-intent.ts); the platform's
// answer is checked (created-key.ts); a POST is never retried blindly (docs/security.md).
import type { ReconcileResult } from '../runtime/workers.ts';
import { ANNOTATION_ABANDON_KEY, ANNOTATION_CREATE_PENDING, FINALIZER, type KeyResource } from '../resources/schema.ts';
import { rotatingCondition, shownReason, type BlockedInputs } from './status/conditions.ts';
import { attemptName, defaultKeyName, encodeIntent } from './issuing/create-intent.ts';
import type { KeyPlatform } from './adapter.ts';
import { keepCredentials } from './issuing/credentials-in-use.ts';
import { needsSlot } from './issuing/issuer-slots.ts';
import type { Decision, PendingAttempt } from './decision-types.ts';
import { asPlatformFailure } from './status/platform-failure.ts';
import type { Context, KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeStatus } from './status/resource-writes.ts';
import { SecretConflictError, writeSecret, type WrittenSecret } from './secret/secret-writer.ts';
import { recordNewKey } from './create-record.ts';
import { postAttempt } from './create-post.ts';
import { checkBeforeCreate } from './create-checks.ts';
import { statusCode } from './kube-writes.ts';

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
  try {
    // The cap, then the credentials' kind, said before anything is created (create-checks.ts).
    const checked = await checkBeforeCreate(deps, ctx, slot === 'refused', addFinalizer);
    if ('refused' in checked) {
      if (slot !== 'refused') slot?.unclaim();
      return checked.refused;
    }
    const { blocked, platform, credentialsId } = checked;
    return await createClaimed(deps, ctx, blocked, decision, platform, credentialsId, replaces, rotation, addFinalizer, slot === 'refused' ? undefined : slot);
  } catch (error) {
    // Not written: a conflict, the apiserver; the slot is free again (the intent, once written, holds it).
    if (slot !== undefined && slot !== 'refused' && !slot.written) slot.unclaim();
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

/** The create with its slot (if any) and credentials known: intent, POST, Secret, record; each step is given what it uses. */
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
  const posted = await postAttempt(deps, ctx, intended, blocked, platform, credentialsId, pending);
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
    // Its name is taken by a Secret this resource does not own (made after this pass looked, or an
    // immutable Secret's name): never adopted nor overwritten. The key just made is in no Secret, so it is revoked at once (the intent stays
    // until then: recovery revokes it should this fail), and SecretConflict is reported.
    const { secretName } = error;
    try {
      await adapter.revoke(platform, created.id);
    } catch (revokeError) {
      if (asPlatformFailure(revokeError)?.code !== 'NOT_FOUND') throw revokeError;
    }
    const cleared = await updateMetadata(deps, current, (m) => {
      delete m.annotations?.[ANNOTATION_CREATE_PENDING];
    });
    const message =
      `Secret ${secretName}, where key ${created.id} was to go, exists and is not controlled by this resource (no controller owner reference with its uid); ` +
      `key ${created.id} was revoked. Delete that Secret; a new key is issued then`;
    logger.warn({ secretName, keyId: created.id }, 'the Secret name of a new key is taken; revoked the key');
    // A rotation's: the recorded key stays live and Ready, the rotation says what stopped it.
    const conditions =
      pending.rotation !== undefined
        ? [rotatingCondition(false, 'SecretConflict', message)]
        : { blocked, reason: 'SecretConflict' as const, message, hint: 'KeyIssued' as const };
    await writeStatus(deps, { ...ctx, resource: cleared }, conditions);
    await deps.events.record(current, 'Warning', 'SecretConflict', message);
    return { type: 'Backoff' };
  }
  logger.debug({ keyId: created.id }, 'Secret written');
  // Step 5 (create-record.ts).
  try {
    return await recordNewKey(deps, ctx, current, platform, { pending, created, secret, replaces });
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
    const now = await deps.kube.readResource(resource.kind, resource.metadata.namespace, resource.metadata.name);
    if (now !== undefined && now.metadata.uid === resource.metadata.uid) throw error;
    // The resource went while its key was made (its finalizer removed by someone else): nothing can
    // ever record the key, and its Secret goes with its owner. It is revoked at once.
    try {
      await adapter.revoke(platform, created.id);
    } catch (revokeError) {
      if (asPlatformFailure(revokeError)?.code !== 'NOT_FOUND') {
        logger.error({ keyId: created.id, code: asPlatformFailure(revokeError)?.code }, 'the resource is gone and its new key could not be revoked');
        throw revokeError;
      }
    }
    logger.warn({ keyId: created.id }, 'the resource was deleted before its new key was recorded; revoked the key');
    return { type: 'Done' };
  }
}

/**
 * Step 2: the intent, with the resourceVersion we read (a conflict means someone else moved; never
 * create then), and the namespace's credentials kept while this key may live: before anything is
 * minted with them, so before the POST, written beside the intent (two apiserver writes at once,
 * not in a row). Returns the resource as the intent left it.
 */
async function writeIntent(
  deps: KeyDeps,
  ctx: Pick<Context, 'resource' | 'credentialsSecret' | 'credentialsVersion' | 'logger'>,
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
          (kept) => {
            // The finalizer alone moved the credentials Secret since it was read: the key rests on that version (at-rest.ts).
            if (kept !== undefined) ctx.credentialsVersion = kept;
            return undefined;
          },
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
