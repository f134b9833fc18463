// What a failed platform call becomes: src/platform's PlatformError (branch on its `code` and
// `disposition`, never on a message), a condition reason with a message a person can act on, and
// for an action, the conditions, the event and the backoff of the resource.
import { isPlatformError, type PlatformError } from '../../../platform/index.ts';
import type { ReconcileResult } from '../../runtime/workers.ts';
import { blockedConditions, deletingConditions, type Reason } from './conditions.ts';
import { platformFailureReason } from './platform-reasons.ts';
import { blockedInputs, type Context, type KeyDeps } from '../reconcile-context.ts';
import { writeStatus } from './resource-writes.ts';

/** The platform's error, or undefined for anything else (a bug, an apiserver error). */
export function asPlatformFailure(error: unknown): PlatformError | undefined {
  return isPlatformError(error) ? error : undefined;
}

/** Condition reason (platform-reasons.ts, the one table) and an actionable message for a failed platform call. */
export function failureReason(failure: PlatformError | undefined, doing: string): { reason: Reason; message: string } {
  const reason = platformFailureReason(failure);
  const id = failure?.requestId !== undefined ? ` (request ${failure.requestId})` : '';
  switch (reason) {
    case 'Unauthorized':
      return { reason, message: `${doing}: the platform rejected the credentials (401)${id}; put a valid, unrevoked API key in the credentials Secret` };
    case 'Forbidden':
      return {
        reason,
        message: `${doing}: the credentials may not do this (403)${id}; organization keys need an administrator's personal key, project keys a member's`,
      };
    case 'NotFound':
      return { reason, message: `${doing}: the organization or project does not exist or is not visible to the credentials (404)${id}` };
    case 'InvalidSpec':
      return {
        reason,
        message: `${doing}: the platform refused the request (${failure?.status ?? failure?.code})${id}; check organizationId, projectId and keyName`,
      };
    case 'RateLimited':
      return { reason, message: `${doing}: rate limited by the platform (429)${id}; retrying after the delay it asked for` };
    default:
      if (failure === undefined) return { reason, message: `${doing}: unexpected error` };
      return {
        reason,
        message: `${doing}: the platform did not answer usefully (${failure.code}${failure.status !== undefined ? ` ${failure.status}` : ''})${id}; retrying with backoff`,
      };
  }
}

/** Reason and message for a drift check the platform did not answer usefully. */
export function unverifiableReason(failure: PlatformError | undefined): { reason: Reason; message: string } {
  const id = failure?.requestId !== undefined ? ` (request ${failure.requestId})` : '';
  if (failure?.code === 'UNAUTHORIZED' || failure?.code === 'FORBIDDEN') {
    return {
      reason: 'CredentialsRefused',
      message: `the platform refused the credentials (${failure.status ?? failure.code})${id}; put a valid, unrevoked API key with access to this key's list in the credentials Secret`,
    };
  }
  // Any other failure reads as everywhere (platform-reasons.ts); only a platform error is expected here.
  const reason = failure === undefined ? 'PlatformUnavailable' : platformFailureReason(failure);
  return {
    reason,
    message: `the platform did not answer the key list usefully (${failure?.code ?? 'error'}${failure?.status !== undefined ? ` ${failure.status}` : ''})${id}; checked again every drift interval`,
  };
}

/**
 * A platform call of an action failed: report it in conditions and an event, and back off (after
 * at least the platform's Retry-After). Anything but a platform error is rethrown (`original`).
 */
export async function reportPlatformFailure(
  deps: KeyDeps,
  ctx: Context,
  failure: PlatformError | undefined,
  doing: string,
  original?: unknown,
): Promise<ReconcileResult> {
  const { reason, message } = failureReason(failure, doing);
  ctx.logger.warn({ code: failure?.code, status: failure?.status, requestId: failure?.requestId }, `${doing} failed`);
  await writeStatus(
    deps,
    ctx,
    ctx.observation.deleting ? deletingConditions(reason, message) : blockedConditions(blockedInputs(ctx), reason, message, 'KeyIssued'),
  );
  await deps.events.record(ctx.resource, 'Warning', reason, message);
  if (failure === undefined && original !== undefined) throw original;
  return { type: 'Backoff', ...(failure?.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
}
