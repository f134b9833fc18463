// An issuer's Ready condition, computed from what was observed (pure): the credentials Secret, the
// verification (verification.ts), or a deletion waiting for the resources that use the issuer.
// Reasons are a closed union; messages say what to do, and never carry the key.
import type { Condition } from '../resources/key-status.ts';
import type { IssuerUser, Verification } from './verification.ts';

export type IssuerReason =
  | 'Verified'
  | 'InvalidSpec'
  | 'CredentialsMissing'
  | 'CredentialsWrongKind'
  | 'CredentialsRefused'
  | 'NotAMember'
  | 'NotAnAdministrator'
  | 'RateLimited'
  | 'PlatformUnavailable'
  | 'DeletionBlocked';

/** Every reason, with what it means (docs/runbook.md says what to do for each). */
export const ISSUER_REASONS: Readonly<Record<IssuerReason, string>> = {
  Verified: 'The credentials are a personal API key of an administrator of the organization.',
  InvalidSpec: "The spec cannot be read (the CRD's validation should have refused it).",
  CredentialsMissing: 'The credentials Secret, or its entry, is missing or empty in the issuer namespace, or does not hold an API key.',
  CredentialsWrongKind: 'The credentials are an organization or project-scoped key; an issuer needs a personal key of an administrator.',
  CredentialsRefused: 'The platform refused the credentials (401): the key is invalid or revoked.',
  NotAMember: "The key's user is not a member of the organization.",
  NotAnAdministrator: "The key's user is a member of the organization but not an administrator.",
  RateLimited: 'The platform rate-limited the verification (429); Ready is Unknown until it answers.',
  PlatformUnavailable: 'The platform did not answer the verification usefully; Ready is Unknown until it does.',
  DeletionBlocked: 'The issuer is being deleted and key resources still name it: its finalizer stays until none does.',
};

export interface ReadyUpdate {
  status: 'True' | 'False' | 'Unknown';
  reason: IssuerReason;
  message: string;
}

/** Where the credentials are: for messages. */
export interface SecretRef {
  namespace: string;
  name: string;
  key: string;
}

/** Not an API key to verify: the Secret's problem, found before any platform request. */
export type CredentialsProblem = 'missing' | 'not-a-key';

/** What the condition says of the user, and whether status.user changes (`keep`: nothing new is known). */
export interface Readiness {
  ready: ReadyUpdate;
  user: IssuerUser | undefined | 'keep';
}

function describeUser(user: IssuerUser): string {
  return user.email !== undefined ? `${user.email} (user ${user.id})` : `user ${user.id}`;
}

function requestOf(failure: { requestId?: string } | undefined): string {
  return failure?.requestId !== undefined ? ` (request ${failure.requestId})` : '';
}

export function credentialsProblem(problem: CredentialsProblem, ref: SecretRef, organizationId: string): Readiness {
  const message =
    problem === 'missing'
      ? `the credentials Secret ${ref.namespace}/${ref.name} (key ${ref.key}) is missing or empty; put a personal API key of an administrator of ${organizationId} there`
      : `the entry ${ref.key} of the credentials Secret ${ref.namespace}/${ref.name} is not a platform API key; put a personal API key of an administrator of ${organizationId} there`;
  return { ready: { status: 'False', reason: 'CredentialsMissing', message }, user: undefined };
}

export function invalidSpec(detail: string): Readiness {
  return { ready: { status: 'False', reason: 'InvalidSpec', message: detail }, user: 'keep' };
}

/** The condition of a verification's outcome. */
export function verified(v: Verification, ref: SecretRef, organizationId: string): Readiness {
  const put = `put a personal API key of an administrator of ${organizationId} in ${ref.namespace}/${ref.name}`;
  switch (v.outcome) {
    case 'Verified':
      return {
        ready: { status: 'True', reason: 'Verified', message: `a personal API key of ${describeUser(v.user)}, an administrator of ${organizationId}` },
        user: v.user,
      };
    case 'WrongKind':
      return {
        ready: {
          status: 'False',
          reason: 'CredentialsWrongKind',
          message:
            `the credentials are ${v.authMethod === 'api_key_org' ? `an organization key (or a project-scoped key) of ${v.accountId}` : `not an API key of a user (${v.authMethod})`}; ` +
            `an issuer needs a personal key of an administrator: ${put}`,
        },
        user: undefined,
      };
    case 'Refused':
      return {
        ready: {
          status: 'False',
          reason: 'CredentialsRefused',
          message: `the platform refused the credentials (${v.failure.status ?? v.failure.code})${requestOf(v.failure)}: the key is invalid or revoked; ${put}`,
        },
        user: undefined,
      };
    case 'NotAMember':
      return {
        ready: {
          status: 'False',
          reason: 'NotAMember',
          message: `the credentials are a personal key of ${describeUser(v.user)}, who is not a member of ${organizationId}${requestOf(v.failure)}; make them an administrator of it, or ${put}`,
        },
        user: v.user,
      };
    case 'NotAnAdministrator':
      return {
        ready: {
          status: 'False',
          reason: 'NotAnAdministrator',
          message: `the credentials are a personal key of ${describeUser(v.user)}, a ${v.user.role ?? 'member'} of ${organizationId}, not an administrator; make them an administrator, or ${put}`,
        },
        user: v.user,
      };
    case 'Unavailable':
      return {
        ready: {
          status: 'Unknown',
          reason: v.rateLimited ? 'RateLimited' : 'PlatformUnavailable',
          message:
            `the platform did not answer the verification usefully ` +
            `(${v.failure.code}${v.failure.status !== undefined ? ` ${v.failure.status}` : ''})${requestOf(v.failure)}; verified again every drift interval`,
        },
        user: 'keep',
      };
  }
}

/** The most resources a DeletionBlocked message names. */
export const MAX_NAMED_USERS = 10;

/**
 * Deletion waits for the resources naming the issuer: `users` are their work-queue keys
 * (`kind/namespace/name`), named as `namespace/name` (sorted, at most MAX_NAMED_USERS).
 */
export function deletionBlocked(users: readonly string[]): Readiness {
  const names = users.map((key) => key.slice(key.indexOf('/') + 1)).sort();
  const shown = names.slice(0, MAX_NAMED_USERS).join(', ');
  const more = names.length > MAX_NAMED_USERS ? ` and ${names.length - MAX_NAMED_USERS} more` : '';
  const message =
    `deletion waits for ${names.length} resource${names.length === 1 ? '' : 's'} that ` +
    `use${names.length === 1 ? 's' : ''} this issuer: ${shown}${more}; delete them, or point their spec.issuerRef elsewhere`;
  return { ready: { status: 'False', reason: 'DeletionBlocked', message }, user: 'keep' };
}

/** A status timestamp: RFC 3339 to the second. */
export function isoSeconds(at: number): string {
  return new Date(at).toISOString().replace(/\.\d+Z$/, 'Z');
}

/** The conditions with Ready set: its lastTransitionTime kept while its status does not change; other types kept. */
export function withReady(existing: readonly Condition[] | undefined, update: ReadyUpdate, generation: number, now: number): Condition[] {
  const previous = existing?.find((c) => c.type === 'Ready');
  const ready: Condition = {
    type: 'Ready',
    status: update.status,
    observedGeneration: generation,
    lastTransitionTime: previous !== undefined && previous.status === update.status ? previous.lastTransitionTime : isoSeconds(now),
    reason: update.reason,
    message: update.message,
  };
  return [...(existing ?? []).filter((c) => c.type !== 'Ready'), ready];
}
