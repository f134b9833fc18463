// The store survives a restart (docs/design.md section 6: persistent SQLite). Keys keep working, their
// metadata and the operations stay; the bootstrap record of a restart carries no personal keys,
// because only their hashes are stored.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, describe, expect, it } from '@jest/globals';
import { caller, keyOf, ORG, projectId, start } from './harness.ts';

const dir = mkdtempSync(join(tmpdir(), 'emu-persist-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('persistence across a restart', () => {
  it('keeps users, keys (as hashes), projects and operations', async () => {
    const db = join(dir, 'emulator.db');
    const first = await start({ db });
    const alice = keyOf(first, 'alice');
    const call1 = caller(first);
    const org = await call1('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: 'survivor' } });
    expect(org.status).toBe(200);
    const revoked = await call1('POST', '/api_keys', { key: alice, body: { key_name: 'gone' } });
    await call1('DELETE', `/api_keys/${revoked.body.id}`, { key: alice });
    const project = projectId(first, 'demo-api');
    const branch = await call1('POST', `/projects/${project}/branches`, { key: org.body.key });
    const opIds = (branch.body.operations as { id: string }[]).map((o) => o.id);
    await first.close();

    // Secrets are not in the file, only digests.
    const raw = readFileSync(db);
    expect(raw.includes(Buffer.from(alice))).toBe(false);
    expect(raw.includes(Buffer.from(org.body.key as string))).toBe(false);

    const second = await start({ db });
    try {
      expect(second.bootstrap.users.map((u) => u.name)).toEqual(['alice', 'bob', 'carol']);
      expect(second.bootstrap.users.every((u) => u.personalKey === undefined)).toBe(true);
      expect(second.bootstrap.projects.map((p) => p.id)).toContain(project);
      const call2 = caller(second);
      expect((await call2('GET', '/api_keys', { key: alice })).status).toBe(200);
      expect((await call2('GET', '/api_keys', { key: revoked.body.key })).status).toBe(401);
      const listed = await call2('GET', `/organizations/${ORG}/api_keys`, { key: org.body.key });
      expect(listed.body.map((k: { name: string }) => k.name)).toContain('survivor');
      // Operations left open by the first process finish under the second.
      for (const id of opIds) {
        let status = '';
        for (let i = 0; i < 200 && status !== 'finished'; i++) {
          status = (await call2('GET', `/projects/${project}/operations/${id}`, { key: alice })).body.operation.status;
          if (status !== 'finished') await new Promise((r) => setTimeout(r, 20));
        }
        expect(status).toBe('finished');
      }
      // Ids keep increasing: a new key never reuses an old id.
      const next = await call2('POST', '/api_keys', { key: alice, body: { key_name: 'after-restart' } });
      expect(next.body.id).toBeGreaterThan(org.body.id);
    } finally {
      await second.close();
    }
  });

  it('opens a store written before the columns for error outcomes and endpoint types existed', async () => {
    const db = join(dir, 'older.db');
    const first = await start({ db });
    const alice = keyOf(first, 'alice');
    await first.close();
    // The store as an older emulator left it: without the columns added since.
    const raw = new DatabaseSync(db);
    raw.exec('ALTER TABLE projects DROP COLUMN error_next; ALTER TABLE endpoints DROP COLUMN type; ALTER TABLE operations DROP COLUMN gives_up;');
    raw.close();

    const second = await start({ db });
    try {
      const call = caller(second);
      const project = projectId(second, 'demo-api');
      expect((await call('POST', `/admin/projects/${project}/fail-next-operations`, { body: { count: 1, outcome: 'error' } })).status).toBe(200);
      const branch = await call('POST', `/projects/${project}/branches`, { key: alice, body: { endpoints: [{ type: 'read_only' }] } });
      expect(branch.status).toBe(201);
      expect(branch.body.endpoints[0].type).toBe('read_only');
      expect(branch.body.operations.map((o: { action: string }) => o.action)).toEqual(['create_branch', 'start_compute']);
    } finally {
      await second.close();
    }
  });

  it('gives the memberships of a store written before member ids an id and a joined time, kept across restarts', async () => {
    const db = join(dir, 'before-member-ids.db');
    const first = await start({ db });
    const alice = keyOf(first, 'alice');
    await first.close();
    const raw = new DatabaseSync(db);
    raw.exec('ALTER TABLE memberships DROP COLUMN id; ALTER TABLE memberships DROP COLUMN joined_ms;');
    const created = (raw.prepare('SELECT MAX(created_ms) AS ms FROM users').get() as { ms: number }).ms;
    raw.close();

    const members = async () => {
      const emu = await start({ db });
      try {
        const res = await caller(emu)('GET', `/organizations/${ORG}/members`, { key: alice });
        expect(res.status).toBe(200);
        return (res.body.members as { member: { id: string; user_id: string; joined_at: string } }[])
          .map((m) => m.member)
          .sort((a, b) => (a.user_id < b.user_id ? -1 : 1));
      } finally {
        await emu.close();
      }
    };
    const second = await members();
    expect(second).toHaveLength(2);
    for (const m of second) {
      expect(m.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(Date.parse(m.joined_at)).toBe(Math.floor(created / 1000) * 1000);
    }
    expect(await members()).toEqual(second);
  });
});
