// "What next?" for one key resource: a pure function of what the reconciler observed (the resource,
// its Secret, the credentials, the platform) returning ONE action and the reason for it
// (cert-manager's policy checks, crossplane's single lifecycle). The effects live in reconciler.ts and the actions it runs;
// this file does no I/O, so every branch is a row in test/operator/keys/decision.test.ts.
//
// The crash-safe create protocol is docs/design.md section 3.1: intent (the create-pending annotation)
// before the POST, the Secret before the status, recovery when an intent has no recorded outcome.

import type { InternalReason, Reason } from './status/conditions.ts';
import { MAX_API_KEY_LENGTH } from '../../platform/index.ts';
import { MAX_LOST_ATTEMPTS } from '../resources/schema.ts';

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

/**
 * Whether a signed intent fits the key record (status.keyId, which only the operator writes): the
 * only intents the operator writes while a key is recorded replace it (drift repair, rotation:
 * `replaces`), give it up (`abandons`), or are the create of the recorded key itself (status.keyName,
 * a crash after the status write). Anything else is an old intent of this resource put back (a
 * replay): acting on it would move the record away from the recorded key, so it is cleared
 * (StaleIntent) without adopting or revoking anything. With no key in status (a first create, or
 * status lost) every signed intent fits.
 */
export function consistentIntent(pending: PendingAttempt, status: Observation['status']): boolean {
  return status.keyId === undefined || pending.replaces === status.keyId || pending.abandons === status.keyId || status.keyName === pending.attempt;
}

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
  /** Deletion: revoke the key, and the keys still retiring (they are in no Secret any more). */
  | { type: 'Revoke'; keyId: number; retiring?: number[] }
  /** Deletion with deletionPolicy Retain: the key and its Secret stay, the Secret loses its owner; retiring keys are revoked. */
  | { type: 'Retain'; retiring?: number[] }
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

/**
 * An intent whose attempt is the recorded key (status.keyName, with status.keyId): the create it
 * announced completed, since status is written only after the Secret holds the key (step 5). A new
 * key's create leaves its intent in place rather than paying one more write to clear it;
 * it is no pending attempt (no adoption, no recovery, no write) and is replaced by the next create's
 * intent. Only an intent with nothing left to do: one that replaces a key (drift repair, rotation)
 * still has that key to revoke or retire after the status write, so it is cleared as before, and an
 * intent of that kind left by a crash stays pending (adoption finishes it). Status is written by the
 * operator only (tenants have no rights on the status subresource), so a tenant cannot make an intent fulfilled; a
 * replayed old intent of this resource is either fulfilled (nothing happens) or handled exactly as
 * before (docs/security.md "Create intents").
 */
export function fulfilledIntent(pending: Observation['pending'], status: Observation['status']): boolean {
  return (
    typeof pending === 'object' &&
    pending.replaces === undefined &&
    pending.rotation === undefined &&
    status.keyId !== undefined &&
    status.keyName === pending.attempt
  );
}

/** The intent decide() acts on: none when the one present is fulfilled. */
export function activeIntent(o: Pick<Observation, 'pending' | 'status'>): Observation['pending'] {
  return fulfilledIntent(o.pending, o.status) ? undefined : o.pending;
}

/** status.replacedKeys holds at most this many keys (the CRD's bound). */
export const MAX_REPLACED_KEYS = 8;

/**
 * The RevokeOrphans of this pass, if any: tag-found orphans, keys of status.lostAttempts' names,
 * and names known to have left no key (dropped).
 */
function orphansToRevoke(o: Observation, reason: Reason | InternalReason): Decision | undefined {
  const lost = o.lostAttempts?.keys ?? [];
  const gone = o.lostAttempts?.gone ?? [];
  const keyIds = [...new Set([...(o.orphanKeyIds ?? []), ...lost.map((k) => k.keyId)])];
  if (keyIds.length === 0 && gone.length === 0) return undefined;
  return {
    action: { type: 'RevokeOrphans', keyIds, ...(lost.length > 0 ? { lost } : {}), ...(gone.length > 0 ? { gone } : {}) },
    reason,
    message:
      keyIds.length > 0
        ? `revoking key(s) ${keyIds.join(', ')} of an interrupted create whose intent is gone`
        : `attempt(s) ${gone.join(', ')}, whose answer was lost, left no key; dropping them from status.lostAttempts`,
  };
}

