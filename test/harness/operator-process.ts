// The operator as a process, the way the image and the Deployment run it: the one place in test/,
// bench/ and chaos/ that names its entry points, builds its command line (node's flags, the script,
// the operator's flags), starts it with the environment given, keeps its output and reads its JSON
// log lines, waits for /readyz, and stops it (SIGTERM, SIGKILL after a grace, the exit awaited), so
// that no caller leaves a process behind.
import { execFile, spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const REPOSITORY_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The operator's entry point in the source tree (node strips the types as it loads it). */
export const OPERATOR_SOURCE = 'src/operator/main.ts';
/** The bundle `npm run bundle` makes of OPERATOR_SOURCE: what the image's ENTRYPOINT runs. */
export const OPERATOR_BUNDLE = 'dist/operator/main.js';

/**
 * How long a test waits for an operator process to load and serve /healthz (alive): seconds on a
 * quiet machine, tens of them on a loaded one (node strips the source's types as it loads it). A
 * test's own bounds count from then, and its timeout adds this for each start it waits on in turn.
 */
export const PROCESS_START_MS = 120_000;

/** The node flags of the image: the Dockerfile's ENTRYPOINT between `node` and the bundle. */
export function imageNodeFlags(dockerfile = readFileSync(resolve(REPOSITORY_ROOT, 'Dockerfile'), 'utf8')): string[] {
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '));
  const argv = JSON.parse(line?.slice('ENTRYPOINT '.length) ?? 'null') as string[] | null;
  const node = argv?.indexOf('node') ?? -1;
  const main = argv?.indexOf(OPERATOR_BUNDLE) ?? -1;
  if (argv === null || node < 0 || main < node) throw new Error(`the Dockerfile's ENTRYPOINT does not run node ${OPERATOR_BUNDLE}`);
  return argv.slice(node + 1, main);
}

/** The image's malloc: the Dockerfile's `ENV LD_PRELOAD=... MALLOC_CONF=...` line (jemalloc, preloaded). */
export interface ImageAllocator {
  /** The library as the image has it (a path in the image). */
  preload: string;
  /** jemalloc's options, as the image sets them. */
  conf: string;
}

export function imageAllocator(dockerfile = readFileSync(resolve(REPOSITORY_ROOT, 'Dockerfile'), 'utf8')): ImageAllocator {
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENV LD_PRELOAD='));
  const match = /^ENV LD_PRELOAD=(\S+) MALLOC_CONF=(\S+)$/.exec(line ?? '');
  if (match === null) throw new Error('the Dockerfile has no line ENV LD_PRELOAD=<library> MALLOC_CONF=<options>');
  return { preload: match[1]!, conf: match[2]! };
}

/** Where Debian's libjemalloc2 (and other distributions') put the library, by architecture. */
const JEMALLOC_PATHS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/usr/local/lib'].map(
  (d) => `${d}/libjemalloc.so.2`,
);

/**
 * The environment that gives a process on this machine the image's malloc: the image's library
 * found here (`apt-get install libjemalloc2`) and its options; or, where this machine has none,
 * why not (the process then runs on glibc's malloc, which keeps more memory than the image).
 */
export function imageAllocatorEnv(allocator = imageAllocator()): { env: NodeJS.ProcessEnv; description: string } | { env?: undefined; missing: string } {
  const library = [allocator.preload, ...JEMALLOC_PATHS].find((path) => existsSync(path));
  if (library === undefined)
    return { missing: `libjemalloc.so.2 is not on this machine (Debian: apt-get install libjemalloc2); glibc's malloc instead of the image's jemalloc` };
  return { env: { LD_PRELOAD: library, MALLOC_CONF: allocator.conf }, description: `jemalloc (${library}), MALLOC_CONF=${allocator.conf}, as the image` };
}

/** The image's bundle built from this tree into `outfile` (`npm run bundle`, another output file). */
export async function buildBundle(outfile: string): Promise<void> {
  mkdirSync(dirname(outfile), { recursive: true });
  await promisify(execFile)('npm', ['run', '--silent', 'bundle', '--', `--outfile=${outfile}`], { cwd: REPOSITORY_ROOT });
}

export interface OperatorCommand {
  /** The script node runs, relative to the repository or absolute: OPERATOR_SOURCE (the default), OPERATOR_BUNDLE, a bundle built elsewhere. */
  entry?: string;
  /** node's own flags, before the script (the image's, a profiler's, an inspector's). */
  nodeFlags?: readonly string[];
  /** The operator's flags, passed as given. */
  args: readonly string[];
  /** Wraps the whole command line (a memory cgroup's launcher: chaos/hostile/memory.ts). */
  wrap?: (argv: string[]) => string[];
}

/** The command line: node, its flags, the script, the operator's flags (then wrapped). */
export function operatorCommand(command: OperatorCommand): string[] {
  const argv = [process.execPath, ...(command.nodeFlags ?? []), resolve(REPOSITORY_ROOT, command.entry ?? OPERATOR_SOURCE), ...command.args];
  return command.wrap === undefined ? argv : command.wrap(argv);
}

/** Runs the operator to its end (`--help`, a refused flag), its output as text. The environment is this process's unless given. */
export function runOperatorSync(command: OperatorCommand & { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number }): SpawnSyncReturns<string> {
  const [file, ...argv] = operatorCommand(command);
  return spawnSync(file!, argv, {
    encoding: 'utf8',
    ...(command.env !== undefined ? { env: command.env } : {}),
    ...(command.cwd !== undefined ? { cwd: command.cwd } : {}),
    ...(command.timeoutMs !== undefined ? { timeout: command.timeoutMs } : {}),
  });
}

