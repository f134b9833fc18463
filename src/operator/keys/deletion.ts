// Deletion of a key resource (docs/design.md section 3.7; docs/security.md): revoke its key and delete
// the Secret it controls, or with deletionPolicy Retain keep both and hand the Secret over to no
// one, or release without revoking when there is no key (or a person said so). The finalizer goes
// last: until the key is revoked, the resource stays.
import type { ReconcileResult } from '../runtime/workers.ts';
import { ANNOTATION_RELEASE_WITHOUT_REVOKE, ANNOTATION_RETAINED_FROM } from '../resources/schema.ts';
import { deletingConditions } from './status/conditions.ts';
import type { Decision } from './decision-types.ts';
import { statusCode } from './kube-writes.ts';
import { asPlatformFailure, failureReason } from './status/platform-failure.ts';
import { platformOf, type Context, type KeyDeps } from './reconcile-context.ts';
import { removeFinalizer, writeStatus } from './status/resource-writes.ts';
import { revokeRetiring } from './rotation/rotation.ts';
import { ANNOTATION_OWNER, deleteRetiredSecret } from './secret/secret-writer.ts';

/** Deletion with deletionPolicy Revoke: revoke the key, delete the Secret this resource controls, drop the finalizer. */
export async function revokeAndRelease(deps: KeyDeps, ctx: Context, keyId: number | undefined, retiring: readonly number[] = []): Promise<ReconcileResult> {
  const { resource, adapter } = ctx;
  if (adapter === undefined) throw new Error('revoke without a spec');
  const { platform } = platformOf(deps, ctx);
  // What is revoked, as events and conditions name it: the key in the Secret, and those only status records.
  const keys =
    keyId === undefined ? `key(s) ${retiring.join(', ')}` : `key ${keyId}${retiring.length > 0 ? ` and retiring key(s) ${retiring.join(', ')}` : ''}`;
  try {
    // The keys a rotation or a repair replaced first: they are in no Secret, and status is their only record.
    await revokeRetiring(deps, ctx, retiring);
    if (keyId !== undefined) await adapter.revoke(platform, keyId);
  } catch (error) {
    const failure = asPlatformFailure(error);
    if (failure?.code === 'NOT_FOUND' && ctx.observation.credentialsChanged === true && (ctx.observation.abandonKey !== keyId || retiring.length > 0)) {
      // Not found by other credentials than the ones that issued it (the key or a retiring one): it may well be live.
      const message =
        keyId === undefined
          ? `${keys} were issued with other credentials than the ones now in the credentials Secret, which cannot find them; ` +
            `put the credentials that issued them back`
          : `key ${keyId}${retiring.length > 0 ? ` (or retiring key(s) ${retiring.join(', ')})` : ''} was ` +
            `issued with other credentials than the ones now in the credentials Secret, which cannot find it; ` +
            `put the credentials that issued it back, or revoke it yourself and annotate keys.neon.dev/abandon-key="${keyId}"`;
      await writeStatus(deps, ctx, deletingConditions('CredentialsChanged', message));
      await deps.events.record(resource, 'Warning', 'CredentialsChanged', message);
      return { type: 'Done', requeueAfterMs: deps.driftIntervalMs };
    }
    if (failure?.code !== 'NOT_FOUND') {
      const { reason, message } = failureReason(failure, `revoking ${keys}`);
      await writeStatus(
        deps,
        ctx,
        deletingConditions(reason, `${message}; the resource stays until the key is revoked (or annotate it ${ANNOTATION_RELEASE_WITHOUT_REVOKE}="true")`),
      );
      await deps.events.record(resource, 'Warning', reason, message);
      if (failure === undefined) throw error;
      return { type: 'Backoff', ...(failure.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
    }
  }
  await deleteRetiredSecrets(deps, ctx);
  if (ctx.secret !== undefined && ctx.observation.secret?.owned === true) {
    await deps.kube.deleteSecret(resource.metadata.namespace, ctx.secretName).catch((error: unknown) => {
      if (statusCode(error) !== 404) throw error;
    });
  }
  await deps.events.record(
    resource,
    'Normal',
    'KeyRevoked',
    keyId === undefined
      ? `revoked ${keys}, recorded in status only`
      : `revoked key ${keyId}${retiring.length > 0 ? ` (and retiring key(s) ${retiring.join(', ')})` : ''} and deleted Secret ${ctx.secretName}`,
  );
  await removeFinalizer(deps, resource);
  releaseSlot(deps, ctx);
  return { type: 'Done' };
}

/**
 * The resource's keys are gone (or retained) and it is going: a slot of its issuer's cap frees for
 * the namespace's next waiting resource (issuing/issuer-slots.ts).
 */
function releaseSlot(deps: KeyDeps, ctx: Context): void {
  const {
    kind,
    metadata: { namespace, name },
  } = ctx.resource;
  const key = `${kind}/${namespace}/${name}`;
  // Its credentials Secret of the namespace may go once no other resource needs it (issuing/credentials-in-use.ts).
  const credentials = ctx.spec?.issuerRef === undefined ? ctx.spec?.credentialsSecretRef?.name : undefined;
  if (credentials !== undefined) deps.onCredentialsReleased?.(key, namespace, credentials);
  // Where it named and where its keys were made (status.issuer, its intent's).
  const pending = ctx.observation.pending;
  const issuers = [
    ctx.source?.issuer?.name,
    ctx.spec?.issuerRef?.name,
    ctx.resource.status?.issuer,
    typeof pending === 'object' ? pending.issuer : undefined,
  ].filter((i) => i !== undefined);
  if (issuers.length > 0) deps.slots?.release(issuers, namespace, key);
}

/**
 * spec.secret.immutable: the Secrets of the retiring keys (revoked just before) go now rather than
 * by the garbage collector; only those this resource owns by uid (deleteRetiredSecret).
 */
async function deleteRetiredSecrets(deps: KeyDeps, ctx: Context): Promise<void> {
  for (const entry of ctx.resource.status?.retiringKeys ?? []) await deleteRetiredSecret(deps, ctx, entry.secretName);
}

/** Deletion with deletionPolicy Retain: the key and its Secret stay, the Secret loses its owner. */
export async function retain(deps: KeyDeps, ctx: Context, decision: Decision, retiring: readonly number[] = []): Promise<ReconcileResult> {
  const { resource, secret } = ctx;
  if (retiring.length > 0) {
    // What a rotation replaced is retained by no one: it is in no Secret.
    try {
      await revokeRetiring(deps, ctx, retiring);
    } catch (error) {
      const failure = asPlatformFailure(error);
      const { reason, message } = failureReason(failure, `revoking retiring key(s) ${retiring.join(', ')}`);
      await writeStatus(deps, ctx, deletingConditions(reason, message));
      await deps.events.record(resource, 'Warning', reason, message);
      if (failure === undefined) throw error;
      return { type: 'Backoff', ...(failure.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
    }
  }
  await deleteRetiredSecrets(deps, ctx);
  if (secret !== undefined && ctx.observation.secret?.owned === true) {
    // The Secret must outlive the resource: no owner reference for the garbage collector to follow.
    const annotations: Record<string, string> = { ...secret.metadata?.annotations, [ANNOTATION_RETAINED_FROM]: `${resource.kind}/${resource.metadata.name}` };
    delete annotations[ANNOTATION_OWNER];
    await deps.kube.replaceSecret(resource.metadata.namespace, ctx.secretName, {
      ...secret,
      metadata: { ...secret.metadata, annotations, ownerReferences: [] },
    });
  }
  await deps.events.record(resource, 'Normal', 'KeyRetained', decision.message);
  await removeFinalizer(deps, resource);
  releaseSlot(deps, ctx);
  return { type: 'Done' };
}

/** Deletion without a live key to revoke (or a person said so): drop the finalizer. */
export async function release(deps: KeyDeps, ctx: Context, decision: Decision): Promise<ReconcileResult> {
  if (decision.reason === 'ReleasedWithoutRevoke') await deps.events.record(ctx.resource, 'Warning', decision.reason, decision.message);
  await removeFinalizer(deps, ctx.resource);
  releaseSlot(deps, ctx);
  return { type: 'Done' };
}
