// The create intent as decide() reads it (docs/design.md section 3.1): whether it fits the record,
// whether it is fulfilled, what is done with an interrupted one (adopt, wait, recover, clear), and
// the keys of attempts whose intent or answer was lost.

import type { InternalReason, Reason } from './status/conditions.ts';
import { blockedOnCredentials, credentialsCanRevoke } from './decision-credentials.ts';
import type { Decision, Observation, PendingAttempt, RefusedIntent } from './decision-types.ts';

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

/**
 * The RevokeOrphans of this pass, if any: tag-found orphans, keys of status.lostAttempts' names,
 * and names known to have left no key (dropped).
 */
export function orphansToRevoke(o: Observation, reason: Reason | InternalReason): Decision | undefined {
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

export const REFUSED_INTENT: Record<RefusedIntent, string> = {
  Malformed: 'the keys.neon.dev/create-pending annotation is not readable; clearing it without revoking anything',
  Unsigned:
    'the keys.neon.dev/create-pending annotation was not written by this operator for this resource (no valid signature); clearing it without revoking anything',
};

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

export function pendingDecision(o: Observation, pending: PendingAttempt, doing: string): Decision {
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
