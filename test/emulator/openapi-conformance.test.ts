// Conformance with the platform's official OpenAPI document (the yaml shipped in the
// @neondatabase/api-client devDependency): a scenario calls EVERY public endpoint of the emulator
// with each kind of key, and every response body, success or error, is validated against the
// schema the document declares for that path, method and status, with every object closed: a field
// the document does not declare for that response fails the suite (openapi-validator.ts).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Emulator } from '../../src/emulator/server.ts';
import { apiKeyRoutes } from '../../src/emulator/routes/api-keys.ts';
import { operationRoutes } from '../../src/emulator/routes/operations.ts';
import { projectRoutes } from '../../src/emulator/routes/projects.ts';
import { userRoutes } from '../../src/emulator/routes/users.ts';
import { caller, eventually, keyOf, ORG, projectId, start, type Caller } from './harness.ts';
import { loadOfficialDocument, OpenApiValidator } from './openapi-validator.ts';

const validator = new OpenApiValidator(loadOfficialDocument());

describe('the validator itself', () => {
  const operation = {
    id: 'd8ac46eb-a757-42b1-9907-f78322ee394e', project_id: 'spring-example-302709', branch_id: 'br-wispy-meadow-118737',
    action: 'create_branch', status: 'finished', failures_count: 0, created_at: '2022-11-15T20:02:00Z', updated_at: '2022-11-15T20:02:02Z', total_duration_ms: 200,
  };
  const revoked = { id: 1, name: 'k', created_at: '2022-11-15T20:13:35Z', created_by: '629982cc-de05-43db-ae16-28f2399c4910', last_used_at: null, last_used_from_addr: '', revoked: true };

  it('accepts the document\'s own example and refuses a field it does not declare', () => {
    expect(validator.validate(validator.component('Operation'), operation)).toEqual([]);
    expect(validator.validate(validator.component('Operation'), { ...operation, locked: false })).toEqual(['$.locked: not declared by the document']);
  });

  it('honours allOf: a part\'s property is declared for the whole, not for a schema without that part', () => {
    expect(validator.validate(validator.component('OrgApiKeyRevokeResponse'), { ...revoked, project_id: 'p-1' })).toEqual([]);
    expect(validator.validate(validator.component('ApiKeyRevokeResponse'), { ...revoked, project_id: 'p-1' })).toEqual(['$.project_id: not declared by the document']);
    expect(validator.validate(validator.component('OrgApiKeyRevokeResponse'), { ...revoked, extra: 1 })).toEqual(['$.extra: not declared by the document']);
  });

  it('checks types, required fields, enums, nullability and nested objects', () => {
    const { failures_count: _dropped, ...missing } = operation;
    expect(validator.validate(validator.component('Operation'), missing)).toEqual(['$: required property failures_count is missing']);
    expect(validator.validate(validator.component('Operation'), { ...operation, status: 'done' })).toHaveLength(1);
    expect(validator.validate(validator.component('Operation'), { ...operation, failures_count: '0' })).toHaveLength(1);
    expect(validator.validate(validator.component('Operation'), { ...operation, error: null })).toEqual(['$.error: null is not allowed']);
    const page = validator.responseSchema('/projects/{project_id}/operations', 'GET', 200);
    expect(validator.validate(page, { operations: [{ ...operation, nested: true }] })).toEqual(['$.operations[0].nested: not declared by the document']);
  });
});

