// What the client does with answers the emulator never gives: a 2xx whose body breaks the schema,
// a body that is not JSON, an HTML error page from a proxy. A small node:http server plays a
// broken platform (or a broken proxy in front of it); everything else is tested against the
// emulator in client.test.ts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { PlatformClient, TokenBucket } from '../../src/platform/index.ts';
import { failure } from './emulator-fixture.ts';

const SECRET = 'q'.repeat(40) + 'z9'.repeat(12);
const API_KEY = 'a1'.repeat(32);

type Answer = { status: number; body: string; type?: string };
const answers: Record<string, Answer> = {
  // id of the wrong type, next to a real-looking secret: the key exists on the platform but the
  // client cannot trust what it read.
  'POST /api/v2/organizations/org-x/api_keys': { status: 200, body: JSON.stringify({ id: 'seven', key: SECRET, name: 'n' }) },
  'POST /api/v2/api_keys': { status: 200, body: `{"id": 7, "key": "${SECRET}"` },
  'GET /api/v2/api_keys': { status: 200, body: JSON.stringify([{ id: 1, name: 'k', created_at: 'not a time', last_used_from_addr: SECRET }]) },
  'GET /api/v2/projects/p-1': { status: 502, body: '<html><body>Bad gateway</body></html>', type: 'text/html' },
  // 17 MiB of JSON: more than any answer the platform gives (default limit 16 MiB).
  'GET /api/v2/organizations/org-huge/api_keys': { status: 200, body: `[${'{"id":1,"name":"k"},'.repeat(900_000)}{"id":2,"name":"k"}]` },
  // An auth answer without its method: the caller could not tell which kind of key it holds.
  'GET /api/v2/auth': { status: 200, body: JSON.stringify({ account_id: 'org-x' }) },
  'GET /api/v2/projects/p-2': { status: 401, body: JSON.stringify({ code: 'UNAUTHORIZED', message: `key ${API_KEY} is not valid`, request_id: 'r-1' }) },
  // A member without its role: the caller could not tell an administrator from anyone else.
  'GET /api/v2/organizations/org-x/members?limit=500': {
    status: 200,
    body: JSON.stringify({ members: [{ member: { id: 'm-1', user_id: 'u-1', org_id: 'org-x' }, user: { email: 'a@x.test' } }] }),
  },
  // A platform that ignores the cursor: the same page, with the same next, every time.
  'GET /api/v2/organizations/org-stuck/members?limit=500': {
    status: 200,
    body: JSON.stringify({ members: [{ member: { id: 'm-1', user_id: 'u-1', role: 'admin' }, user: { email: 'a@x.test' } }], pagination: { next: 'c1' } }),
  },
  'GET /api/v2/organizations/org-stuck/members?limit=500&cursor=c1': {
    status: 200,
    body: JSON.stringify({ members: [{ member: { id: 'm-1', user_id: 'u-1', role: 'admin' }, user: { email: 'a@x.test' } }], pagination: { next: 'c1' } }),
  },
};

/** A platform whose member list never ends: each page one new member and a cursor to the next. */
function endlessMembers(url: string): Answer | undefined {
  const m = /^\/api\/v2\/organizations\/org-endless\/members\?limit=500(?:&cursor=c(\d+))?$/.exec(url);
  if (m === null) return undefined;
  const n = Number(m[1] ?? '0');
  return {
    status: 200,
    body: JSON.stringify({
      members: [{ member: { id: `m-${n}`, user_id: `u-${n}`, role: 'member' }, user: { email: `${n}@x.test` } }],
      pagination: { next: `c${n + 1}` },
    }),
  };
}

let server: Server;
let baseUrl: string;
let hits = new Map<string, number>();

