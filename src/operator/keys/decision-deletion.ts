// decide() for a resource being deleted: revoke its key and the keys only status records, retain
// them, or release the resource; an interrupted create is finished or recovered first.

import { blockedOnCredentials } from './decision-credentials.ts';
import { lostUnresolved, pendingDecision, recordedKeyId, REFUSED_INTENT } from './decision-intent.ts';
import type { Decision, Observation } from './decision-types.ts';

/** What to do about a resource being deleted; `pending`, the intent decide() acts on (activeIntent). */
export function deletionDecision(o: Observation, pending: Observation['pending']): Decision {
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
  if (keyId === undefined && retiring.length === 0) return { action: { type: 'Release' }, reason: 'NoKey', message: 'no key was issued; nothing to revoke' };
  if (keyId === undefined) {
    // No key in a Secret, and keys only status records: a create's key never written to its Secret
    // and not revoked then (status.replacedKeys), or a rotation's. They go with the resource.
    return { action: { type: 'Revoke', retiring }, reason: 'Deleting', message: `revoking key(s) ${retiring.join(', ')}, recorded in status only` };
  }
  if (o.credentials !== 'Present') {
    return { ...blockedOnCredentials(o.credentials, `revoke key ${keyId}`, o.throughIssuer), reason: 'CredentialsMissing' };
  }
  return {
    action: retiring.length > 0 ? { type: 'Revoke', keyId, retiring } : { type: 'Revoke', keyId },
    reason: 'Deleting',
    message: `revoking key ${keyId}${andRetiring}`,
  };
}
