// The model of decide() (decision.ts): what a reconcile observed of one key resource (Observation),
// and the one action it takes with its reason (Decision). Types only.

import type { InternalReason, Reason } from './status/conditions.ts';

export interface PendingAttempt {
  /** The key name sent to the platform: <keyName>-<8 random chars>. */
  attempt: string;
  /** RFC 3339; when the intent was written. */
  startedAt: string;
  /** The operator process that wrote the intent (see Observation.identity). */
  holder: string;
  /**
   * The key this attempt replaces: after drift, revoked once the new key is recorded; by a
   * rotation (below), kept live in status.retiringKeys until its consumers moved.
   */
  replaces?: number;
  /** A rotation (spec.rotation, keys.neon.dev/rotate): `request`, the request token it handles. */
  rotation?: { request?: string };
  /**
   * The recorded key a person gave up (keys.neon.dev/abandon-key, KeyAbandoned): replaced in status
   * by this attempt's key and never revoked (the credentials now in use cannot see it). It is what
   * makes this intent consistent with status.keyId (consistentIntent) without a `replaces`.
   */
  abandons?: number;
  /**
   * The ClusterKeyIssuer whose credentials make the key (absent: credentials of the namespace): the
   * cap of that issuer counts the key from its intent on (issuing/issuer-slots.ts), whatever
   * spec.issuerRef says by then.
   */
  issuer?: string;
}

/** A key a rotation replaced (status.retiringKeys), as observed for its retirement. */
export interface RetiringObservation {
  keyId: number;
  /** When the Secret switched away from it. */
  since: number;
  graceMs: number;
  maxGraceMs: number;
  /** spec.rotation.restart: none configured, due (not done for this key), or done (status.retiringKeys[].restartedAt). */
  restart: 'NotConfigured' | 'Due' | 'Done';
  /** The restarted rollouts: complete (since when, if recorded), or which are not, and which of them are stalled. */
  rollouts: { complete: true; completedAt?: number } | { complete: false; waitingFor: string[]; stalled: string[] };
  /**
   * The key in a fresh snapshot of the platform's list (taken at seenAt): live (with its last use),
   * absent, or unknown (the list failed).
   */
  platform: { state: 'Live'; seenAt: number; lastUsedAt?: number; lastUsedFromAddr?: string } | { state: 'Absent' } | { state: 'Unknown'; message: string };
}

/** One step of the retirement of a replaced key (retirementStep). */
export type RetireStep =
  /** It is gone from the platform (revoked outside, or by us before a crash): drop it from status. */
  | { step: 'Drop' }
  | { step: 'RestartConsumers' }
  /** Not yet: look again after afterMs. */
  | { step: 'Wait'; afterMs: number; waitingFor: 'Rollouts' | 'Grace' | 'Usage' | 'Platform'; stalled?: boolean }
  /** Revoke it now; stillInUse: maxGracePeriod ran out while it was still used. */
  | { step: 'Revoke'; stillInUse: boolean };

/**
 * Why an intent annotation is not acted on: unreadable, or not signed by this operator for this
 * resource (forged, edited, or copied from another resource). Cleared without revoking anything.
 */
export type RefusedIntent = 'Malformed' | 'Unsigned';

/** NotAKey: the entry is longer than any platform API key, or not visible ASCII (docs/security.md, Bounds). */
export type Credentials = 'Present' | 'SecretNotFound' | 'KeyNotFound' | 'NotAKey';

