// The admin API and the console refuse what a web page could make the developer's browser send
// to the loopback emulator (src/emulator/cross-site-guard.ts): an Origin header, a Host that is
// not a loopback name (DNS rebinding), a command whose body is not JSON. Raw node:http requests,
// so the Host, Origin and Content-Type headers are exactly the ones written here.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { request } from 'node:http';
import type { Emulator } from '../../src/emulator/server.ts';
import { isLoopbackHost } from '../../src/emulator/cross-site-guard.ts';
import { keyOf, start } from './harness.ts';

interface Answer {
  status: number;
  body: unknown;
  requestId: string | undefined;
}

let emu: Emulator;
let port: number;

/** One HTTP/1.1 request to the emulator's loopback address, with these headers and nothing added but Content-Length. */
function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        setHost: false,
        headers: { host: `127.0.0.1:${port}`, ...headers, ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => {
          let parsed: unknown = text;
          try {
            parsed = text === '' ? undefined : JSON.parse(text);
          } catch {
            /* the console's HTML */
          }
          const id = res.headers['x-request-id'];
          resolve({ status: res.statusCode ?? 0, body: parsed, requestId: typeof id === 'string' ? id : undefined });
        });
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

const userCount = async (): Promise<number> => ((await send('GET', '/admin/state', {})).body as { users: unknown[] }).users.length;
const faultCount = async (): Promise<number> => ((await send('GET', '/admin/faults', {})).body as { rules: unknown[] }).rules.length;
const newUser = (name: string): string => JSON.stringify({ name });
const faultRules = JSON.stringify({ rules: [{ method: 'GET', route: '/api/v2/projects', probability: 1, kind: 'status', status: 503, times: 1 }] });

/** The emulator's error shape, exactly: {code, message, request_id}, the id echoed from X-Request-ID. */
const expectRefused = (answer: Answer, status: number, code: string, requestId: string): void => {
  expect([answer.status, answer.body]).toEqual([status, { code, message: expect.any(String), request_id: requestId }]);
  expect(answer.requestId).toBe(requestId);
};

beforeAll(async () => {
  emu = await start();
  port = Number(new URL(emu.adminUrl).port);
});

afterAll(async () => {
  await emu?.close();
});

