// Operations (docs/platform-api.md "Operation", "States and transitions", "List operations of a
// project", "Pagination object", "Polling"): what requests start, how statuses move, failures and
// retries, the control plane's own operations, and paging invariants while operations keep coming.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Emulator } from '../../src/emulator/server.ts';
import { openStore } from '../../src/emulator/store.ts';
import { caller, eventually, keyOf, ORG, projectId, start, type Caller } from './harness.ts';

interface Op {
  id: string;
  action: string;
  status: string;
  failures_count: number;
  created_at: string;
  updated_at: string;
  total_duration_ms: number;
  endpoint_id?: string;
  branch_id: string;
}

let emu: Emulator;
let call: Caller;
let alice: string;

beforeAll(async () => {
  emu = await start({ timeScale: 0.01 });
  call = caller(emu);
  alice = keyOf(emu, 'alice');
});

afterAll(async () => {
  await emu.close();
});

/** A branch with a read-write compute: create_branch + start_compute (docs/platform-api.md "Operation status"). */
const WITH_COMPUTE = { endpoints: [{ type: 'read_write' }] };

async function newProject(name: string): Promise<string> {
  const res = await call('POST', '/projects', { key: alice, body: { project: { org_id: ORG, name } } });
  expect(res.status).toBe(201);
  return res.body.project.id as string;
}

async function waitForStatus(project: string, opId: string, status: string): Promise<Op> {
  return eventually(async () => {
    const res = await call('GET', `/projects/${project}/operations/${opId}`, { key: alice });
    expect(res.status).toBe(200);
    return res.body.operation.status === status ? (res.body.operation as Op) : undefined;
  });
}

