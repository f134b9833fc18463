// Conformance with the platform's official OpenAPI document (the yaml shipped in the
// @neondatabase/api-client devDependency): a scenario calls EVERY public endpoint of the emulator
// with each kind of key, and every response body, success or error, is validated against the
// schema the document declares for that path, method and status, as OpenAPI reads it: a missing
// required field, a wrong type or a value outside an enum fails the suite (openapi-validator.ts).
// The document's objects are open, so a field it does not declare is allowed by it; the suite still
// holds each such field to docs/platform-api.md, which must document it with its type (`locked` on
// a project list item): the emulator never invents a field a real client could come to rely on.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EMULATOR_ROUTES, type Emulator } from '../../src/emulator/server.ts';
import { caller, eventually, keyOf, ORG, projectId, start, type Caller } from './harness.ts';
import { loadOfficialDocument, OpenApiValidator, type Undeclared } from './openapi-validator.ts';

const validator = new OpenApiValidator(loadOfficialDocument());

/** The `| field | type |` rows of a section of docs/platform-api.md: field name to its type. */
function documentedFields(heading: string): Map<string, string> {
  const text = readFileSync(new URL('../../docs/platform-api.md', import.meta.url), 'utf8');
  const start = text.indexOf(`\n### ${heading}\n`);
  if (start < 0) throw new Error(`docs/platform-api.md has no section "${heading}"`);
  const end = text.indexOf('\n#', start + 1);
  const fields = new Map<string, string>();
  for (const line of text.slice(start, end < 0 ? undefined : end).split('\n')) {
    const cells = /^\| `?(\w+)`? \| (\w+)/.exec(line);
    if (cells?.[1] !== undefined && cells[2] !== undefined && cells[1] !== 'Field') fields.set(cells[1], cells[2]);
  }
  return fields;
}

/**
 * Where docs/platform-api.md documents fields of a response beyond the official document: by
 * "METHOD /template status" and the JSON path of the object ([*] for any index of an array).
 */
const BEYOND_THE_DOCUMENT: Record<string, Map<string, string>> = {
  'GET /projects 200 $.projects[*]': documentedFields('Project (as returned by the project list)'),
};

const TYPE_OF: Record<string, (v: unknown) => boolean> = {
  boolean: (v) => typeof v === 'boolean',
  string: (v) => typeof v === 'string',
  integer: (v) => Number.isInteger(v),
};

/** The problems of the fields a response carries beyond the official document (none when docs/platform-api.md documents each, with its type). */
function beyondTheDocument(response: string, undeclared: Undeclared[]): string[] {
  return undeclared.flatMap(({ path, value }) => {
    const at = path.lastIndexOf('.');
    const [parent, field] = [path.slice(0, at).replace(/\[\d+\]/g, '[*]'), path.slice(at + 1)];
    const type = BEYOND_THE_DOCUMENT[`${response} ${parent}`]?.get(field);
    if (type === undefined) return [`${path}: declared neither by the official document nor by docs/platform-api.md`];
    if (TYPE_OF[type]?.(value) !== true) return [`${path}: docs/platform-api.md documents it as ${type}, got ${JSON.stringify(value)}`];
    return [];
  });
}

