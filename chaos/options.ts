// The command line of `npm run chaos`, and the seeded random source every random choice draws from
// (kill moments, workload actions, fault picks on our side), so a run can be repeated with --seed.
import { parseArgs } from 'node:util';

export interface ChaosOptions {
  /** Seconds of workload under faults (the convergence phase comes after). */
  durationS: number;
  /** Operator SIGKILLs over the workload. */
  kills: number;
  /** Resource slots kept busy (created, deleted, recreated). */
  resources: number;
  /** Share of platform requests that get a fault (0..1). */
  faultRate: number;
  seed: number;
  /** Restart kube-apiserver and etcd mid-run. */
  kubeFaults: boolean;
  /** Seconds the operator gets, after faults stop, to converge. */
  convergeS: number;
  /** Folder for logs and the JSON report. */
  out: string;
}

export function parseOptions(argv: string[]): ChaosOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string', default: '300' },
      kills: { type: 'string', default: '55' },
      resources: { type: 'string', default: '30' },
      'fault-rate': { type: 'string', default: '0.25' },
      seed: { type: 'string', default: String(Date.now() % 1_000_000) },
      'no-kube-faults': { type: 'boolean', default: false },
      converge: { type: 'string', default: '120' },
      out: { type: 'string', default: '.cache/chaos' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(`npm run chaos -- [--duration 300] [--kills 55] [--resources 30] [--fault-rate 0.25] [--seed n]
                   [--converge 120] [--no-kube-faults] [--out .cache/chaos]`);
    process.exit(0);
  }
  const num = (name: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} must be a number in ${min}..${max}, got ${text}`);
    return n;
  };
  return {
    durationS: num('duration', values.duration, 10, 3_600),
    kills: Math.round(num('kills', values.kills, 0, 10_000)),
    resources: Math.round(num('resources', values.resources, 1, 500)),
    faultRate: num('fault-rate', values['fault-rate'], 0, 0.9),
    seed: Math.round(num('seed', values.seed, 0, 2 ** 31)),
    kubeFaults: !values['no-kube-faults'],
    convergeS: num('converge', values.converge, 10, 3_600),
    out: values.out,
  };
}

/** mulberry32: small, fast, good enough to make a run repeatable from its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
