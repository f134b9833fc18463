// Wire compatibility with the platform's CLI, neonctl (docs/design.md section 6), run as a child process
// with NEON_API_HOST pointing at the emulator (neonctl joins request paths onto it, so it is the
// base URL including /api/v2).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Emulator } from '../../src/emulator/server.ts';
import { keyOf, ORG, projectId, start } from './harness.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = join(root, 'node_modules', '.bin');
const configDir = mkdtempSync(join(tmpdir(), 'emu-neonctl-'));

let emu: Emulator;
let alice: string;

beforeAll(async () => {
  emu = await start();
  alice = keyOf(emu, 'alice');
});

afterAll(async () => {
  await emu.close();
  rmSync(configDir, { recursive: true, force: true });
});

function neonctl(...args: string[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    execFile(
      join(bin, 'neonctl'),
      [...args, '--api-key', alice, '--output', 'json', '--no-analytics', '--config-dir', configDir],
      {
        // The pinned Node 24 first on PATH: neonctl's shebang is `env node`.
        env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, NEON_API_HOST: emu.baseUrl, CI: 'true' },
        timeout: 30_000,
      },
      (err, stdout, stderr) => {
        if (err !== null) {
          reject(new Error(`neonctl ${args.join(' ')} failed: ${err.message}\n${stderr}`));
          return;
        }
        try {
          resolve(JSON.parse(stdout));
        } catch {
          reject(new Error(`neonctl ${args.join(' ')} printed no JSON:\n${stdout}\n${stderr}`));
        }
      },
    );
  });
}

// Each test runs up to three rounds of neonctl processes (each may take its 30 s exec timeout on a
// loaded machine), beyond jest's default 60 s.
const ROUNDS_TIMEOUT_MS = 3 * 30_000 + 10_000;

describe('neonctl against the emulator', () => {
  it(
    'api-keys create, list and revoke (personal and organization)',
    async () => {
      const [personal, org] = (await Promise.all([
        neonctl('api-keys', 'create', '--name', 'cli-personal'),
        neonctl('api-keys', 'create', '--name', 'cli-org', '--org-id', ORG),
      ])) as { id: number; key: string; name: string }[];
      expect(personal?.key).toMatch(/^[a-z0-9]{64}$/);
      expect(org?.name).toBe('cli-org');
      const [mine, orgs] = (await Promise.all([neonctl('api-keys', 'list'), neonctl('api-keys', 'list', '--org-id', ORG)])) as { name: string }[][];
      expect(mine?.map((k) => k.name)).toContain('cli-personal');
      expect(orgs?.map((k) => k.name)).toContain('cli-org');
      const [revoked, revokedOrg] = (await Promise.all([
        neonctl('api-keys', 'revoke', String(personal?.id)),
        neonctl('api-keys', 'revoke', String(org?.id), '--org-id', ORG),
      ])) as { revoked: boolean }[];
      expect(revoked?.revoked).toBe(true);
      expect(revokedOrg?.revoked).toBe(true);
    },
    ROUNDS_TIMEOUT_MS,
  );

  it(
    'api-keys create --project-id, projects list and operations list --project-id',
    async () => {
      const project = projectId(emu, 'demo-api');
      const [scoped, projects, operations] = (await Promise.all([
        neonctl('api-keys', 'create', '--name', 'cli-scoped', '--project-id', project),
        neonctl('projects', 'list', '--org-id', ORG),
        neonctl('operations', 'list', '--project-id', project),
      ])) as [{ project_id: string }, { id: string }[], { action: string; status: string }[]];
      expect(scoped.project_id).toBe(project);
      expect(projects.map((p) => p.id)).toContain(project);
      expect(operations.map((o) => o.action)).toContain('create_timeline');
    },
    ROUNDS_TIMEOUT_MS,
  );
});