export interface SecretObservation {
  /** Its controller owner reference is this resource (by uid). Anything else is not ours. */
  owned: boolean;
  /**
   * Owned, and its key id, name, replaced key and the HMAC of its secret value carry the operator's
   * signature for this resource (secret-writer.ts); or `legacy` and consistent with status.keyId.
   */
  verified: boolean;
  /**
   * Owned and signed in the first format (uid, key id and name only: the signature says
   * nothing of the value it holds). Believed only for the key status records (observe.ts), then
   * re-signed (RewriteSecret, `resign`).
   */
  legacy?: boolean;
  /** A legacy signature believed, the value checked against status.secretHash: re-signed by RewriteSecret. */
  resign?: boolean;
  /** From its keys.neon.dev/replaces annotation (believed only when verified and not legacy). */
  replaces?: number;
  /** From its keys.neon.dev/key-id annotation (believed only when verified). */
  keyId?: number;
  /** From its keys.neon.dev/key-name annotation: the attempt name that created the key. */
  keyName?: string;
  /** HMAC of the secret in its data (secret-writer.ts); absent when the data key is missing or empty. */
  hash?: string;
  /**
   * false: its labels, annotations or derived entries differ from spec.secret.template (or it has
   * data entries the spec does not ask for); rewritten from its primary entry (secret-template.ts).
   */
  inLine?: boolean;
}

export interface Observation {
  now: number;
  /** Rotation wanted: a request token not handled yet, and when the scheduled one is due. */
  rotation?: { request?: string; scheduledAt?: number };
  /** The first key in status.retiringKeys, observed; every retiring key id in retiringKeyIds. */
  retiring?: RetiringObservation;
  retiringKeyIds?: number[];
  /** status.replacedKeys: keys a repair replaced that the platform has not revoked yet. */
  replacedKeyIds?: number[];
  /** Keys of this resource's attempts (their names carry its tag) recorded nowhere: left by a create whose intent was lost (observe.ts orphanKeys). */
  orphanKeyIds?: number[];
  /**
   * status.lostAttempts (creates whose answer was lost), with what the list last taken shows of
   * them (observing/orphans.ts lostAttemptKeys): their live keys, and the names known to have none.
   */
  lostAttempts?: { names: string[]; keys: { keyId: number; keyName: string }[]; gone: string[] };
  /** This operator process: a restarted process is a different holder. */
  identity: string;
  /** How long another holder's intent is presumed in flight (longer than a create request can take). */
  pendingGraceMs: number;
  deleting: boolean;
  hasFinalizer: boolean;
  releaseWithoutRevoke: boolean;
  /** Set when the spec fails validation; its message. */
  specError?: string;
  deletionPolicy: 'Revoke' | 'Retain';
  pending?: PendingAttempt | RefusedIntent;
  /** keyName: the attempt that issued the recorded key (status.keyName): a fulfilled intent names it (fulfilledIntent). */
  status: { keyId?: number; keyName?: string; secretHash?: string };
  /**
   * The recorded key was issued with other credentials than the ones now in the credentials
   * Secret (status.credentialsFingerprint): a key these cannot see is not thereby revoked.
   */
  credentialsChanged?: boolean;
  /** keys.neon.dev/abandon-key: a person gave up the recorded key of this id (see credentialsChanged). */
  abandonKey?: number;
  /** spec.secret names the credentials Secret (the default name can collide, which the CRD cannot see). */
  secretIsCredentials?: boolean;
  /**
   * Another resource of the namespace, created before this one, names the same Secret name with one
   * of the two writing immutable Secrets (`Kind/name`): the name is that resource's, so this one
   * issues no key and starts no rotation (observe.ts secretNameOwner).
   */
  secretNameTakenBy?: string;
  /** The Secret named by spec.secret (or metadata.name); undefined when it does not exist. */
  secret?: SecretObservation;
  credentials: Credentials;
  /**
   * Nothing may be minted now, nor asked of the platform (issuing/credentials-source.ts): an issuer's
   * policy does not allow it, the issuer is missing, the namespace is being deleted. Never stops a
   * deletion; an interrupted create is still finished or recovered.
   */
  /** The credentials are an issuer's (spec.issuerRef): their problems are the platform team's to fix. */
  throughIssuer?: boolean;
  refusal?: { reason: 'NotAllowed' | 'IssuerNotFound' | 'NamespaceTerminating' | 'KeyLimitReached'; message: string };
  platform: {
    /**
     * Whether the recorded key is in the platform's list (drift). Unknown when not looked at;
     * Unverifiable when the look failed (credentials refused, platform unavailable): see `check`.
     */
    key: 'Live' | 'Absent' | 'Unknown' | 'Unverifiable';
    /**
     * The recorded key is in the list itself. `Live` without it is only presumed live: made after,
     * or a few seconds before, the list was taken (observing/drift.ts keyState), which says nothing
     * of whether these credentials can see it, nor revoke it.
     */
    listed?: boolean;
    /** Set with Unverifiable: why, since when the checks fail, and after how long that is reported. */
    check?: { reason: Reason; message: string; failingForMs: number; reportAfterMs: number };
    /** ProjectApiKey: whether the project is still owned by the organization. */
    project: 'InOrganization' | 'NotInOrganization' | 'Unknown';
  };
}

