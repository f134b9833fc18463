// Operator (`--only operator`): [--keys 1000] [--wave-per-org 1000] [--organizations 10] [--latency 100] [--idle 300] [--soak 600] [--operations 180]
//   [--memory-deadline 900] [--convergence-deadline 240] [--drift-interval 5m] [--workers N] [--heap-snapshot DIR]
//   [--node-flags='--max-semi-space-size=4 …' (the operator's node flags instead of the image's: a candidate, with --no-write)]
//   [--malloc glibc (glibc's malloc instead of the image's jemalloc, with --no-write)] (bench/operator.ts).
// `npm run bench [-- --only emulator] [--duration 10] [--rounds 3] [--connections 16] [--largest-store 1000000]
//   [--profile DIR (servers under test run with --cpu-prof)] [--emulator-main FILE (a patched copy)] [--no-write]`
// Idle with churn (`--only idle-churn`): [--idle-churn-minutes 30] (bench/idle-churn.ts); the cost of an operations change: `--only project-index`.
// Inventory on the whole operator (`--only inventory`): [--inventory-managed 10000] [--inventory-others 1000] [--inventory-namespaces 10]
//   [--inventory-drift-interval 1m] [--inventory-intervals 3] [--inventory-deadline 1800] (bench/inventory-operator.ts).
// Fairness between namespaces (`--only fairness`): [--fair-flood 1000] [--fair-floods 10] [--fair-flood-each 200] [--fair-drift-interval 10s]
//   [--fair-scenarios 0,1,2 (a subset: diagnosis, with --no-write)] [--fair-stages (the steady keys' stages, from the operator's debug log)] (bench/fairness.ts).
// Two clusters on one organization (`--only clusters`): [--clusters-keys 500] (keys in each cluster; bench/clusters.ts).
// Runs the selected benchmarks, prints each one's figures and writes them to docs/benchmarks.md.
// Each benchmark owns one marked section (<!-- bench:NAME --> … <!-- /bench:NAME -->), replaced in
// place on every run; the rest of the file (other benchmarks' sections, prose) is left as it is.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { emulatorBenchmark } from './emulator.ts';
import { operatorBenchmark } from './operator.ts';
import { projectIndexBenchmark } from './project-index.ts';
import { idleChurnBenchmark } from './idle-churn.ts';
import { fairnessBenchmark } from './fairness.ts';
import { inventoryBenchmark } from './inventory-operator.ts';
import { clustersBenchmark } from './clusters.ts';
import type { BenchOptions } from './options.ts';
import { describeMachine, machineInfo } from './machine.ts';

interface Benchmark {
  name: string;
  title: string;
  run(opts: BenchOptions): Promise<string>;
}

const BENCHMARKS: Benchmark[] = [
  { name: 'emulator', title: 'Platform API emulator', run: emulatorBenchmark },
  { name: 'operator', title: 'Operator', run: operatorBenchmark },
  { name: 'project-index', title: 'Operator: the cost of an operations change (issue 30)', run: (opts) => projectIndexBenchmark(opts) },
  {
    name: 'idle-churn',
    title: 'Operator: idle with Secret churn in another namespace (issue 30)',
    run: (opts) => idleChurnBenchmark(opts, opts.idleChurnMinutes),
  },
  { name: 'fairness', title: "Operator: one team's flood and another team's keys (issue 25)", run: (opts) => fairnessBenchmark(opts, opts.fairness) },
  { name: 'inventory', title: 'Inventory on the whole operator: 10,000 managed keys plus 1,000 others (issue 28)', run: inventoryBenchmark },
  { name: 'clusters', title: 'Two clusters on one organization, half its rate each (issue 42)', run: (opts) => clustersBenchmark(opts, opts.clustersKeys) },
];

const ROOT = new URL('..', import.meta.url).pathname;
const DOC = `${ROOT}docs/benchmarks.md`;
const DOC_HEADER = `# Benchmarks

Produced by \`npm run bench\` (not part of \`npm test\`); \`npm run bench -- --only <name>\` runs one
benchmark and rewrites only its section. Each section names the machine, the Node version and the
commit it was measured on. Figures from a small shared machine are noisy: each measurement is
repeated and the best round is reported, with every round shown next to it.
`;

function mallocOption(value: string): 'glibc' {
  if (value !== 'glibc') throw new Error(`--malloc: glibc or nothing (the image's), not ${value}`);
  return value;
}

