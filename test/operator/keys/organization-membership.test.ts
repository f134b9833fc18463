// The organizations of a credentials value (issuing/organization-membership.ts): asked once per
// interval, shared by concurrent askers, and bounded whatever organization ids the tenants name.
import { describe, expect, it } from '@jest/globals';
import { MAX_ORGANIZATIONS, OrganizationMemberships } from '../../../src/operator/keys/issuing/organization-membership.ts';
import { MAX_CLIENTS } from '../../../src/operator/keys/platform-clients.ts';

describe('OrganizationMemberships', () => {
  it('asks once per interval for any number of organization ids: 10,000 distinct ids named keep nothing more than the answer', async () => {
    let now = 0;
    const memberships = new OrganizationMemberships(60_000, () => now);
    let asked = 0;
    const ask = async (): Promise<{ id: string }[]> => {
      asked++;
      return [{ id: 'org-mine' }];
    };
    const answers = await Promise.all(Array.from({ length: 10_000 }, (_, i) => memberships.isMember('creds-1', `org-random-${i}`, ask)));
    expect(answers.every((a) => !a)).toBe(true);
    expect(await memberships.isMember('creds-1', 'org-mine', ask)).toBe(true);
    expect(asked).toBe(1);
    expect(memberships.size).toEqual({ credentials: 1, organizations: 1, secrets: 0 });
    now += 60_000;
    expect(await memberships.isMember('creds-1', 'org-mine', ask)).toBe(true);
    expect(asked).toBe(2);
  });

  it('keeps at most MAX_CLIENTS credentials and MAX_ORGANIZATIONS organizations of each', async () => {
    const memberships = new OrganizationMemberships(60_000, () => 0);
    const many = Array.from({ length: MAX_ORGANIZATIONS + 500 }, (_, i) => ({ id: `org-${i}` }));
    for (let i = 0; i < MAX_CLIENTS + 20; i++) await memberships.isMember(`creds-${i}`, 'org-0', async () => many);
    expect(memberships.size.credentials).toBe(MAX_CLIENTS);
    expect(memberships.size.organizations).toBe(MAX_CLIENTS * MAX_ORGANIZATIONS);
    // An organization past the kept ones is asked about again, never taken as not a member.
    expect(await memberships.isMember(`creds-${MAX_CLIENTS + 19}`, `org-${MAX_ORGANIZATIONS + 10}`, async () => many)).toBe(true);
    for (let i = 0; i < MAX_CLIENTS + 20; i++) memberships.learn(`ns/creds@${i}`, `creds-${i}`);
    expect(memberships.size.secrets).toBe(MAX_CLIENTS);
  });

  it('knows a credentials Secret as a member only at the version it was read with, and only while the answer is fresh', async () => {
    let now = 0;
    const memberships = new OrganizationMemberships(60_000, () => now);
    memberships.learn('team/neon-admin@7', 'creds-1');
    expect(memberships.knownMember('team/neon-admin@7', 'org-mine')).toBe(false);
    await memberships.isMember('creds-1', 'org-mine', async () => [{ id: 'org-mine' }]);
    expect(memberships.knownMember('team/neon-admin@7', 'org-mine')).toBe(true);
    expect(memberships.knownMember('team/neon-admin@8', 'org-mine')).toBe(false);
    expect(memberships.knownMember('team/neon-admin@7', 'org-other')).toBe(false);
    now += 60_000;
    expect(memberships.knownMember('team/neon-admin@7', 'org-mine')).toBe(false);
  });

  it('a failed answer is not remembered: the next create asks again', async () => {
    const memberships = new OrganizationMemberships(60_000, () => 0);
    await expect(memberships.isMember('creds-1', 'org-mine', async () => { throw new Error('503'); })).rejects.toThrow('503');
    expect(await memberships.isMember('creds-1', 'org-mine', async () => [{ id: 'org-mine' }])).toBe(true);
  });
});