describe('operations started by requests', () => {
  it('creating a project starts create_timeline, which finishes', async () => {
    const res = await call('POST', '/projects', { key: alice, body: { project: { org_id: ORG, name: 'ops-a' } } });
    expect(res.status).toBe(201);
    const actions = res.body.operations.map((o: Op) => o.action);
    expect(actions).toContain('create_timeline');
    const op = res.body.operations[0] as Op;
    const done = await waitForStatus(res.body.project.id, op.id, 'finished');
    expect(done.total_duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('creating a branch returns create_branch running and start_compute scheduling, both later finished', async () => {
    const project = projectId(emu, 'demo-api');
    const res = await call('POST', `/projects/${project}/branches`, { key: alice, body: { branch: { name: 'feature' }, endpoints: [{ type: 'read_write' }] } });
    expect(res.status).toBe(201);
    expect(res.body.branch).toMatchObject({ name: 'feature', project_id: project });
    expect(res.body.endpoints).toHaveLength(1);
    const [create, startOp] = res.body.operations as Op[];
    expect(create).toMatchObject({ action: 'create_branch', status: 'running', failures_count: 0, branch_id: res.body.branch.id });
    expect(create?.endpoint_id).toBeUndefined();
    expect(startOp).toMatchObject({ action: 'start_compute', status: 'scheduling', endpoint_id: res.body.endpoints[0].id });
    for (const field of ['id', 'project_id', 'branch_id', 'action', 'status', 'failures_count', 'created_at', 'updated_at', 'total_duration_ms']) {
      expect(create).toHaveProperty(field);
    }
    await waitForStatus(project, create?.id ?? '', 'finished');
    const finished = await waitForStatus(project, startOp?.id ?? '', 'finished');
    expect(finished.total_duration_ms).toBeGreaterThan(0);
  });

  it("a branch created without endpoints gets no compute: create_branch alone, no start_compute (the document's CreatedBranch)", async () => {
    const project = projectId(emu, 'demo-api');
    for (const body of [undefined, { branch: { name: 'no-compute' } }, { branch: { name: 'empty-endpoints' }, endpoints: [] }]) {
      const res = await call('POST', `/projects/${project}/branches`, { key: alice, body });
      expect(res.status).toBe(201);
      expect(res.body.endpoints).toEqual([]);
      expect((res.body.operations as Op[]).map((o) => [o.action, o.status])).toEqual([['create_branch', 'running']]);
      await waitForStatus(project, (res.body.operations as Op[])[0]?.id ?? '', 'finished');
    }
  });

  it('endpoints in the body decide the computes: one start_compute each, at most one read_write', async () => {
    const project = projectId(emu, 'demo-api');
    const res = await call('POST', `/projects/${project}/branches`, { key: alice, body: { endpoints: [{ type: 'read_write' }, { type: 'read_only' }] } });
    expect(res.status).toBe(201);
    expect(res.body.endpoints.map((e: { type: string }) => e.type)).toEqual(['read_write', 'read_only']);
    const ops = res.body.operations as Op[];
    expect(ops.map((o) => [o.action, o.endpoint_id])).toEqual([
      ['create_branch', undefined],
      ...res.body.endpoints.map((e: { id: string }) => ['start_compute', e.id]),
    ]);
    const two = await call('POST', `/projects/${project}/branches`, { key: alice, body: { endpoints: [{ type: 'read_write' }, { type: 'read_write' }] } });
    expect(two.status).toBe(400);
  });

  it('an operation made to end in error reads error with its message and failures_count 1, and never changes again', async () => {
    const project = projectId(emu, 'demo-web');
    expect((await call('POST', `/admin/projects/${project}/fail-next-operations`, { body: { count: 1, outcome: 'error' } })).body).toMatchObject({
      errorNextOperations: 1,
    });
    const res = await call('POST', `/projects/${project}/branches`, { key: alice, body: WITH_COMPUTE });
    const [create, startOp] = res.body.operations as Op[];
    const errored = await waitForStatus(project, create?.id ?? '', 'error');
    expect(errored).toMatchObject({ failures_count: 1, error: expect.stringContaining('will not be retried') });
    // The budget was one operation: the compute beside it starts normally.
    await waitForStatus(project, startOp?.id ?? '', 'finished');
    // Well past a retry (5 s at timeScale 1 = 50 ms here), it still reads error, with the same times.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const later = (await call('GET', `/projects/${project}/operations/${create?.id ?? ''}`, { key: alice })).body.operation as Op;
    expect(later).toEqual(errored);
    // The console shows it with the label Error.
    const page = await call('GET', '/console');
    expect(String(page.body)).toMatch(/<td>Create branch<\/td><td>[^<]*<\/td><td><\/td><td>Error<\/td>/);
  });

  it('an operation made to fail reads failed with failures_count 1, then is retried to finished', async () => {
    // A slower clock here: the failed state lasts 500 ms, long enough to be seen on a busy machine.
    const slow = await start({ timeScale: 0.1 });
    try {
      const c = caller(slow);
      const key = keyOf(slow, 'alice');
      const project = projectId(slow, 'demo-web');
      expect((await c('POST', `/admin/projects/${project}/fail-next-operations`, { body: { count: 2 } })).status).toBe(200);
      const res = await c('POST', `/projects/${project}/branches`, { key, body: WITH_COMPUTE });
      const ops = res.body.operations as Op[];
      expect(ops).toHaveLength(2);
      const poll = (id: string, status: string) =>
        eventually(
          async () => {
            const r = await c('GET', `/projects/${project}/operations/${id}`, { key });
            return r.body.operation.status === status ? (r.body.operation as Op) : undefined;
          },
          15_000,
          20,
        );
      await Promise.all(
        ops.map(async (op) => {
          const failed = await poll(op.id, 'failed');
          expect(failed.failures_count).toBe(1);
          expect(typeof (failed as Op & { error?: string }).error).toBe('string');
          const done = await poll(op.id, 'finished');
          expect(done.failures_count).toBe(1);
        }),
      );
      // The budget is spent: the next operations succeed without failing.
      const next = await c('POST', `/projects/${project}/branches`, { key, body: WITH_COMPUTE });
      const done = await poll((next.body.operations as Op[])[0]?.id ?? '', 'finished');
      expect(done.failures_count).toBe(0);
    } finally {
      await slow.close();
    }
  });

  it('unknown and malformed operation ids are 404', async () => {
    const project = projectId(emu, 'demo-api');
    expect((await call('GET', `/projects/${project}/operations/00000000-0000-4000-8000-000000000000`, { key: alice })).status).toBe(404);
    expect((await call('GET', `/projects/${project}/operations/not-a-uuid`, { key: alice })).status).toBe(404);
  });
});

describe('control plane activity', () => {
  it('suspends an inactive compute and checks availability periodically', async () => {
    const fast = await start({ timeScale: 0.002, controlPlaneActivity: true });
    try {
      const c = caller(fast);
      const project = projectId(fast, 'demo-api');
      const actions = await eventually(
        async () => {
          const res = await c('GET', `/projects/${project}/operations?limit=100`, { key: keyOf(fast, 'alice') });
          const seen = new Set((res.body.operations as Op[]).filter((o) => o.status === 'finished').map((o) => o.action));
          return seen.has('suspend_compute') && seen.has('check_availability') ? seen : undefined;
        },
        15_000,
        100,
      );
      expect(actions.has('start_compute')).toBe(true);
    } finally {
      await fast.close();
    }
  });

  it('is turned off and on at run time through the admin API (PUT /admin/control-plane)', async () => {
    const fast = await start({ timeScale: 0.002, controlPlaneActivity: true });
    try {
      const c = caller(fast);
      const project = projectId(fast, 'demo-api');
      const admin = async (method: string, body?: unknown) => {
        const res = await fetch(`${fast.adminUrl}/control-plane`, {
          method,
          ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
        });
        return { status: res.status, body: (await res.json()) as { activity?: boolean; code?: string } };
      };
      expect(await admin('GET')).toEqual({ status: 200, body: { activity: true } });
      expect(await admin('PUT', { activity: false })).toEqual({ status: 200, body: { activity: false } });
      expect((await admin('PUT', { activity: 'no' })).status).toBe(400);
      const count = async () =>
        ((await c('GET', `/projects/${project}/operations?limit=100`, { key: keyOf(fast, 'alice') })).body.operations as Op[]).filter(
          (o) => o.action === 'check_availability' || o.action === 'suspend_compute',
        ).length;
      // Operations already started finish; then none is added (a check every 1.2 s at this time scale).
      await new Promise((resolve) => setTimeout(resolve, 500));
      const before = await count();
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(await count()).toBe(before);
      expect(await admin('PUT', { activity: true })).toEqual({ status: 200, body: { activity: true } });
      await eventually(async () => ((await count()) > before ? true : undefined), 15_000, 100);
    } finally {
      await fast.close();
    }
  });
});

describe('paging', () => {
  it('pages newest first; the cursor is the created_at of the last operation; pages neither skip nor repeat while operations keep coming', async () => {
    const project = await newProject('paging');
    for (let i = 0; i < 10; i++) await call('POST', `/projects/${project}/branches`, { key: alice, body: WITH_COMPUTE });
    const before = new Set(((await call('GET', `/projects/${project}/operations?limit=1000`, { key: alice })).body.operations as Op[]).map((o) => o.id));
    expect(before.size).toBe(22);

    // A writer keeps adding operations (concurrent branch creations) while the reader pages.
    let writing = true;
    const writer = (async () => {
      while (writing) await Promise.all([1, 2].map(() => call('POST', `/projects/${project}/branches`, { key: alice, body: WITH_COMPUTE })));
    })();
    const seen: Op[] = [];
    let cursor: string | undefined;
    for (;;) {
      const q = cursor === undefined ? 'limit=3' : `limit=3&cursor=${encodeURIComponent(cursor)}`;
      const res = await call('GET', `/projects/${project}/operations?${q}`, { key: alice });
      expect(res.status).toBe(200);
      const page = res.body.operations as Op[];
      if (page.length === 0) break;
      expect(res.body.pagination.cursor).toBe(page.at(-1)?.created_at);
      seen.push(...page);
      cursor = res.body.pagination.cursor;
    }
    writing = false;
    await writer;
    const after = (await call('GET', `/projects/${project}/operations?limit=1000`, { key: alice })).body.operations as Op[];
    expect(after.length).toBeGreaterThan(before.size);

    const ids = seen.map((o) => o.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of before) expect(ids).toContain(id);
    const times = seen.map((o) => o.created_at);
    for (let i = 1; i < times.length; i++) expect((times[i - 1] ?? '') > (times[i] ?? '')).toBe(true);
  });

  it('an empty last page keeps the cursor; bad limits and cursors are 400', async () => {
    const project = projectId(emu, 'demo-web');
    const res = await call('GET', `/projects/${project}/operations?limit=1000`, { key: alice });
    const last = res.body.pagination.cursor as string;
    const after = await call('GET', `/projects/${project}/operations?limit=5&cursor=${encodeURIComponent(last)}`, { key: alice });
    expect(after.body).toEqual({ operations: [], pagination: { cursor: last } });
    for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'limit=-1', 'cursor=yesterday', 'cursor=2024-13-45T99:00:00Z']) {
      const bad = await call('GET', `/projects/${project}/operations?${q}`, { key: alice });
      expect([q, bad.status]).toEqual([q, 400]);
    }
  });

  it('stays fast with 1,000,000 operations in one project (keyset paging on an index)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'emu-ops-'));
    const file = join(dir, 'big.db');
    try {
      openStore(file).close();
      // Bulk load in SQL (a recursive CTE): a million inserts through statements would dominate the test.
      const raw = new DatabaseSync(file);
      raw.exec(`INSERT INTO operations (id, project_id, branch_id, action, status, created_us, updated_us, finished_us)
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
        SELECT 'op-' || i, 'big', 'br-x', 'check_availability', 'finished', i, i, i FROM n`);
      raw.close();
      const store = openStore(file);
      try {
        const started = performance.now();
        let cursor: number | undefined = 500_000;
        for (let page = 0; page < 100; page++) {
          const rows = store.operationsPage('big', cursor, 100);
          expect(rows).toHaveLength(100);
          cursor = rows.at(-1)?.created_us;
        }
        expect(cursor).toBe(490_000);
        console.log(`100 pages from the middle of a million operations: ${Math.round(performance.now() - started)} ms`);
        // An index seek each, not a scan nor a sort: SQLite's plan for the page query (store.ts operationsPage).
        const db = new DatabaseSync(file);
        const plan = db
          .prepare('EXPLAIN QUERY PLAN SELECT * FROM operations WHERE project_id = ? AND created_us < ? ORDER BY created_us DESC LIMIT ?')
          .all('big', 500_000, 100)
          .map((row) => String((row as { detail: unknown }).detail));
        db.close();
        expect(plan).toEqual([expect.stringMatching(/^SEARCH operations USING INDEX operations_page \(project_id=\? AND created_us<\?\)$/)]);
      } finally {
        store.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
