// Emulator benchmark (issue 7, part 5):
// 1. authenticated requests/s of get-operation and list-operations on a project holding 100,000
//    operations, each against a bare node:http server returning a fixed JSON body of the same size,
//    measured in the same run (rounds interleave emulator and bare);
// 2. list-operations latency (one request at a time) with 10,000, 100,000 and 1,000,000 operations
//    in the store: the first page and random deep pages reached by cursor (keyset paging).
//
// The emulator runs as its own process (`src/emulator/main.ts` on a SQLite file, control-plane
// activity off, logging silent), the bare server too (`bench/bare-server.ts`); this process only
// generates load, so on a 2-core machine server and load generator each get a core. Operations
// are seeded straight into the store file with one INSERT … WITH RECURSIVE while the emulator is
// stopped (the emulator offers no seeding hook for operations: see the report).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { isoMicros } from '../src/emulator/clock.ts';
import { runLoad, summarize, type LoadResult, type RequestSpec } from './load.ts';
import type { BenchOptions } from './options.ts';

const ROOT = new URL('..', import.meta.url).pathname;
const OPS_FOR_THROUGHPUT = 100_000;
const STORE_SIZES = [10_000, 100_000, 1_000_000];

export interface Child {
  proc: ChildProcess;
  firstLine: Record<string, unknown>;
  stop(): Promise<void>;
}

/** A node child process (args after node, run in the repository) and the JSON of its first stdout line. */
export async function spawnChild(args: string[]): Promise<Child> {
  const proc = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const firstLine = await new Promise<Record<string, unknown>>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const nl = buffered.indexOf('\n');
      if (nl < 0) return;
      proc.stdout?.off('data', onData);
      try {
        resolve(JSON.parse(buffered.slice(0, nl)) as Record<string, unknown>);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    };
    proc.stdout?.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code} before printing its first line`)));
  });
  proc.stdout?.resume();
  return {
    proc,
    firstLine,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

interface BootstrapRecord {
  baseUrl: string;
  users: { name: string; personalKey?: string }[];
  projects: { id: string; name: string }[];
}

const startEmulatorProcess = (opts: BenchOptions, db: string) =>
  spawnChild([
    ...(opts.profileDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${opts.profileDir}`] : []),
    opts.emulatorMain ?? 'src/emulator/main.ts',
    '--port',
    '0',
    '--db',
    db,
    '--no-control-plane',
    '--log-level',
    'silent',
  ]);

/** Operation i (1-based) of the seeded project: a UUID-shaped id and a creation time 1 ms after i - 1. */
const opId = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;

/** Adds operations from+1..to to the project, straight into the store file (emulator stopped). */
function seedOperations(db: string, projectId: string, from: number, to: number, t0Us: number): void {
  const raw = new DatabaseSync(db);
  try {
    raw.exec('PRAGMA synchronous = OFF');
    const branch = raw.prepare('SELECT id FROM branches WHERE project_id = ? AND is_default = 1').get(projectId) as { id: string };
    const endpoint = raw.prepare('SELECT id FROM endpoints WHERE project_id = ?').get(projectId) as { id: string } | undefined;
    raw
      .prepare(
        `INSERT INTO operations (id, project_id, branch_id, endpoint_id, action, status, failures_count, created_us, updated_us, finished_us)
      WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i < ?)
      SELECT printf('00000000-0000-4000-8000-%012x', i), ?, ?, CASE WHEN i % 4 < 2 THEN NULL ELSE ? END,
        CASE i % 4 WHEN 0 THEN 'create_branch' WHEN 1 THEN 'create_timeline' WHEN 2 THEN 'start_compute' ELSE 'check_availability' END,
        'finished', 0, ? + i * 1000, ? + i * 1000 + 700000, ? + i * 1000 + 700000 FROM n`,
      )
      .run(from + 1, to, projectId, branch.id, endpoint?.id ?? null, t0Us, t0Us, t0Us);
    raw.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    raw.close();
  }
}

const randomInt = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));

