// "What next?" for one key resource: a pure function of what the reconciler observed (the resource,
// its Secret, the credentials, the platform) returning ONE action and the reason for it
// (cert-manager's policy checks, crossplane's single lifecycle). The effects live in reconciler.ts and the actions it runs;
// this file does no I/O, so every branch is a row in test/operator/keys/decision.test.ts.
//
// The crash-safe create protocol is docs/design.md section 3.1: intent (the create-pending annotation)
// before the POST, the Secret before the status, recovery when an intent has no recorded outcome.

import { MAX_LOST_ATTEMPTS } from '../resources/schema.ts';
import { deletionDecision } from './decision-deletion.ts';
import { activeIntent, orphansToRevoke, pendingDecision, REFUSED_INTENT } from './decision-intent.ts';
import { keyDecision } from './decision-live-key.ts';
import type { Decision, Observation } from './decision-types.ts';

// Re-exported for the files that import them from here.

/** status.replacedKeys holds at most this many keys (the CRD's bound). */
export const MAX_REPLACED_KEYS = 8;

export function decide(o: Observation): Decision {
  const pending = activeIntent(o);

  if (o.deleting) {
    return deletionDecision(o, pending);
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
  // Replaced keys recorded under other credentials than the Secret's now: a new key's record would
  // name the new credentials as the ones status.replacedKeys was found with, and their NOT_FOUND
  // would then drop keys they cannot see. No new key until those credentials are back.
  if (replaced.length > 0 && o.credentialsChanged === true && next.action.type === 'Create') {
    return {
      action: { type: 'Blocked', retry: false },
      reason: 'CredentialsChanged',
      message:
        `replaced key(s) ${replaced.join(', ')} were found with other credentials than the ones now in the credentials Secret, which cannot see them: ` +
        `they may still be live. Put those credentials back to revoke them; no new key is issued until then`,
    };
  }
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
