// Authentication (docs/platform-api.md "Authentication"): every request carries
// `Authorization: Bearer <API_KEY>`; a missing header, an unknown key or a revoked key is a 401.
// A project-scoped key also stops working when its project leaves the organization (or is
// deleted): it lives until revoked, or until its project leaves the organization ("Key kinds").
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { unauthorized } from './http-io.ts';
import { hashKeySecret } from './identifiers.ts';
import type { KeyRow, Store } from './store.ts';

export type Principal =
  | { kind: 'personal'; key: KeyRow; userId: string }
  | { kind: 'organization'; key: KeyRow; orgId: string }
  | { kind: 'project'; key: KeyRow; orgId: string; projectId: string };

const BEARER = /^Bearer\s+(\S+)\s*$/i;

export function clientAddress(req: IncomingMessage): string {
  const addr = req.socket.remoteAddress ?? '';
  return addr.startsWith('::ffff:') ? addr.slice(7) : addr;
}

const LAST_USED_RESOLUTION_MS = 1_000;

export function authenticate(store: Store, req: IncomingMessage): Principal {
  const header = req.headers.authorization;
  if (header === undefined || header === '') throw unauthorized('the Authorization header is missing: send Authorization: Bearer <API_KEY>');
  const m = BEARER.exec(header);
  const secret = m?.[1];
  if (secret === undefined) throw unauthorized('the Authorization header must be: Bearer <API_KEY>');
  const hash = hashKeySecret(secret);
  const key = store.keyByHash(hash);
  // The lookup is by digest; the constant-time comparison guards the final equality check anyway.
  if (key === undefined || !timingSafeEqual(Buffer.from(key.hash), hash)) throw unauthorized('the API key is invalid or has been revoked');
  if (key.revoked_ms !== null) throw unauthorized('the API key is invalid or has been revoked');

  let principal: Principal;
  if (key.kind === 'personal') {
    principal = { kind: 'personal', key, userId: key.user_id };
  } else if (key.kind === 'organization' && key.org_id !== null) {
    principal = { kind: 'organization', key, orgId: key.org_id };
  } else if (key.kind === 'project' && key.org_id !== null && key.project_id !== null) {
    const project = store.project(key.project_id);
    if (project === undefined || project.org_id !== key.org_id) {
      throw unauthorized('the API key is no longer valid: its project has left the organization');
    }
    principal = { kind: 'project', key, orgId: key.org_id, projectId: key.project_id };
  } else {
    throw unauthorized('the API key is invalid or has been revoked');
  }
  // last_used_at is written at most once a second per key (or when the address changes): a write
  // on every authenticated read would make each GET a SQLite write, and the WAL checkpoints those
  // trigger stall every request in flight.
  const now = Date.now();
  const addr = clientAddress(req);
  if (key.last_used_ms === null || now - key.last_used_ms >= LAST_USED_RESOLUTION_MS || key.last_used_from_addr !== addr) {
    store.touchKey(key.id, now, addr);
  }
  return principal;
}
