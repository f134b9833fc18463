// The operator as its Pod runs it: the bundle the image ships (npm run bundle, built into the run's
// folder), the image's node flags (the Dockerfile's ENTRYPOINT), inside the memory cage of the
// chart's limit. Every exit it was not asked for is counted (an OOM kill among them), and it is
// started again, as the kubelet would. A planned restart (restart()) is a rollout's: SIGTERM, the
// drain (SIGKILL after the Pod's terminationGracePeriodSeconds), then a new incarnation at once; it
// is counted apart, with its window (the SIGTERM to the new incarnation's "operator started").
import { createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/harness/controlplane.ts';
import { buildBundle, imageAllocatorEnv, imageNodeFlags, OperatorProcess } from '../../test/harness/operator-process.ts';
import { sleep } from '../options.ts';
import { processMemory, type MemoryCage } from './memory.ts';

export interface OperatorExit {
  incarnation: number;
  at: string;
  code: number | null;
  signal: string | null;
  oomKilled: boolean;
  peakRssMiB: number;
}

/** A planned restart: from its SIGTERM (ms) to the new incarnation's readiness (ms), how the old one ended. */
export interface PlannedRestart {
  incarnation: number;
  from: number;
  drainedAt: number;
  readyAt: number | undefined;
  code: number | null;
  signal: string | null;
  killed: boolean;
}

/** The deployment's terminationGracePeriodSeconds (deploy/base/deployment.yaml). */
const TERMINATION_GRACE_MS = 30_000;

export class CagedOperator {
  readonly #cage: MemoryCage;
  readonly #kubeconfig: string;
  readonly #platformUrl: string;
  readonly #workers: number;
  readonly #log: WriteStream;
  readonly #bundle: string;
  #operator: OperatorProcess | undefined;
  #stopping = false;
  /** The incarnation being stopped by restart(): its exit is planned. */
  #restarting: OperatorProcess | undefined;
  readonly restarts: PlannedRestart[] = [];
  #sampler: NodeJS.Timeout | undefined;
  #metricsPort = 0;
  readonly nodeFlags = imageNodeFlags();
  starts = 0;
  readonly exits: OperatorExit[] = [];
  /** Highest RSS of any incarnation (VmHWM), bytes; and the RSS samples' count. */
  peakRss = 0;
  /** When it was reached (ms). */
  peakAt = 0;
  samples = 0;
  /** RSS every second: [seconds since start, MiB]. */
  readonly timeline: [number, number][] = [];
  #t0 = Date.now();
  #incarnationPeak = 0;
  readonly expositions: string[] = [];
  /** When the current incarnation said "operator started" (informers synced, workers running). */
  readyAt: number | undefined;

  constructor(options: { cage: MemoryCage; kubeconfig: string; platformUrl: string; out: string; workers: number }) {
    this.#cage = options.cage;
    this.#kubeconfig = options.kubeconfig;
    this.#platformUrl = options.platformUrl;
    this.#workers = options.workers;
    this.#log = createWriteStream(join(options.out, 'operator.log'), { flags: 'a' });
    this.#bundle = join(options.out, 'operator', 'main.js');
  }

  get pid(): number | undefined {
    return this.running ? this.#operator?.pid : undefined;
  }

  get running(): boolean {
    return this.#operator?.running === true;
  }

  /** The image's bundle, built from this tree into the run's folder. */
  async build(): Promise<void> {
    await buildBundle(this.#bundle);
  }

  async start(): Promise<void> {
    if (this.running || this.#stopping) return;
    this.#metricsPort = await freePort();
    this.starts += 1;
    this.#incarnationPeak = 0;
    this.#log.write(`${JSON.stringify({ hostile: 'start', incarnation: this.starts, at: new Date().toISOString() })}\n`);
    const incarnation = this.starts;
    const oomBefore = this.#cage.oomKills();
    const operator = new OperatorProcess({
      entry: this.#bundle,
      nodeFlags: this.nodeFlags,
      args: [
        `--kubeconfig=${this.#kubeconfig}`,
        `--platform-url=${this.#platformUrl}`,
        `--metrics-bind-address=127.0.0.1:${this.#metricsPort}`,
        '--health-probe-bind-address=127.0.0.1:0',
        '--drift-interval=10s',
        '--pending-grace=10s',
        `--workers=${this.#workers}`,
      ],
      wrap: (argv) => this.#cage.wrap(argv),
      // The image's malloc where this machine has it, as its node flags.
      env: { PATH: process.env.PATH, LOG_LEVEL: 'debug', HOME: '/tmp', ...imageAllocatorEnv().env },
      keep: 0,
      log: this.#log,
    });
    this.readyAt = undefined;
    const unsubscribe = operator.onLogLine((line) => {
      if (line.msg !== 'operator started') return;
      unsubscribe();
      if (this.readyAt === undefined && this.#operator === operator) {
        this.readyAt = Date.now();
        const planned = this.restarts.at(-1);
        if (planned !== undefined && planned.incarnation === incarnation && planned.readyAt === undefined) planned.readyAt = this.readyAt;
      }
    });
    void operator.exited.then(({ code, signal }) => {
      if (this.#stopping && this.#operator === operator) return;
      if (this.#restarting === operator) return;
      const oomKilled = this.#cage.oomKills() > oomBefore;
      this.exits.push({ incarnation, at: new Date().toISOString(), code, signal, oomKilled, peakRssMiB: mib(this.#incarnationPeak) });
      this.#log.write(`${JSON.stringify({ hostile: 'exit', incarnation, code, signal, oomKilled })}\n`);
      // As the kubelet: started again after a moment.
      setTimeout(() => void this.start(), 1_000).unref();
    });
    this.#operator = operator;
    this.#sampler ??= setInterval(() => this.#sample(), 200);
  }

  /**
   * A rollout's restart: SIGTERM, wait for the drain (SIGKILL after the termination grace), a new
   * incarnation at once. Undefined when the operator was not running (an unplanned exit is being
   * restarted already).
   */
  async restart(): Promise<PlannedRestart | undefined> {
    const operator = this.#operator;
    if (operator === undefined || !this.running || this.#stopping) return undefined;
    const planned: PlannedRestart = {
      incarnation: this.starts + 1,
      from: Date.now(),
      drainedAt: 0,
      readyAt: undefined,
      code: null,
      signal: null,
      killed: false,
    };
    this.#restarting = operator;
    this.#log.write(`${JSON.stringify({ hostile: 'restart', incarnation: this.starts, at: new Date().toISOString() })}\n`);
    const exit = await operator.stop(TERMINATION_GRACE_MS);
    [planned.code, planned.signal, planned.killed] = [exit.code, exit.signal, exit.killed];
    planned.drainedAt = Date.now();
    this.restarts.push(planned);
    this.#restarting = undefined;
    if (this.#stopping) return planned;
    await this.start();
    return planned;
  }

  #sample(): void {
    const pid = this.pid;
    if (pid === undefined) return;
    const m = processMemory(pid);
    if (m === undefined) return;
    this.samples += 1;
    this.#incarnationPeak = Math.max(this.#incarnationPeak, m.peak, m.rss);
    if (this.#incarnationPeak > this.peakRss) {
      this.peakRss = this.#incarnationPeak;
      this.peakAt = Date.now();
    }
    const second = Math.floor((Date.now() - this.#t0) / 1000);
    const last = this.timeline.at(-1);
    if (last === undefined || last[0] !== second) this.timeline.push([second, mib(m.rss)]);
    else last[1] = Math.max(last[1], mib(m.rss));
  }

  /** The current RSS, MiB (0 when not running). */
  rssMiB(): number {
    const pid = this.pid;
    return pid === undefined ? 0 : mib(processMemory(pid)?.rss ?? 0);
  }

  async scrapeMetrics(): Promise<void> {
    if (!this.running) return;
    try {
      const response = await fetch(`http://127.0.0.1:${this.#metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) this.expositions.push(await response.text());
    } catch {
      // not listening yet, or too busy to answer
    }
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#sample();
    clearInterval(this.#sampler);
    await this.#operator?.stop(20_000);
    await sleep(50);
    await new Promise<void>((resolve) => this.#log.end(resolve));
  }

  killNow(): void {
    this.#stopping = true;
    this.#operator?.killNow();
  }
}

export const mib = (bytes: number): number => Math.round((bytes / 1024 / 1024) * 10) / 10;
