// The platform client against the real emulator over HTTP (no mocks): every method, the error
// codes and dispositions, retries, the ambiguous POST, rate limiting, paging and polling.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { inspect } from 'node:util';
import { Agent } from 'undici';
import { startEmulator } from '../../src/emulator/server.ts';
import { PlatformClient, TERMINAL_OPERATION_STATUSES, TokenBucket, type Operation, type ResponseInfo } from '../../src/platform/index.ts';
import {
  adminKeys,
  client,
  countOf,
  emulator,
  failNextOperations,
  failure,
  ORG,
  orgProjects,
  renderings,
  resetRequests,
  secrets,
  setFaults,
  setMemberRole,
  thrown,
  user,
  type Emulator,
} from './emulator-fixture.ts';

let emu: Emulator;
beforeEach(async () => {
  emu = await emulator();
});
afterEach(async () => {
  await emu.close();
});

const ORG_KEYS = '/organizations/:org_id/api_keys';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('happy paths', () => {
  it('creates, lists and revokes a personal key', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const created = await alice.createPersonalKey('laptop');
    secrets.add(created.key);
    expect(created.id).toEqual(expect.any(Number));
    expect(created.key).toMatch(/^[a-z0-9]{64}$/);

    const listed = await alice.listPersonalKeys();
    const item = listed.find((k) => k.id === created.id);
    expect(item).toMatchObject({ name: 'laptop', last_used_at: null, created_by: { id: user(emu, 'alice').id, name: 'alice' } });
    expect(item).not.toHaveProperty('key');

    // The new key works on its own.
    expect((await client(emu, created.key).listPersonalKeys()).length).toBeGreaterThanOrEqual(2);

    const revoked = await alice.revokePersonalKey(created.id);
    expect(revoked).toMatchObject({ id: created.id, name: 'laptop', revoked: true });
    expect((await alice.listPersonalKeys()).some((k) => k.id === created.id)).toBe(false);
  });

  it('creates, lists and revokes organization and project-scoped keys', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const bob = client(emu, user(emu, 'bob').personalKey);
    const project = orgProjects(emu)[0]!;

    const orgKey = await alice.createOrganizationKey(ORG, { keyName: 'ci-deployer' });
    const projectKey = await bob.createOrganizationKey(ORG, { keyName: 'svc', projectId: project });
    secrets.add(orgKey.key).add(projectKey.key);
    expect(orgKey).toMatchObject({ name: 'ci-deployer', created_by: user(emu, 'alice').id, created_at: expect.any(String) });
    expect(orgKey.project_id).toBeUndefined();
    expect(projectKey).toMatchObject({ name: 'svc', project_id: project, created_by: user(emu, 'bob').id });

    const listed = await alice.listOrganizationKeys(ORG);
    expect(listed.find((k) => k.id === orgKey.id)).toMatchObject({ name: 'ci-deployer', last_used_at: null });
    expect(listed.find((k) => k.id === projectKey.id)).toMatchObject({ name: 'svc', project_id: project });

    // The project-scoped key reaches its project, and only it.
    expect((await client(emu, projectKey.key).getProject(project)).id).toBe(project);

    expect(await alice.revokeOrganizationKey(ORG, orgKey.id)).toMatchObject({ id: orgKey.id, revoked: true });
    expect(await alice.revokeOrganizationKey(ORG, projectKey.id)).toMatchObject({ id: projectKey.id, revoked: true });
    expect(await alice.listOrganizationKeys(ORG)).toEqual(listed.filter((k) => k.id !== orgKey.id && k.id !== projectKey.id));
  });

  it('tells what kind of key it holds and whose it is (GET /auth), for each kind of key', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    const orgKey = await alice.createOrganizationKey(ORG, { keyName: 'auth-org' });
    const projectKey = await alice.createOrganizationKey(ORG, { keyName: 'auth-project', projectId: project });
    secrets.add(orgKey.key).add(projectKey.key);
    expect(await alice.getAuth()).toEqual({ account_id: user(emu, 'alice').id, auth_method: 'api_key_user' });
    expect(await client(emu, orgKey.key).getAuth()).toEqual({ account_id: ORG, auth_method: 'api_key_org' });
    expect(await client(emu, projectKey.key).getAuth()).toEqual({ account_id: ORG, auth_method: 'api_key_org', auth_data: project });
    await alice.revokeOrganizationKey(ORG, orgKey.id);
    expect(await failure(client(emu, orgKey.key).getAuth())).toMatchObject({ code: 'UNAUTHORIZED', method: 'GET', route: '/auth' });
  });

  it('tells whose key it holds, the organizations of that user, and their members with roles', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const orgKey = await alice.createOrganizationKey(ORG, { keyName: 'who-org' });
    secrets.add(orgKey.key);
    expect(await alice.getCurrentUser()).toEqual({ id: user(emu, 'alice').id, email: 'alice@example.com', name: 'alice' });
    expect(await alice.listMyOrganizations()).toEqual([{ id: ORG, name: 'Demo Org' }]);
    expect(await client(emu, user(emu, 'carol').personalKey).listMyOrganizations()).toEqual([]);
    expect(await client(emu, orgKey.key).listMyOrganizations()).toEqual([{ id: ORG, name: 'Demo Org' }]);
    expect(await failure(client(emu, orgKey.key).getCurrentUser())).toMatchObject({ code: 'FORBIDDEN', disposition: 'terminal', route: '/users/me' });

    const members = await alice.listOrganizationMembers(ORG);
    const byUser = (list: typeof members) => [...list].sort((a, b) => (a.userId < b.userId ? -1 : 1));
    const expected = [
      { userId: user(emu, 'alice').id, role: 'admin', email: 'alice@example.com' },
      { userId: user(emu, 'bob').id, role: 'member', email: 'bob@example.com' },
    ].sort((a, b) => (a.userId < b.userId ? -1 : 1));
    expect(byUser(members)).toEqual(expected.map((m) => ({ ...m, id: expect.stringMatching(UUID), orgId: ORG, joinedAt: expect.any(String) })));
    // An organization key reads the same list.
    expect(byUser(await client(emu, orgKey.key).listOrganizationMembers(ORG))).toEqual(byUser(members));

    // Demoted through the emulator's admin API, the administrator reads as a member, same membership.
    await setMemberRole(emu, ORG, user(emu, 'alice').id, 'member');
    const after = await client(emu, user(emu, 'bob').personalKey).listOrganizationMembers(ORG);
    const demoted = after.find((m) => m.userId === user(emu, 'alice').id);
    expect(demoted).toEqual({ ...members.find((m) => m.userId === user(emu, 'alice').id), role: 'member' });
    expect(await countOf(emu, 'GET', '/organizations/:org_id/members')).toBe(3);
  });

  it('listing the members of an organization the caller is not in is FORBIDDEN', async () => {
    const e = await failure(client(emu, user(emu, 'carol').personalKey).listOrganizationMembers(ORG));
    expect(e).toMatchObject({ code: 'FORBIDDEN', disposition: 'terminal', status: 403, method: 'GET', route: '/organizations/:org_id/members' });
  });

  it('follows the members cursor past the 500-member page', async () => {
    const big = await startEmulator({
      timeScale: 0.01,
      controlPlaneActivity: false,
      seed: {
        organizations: [{ id: 'org-big', name: 'Big' }],
        users: Array.from({ length: 1_001 }, (_, i) => ({ name: `m-${i}`, orgRoles: { 'org-big': i === 0 ? ('admin' as const) : ('member' as const) } })),
      },
    });
    try {
      const first = client(big, big.bootstrap.users[0]!.personalKey!);
      const members = await first.listOrganizationMembers('org-big');
      expect(members).toHaveLength(1_001);
      expect(new Set(members.map((m) => m.userId))).toEqual(new Set(big.bootstrap.users.map((u) => u.id)));
      expect(members.filter((m) => m.role === 'admin').map((m) => m.userId)).toEqual([big.bootstrap.users[0]!.id]);
      expect(await countOf(big, 'GET', '/organizations/:org_id/members', 200)).toBe(3);
    } finally {
      await big.close();
    }
  });

  it('lists projects of an organization and of a personal account, and gets one', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const projects = await alice.listProjects({ orgId: ORG });
    expect(projects.map((p) => p.id).sort()).toEqual(orgProjects(emu).sort());
    const carolProject = emu.bootstrap.projects.find((p) => p.organizationId === null)!;
    expect((await client(emu, user(emu, 'carol').personalKey).listProjects()).map((p) => p.id)).toEqual([carolProject.id]);
    const one = await alice.getProject(projects[0]!.id);
    expect(one).toMatchObject({ id: projects[0]!.id, name: projects[0]!.name, org_id: ORG });
  });

  it('follows the projects cursor past the 400-project page', async () => {
    const big = await startEmulator({
      timeScale: 0.01,
      controlPlaneActivity: false,
      seed: {
        organizations: [{ id: 'org-big', name: 'Big' }],
        users: [{ name: 'dora', orgRoles: { 'org-big': 'admin' } }],
        projects: Array.from({ length: 405 }, (_, i) => ({ name: `p-${i}`, organizationId: 'org-big' })),
      },
    });
    try {
      const dora = client(big, big.bootstrap.users[0]!.personalKey!);
      const projects = await dora.listProjects({ orgId: 'org-big' });
      expect(new Set(projects.map((p) => p.id)).size).toBe(405);
    } finally {
      await big.close();
    }
  });

  it('creates a branch and returns the operations it started (create_branch running, start_compute scheduling)', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    const { branch, operations } = await alice.createBranch(project, { name: 'feature-x' });
    expect(branch).toMatchObject({ project_id: project, name: 'feature-x' });
    expect(operations.map((o) => o.action).sort()).toEqual(['create_branch', 'start_compute']);
    for (const op of operations) expect(op).toMatchObject({ project_id: project, branch_id: branch.id });

    const page = await alice.listOperations(project, { limit: 2 });
    expect(page.operations).toHaveLength(2);
    expect(page.pagination?.cursor).toEqual(expect.any(String));
    const got = await alice.getOperation(project, operations[0]!.id);
    expect(got.id).toBe(operations[0]!.id);
  });

  it('sends a fresh X-Request-ID per attempt and reports every attempt to onResponse with the route template', async () => {
    const seen: ResponseInfo[] = [];
    const alice = client(emu, user(emu, 'alice').personalKey, { onResponse: (i) => seen.push(i) });
    await alice.listOrganizationKeys(ORG);
    await setFaults(emu, [{ method: 'GET', route: '/api/v2/projects/:project_id', probability: 1, kind: 'status', status: 404, times: 1 }]);
    const e = await failure(alice.getProject(orgProjects(emu)[0]!));
    // The platform echoes the X-Request-ID the client sent as request_id.
    expect(e.requestId).toMatch(UUID);
    expect(seen.map((s) => [s.method, s.route, s.status])).toEqual([
      ['GET', ORG_KEYS, 200],
      ['GET', '/projects/:project_id', 404],
    ]);
    for (const s of seen) expect(s.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('ignores a throwing onResponse hook', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey, {
      onResponse: () => {
        throw new Error('metrics broke');
      },
    });
    expect(await alice.listPersonalKeys()).toEqual(expect.any(Array));
  });

  it('uses a dispatcher it is given', async () => {
    const agent = new Agent({ keepAliveTimeout: 1_000 });
    try {
      const alice = client(emu, user(emu, 'alice').personalKey, { dispatcher: agent });
      expect(await alice.listPersonalKeys()).toEqual(expect.any(Array));
    } finally {
      await agent.close();
    }
  });
});

