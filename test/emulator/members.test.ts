// The member list of an organization (docs/platform-api.md "List organization members"), over HTTP:
// its shape, who may read it, paging in every order while members join and leave, bad input, and
// role changes made through the admin API showing in it.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Emulator } from '../../src/emulator/server.ts';
import { caller, keyOf, ORG, start, userId, type Caller } from './harness.ts';

interface MemberItem {
  member: { id: string; user_id: string; org_id: string; role: string; joined_at: string };
  user: { email: string };
}
interface Page {
  members: MemberItem[];
  pagination: { next?: string; sort_by: string; sort_order: string };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const BIG = 'org-big-00000001';

let emu: Emulator;
let call: Caller;

beforeAll(async () => {
  emu = await start({
    seed: {
      organizations: [
        { id: ORG, name: 'Demo Org' },
        { id: BIG, name: 'Big' },
      ],
      users: [
        { name: 'alice', email: 'alice@example.com', orgRoles: { [ORG]: 'admin' } },
        { name: 'bob', email: 'bob@example.com', orgRoles: { [ORG]: 'member' } },
        { name: 'carol', email: 'carol@example.com' },
        // Emails out of name order, and two roles, so that each order differs from the others.
        ...Array.from({ length: 23 }, (_, i) => ({
          name: `u${String(i).padStart(2, '0')}`,
          email: `${String.fromCharCode(122 - i)}@big.test`,
          orgRoles: { [BIG]: i % 3 === 0 ? ('admin' as const) : ('member' as const) },
        })),
      ],
      projects: [{ name: 'demo-api', organizationId: ORG, ownerUserId: 'alice' }],
    },
  });
  call = caller(emu);
});

afterAll(async () => {
  await emu.close();
});

async function list(org: string, query: string, key = keyOf(emu, 'alice')): Promise<Page> {
  const res = await call('GET', `/organizations/${org}/members${query}`, { key });
  expect(res.status).toBe(200);
  return res.body as Page;
}

/** Every page of a listing, following `next`; the pages' members in order. */
async function walk(org: string, params: string, key = keyOf(emu, 'u00')): Promise<{ members: MemberItem[]; pages: number }> {
  const members: MemberItem[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await list(org, `?${params}${cursor === undefined ? '' : `&cursor=${cursor}`}`, key);
    pages++;
    members.push(...page.members);
    cursor = page.pagination.next;
  } while (cursor !== undefined && pages < 100);
  return { members, pages };
}

describe('GET /organizations/{org_id}/members', () => {
  it('lists every member with id, user, organization, role, joined time and email', async () => {
    const page = await list(ORG, '');
    expect(page.pagination).toEqual({ sort_by: 'joined_at', sort_order: 'desc' });
    const byUser = new Map(page.members.map((m) => [m.member.user_id, m]));
    expect([...byUser.keys()].sort()).toEqual([userId(emu, 'alice'), userId(emu, 'bob')].sort());
    expect(byUser.get(userId(emu, 'alice'))).toEqual({
      member: {
        id: expect.stringMatching(UUID),
        user_id: userId(emu, 'alice'),
        org_id: ORG,
        role: 'admin',
        joined_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
      },
      user: { email: 'alice@example.com' },
    });
    expect(byUser.get(userId(emu, 'bob'))?.member.role).toBe('member');
    // The member id is the membership's, not the user's.
    expect(byUser.get(userId(emu, 'alice'))?.member.id).not.toBe(userId(emu, 'alice'));
  });

  it('may be read by any member and by an organization key; not by a project-scoped key or a non-member', async () => {
    const orgKey = (await call('POST', `/organizations/${ORG}/api_keys`, { key: keyOf(emu, 'alice'), body: { key_name: 'members-org' } })).body.key as string;
    const project = emu.bootstrap.projects[0]?.id ?? '';
    const projectKey = (
      await call('POST', `/organizations/${ORG}/api_keys`, { key: keyOf(emu, 'bob'), body: { key_name: 'members-project', project_id: project } })
    ).body.key as string;
    const status = async (key: string | undefined, org = ORG) => (await call('GET', `/organizations/${org}/members`, { key })).status;
    expect(await status(keyOf(emu, 'alice'))).toBe(200);
    expect(await status(keyOf(emu, 'bob'))).toBe(200);
    expect(await status(orgKey)).toBe(200);
    expect(await status(projectKey)).toBe(403);
    expect(await status(keyOf(emu, 'carol'))).toBe(403);
    expect(await status(orgKey, BIG)).toBe(403);
    expect(await status(keyOf(emu, 'alice'), 'org-no-such-org')).toBe(403);
    expect(await status(keyOf(emu, 'alice'), 'Not_An_Id')).toBe(404);
    expect(await status(undefined)).toBe(401);
    const refused = await call('GET', `/organizations/${ORG}/members`, { key: projectKey });
    expect(refused.body).toMatchObject({ code: 'PERMISSION_DENIED', message: expect.any(String), request_id: expect.any(String) });
  });

  it.each([
    ['joined_at', 'desc'],
    ['joined_at', 'asc'],
    ['email', 'asc'],
    ['email', 'desc'],
    ['role', 'asc'],
    ['role', 'desc'],
  ] as const)('pages through every member once, sorted by %s %s', async (sortBy, sortOrder) => {
    const { members, pages } = await walk(BIG, `limit=4&sort_by=${sortBy}&sort_order=${sortOrder}`);
    expect(pages).toBe(6);
    expect(members).toHaveLength(23);
    expect(new Set(members.map((m) => m.member.id)).size).toBe(23);
    const value = (m: MemberItem) => (sortBy === 'email' ? m.user.email : sortBy === 'role' ? m.member.role : m.member.joined_at);
    const sorted = [...members].sort((a, b) => {
      const [x, y] = [value(a), value(b)];
      if (x !== y) return x < y ? -1 : 1;
      return a.member.id < b.member.id ? -1 : 1;
    });
    expect(members).toEqual(sortOrder === 'asc' ? sorted : sorted.reverse());
  });

  it('the last page has no next; a page of exactly the rest has none either', async () => {
    const all = await list(BIG, '?limit=23', keyOf(emu, 'u00'));
    expect(all.members).toHaveLength(23);
    expect(all.pagination.next).toBeUndefined();
    expect((await list(BIG, '?limit=500', keyOf(emu, 'u00'))).members).toHaveLength(23);
    const first = await list(BIG, '?limit=22', keyOf(emu, 'u00'));
    expect(first.pagination.next).toEqual(expect.any(String));
    const rest = await list(BIG, `?limit=22&cursor=${first.pagination.next}`, keyOf(emu, 'u00'));
    expect(rest.members).toHaveLength(1);
    expect(rest.pagination).toEqual({ sort_by: 'joined_at', sort_order: 'desc' });
  });

  it('defaults to pages of 10', async () => {
    const page = await list(BIG, '', keyOf(emu, 'u00'));
    expect(page.members).toHaveLength(10);
    expect(page.pagination.next).toEqual(expect.any(String));
  });

  it('neither skips nor repeats a member when others join or leave between pages', async () => {
    const key = keyOf(emu, 'u00');
    const before = (await list(BIG, '?limit=500&sort_by=email&sort_order=asc', key)).members;
    const first = await list(BIG, '?limit=5&sort_by=email&sort_order=asc', key);
    // One member of the first page leaves, a new user joins at the front of the order.
    const leaving = first.members[2]?.member.user_id ?? '';
    expect((await call('DELETE', `/admin/organizations/${BIG}/members/${leaving}`)).status).toBe(200);
    const joined = await call('POST', '/admin/users', { body: { name: 'early', email: 'a@big.test', orgRoles: { [BIG]: 'member' } } });
    expect(joined.status).toBe(201);
    const seen = [...first.members];
    let cursor = first.pagination.next;
    while (cursor !== undefined) {
      const page = await list(BIG, `?limit=5&cursor=${cursor}`, key);
      seen.push(...page.members);
      cursor = page.pagination.next;
    }
    expect(seen.map((m) => m.member.id)).toEqual(before.map((m) => m.member.id));
    // Put back as it was (the other tests read this organization).
    expect((await call('DELETE', `/admin/organizations/${BIG}/members/${joined.body.id as string}`)).status).toBe(200);
    expect((await call('PUT', `/admin/organizations/${BIG}/members/${leaving}`, { body: { role: before[2]?.member.role } })).status).toBe(200);
  });

  it.each([
    ['?limit=0', 'limit'],
    ['?limit=501', 'limit'],
    ['?limit=ten', 'limit'],
    ['?limit=-1', 'limit'],
    ['?sort_by=name', 'sort_by'],
    ['?sort_order=up', 'sort_order'],
    ['?cursor=not-a-cursor', 'cursor'],
    ['?cursor=%7B%7D', 'cursor'],
    [`?cursor=${Buffer.from(JSON.stringify({ sort_by: 'joined_at', sort_order: 'desc', key: 'x', id: 'y' })).toString('base64url')}`, 'cursor'],
  ])('refuses bad input %s with 400 naming %s', async (query, field) => {
    const res = await call('GET', `/organizations/${ORG}/members${query}`, { key: keyOf(emu, 'alice') });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining(field) });
  });

