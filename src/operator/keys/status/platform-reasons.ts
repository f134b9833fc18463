// The one table from a failed platform call to a condition reason, shared by the key lifecycle
// (platform-failure.ts: KeyIssued, Ready, events) and the operations mirror (operations-poller.ts:
// OperationsSettled), so that a 5xx, a 429, a 401/403 or a timeout reads the same reason on every
// condition of every resource. Keyed by src/platform's PlatformErrorCode (never by a
// status or a message): a code added there fails the typecheck here until it has a row.
import type { PlatformError, PlatformErrorCode } from '../../../platform/index.ts';
import type { Reason } from './conditions.ts';

export const PLATFORM_FAILURE_REASONS: Readonly<Record<PlatformErrorCode, Reason>> = {
  // 401: the key is missing, invalid or revoked (docs/platform-api.md, Errors).
  UNAUTHORIZED: 'Unauthorized',
  // 403: a valid key that may not do this (e.g. a member's key creating an organization key).
  FORBIDDEN: 'Forbidden',
  // 404: the organization or project does not exist or is not visible to the key.
  NOT_FOUND: 'NotFound',
  // 400/422 and 409: the request itself, i.e. what the spec asks for.
  INVALID_REQUEST: 'InvalidSpec',
  CONFLICT: 'InvalidSpec',
  // 429: retried after the platform's Retry-After.
  RATE_LIMITED: 'RateLimited',
  // Everything the platform did not answer usefully: retried with backoff.
  LOCKED: 'PlatformUnavailable',
  SERVER_ERROR: 'PlatformUnavailable',
  UNAVAILABLE: 'PlatformUnavailable',
  NETWORK: 'PlatformUnavailable',
  TIMEOUT: 'PlatformUnavailable',
  INVALID_RESPONSE: 'PlatformUnavailable',
  ABORTED: 'PlatformUnavailable',
};

/** The reason of a failed platform call; `Error` for anything that is not a platform error (a bug). */
export function platformFailureReason(failure: PlatformError | undefined): Reason {
  return failure === undefined ? 'Error' : PLATFORM_FAILURE_REASONS[failure.code];
}
