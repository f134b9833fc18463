// "What next?" for one key resource: a pure function of what the reconciler observed (the resource,
// its Secret, the credentials, the platform) returning ONE action and the reason for it
// (cert-manager's policy checks, crossplane's single lifecycle). The effects live in reconciler.ts and the actions it runs;
// this file does no I/O, so every branch is a row in test/operator/keys/decision.test.ts.
//
// The crash-safe create protocol is DESIGN.md section 3: intent (the create-pending annotation)
// before the POST, the Secret before the status, recovery when an intent has no recorded outcome.

import type { Reason } from './conditions.ts';

export interface PendingAttempt {
  /** The key name sent to the platform: <keyName>-<8 random chars>. */
  attempt: string;
  /** RFC 3339; when the intent was written. */
  startedAt: string;
  /** The operator process that wrote the intent (see Observation.identity). */
  holder: string;
  /** The key this attempt replaces (rotation after drift): revoked once the new key is recorded. */
  replaces?: number;
}

/**
 * Why an intent annotation is not acted on: unreadable, or not signed by this operator for this
 * resource (forged, edited, or copied from another resource). Cleared without revoking anything.
 */
export type RefusedIntent = 'Malformed' | 'Unsigned';

export type Credentials = 'Present' | 'SecretNotFound' | 'KeyNotFound';

