// Step 3 of the crash-safe create (docs/design.md section 3.1): the POST of an attempt whose intent is
// written, and the platform's answer checked (created-key.ts). A POST is never retried blindly
// (docs/security.md): an answer that may have made a key leaves the intent for recovery.
import type { ReconcileResult } from '../runtime/workers.ts';
import { ANNOTATION_CREATE_PENDING, MAX_LOST_ATTEMPTS, type KeyResource, type LostAttempt } from '../resources/schema.ts';
import type { BlockedInputs } from './status/conditions.ts';
import type { CreatedKey, KeyPlatform } from './adapter.ts';
import { checkCreatedKey } from './issuing/created-key.ts';
import type { PendingAttempt } from './decision-types.ts';
import { attemptListFingerprint } from './observing/orphans.ts';
import { asPlatformFailure, reportPlatformFailure } from './status/platform-failure.ts';
import type { Context, KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeKeyRecord, writeStatus } from './status/resource-writes.ts';

/** status.lostAttempts with `entry` added; decide() starts no create while the list is full, so the bound holds. */
function lostAttemptsWith(status: KeyResource['status'], entry: LostAttempt): LostAttempt[] {
  return [...(status?.lostAttempts ?? []).filter((l) => l.keyName !== entry.keyName), entry].slice(-MAX_LOST_ATTEMPTS);
}

/**
 * Step 3: the POST, and the platform's answer checked. An answer that may have made a key leaves the
 * intent for recovery (never a blind retry of the POST); a refusal, or a key that is not what was
 * asked for (revoked at once), clears it and is reported. `current`: the resource as the intent left it.
 */
export async function postAttempt(
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