export interface OperatorProcessOptions extends OperatorCommand {
  /** The whole environment of the process (nothing is inherited). */
  env: NodeJS.ProcessEnv;
  /** How much of the output (stdout and stderr) output() keeps: the last `keep` characters; all by default, 0 none. */
  keep?: number;
  /** Where the output is written as well: a stream (left open: it may outlive this process) or a file made for it. */
  log?: Writable | string;
}

export interface OperatorExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A line of the operator's log (pino's JSON). */
export type OperatorLogLine = Record<string, unknown> & { msg?: unknown };

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

export class OperatorProcess {
  readonly child: ChildProcess;
  /** Resolves once the process has exited and its output has all been read (also when it could not be started). */
  readonly exited: Promise<OperatorExit>;
  readonly #keep: number;
  #output = '';
  #partial = '';
  readonly #listeners = new Set<(line: OperatorLogLine) => void>();

  constructor(options: OperatorProcessOptions) {
    this.#keep = options.keep ?? Number.POSITIVE_INFINITY;
    const [file, ...argv] = operatorCommand(options);
    const child = spawn(file!, argv, { env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    this.exited = new Promise<OperatorExit>((done) => {
      child.once('close', (code, signal) => done({ code, signal }));
      child.once('error', () => done({ code: child.exitCode, signal: child.signalCode }));
    });
    if (options.log !== undefined) {
      const log = typeof options.log === 'string' ? createWriteStream(options.log, { flags: 'a' }) : options.log;
      child.stdout?.pipe(log, { end: false });
      child.stderr?.pipe(log, { end: false });
      if (typeof options.log === 'string') child.once('close', () => log.end());
    }
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      this.#keepOutput(chunk);
      if (this.#listeners.size > 0) this.#lines(chunk);
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => this.#keepOutput(chunk));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && this.child.pid !== undefined;
  }

  /** The output kept (see `keep`): stdout and stderr as they came. */
  output(): string {
    return this.#output;
  }

  /** Calls `listener` with each JSON line of stdout from now on; returns the unsubscription. */
  onLogLine(listener: (line: OperatorLogLine) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Waits until the operator answers /readyz with a success on `healthPort` (its
   * --health-probe-bind-address); fails when it exits first or is not ready within `timeoutMs`.
   */
  async ready(healthPort: number, timeoutMs: number, what = 'the operator ready'): Promise<void> {
    await this.#probe(healthPort, '/readyz', timeoutMs, what);
  }

  /**
   * Waits until the operator answers /healthz on `healthPort`: the process has loaded its code and
   * serves its probes, before any leadership or cache. Loading alone takes seconds, and on a loaded
   * machine tens of them: a caller waits for this before it bounds what the operator then does.
   */
  async alive(healthPort: number, timeoutMs: number, what = 'the operator serving /healthz'): Promise<void> {
    await this.#probe(healthPort, '/healthz', timeoutMs, what);
  }

  async #probe(healthPort: number, path: '/readyz' | '/healthz', timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running)
        throw new Error(`the operator exited (${String(this.child.exitCode ?? this.child.signalCode)}) while waiting for ${what}${this.#tail()}`);
      const ok = await fetch(`http://127.0.0.1:${healthPort}${path}`).then(
        async (response) => {
          await response.body?.cancel();
          return response.ok;
        },
        () => false,
      );
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${timeoutMs} ms)${this.#tail()}`);
      await sleep(100);
    }
  }

  /** Sends a signal (SIGSTOP, SIGCONT, SIGUSR2...) without waiting. */
  signal(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /** Sends `signal` (SIGKILL: no drain) and waits for the exit. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<OperatorExit> {
    if (this.running) this.child.kill(signal);
    return await this.exited;
  }

  /**
   * As the kubelet stops a container: SIGTERM (after a SIGCONT, should it be stopped), SIGKILL once
   * `graceMs` has passed, the exit awaited. `killed`: the grace ran out.
   */
  async stop(graceMs = 10_000): Promise<OperatorExit & { killed: boolean }> {
    let killed = false;
    if (this.running) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => {
        killed = true;
        this.child.kill('SIGKILL');
      }, graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    return { ...(await this.exited), killed };
  }

  /** SIGKILL without waiting: for an exit handler. */
  killNow(): void {
    if (this.running) this.child.kill('SIGKILL');
  }

  #keepOutput(chunk: string): void {
    if (this.#keep <= 0) return;
    this.#output += chunk;
    if (this.#output.length > this.#keep) this.#output = this.#output.slice(-this.#keep);
  }

  #lines(text: string): void {
    const parts = (this.#partial + text).split('\n');
    this.#partial = parts.pop() ?? '';
    for (const part of parts) {
      if (!part.startsWith('{')) continue;
      let line: OperatorLogLine;
      try {
        line = JSON.parse(part) as OperatorLogLine;
      } catch {
        continue;
      }
      for (const listener of this.#listeners) listener(line);
    }
  }

  #tail(): string {
    const tail = this.#output.slice(-3_000);
    return tail === '' ? '' : `\n--- operator:\n${tail}`;
  }
}
