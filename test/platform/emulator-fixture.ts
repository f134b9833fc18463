// Shared pieces of the platform client's HTTP suites: a fresh emulator per test (its rate limiter,
// fault rules and request counters are per instance, so tests do not leak into each other), the
// admin API calls the tests use, and a record of every secret seen so the suites can prove none
// reaches an error.
import { inspect } from 'node:util';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { isPlatformError, PlatformClient, type PlatformClientOptions, type PlatformError } from '../../src/platform/index.ts';

export type { Emulator };

export interface FaultRule {
  method?: string;
  route?: string;
  probability: number;
  kind: 'latency' | 'status' | 'reset' | 'drop-after-commit';
  latencyMs?: number;
  status?: number;
  times?: number;
}

export interface RequestCount {
  method: string;
  route: string;
  status: number;
  count: number;
}

export interface AdminKey {
  id: number;
  name: string;
  kind: string;
  revoked: boolean;
  organizationId: string | null;
  projectId: string | null;
}

/** Every secret a suite handled: bootstrap personal keys and created keys. */
export const secrets = new Set<string>();
/** Every error a client call threw, for the no-secret check. */
export const thrown: unknown[] = [];

export async function emulator(): Promise<Emulator> {
  const emu = await startEmulator({ timeScale: 0.01, db: ':memory:' });
  for (const u of emu.bootstrap.users) if (u.personalKey !== undefined) secrets.add(u.personalKey);
  return emu;
}

export function user(emu: Emulator, name: 'alice' | 'bob' | 'carol'): { id: string; personalKey: string } {
  const u = emu.bootstrap.users.find((x) => x.name === name);
  if (u?.personalKey === undefined) throw new Error(`seed has no user ${name} with a personal key`);
  return { id: u.id, personalKey: u.personalKey };
}

export const ORG = 'org-demo-00000001';

export function orgProjects(emu: Emulator): string[] {
  return emu.bootstrap.projects.filter((p) => p.organizationId === ORG).map((p) => p.id);
}

/** A client with fast retries, so retry tests take milliseconds. */
export function client(emu: Emulator, apiKey: string, extra: Partial<PlatformClientOptions> = {}): PlatformClient {
  return new PlatformClient({ baseUrl: emu.baseUrl, apiKey, retry: { baseDelayMs: 5, maxDelayMs: 2_000 }, ...extra });
}

async function admin<T>(emu: Emulator, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${emu.adminUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`admin ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

export const setFaults = (emu: Emulator, rules: FaultRule[]): Promise<unknown> => admin(emu, 'PUT', '/faults', { rules });
export const requests = (emu: Emulator): Promise<RequestCount[]> => admin(emu, 'GET', '/requests');
export const resetRequests = (emu: Emulator): Promise<unknown> => admin(emu, 'DELETE', '/requests');
export const adminKeys = (emu: Emulator): Promise<AdminKey[]> => admin(emu, 'GET', '/keys');
/** Makes the user a member of the organization with this role, or changes their role (promotion, demotion). */
export const setMemberRole = (emu: Emulator, orgId: string, userId: string, role: 'admin' | 'member'): Promise<unknown> =>
  admin(emu, 'PUT', `/organizations/${orgId}/members/${userId}`, { role });
/** The next `count` operations fail once and are retried ('failed'), or end in `error` for good ('error'). */
export const failNextOperations = (emu: Emulator, projectId: string, count: number, outcome: 'failed' | 'error' = 'failed'): Promise<unknown> =>
  admin(emu, 'POST', `/projects/${projectId}/fail-next-operations`, { count, outcome });

/** Requests the emulator counted for one method and route template (any status, or one status). */
export async function countOf(emu: Emulator, method: string, route: string, status?: number): Promise<number> {
  return (await requests(emu))
    .filter((r) => r.method === method && r.route === `/api/v2${route}` && (status === undefined || r.status === status))
    .reduce((n, r) => n + r.count, 0);
}

/** Awaits a call that must fail, records the error for the no-secret check, returns it. */
export async function failure(p: Promise<unknown>): Promise<PlatformError> {
  try {
    await p;
  } catch (e) {
    thrown.push(e);
    if (!isPlatformError(e)) throw e;
    return e;
  }
  throw new Error('expected the call to fail');
}

/** Every rendering of an error a log line or a status message could contain. */
export function renderings(e: unknown): string[] {
  const err = e as Error;
  return [String(err.message), String(err.stack), JSON.stringify(err), inspect(err, { depth: 5, showHidden: true })];
}
