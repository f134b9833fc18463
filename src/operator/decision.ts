// "What next?" for one key resource: a pure function of what the reconciler observed (the resource,
// its Secret, the credentials, the platform) returning ONE action and the reason for it
// (cert-manager's policy checks, crossplane's single lifecycle). The effects live in lifecycle.ts;
// this file does no I/O, so every branch is a row in test/operator/decision.test.ts.
//
// The crash-safe create protocol is DESIGN.md section 3: intent (the create-pending annotation)
// before the POST, the Secret before the status, recovery when an intent has no recorded outcome.

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

export type Credentials = 'Present' | 'SecretNotFound' | 'KeyNotFound';

export interface SecretObservation {
  /** Managed by this operator for this resource (label and owner annotation). */
  owned: boolean;
  /** From its keys.neon.dev/key-id annotation. */
  keyId?: number;
  /** From its keys.neon.dev/key-name annotation: the attempt name that created the key. */
  keyName?: string;
  /** HMAC of the secret in its data (secret-writer.ts); absent when the data key is missing or empty. */
  hash?: string;
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
  pending?: PendingAttempt | 'Malformed';
  status: { keyId?: number; secretHash?: string };
  /** The Secret named by spec.secret (or metadata.name); undefined when it does not exist. */
  secret?: SecretObservation;
  credentials: Credentials;
  platform: {
    /** Whether the recorded key is in the platform's list (drift). Unknown when not looked at. */
    key: 'Live' | 'Absent' | 'Unknown';
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
  | { type: 'Revoke'; keyId: number }
  /** Deletion with deletionPolicy Retain: the key and its Secret stay, the Secret loses its owner. */
  | { type: 'Retain' }
  /** Deletion without a live key to revoke (or a person said so): drop the finalizer. */
  | { type: 'Release' };

export interface Decision {
  action: Action;
  /** CamelCase reason for conditions and events. */
  reason: string;
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
  if (secret?.owned === true && secret.keyName === pending.attempt && secret.keyId !== undefined) {
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
    if (pending === 'Malformed') return { action: { type: 'ClearPending' }, reason: 'InvalidAnnotation', message: 'the keys.neon.dev/create-pending annotation is not readable or names a key this resource did not ask for; clearing it without revoking anything' };
    if (pending !== undefined) return pendingDecision(o, pending, 'deleting');
    const keyId = o.status.keyId ?? (o.secret?.owned === true ? o.secret.keyId : undefined);
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
  if (pending === 'Malformed') return { action: { type: 'ClearPending' }, reason: 'InvalidAnnotation', message: 'the keys.neon.dev/create-pending annotation is not readable or names a key this resource did not ask for; clearing it without revoking anything' };
  if (pending !== undefined) return pendingDecision(o, pending, 'creating');

  const secret = o.secret;
  const keyId = o.status.keyId ?? (secret?.owned === true ? secret.keyId : undefined);
  const create = (replaces: number | undefined, reason: string, message: string): Decision =>
    o.credentials !== 'Present'
      ? { ...blockedOnCredentials(o.credentials, 'issue a key'), message: `${message}; cannot issue a key: ${credentialsMessage[o.credentials]}` }
      : { action: replaces === undefined ? { type: 'Create' } : { type: 'Create', replaces }, reason, message };

  if (secret !== undefined && !secret.owned) {
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'SecretConflict',
      message: 'a Secret of that name exists and is not managed by this resource; delete it or choose another spec.secret.name',
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
  // Revoked again once the new key is recorded: should the list have been wrong, no live key is left behind.
  if (o.platform.key === 'Absent') return create(keyId, 'RevokedExternally', `key ${keyId} was revoked outside the operator; issuing a new one`);
  if (secret === undefined) return create(keyId, 'SecretMissing', `the Secret holding key ${keyId} is gone; issuing a new key and revoking ${keyId}`);
  if (secret.keyId !== keyId || secret.hash === undefined || (o.status.secretHash !== undefined && o.status.secretHash !== secret.hash)) {
    return create(keyId, 'SecretTampered', `the Secret no longer holds key ${keyId} as issued; issuing a new key and revoking ${keyId}`);
  }
  return { action: { type: 'InSync', keyId }, reason: 'Ready', message: `key ${keyId} is live and its secret is in the Secret` };
}