/** A request shape; `origin`/`pid` name another emulator process than the main one (diagnostic rows). */
interface Case {
  name: string;
  request: (i: number) => RequestSpec;
  origin?: string;
  pid?: number;
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
const ms = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));
const us = (n: number | undefined) => (n === undefined ? '?' : fmt(n));
const pct = (n: number | undefined) => (n === undefined ? '?' : `${Math.round(n)}%`);

function assertClean(label: string, r: LoadResult): void {
  if (r.errors > 0) throw new Error(`${label}: ${r.errors} of ${r.requests} requests failed (first: ${r.firstError ?? '?'})`);
}

export async function emulatorBenchmark(opts: BenchOptions): Promise<string> {
  const log = opts.log;
  const largest = opts.largestStore ?? 1_000_000;
  const sizes = STORE_SIZES.filter((s) => s <= largest);
  if (!sizes.includes(largest)) sizes.push(largest);
  const throughputAt = Math.min(OPS_FOR_THROUGHPUT, largest);

  const dir = mkdtempSync(join(tmpdir(), 'nko-bench-emulator-'));
  const db = join(dir, 'emulator.db');
  const children: Child[] = [];
  try {
    // First start: applies the default seed and prints the personal keys (only on a fresh store).
    const first = await startEmulatorProcess(opts, db);
    const boot = first.firstLine as unknown as BootstrapRecord;
    await first.stop();
    const key = boot.users.find((u) => u.name === 'alice')?.personalKey;
    const project = boot.projects.find((p) => p.name === 'demo-api')?.id;
    if (key === undefined || project === undefined) throw new Error('bootstrap record without alice key or demo-api project');
    const auth = { authorization: `Bearer ${key}`, accept: 'application/json' };
    const base = `/api/v2/projects/${project}/operations`;
    const t0Us = Date.now() * 1000 - (largest + 60_000) * 1000;

    const getOp = (n: number): Case => ({ name: 'get-operation', request: () => ({ path: `${base}/${opId(randomInt(1, n))}`, headers: auth }) });
    const listFirst: Case = { name: 'list-operations, first page', request: () => ({ path: base, headers: auth }) };
    const listDeep = (n: number): Case => ({
      name: 'list-operations, random deep page',
      request: () => ({ path: `${base}?cursor=${encodeURIComponent(isoMicros(t0Us + randomInt(11, n) * 1000))}`, headers: auth }),
    });

    let seeded = 0;
    const seedTo = (n: number) => {
      const started = performance.now();
      seedOperations(db, project, seeded, n, t0Us);
      seeded = n;
      log(`seeded ${fmt(n)} operations (+${fmt(performance.now() - started)} ms), store file ${fmt(statSync(db).size / 2 ** 20, 1)} MiB`);
    };

    const throughputRows: string[] = [];
    const latencyRows: string[] = [];
    let bodySizes = '';

    for (const size of sizes) {
      seedTo(size);
      const emu = await startEmulatorProcess(opts, db);
      children.push(emu);
      const origin = String((emu.firstLine as unknown as BootstrapRecord).baseUrl).replace(/\/api\/v2$/, '');
      const emuPid = emu.proc.pid;

      // Sanity: the pages are full and the ids resolve, so the figures measure real answers.
      const check = async (path: string) => {
        const res = await fetch(`${origin}${path}`, { headers: auth });
        const text = await res.text();
        if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${text.slice(0, 200)}`);
        return text;
      };
      const firstPage = await check(base);
      const deepPage = await check(listDeep(size).request(0).path);
      const oneOp = await check(getOp(size).request(0).path);
      for (const [label, text] of [
        ['first page', firstPage],
        ['deep page', deepPage],
      ] as const) {
        const n = (JSON.parse(text) as { operations: unknown[] }).operations.length;
        if (n !== 10) throw new Error(`${label}: expected 10 operations, got ${n}`);
      }

      // Warm-up: JIT and SQLite page cache.
      await runLoad({
        origin,
        connections: opts.connections,
        durationMs: 1000,
        maxRequests: 1e6,
        request: (i) => [getOp(size), listFirst, listDeep(size)][i % 3]?.request(i) ?? { path: base },
      });

      if (size === throughputAt) {
        log(
          `throughput at ${fmt(size)} operations: ${opts.rounds} round(s) × 4 cases × (emulator, bare), ${opts.durationMs / 1000} s each, ${opts.connections} connections`,
        );
        const bodiesFile = join(dir, 'bodies.json');
        writeFileSync(bodiesFile, JSON.stringify({ get: oneOp, list: firstPage }));
        bodySizes = `get-operation ${fmt(Buffer.byteLength(oneOp))} B, list-operations page (10 operations) ${fmt(Buffer.byteLength(firstPage))} B`;
        const bare = await spawnChild(['bench/bare-server.ts', bodiesFile]);
        children.push(bare);
        const bareOrigin = String(bare.firstLine.origin);
        // Diagnostic row: the same get-operation against an emulator on the default `:memory:` store
        // (what the tests use; default seed, no bulk operations), to isolate the cost of the file store.
        const mem = await startEmulatorProcess(opts, ':memory:');
        children.push(mem);
        const memBoot = mem.firstLine as unknown as BootstrapRecord;
        const memKey = memBoot.users.find((u) => u.name === 'alice')?.personalKey ?? '';
        const memBase = `/api/v2/projects/${memBoot.projects.find((p) => p.name === 'demo-api')?.id ?? ''}/operations`;
        const memOrigin = memBoot.baseUrl.replace(/\/api\/v2$/, '');
        const memAuth = { authorization: `Bearer ${memKey}`, accept: 'application/json' };
        const memOps = ((await (await fetch(`${memOrigin}${memBase}`, { headers: memAuth })).json()) as { operations: { id: string }[] }).operations.map(
          (o) => o.id,
        );
        if (memOps.length === 0) throw new Error('the :memory: emulator has no seed operations');
        const cases: Case[] = [
          getOp(size),
          listFirst,
          listDeep(size),
          {
            name: 'get-operation, `:memory:` store (diagnostic)',
            origin: memOrigin,
            pid: mem.proc.pid,
            request: (i) => ({ path: `${memBase}/${memOps[i % memOps.length] ?? ''}`, headers: memAuth }),
          },
        ];
        const results = new Map<string, { emu: LoadResult[]; bare: LoadResult[] }>(cases.map((c) => [c.name, { emu: [], bare: [] }]));
        for (let round = 1; round <= opts.rounds; round++) {
          for (const c of cases) {
            const entry = results.get(c.name) ?? { emu: [], bare: [] };
            for (const target of ['emu', 'bare'] as const) {
              const r = await runLoad({
                origin: target === 'emu' ? (c.origin ?? origin) : bareOrigin,
                connections: opts.connections,
                durationMs: opts.durationMs,
                maxRequests: opts.maxRequests,
                warmupMs: 500,
                request: c.request,
                serverPid: target === 'emu' ? (c.pid ?? emuPid) : bare.proc.pid,
              });
              assertClean(`${target} ${c.name}`, r);
              entry[target].push(r);
              log(
                `  round ${round} ${c.name} ${target}: ${fmt(r.rps)} req/s, p50 ${ms(summarize(r.latencies).p50)} ms, p99 ${ms(summarize(r.latencies).p99)} ms, server CPU ${pct(r.serverCpuPct)} (${us(r.serverCpuUsPerRequest)} µs/request), client CPU ${pct(r.clientCpuPct)}`,
              );
            }
          }
        }
        await bare.stop();
        await mem.stop();
        const best = (rs: LoadResult[]) => rs.reduce((a, b) => (b.rps > a.rps ? b : a));
        // CPU per request: the lowest round (least disturbed by other work).
        const cpu = (rs: LoadResult[]) => Math.min(...rs.map((r) => r.serverCpuUsPerRequest ?? Number.POSITIVE_INFINITY));
        for (const c of cases) {
          const entry = results.get(c.name);
          if (entry === undefined) continue;
          const e = best(entry.emu);
          const b = best(entry.bare);
          const es = summarize(e.latencies);
          const bs = summarize(b.latencies);
          throughputRows.push(
            `| ${c.name} | **${fmt(e.rps)}** (${entry.emu.map((r) => fmt(r.rps)).join(' / ')}) | ${fmt(b.rps)} (${entry.bare.map((r) => fmt(r.rps)).join(' / ')}) | **${(e.rps / b.rps).toFixed(2)}** | ${ms(es.p50)} / ${ms(es.p99)} | ${ms(bs.p50)} / ${ms(bs.p99)} | ${us(cpu(entry.emu))} | ${us(cpu(entry.bare))} | ${(cpu(entry.emu) / cpu(entry.bare)).toFixed(1)} | ${pct(e.serverCpuPct)} / ${pct(e.clientCpuPct)} | ${pct(b.serverCpuPct)} / ${pct(b.clientCpuPct)} | ${fmt(e.meanBytes)} |`,
          );
        }
      }

      log(`latency at ${fmt(size)} operations: ${opts.rounds} round(s), one request at a time`);
      for (const c of [listFirst, listDeep(size)]) {
        const runs: LoadResult[] = [];
        for (let round = 1; round <= opts.rounds; round++) {
          const r = await runLoad({
            origin,
            connections: 1,
            durationMs: opts.latencyDurationMs,
            maxRequests: opts.latencyMaxRequests,
            warmupMs: 200,
            request: c.request,
            serverPid: emuPid,
          });
          assertClean(`latency ${c.name}`, r);
          runs.push(r);
          const s = summarize(r.latencies);
          log(`  round ${round} ${c.name}: p50 ${ms(s.p50)} ms, p99 ${ms(s.p99)} ms (${fmt(r.requests)} requests)`);
        }
        const best = runs.reduce((a, b) => (summarize(b.latencies).p99 < summarize(a.latencies).p99 ? b : a));
        const s = summarize(best.latencies);
        latencyRows.push(
          `| ${fmt(size)} | ${c.name} | **${ms(s.p50)}** | **${ms(s.p99)}** | ${ms(s.max)} | ${fmt(s.count)} | ${runs.map((r) => `${ms(summarize(r.latencies).p50)}/${ms(summarize(r.latencies).p99)}`).join(' · ')} |`,
        );
      }
      await emu.stop();
    }

    return [
      `Emulator (\`src/emulator/main.ts\`, SQLite file store in ${tmpdir()}, \`--no-control-plane --log-level silent\`) and bare server (\`bench/bare-server.ts\`) each run as their own process; the load generator (\`bench/load.ts\`: undici Pool, one keep-alive connection per requester, loopback) runs in \`bench/run.ts\`. Every request carries \`Authorization: Bearer <alice's personal key>\`. Seeded operations are \`finished\`, 1 ms apart, in the project \`demo-api\`; get-operation asks for a random one; a deep page uses the \`cursor\` of a random operation (uniform over the whole history). Response sizes: ${bodySizes}.`,
      '',
      `#### Throughput: ${fmt(throughputAt)} operations in the project, ${opts.connections} connections, ${opts.durationMs / 1000} s per measurement (max ${fmt(opts.maxRequests)} requests)`,
      '',
      `Best of ${opts.rounds} interleaved round(s) (all rounds in parentheses). The bare server answers the same bytes as the emulator's get-operation / first-page response (no routing, auth, store or JSON encoding). Server CPU µs/req is the server process's CPU time (utime + stime from /proc) per completed request, lowest round: unlike req/s it is hardly moved by other work on the machine. CPU % is percent of one core over the measured period; a server below 100 % while its load generator is also below 100 % was waiting for CPU held by other processes.`,
      '',
      '| request | emulator req/s | bare node:http req/s | emulator / bare | emulator p50 / p99 ms | bare p50 / p99 ms | emulator server CPU µs/req | bare server CPU µs/req | CPU/req emulator ÷ bare | emulator run: CPU server / client | bare run: CPU server / client | body B |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...throughputRows,
      '',
      `#### list-operations latency by store size (one request at a time, ${opts.latencyDurationMs / 1000} s or ${fmt(opts.latencyMaxRequests)} requests per round, page = 10 operations)`,
      '',
      `Best of ${opts.rounds} round(s) by p99 (all rounds as p50/p99 ms).`,
      '',
      '| operations in the project | page | p50 ms | p99 ms | max ms | requests | rounds p50/p99 |',
      '|---|---|---|---|---|---|---|',
      ...latencyRows,
    ].join('\n');
  } finally {
    for (const c of children) await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
