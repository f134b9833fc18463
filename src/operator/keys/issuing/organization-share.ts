// A cluster's share of each organization's key creations (--organization-rate-share,
// docs/clusters.md). The platform counts at most 10 creations arriving in any second per
// organization, whoever sends them; clusters creating keys in one organization each keep to their
// share, so that together they never pass it. A share is taken in creations a second, a whole
// number (the window counts whole requests): floor(10 × share), 0.5 → 5, 0.33 → 3. Shares that add
// up to at most 1 can never together draw a 429, since each cluster's limiter lets at most its
// number of creations arrive in any second (src/platform/sliding-window.ts).
import { ORG_KEY_CREATIONS_PER_SECOND } from '../../../platform/index.ts';

/** The smallest share: one creation a second. */
export const MIN_ORGANIZATION_SHARE = 1 / ORG_KEY_CREATIONS_PER_SECOND;

/** Why `share` cannot be a share, or undefined when it can. */
export function organizationShareProblem(share: number): string | undefined {
  if (!Number.isFinite(share) || share < MIN_ORGANIZATION_SHARE - 1e-9 || share > 1) return `a number from ${MIN_ORGANIZATION_SHARE} to 1`;
  return undefined;
}

/** The creations a second this cluster lets arrive per organization with `share` (1: the platform's 10); a RangeError for no share. */
export function organizationSlots(share = 1): number {
  const problem = organizationShareProblem(share);
  if (problem !== undefined) throw new RangeError(`organization rate share ${share}: not ${problem}`);
  return Math.max(1, Math.floor(ORG_KEY_CREATIONS_PER_SECOND * share + 1e-9));
}
