// The command line of `npm run hostile`. Every random choice of a run (which tenant acts, which
// action, which field, which value, when) draws from one seeded source (chaos/options.ts), so a run
// is repeated with its --seed (timings on a busy machine still differ a little).
import { parseArgs } from 'node:util';

export interface HostileOptions {
  seed: number;
  /** Seconds of attacks and victim workload (the settle phase and the audit come after). */
  durationS: number;
  /** Hostile tenant namespaces holding platform credentials of their own (spec.credentialsSecretRef). */
  tenants: number;
  /** Hostile tenant namespaces holding no platform key, served by ClusterKeyIssuers (spec.issuerRef). */
  issuerTenants: number;
  /** Victim namespaces (of the same organization). */
  victimNamespaces: number;
  /** Victim resources kept alive per victim namespace. */
  victimsPerNamespace: number;
  /** Planned operator restarts (a rollout's SIGTERM and a new incarnation), spread evenly over the attacks. */
  restarts: number;
  /** The memory limit of the operator's container (the Helm chart's resources.limits.memory), MiB. */
  memoryLimitMiB: number;
  /** Enforce the limit with a memory cgroup (root only); off: RSS sampled and compared only. */
  enforce: boolean;
  /** The operator's --workers: by default its own default (16), which the chart keeps unless told otherwise. */
  workers: number;
  /** Seconds the operator gets after the attacks to settle before the final audit. */
  settleS: number;
  /** Playbooks not run (attacker.ts names; to tell what a class costs the victims by a run without it). */
  skip: string[];
  out: string;
}

export function parseHostileOptions(argv: string[]): HostileOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      seed: { type: 'string', default: String(Date.now() % 1_000_000) },
      duration: { type: 'string', default: '300' },
      tenants: { type: 'string', default: '2' },
      'issuer-tenants': { type: 'string', default: '2' },
      'victim-namespaces': { type: 'string', default: '2' },
      victims: { type: 'string', default: '4' },
      restarts: { type: 'string', default: '5' },
      'memory-limit': { type: 'string', default: '256' },
      'no-enforce': { type: 'boolean', default: false },
      workers: { type: 'string', default: '16' },
      settle: { type: 'string', default: '90' },
      skip: { type: 'string', default: '' },
      out: { type: 'string', default: '.cache/hostile' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(`npm run hostile -- [--seed n] [--duration 300] [--tenants 2] [--issuer-tenants 2] [--victim-namespaces 2] [--victims 4]
                     [--restarts 5] [--memory-limit 256] [--no-enforce] [--workers 16] [--settle 90] [--skip playbook,...] [--out .cache/hostile]`);
    process.exit(0);
  }
  const num = (name: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name} must be a number in ${min}..${max}, got ${text}`);
    return n;
  };
  const tenants = Math.round(num('tenants', values.tenants, 0, 10));
  const issuerTenants = Math.round(num('issuer-tenants', values['issuer-tenants'], 0, 10));
  if (tenants + issuerTenants === 0) throw new Error('--tenants and --issuer-tenants: at least one tenant');
  return {
    seed: Math.round(num('seed', values.seed, 0, 2 ** 31)),
    durationS: num('duration', values.duration, 10, 7_200),
    tenants,
    issuerTenants,
    victimNamespaces: Math.round(num('victim-namespaces', values['victim-namespaces'], 1, 10)),
    victimsPerNamespace: Math.round(num('victims', values.victims, 1, 50)),
    restarts: Math.round(num('restarts', values.restarts, 0, 100)),
    memoryLimitMiB: num('memory-limit', values['memory-limit'], 64, 16_384),
    enforce: !values['no-enforce'],
    workers: Math.round(num('workers', values.workers, 1, 64)),
    settleS: num('settle', values.settle, 10, 3_600),
    skip: values.skip
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== ''),
    out: values.out,
  };
}
