// The permission matrix of docs/platform-api.md ("Key kinds", "Rules for project-scoped keys", "Revoke
// key", "Authentication"): every key kind against every endpoint, over HTTP.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Emulator } from '../../src/emulator/server.ts';
import { caller, keyOf, ORG, projectId, sleep, start, userId, type Caller } from './harness.ts';

const KINDS = ['admin', 'member', 'nonMember', 'orgKey', 'projectKey', 'revoked', 'none'] as const;
type Kind = (typeof KINDS)[number];

let emu: Emulator;
let call: Caller;
const keys = {} as Record<Kind, string | undefined>;
let A: string; // org project the project key is scoped to
let B: string; // another org project
let C: string; // carol's personal project

beforeAll(async () => {
  emu = await start();
  call = caller(emu);
  A = projectId(emu, 'demo-api');
  B = projectId(emu, 'demo-web');
  C = projectId(emu, 'carol-sandbox');
  keys.admin = keyOf(emu, 'alice');
  keys.member = keyOf(emu, 'bob');
  keys.nonMember = keyOf(emu, 'carol');
  keys.orgKey = (await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.admin, body: { key_name: 'matrix-org' } })).body.key;
  keys.projectKey = (await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.member, body: { key_name: 'matrix-project', project_id: A } })).body.key;
  const doomed = (await call('POST', '/api_keys', { key: keys.admin, body: { key_name: 'doomed' } })).body;
  expect((await call('DELETE', `/api_keys/${doomed.id}`, { key: keys.admin })).status).toBe(200);
  keys.revoked = doomed.key;
  keys.none = undefined;
});

afterAll(async () => {
  await emu.close();
});

// [method, path, body, expected status per kind: admin, member, nonMember, orgKey, projectKey, revoked, none]
type Row = [string, string, unknown, number[]];
const fill = (t: string): string => t.replace('{ORG}', ORG).replace('{A}', A).replace('{B}', B).replace('{C}', C);
const bodyOf = (b: unknown): unknown => (b === undefined ? undefined : JSON.parse(fill(JSON.stringify(b))));
const rows: Row[] = [
  ['GET', '/api_keys', undefined, [200, 200, 200, 403, 403, 401, 401]],
  ['POST', '/api_keys', { key_name: 'm' }, [200, 200, 200, 403, 403, 401, 401]],
  ['GET', '/organizations/{ORG}/api_keys', undefined, [200, 200, 403, 200, 403, 401, 401]],
  ['GET', '/organizations/{ORG}/members', undefined, [200, 200, 403, 200, 403, 401, 401]],
  ['POST', '/organizations/{ORG}/api_keys', { key_name: 'm' }, [200, 403, 403, 403, 403, 401, 401]],
  ['POST', '/organizations/{ORG}/api_keys', { key_name: 'm', project_id: '{A}' }, [200, 200, 403, 403, 403, 401, 401]],
  ['GET', '/projects', undefined, [200, 200, 200, 200, 200, 401, 401]],
  ['GET', '/projects?org_id={ORG}', undefined, [200, 200, 403, 200, 200, 401, 401]],
  ['POST', '/projects', { project: { org_id: ORG } }, [201, 201, 403, 201, 403, 401, 401]],
  ['GET', '/projects/{A}', undefined, [200, 200, 404, 200, 200, 401, 401]],
  ['GET', '/projects/{B}', undefined, [200, 200, 404, 200, 404, 401, 401]],
  ['GET', '/projects/{C}', undefined, [404, 404, 200, 404, 404, 401, 401]],
  ['GET', '/projects/{A}/operations?limit=5', undefined, [200, 200, 404, 200, 200, 401, 401]],
  ['GET', '/projects/{B}/operations', undefined, [200, 200, 404, 200, 404, 401, 401]],
  ['POST', '/projects/{A}/branches', {}, [201, 201, 404, 201, 201, 401, 401]],
  ['POST', '/projects/{B}/branches', {}, [201, 201, 404, 201, 404, 401, 401]],
  ['GET', '/users/me', undefined, [200, 200, 200, 403, 403, 401, 401]],
  ['GET', '/users/me/organizations', undefined, [200, 200, 200, 200, 200, 401, 401]],
];

describe('permission matrix', () => {
  it.each(rows.map((r) => [`${r[0]} ${r[1]} ${JSON.stringify(r[2] ?? '')}`, r] as const))('%s', async (_name, [method, path, body, expected]) => {
    // The org key creation endpoint allows 10 requests per second: start each row with a fresh window.
    if (path.startsWith('/organizations/') && method === 'POST') await sleep(1100);
    const got: Record<string, number> = {};
    const want: Record<string, number> = {};
    for (const [i, kind] of KINDS.entries()) {
      const res = await call(method, fill(path), { key: keys[kind], body: bodyOf(body) });
      got[kind] = res.status;
      want[kind] = expected[i] ?? -1;
      if (res.status >= 400) {
        expect(typeof res.body.code).toBe('string');
        expect(typeof res.body.message).toBe('string');
        expect(typeof res.body.request_id).toBe('string');
      }
    }
    expect(got).toEqual(want);
  });

  it('tells a member why an organization key is refused', async () => {
    const res = await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.member, body: { key_name: 'nope' } });
    expect(res.status).toBe(403);
    expect(res.body.message).toContain(`administrator of ${ORG}`);
  });

  it('refuses a project-scoped key for a project outside the organization', async () => {
    const res = await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.admin, body: { key_name: 'x', project_id: C } });
    expect(res.status).toBe(404);
  });
});

