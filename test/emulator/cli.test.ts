// `npm run emulator`: one JSON line of bootstrap on stdout, logs on stderr (never a secret), the
// seed file honoured, and a restart on the same store printing the record without personal keys.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { Bootstrap } from '../../src/emulator/server.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const node = join(root, 'node_modules', '.bin', 'node');
const dir = mkdtempSync(join(tmpdir(), 'emu-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Starts main.ts, returns its bootstrap line; the caller stops it with SIGTERM. */
async function run(args: string[], work: (b: Bootstrap) => Promise<void>): Promise<{ stderr: string; code: number | null }> {
  const child = spawn(node, [join(root, 'src/emulator/main.ts'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  // 'close', not 'exit': it fires after stdout and stderr are drained.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  try {
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        const nl = stdout.indexOf('\n');
        if (nl >= 0) resolve(stdout.slice(0, nl));
      });
      child.on('exit', () => reject(new Error(`emulator exited early:\n${stderr}`)));
    });
    await work(JSON.parse(line) as Bootstrap);
  } finally {
    child.kill('SIGTERM');
  }
  return { stderr, code: await exited };
}

describe('npm run emulator', () => {
  it('prints the bootstrap line, honours --seed, and omits personal keys after a restart', async () => {
    const seed = join(dir, 'seed.json');
    writeFileSync(
      seed,
      JSON.stringify({
        organizations: [{ id: 'org-acme-00000042', name: 'Acme' }],
        users: [{ name: 'erin', orgRoles: { 'org-acme-00000042': 'admin' } }],
        projects: [{ name: 'acme-app', organizationId: 'org-acme-00000042' }],
      }),
    );
    const db = join(dir, 'cli.db');
    let key = '';
    const first = await run(['--port', '0', '--db', db, '--seed', seed, '--time-scale', '0.01', '--log-level', 'debug'], async (b) => {
      expect(b.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v2$/);
      expect(b.organizations).toEqual([{ id: 'org-acme-00000042', name: 'Acme' }]);
      expect(b.projects[0]).toMatchObject({ name: 'acme-app', organizationId: 'org-acme-00000042', ownerUserId: b.users[0]?.id });
      key = b.users[0]?.personalKey ?? '';
      expect(key).toMatch(/^[a-z0-9]{64}$/);
      const res = await fetch(`${b.baseUrl}/organizations/org-acme-00000042/api_keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ key_name: 'cli' }),
      });
      expect(res.status).toBe(200);
      const created = (await res.json()) as { key: string };
      await fetch(`${b.baseUrl}/api_keys`, { headers: { authorization: `Bearer ${created.key}` } });
      key = `${key}|${created.key}`;
    });
    expect(first.code).toBe(0);
    expect(first.stderr).toContain('"msg":"request"');
    // Each line carries its level by name, as the operator's do.
    expect(
      first.stderr
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { level: unknown }).level),
    ).toContain('info');
    expect(first.stderr).not.toMatch(/"level":\d/);
    for (const secret of key.split('|')) expect(first.stderr).not.toContain(secret);

    const second = await run(['--db', db], async (b) => {
      expect(b.users.map((u) => u.name)).toEqual(['erin']);
      expect(b.users[0]?.personalKey).toBeUndefined();
      const res = await fetch(`${b.baseUrl}/api_keys`, { headers: { authorization: `Bearer ${key.split('|')[0] ?? ''}` } });
      expect(res.status).toBe(200);
    });
    expect(second.code).toBe(0);
  });
});