  it('refuses a cursor with an order other than its own, accepts it with the same or none', async () => {
    const first = await list(BIG, '?limit=3&sort_by=email&sort_order=asc', keyOf(emu, 'u00'));
    const cursor = first.pagination.next ?? '';
    const other = await call('GET', `/organizations/${BIG}/members?cursor=${cursor}&sort_by=role`, { key: keyOf(emu, 'u00') });
    expect(other.status).toBe(400);
    expect(other.body.message).toContain('sort_by=email');
    expect((await call('GET', `/organizations/${BIG}/members?cursor=${cursor}&sort_order=desc`, { key: keyOf(emu, 'u00') })).status).toBe(400);
    const same = await list(BIG, `?cursor=${cursor}&sort_by=email&sort_order=asc&limit=3`, keyOf(emu, 'u00'));
    const bare = await list(BIG, `?cursor=${cursor}&limit=3`, keyOf(emu, 'u00'));
    expect(same).toEqual(bare);
    expect(bare.pagination).toMatchObject({ sort_by: 'email', sort_order: 'asc' });
  });
});

describe('role changes through the admin API', () => {
  it('an administrator demoted to member reads as member, keeps the member id, and can no longer create organization keys', async () => {
    const org = (await call('POST', '/admin/users', { body: { name: 'dana', orgRoles: { [ORG]: 'admin' } } })).body as { id: string; personalKey: string };
    const entry = async () => (await list(ORG, '?limit=500')).members.find((m) => m.member.user_id === org.id);
    const asAdmin = await entry();
    expect(asAdmin?.member.role).toBe('admin');
    expect((await call('POST', `/organizations/${ORG}/api_keys`, { key: org.personalKey, body: { key_name: 'while-admin' } })).status).toBe(200);

    const demoted = await call('PUT', `/admin/organizations/${ORG}/members/${org.id}`, { body: { role: 'member' } });
    expect(demoted).toMatchObject({ status: 200, body: { organizationId: ORG, userId: org.id, role: 'member' } });
    expect(await entry()).toEqual({ ...asAdmin, member: { ...asAdmin?.member, role: 'member' } });
    expect((await call('POST', `/organizations/${ORG}/api_keys`, { key: org.personalKey, body: { key_name: 'after-demotion' } })).status).toBe(403);
    // Still a member: the list stays readable with the user's own key.
    expect((await list(ORG, '', org.personalKey)).members.length).toBeGreaterThan(0);

    // Leaving and joining again makes a new membership, with a new id.
    expect((await call('DELETE', `/admin/organizations/${ORG}/members/${org.id}`)).status).toBe(200);
    expect(await entry()).toBeUndefined();
    expect((await call('GET', `/organizations/${ORG}/members`, { key: org.personalKey })).status).toBe(403);
    expect((await call('PUT', `/admin/organizations/${ORG}/members/${org.id}`, { body: { role: 'admin' } })).status).toBe(200);
    const rejoined = await entry();
    expect(rejoined?.member.role).toBe('admin');
    expect(rejoined?.member.id).toMatch(UUID);
    expect(rejoined?.member.id).not.toBe(asAdmin?.member.id);
  });
});