describe('project deletion', () => {
  it('a project-scoped key cannot delete its project; members and organization keys can delete projects', async () => {
    expect((await call('DELETE', `/projects/${A}`, { key: keys.projectKey })).status).toBe(403);
    for (const kind of ['member', 'orgKey', 'admin'] as const) {
      const created = await call('POST', '/projects', { key: keys.admin, body: { project: { org_id: ORG, name: `del-${kind}` } } });
      expect((await call('DELETE', `/projects/${created.body.project.id}`, { key: keys.nonMember })).status).toBe(404);
      expect((await call('DELETE', `/projects/${created.body.project.id}`, { key: keys[kind] })).status).toBe(200);
      expect((await call('GET', `/projects/${created.body.project.id}`, { key: keys.admin })).status).toBe(404);
    }
  });
});

describe('revocation rules', () => {
  it('personal keys: only the owner; others see 404', async () => {
    const k = (await call('POST', '/api_keys', { key: keys.member, body: { key_name: 'bob-own' } })).body;
    expect((await call('DELETE', `/api_keys/${k.id}`, { key: keys.admin })).status).toBe(404);
    expect((await call('DELETE', `/api_keys/${k.id}`, { key: keys.orgKey })).status).toBe(404);
    const ok = await call('DELETE', `/api_keys/${k.id}`, { key: keys.member });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id: k.id, name: 'bob-own', revoked: true });
    expect((await call('GET', '/api_keys', { key: k.key })).status).toBe(401);
  });

  it('organization and project-scoped keys: only administrators (or an organization key)', async () => {
    await sleep(1100);
    const orgKey = (await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.admin, body: { key_name: 'rev-org' } })).body;
    const projKey = (await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.member, body: { key_name: 'rev-proj', project_id: A } })).body;
    expect(projKey.project_id).toBe(A);
    for (const k of [orgKey, projKey]) {
      expect((await call('DELETE', `/api_keys/${k.id}`, { key: keys.member })).status).toBe(403);
      expect((await call('DELETE', `/api_keys/${k.id}`, { key: keys.nonMember })).status).toBe(404);
      expect((await call('DELETE', `/organizations/${ORG}/api_keys/${k.id}`, { key: keys.projectKey })).status).toBe(403);
      expect((await call('DELETE', `/organizations/${ORG}/api_keys/${k.id}`, { key: keys.nonMember })).status).toBe(403);
    }
    expect((await call('DELETE', `/api_keys/${orgKey.id}`, { key: keys.admin })).status).toBe(200);
    const viaOrg = await call('DELETE', `/organizations/${ORG}/api_keys/${projKey.id}`, { key: keys.admin });
    expect(viaOrg.status).toBe(200);
    expect(viaOrg.body).toMatchObject({ id: projKey.id, revoked: true, project_id: A });
    expect((await call('GET', `/projects/${A}`, { key: projKey.key })).status).toBe(401);
    const listed = await call('GET', `/organizations/${ORG}/api_keys`, { key: keys.admin });
    expect(listed.body.map((k: { id: number }) => k.id)).not.toContain(projKey.id);
  });
});

describe('membership and transfers', () => {
  it('a personal key stops reaching an organization its user left, and keeps working elsewhere', async () => {
    const created = await call('POST', '/admin/users', { body: { name: 'dave', orgRoles: { [ORG]: 'member' } } });
    expect(created.status).toBe(201);
    const dave = created.body.personalKey as string;
    expect(dave).toMatch(/^[a-z0-9]{64}$/);
    expect((await call('GET', `/projects/${A}`, { key: dave })).status).toBe(200);
    expect((await call('DELETE', `/admin/organizations/${ORG}/members/${created.body.id}`)).status).toBe(200);
    expect((await call('GET', `/projects/${A}`, { key: dave })).status).toBe(404);
    expect((await call('GET', `/organizations/${ORG}/api_keys`, { key: dave })).status).toBe(403);
    expect((await call('GET', '/api_keys', { key: dave })).status).toBe(200);
    // Promoted back as an administrator, the same key may create organization keys.
    expect((await call('PUT', `/admin/organizations/${ORG}/members/${created.body.id}`, { body: { role: 'admin' } })).status).toBe(200);
    await sleep(1100);
    expect((await call('POST', `/organizations/${ORG}/api_keys`, { key: dave, body: { key_name: 'dave-org' } })).status).toBe(200);
  });

  it('a project-scoped key stops working when its project leaves the organization', async () => {
    await sleep(1100);
    const p = (await call('POST', '/projects', { key: keys.admin, body: { project: { org_id: ORG, name: 'leaving' } } })).body.project;
    const k = (await call('POST', `/organizations/${ORG}/api_keys`, { key: keys.member, body: { key_name: 'leaving-key', project_id: p.id } })).body;
    expect((await call('GET', `/projects/${p.id}/operations`, { key: k.key })).status).toBe(200);
    expect((await call('POST', `/admin/projects/${p.id}/transfer`, { body: { organizationId: null } })).status).toBe(200);
    const res = await call('GET', `/projects/${p.id}/operations`, { key: k.key });
    expect(res.status).toBe(401);
    expect(res.body.message).toContain('left the organization');
  });

  it('GET /admin/keys lists every key without secrets', async () => {
    const res = await call('GET', '/admin/keys');
    expect(res.status).toBe(200);
    const text = JSON.stringify(res.body);
    for (const k of [keys.admin, keys.member, keys.orgKey, keys.projectKey]) expect(text).not.toContain(k);
    expect(res.body.some((k: { kind: string; revoked: boolean }) => k.kind === 'project' && k.revoked)).toBe(true);
    expect(res.body[0]).toMatchObject({ kind: 'personal', userId: userId(emu, 'alice'), revoked: false, lastUsedAt: expect.any(String) });
  });
});
