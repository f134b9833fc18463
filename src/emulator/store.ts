// The emulator's persistent state in SQLite (node:sqlite). One file, WAL for files, `:memory:` for
// tests. Key secrets are never stored: only their sha256 (docs/platform-api.md "Authentication" 7).
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { newUuid } from './identifiers.ts';

export type OrgRole = 'admin' | 'member';
export type KeyKind = 'personal' | 'organization' | 'project';
export type OperationStatus = 'scheduling' | 'running' | 'finished' | 'failed' | 'error' | 'cancelling' | 'cancelled' | 'skipped';
export type EndpointType = 'read_write' | 'read_only';

export interface OrganizationRow {
  id: string;
  name: string;
  created_ms: number;
}
export interface UserRow {
  id: string;
  name: string;
  email: string;
  created_ms: number;
}
/** A user's membership of an organization: its id and joined time are made when the user joins; a role change keeps both. */
export interface MembershipRow {
  org_id: string;
  user_id: string;
  role: OrgRole;
  id: string;
  joined_ms: number;
}
export interface ProjectRow {
  id: string;
  name: string;
  org_id: string | null;
  owner_user_id: string;
  region_id: string;
  pg_version: number;
  created_ms: number;
  updated_ms: number;
  deleted_ms: number | null;
  fail_next: number;
  /** How many of the next operations end in `error` (admin fail-next-operations, outcome error). */
  error_next: number;
}
export interface BranchRow {
  id: string;
  project_id: string;
  name: string;
  parent_id: string | null;
  is_default: number;
  created_ms: number;
}
export interface EndpointRow {
  id: string;
  project_id: string;
  branch_id: string;
  type: EndpointType;
  state: 'active' | 'idle';
  last_active_ms: number;
  last_check_ms: number;
  created_ms: number;
}
export interface KeyRow {
  id: number;
  hash: Uint8Array;
  name: string;
  kind: KeyKind;
  user_id: string;
  org_id: string | null;
  project_id: string | null;
  created_ms: number;
  revoked_ms: number | null;
  last_used_ms: number | null;
  last_used_from_addr: string | null;
}
export interface OperationRow {
  seq: number;
  id: string;
  project_id: string;
  branch_id: string;
  endpoint_id: string | null;
  action: string;
  status: OperationStatus;
  failures_count: number;
  error: string | null;
  created_us: number;
  updated_us: number;
  finished_us: number | null;
  fail_times: number;
  /** 1: this operation ends in `error` instead of finishing (it is not retried). */
  gives_up: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS organizations (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS memberships (
  org_id TEXT NOT NULL REFERENCES organizations(id), user_id TEXT NOT NULL REFERENCES users(id),
  role TEXT NOT NULL CHECK (role IN ('admin','member')), id TEXT, joined_ms INTEGER, PRIMARY KEY (org_id, user_id));
CREATE TABLE IF NOT EXISTS projects (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, org_id TEXT REFERENCES organizations(id), owner_user_id TEXT NOT NULL,
  region_id TEXT NOT NULL, pg_version INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
  deleted_ms INTEGER, fail_next INTEGER NOT NULL DEFAULT 0, error_next INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS branches (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, name TEXT NOT NULL, parent_id TEXT, is_default INTEGER NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS endpoints (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, branch_id TEXT NOT NULL, type TEXT NOT NULL DEFAULT 'read_write', state TEXT NOT NULL,
  last_active_ms INTEGER NOT NULL, last_check_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (
  id INTEGER PRIMARY KEY AUTOINCREMENT, hash BLOB NOT NULL UNIQUE, name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('personal','organization','project')), user_id TEXT NOT NULL,
  org_id TEXT, project_id TEXT, created_ms INTEGER NOT NULL, revoked_ms INTEGER, last_used_ms INTEGER, last_used_from_addr TEXT);
CREATE INDEX IF NOT EXISTS api_keys_by_org ON api_keys (org_id, kind);
CREATE INDEX IF NOT EXISTS api_keys_by_user ON api_keys (user_id, kind);
CREATE TABLE IF NOT EXISTS operations (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, project_id TEXT NOT NULL, branch_id TEXT NOT NULL,
  endpoint_id TEXT, action TEXT NOT NULL, status TEXT NOT NULL, failures_count INTEGER NOT NULL DEFAULT 0, error TEXT,
  created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL, finished_us INTEGER, fail_times INTEGER NOT NULL DEFAULT 0,
  gives_up INTEGER NOT NULL DEFAULT 0);
-- Keyset paging (docs/platform-api.md "List operations of a project"): newest first by creation time;
-- created_us is unique per project (see Store.nextCreatedMicros), so the index is the page order.
CREATE UNIQUE INDEX IF NOT EXISTS operations_page ON operations (project_id, created_us DESC);
CREATE INDEX IF NOT EXISTS operations_open ON operations (status) WHERE status NOT IN ('finished','skipped','cancelled');
`;

/** Columns added after the first release: a store file written by an older emulator gets them on open. */
const ADDED_COLUMNS: { table: string; column: string; ddl: string }[] = [
  { table: 'projects', column: 'error_next', ddl: 'error_next INTEGER NOT NULL DEFAULT 0' },
  { table: 'endpoints', column: 'type', ddl: "type TEXT NOT NULL DEFAULT 'read_write'" },
  { table: 'operations', column: 'gives_up', ddl: 'gives_up INTEGER NOT NULL DEFAULT 0' },
  { table: 'memberships', column: 'id', ddl: 'id TEXT' },
  { table: 'memberships', column: 'joined_ms', ddl: 'joined_ms INTEGER' },
];

/**
 * Memberships stored before they had an id and a joined time get them once, and keep them: a new
 * uuid, and as joined time the later of the user's and the organization's creation (the earliest
 * the membership can have begun).
 */
function backfillMemberships(db: DatabaseSync): void {
  const missing = db.prepare('SELECT org_id, user_id FROM memberships WHERE id IS NULL').all() as { org_id: string; user_id: string }[];
  const setId = db.prepare('UPDATE memberships SET id = ? WHERE org_id = ? AND user_id = ?');
  for (const m of missing) setId.run(newUuid(), m.org_id, m.user_id);
  db.exec(`UPDATE memberships SET joined_ms = (
    SELECT MAX(u.created_ms, o.created_ms) FROM users u, organizations o WHERE u.id = memberships.user_id AND o.id = memberships.org_id
  ) WHERE joined_ms IS NULL`);
}

export type Store = ReturnType<typeof openStore>;

export function openStore(path: string) {
  const db = new DatabaseSync(path);
  if (path !== ':memory:') {
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
    db.exec('PRAGMA busy_timeout = 5000');
  }
  db.exec('PRAGMA foreign_keys = ON');
  db.exec(SCHEMA);
  for (const { table, column, ddl } of ADDED_COLUMNS) {
    const columns = db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[];
    if (!columns.some((c) => c.name === column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${ddl}`);
  }
  backfillMemberships(db);

  const cache = new Map<string, ReturnType<DatabaseSync['prepare']>>();
  const stmt = (sql: string) => {
    let s = cache.get(sql);
    if (s === undefined) {
      s = db.prepare(sql);
      cache.set(sql, s);
    }
    return s;
  };
  const get = <T>(sql: string, ...params: SQLInputValue[]) => stmt(sql).get(...params) as T | undefined;
  const all = <T>(sql: string, ...params: SQLInputValue[]) => stmt(sql).all(...params) as T[];
  const run = (sql: string, ...params: SQLInputValue[]) => stmt(sql).run(...params);

  // Last created_us handed out per project: operations of one project get strictly increasing
  // creation times even when several are created within the same microsecond, so the
  // creation-time cursor never skips or repeats one.
  const lastCreated = new Map<string, number>();

  const store = {
    transaction<T>(fn: () => T): T {
      db.exec('BEGIN IMMEDIATE');
      try {
        const result = fn();
        db.exec('COMMIT');
        return result;
      } catch (err) {
        db.exec('ROLLBACK');
        throw err;
      }
    },
    close(): void {
      db.close();
    },
    isEmpty(): boolean {
      return get<{ n: number }>('SELECT COUNT(*) AS n FROM users')?.n === 0;
    },

    // Organizations, users, memberships.
    insertOrganization(o: OrganizationRow): void {
      run('INSERT INTO organizations (id, name, created_ms) VALUES (?, ?, ?)', o.id, o.name, o.created_ms);
    },
    organization: (id: string) => get<OrganizationRow>('SELECT * FROM organizations WHERE id = ?', id),
    organizations: () => all<OrganizationRow>('SELECT * FROM organizations ORDER BY created_ms, rowid'),
    insertUser(u: UserRow): void {
      run('INSERT INTO users (id, name, email, created_ms) VALUES (?, ?, ?, ?)', u.id, u.name, u.email, u.created_ms);
    },
    user: (id: string) => get<UserRow>('SELECT * FROM users WHERE id = ?', id),
    users: () => all<UserRow>('SELECT * FROM users ORDER BY created_ms, rowid'),
    role: (orgId: string, userId: string) => get<{ role: OrgRole }>('SELECT role FROM memberships WHERE org_id = ? AND user_id = ?', orgId, userId)?.role,
    /** Makes the user a member (a new member id, joined now) or changes their role (id and joined time kept). */
    setRole(orgId: string, userId: string, role: OrgRole, nowMs: number): void {
      run(
        'INSERT INTO memberships (org_id, user_id, role, id, joined_ms) VALUES (?, ?, ?, ?, ?) ON CONFLICT (org_id, user_id) DO UPDATE SET role = excluded.role',
        orgId,
        userId,
        role,
        newUuid(),
        nowMs,
      );
    },
    removeMember: (orgId: string, userId: string) => Number(run('DELETE FROM memberships WHERE org_id = ? AND user_id = ?', orgId, userId).changes) > 0,
    memberships: () => all<MembershipRow>('SELECT * FROM memberships ORDER BY org_id, user_id'),
    /** The members of an organization with their email, in no particular order (the caller sorts). */
    membersOf: (orgId: string) =>
      all<MembershipRow & { email: string }>(
        'SELECT m.org_id, m.user_id, m.role, m.id, m.joined_ms, u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = ?',
        orgId,
      ),
    organizationsOf: (userId: string) =>
      all<OrganizationRow & { role: OrgRole }>(
        'SELECT o.*, m.role FROM organizations o JOIN memberships m ON m.org_id = o.id WHERE m.user_id = ? ORDER BY o.created_ms, o.rowid',
        userId,
      ),

    // Projects, branches, endpoints.
    insertProject(p: ProjectRow): void {
      run(
        'INSERT INTO projects (id, name, org_id, owner_user_id, region_id, pg_version, created_ms, updated_ms, deleted_ms, fail_next, error_next) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        p.id,
        p.name,
        p.org_id,
        p.owner_user_id,
        p.region_id,
        p.pg_version,
        p.created_ms,
        p.updated_ms,
        p.deleted_ms,
        p.fail_next,
        p.error_next,
      );
    },
    /** A live (not deleted) project. */
    project: (id: string) => get<ProjectRow>('SELECT * FROM projects WHERE id = ? AND deleted_ms IS NULL', id),
    projects: () => all<ProjectRow>('SELECT * FROM projects WHERE deleted_ms IS NULL ORDER BY created_ms, rowid'),
    projectsOfOrg: (orgId: string) => all<ProjectRow>('SELECT * FROM projects WHERE org_id = ? AND deleted_ms IS NULL ORDER BY created_ms, rowid', orgId),
    personalProjects: (userId: string) =>
      all<ProjectRow>('SELECT * FROM projects WHERE org_id IS NULL AND owner_user_id = ? AND deleted_ms IS NULL ORDER BY created_ms, rowid', userId),
    deleteProject(id: string, nowMs: number): void {
      run('UPDATE projects SET deleted_ms = ?, updated_ms = ? WHERE id = ?', nowMs, nowMs, id);
    },
    transferProject(id: string, orgId: string | null, nowMs: number): void {
      run('UPDATE projects SET org_id = ?, updated_ms = ? WHERE id = ?', orgId, nowMs, id);
    },
    addFailNext(id: string, count: number, outcome: 'failed' | 'error' = 'failed'): void {
      if (outcome === 'error') run('UPDATE projects SET error_next = error_next + ? WHERE id = ?', count, id);
      else run('UPDATE projects SET fail_next = fail_next + ? WHERE id = ?', count, id);
    },
    /** Takes one from the project's fail-next budget; true when this operation must fail once. */
    takeFailNext: (id: string) => Number(run('UPDATE projects SET fail_next = fail_next - 1 WHERE id = ? AND fail_next > 0', id).changes) > 0,
    /** Takes one from the project's error-next budget; true when this operation must end in `error`. */
    takeErrorNext: (id: string) => Number(run('UPDATE projects SET error_next = error_next - 1 WHERE id = ? AND error_next > 0', id).changes) > 0,
    insertBranch(b: BranchRow): void {
      run(
        'INSERT INTO branches (id, project_id, name, parent_id, is_default, created_ms) VALUES (?, ?, ?, ?, ?, ?)',
        b.id,
        b.project_id,
        b.name,
        b.parent_id,
        b.is_default,
        b.created_ms,
      );
    },
    branch: (projectId: string, id: string) => get<BranchRow>('SELECT * FROM branches WHERE project_id = ? AND id = ?', projectId, id),
    defaultBranch: (projectId: string) => get<BranchRow>('SELECT * FROM branches WHERE project_id = ? AND is_default = 1', projectId),
    insertEndpoint(e: EndpointRow): void {
      run(
        'INSERT INTO endpoints (id, project_id, branch_id, type, state, last_active_ms, last_check_ms, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        e.id,
        e.project_id,
        e.branch_id,
        e.type,
        e.state,
        e.last_active_ms,
        e.last_check_ms,
        e.created_ms,
      );
    },
    /** Endpoints of live projects: what the control plane suspends and checks. */
    liveEndpoints: () => all<EndpointRow>('SELECT e.* FROM endpoints e JOIN projects p ON p.id = e.project_id WHERE p.deleted_ms IS NULL'),
    setEndpointState(id: string, state: 'active' | 'idle', nowMs: number): void {
      run('UPDATE endpoints SET state = ?, last_active_ms = ? WHERE id = ?', state, nowMs, id);
    },
    setEndpointChecked(id: string, nowMs: number): void {
      run('UPDATE endpoints SET last_check_ms = ? WHERE id = ?', nowMs, id);
    },

    // API keys.
    insertKey(k: Omit<KeyRow, 'id' | 'revoked_ms' | 'last_used_ms' | 'last_used_from_addr'>): number {
      const r = run(
        'INSERT INTO api_keys (hash, name, kind, user_id, org_id, project_id, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
        k.hash,
        k.name,
        k.kind,
        k.user_id,
        k.org_id,
        k.project_id,
        k.created_ms,
      );
      return Number(r.lastInsertRowid);
    },
    keyByHash: (hash: Uint8Array) => get<KeyRow>('SELECT * FROM api_keys WHERE hash = ?', hash),
    key: (id: number) => get<KeyRow>('SELECT * FROM api_keys WHERE id = ?', id),
    keys: () => all<KeyRow>('SELECT * FROM api_keys ORDER BY id'),
    livePersonalKeys: (userId: string) =>
      all<KeyRow>("SELECT * FROM api_keys WHERE user_id = ? AND kind = 'personal' AND revoked_ms IS NULL ORDER BY id", userId),
    liveOrganizationKeys: (orgId: string) =>
      all<KeyRow>("SELECT * FROM api_keys WHERE org_id = ? AND kind IN ('organization','project') AND revoked_ms IS NULL ORDER BY id", orgId),
    revokeKey(id: number, nowMs: number): void {
      run('UPDATE api_keys SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL', nowMs, id);
    },
    touchKey(id: number, nowMs: number, addr: string): void {
      run('UPDATE api_keys SET last_used_ms = ?, last_used_from_addr = ? WHERE id = ?', nowMs, addr, id);
    },

    // Operations.
    nextCreatedMicros(projectId: string, now: number): number {
      let last = lastCreated.get(projectId);
      if (last === undefined) last = get<{ m: number | null }>('SELECT MAX(created_us) AS m FROM operations WHERE project_id = ?', projectId)?.m ?? 0;
      const next = Math.max(now, last + 1);
      lastCreated.set(projectId, next);
      return next;
    },
    insertOperation(o: Omit<OperationRow, 'seq'>): void {
      run(
        'INSERT INTO operations (id, project_id, branch_id, endpoint_id, action, status, failures_count, error, ' +
          'created_us, updated_us, finished_us, fail_times, gives_up) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        o.id,
        o.project_id,
        o.branch_id,
        o.endpoint_id,
        o.action,
        o.status,
        o.failures_count,
        o.error,
        o.created_us,
        o.updated_us,
        o.finished_us,
        o.fail_times,
        o.gives_up,
      );
    },
    operation: (projectId: string, id: string) => get<OperationRow>('SELECT * FROM operations WHERE project_id = ? AND id = ?', projectId, id),
    operationById: (id: string) => get<OperationRow>('SELECT * FROM operations WHERE id = ?', id),
    updateOperation(id: string, fields: Pick<OperationRow, 'status' | 'failures_count' | 'error' | 'updated_us' | 'finished_us' | 'fail_times'>): void {
      run(
        'UPDATE operations SET status = ?, failures_count = ?, error = ?, updated_us = ?, finished_us = ?, fail_times = ? WHERE id = ?',
        fields.status,
        fields.failures_count,
        fields.error,
        fields.updated_us,
        fields.finished_us,
        fields.fail_times,
        id,
      );
    },
    /** One page, newest first, strictly older than `beforeUs` (keyset paging on operations_page). */
    operationsPage(projectId: string, beforeUs: number | undefined, limit: number): OperationRow[] {
      return beforeUs === undefined
        ? all<OperationRow>('SELECT * FROM operations WHERE project_id = ? ORDER BY created_us DESC LIMIT ?', projectId, limit)
        : all<OperationRow>('SELECT * FROM operations WHERE project_id = ? AND created_us < ? ORDER BY created_us DESC LIMIT ?', projectId, beforeUs, limit);
    },
    // `error` is final in the emulator (operations-engine.ts): not resumed. The first condition is
    // the partial index's own, so operations_open still serves the query.
    openOperations: () =>
      all<OperationRow>("SELECT * FROM operations WHERE status NOT IN ('finished','skipped','cancelled') AND status <> 'error' ORDER BY created_us"),
  };
  return store;
}
