// Wire compatibility with the platform's official TypeScript client, @neondatabase/api-client
// (docs/design.md section 6): the calls the operator and its users make, unchanged.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createApiClient, type EndpointType } from '@neondatabase/api-client';
import type { Emulator } from '../../src/emulator/server.ts';
import { eventually, keyOf, ORG, projectId, start } from './harness.ts';

let emu: Emulator;
let api: ReturnType<typeof createApiClient>;

beforeAll(async () => {
  emu = await start();
  api = createApiClient({ baseURL: emu.baseUrl, apiKey: keyOf(emu, 'alice') });
});

afterAll(async () => {
  await emu.close();
});

describe('@neondatabase/api-client against the emulator', () => {
  it('creates, lists and revokes personal and organization keys', async () => {
    const personal = await api.createApiKey({ key_name: 'client-personal' });
    expect(personal.data.key).toMatch(/^[a-z0-9]{64}$/);
    expect((await api.listApiKeys()).data.map((k) => k.name)).toContain('client-personal');
    const org = await api.createOrgApiKey(ORG, { key_name: 'client-org' });
    const scoped = await api.createOrgApiKey(ORG, { key_name: 'client-scoped', project_id: projectId(emu, 'demo-api') });
    expect(scoped.data.project_id).toBe(projectId(emu, 'demo-api'));
    const orgKeys = (await api.listOrgApiKeys(ORG)).data;
    expect(orgKeys.map((k) => k.name)).toEqual(expect.arrayContaining(['client-org', 'client-scoped']));
    expect(orgKeys.find((k) => k.name === 'client-org')?.created_by.name).toBe('alice');
    const revoked = await api.revokeApiKey(personal.data.id);
    expect(revoked.data).toMatchObject({ id: personal.data.id, revoked: true });
    expect((await api.revokeOrgApiKey(ORG, org.data.id)).data.revoked).toBe(true);
    // Each revoke endpoint answers its own schema: project_id only from the organization's.
    const scoped2 = await api.createOrgApiKey(ORG, { key_name: 'client-scoped-2', project_id: projectId(emu, 'demo-api') });
    expect((await api.revokeOrgApiKey(ORG, scoped.data.id)).data).toMatchObject({ revoked: true, project_id: projectId(emu, 'demo-api') });
    const viaPersonal = (await api.revokeApiKey(scoped2.data.id)).data;
    expect(viaPersonal.revoked).toBe(true);
    expect(viaPersonal).not.toHaveProperty('project_id');
    expect((await api.listApiKeys()).data.map((k) => k.name)).not.toContain('client-personal');
  });

  it('tells each kind of key apart with getAuthDetails (GET /auth)', async () => {
    const project = projectId(emu, 'demo-api');
    const org = await api.createOrgApiKey(ORG, { key_name: 'auth-org' });
    const scoped = await api.createOrgApiKey(ORG, { key_name: 'auth-scoped', project_id: project });
    const as = (key: string) => createApiClient({ baseURL: emu.baseUrl, apiKey: key });
    expect((await api.getAuthDetails()).data).toEqual({ account_id: emu.bootstrap.users.find((u) => u.name === 'alice')?.id, auth_method: 'api_key_user' });
    expect((await as(org.data.key).getAuthDetails()).data).toEqual({ account_id: ORG, auth_method: 'api_key_org' });
    expect((await as(scoped.data.key).getAuthDetails()).data).toEqual({ account_id: ORG, auth_method: 'api_key_org', auth_data: project });
  });

  it('reports errors as GeneralError with the status', async () => {
    const bob = createApiClient({ baseURL: emu.baseUrl, apiKey: keyOf(emu, 'bob') });
    await expect(bob.createOrgApiKey(ORG, { key_name: 'nope' })).rejects.toMatchObject({ response: { status: 403, data: { code: 'PERMISSION_DENIED' } } });
    const nobody = createApiClient({ baseURL: emu.baseUrl, apiKey: 'x'.repeat(64) });
    await expect(nobody.listApiKeys()).rejects.toMatchObject({ response: { status: 401 } });
  });

  it('lists projects, creates a branch, pages and gets operations', async () => {
    const projects = (await api.listProjects({ org_id: ORG })).data.projects;
    expect(projects.map((p) => p.name)).toEqual(['demo-api', 'demo-web']);
    const project = projectId(emu, 'demo-web');
    const branch = await api.createProjectBranch(project, { branch: { name: 'client-branch' }, endpoints: [{ type: 'read_write' as EndpointType }] });
    expect(branch.status).toBe(201);
    expect(branch.data.operations.map((o) => [o.action, o.status])).toEqual([
      ['create_branch', 'running'],
      ['start_compute', 'scheduling'],
    ]);
    const ids: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = (await api.listProjectOperations({ projectId: project, limit: 1, ...(cursor !== undefined ? { cursor } : {}) })).data;
      if (page.operations.length === 0) break;
      ids.push(...page.operations.map((o) => o.id));
      cursor = page.pagination?.cursor;
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBeGreaterThanOrEqual(4);
    const first = branch.data.operations[0];
    const done = await eventually(async () => {
      const op = (await api.getProjectOperation(project, first?.id ?? '')).data.operation;
      return op.status === 'finished' ? op : undefined;
    });
    expect(done.action).toBe('create_branch');
    expect(typeof done.total_duration_ms).toBe('number');
  });
});