describe('terminal errors', () => {
  it('a revoked key is UNAUTHORIZED, terminal, and not retried', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const k = await alice.createPersonalKey('short-lived');
    secrets.add(k.key);
    await alice.revokePersonalKey(k.id);
    await resetRequests(emu);

    const e = await failure(client(emu, k.key).listPersonalKeys());
    expect(e).toMatchObject({ code: 'UNAUTHORIZED', disposition: 'terminal', status: 401, method: 'GET', route: '/api_keys' });
    expect(await countOf(emu, 'GET', '/api_keys')).toBe(1);
  });

  it('a member creating an organization key is FORBIDDEN', async () => {
    const e = await failure(client(emu, user(emu, 'bob').personalKey).createOrganizationKey(ORG, { keyName: 'nope' }));
    expect(e).toMatchObject({ code: 'FORBIDDEN', disposition: 'terminal', status: 403, method: 'POST', route: ORG_KEYS, platformCode: 'PERMISSION_DENIED' });
    expect(e.message).toContain('administrator');
    expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(1);
  });

  it('unknown ids are NOT_FOUND', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    expect(await failure(alice.getProject('no-such-project'))).toMatchObject({ code: 'NOT_FOUND', disposition: 'terminal', status: 404 });
    expect(await failure(alice.getOperation(project, '00000000-0000-4000-8000-000000000000'))).toMatchObject({
      code: 'NOT_FOUND',
      route: '/projects/:project_id/operations/:operation_id',
    });
    expect(await failure(alice.revokePersonalKey(999_999))).toMatchObject({ code: 'NOT_FOUND', method: 'DELETE' });
    expect(await failure(alice.createOrganizationKey(ORG, { keyName: 'x', projectId: 'not-in-org' }))).toMatchObject({
      code: 'NOT_FOUND',
      disposition: 'terminal',
    });
  });

  it('a bad request is INVALID_REQUEST', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const e = await failure(alice.createPersonalKey('x'.repeat(65)));
    expect(e).toMatchObject({ code: 'INVALID_REQUEST', disposition: 'terminal', status: 400 });
  });
});

