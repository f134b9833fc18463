// What other rooms of the operator read of the key domain (today the inventory,
// src/operator/inventory): the shared key lists, and the reasons a platform failure reads as.
// Everything else of keys/ is the domain's own.
export { listFor, type KeyPlatform, type ListedKey } from './adapter.ts';
export type { DriftCache, ListingView } from './drift.ts';
export type { Reason } from './conditions.ts';
export { asPlatformFailure } from './platform-failure.ts';
export { platformFailureReason } from './platform-reasons.ts';
export { statusTimestamp } from './usage.ts';
export { CREDENTIALS_INDEX } from './watches.ts';
export { credentialsSecretOf, recordedKeyIds } from './cache-projection.ts';
