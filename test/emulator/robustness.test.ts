// Limits, fault injection and bad input (docs/platform-api.md "Limits", "Errors"; docs/design.md section 6):
// the rate limit answers 429 with Retry-After, each fault kind does what it says (a dropped
// response after commit leaves the key created), and bad input is a 4xx, never a 500.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { slidingWindowLimiter } from '../../src/emulator/rate-limit.ts';
import type { Emulator } from '../../src/emulator/server.ts';
import { caller, keyOf, ORG, projectId, sleep, start, type Caller } from './harness.ts';

let emu: Emulator;
let call: Caller;
let alice: string;

beforeAll(async () => {
  emu = await start();
  call = caller(emu);
  alice = keyOf(emu, 'alice');
});

afterAll(async () => {
  await emu.close();
});

describe('rate limit on organization key creation', () => {
  it('answers 429 with Retry-After and a GeneralError beyond 10 requests per second', async () => {
    await sleep(1100);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: `burst-${i}` } })),
    );
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 429);
    // Exactly 10 when all 20 arrive within one second; a stalled test machine may spread them wider.
    expect(ok.length).toBeGreaterThanOrEqual(10);
    expect(limited.length).toBeGreaterThanOrEqual(1);
    expect(ok.length + limited.length).toBe(20);
    for (const r of limited) {
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(r.body).toMatchObject({ code: 'TOO_MANY_REQUESTS' });
      expect(typeof r.body.request_id).toBe('string');
    }
    await sleep(1100);
    expect((await call('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: 'after-window' } })).status).toBe(200);
  });

  it("counts only authenticated requests: unauthenticated ones do not spend an organization's budget", async () => {
    // A fresh emulator: its limiter has seen nothing of this file's other tests.
    const own = await start();
    try {
      const c = caller(own);
      const path = `/organizations/${ORG}/api_keys`;
      const rejected = await Promise.all(
        Array.from({ length: 30 }, (_, i) => c('POST', path, { key: i % 2 === 0 ? 'x'.repeat(64) : undefined, body: { key_name: `anon-${i}` } })),
      );
      expect(rejected.map((r) => r.status)).toEqual(Array.from({ length: 30 }, () => 401));
      // The whole budget of 10 is still there, right after the 30 refusals.
      const admitted = await Promise.all(Array.from({ length: 10 }, (_, i) => c('POST', path, { key: keyOf(own, 'alice'), body: { key_name: `real-${i}` } })));
      expect(admitted.map((r) => r.status)).toEqual(Array.from({ length: 10 }, () => 200));
    } finally {
      await own.close();
    }
  });
});

describe('sliding window limiter', () => {
  it('admits 10 per second per bucket and says how long to wait', () => {
    const limiter = slidingWindowLimiter(10, 1000);
    for (let i = 0; i < 10; i++) expect(limiter.take('org-a', 1000 + i)).toBeUndefined();
    expect(limiter.take('org-a', 1500)).toBe(1);
    expect(limiter.take('org-b', 1500)).toBeUndefined();
    // At 2000 the request of 1000 has left the window: one more is admitted, then none.
    expect(limiter.take('org-a', 2000)).toBeUndefined();
    expect(limiter.take('org-a', 2000)).toBe(1);
  });
});