describe('retries', () => {
  it('retries a GET through injected 503s and succeeds', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    await setFaults(emu, [{ method: 'GET', route: '/api/v2/projects/:project_id', probability: 1, kind: 'status', status: 503, times: 2 }]);
    expect((await alice.getProject(project)).id).toBe(project);
    expect(await countOf(emu, 'GET', '/projects/:project_id', 503)).toBe(2);
    expect(await countOf(emu, 'GET', '/projects/:project_id', 200)).toBe(1);
  });

  it('gives up on a GET after maxAttempts and throws it retryable', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey, { retry: { maxAttempts: 3, baseDelayMs: 1 } });
    await setFaults(emu, [{ method: 'GET', probability: 1, kind: 'status', status: 500 }]);
    const e = await failure(alice.listPersonalKeys());
    expect(e).toMatchObject({ code: 'SERVER_ERROR', disposition: 'retryable', status: 500 });
    expect(await countOf(emu, 'GET', '/api_keys')).toBe(3);
  });

  it('retries a GET through a reset connection', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'GET', route: '/api/v2/api_keys', probability: 1, kind: 'reset', times: 1 }]);
    expect(await alice.listPersonalKeys()).toEqual(expect.any(Array));
    expect(await countOf(emu, 'GET', '/api_keys')).toBe(2);
  });

  it('retries a revoke (idempotent) through a 502', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const k = await alice.createOrganizationKey(ORG, { keyName: 'to-revoke' });
    secrets.add(k.key);
    await setFaults(emu, [{ method: 'DELETE', probability: 1, kind: 'status', status: 502, times: 1 }]);
    expect(await alice.revokeOrganizationKey(ORG, k.id)).toMatchObject({ revoked: true });
    expect(await countOf(emu, 'DELETE', '/organizations/:org_id/api_keys/:key_id')).toBe(2);
  });

  it("asks beforeWrite before each attempt of a write (the operator's write fence): a refusal sends nothing, reads pass", async () => {
    let allowed = 1;
    const refusal = new Error('not leading');
    const alice = client(emu, user(emu, 'alice').personalKey, {
      beforeWrite: () => {
        if (allowed-- <= 0) throw refusal;
      },
    });
    // The first attempt passes the fence and meets a 503; the retry is asked again, and refused.
    await setFaults(emu, [{ method: 'DELETE', probability: 1, kind: 'status', status: 503, times: 1 }]);
    await expect(alice.revokePersonalKey(1)).rejects.toBe(refusal);
    expect(await countOf(emu, 'DELETE', '/api_keys/:key_id')).toBe(1);
    await expect(alice.createPersonalKey('fenced')).rejects.toBe(refusal);
    await expect(alice.createOrganizationKey(ORG, { keyName: 'fenced' })).rejects.toBe(refusal);
    expect(await countOf(emu, 'POST', '/api_keys')).toBe(0);
    expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(0);
    expect(await alice.listPersonalKeys()).toEqual(expect.any(Array));
  });

  it('times a slow GET out per attempt and retries it', async () => {
    // The first attempt is delayed 400 times its 150 ms timeout (timers of one event loop fire in
    // order of their due time, however loaded the machine). The emulator records a request when
    // its connection closes, with status 0 when nothing was answered: the first attempt closed
    // unanswered (cut before the delay ran out) and the retry was answered. An attempt not cut by
    // its timeout would be answered 200 after the delay, and nothing would be retried.
    const alice = client(emu, user(emu, 'alice').personalKey, { timeoutMs: 150, retry: { maxAttempts: 2, baseDelayMs: 1 } });
    await setFaults(emu, [{ method: 'GET', route: '/api/v2/api_keys', probability: 1, kind: 'latency', latencyMs: 60_000, times: 1 }]);
    expect(await alice.listPersonalKeys()).toEqual(expect.any(Array));
    // The cut connection's close may reach the emulator after the retry's answer reached us.
    while ((await countOf(emu, 'GET', '/api_keys', 0)) < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await countOf(emu, 'GET', '/api_keys', 0)).toBe(1);
    expect(await countOf(emu, 'GET', '/api_keys', 200)).toBe(1);
    expect(await countOf(emu, 'GET', '/api_keys')).toBe(2);
  });

  it('stops retrying when the caller aborts', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey, { retry: { maxAttempts: 10, baseDelayMs: 200 } });
    await setFaults(emu, [{ method: 'GET', probability: 1, kind: 'status', status: 503 }]);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const e = await failure(alice.listPersonalKeys({ signal: ac.signal }));
    expect(e).toMatchObject({ code: 'ABORTED', disposition: 'terminal' });
  });

  it('makes no request at all with an already aborted signal', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const e = await failure(alice.createOrganizationKey(ORG, { keyName: 'never' }, { signal: AbortSignal.abort() }));
    expect(e).toMatchObject({ code: 'ABORTED', disposition: 'terminal' });
    expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(0);
  });

  it('retries a POST that could not connect (nothing was sent), then throws NETWORK retryable', async () => {
    const { baseUrl } = emu;
    await emu.close();
    const alice = new PlatformClient({ baseUrl, apiKey: 'k'.repeat(64), retry: { maxAttempts: 2, baseDelayMs: 1 } });
    const e = await failure(alice.createPersonalKey('offline'));
    expect(e).toMatchObject({ code: 'NETWORK', disposition: 'retryable' });
    expect(e.message).toContain('ECONNREFUSED');
    emu = await emulator();
  });
});

