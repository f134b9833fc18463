// decide() for a resource with no intent to finish: its recorded key (or none) against its Secret,
// its credentials and the platform: issue, repair, rewrite the Secret, rotate, retire a replaced
// key, or report it in sync.

import type { Reason } from './status/conditions.ts';
import { blockedOnCredentials, credentialsCanRevoke, credentialsMessage, issuerCredentialsMessage } from './decision-credentials.ts';
import { recordedKeyId } from './decision-intent.ts';
import { retirementStep } from './decision-retirement.ts';
import type { Decision, Observation } from './decision-types.ts';

/** What to do about the recorded key (or its absence) once no intent, orphan or replaced key comes first. */
export function keyDecision(o: Observation): Decision {
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