beforeAll(async () => {
  server = createServer((req, res) => {
    const k = `${req.method} ${req.url}`;
    hits.set(k, (hits.get(k) ?? 0) + 1);
    req.resume();
    const a = answers[k] ?? endlessMembers(req.url ?? '') ?? { status: 404, body: '{}' };
    res.writeHead(a.status, { 'content-type': a.type ?? 'application/json', 'x-request-id': String(req.headers['x-request-id']) });
    res.end(a.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v2`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function platform(): PlatformClient {
  hits = new Map();
  return new PlatformClient({ baseUrl, apiKey: API_KEY, retry: { baseDelayMs: 1 }, orgKeyLimiter: new TokenBucket({ ratePerSecond: 100 }) });
}

function expectNoSecret(e: unknown): void {
  const err = e as Error;
  for (const text of [err.message, String(err.stack), JSON.stringify(err), inspect(err, { showHidden: true, depth: 5 })]) {
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(API_KEY);
  }
}

describe('responses that break the contract', () => {
  it('a create whose body breaks the schema is INVALID_RESPONSE, ambiguous, and names the field but not the values', async () => {
    const e = await failure(platform().createOrganizationKey('org-x', { keyName: 'n' }));
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'ambiguous', status: 200 });
    expect(e.message).toContain('id');
    expectNoSecret(e);
    expect(hits.get('POST /api/v2/organizations/org-x/api_keys')).toBe(1);
  });

  it('a create whose body is not JSON is INVALID_RESPONSE, ambiguous', async () => {
    const e = await failure(platform().createPersonalKey('n'));
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'ambiguous' });
    expectNoSecret(e);
  });

  it('a read whose body breaks the schema is INVALID_RESPONSE, terminal, not retried', async () => {
    const e = await failure(platform().listPersonalKeys());
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'terminal' });
    expect(e.message).toContain('created_at');
    expectNoSecret(e);
    expect(hits.get('GET /api/v2/api_keys')).toBe(1);
  });

  it('an auth answer without auth_method is INVALID_RESPONSE, never read as some kind of key', async () => {
    const e = await failure(platform().getAuth());
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'terminal', route: '/auth' });
    expect(e.message).toContain('auth_method');
  });

  it('a member without its role is INVALID_RESPONSE, never read as some role', async () => {
    const e = await failure(platform().listOrganizationMembers('org-x'));
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'terminal', route: '/organizations/:org_id/members' });
    expect(e.message).toContain('role');
  });

  it('a member list whose cursor does not move ends with the members read', async () => {
    expect(await platform().listOrganizationMembers('org-stuck')).toEqual([{ id: 'm-1', userId: 'u-1', role: 'admin', email: 'a@x.test' }]);
    expect([...hits.values()].reduce((n, c) => n + c, 0)).toBe(2);
  });

  it('a member list that never ends fails after 20 pages instead of answering part of it', async () => {
    const e = await failure(platform().listOrganizationMembers('org-endless'));
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'terminal', method: 'GET', route: '/organizations/:org_id/members' });
    expect(e.message).toContain('20 pages');
    expect([...hits.values()].reduce((n, c) => n + c, 0)).toBe(20);
  });

  it('an HTML 502 from a proxy is still classified by its status, and retried', async () => {
    const e = await failure(platform().getProject('p-1'));
    expect(e).toMatchObject({ code: 'SERVER_ERROR', disposition: 'retryable', status: 502 });
    expect(e.platformCode).toBeUndefined();
    expect(e.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(hits.get('GET /api/v2/projects/p-1')).toBe(4);
  });

  it('a platform message that echoes the API key is redacted', async () => {
    const e = await failure(platform().getProject('p-2'));
    expect(e).toMatchObject({ code: 'UNAUTHORIZED', requestId: 'r-1', platformCode: 'UNAUTHORIZED' });
    expect(e.message).toContain('[REDACTED]');
    expectNoSecret(e);
  });

  it('a body larger than the limit is INVALID_RESPONSE, and not read to its end', async () => {
    const e = await failure(platform().listOrganizationKeys('org-huge'));
    expect(e).toMatchObject({ code: 'INVALID_RESPONSE', disposition: 'terminal' });
    expect(e.message).toMatch(/larger than 16777216 bytes/);
    const small = new PlatformClient({ baseUrl, apiKey: API_KEY, maxResponseBytes: 1024, retry: { maxAttempts: 1 } });
    expect(await failure(small.listOrganizationKeys('org-huge'))).toMatchObject({ code: 'INVALID_RESPONSE' });
  });

  it('refuses any path parameter that is not a platform id, before sending anything', async () => {
    hits = new Map();
    const p = new PlatformClient({ baseUrl, apiKey: API_KEY, retry: { maxAttempts: 1 }, orgKeyLimiter: new TokenBucket({ ratePerSecond: 100 }) });
    const hostile = ['..', '.', 'org-x/..', '../api_keys', 'org-x%2F..', 'org x', 'org-x?y=1', 'org-x#y', '', '-x', 'ü'];
    for (const id of hostile) {
      const calls: [string, () => Promise<unknown>][] = [
        ['createOrganizationKey', () => p.createOrganizationKey(id, { keyName: 'n' })],
        ['listOrganizationKeys', () => p.listOrganizationKeys(id)],
        ['revokeOrganizationKey', () => p.revokeOrganizationKey(id, 1)],
        ['listOperations', () => p.listOperations(id)],
        ['getProject', () => p.getProject(id)],
        ['listOrganizationMembers', () => p.listOrganizationMembers(id)],
      ];
      for (const [name, call] of calls) {
        const e = await failure((async () => await call())());
        expect({ id, name, code: e.code, disposition: e.disposition }).toEqual({ id, name, code: 'INVALID_REQUEST', disposition: 'terminal' });
      }
    }
    for (const keyId of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
      expect((await failure((async () => await p.revokePersonalKey(keyId))())).code).toBe('INVALID_REQUEST');
    }
    expect([...hits.keys()]).toEqual([]);
  });

  it('refuses plain http to a host that is not loopback, unless allowed explicitly', () => {
    expect(() => new PlatformClient({ baseUrl: 'http://platform.example/api/v2', apiKey: 'x' })).toThrow(/clear text/);
    expect(() => new PlatformClient({ baseUrl: 'http://10.0.0.1:8080/api/v2', apiKey: 'x' })).toThrow(/clear text/);
    expect(() => new PlatformClient({ baseUrl: 'ftp://127.0.0.1/api/v2', apiKey: 'x' })).toThrow(/https/);
    for (const ok of [
      'https://platform.example/api/v2',
      'http://127.0.0.1:1/api/v2',
      'http://127.9.9.9:1/api/v2',
      'http://localhost:1/api/v2',
      'http://[::1]:1/api/v2',
    ]) {
      expect(() => new PlatformClient({ baseUrl: ok, apiKey: 'x' })).not.toThrow();
    }
    expect(() => new PlatformClient({ baseUrl: 'http://10.0.0.1:8080/api/v2', apiKey: 'x', allowInsecureHttp: true })).not.toThrow();
  });

  it('refuses a base URL without the version segment', () => {
    expect(() => new PlatformClient({ baseUrl: 'http://127.0.0.1:1/api', apiKey: 'x' })).toThrow(/\/api\/v2/);
    expect(() => new PlatformClient({ baseUrl: 'http://127.0.0.1:1/api/v2/', apiKey: '' })).toThrow(/apiKey/);
  });
});
