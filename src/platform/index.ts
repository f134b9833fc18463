// The public surface of the platform client: what the operator, the CLI and the tests use.
//
// How a caller reads a PlatformError (the decision table is classify() in errors.ts):
// - disposition 'retryable': the platform did not act (or acting twice is harmless). The client has
//   already retried it with backoff; requeue, after `retryAfterMs` when it is set.
// - disposition 'ambiguous': only ever a POST (create key, create branch) whose outcome is unknown.
//   Never repeat it: run the recovery of docs/design.md section 3.2 (list keys, find the attempt name).
// - disposition 'terminal': fix credentials, permissions or input first; branch on `code`.
export { MAX_API_KEY_LENGTH, PlatformClient, TERMINAL_OPERATION_STATUSES, isApiKeyFormat } from './client.ts';
export type { PlatformClientOptions, CallOptions, CreateCallOptions, ResponseInfo } from './client.ts';
export { OPERATION_STATUS_CLASSES, isTerminalOperationStatus, operationStatusClass } from './operation-status.ts';
export type { KnownOperationStatus, OperationStatusClass } from './operation-status.ts';
export { PlatformError, isPlatformError } from './errors.ts';
export type { PlatformErrorCode, Disposition } from './errors.ts';
export { TokenBucket } from './token-bucket.ts';
export type { BucketClock, TokenBucketOptions } from './token-bucket.ts';
export { SlidingWindowLimiter, orgKeyCreationLimiter, ORG_KEY_CREATIONS_PER_SECOND } from './sliding-window.ts';
export type { Permit, RateLimiter, SlidingWindowOptions } from './sliding-window.ts';
export type {
  ApiKeyListItem,
  AuthDetails,
  Branch,
  CreatedKey,
  CurrentUser,
  Operation,
  OperationsPage,
  Organization,
  OrganizationMember,
  Project,
  RevokedKey,
} from './schemas.ts';
