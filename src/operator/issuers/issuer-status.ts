// The status an issuer should have, and whether it must be written at all (pure). An issuer at rest
// costs no apiserver write: status is written when something in it other than verifiedAt changes,
// and otherwise only to refresh verifiedAt once it is VERIFIED_AT_REFRESH_MS old.
import type { ClusterKeyIssuerStatus } from '../resources/issuer.ts';
import { isoSeconds, withReady, type Readiness } from './conditions.ts';
import type { IssuerUser } from './verification.ts';
import { sameJson } from '../resources/same-json.ts';

/** How old status.verifiedAt may grow while nothing else changes. */
export const VERIFIED_AT_REFRESH_MS = 60 * 60_000;

export interface StatusInput {
  generation: number;
  readiness: Readiness;
  /** How many key resources name the issuer (from the caches). */
  resources: number;
  /** When the credentials were verified for this status; undefined: not in this pass (nothing new is dated). */
  verifiedAt: number | undefined;
  now: number;
}

/** status.user within the schema's bounds. */
function userStatus(user: IssuerUser): NonNullable<ClusterKeyIssuerStatus['user']> {
  return {
    id: user.id.slice(0, 128),
    ...(user.email !== undefined ? { email: user.email.slice(0, 256) } : {}),
    ...(user.role !== undefined ? { role: user.role.slice(0, 32) } : {}),
  };
}

/** The status to write, or undefined when the current one stands. */
export function nextStatus(current: ClusterKeyIssuerStatus | undefined, input: StatusInput): ClusterKeyIssuerStatus | undefined {
  const { readiness } = input;
  const user = readiness.user === 'keep' ? current?.user : readiness.user !== undefined ? userStatus(readiness.user) : undefined;
  const next: ClusterKeyIssuerStatus = {
    observedGeneration: input.generation,
    ...(user !== undefined ? { user } : {}),
    resources: input.resources,
    conditions: withReady(current?.conditions, readiness.ready, input.generation, input.now),
  };
  const { verifiedAt: currentVerifiedAt, ...rest } = current ?? {};
  const verifiedAt = input.verifiedAt !== undefined ? isoSeconds(input.verifiedAt) : currentVerifiedAt;
  if (!sameJson(next, rest)) return { ...next, ...(verifiedAt !== undefined ? { verifiedAt } : {}) };
  if (input.verifiedAt === undefined) return undefined;
  const last = currentVerifiedAt !== undefined ? Date.parse(currentVerifiedAt) : Number.NaN;
  return Number.isFinite(last) && input.verifiedAt - last < VERIFIED_AT_REFRESH_MS ? undefined : { ...next, verifiedAt: isoSeconds(input.verifiedAt) };
}
