// The operator as the Deployment runs it (the source entry point, test/harness/operator-process.ts),
// a child process so it can be SIGKILLed at any instruction and started again. Every incarnation
// appends to one log file, which the leak check reads whole; an exit this campaign did not cause is
// counted as a crash.
import { appendFileSync, createWriteStream, type WriteStream } from 'node:fs';
import { freePort } from '../test/harness/controlplane.ts';
import { OperatorProcess as Operator } from '../test/harness/operator-process.ts';
import { CHAOS_MIN_ROTATION_GRACE } from './environment.ts';
import { sleep } from './options.ts';

export interface OperatorProcessOptions {
  kubeconfig: string;
  platformUrl: string;
  logFile: string;
  driftInterval: string;
  pendingGrace: string;
}

export class OperatorProcess {
  readonly #o: OperatorProcessOptions;
  #operator: Operator | undefined;
  #log: WriteStream;
  #metricsPort = 0;
  #killing = false;
  #startedAt = 0;
  /** When the current incarnation said "operator started" (informers synced, workers running). */
  readyAt: number | undefined;
  /** Start-to-ready of the last incarnation. */
  lastStartupMs = 3_000;
  starts = 0;
  kills = 0;
  /** Exits nobody asked for (a crash of the operator). */
  crashes: string[] = [];
  /** /metrics expositions scraped over the run (for the leak check). */
  readonly expositions: string[] = [];

  constructor(options: OperatorProcessOptions) {
    this.#o = options;
    this.#log = createWriteStream(options.logFile, { flags: 'a' });
  }

  get running(): boolean {
    return this.#operator?.running === true;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.#metricsPort = await freePort();
    this.starts += 1;
    this.#log.write(`${JSON.stringify({ chaos: 'start', incarnation: this.starts, at: new Date().toISOString() })}\n`);
    const operator = new Operator({
      args: [
        `--kubeconfig=${this.#o.kubeconfig}`,
        `--platform-url=${this.#o.platformUrl}`,
        `--metrics-bind-address=127.0.0.1:${this.#metricsPort}`,
        '--health-probe-bind-address=127.0.0.1:0',
        `--drift-interval=${this.#o.driftInterval}`,
        `--pending-grace=${this.#o.pendingGrace}`,
        `--min-rotation-grace=${CHAOS_MIN_ROTATION_GRACE}`,
        '--workers=4',
      ],
      env: { PATH: process.env.PATH, LOG_LEVEL: 'debug' },
      keep: 0,
      log: this.#log,
    });
    this.readyAt = undefined;
    this.#startedAt = Date.now();
    const unsubscribe = operator.onLogLine((line) => {
      if (line.msg !== 'operator started') return;
      unsubscribe();
      if (this.readyAt === undefined && this.#operator === operator) {
        this.readyAt = Date.now();
        this.lastStartupMs = this.readyAt - this.#startedAt;
      }
    });
    void operator.exited.then(({ code, signal }) => {
      if (this.#operator === operator && !this.#killing) {
        this.crashes.push(`incarnation ${this.starts} exited (${code ?? signal}) at ${new Date().toISOString()}`);
      }
    });
    this.#operator = operator;
  }

  /** SIGKILL: no drain, no exit handler, whatever the operator was doing. */
  async kill(): Promise<void> {
    const operator = this.#operator;
    if (operator === undefined || !this.running) return;
    this.#killing = true;
    await operator.kill('SIGKILL');
    this.#killing = false;
    this.kills += 1;
    this.#log.write(`${JSON.stringify({ chaos: 'SIGKILL', incarnation: this.starts, at: new Date().toISOString() })}\n`);
  }

  /** Restarts a crashed operator (a Deployment would), counting the crash. */
  async ensureRunning(): Promise<void> {
    if (!this.running) await this.start();
  }

  async scrapeMetrics(): Promise<void> {
    if (!this.running) return;
    try {
      const response = await fetch(`http://127.0.0.1:${this.#metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) });
      if (response.ok) this.expositions.push(await response.text());
    } catch {
      // not listening yet
    }
  }

  /** SIGTERM and wait for the drain (end of the campaign). */
  async stop(): Promise<void> {
    if (this.running) {
      this.#killing = true;
      await this.#operator?.stop(30_000);
    }
    await sleep(50);
    await new Promise<void>((resolve) => this.#log.end(resolve));
  }

  /** For exit handlers: no waiting. */
  killNow(): void {
    this.#operator?.killNow();
  }

  note(text: string): void {
    if (!this.#log.writableEnded) this.#log.write(`${JSON.stringify({ chaos: text, at: new Date().toISOString() })}\n`);
    else appendFileSync(this.#o.logFile, `${text}\n`);
  }
}
