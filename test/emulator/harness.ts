// Shared by the emulator suites: start an emulator on loopback (fast timings, in-memory store) and
// call it over HTTP with fetch. No mocks: every assertion goes through the wire.
import { startEmulator, type Emulator, type EmulatorOptions } from '../../src/emulator/server.ts';

export interface Caller {
  (
    method: string,
    path: string,
    options?: { key?: string | undefined; body?: unknown; rawBody?: string; headers?: Record<string, string> },
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are inspected field by field in tests
  ): Promise<{ status: number; body: any; headers: Headers }>;
}

export async function start(options: EmulatorOptions = {}): Promise<Emulator> {
  return startEmulator({ timeScale: 0.01, controlPlaneActivity: false, ...options });
}

/** Calls the public API (paths relative to baseUrl) or, for paths starting with /admin, the admin API. */
export function caller(emulator: Emulator): Caller {
  const origin = emulator.baseUrl.replace(/\/api\/v2$/, '');
  return async (method, path, options = {}) => {
    const url = path.startsWith('/admin') || path.startsWith('/console') ? `${origin}${path}` : `${emulator.baseUrl}${path}`;
    const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
    if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(url, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      // HTML (console) or empty.
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}

export function keyOf(emulator: Emulator, name: string): string {
  const key = emulator.bootstrap.users.find((u) => u.name === name)?.personalKey;
  if (key === undefined) throw new Error(`no bootstrap key for ${name}`);
  return key;
}

export function userId(emulator: Emulator, name: string): string {
  const id = emulator.bootstrap.users.find((u) => u.name === name)?.id;
  if (id === undefined) throw new Error(`no user ${name}`);
  return id;
}

export function projectId(emulator: Emulator, name: string): string {
  const id = emulator.bootstrap.projects.find((p) => p.name === name)?.id;
  if (id === undefined) throw new Error(`no project ${name}`);
  return id;
}

export const ORG = 'org-demo-00000001';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls until check() returns a value (not undefined) or the deadline passes. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000, everyMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(everyMs);
  }
}