/** Names in status.lostAttempts the list last taken says nothing of yet: no key of theirs in it, and not known to have none. */
export function lostUnresolved(o: Pick<Observation, 'lostAttempts'>): string[] {
  const lost = o.lostAttempts;
  if (lost === undefined) return [];
  return lost.names.filter((n) => !lost.gone.includes(n) && !lost.keys.some((k) => k.keyName === n));
}

const REFUSED_INTENT: Record<RefusedIntent, string> = {
  Malformed: 'the keys.neon.dev/create-pending annotation is not readable; clearing it without revoking anything',
  Unsigned:
    'the keys.neon.dev/create-pending annotation was not written by this operator for this resource (no valid signature); clearing it without revoking anything',
};

export interface Decision {
  action: Action;
  /** CamelCase reason for conditions and events (an InternalReason names the step in logs only: shownReason). */
  reason: Reason | InternalReason;
  message: string;
}

const credentialsMessage: Record<Exclude<Credentials, 'Present'>, string> = {
  SecretNotFound: 'the credentials Secret named in spec.credentialsSecretRef does not exist in this namespace; create it with a platform API key',
  KeyNotFound: 'the credentials Secret has no (or an empty) entry named by spec.credentialsSecretRef.key; put a platform API key there',
  NotAKey: `the entry spec.credentialsSecretRef.key of the credentials Secret is not a platform API key (at most ${MAX_API_KEY_LENGTH} visible ASCII characters); put a platform API key there`,
};

/** Through an issuer (spec.issuerRef), its credentials are the platform team's: said so. */
const issuerCredentialsMessage =
  'the credentials Secret of the ClusterKeyIssuer in spec.issuerRef is missing, empty or not a platform API key (its Ready condition says which); ask your platform team';

function blockedOnCredentials(credentials: Exclude<Credentials, 'Present'>, doing: string, throughIssuer = false): Decision {
  return {
    action: { type: 'Blocked', retry: true },
    reason: 'CredentialsMissing',
    message: `cannot ${doing}: ${throughIssuer ? issuerCredentialsMessage : credentialsMessage[credentials]}`,
  };
}

/**
 * Whether the verified Secret holds the key of this attempt, in a way the record allows adopting:
 * nothing recorded yet, or the attempt moves the record on from the recorded key (it replaces or
 * gives up status.keyId), or the Secret holds the recorded key itself (status written, intent not
 * cleared). A signed Secret names the key it replaced too: it must be the intent's.
 */
function adoptable(o: Observation, pending: PendingAttempt): number | undefined {
  const secret = o.secret;
  if (secret?.verified !== true || secret.keyName !== pending.attempt || secret.keyId === undefined) return undefined;
  if (secret.legacy !== true && secret.replaces !== pending.replaces) return undefined;
  const recorded = o.status.keyId;
  const fits =
    recorded === undefined ||
    pending.replaces === recorded ||
    pending.abandons === recorded ||
    (o.status.keyName === pending.attempt && secret.keyId === recorded);
  return fits ? secret.keyId : undefined;
}

/**
 * Whether the credentials now in use can revoke the recorded key, so that their NOT_FOUND means
 * revoked: the ones that issued it (status.credentialsFingerprint), or others whose list shows it
 * (a personal key is listed to its owner only). Only a personal list depends on whose credentials
 * ask (credentialsChanged is never set for an organization's keys).
 */
export function credentialsCanRevoke(o: Pick<Observation, 'credentialsChanged' | 'platform'>): boolean {
  return o.credentialsChanged !== true || o.platform.listed === true;
}

