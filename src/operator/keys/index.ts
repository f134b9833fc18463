// What other rooms of the operator read of the key domain (today the inventory,
// src/operator/inventory): the shared key lists, what a key's name says made it, and the reasons a
// platform failure reads as.
// Everything else of keys/ is the domain's own.
export { listFor, type KeyPlatform, type ListedKey } from './adapter.ts';
export type { DriftCache, ListingView } from './observing/drift.ts';
export type { Reason } from './status/conditions.ts';
export { asPlatformFailure } from './status/platform-failure.ts';
export { platformFailureReason } from './status/platform-reasons.ts';
export { statusTimestamp } from './observing/usage.ts';
export { CREDENTIALS_INDEX } from './watches.ts';
export { credentialsSecretOf, recordedKeyIds } from './observing/cache-projection.ts';
export { nameOrigin, type NameOrigin } from './issuing/key-names.ts';
