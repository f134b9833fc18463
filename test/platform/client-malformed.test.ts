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
  'GET /api/v2/projects/p-2': { status: 401, body: JSON.stringify({ code: 'UNAUTHORIZED', message: `key ${API_KEY} is not valid`, request_id: 'r-1' }) },
};

let server: Server;
let baseUrl: string;
let hits = new Map<string, number>();

beforeAll(async () => {
  server = createServer((req, res) => {
    const k = `${req.method} ${req.url}`;
    hits.set(k, (hits.get(k) ?? 0) + 1);
    req.resume();
    const a = answers[k] ?? { status: 404, body: '{}' };
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

  it('refuses a base URL without the version segment', () => {
    expect(() => new PlatformClient({ baseUrl: 'http://127.0.0.1:1/api', apiKey: 'x' })).toThrow(/\/api\/v2/);
    expect(() => new PlatformClient({ baseUrl: 'http://127.0.0.1:1/api/v2/', apiKey: '' })).toThrow(/apiKey/);
  });
});
