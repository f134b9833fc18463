// Load generation and latency statistics shared by the benchmarks: a closed loop of N concurrent
// requesters over an undici Pool with N keep-alive connections (loopback only), bounded by time
// and by request count, timing every request; percentiles by nearest rank.
import { readFileSync } from 'node:fs';
import { Pool } from 'undici';

export interface RequestSpec {
  path: string;
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadOptions {
  /** http://127.0.0.1:PORT (loopback only: the benchmarks measure the server, not a network). */
  origin: string;
  /** Concurrent requesters, each on its own keep-alive connection. */
  connections: number;
  /** Measured period (after warm-up). */
  durationMs: number;
  /** Stop earlier once this many requests completed in the measured period. */
  maxRequests: number;
  /** Requests sent before measuring (same loop, not recorded). */
  warmupMs?: number;
  /** The i-th request (i counts from 0 across all requesters). */
  request: (i: number) => RequestSpec;
  /** Process whose CPU time is sampled over the measured period (the server under test). */
  serverPid?: number;
  /** Expected status; anything else counts as an error. Default 200. */
  expectStatus?: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  /** Status (or 'error: <message>') of the first unexpected reply, if any. */
  firstError?: string;
  elapsedMs: number;
  /** Completed requests per second in the measured period. */
  rps: number;
  /** Mean response body size in bytes. */
  meanBytes: number;
  /** Latencies in milliseconds, sorted ascending. */
  latencies: Float64Array;
  /** CPU used by the load generator (this process) / wall time, in percent of one core. */
  clientCpuPct: number;
  /** CPU used by the server process / wall time, in percent of one core; undefined without serverPid. */
  serverCpuPct: number | undefined;
  /** Server CPU time per completed request, in microseconds: unlike req/s, barely moved by other work on the machine. */
  serverCpuUsPerRequest: number | undefined;
}

const CLOCK_TICKS_PER_SECOND = 100;

/** utime + stime of a process, in milliseconds (Linux /proc); undefined when it cannot be read. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at state, field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const pool = new Pool(options.origin, { connections: options.connections, pipelining: 1 });
  const expect = options.expectStatus ?? 200;
  const capacity = Math.max(1, options.maxRequests);
  const latencies = new Float64Array(capacity);
  let next = 0;
  let recorded = 0;
  let errors = 0;
  let bytes = 0;
  let firstError: string | undefined;
  let measuring = false;
  let stop = false;

  const one = async (): Promise<void> => {
    const spec = options.request(next++);
    const t0 = performance.now();
    let status: number | string;
    let size = 0;
    try {
      const res = await pool.request({ origin: options.origin, path: spec.path, method: spec.method ?? 'GET', headers: spec.headers, body: spec.body });
      const body = await res.body.arrayBuffer();
      status = res.statusCode;
      size = body.byteLength;
    } catch (err) {
      status = `error: ${err instanceof Error ? err.message : String(err)}`;
    }
    const ms = performance.now() - t0;
    if (!measuring || stop) return;
    if (status !== expect) {
      errors += 1;
      firstError ??= String(status);
    }
    if (recorded < capacity) {
      latencies[recorded++] = ms;
      bytes += size;
    }
    if (recorded >= capacity) stop = true;
  };

  const worker = async (): Promise<void> => {
    while (!stop) await one();
  };

  try {
    const workers = Array.from({ length: options.connections }, () => worker());
    if ((options.warmupMs ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, options.warmupMs));
    measuring = true;
    const started = performance.now();
    const clientCpu0 = process.cpuUsage();
    const serverCpu0 = options.serverPid === undefined ? undefined : processCpuMs(options.serverPid);
    let timer: NodeJS.Timeout | undefined;
    const ended = new Promise<void>((resolve) => {
      const poll = () => {
        if (stop || performance.now() - started >= options.durationMs) {
          stop = true;
          resolve();
        } else {
          timer = setTimeout(poll, 10);
        }
      };
      poll();
    });
    await ended;
    const elapsedMs = performance.now() - started;
    const clientCpu = process.cpuUsage(clientCpu0);
    const serverCpu1 = options.serverPid === undefined ? undefined : processCpuMs(options.serverPid);
    clearTimeout(timer);
    await Promise.all(workers);
    const sorted = latencies.slice(0, recorded).sort();
    return {
      requests: recorded,
      errors,
      ...(firstError !== undefined ? { firstError } : {}),
      elapsedMs,
      rps: (recorded * 1000) / elapsedMs,
      meanBytes: recorded > 0 ? bytes / recorded : 0,
      latencies: sorted,
      clientCpuPct: ((clientCpu.user + clientCpu.system) / 1000 / elapsedMs) * 100,
      serverCpuPct: serverCpu0 === undefined || serverCpu1 === undefined ? undefined : ((serverCpu1 - serverCpu0) / elapsedMs) * 100,
      serverCpuUsPerRequest: serverCpu0 === undefined || serverCpu1 === undefined || recorded === 0 ? undefined : ((serverCpu1 - serverCpu0) * 1000) / recorded,
    };
  } finally {
    await pool.close();
  }
}

/** Nearest-rank percentile of ascending values; p in [0, 100]. NaN for no values. */
export function percentile(sorted: Float64Array | readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  count: number;
}

export function summarize(sorted: Float64Array): LatencySummary {
  return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: percentile(sorted, 100), count: sorted.length };
}
