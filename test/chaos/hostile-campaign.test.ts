// The hostile-tenant campaign (chaos/hostile, `npm run hostile`), short: 60 s of attacks with a fixed
// seed, the operator under the chart's memory limit. It runs as `npm run hostile` does, a process
// with its own control plane (the tenants' ~1 MiB Secrets stay out of the shared one), and every
// invariant it checks must hold. The campaign must also have done what it claims: a test that
// attacked nothing would pass for nothing.
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SEED = 24;

interface Report {
  operator: { starts: number; peakRssMiB: number };
  victims: { counts: { creates: number; rotations: number; deletes: number }; latencies: { ready: { n: number } } };
  tenants: { totalActions: number; playbooks: Record<string, number>[] };
  invariants: Record<string, string>;
  violations: { invariant: string; detail: string; context: string[] }[];
}

describe('a hostile-tenant campaign (seed 24, 60 s)', () => {
  it('no tenant crashes the operator, makes it lose a key, touches another namespace or restarts a workload without consent', async () => {
    if (process.env.TEST_CONTROLPLANE === 'off') throw new Error('this suite starts a control plane: run it with `npm run jest`, not test:unit');
    const out = mkdtempSync(join(tmpdir(), 'nko-hostile-'));
    try {
      const child = spawn(process.execPath, [join(root, 'chaos/hostile/run.ts'), `--seed=${SEED}`, '--duration=60', '--settle=30', `--out=${out}`], {
        cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' },
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString('utf8'); });
      child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString('utf8'); });
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      let report: Report;
      try {
        report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as Report;
      } catch {
        throw new Error(`the campaign wrote no report (exit ${code}):\n${output.slice(-6000)}`);
      }
      // It attacked: every playbook ran, hundreds of actions, the victims worked throughout.
      expect(report.tenants.totalActions).toBeGreaterThan(100);
      for (const playbooks of report.tenants.playbooks) for (const [name, runs] of Object.entries(playbooks)) expect({ name, ran: runs > 0 }).toEqual({ name, ran: true });
      expect(report.victims.latencies.ready.n).toBeGreaterThan(5);
      expect(report.victims.counts.rotations).toBeGreaterThan(5);
      // Every invariant held; a violation is shown with the actions that led to it.
      expect(report.violations.map((v) => `[${v.invariant}] ${v.detail}\n    ${v.context.slice(0, 10).join('\n    ')}`)).toEqual([]);
      expect(report.invariants).toEqual(Object.fromEntries(Object.keys(report.invariants).map((k) => [k, 'PASS'])));
      expect(code).toBe(0);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 240_000);
});