describe('an ambiguous POST', () => {
  it('a response dropped after the commit is ambiguous, not retried, and the key exists', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'drop-after-commit', times: 1 }]);
    const e = await failure(alice.createOrganizationKey(ORG, { keyName: 'attempt-abcd1234' }));
    expect(e).toMatchObject({ code: 'NETWORK', disposition: 'ambiguous', method: 'POST', route: ORG_KEYS });
    expect(e.status).toBeUndefined();
    expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(1);
    const keys = (await adminKeys(emu)).filter((k) => k.name === 'attempt-abcd1234');
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ kind: 'organization', revoked: false });
    // What the operator's recovery does next: find it by name in the list, and revoke it.
    const found = (await alice.listOrganizationKeys(ORG)).find((k) => k.name === 'attempt-abcd1234');
    expect(found?.id).toBe(keys[0]!.id);
  });

  it('a 500 on a POST is ambiguous and not retried', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'POST', probability: 1, kind: 'status', status: 500, times: 1 }]);
    const e = await failure(alice.createPersonalKey('maybe'));
    expect(e).toMatchObject({ code: 'SERVER_ERROR', disposition: 'ambiguous', status: 500 });
    expect(await countOf(emu, 'POST', '/api_keys')).toBe(1);
  });

  it('a POST timing out is ambiguous and not retried', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey, { timeoutMs: 100 });
    await setFaults(emu, [{ method: 'POST', probability: 1, kind: 'latency', latencyMs: 400, times: 1 }]);
    const e = await failure(alice.createPersonalKey('slow'));
    expect(e).toMatchObject({ code: 'TIMEOUT', disposition: 'ambiguous' });
    expect(e.message).toContain('no response within 100 ms');
    await new Promise((r) => setTimeout(r, 500));
    expect(await countOf(emu, 'POST', '/api_keys')).toBe(1);
  });

  it('a reset POST connection is ambiguous', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'POST', probability: 1, kind: 'reset', times: 1 }]);
    expect(await failure(alice.createBranch(orgProjects(emu)[0]!))).toMatchObject({ code: 'NETWORK', disposition: 'ambiguous' });
  });

  it('a POST aborted by the caller while in flight is ambiguous', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'POST', probability: 1, kind: 'latency', latencyMs: 300, times: 1 }]);
    const e = await failure(alice.createPersonalKey('abandoned', { signal: AbortSignal.timeout(50) }));
    expect(e).toMatchObject({ code: 'ABORTED', disposition: 'ambiguous' });
  });

  it('a POST answered 503 was not performed: retried, one key created', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'status', status: 503, times: 1 }]);
    const k = await alice.createOrganizationKey(ORG, { keyName: 'after-503' });
    secrets.add(k.key);
    expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(2);
    expect((await adminKeys(emu)).filter((x) => x.name === 'after-503')).toHaveLength(1);
  });
});

