// Whether an issuer's credentials are what an issuer needs (docs/design.md section 1.5): a personal
// API key of an administrator of the issuer's organization. Three reads, in order, each deciding
// what the next can tell: GET /auth (which kind of key), GET /users/me (whose), the organization's
// members (their role). The outcome is data for conditions.ts; nothing here writes anything, and
// nothing here ever holds the key itself (the platform client does).
import { isPlatformError, type CallOptions, type PlatformClient, type PlatformError } from '../../platform/index.ts';
import { platformFailureReason } from '../keys/index.ts';

/** The slice of the platform client a verification calls (typed from src/platform). */
export type IssuerPlatform = Pick<PlatformClient, 'getAuth' | 'getCurrentUser' | 'listOrganizationMembers'>;

/** Whose credentials they are, as far as the platform told. */
export interface IssuerUser {
  id: string;
  email?: string;
  /** Their role in the issuer's organization; undefined when they are not a member. */
  role?: string;
}

/** What a verification found. `failure`: the platform error that ended it, for its code and request id. */
export type Verification =
  | { outcome: 'Verified'; user: IssuerUser }
  /** GET /auth answered for an organization or project-scoped key (`auth_method` not api_key_user). */
  | { outcome: 'WrongKind'; authMethod: string; accountId: string }
  /** 401 (or 403 to the key itself): missing, invalid or revoked. */
  | { outcome: 'Refused'; failure: PlatformError }
  | { outcome: 'NotAMember'; user: IssuerUser; failure?: PlatformError }
  | { outcome: 'NotAnAdministrator'; user: IssuerUser }
  /** The platform did not answer usefully (after the client's own retries): nothing is known. */
  | { outcome: 'Unavailable'; rateLimited: boolean; failure: PlatformError };

/** The role the platform gives an organization's administrators (docs/platform-api.md, List organization members). */
export const ADMIN_ROLE = 'admin';

/**
 * Verifies the credentials `platform` acts with for `organizationId`. A failure that is not the
 * platform's (a bug) is thrown.
 */
export async function verifyCredentials(platform: IssuerPlatform, organizationId: string, opts?: CallOptions): Promise<Verification> {
  try {
    const auth = await platform.getAuth(opts);
    if (auth.auth_method !== 'api_key_user') return { outcome: 'WrongKind', authMethod: auth.auth_method, accountId: auth.account_id };
    const me = await platform.getCurrentUser(opts);
    const who: IssuerUser = { id: me.id, ...(me.email !== undefined ? { email: me.email } : {}) };
    let members;
    try {
      members = await platform.listOrganizationMembers(organizationId, opts);
    } catch (error) {
      // The platform answers 403 (or 404) to a user who is not a member: the organization is not theirs to see.
      if (isPlatformError(error) && (error.code === 'FORBIDDEN' || error.code === 'NOT_FOUND')) return { outcome: 'NotAMember', user: who, failure: error };
      throw error;
    }
    const member = members.find((m) => m.userId === me.id);
    if (member === undefined) return { outcome: 'NotAMember', user: who };
    const user: IssuerUser = { ...who, ...(member.email !== undefined ? { email: member.email } : {}), role: member.role };
    return member.role === ADMIN_ROLE ? { outcome: 'Verified', user } : { outcome: 'NotAnAdministrator', user };
  } catch (error) {
    if (!isPlatformError(error)) throw error;
    if (error.code === 'UNAUTHORIZED' || error.code === 'FORBIDDEN') return { outcome: 'Refused', failure: error };
    return { outcome: 'Unavailable', rateLimited: platformFailureReason(error) === 'RateLimited', failure: error };
  }
}