function pendingDecision(o: Observation, pending: PendingAttempt, doing: string): Decision {
  if (!consistentIntent(pending, o.status)) {
    return {
      action: { type: 'ClearPending' },
      reason: 'StaleIntent',
      message:
        `the keys.neon.dev/create-pending annotation names attempt ${pending.attempt}, which neither issued nor ` +
        `replaces the recorded key ${o.status.keyId} (an old intent put back); clearing it without adopting or revoking anything`,
    };
  }
  // An intent that moves on from a recorded key (a repair or a rotation: `replaces`) is finished
  // only with credentials that can revoke what it replaced and see what it made: recovery lists and
  // revokes the attempt's keys and the replaced key with the credentials now in use, and adoption
  // revokes the replaced key (a rotation's retires later) and records these credentials as the new
  // key's. Other credentials would get NOT_FOUND for keys that may well be live, and drop them from
  // every record. A key given up (`abandons`) is not revoked: its intent goes on.
  if (o.status.keyId !== undefined && pending.abandons === undefined && !credentialsCanRevoke(o)) {
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'CredentialsChanged',
      message:
        `attempt ${pending.attempt}${pending.replaces !== undefined ? `, replacing key ${pending.replaces},` : ''} was interrupted, and key ${o.status.keyId} was issued with other credentials ` +
        `than the ones now in the credentials Secret, which cannot see it: nothing is revoked or recorded with them. Put the credentials that issued it back to finish the attempt`,
    };
  }
  const secret = o.secret;
  // The Secret's key id is believed only under the operator's signature for this resource, and
  // only as a step of the record (adoptable).
  const adopted = adoptable(o, pending);
  if (secret !== undefined && adopted !== undefined) {
    return {
      action: { type: 'Adopt', keyId: adopted, attempt: pending },
      reason: 'Adopting',
      message: `the Secret already holds key ${adopted} of attempt ${pending.attempt}; recording it`,
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
  if (o.credentials !== 'Present') return blockedOnCredentials(o.credentials, `recover attempt ${pending.attempt} while ${doing}`, o.throughIssuer);
  return {
    action: { type: 'Recover', attempt: pending },
    reason: 'Recovering',
    message: `the outcome of attempt ${pending.attempt} is unknown; revoking any key of that name and starting again`,
  };
}

export function decide(o: Observation): Decision {
  const pending = activeIntent(o);

  if (o.deleting) {
    if (!o.hasFinalizer) return { action: { type: 'Nothing' }, reason: 'Deleted', message: 'nothing left to do' };
    if (o.releaseWithoutRevoke) {
      return {
        action: { type: 'Release' },
        reason: 'ReleasedWithoutRevoke',
        message: 'released on request (keys.neon.dev/release-without-revoke); the platform key, if any, was not revoked',
      };
    }
    if (pending === 'Malformed' || pending === 'Unsigned')
      return { action: { type: 'ClearPending' }, reason: 'InvalidAnnotation', message: REFUSED_INTENT[pending] };
    if (pending !== undefined) return pendingDecision(o, pending, 'deleting');
    const keyId = recordedKeyId(o);
    // The replaced keys not revoked yet go with the retiring ones: in no Secret, recorded only here;
    // and the keys of an interrupted create whose intent is gone (orphanKeyIds).
    const lostKeyIds = (o.lostAttempts?.keys ?? []).map((k) => k.keyId).filter((id) => !(o.orphanKeyIds ?? []).includes(id));
    const retiring = [...(o.retiringKeyIds ?? []), ...(o.replacedKeyIds ?? []), ...(o.orphanKeyIds ?? []), ...lostKeyIds];
    const andRetiring = retiring.length > 0 ? ` and retiring key(s) ${retiring.join(', ')}` : '';
    if (retiring.length > 0 && o.credentials !== 'Present') {
      return { ...blockedOnCredentials(o.credentials, `revoke retiring key(s) ${retiring.join(', ')}`, o.throughIssuer), reason: 'CredentialsMissing' };
    }
    // A lost attempt no list has answered for yet (status.lostAttempts): the finalizer stays until
    // a list of the credentials that made it shows its key (revoked) or, past the pending grace, none.
    const unresolved = lostUnresolved(o);
    if (unresolved.length > 0) {
      if (o.credentials !== 'Present')
        return {
          ...blockedOnCredentials(o.credentials, `look for the keys of lost attempt(s) ${unresolved.join(', ')}`, o.throughIssuer),
          reason: 'CredentialsMissing',
        };
      const found = [...(o.orphanKeyIds ?? []), ...lostKeyIds];
      if (found.length > 0)
        return {
          action: { type: 'RevokeOrphans', keyIds: found },
          reason: 'Deleting',
          message: `revoking key(s) ${found.join(', ')} of an interrupted create`,
        };
      return {
        action: { type: 'Blocked', retry: true },
        reason: 'Deleting',
        message: `waiting for a list of the credentials that sent lost attempt(s) ${unresolved.join(', ')}, taken --pending-grace after them, to show their key (revoked then) or none`,
      };
    }
    if (o.deletionPolicy === 'Retain') {
      return {
        action: retiring.length > 0 ? { type: 'Retain', retiring } : { type: 'Retain' },
        reason: 'Retained',
        message:
          (keyId === undefined ? 'no key was issued' : `deletionPolicy Retain: key ${keyId} and its Secret are kept`) +
          (retiring.length > 0 ? `; retiring key(s) ${retiring.join(', ')} revoked` : ''),
      };
    }
    if (keyId === undefined && (o.orphanKeyIds ?? []).length + lostKeyIds.length > 0) {
      const keyIds = [...(o.orphanKeyIds ?? []), ...lostKeyIds];
      return {
        action: { type: 'RevokeOrphans', keyIds },
        reason: 'Deleting',
        message: `revoking key(s) ${keyIds.join(', ')} of an interrupted create whose intent is gone`,
      };
    }
    if (keyId === undefined) return { action: { type: 'Release' }, reason: 'NoKey', message: 'no key was issued; nothing to revoke' };
    if (o.credentials !== 'Present') {
      return { ...blockedOnCredentials(o.credentials, `revoke key ${keyId}`, o.throughIssuer), reason: 'CredentialsMissing' };
    }
    return {
      action: retiring.length > 0 ? { type: 'Revoke', keyId, retiring } : { type: 'Revoke', keyId },
      reason: 'Deleting',
      message: `revoking key ${keyId}${andRetiring}`,
    };
  }

  if (o.specError !== undefined) return { action: { type: 'Blocked', retry: false }, reason: 'InvalidSpec', message: o.specError };
  // Refused before anything is written or asked of the platform; a key issued before stays (never
  // revoked because of a policy) but is neither checked, repaired nor rotated.
  if (o.refusal !== undefined && (pending === undefined || typeof pending !== 'object')) {
    return { action: { type: 'Blocked', retry: false }, reason: o.refusal.reason, message: o.refusal.message };
  }
  if (!o.hasFinalizer) return { action: { type: 'AddFinalizer' }, reason: 'Creating', message: 'adding the finalizer' };
  if (pending === 'Malformed' || pending === 'Unsigned')
    return { action: { type: 'ClearPending' }, reason: 'InvalidAnnotation', message: REFUSED_INTENT[pending] };
  if (pending !== undefined) return pendingDecision(o, pending, 'creating');
  const revoking = o.credentials === 'Present' && o.credentialsChanged !== true;
  // Keys of this resource's attempts recorded nowhere, or by name only: revoked (or moved to
  // status.replacedKeys) before anything else.
  const orphans = revoking ? orphansToRevoke(o, 'RevokingReplaced') : undefined;
  if (orphans !== undefined) return orphans;
  const next = keyDecision(o);
  // A repair's replaced key the platform did not revoke then: with the credentials that issued it
  // (status.replacedKeys is its only record; other credentials' NOT_FOUND would say nothing: it
  // stays recorded until those are back, or until the delete). Before anything else but a new key
  // while the list has room for what it may add: recorded there, it waits for no outage to end.
  const replaced = o.replacedKeyIds ?? [];
  if (replaced.length > 0 && revoking && !(next.action.type === 'Create' && replaced.length < MAX_REPLACED_KEYS)) {
    return { action: { type: 'RevokeReplaced', keyIds: replaced }, reason: 'RevokingReplaced', message: `revoking replaced key(s) ${replaced.join(', ')}` };
  }
  // A create may go ahead while lost attempts are recorded (status.lostAttempts keeps their keys
  // accounted for), but not one more than the list holds: its own answer could be lost too.
  const lost = o.lostAttempts?.names ?? [];
  if (next.action.type === 'Create' && lost.length >= MAX_LOST_ATTEMPTS) {
    return {
      action: { type: 'Wait', afterMs: Math.max(1_000, o.pendingGraceMs) },
      reason: 'Recovering',
      message: `the answers of ${lost.length} creates were lost (${lost.join(', ')}); no new key until a list of the platform's keys shows what became of one of them`,
    };
  }
  return next;
}

/** What to do about the recorded key (or its absence) once no intent, orphan or replaced key comes first. */
function keyDecision(o: Observation): Decision {
  const secret = o.secret;
  const keyId = recordedKeyId(o);
  const create = (replaces: number | undefined, reason: Reason, message: string): Decision =>
    o.credentials !== 'Present'
      ? {
          ...blockedOnCredentials(o.credentials, 'issue a key', o.throughIssuer),
          message: `${message}; cannot issue a key: ${o.throughIssuer === true ? issuerCredentialsMessage : credentialsMessage[o.credentials]}`,
        }
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
      message:
        'a Secret of that name exists and is not controlled by this resource (no controller owner reference with its uid); delete it or choose another spec.secret.name',
    };
  }
  if (keyId === undefined && o.secretNameTakenBy !== undefined) return secretNameTaken(o.secretNameTakenBy, 'no key is issued');
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
    if (o.abandonKey === keyId) {
      const given = create(undefined, 'KeyAbandoned', `key ${keyId} was given up (keys.neon.dev/abandon-key); issuing a new one`);
      // The given-up key goes in the signed intent: it makes the intent fit the record (consistentIntent).
      return given.action.type === 'Create' ? { ...given, action: { type: 'Create', abandons: keyId } } : given;
    }
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'CredentialsChanged',
      message:
        `key ${keyId} was issued with other credentials than the ones now in the credentials Secret, which cannot see it: it may still be live. ` +
        `Put the credentials that issued it back, or revoke key ${keyId} yourself and annotate keys.neon.dev/abandon-key="${keyId}" to issue a new key`,
    };
  }
  // Revoked again once the new key is recorded: should the list have been wrong, no live key is left behind.
  if (o.platform.key === 'Absent') return create(keyId, 'RevokedExternally', `key ${keyId} was revoked outside the operator; issuing a new one`);
  // A key is replaced (or rotated) only with credentials that can revoke it: other credentials than
  // the ones that issued it, which have not shown it in their list, would make the new key the
  // record and get NOT_FOUND for the old one, which then stays live, recorded nowhere (docs/reliability.md,
  // hostile campaign seed 7: a tenant switching a Personal key's credentials between users). Shown
  // means in the list itself: a key presumed live for being newer than the list is not (seed 24:
  // the credentials switched within seconds of the key's create, then its Secret edited).
  const replaceable = credentialsCanRevoke(o);
  const cannotReplace = (why: string): Decision =>
    o.abandonKey === keyId
      ? ((given) => (given.action.type === 'Create' ? { ...given, action: { type: 'Create', abandons: keyId } } : given))(
          create(undefined, 'KeyAbandoned', `key ${keyId} was given up (keys.neon.dev/abandon-key); issuing a new one`),
        )
      : {
          action: { type: 'Blocked', retry: false },
          reason: 'CredentialsChanged',
          message:
            `${why}; key ${keyId} was issued with other credentials than the ones now in the credentials Secret, which cannot revoke it: no new key is issued. ` +
            `Put the credentials that issued it back, or revoke key ${keyId} yourself and annotate keys.neon.dev/abandon-key="${keyId}" to issue a new key`,
        };
  if (secret === undefined) {
    if (!replaceable) return cannotReplace(`the Secret holding key ${keyId} is gone`);
    return create(keyId, 'SecretMissing', `the Secret holding key ${keyId} is gone; issuing a new key and revoking ${keyId}`);
  }
  if (secret.keyId !== keyId || secret.hash === undefined || (o.status.secretHash !== undefined && o.status.secretHash !== secret.hash)) {
    if (!replaceable) return cannotReplace(`the Secret no longer holds key ${keyId} as issued`);
    return create(keyId, 'SecretTampered', `the Secret no longer holds key ${keyId} as issued; issuing a new key and revoking ${keyId}`);
  }
  // The key in it is the recorded one, as issued (checked just above): the rest is rebuilt from it.
  if (secret.inLine === false) {
    return {
      action: { type: 'RewriteSecret', keyId },
      reason: 'SecretRewritten',
      message:
        secret.resign === true
          ? `the Secret's signature is of an earlier format (it did not cover the secret value); re-signing it with key ${keyId}, no new key`
          : `the Secret differs from spec.secret (template labels, annotations or data entries); rewriting it with key ${keyId}, no new key`,
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
  const rotation = o.rotation;
  const due = rotation !== undefined && (rotation.request !== undefined || (rotation.scheduledAt !== undefined && o.now >= rotation.scheduledAt));
  if (o.retiring !== undefined) {
    let step = retirementStep(o.retiring, o.now);
    if ((step.step.step === 'Drop' || step.step.step === 'Revoke') && o.credentialsChanged === true) {
      // Other credentials than the ones that issued it: their list not showing it proves nothing,
      // and their revoke's NOT_FOUND neither.
      step = {
        step: { step: 'Wait', afterMs: 30_000, waitingFor: 'Platform' },
        reason: 'CredentialsChanged',
        message:
          `retiring key ${o.retiring.keyId} was issued with other credentials than the current ` +
          `ones, which cannot see or revoke it; it stays recorded until the credentials that issued it are back`,
      };
    }
    if (step.step.step === 'Revoke' && o.credentials !== 'Present') {
      step = {
        step: { step: 'Wait', afterMs: 5_000, waitingFor: 'Platform' },
        reason: 'CredentialsMissing',
        message: `cannot revoke retiring key ${o.retiring.keyId}: ${o.throughIssuer === true ? issuerCredentialsMessage : credentialsMessage[o.credentials]}`,
      };
    }
    const waiting = due ? `; the requested rotation waits until key ${o.retiring.keyId} is retired` : '';
    return { action: { type: 'Retire', keyId, retiring: o.retiring.keyId, step: step.step }, reason: step.reason, message: step.message + waiting };
  }
  // Without credentials nothing can be issued: the live key stays, and the rotation waits for them;
  // nor with credentials that cannot revoke the key it would replace (as for a repair, above).
  if (due && o.secretNameTakenBy !== undefined) return secretNameTaken(o.secretNameTakenBy, `key ${keyId} is due for rotation and stays live, not rotated`);
  if (due && o.credentials === 'Present' && !replaceable) return cannotReplace(`key ${keyId} is due for rotation`);
  if (due && o.credentials === 'Present') {
    const request = rotation.request;
    return {
      action: { type: 'Create', replaces: keyId, rotation: request !== undefined ? { request } : {} },
      reason: 'RotationStarted',
      message:
        request !== undefined
          ? `rotation requested (keys.neon.dev/rotate="${request}"): issuing a new key; key ${keyId} stays live until its consumers moved`
          : `key ${keyId} is due for rotation (spec.rotation.interval): issuing a new key; key ${keyId} stays live until its consumers moved`,
    };
  }
  return { action: { type: 'InSync', keyId }, reason: 'Ready', message: `key ${keyId} is live and its secret is in the Secret` };
}

/** Another resource owns the Secret name (Observation.secretNameTakenBy): `what` this one does not do, and why. */
function secretNameTaken(owner: string, what: string): Decision {
  return {
    action: { type: 'Blocked', retry: false },
    reason: 'SecretConflict',
    message:
      `${what}: ${owner}, created earlier, names the same Secret (spec.secret.name, default metadata.name) and one of the two writes immutable Secrets; ` +
      'a Secret name belongs to one resource of the namespace, so that a workload consenting to it is restarted once per rotation; choose another spec.secret.name',
  };
}

/**
 * last_used_at comes in whole seconds, and the emulator (like any platform that does not write on
 * every request) updates it at most once a second: a key in steady use can look this much older.
 */
const LAST_USED_PRECISION_MS = 2_000;

const seconds = (ms: number): string => `${Math.max(0, Math.ceil(ms / 1000))}s`;

/**
 * The next step of a replaced key's retirement (docs/rotation.md). Never revoked
 * before every restarted rollout completed (maxGracePeriod does not override that); then not
 * before gracePeriod after the switch (and after the rollouts completed); then only once the key
 * went unused for gracePeriod, which maxGracePeriod after the switch cuts short.
 */
export function retirementStep(r: RetiringObservation, now: number): { step: RetireStep; reason: Reason; message: string } {
  const id = r.keyId;
  if (r.platform.state === 'Absent')
    return { step: { step: 'Drop' }, reason: 'KeyRetired', message: `replaced key ${id} is no longer on the platform; dropped from status.retiringKeys` };
  if (r.restart === 'Due')
    return {
      step: { step: 'RestartConsumers' },
      reason: 'RetiringKey',
      message: `restarting the consumers of the Secret; key ${id} stays live until they moved`,
    };
  const deadline = r.since + r.maxGraceMs;
  if (!r.rollouts.complete) {
    const stalled = r.rollouts.stalled.length > 0 || now >= deadline;
    const names = (stalled && r.rollouts.stalled.length > 0 ? r.rollouts.stalled : r.rollouts.waitingFor).join(', ');
    return stalled
      ? {
          step: { step: 'Wait', afterMs: 30_000, waitingFor: 'Rollouts', stalled: true },
          reason: 'RolloutStalled',
          message: `the rollout of ${names} is stalled; key ${id} stays live until it completes (maxGracePeriod does not cut a restart short)`,
        }
      : {
          step: { step: 'Wait', afterMs: 5_000, waitingFor: 'Rollouts' },
          reason: 'RetiringKey',
          message: `waiting for the rollout of ${names} to complete before retiring key ${id}`,
        };
  }
  const quietFrom = Math.max(r.since, r.rollouts.completedAt ?? r.since);
  if (now < quietFrom + r.graceMs && now < deadline) {
    return {
      step: { step: 'Wait', afterMs: Math.min(quietFrom + r.graceMs, deadline) - now, waitingFor: 'Grace' },
      reason: 'RetiringKey',
      message: `key ${id} stays live for its grace period (${seconds(quietFrom + r.graceMs - now)} left)`,
    };
  }
  if (r.platform.state === 'Unknown') {
    if (now >= deadline)
      return {
        step: { step: 'Revoke', stillInUse: false },
        reason: 'KeyRetired',
        message: `maxGracePeriod is over; revoking key ${id} (its last use could not be read: ${r.platform.message})`,
      };
    return {
      step: { step: 'Wait', afterMs: 5_000, waitingFor: 'Platform' },
      reason: 'RetiringKey',
      message: `the last use of key ${id} cannot be read (${r.platform.message}); it stays live`,
    };
  }
  // What a snapshot shows is what it showed when taken: unused for the grace period as of seenAt,
  // and seenAt after the grace period began, or it says nothing about the uses since.
  const { seenAt } = r.platform;
  if (seenAt < quietFrom + r.graceMs && now < deadline) {
    return {
      step: { step: 'Wait', afterMs: 1_000, waitingFor: 'Platform' },
      reason: 'RetiringKey',
      message: `waiting for a list of the platform's keys taken after the grace period of key ${id}`,
    };
  }
  const lastUsed = r.platform.lastUsedAt;
  if (lastUsed !== undefined && seenAt - lastUsed < r.graceMs + LAST_USED_PRECISION_MS) {
    const from = r.platform.lastUsedFromAddr !== undefined && r.platform.lastUsedFromAddr !== '' ? ` from ${r.platform.lastUsedFromAddr}` : '';
    const used = `key ${id} was used${from} at ${new Date(lastUsed).toISOString()}, after the Secret switched`;
    if (now >= deadline)
      return { step: { step: 'Revoke', stillInUse: true }, reason: 'OldKeyStillInUse', message: `${used}; maxGracePeriod is over: revoking it` };
    return {
      step: { step: 'Wait', afterMs: Math.min(5_000, deadline - now), waitingFor: 'Usage' },
      reason: 'OldKeyStillInUse',
      message: `${used}; it stays live until unused for the grace period, at most until ${new Date(deadline).toISOString()} (maxGracePeriod)`,
    };
  }
  return { step: { step: 'Revoke', stillInUse: false }, reason: 'KeyRetired', message: `key ${id} is no longer used; revoking it` };
}
