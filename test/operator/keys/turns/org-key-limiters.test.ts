// The operator's client-side limiter on org key creation is one bucket per organization, as the
// platform limits key creation per organization (10/s each): a process-wide bucket would cap an
// operator serving many organizations at 10 keys/s in total (bench/operator.ts, issue 7).
import { describe, expect, it } from '@jest/globals';
import { orgKeyLimiters } from '../../../../src/operator/manager.ts';
import { TokenBucket, type BucketClock } from '../../../../src/platform/token-bucket.ts';

const frozen: BucketClock = { now: () => 0, schedule: () => () => undefined };

describe('orgKeyLimiters', () => {
  it('gives each organization its own bucket and the same bucket to the same organization', () => {
    const limiterFor = orgKeyLimiters(() => new TokenBucket({ ratePerSecond: 10, clock: frozen }));
    expect(limiterFor('org-a')).toBe(limiterFor('org-a'));
    expect(limiterFor('org-a')).not.toBe(limiterFor('org-b'));
  });

  it("does not make one organization wait for another one's creations", () => {
    const limiterFor = orgKeyLimiters(() => new TokenBucket({ ratePerSecond: 10, clock: frozen }));
    expect(limiterFor('org-a').tryTake()).toBe(true);
    expect(limiterFor('org-a').tryTake()).toBe(false); // org-a's token is spent (clock frozen)
    expect(limiterFor('org-b').tryTake()).toBe(true); // org-b still has its own
  });
});