describe('fault injection', () => {
  const route = '/api/v2/organizations/:org_id/api_keys';

  it('latency delays the response', async () => {
    await call('PUT', '/admin/faults', {
      body: { rules: [{ method: 'GET', route: '/api/v2/api_keys', probability: 1, kind: 'latency', latencyMs: 300, times: 1 }] },
    });
    const t0 = performance.now();
    expect((await call('GET', '/api_keys', { key: alice })).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect((await call('GET', '/api_keys', { key: alice })).status).toBe(200);
    expect((await call('GET', '/admin/faults')).body.rules[0]).toMatchObject({ kind: 'latency', injected: 1 });
  });

  it('status answers the injected status with a GeneralError, `times` times', async () => {
    await call('PUT', '/admin/faults', { body: { rules: [{ route: '/api/v2/projects', probability: 1, kind: 'status', status: 503, times: 2 }] } });
    const a = await call('GET', '/projects', { key: alice, headers: { 'x-request-id': 'trace-123' } });
    expect(a.status).toBe(503);
    expect(a.body).toEqual({ code: 'SERVICE_UNAVAILABLE', message: expect.any(String), request_id: 'trace-123' });
    expect(a.headers.get('x-request-id')).toBe('trace-123');
    expect((await call('GET', '/projects', { key: alice })).status).toBe(503);
    expect((await call('GET', '/projects', { key: alice })).status).toBe(200);
    const faults = await call('GET', '/admin/faults');
    expect(faults.body.rules[0]).toMatchObject({ kind: 'status', injected: 2, times: 2 });
  });

  it('reset destroys the connection without a response and without doing the work', async () => {
    await sleep(1100);
    await call('PUT', '/admin/faults', { body: { rules: [{ method: 'POST', route, probability: 1, kind: 'reset', times: 1 }] } });
    const before = (await call('GET', '/admin/keys')).body.length;
    await expect(call('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: 'reset-me' } })).rejects.toThrow();
    expect((await call('GET', '/admin/keys')).body.length).toBe(before);
  });

  it('drop-after-commit creates the key, then drops the response', async () => {
    await sleep(1100);
    await call('PUT', '/admin/faults', { body: { rules: [{ method: 'POST', route, probability: 1, kind: 'drop-after-commit', times: 1 }] } });
    await expect(call('POST', `/organizations/${ORG}/api_keys`, { key: alice, body: { key_name: 'dropped-attempt-x1' } })).rejects.toThrow();
    const keys = (await call('GET', '/admin/keys')).body as { name: string; revoked: boolean; kind: string }[];
    expect(keys.find((k) => k.name === 'dropped-attempt-x1')).toMatchObject({ kind: 'organization', revoked: false });
    const listed = (await call('GET', `/organizations/${ORG}/api_keys`, { key: alice })).body as { name: string }[];
    expect(listed.map((k) => k.name)).toContain('dropped-attempt-x1');
    await call('DELETE', '/admin/faults');
    expect((await call('GET', '/admin/faults')).body).toEqual({ rules: [] });
  });

  it('rejects malformed fault rules', async () => {
    for (const body of [{ rules: [{ probability: 2, kind: 'status' }] }, { rules: [{ probability: 1, kind: 'explode' }] }, { rules: 'x' }]) {
      expect((await call('PUT', '/admin/faults', { body })).status).toBe(400);
    }
  });
});

describe('bad input is never a 500', () => {
  const project = () => projectId(emu, 'demo-api');
  const cases: [string, string, () => { body?: unknown; rawBody?: string; headers?: Record<string, string> }, number][] = [
    ['POST', '/api_keys', () => ({ body: {} }), 400],
    ['POST', '/api_keys', () => ({ body: { key_name: '' } }), 400],
    ['POST', '/api_keys', () => ({ body: { key_name: 'x'.repeat(65) } }), 400],
    ['POST', '/api_keys', () => ({ body: { key_name: 42 } }), 400],
    ['POST', '/api_keys', () => ({ body: [1, 2] }), 400],
    ['POST', '/api_keys', () => ({ rawBody: '{"key_name":', headers: { 'content-type': 'application/json' } }), 400],
    ['POST', '/api_keys', () => ({ rawBody: 'null', headers: { 'content-type': 'application/json' } }), 400],
    ['POST', '/api_keys', () => ({ rawBody: JSON.stringify({ key_name: 'x'.repeat(2 * 1024 * 1024) }), headers: { 'content-type': 'application/json' } }), 413],
    ['POST', `/organizations/${ORG}/api_keys`, () => ({ body: { key_name: 'x', project_id: 'NOT VALID' } }), 400],
    ['POST', `/organizations/${ORG}/api_keys`, () => ({ body: { key_name: 'x', project_id: 7 } }), 400],
    ['POST', '/organizations/ORG_UPPER/api_keys', () => ({ body: { key_name: 'x' } }), 404],
    ['DELETE', '/api_keys/abc', () => ({}), 400],
    ['DELETE', '/api_keys/-1', () => ({}), 400],
    ['DELETE', '/api_keys/1.5', () => ({}), 400],
    ['DELETE', '/api_keys/99999999999999999999', () => ({}), 400],
    ['DELETE', '/api_keys/424242', () => ({}), 404],
    ['GET', '/projects?limit=0', () => ({}), 400],
    ['GET', '/projects?limit=x', () => ({}), 400],
    ['GET', '/projects?cursor=nope', () => ({}), 400],
    ['GET', `/projects/${'%E0%A4%A'}`, () => ({}), 404],
    ['GET', '/projects/does-not-exist', () => ({}), 404],
    ['POST', '/projects', () => ({ body: { project: { pg_version: 'x' } } }), 400],
    ['POST', '/projects', () => ({ body: { project: 'x' } }), 400],
    ['POST', '/projects/{A}/branches', () => ({ body: { branch: { parent_id: 'br-missing-00000000' } } }), 404],
    ['POST', '/projects/{A}/branches', () => ({ body: { branch: { name: '' } } }), 400],
    ['POST', '/projects/{A}/branches', () => ({ rawBody: 'not json', headers: { 'content-type': 'application/json' } }), 400],
    ['GET', '/projects/{A}/operations?cursor=2024-01-01', () => ({}), 400],
    ['GET', '/nope', () => ({}), 404],
    ['PATCH', '/api_keys', () => ({}), 405],
  ];

  it.each(cases.map((c) => [`${c[0]} ${c[1]} -> ${c[3]}`, c] as const))('%s', async (_name, [method, path, opts, expected]) => {
    const res = await call(method, path.replace('{A}', project()), { key: alice, ...opts() });
    expect(res.status).toBe(expected);
    expect(res.body).toMatchObject({ code: expect.any(String), message: expect.any(String), request_id: expect.any(String) });
    expect(JSON.stringify(res.body)).not.toContain(alice);
  });

  it('generates a request id when none is sent, and replaces an unusable one', async () => {
    const res = await call('GET', '/api_keys', { key: alice });
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const odd = await call('GET', '/nope', { key: alice, headers: { 'x-request-id': 'has spaces; and semicolons' } });
    expect(odd.body.request_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('never echoes a presented key in a 401', async () => {
    const bogus = 'z'.repeat(64);
    for (const auth of [`Bearer ${bogus}`, bogus, 'Bearer', 'Basic abc']) {
      const res = await call('GET', '/api_keys', { headers: { authorization: auth } });
      expect(res.status).toBe(401);
      expect(JSON.stringify(res.body)).not.toContain(bogus);
    }
  });

  it('survives a request with a broken HTTP framing and keeps serving', async () => {
    const url = new URL(emu.baseUrl);
    await new Promise<void>((resolve) => {
      const req = request({
        host: url.hostname,
        port: url.port,
        method: 'POST',
        path: '/api/v2/api_keys',
        headers: { 'content-length': '100', authorization: `Bearer ${alice}` },
      });
      req.on('error', () => resolve());
      req.write('{"key_name":');
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 50);
    });
    expect((await call('GET', '/api_keys', { key: alice })).status).toBe(200);
  });
});

describe('request counters and console', () => {
  it('counts requests by method, route template and status', async () => {
    await call('DELETE', '/admin/requests');
    await call('GET', `/organizations/${ORG}/api_keys`, { key: alice });
    await call('GET', `/organizations/${ORG}/api_keys`, { key: alice });
    await call('GET', `/organizations/${ORG}/api_keys`);
    const counts = (await call('GET', '/admin/requests')).body;
    expect(counts).toEqual(
      expect.arrayContaining([
        { method: 'GET', route: '/api/v2/organizations/:org_id/api_keys', status: 200, count: 2 },
        { method: 'GET', route: '/api/v2/organizations/:org_id/api_keys', status: 401, count: 1 },
      ]),
    );
  });

  it('renders keys and operations with console labels and no secrets', async () => {
    const res = await call('GET', '/console');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const html = String(res.body);
    expect(html).toContain('Demo Org');
    expect(html).toContain('Create timeline');
    expect(html).toMatch(/OK|In progress|Scheduling/);
    expect(html).not.toContain(alice);
  });
});
