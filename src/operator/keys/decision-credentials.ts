// What decide() says when the credentials are missing or cannot act on the recorded key.

import { MAX_API_KEY_LENGTH } from '../../platform/index.ts';
import type { Credentials, Decision, Observation } from './decision-types.ts';

export const credentialsMessage: Record<Exclude<Credentials, 'Present'>, string> = {
  SecretNotFound: 'the credentials Secret named in spec.credentialsSecretRef does not exist in this namespace; create it with a platform API key',
  KeyNotFound: 'the credentials Secret has no (or an empty) entry named by spec.credentialsSecretRef.key; put a platform API key there',
  NotAKey: `the entry spec.credentialsSecretRef.key of the credentials Secret is not a platform API key (at most ${MAX_API_KEY_LENGTH} visible ASCII characters); put a platform API key there`,
};

/** Through an issuer (spec.issuerRef), its credentials are the platform team's: said so. */
export const issuerCredentialsMessage =
  'the credentials Secret of the ClusterKeyIssuer in spec.issuerRef is missing, empty or not a platform API key (its Ready condition says which); ask your platform team';

export function blockedOnCredentials(credentials: Exclude<Credentials, 'Present'>, doing: string, throughIssuer = false): Decision {
  return {
    action: { type: 'Blocked', retry: true },
    reason: 'CredentialsMissing',
    message: `cannot ${doing}: ${throughIssuer ? issuerCredentialsMessage : credentialsMessage[credentials]}`,
  };
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
