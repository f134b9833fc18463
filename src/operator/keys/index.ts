// What other rooms of the operator read of the key domain (the inventory and the issuers): the
// shared key lists, what a key's name says made it, and the reasons a platform failure reads as;
// what manager.ts wires: the domain assembled (assemble.ts), its watches, the signer, the org key
// limiters and the metrics; and what flags.ts checks a flag against (the signing key Secret's default
// name, a label selector, a cluster name, an organization's share). Everything else of keys/ is the
// domain's own.
export { listFor, type KeyPlatform, type ListedKey } from './adapter.ts';
export type { DriftCache } from './observing/drift.ts';
export type { ListingView } from './observing/drift-listing.ts';
export type { Reason } from './status/conditions.ts';
export { asPlatformFailure } from './status/platform-failure.ts';
export { platformFailureReason } from './status/platform-reasons.ts';
export { statusTimestamp } from './observing/usage.ts';
export { CREDENTIALS_INDEX, keyWatches } from './watches.ts';
export { credentialsSecretOf, recordedKeyIds } from './observing/cache-projection.ts';
export { CLUSTER_NAME_MAX, clusterNameProblem, nameOrigin, type NameOrigin } from './issuing/key-names.ts';
export { DEFAULT_SIGNING_KEY_SECRET } from './issuing/signing.ts';
export { parseLabelSelector } from './issuing/issuer-policy.ts';
export { organizationShareProblem } from './issuing/organization-share.ts';
export {
  assembleKeys,
  loadKeySigner,
  signingKeySecretOf,
  type AssembledKeys,
  type KeyCluster,
  type KeyOptions,
  type KeyRuntime,
  type PlatformFactory,
} from './assemble.ts';
export type { ReconcileRecord } from './reconcile-context.ts';
export type { Signer } from './issuing/signing.ts';
export type { MembershipsKept } from './issuing/organization-membership.ts';
export { createMetrics, type OperatorMetrics } from './status/metrics.ts';
export { orgKeyLimiters, operatorOrgKeyLimiters, type OrgKeyLimiters } from './turns/org-key-limiters.ts';