describe('the admin API refuses cross-site requests', () => {
  it('accepts what its own clients send: no Origin, a loopback Host, JSON commands', async () => {
    const before = await userCount();
    const created = await send('POST', '/admin/users', { 'content-type': 'application/json' }, newUser('same-site'));
    expect(created.status).toBe(201);
    expect(await userCount()).toBe(before + 1);
    // A charset parameter is still JSON; a DELETE without a body needs no content type.
    expect((await send('PUT', '/admin/faults', { 'content-type': 'Application/JSON; charset=utf-8' }, faultRules)).status).toBe(200);
    expect(await faultCount()).toBe(1);
    expect((await send('DELETE', '/admin/faults', {})).status).toBe(200);
    expect(await faultCount()).toBe(0);
    expect((await send('GET', '/console', {})).status).toBe(200);
  });

  it('refuses any request with an Origin header, 403, whatever the origin, and changes nothing', async () => {
    const before = await userCount();
    const origins = ['https://evil.example', 'null', `http://127.0.0.1:${port}`, `http://localhost:${port}`];
    for (const [i, origin] of origins.entries()) {
      const id = `origin-${i}`;
      expectRefused(
        await send('POST', '/admin/users', { origin, 'content-type': 'application/json', 'x-request-id': id }, newUser(`from-origin-${i}`)),
        403,
        'PERMISSION_DENIED',
        id,
      );
      expectRefused(await send('GET', '/admin/keys', { origin, 'x-request-id': `${id}-get` }), 403, 'PERMISSION_DENIED', `${id}-get`);
      expectRefused(
        await send('PUT', '/admin/faults', { origin, 'content-type': 'application/json', 'x-request-id': `${id}-put` }, faultRules),
        403,
        'PERMISSION_DENIED',
        `${id}-put`,
      );
      expectRefused(await send('GET', '/console', { origin, 'x-request-id': `${id}-console` }), 403, 'PERMISSION_DENIED', `${id}-console`);
    }
    expect(await userCount()).toBe(before);
    expect(await faultCount()).toBe(0);
  });

  it('refuses a Host that is not a loopback name, 403 (a DNS name rebound to 127.0.0.1), and accepts every loopback form', async () => {
    const before = await userCount();
    const foreign = [
      'evil.example',
      `evil.example:${port}`,
      '127.0.0.1.nip.io',
      `localhost.evil.example:${port}`,
      '10.0.0.1',
      `0.0.0.0:${port}`,
      '[::2]',
      '[::ffff:127.0.0.1]',
      '128.0.0.1',
      '127.0.0.256',
    ];
    for (const [i, host] of foreign.entries()) {
      const id = `host-${i}`;
      expectRefused(
        await send('POST', '/admin/users', { host, 'content-type': 'application/json', 'x-request-id': id }, newUser(`rebound-${i}`)),
        403,
        'PERMISSION_DENIED',
        id,
      );
      expectRefused(await send('GET', '/admin/state', { host, 'x-request-id': `${id}-get` }), 403, 'PERMISSION_DENIED', `${id}-get`);
    }
    expect(await userCount()).toBe(before);
    for (const host of [
      'localhost',
      `localhost:${port}`,
      `LOCALHOST:${port}`,
      '127.0.0.1',
      `127.0.0.1:${port}`,
      `127.1.2.3:${port}`,
      '[::1]',
      `[::1]:${port}`,
    ]) {
      expect([host, (await send('GET', '/admin/keys', { host })).status]).toEqual([host, 200]);
    }
  });

  it('refuses a state-changing request whose body is not application/json, 415, and changes nothing', async () => {
    const before = await userCount();
    // The content types a page may send cross-site without a preflight, and none at all.
    const notJson: Record<string, string>[] = [
      { 'content-type': 'text/plain' },
      { 'content-type': 'text/plain;charset=UTF-8' },
      { 'content-type': 'application/x-www-form-urlencoded' },
      { 'content-type': 'multipart/form-data; boundary=x' },
      { 'content-type': 'application/json-seq' },
      {},
    ];
    for (const [i, headers] of notJson.entries()) {
      const id = `type-${i}`;
      expectRefused(await send('POST', '/admin/users', { ...headers, 'x-request-id': id }, newUser(`form-${i}`)), 415, 'UNSUPPORTED_MEDIA_TYPE', id);
      expectRefused(await send('PUT', '/admin/faults', { ...headers, 'x-request-id': `${id}-put` }, faultRules), 415, 'UNSUPPORTED_MEDIA_TYPE', `${id}-put`);
      expectRefused(
        await send('DELETE', '/admin/requests', { ...headers, 'x-request-id': `${id}-delete` }, '{}'),
        415,
        'UNSUPPORTED_MEDIA_TYPE',
        `${id}-delete`,
      );
    }
    expect(await userCount()).toBe(before);
    expect(await faultCount()).toBe(0);
  });

  it('leaves the public API alone: it authenticates every request with a key', async () => {
    const answer = await send('GET', '/api/v2/projects', { origin: 'https://app.example', authorization: `Bearer ${keyOf(emu, 'alice')}` });
    expect(answer.status).toBe(200);
  });
});

describe('isLoopbackHost', () => {
  it.each([
    ['localhost', true],
    ['localhost:8080', true],
    ['127.0.0.1', true],
    ['127.255.255.254:1', true],
    ['[::1]', true],
    ['[::1]:65535', true],
    ['localhost:65536', false],
    ['127.0.0.1:99999', false],
    ['::1', false],
    ['[::1', false],
    ['127.0.0', false],
    ['127.0.0.1.', false],
    ['localhost.', false],
    ['', false],
    ['evil.example', false],
    ['127.0.0.1@evil.example', false],
    ['0x7f.0.0.1', false],
  ])('%s -> %s', (host, loopback) => {
    expect(isLoopbackHost(host)).toBe(loopback);
  });
});