describe('rate limiting', () => {
  it('honours Retry-After on a 429', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'status', status: 429, times: 1 }]);
    const started = performance.now();
    const k = await alice.createOrganizationKey(ORG, { keyName: 'patient' });
    secrets.add(k.key);
    // The emulator answers Retry-After: 1 (seconds).
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    expect(await countOf(emu, 'POST', ORG_KEYS, 429)).toBe(1);
    expect(await countOf(emu, 'POST', ORG_KEYS, 200)).toBe(1);
  });

  it('throws RATE_LIMITED with retryAfterMs once attempts run out', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey, { retry: { maxAttempts: 1 } });
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'status', status: 429 }]);
    const e = await failure(alice.createOrganizationKey(ORG, { keyName: 'x' }));
    expect(e).toMatchObject({ code: 'RATE_LIMITED', disposition: 'retryable', status: 429, retryAfterMs: 1000 });
  });

  it('without a client-side limiter, a burst meets the platform limit and recovers through Retry-After', async () => {
    const unlimited = new TokenBucket({ ratePerSecond: 1e6, burst: 1e6 });
    const alice = client(emu, user(emu, 'alice').personalKey, { orgKeyLimiter: unlimited });
    const keys = await Promise.all(Array.from({ length: 14 }, (_, i) => alice.createOrganizationKey(ORG, { keyName: `burst-${i}` })));
    for (const k of keys) secrets.add(k.key);
    expect(new Set(keys.map((k) => k.id)).size).toBe(14);
    expect(await countOf(emu, 'POST', ORG_KEYS, 429)).toBeGreaterThan(0);
  });

  it('the shared default limiter keeps 25 concurrent creations within 10 per second with zero 429s', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const bob = client(emu, user(emu, 'bob').personalKey);
    const project = orgProjects(emu)[0]!;
    const started = performance.now();
    // Two clients (two credentials) share the one process-wide limiter.
    const keys = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        i % 2 === 0
          ? alice.createOrganizationKey(ORG, { keyName: `fleet-${i}` })
          : bob.createOrganizationKey(ORG, { keyName: `fleet-${i}`, projectId: project }),
      ),
    );
    const elapsed = performance.now() - started;
    for (const k of keys) secrets.add(k.key);
    expect(new Set(keys.map((k) => k.id)).size).toBe(25);
    expect(await countOf(emu, 'POST', ORG_KEYS, 429)).toBe(0);
    expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(25);
    // A request's slot is free a second after its answer: the 21st to 25th requests cannot leave
    // before two such seconds have passed.
    expect(elapsed).toBeGreaterThanOrEqual(2 * 1_000 - 1);
  }, 20_000);
});