describe('the validator itself', () => {
  const operation = {
    id: 'd8ac46eb-a757-42b1-9907-f78322ee394e',
    project_id: 'spring-example-302709',
    branch_id: 'br-wispy-meadow-118737',
    action: 'create_branch',
    status: 'finished',
    failures_count: 0,
    created_at: '2022-11-15T20:02:00Z',
    updated_at: '2022-11-15T20:02:02Z',
    total_duration_ms: 200,
  };
  const revoked = {
    id: 1,
    name: 'k',
    created_at: '2022-11-15T20:13:35Z',
    created_by: '629982cc-de05-43db-ae16-28f2399c4910',
    last_used_at: null,
    last_used_from_addr: '',
    revoked: true,
  };

  it("accepts the document's own example, and a field it does not declare (its objects are open), reported apart", () => {
    expect(validator.validate(validator.component('Operation'), operation)).toEqual([]);
    expect(validator.undeclared(validator.component('Operation'), operation)).toEqual([]);
    expect(validator.validate(validator.component('Operation'), { ...operation, locked: false })).toEqual([]);
    expect(validator.undeclared(validator.component('Operation'), { ...operation, locked: false })).toEqual([{ path: '$.locked', value: false }]);
  });

  it('refuses a field where the document closes the object (additionalProperties: false)', () => {
    const closed = { type: 'object', properties: { id: { type: 'integer' } }, additionalProperties: false };
    expect(validator.validate(closed, { id: 1 })).toEqual([]);
    expect(validator.validate(closed, { id: 1, extra: true })).toEqual(['$.extra: the document allows no property beyond its own here']);
  });

  it("honours allOf: a part's property is declared for the whole, not for a schema without that part", () => {
    expect(validator.undeclared(validator.component('OrgApiKeyRevokeResponse'), { ...revoked, project_id: 'p-1' })).toEqual([]);
    expect(validator.undeclared(validator.component('ApiKeyRevokeResponse'), { ...revoked, project_id: 'p-1' })).toEqual([
      { path: '$.project_id', value: 'p-1' },
    ]);
    expect(validator.undeclared(validator.component('OrgApiKeyRevokeResponse'), { ...revoked, extra: 1 })).toEqual([{ path: '$.extra', value: 1 }]);
  });

  it('holds a field beyond the document to docs/platform-api.md: documented there, with its type', () => {
    const list = validator.responseSchema('/projects', 'GET', 200);
    const item = {
      id: 'p-1',
      platform_id: 'aws',
      region_id: 'aws-us-east-2',
      name: 'p',
      provisioner: 'k8s-neonvm',
      pg_version: 17,
      proxy_host: 'h',
      branch_logical_size_limit: 0,
      branch_logical_size_limit_bytes: 0,
      store_passwords: true,
      cpu_used_sec: 0,
      active_time: 0,
      creation_source: 'console',
      created_at: '2022-11-15T20:02:00Z',
      updated_at: '2022-11-15T20:02:00Z',
      owner_id: 'u',
    };
    const page = (extra: Record<string, unknown>) => ({ projects: [{ ...item, ...extra }], applications: {}, integrations: {} });
    expect(validator.validate(list, page({}))).toEqual([]);
    expect(beyondTheDocument('GET /projects 200', validator.undeclared(list, page({ locked: false })))).toEqual([]);
    expect(beyondTheDocument('GET /projects 200', validator.undeclared(list, page({ locked: 'no' })))).toEqual([
      '$.projects[0].locked: docs/platform-api.md documents it as boolean, got "no"',
    ]);
    expect(beyondTheDocument('GET /projects 200', validator.undeclared(list, page({ invented: 1 })))).toEqual([
      '$.projects[0].invented: declared neither by the official document nor by docs/platform-api.md',
    ]);
    expect(beyondTheDocument('GET /projects/{project_id} 200', [{ path: '$.project.locked', value: false }])).toHaveLength(1);
    const { name: _dropped, ...nameless } = item;
    expect(validator.validate(list, { ...page({}), projects: [nameless] })).toEqual(['$.projects[0]: required property name is missing']);
  });

  it('checks types, required fields, enums, nullability and nested objects', () => {
    const { failures_count: _dropped, ...missing } = operation;
    expect(validator.validate(validator.component('Operation'), missing)).toEqual(['$: required property failures_count is missing']);
    expect(validator.validate(validator.component('Operation'), { ...operation, status: 'done' })).toHaveLength(1);
    expect(validator.validate(validator.component('Operation'), { ...operation, failures_count: '0' })).toHaveLength(1);
    expect(validator.validate(validator.component('Operation'), { ...operation, error: null })).toEqual(['$.error: null is not allowed']);
    const page = validator.responseSchema('/projects/{project_id}/operations', 'GET', 200);
    expect(validator.undeclared(page, { operations: [{ ...operation, nested: true }] })).toEqual([{ path: '$.operations[0].nested', value: true }]);
  });
});

