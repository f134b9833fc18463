// The organizations of a credentials value (issuing/organization-membership.ts): asked once per
// interval, shared by concurrent askers, and bounded whatever organization ids the tenants name.
import { describe, expect, it } from '@jest/globals';
import { MAX_ORGANIZATIONS, OrganizationMemberships } from '../../../../src/operator/keys/issuing/organization-membership.ts';
import { MAX_CLIENTS } from '../../../../src/operator/keys/platform-clients.ts';
import { NAMESPACE, keyResource, rig } from '../fakes.ts';

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
    expect(memberships.size).toEqual({ credentials: 1, organizations: 1, secrets: 0, issuers: 0 });
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

  it("knows an issuer's organization for a namespace only at the generation a create through it was admitted, at most MAX_CLIENTS of them", () => {
    const memberships = new OrganizationMemberships(60_000, () => 0);
    expect(memberships.knownIssuer('team/keys@uid-1@3', 'org-mine')).toBe(false);
    memberships.learnIssuer('team/keys@uid-1@3', 'org-mine');
    expect(memberships.knownIssuer('team/keys@uid-1@3', 'org-mine')).toBe(true);
    // Another organization written beside the same issuerRef, another generation, another namespace: not known.
    expect(memberships.knownIssuer('team/keys@uid-1@3', 'org-victim')).toBe(false);
    expect(memberships.knownIssuer('team/keys@uid-1@4', 'org-mine')).toBe(false);
    expect(memberships.knownIssuer('other/keys@uid-1@3', 'org-mine')).toBe(false);
    for (let i = 0; i < MAX_CLIENTS + 20; i++) memberships.learnIssuer(`ns-${i}/keys@uid-1@3`, 'org-mine');
    expect(memberships.size.issuers).toBe(MAX_CLIENTS);
  });

  it('a failed answer is not remembered: the next create asks again', async () => {
    const memberships = new OrganizationMemberships(60_000, () => 0);
    await expect(
      memberships.isMember('creds-1', 'org-mine', async () => {
        throw new Error('503');
      }),
    ).rejects.toThrow('503');
    expect(await memberships.isMember('creds-1', 'org-mine', async () => [{ id: 'org-mine' }])).toBe(true);
  });

  it('a create for an organization its credentials do not belong to never reaches the platform, whoever calls the reconciler (no worker, no create line here): a first key, then a repair', async () => {
    let now = 0;
    const r = rig({ now: () => now });
    r.platform.organizations = ['org-2'];
    r.kube.putResource(keyResource());
    await r.settle();
    const refused = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(refused.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'NotAllowed' });
    expect(r.platform.calls.filter((c) => c.startsWith('create'))).toEqual([]);

    // A member: the key is made. Then no longer one (asked again once the answer is old): the Secret's repair is refused too.
    r.platform.organizations = ['org-1'];
    now += 6 * 60_000;
    await r.settle();
    const issued = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyId;
    expect(issued).toBeDefined();
    expect(r.platform.calls.filter((c) => c.startsWith('create'))).toHaveLength(1);
    r.platform.organizations = ['org-2'];
    now += 6 * 60_000;
    await r.kube.deleteSecret(NAMESPACE, 'ci');
    await r.settle();
    const repair = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(repair.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'False', reason: 'NotAllowed' });
    expect(r.platform.calls.filter((c) => c.startsWith('create'))).toHaveLength(1);
    expect(repair.status?.keyId).toBe(issued);
  });
});