describe('operations', () => {
  it('operationPages walks every operation once, newest first, while new ones are created', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    for (let i = 0; i < 6; i++) await alice.createBranch(project, { name: `b-${i}` });
    const before = (await alice.listOperations(project, { limit: 1000 })).operations.map((o) => o.id);
    expect(before.length).toBeGreaterThanOrEqual(12);

    const walked: Operation[] = [];
    let pages = 0;
    for await (const page of alice.operationPages(project, { limit: 3 })) {
      pages++;
      walked.push(...page);
      // New operations arrive mid-walk (newer than the cursor, so not part of this walk).
      if (pages <= 2) await alice.createBranch(project, { name: `during-${pages}` });
    }
    const ids = walked.map((o) => o.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(before));
    expect(pages).toBeGreaterThanOrEqual(Math.ceil(before.length / 3));
    for (let i = 1; i < walked.length; i++) expect(walked[i - 1]!.created_at >= walked[i]!.created_at).toBe(true);
  });

  it('operationPages of a project with a short history yields one short page', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[1]!;
    const pages: Operation[][] = [];
    for await (const page of alice.operationPages(project)) pages.push(page);
    expect(pages.length).toBe(1);
    expect(await countOf(emu, 'GET', '/projects/:project_id/operations')).toBe(1);
  });

  it('waitForOperation follows a create_branch operation to finished', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    const { operations } = await alice.createBranch(project, { name: 'wait-for-me' });
    const create = operations.find((o) => o.action === 'create_branch')!;
    expect(TERMINAL_OPERATION_STATUSES.has(create.status)).toBe(false);
    const done = await alice.waitForOperation(project, create.id, { intervalMs: 5 });
    expect(done).toMatchObject({ id: create.id, action: 'create_branch', status: 'finished' });
    const start = operations.find((o) => o.action === 'start_compute')!;
    expect(await alice.waitForOperation(project, start.id, { intervalMs: 5, until: 'finished' })).toMatchObject({ status: 'finished' });
  });

  it('waitForOperation polls through failed (not terminal) to finished', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    await failNextOperations(emu, project, 1);
    const { operations } = await alice.createBranch(project, { name: 'flaky' });
    const done = await alice.waitForOperation(project, operations[0]!.id, { intervalMs: 2 });
    expect(done.status).toBe('finished');
    expect(done.failures_count).toBe(1);
  });

  it('waitForOperation ends on error (an operation the platform gave up on); until finished, it is a CONFLICT', async () => {
    const alice = client(emu, user(emu, 'alice').personalKey);
    const project = orgProjects(emu)[0]!;
    await failNextOperations(emu, project, 1, 'error');
    const { operations } = await alice.createBranch(project, { name: 'broken' });
    const create = operations.find((o) => o.action === 'create_branch')!;
    const ended = await alice.waitForOperation(project, create.id, { intervalMs: 2 });
    expect(ended).toMatchObject({ status: 'error', failures_count: 1, error: expect.any(String) });
    expect(await failure(alice.waitForOperation(project, create.id, { intervalMs: 2, until: 'finished' }))).toMatchObject({
      code: 'CONFLICT',
      disposition: 'terminal',
    });
    // Only that one: the start_compute beside it finishes.
    const start = operations.find((o) => o.action === 'start_compute')!;
    expect(await alice.waitForOperation(project, start.id, { intervalMs: 2, until: 'finished' })).toMatchObject({ status: 'finished' });
  });

  it('waitForOperation stops with ABORTED when the signal fires between polls', async () => {
    // Real-time operations here (timeScale 1: create_branch runs 1.2 s), so the abort lands while waiting.
    const slow = await startEmulator({ timeScale: 1, controlPlaneActivity: false });
    try {
      const alice = client(slow, slow.bootstrap.users.find((u) => u.name === 'alice')!.personalKey!);
      const project = orgProjects(slow)[0]!;
      const { operations } = await alice.createBranch(project);
      // The poll interval is an hour: only the abort can end the wait within the test.
      const e = await failure(alice.waitForOperation(project, operations[0]!.id, { intervalMs: 3_600_000, signal: AbortSignal.timeout(100) }));
      expect(e).toMatchObject({ code: 'ABORTED', disposition: 'terminal' });
    } finally {
      await slow.close();
    }
  });
});

describe('secrets', () => {
  it('the client does not show its API key when inspected', () => {
    const key = user(emu, 'alice').personalKey;
    const c = client(emu, key);
    expect(inspect(c, { showHidden: true, depth: 5 })).not.toContain(key);
    expect(JSON.stringify(c)).not.toContain(key);
  });

  it('an error caused by a key in the request carries no secret', async () => {
    const k = 'x1'.repeat(32);
    secrets.add(k);
    const e = await failure(new PlatformClient({ baseUrl: emu.baseUrl, apiKey: k }).listPersonalKeys());
    expect(e.code).toBe('UNAUTHORIZED');
  });

  // Declared last, so it runs after every test above: each error they provoked, rendered every
  // way a log line or a status message could render it, holds none of the personal keys or
  // created keys the suite handled (including the revoked key the 401 test called with).
  it('no error thrown anywhere in this file carries a secret', () => {
    expect(thrown.length).toBeGreaterThan(15);
    expect(secrets.size).toBeGreaterThan(20);
    for (const e of thrown) {
      for (const text of renderings(e)) {
        for (const secret of secrets) expect(text.includes(secret)).toBe(false);
      }
    }
  });
});