interface Checked { status: number; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any -- inspected field by field

describe('every emulator response conforms to the official document', () => {
  let emu: Emulator;
  let call: Caller;
  const problems: string[] = [];
  /** "METHOD /document/template" of every validated response. */
  const covered = new Set<string>();
  /** Operation statuses in the validated responses. */
  const statuses = new Set<string>();

  beforeAll(async () => {
    // Slow enough that a loaded machine still sees each short-lived status (failed lasts 1 s here).
    emu = await start({ timeScale: 0.2 });
    call = caller(emu);
  });

  afterAll(async () => {
    await emu.close();
  });

  /** Calls the public API and validates the response body against the document. */
  async function checked(method: string, path: string, options: { key?: string; body?: unknown } = {}): Promise<Checked> {
    const res = await call(method, path, options);
    const template = validator.template(path);
    if (template === undefined) {
      problems.push(`${method} ${path}: no path of the document matches`);
      return res;
    }
    covered.add(`${method} ${template}`);
    const body = res.body as { operation?: { status?: unknown }; operations?: { status?: unknown }[] } | undefined;
    for (const op of [body?.operation, ...(Array.isArray(body?.operations) ? body.operations : [])]) {
      if (typeof op?.status === 'string') statuses.add(op.status);
    }
    const errors = validator.validate(validator.responseSchema(template, method, res.status), res.body);
    for (const e of errors) problems.push(`${method} ${template} ${res.status}: ${e}`);
    return res;
  }

  const admin = (path: string, body: unknown) => call('POST', path, { body });

  it('runs the scenario: keys of every kind, projects, branches, operations in every status, auth, errors', async () => {
    const alice = keyOf(emu, 'alice');
    const bob = keyOf(emu, 'bob');
    const carol = keyOf(emu, 'carol');
    const demoApi = projectId(emu, 'demo-api');

    // Who the caller is.
    expect((await checked('GET', '/auth', { key: alice })).status).toBe(200);
    expect((await checked('GET', '/users/me', { key: alice })).status).toBe(200);
    expect((await checked('GET', '/users/me/organizations', { key: alice })).status).toBe(200);

    // Keys of every kind.
    const personal = await checked('POST', '/api_keys', { key: alice, body: { key_name: 'conf-personal' } });
    expect(personal.status).toBe(200);
    expect((await checked('GET', '/api_keys', { key: alice })).status).toBe(200);
    const org = await checked('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: 'conf-org' } });
    expect(org.status).toBe(200);
    const scoped = await checked('POST', `/organizations/${ORG}/api_keys`, { key: bob, body: { key_name: 'conf-scoped', project_id: demoApi } });
    expect(scoped.status).toBe(200);
    const scoped2 = await checked('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: 'conf-scoped-2', project_id: demoApi } });
    expect((await checked('GET', `/organizations/${ORG}/api_keys`, { key: alice })).status).toBe(200);
    expect((await checked('GET', `/organizations/${ORG}/api_keys`, { key: org.body.key })).status).toBe(200);
    for (const key of [org.body.key, scoped.body.key, personal.body.key]) expect((await checked('GET', '/auth', { key })).status).toBe(200);

    // Projects, seen by each kind of key.
    expect((await checked('GET', `/projects?org_id=${ORG}`, { key: alice })).status).toBe(200);
    expect((await checked('GET', '/projects?limit=1', { key: org.body.key })).status).toBe(200);
    expect((await checked('GET', '/projects', { key: scoped.body.key })).status).toBe(200);
    expect((await checked('GET', '/projects', { key: carol })).status).toBe(200);
    expect((await checked('GET', '/projects/shared', { key: alice })).status).toBe(200);
    for (const key of [alice, org.body.key, scoped.body.key]) expect((await checked('GET', `/projects/${demoApi}`, { key })).status).toBe(200);
    expect((await checked('GET', `/projects/${projectId(emu, 'carol-sandbox')}`, { key: carol })).status).toBe(200);
    const created = await checked('POST', '/projects', { key: alice, body: { project: { name: 'conf-project', org_id: ORG } } });
    expect(created.status).toBe(201);
    const project = created.body.project.id as string;
    expect((await checked('POST', '/projects', { key: carol, body: { project: {} } })).status).toBe(201);

    // Branches: without a body, with only a name, with a compute; one of each operation outcome.
    expect((await checked('POST', `/projects/${project}/branches`, { key: alice })).status).toBe(201);
    expect((await checked('POST', `/projects/${project}/branches`, { key: org.body.key, body: { branch: { name: 'conf-named' } } })).status).toBe(201);
    const withCompute = await checked('POST', `/projects/${project}/branches`, { key: alice, body: { branch: { name: 'conf-compute' }, endpoints: [{ type: 'read_write' }] } });
    expect(withCompute.status).toBe(201);
    expect((await admin(`/admin/projects/${project}/fail-next-operations`, { count: 1 })).status).toBe(200);
    const retried = await checked('POST', `/projects/${project}/branches`, { key: alice, body: { branch: { name: 'conf-retried' } } });
    expect((await admin(`/admin/projects/${project}/fail-next-operations`, { count: 1, outcome: 'error' })).status).toBe(200);
    const broken = await checked('POST', `/projects/${project}/branches`, { key: alice, body: { branch: { name: 'conf-broken' } } });

    // Operations: polled through both endpoints until every status the emulator produces has been
    // validated in some answer (scheduling and running already are, in the branch creations').
    const ops = [...withCompute.body.operations, ...retried.body.operations, ...broken.body.operations] as { id: string }[];
    await eventually(async () => {
      for (const op of ops) await checked('GET', `/projects/${project}/operations/${op.id}`, { key: alice });
      await checked('GET', `/projects/${project}/operations?limit=100`, { key: alice });
      return ['scheduling', 'running', 'failed', 'error', 'finished'].every((s) => statuses.has(s)) ? true : undefined;
    }, 30_000, 10);
    const first = await checked('GET', `/projects/${project}/operations?limit=2`, { key: alice });
    expect((await checked('GET', `/projects/${project}/operations?limit=2&cursor=${encodeURIComponent(first.body.pagination.cursor as string)}`, { key: alice })).status).toBe(200);
    expect((await checked('GET', `/projects/${demoApi}/operations`, { key: scoped.body.key })).status).toBe(200);

    // Personal keys are listed only with a personal key (403 for an organization key).
    expect((await checked('GET', '/api_keys', { key: org.body.key })).status).toBe(403);

    // Revocation through each endpoint that may do it.
    expect((await checked('DELETE', `/api_keys/${personal.body.id}`, { key: alice })).status).toBe(200);
    expect((await checked('DELETE', `/api_keys/${scoped2.body.id}`, { key: alice })).status).toBe(200);
    expect((await checked('DELETE', `/organizations/${ORG}/api_keys/${scoped.body.id}`, { key: org.body.key })).status).toBe(200);
    expect((await checked('DELETE', `/organizations/${ORG}/api_keys/${org.body.id}`, { key: alice })).status).toBe(200);
    expect((await checked('DELETE', `/projects/${project}`, { key: alice })).status).toBe(200);

    // Errors answer the document's `default` response (GeneralError).
    expect((await checked('GET', '/auth')).status).toBe(401);
    expect((await checked('GET', '/api_keys', { key: personal.body.key })).status).toBe(401);
    expect((await checked('POST', `/organizations/${ORG}/api_keys`, { key: bob, body: { key_name: 'not-an-admin' } })).status).toBe(403);
    expect((await checked('GET', '/projects/no-such-project-1', { key: alice })).status).toBe(404);
    expect((await checked('DELETE', '/api_keys/not-a-number', { key: alice })).status).toBe(400);
    expect((await checked('POST', `/projects/${demoApi}/branches`, { key: alice, body: { branch: { name: '' } } })).status).toBe(400);
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => checked('POST', `/organizations/${ORG}/api_keys`, { key: bob, body: { key_name: `burst-${i}`, project_id: demoApi } })));
    expect(burst.map((r) => r.status)).toContain(429);

    expect(problems).toEqual([]);
  });

  it('the scenario covered every public endpoint of the emulator', () => {
    const routes = [...apiKeyRoutes, ...projectRoutes, ...operationRoutes, ...userRoutes]
      .map((r) => `${r.method} ${r.template.replace(/^\/api\/v2/, '').replace(/:(\w+)/g, '{$1}')}`);
    expect(routes.length).toBeGreaterThanOrEqual(17);
    expect(routes.filter((r) => !covered.has(r))).toEqual([]);
  });
});