export interface SecretObservation {
  /** Its controller owner reference is this resource (by uid). Anything else is not ours. */
  owned: boolean;
  /** Owned, and its key id and name carry the operator's signature for this resource. */
  verified: boolean;
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
  status: { keyId?: number; secretHash?: string };
  /**
   * The recorded key was issued with other credentials than the ones now in the credentials
   * Secret (status.credentialsFingerprint): a key these cannot see is not thereby revoked.
   */
  credentialsChanged?: boolean;
  /** keys.neon.dev/abandon-key: a person gave up the recorded key of this id (see credentialsChanged). */
  abandonKey?: number;
  /** spec.secret names the credentials Secret (the default name can collide, which the CRD cannot see). */
  secretIsCredentials?: boolean;
  /** The Secret named by spec.secret (or metadata.name); undefined when it does not exist. */
  secret?: SecretObservation;
  credentials: Credentials;
  platform: {
    /**
     * Whether the recorded key is in the platform's list (drift). Unknown when not looked at;
     * Unverifiable when the look failed (credentials refused, platform unavailable): see `check`.
     */
    key: 'Live' | 'Absent' | 'Unknown' | 'Unverifiable';
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
  /** Mint a key (write intent, POST, Secret, status); replaces: the key revoked once it is recorded. */
  | { type: 'Create'; replaces?: number }
  | { type: 'InSync'; keyId: number }
  /** The Secret holds the recorded key but not as spec.secret.template shapes it: rewrite it, no new key. */
  | { type: 'RewriteSecret'; keyId: number }
  /**
   * The recorded key could not be checked. Nothing is minted or revoked on the strength of a failed
   * check; once the checks have failed for long enough, conditions say the key is no longer known
   * to be live (report), and it is looked at again after retryAfterMs.
   */
  | { type: 'Unverifiable'; keyId: number; report: boolean; retryAfterMs: number }
  | { type: 'Revoke'; keyId: number }
  /** Deletion with deletionPolicy Retain: the key and its Secret stay, the Secret loses its owner. */
  | { type: 'Retain' }
  /** Deletion without a live key to revoke (or a person said so): drop the finalizer. */
  | { type: 'Release' };

/**
 * The key this resource holds, by the operator's own records: status (which only the operator
 * writes), or, when status was lost, a Secret the operator signed for this resource. Never a key
 * id a tenant could have written.
 */
export function recordedKeyId(o: Pick<Observation, 'status' | 'secret'>): number | undefined {
  return o.status.keyId ?? (o.secret?.verified === true ? o.secret.keyId : undefined);
}

const REFUSED_INTENT: Record<RefusedIntent, string> = {
  Malformed: 'the keys.neon.dev/create-pending annotation is not readable; clearing it without revoking anything',
  Unsigned: 'the keys.neon.dev/create-pending annotation was not written by this operator for this resource (no valid signature); clearing it without revoking anything',
};

export interface Decision {
  action: Action;
  /** CamelCase reason for conditions and events. */
  reason: Reason;
  message: string;
}

const credentialsMessage: Record<Exclude<Credentials, 'Present'>, string> = {
  SecretNotFound: 'the credentials Secret named in spec.credentialsSecretRef does not exist in this namespace; create it with a platform API key',
  KeyNotFound: 'the credentials Secret has no (or an empty) entry named by spec.credentialsSecretRef.key; put a platform API key there',
};

function blockedOnCredentials(credentials: Exclude<Credentials, 'Present'>, doing: string): Decision {
  return { action: { type: 'Blocked', retry: true }, reason: 'CredentialsMissing', message: `cannot ${doing}: ${credentialsMessage[credentials]}` };
}

function pendingDecision(o: Observation, pending: PendingAttempt, doing: string): Decision {
  const secret = o.secret;
  // The Secret's key id is believed only under the operator's signature for this resource.
  if (secret?.verified === true && secret.keyName === pending.attempt && secret.keyId !== undefined) {
    return {
      action: { type: 'Adopt', keyId: secret.keyId, attempt: pending },
      reason: 'Adopting',
      message: `the Secret already holds key ${secret.keyId} of attempt ${pending.attempt}; recording it`,
    };
  }
  const age = o.now - Date.parse(pending.startedAt);
  if (pending.holder !== o.identity && Number.isFinite(age) && age < o.pendingGraceMs) {
    return {
      action: { type: 'Wait', afterMs: Math.max(1, o.pendingGraceMs - age) },
      reason: 'Creating',
      message: `attempt ${pending.attempt} by ${pending.holder} is in flight; waiting for it`,
    };
  }
  if (o.credentials !== 'Present') return blockedOnCredentials(o.credentials, `recover attempt ${pending.attempt} while ${doing}`);
  return {
    action: { type: 'Recover', attempt: pending },
    reason: 'Recovering',
    message: `the outcome of attempt ${pending.attempt} is unknown; revoking any key of that name and starting again`,
  };
}

export function decide(o: Observation): Decision {
  const pending = o.pending;

  if (o.deleting) {
    if (!o.hasFinalizer) return { action: { type: 'Nothing' }, reason: 'Deleted', message: 'nothing left to do' };
    if (o.releaseWithoutRevoke) {
      return { action: { type: 'Release' }, reason: 'ReleasedWithoutRevoke', message: 'released on request (keys.neon.dev/release-without-revoke); the platform key, if any, was not revoked' };
    }
    if (pending === 'Malformed' || pending === 'Unsigned') return { action: { type: 'ClearPending' }, reason: 'InvalidAnnotation', message: REFUSED_INTENT[pending] };
    if (pending !== undefined) return pendingDecision(o, pending, 'deleting');
    const keyId = recordedKeyId(o);
    if (o.deletionPolicy === 'Retain') {
      return { action: { type: 'Retain' }, reason: 'Retained', message: keyId === undefined ? 'no key was issued' : `deletionPolicy Retain: key ${keyId} and its Secret are kept` };
    }
    if (keyId === undefined) return { action: { type: 'Release' }, reason: 'NoKey', message: 'no key was issued; nothing to revoke' };
    if (o.credentials !== 'Present') {
      return { ...blockedOnCredentials(o.credentials, `revoke key ${keyId}`), reason: 'CredentialsMissing' };
    }
    return { action: { type: 'Revoke', keyId }, reason: 'Deleting', message: `revoking key ${keyId}` };
  }

  if (o.specError !== undefined) return { action: { type: 'Blocked', retry: false }, reason: 'InvalidSpec', message: o.specError };
  if (!o.hasFinalizer) return { action: { type: 'AddFinalizer' }, reason: 'Creating', message: 'adding the finalizer' };
  if (pending === 'Malformed' || pending === 'Unsigned') return { action: { type: 'ClearPending' }, reason: 'InvalidAnnotation', message: REFUSED_INTENT[pending] };
  if (pending !== undefined) return pendingDecision(o, pending, 'creating');

  const secret = o.secret;
  const keyId = recordedKeyId(o);
  const create = (replaces: number | undefined, reason: Reason, message: string): Decision =>
    o.credentials !== 'Present'
      ? { ...blockedOnCredentials(o.credentials, 'issue a key'), message: `${message}; cannot issue a key: ${credentialsMessage[o.credentials]}` }
      : { action: replaces === undefined ? { type: 'Create' } : { type: 'Create', replaces }, reason, message };

  if (o.secretIsCredentials === true) {
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'InvalidSpec',
      message: 'the Secret the key is written to (spec.secret.name, default metadata.name) is the credentials Secret; choose another spec.secret.name',
    };
  }
  if (secret !== undefined && !secret.owned) {
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'SecretConflict',
      message: 'a Secret of that name exists and is not controlled by this resource (no controller owner reference with its uid); delete it or choose another spec.secret.name',
    };
  }
  if (keyId === undefined) return create(undefined, 'Creating', 'issuing a key');
  if (o.platform.project === 'NotInOrganization') {
    return {
      action: { type: 'Blocked', retry: true },
      reason: 'ProjectNotInOrganization',
      message: `the project is no longer owned by the organization; key ${keyId} stopped working and no project key can be issued until it returns`,
    };
  }
  if (o.platform.key === 'Absent' && o.credentialsChanged === true) {
    // Other credentials issued it: that these cannot see it says nothing of whether it is live.
    if (o.abandonKey === keyId) return create(undefined, 'KeyAbandoned', `key ${keyId} was given up (keys.neon.dev/abandon-key); issuing a new one`);
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'CredentialsChanged',
      message: `key ${keyId} was issued with other credentials than the ones now in the credentials Secret, which cannot see it: it may still be live. `
        + `Put the credentials that issued it back, or revoke key ${keyId} yourself and annotate keys.neon.dev/abandon-key="${keyId}" to issue a new key`,
    };
  }
  // Revoked again once the new key is recorded: should the list have been wrong, no live key is left behind.
  if (o.platform.key === 'Absent') return create(keyId, 'RevokedExternally', `key ${keyId} was revoked outside the operator; issuing a new one`);
  if (secret === undefined) return create(keyId, 'SecretMissing', `the Secret holding key ${keyId} is gone; issuing a new key and revoking ${keyId}`);
  if (secret.keyId !== keyId || secret.hash === undefined || (o.status.secretHash !== undefined && o.status.secretHash !== secret.hash)) {
    return create(keyId, 'SecretTampered', `the Secret no longer holds key ${keyId} as issued; issuing a new key and revoking ${keyId}`);
  }
  // The key in it is the recorded one, as issued (checked just above): the rest is rebuilt from it.
  if (secret.inLine === false) {
    return {
      action: { type: 'RewriteSecret', keyId },
      reason: 'SecretRewritten',
      message: `the Secret differs from spec.secret (template labels, annotations or data entries); rewriting it with key ${keyId}, no new key`,
    };
  }
  const check = o.platform.check;
  if (o.platform.key === 'Unverifiable' && check !== undefined) {
    const remaining = check.reportAfterMs - check.failingForMs;
    return {
      action: { type: 'Unverifiable', keyId, report: remaining <= 0, retryAfterMs: Math.max(1_000, remaining) },
      reason: check.reason,
      message: `key ${keyId} cannot be checked on the platform for ${Math.round(check.failingForMs / 1000)}s: ${check.message}`,
    };
  }
  return { action: { type: 'InSync', keyId }, reason: 'Ready', message: `key ${keyId} is live and its secret is in the Secret` };
}