interface Checked {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- inspected field by field
}

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
    const schema = validator.responseSchema(template, method, res.status);
    const errors = [
      ...validator.validate(schema, res.body),
      ...beyondTheDocument(`${method} ${template} ${res.status}`, validator.undeclared(schema, res.body)),
    ];
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
    expect((await checked('GET', '/users/me/organizations', { key: carol })).status).toBe(200);

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

    // Members of the organization: read by a member administrator or not and by an organization key,
    // in pages (`next` on all but the last); refused to a project-scoped key and a non-member.
    expect((await checked('GET', `/organizations/${ORG}/members`, { key: alice })).body.members).toHaveLength(2);
    const firstMember = await checked('GET', `/organizations/${ORG}/members?limit=1&sort_by=email&sort_order=asc`, { key: bob });
    expect(firstMember.body.pagination.next).toEqual(expect.any(String));
    const lastMember = await checked('GET', `/organizations/${ORG}/members?limit=1&cursor=${firstMember.body.pagination.next as string}`, {
      key: org.body.key,
    });
    expect(lastMember.status).toBe(200);
    expect(lastMember.body.pagination.next).toBeUndefined();
    expect((await checked('GET', `/organizations/${ORG}/members?sort_by=role&sort_order=desc&limit=500`, { key: org.body.key })).status).toBe(200);
    expect((await checked('GET', `/organizations/${ORG}/members`, { key: scoped.body.key })).status).toBe(403);
    expect((await checked('GET', `/organizations/${ORG}/members`, { key: carol })).status).toBe(403);
    expect((await checked('GET', `/organizations/${ORG}/members?limit=501`, { key: alice })).status).toBe(400);
    expect((await checked('GET', `/organizations/${ORG}/members?cursor=x`, { key: alice })).status).toBe(400);
    expect((await checked('GET', `/organizations/${ORG}/members`)).status).toBe(401);
    // Who the caller is, with the other kinds of key: no user behind them (403); their organization.
    expect((await checked('GET', '/users/me', { key: org.body.key })).status).toBe(403);
    for (const key of [org.body.key, scoped.body.key]) expect((await checked('GET', '/users/me/organizations', { key })).body.organizations).toHaveLength(1);

    // Projects, seen by each kind of key.
    const listed = await checked('GET', `/projects?org_id=${ORG}`, { key: alice });
    expect(listed.status).toBe(200);
    // `locked` on every list item (docs/platform-api.md), beyond the official document's ProjectListItem.
    expect((listed.body.projects as { locked?: unknown }[]).map((p) => p.locked)).toEqual([false, false]);
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
    const withCompute = await checked('POST', `/projects/${project}/branches`, {
      key: alice,
      body: { branch: { name: 'conf-compute' }, endpoints: [{ type: 'read_write' }] },
    });
    expect(withCompute.status).toBe(201);
    expect((await admin(`/admin/projects/${project}/fail-next-operations`, { count: 1 })).status).toBe(200);
    const retried = await checked('POST', `/projects/${project}/branches`, { key: alice, body: { branch: { name: 'conf-retried' } } });
    expect((await admin(`/admin/projects/${project}/fail-next-operations`, { count: 1, outcome: 'error' })).status).toBe(200);
    const broken = await checked('POST', `/projects/${project}/branches`, { key: alice, body: { branch: { name: 'conf-broken' } } });

    // Operations: polled through both endpoints until every status the emulator produces has been
    // validated in some answer (scheduling and running already are, in the branch creations').
    const ops = [...withCompute.body.operations, ...retried.body.operations, ...broken.body.operations] as { id: string }[];
    await eventually(
      async () => {
        for (const op of ops) await checked('GET', `/projects/${project}/operations/${op.id}`, { key: alice });
        await checked('GET', `/projects/${project}/operations?limit=100`, { key: alice });
        return ['scheduling', 'running', 'failed', 'error', 'finished'].every((s) => statuses.has(s)) ? true : undefined;
      },
      30_000,
      10,
    );
    const first = await checked('GET', `/projects/${project}/operations?limit=2`, { key: alice });
    expect(
      (await checked('GET', `/projects/${project}/operations?limit=2&cursor=${encodeURIComponent(first.body.pagination.cursor as string)}`, { key: alice }))
        .status,
    ).toBe(200);
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
    const burst = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        checked('POST', `/organizations/${ORG}/api_keys`, { key: bob, body: { key_name: `burst-${i}`, project_id: demoApi } }),
      ),
    );
    expect(burst.map((r) => r.status)).toContain(429);

    expect(problems).toEqual([]);
  });

  it('the scenario covered every public endpoint of the emulator', () => {
    const routes = EMULATOR_ROUTES.filter((r) => r.template.startsWith('/api/v2/')).map(
      (r) => `${r.method} ${r.template.replace(/^\/api\/v2/, '').replace(/:(\w+)/g, '{$1}')}`,
    );
    expect(routes.length).toBeGreaterThanOrEqual(17);
    expect(routes.filter((r) => !covered.has(r))).toEqual([]);
  });
});