export type Action =
  | { type: 'Nothing' }
  | { type: 'AddFinalizer' }
  /** No platform action can help; report and wait (retry: with backoff, or only on a change). */
  | { type: 'Blocked'; retry: boolean }
  /** Another process holds an intent that may still be in flight. */
  | { type: 'Wait'; afterMs: number }
  /** The Secret holds the key of the pending attempt: record it (and revoke what it replaces). */
  | { type: 'Adopt'; keyId: number; attempt: PendingAttempt }
  /** The outcome of the attempt is unknown: revoke every live key of that name, clear the intent. */
  | { type: 'Recover'; attempt: PendingAttempt }
  /** A person wrote something unreadable into the intent annotation. */
  | { type: 'ClearPending' }
  /**
   * Mint a key (write intent, POST, Secret, status); replaces: the key revoked once it is recorded,
   * or with rotation, the key moved to status.retiringKeys.
   */
  | { type: 'Create'; replaces?: number; rotation?: { request?: string }; abandons?: number }
  /** The current key is in sync and a replaced key retires: one step of its retirement. */
  | { type: 'Retire'; keyId: number; retiring: number; step: RetireStep }
  | { type: 'InSync'; keyId: number }
  /** The Secret holds the recorded key but not as spec.secret.template shapes it: rewrite it, no new key. */
  | { type: 'RewriteSecret'; keyId: number }
  /**
   * The recorded key could not be checked. Nothing is minted or revoked on the strength of a failed
   * check; once the checks have failed for long enough, conditions say the key is no longer known
   * to be live (report), and it is looked at again after retryAfterMs.
   */
  | { type: 'Unverifiable'; keyId: number; report: boolean; retryAfterMs: number }
  /** Revoke the keys a repair replaced that the platform did not revoke then (status.replacedKeys). */
  | { type: 'RevokeReplaced'; keyIds: number[] }
  /**
   * Revoke the keys an interrupted create left whose intent is gone (stripped, replaced): recorded
   * nowhere, or by name only (status.lostAttempts: `lost` are theirs, `gone` the names to drop); never in a Secret.
   */
  | { type: 'RevokeOrphans'; keyIds: number[]; lost?: { keyId: number; keyName: string }[]; gone?: string[] }
  /** Deletion: revoke the key (none when only status records keys), and the keys still retiring or replaced (they are in no Secret). */
  | { type: 'Revoke'; keyId?: number; retiring?: number[] }
  /** Deletion with deletionPolicy Retain: the key and its Secret stay, the Secret loses its owner; retiring keys are revoked. */
  | { type: 'Retain'; retiring?: number[] }
  /** Deletion without a live key to revoke (or a person said so): drop the finalizer. */
  | { type: 'Release' };

export interface Decision {
  action: Action;
  /** CamelCase reason for conditions and events (an InternalReason names the step in logs only: shownReason). */
  reason: Reason | InternalReason;
  message: string;
}