function positive(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${value}`);
  return n;
}

/** Replaces the benchmark's marked section of the document, or appends it. */
export function writeSection(doc: string, name: string, content: string): string {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  const block = `${start}\n${content.trim()}\n${end}`;
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  if (i >= 0 && j > i) return `${doc.slice(0, i)}${block}${doc.slice(j + end.length)}`;
  return `${doc.trimEnd()}\n\n${block}\n`;
}

const { values } = parseArgs({
  options: {
    only: { type: 'string', multiple: true },
    duration: { type: 'string', default: '10' },
    'max-requests': { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '16' },
    'latency-duration': { type: 'string', default: '3' },
    'latency-max-requests': { type: 'string', default: '5000' },
    'largest-store': { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    profile: { type: 'string' },
    'emulator-main': { type: 'string' },
    // operator benchmark
    keys: { type: 'string', default: '1000' },
    'wave-per-org': { type: 'string', default: '1000' },
    latency: { type: 'string', default: '100' },
    operations: { type: 'string', default: '180' },
    organizations: { type: 'string', default: '10' },
    // The sizes: 1,000 keys at once, 10 organizations × 1,000 keys, 100 ms of platform latency, a 10-minute soak; the operator's default
    // drift interval, and an idle phase long enough to hold one drift pass.
    idle: { type: 'string', default: '300' },
    soak: { type: 'string', default: '600' },
    'memory-deadline': { type: 'string', default: '900' },
    'convergence-deadline': { type: 'string', default: '240' },
    'drift-interval': { type: 'string', default: '5m' },
    workers: { type: 'string' },
    'node-flags': { type: 'string' },
    malloc: { type: 'string' },
    'heap-snapshot': { type: 'string' },
    // idle-churn benchmark
    'idle-churn-minutes': { type: 'string', default: '30' },
    // fairness benchmark
    'fair-flood': { type: 'string', default: '1000' },
    'fair-floods': { type: 'string', default: '10' },
    'fair-flood-each': { type: 'string', default: '200' },
    'fair-drift-interval': { type: 'string', default: '10s' },
    // inventory benchmark
    'inventory-managed': { type: 'string', default: '10000' },
    'inventory-others': { type: 'string', default: '1000' },
    'inventory-namespaces': { type: 'string', default: '10' },
    'inventory-drift-interval': { type: 'string', default: '1m' },
    'inventory-intervals': { type: 'string', default: '3' },
    'inventory-deadline': { type: 'string', default: '1800' },
    'fair-scenarios': { type: 'string' },
    // clusters benchmark
    'clusters-keys': { type: 'string', default: '500' },
    'fair-stages': { type: 'boolean', default: false },
  },
  strict: true,
});

const selected = values.only === undefined ? BENCHMARKS : BENCHMARKS.filter((b) => values.only?.includes(b.name));
const unknown = (values.only ?? []).filter((n) => !BENCHMARKS.some((b) => b.name === n));
if (unknown.length > 0) throw new Error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${BENCHMARKS.map((b) => b.name).join(', ')}`);

const options: BenchOptions = {
  durationMs: positive('duration', values.duration) * 1000,
  maxRequests: Math.floor(positive('max-requests', values['max-requests'])),
  rounds: Math.floor(positive('rounds', values.rounds)),
  connections: Math.floor(positive('connections', values.connections)),
  latencyDurationMs: positive('latency-duration', values['latency-duration']) * 1000,
  latencyMaxRequests: Math.floor(positive('latency-max-requests', values['latency-max-requests'])),
  ...(values['largest-store'] !== undefined ? { largestStore: Math.floor(positive('largest-store', values['largest-store'])) } : {}),
  ...(values.profile !== undefined ? { profileDir: resolve(values.profile) } : {}),
  ...(values['emulator-main'] !== undefined ? { emulatorMain: resolve(values['emulator-main']) } : {}),
  idleChurnMinutes: positive('idle-churn-minutes', values['idle-churn-minutes']),
  clustersKeys: Math.floor(positive('clusters-keys', values['clusters-keys'])),
  fairness: {
    flood: Math.floor(positive('fair-flood', values['fair-flood'])),
    floods: Math.floor(positive('fair-floods', values['fair-floods'])),
    floodEach: Math.floor(positive('fair-flood-each', values['fair-flood-each'])),
    driftInterval: values['fair-drift-interval'] ?? '10s',
    ...(values['fair-scenarios'] !== undefined ? { scenarios: values['fair-scenarios'].split(',').map((n) => Number(n)) } : {}),
    stages: values['fair-stages'] === true,
  },
  inventory: {
    managed: Math.floor(positive('inventory-managed', values['inventory-managed'])),
    others: Math.floor(positive('inventory-others', values['inventory-others'])),
    namespaces: Math.floor(positive('inventory-namespaces', values['inventory-namespaces'])),
    driftInterval: values['inventory-drift-interval'] ?? '1m',
    intervals: Math.floor(positive('inventory-intervals', values['inventory-intervals'])),
    deadlineSeconds: positive('inventory-deadline', values['inventory-deadline']),
  },
  operator: {
    keys: Math.floor(positive('keys', values.keys)),
    wavePerOrg: Math.floor(positive('wave-per-org', values['wave-per-org'])),
    latencyMs: Math.floor(positive('latency', values.latency)),
    operationsSeconds: positive('operations', values.operations),
    organizations: Math.floor(positive('organizations', values.organizations)),
    idleSeconds: positive('idle', values.idle),
    soakSeconds: positive('soak', values.soak),
    memoryDeadlineSeconds: positive('memory-deadline', values['memory-deadline']),
    convergenceDeadlineSeconds: positive('convergence-deadline', values['convergence-deadline']),
    driftInterval: values['drift-interval'] ?? '30s',
    ...(values.workers !== undefined ? { workers: Math.floor(positive('workers', values.workers)) } : {}),
    ...(values['heap-snapshot'] !== undefined ? { heapSnapshotDir: resolve(values['heap-snapshot']) } : {}),
    ...(values['node-flags'] !== undefined ? { nodeFlags: values['node-flags'].split(/\s+/).filter((f) => f !== '') } : {}),
    ...(values.malloc !== undefined ? { malloc: mallocOption(values.malloc) } : {}),
  },
  log: (line) => console.error(`[bench] ${line}`),
};

for (const bench of selected) {
  const machine = machineInfo(ROOT);
  const started = new Date();
  options.log(`${bench.name}: ${describeMachine(machine)}`);
  const body = await bench.run(options);
  const section = [
    `## ${bench.title} (\`--only ${bench.name}\`)`,
    '',
    `Measured ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(machine)}.`,
    '',
    body,
  ].join('\n');
  console.log(`\n${section}\n`);
  if (!values['no-write']) {
    const doc = existsSync(DOC) ? readFileSync(DOC, 'utf8') : DOC_HEADER;
    writeFileSync(DOC, writeSection(doc, bench.name, section));
    options.log(`wrote section bench:${bench.name} of docs/benchmarks.md`);
  }
}
