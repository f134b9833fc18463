// The machine and versions a benchmark ran on, for the header of every section of docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';

export interface MachineInfo {
  cores: number;
  memoryGiB: number;
  cpuModel: string;
  kernel: string;
  node: string;
  commit: string;
  /** 1-minute load average when the run started: other work on the machine skews the figures. */
  loadAverage: number;
}

function cpuModel(): string {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line !== undefined) return line.slice(line.indexOf(':') + 1).trim();
  } catch {
    // Not Linux: fall back to what os.cpus() reports.
  }
  return cpus()[0]?.model ?? 'unknown';
}

function commit(cwd: string): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd, encoding: 'utf8' }).trim() !== '';
    return dirty ? `${head} + uncommitted changes` : head;
  } catch {
    return 'unknown';
  }
}

export function machineInfo(cwd: string): MachineInfo {
  return {
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    cpuModel: cpuModel(),
    kernel: release(),
    node: process.version,
    commit: commit(cwd),
    loadAverage: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  };
}

export function describeMachine(m: MachineInfo): string {
  return `${m.cores} cores (${m.cpuModel}), ${m.memoryGiB} GiB memory, Linux ${m.kernel}; Node ${m.node}; commit ${m.commit}; load average ${m.loadAverage} at start`;
}
