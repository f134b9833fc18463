// The operator's container memory limit, for real: a memory cgroup made for the run (cgroup v2
// memory.max, or v1 memory.limit_in_bytes where the memory controller is still on v1), the operator
// started inside it, so going over the limit is an OOM kill as in a Pod, and the cgroup removed at the
// end. Where it cannot be made (not root, no memory controller) the limit is only compared against.
// The process's own peak RSS (VmHWM in /proc/<pid>/status) is read either way: the kernel keeps it,
// so no spike falls between two samples.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const PREFIX = 'nko-hostile-';

export interface MemoryCage {
  /** How the limit is held: 'cgroup v2 ...', 'cgroup v1 ...', or why it is not. */
  readonly how: string;
  readonly enforced: boolean;
  /** The argv that starts `argv` inside the cgroup (as is when not enforced). */
  wrap(argv: string[]): string[];
  /** OOM kills inside the cgroup so far. */
  oomKills(): number;
  /** The cgroup's peak charge (RSS, page cache and kernel memory of the process), bytes. */
  peakBytes(): number | undefined;
  remove(): void;
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

function field(text: string | undefined, name: string): number | undefined {
  const match = new RegExp(`^${name}\\s+(\\d+)`, 'm').exec(text ?? '');
  return match === null ? undefined : Number(match[1]);
}

/** Empty cgroups a killed earlier run left behind (only ours, only when no process is in them). */
function removeStale(parent: string): void {
  for (const name of readdirSync(parent)) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number(name.slice(PREFIX.length));
    if (Number.isInteger(pid) && existsSync(`/proc/${pid}`)) continue;
    if ((read(join(parent, name, 'cgroup.procs')) ?? '').trim() !== '') continue;
    try {
      rmdirSync(join(parent, name));
    } catch {
      // busy: leave it
    }
  }
}

export function memoryCage(limitBytes: number, enforce: boolean): MemoryCage {
  const none = (how: string): MemoryCage => ({
    how,
    enforced: false,
    wrap: (argv) => argv,
    oomKills: () => 0,
    peakBytes: () => undefined,
    remove: () => undefined,
  });
  if (!enforce) return none('not enforced (--no-enforce): RSS compared with the limit');
  if (process.getuid?.() !== 0) return none('not enforced (not root: no cgroup can be made): RSS compared with the limit');
  const v2 = '/sys/fs/cgroup';
  const v1 = '/sys/fs/cgroup/memory';
  let dir: string;
  let version: 'v1' | 'v2';
  if ((read(join(v2, 'cgroup.controllers')) ?? '').split(/\s+/).includes('memory')) {
    version = 'v2';
    removeStale(v2);
    dir = join(v2, `${PREFIX}${process.pid}`);
    try {
      if (!(read(join(v2, 'cgroup.subtree_control')) ?? '').includes('memory')) writeFileSync(join(v2, 'cgroup.subtree_control'), '+memory');
      mkdirSync(dir);
      writeFileSync(join(dir, 'memory.max'), String(limitBytes));
      if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
    } catch (error) {
      return none(`not enforced (cgroup v2: ${error instanceof Error ? error.message : String(error)}): RSS compared with the limit`);
    }
  } else if (existsSync(join(v1, 'memory.limit_in_bytes'))) {
    version = 'v1';
    removeStale(v1);
    dir = join(v1, `${PREFIX}${process.pid}`);
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
      if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes));
    } catch (error) {
      return none(`not enforced (cgroup v1: ${error instanceof Error ? error.message : String(error)}): RSS compared with the limit`);
    }
  } else {
    return none('not enforced (no memory cgroup controller on this machine): RSS compared with the limit');
  }
  let removed = false;
  const remove = (): void => {
    if (removed) return;
    for (let i = 0; i < 50; i += 1) {
      try {
        rmdirSync(dir);
        removed = true;
        return;
      } catch {
        // the killed process is still being torn down
        const until = Date.now() + 20;
        while (Date.now() < until) {
          /* a few ms */
        }
      }
    }
  };
  process.once('exit', remove);
  return {
    how: `cgroup ${version} ${dir} (${version === 'v2' ? 'memory.max' : 'memory.limit_in_bytes'} = ${limitBytes})`,
    enforced: true,
    // The shell moves itself into the cgroup and then becomes the operator (exec): the operator
    // starts there, as in its container, so Node sizes its heap from the limit it can see.
    wrap: (argv) => ['/bin/sh', '-c', `echo $$ > '${join(dir, 'cgroup.procs')}' && exec "$@"`, 'sh', ...argv],
    oomKills: () => (version === 'v2' ? field(read(join(dir, 'memory.events')), 'oom_kill') : field(read(join(dir, 'memory.oom_control')), 'oom_kill')) ?? 0,
    peakBytes: () => {
      const text = read(join(dir, version === 'v2' ? 'memory.peak' : 'memory.max_usage_in_bytes'));
      return text === undefined ? undefined : Number(text.trim());
    },
    remove,
  };
}

/** VmRSS and VmHWM (peak) of a live process, bytes; undefined once it is gone. */
export function processMemory(pid: number): { rss: number; peak: number } | undefined {
  const status = read(`/proc/${pid}/status`);
  if (status === undefined) return undefined;
  const kib = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}
