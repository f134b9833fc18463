// One org key limiter per organization, shared by every platform client of the operator
// (docs/design.md section 5.3), kept only while it holds something.
import { SlidingWindowLimiter } from '../../../platform/index.ts';
import { organizationSlots } from '../issuing/organization-share.ts';
import { FairLimiter } from './fair-limiter.ts';

/** The limiter of each organization, as PlatformClient asks for it, and how many are kept. */
export interface OrgKeyLimiters<B> {
  (orgId: string): B;
  /** Limiters kept now (tests: bounded). */
  readonly size: number;
}

/** How often, at most, the limiters are looked over for idle ones (at a look-up). */
const ORG_LIMITERS_PRUNE_MS = 1_000;

/**
 * One limiter per organization for org key creation, shared by every worker and credentials:
 * the platform limits key creation per organization (10/s each), so one process-wide bucket would
 * cap an operator serving many organizations at 10 keys/s in total.
 *
 * Kept only while it holds something: at a look-up at least a second after the last, every idle
 * limiter is dropped (its idle(): nobody waits, nothing in flight, nothing in its window, nothing
 * that would make a new one behave differently); one made again later is the same. A limiter that
 * cannot tell (no idle()) is kept. So the count is the organizations with a create waiting, in
 * flight or answered within the limiter's memory (10 s for the org key limiter: its round trips),
 * plus those with a 429 in their history (docs/security.md, Bounds), whatever ids were ever named.
 */
export function orgKeyLimiters<B extends object>(make: () => B, now: () => number = () => performance.now()): OrgKeyLimiters<B> {
  const buckets = new Map<string, B>();
  let prunedAt = Number.NEGATIVE_INFINITY;
  const limiterFor = (orgId: string): B => {
    const at = now();
    if (at - prunedAt >= ORG_LIMITERS_PRUNE_MS) {
      prunedAt = at;
      for (const [id, bucket] of buckets) if ((bucket as { idle?: () => boolean }).idle?.() === true) buckets.delete(id);
    }
    let bucket = buckets.get(orgId);
    if (bucket === undefined) {
      bucket = make();
      buckets.set(orgId, bucket);
    }
    return bucket;
  };
  return Object.defineProperty(limiterFor, 'size', { get: () => buckets.size }) as OrgKeyLimiters<B>;
}

/**
 * The org key limiters every platform client of the operator shares (docs/design.md section 5.3): at
 * most `slots` creations in any second as the platform counts them (10, or this cluster's share of
 * them: keys/issuing/organization-share.ts), each counted from its answer
 * (src/platform/sliding-window.ts). Their waiters go in fair turns between namespaces, a broken key
 * first, and their permits are spread while several namespaces create (fair-limiter.ts):
 * 0.9 of the even spacing apart at least (90 ms at 10 a second), so that a round trip's jitter does
 * not hold back a slot free on time.
 */
export function operatorOrgKeyLimiters(slots = organizationSlots()): OrgKeyLimiters<FairLimiter> {
  return orgKeyLimiters(() => new FairLimiter(new SlidingWindowLimiter({ limit: slots }), { spacingMs: 900 / slots }));
}
