// `npm run chaos`: a crash-and-fault campaign against the operator, with the invariants of docs/design.md
// section 3 checked at the end. Everything runs on loopback and is stopped at the end (also on
// failure): its own control plane, the platform emulator, the operator as a child process.
//
//   npm run chaos -- --duration 240 --kills 60 --resources 30 --fault-rate 0.25 --seed 7
//
// Phases: (1) workload under faults: resources created, deleted and rotated (Secrets deleted and
// edited, keys revoked on the platform), the operator SIGKILLed and restarted (at random moments and
// right after create intents), platform faults on a share of requests, kube-apiserver and etcd
// restarted; (2) faults stop and the operator converges, with a deadline; (3) the invariants.
// Exit status 1 when an invariant fails. Figures: stdout and <out>/report.json.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startEnvironment, type Environment } from './environment.ts';
import { auditKeys, auditLeaks, checkRequests, converge, platformRequests } from './invariants.ts';
import { IntentWatcher, SecretCollector } from './observers.ts';
import { OperatorProcess } from './operator-process.ts';
import { parseOptions, seededRandom, sleep } from './options.ts';
import { PlatformFaults } from './platform-faults.ts';
import { Workload } from './workload.ts';

const options = parseOptions(process.argv.slice(2));
const random = seededRandom(options.seed);
const out = resolve(options.out);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const started = Date.now();
const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s`;
const log = (text: string): void => console.log(`[chaos ${elapsed()}] ${text}`);

const DRIFT_INTERVAL = '3s';
const PENDING_GRACE = '10s';

log(
  `seed ${options.seed}; ${options.resources} resources, ${options.durationS}s of workload, ${options.kills} kills, fault rate ${options.faultRate}, kube faults ${options.kubeFaults ? 'on' : 'off'}`,
);
let env: Environment | undefined;
let operator: OperatorProcess | undefined;
process.once('exit', () => operator?.killNow());

async function campaign(e: Environment): Promise<boolean> {
  const logFile = join(out, 'operator.log');
  const op = new OperatorProcess({
    kubeconfig: e.operatorKubeconfig,
    platformUrl: e.emulator.baseUrl,
    logFile,
    driftInterval: DRIFT_INTERVAL,
    pendingGrace: PENDING_GRACE,
  });
  operator = op;
  const faults = new PlatformFaults(e.emulator);
  const secrets = new SecretCollector(e.kubeConfig, e.core);
  const workload = new Workload(e, options.resources, random);
  const durationMs = options.durationS * 1000;
  const workloadEnds = Date.now() + durationMs;
  let killsInCreateWindow = 0;
  let killsAfterCreate = 0;
  let killing = false;
  const kubeRestarts: string[] = [];

  /** incarnation: the one the kill was planned against (a later one is left alone). */
  const killAndRestart = async (why: 'random' | 'after-create' | 'intent', incarnation = op.starts): Promise<void> => {
    if (killing || !op.running || incarnation !== op.starts || Date.now() > workloadEnds || op.kills >= options.kills) return;
    // Timed kills keep to the pace of the budget, so kills spread over the whole workload.
    const due = options.kills * (1 - (workloadEnds - Date.now()) / durationMs);
    if (why !== 'random' && op.kills > due + 2) return;
    killing = true;
    try {
      await op.kill();
      if (why === 'intent') killsInCreateWindow += 1;
      if (why === 'after-create') killsAfterCreate += 1;
      op.note(`killed (${why})`);
      await sleep(random() * 300);
      await op.start();
    } finally {
      killing = false;
    }
  };

  await op.start();
  await faults.enable(options.faultRate);
  // Intent-timed kills: the window between the create POST and the Secret write.
  const intents = new IntentWatcher(e.kubeConfig, () => {
    const incarnation = op.starts;
    if (random() < 0.25 && op.readyAt !== undefined) setTimeout(() => void killAndRestart('intent', incarnation), random() * 60);
  });
  await workload.createAll();
  log(`created ${workload.live.length} resources; faults on`);

  // Random kills spread over the workload, each after the incarnation has run for a while (its
  // startup is not the interesting part); the timed kills above draw from the same budget.
  const killLoop = (async () => {
    while (Date.now() < workloadEnds && op.kills < options.kills) {
      while (op.readyAt === undefined && Date.now() < workloadEnds) await sleep(50);
      const left = Math.max(1, options.kills - op.kills);
      const perKill = (workloadEnds - Date.now()) / left;
      const uptime = Math.max(300, perKill - op.lastStartupMs) * (0.4 + random() * 1.2);
      await sleep(Math.min(uptime, Math.max(0, workloadEnds - Date.now())));
      await killAndRestart('random');
    }
  })();
  const workLoop = (async () => {
    while (Date.now() < workloadEnds) {
      const created = await workload.step();
      const incarnation = op.starts;
      if (created !== undefined && op.readyAt !== undefined && random() < 0.3)
        setTimeout(() => void killAndRestart('after-create', incarnation), 30 + random() * 400);
      await sleep(100 + random() * 400);
    }
  })();
  const kubeLoop = (async () => {
    if (!options.kubeFaults) return;
    for (const [at, name, kill] of [
      [0.35, 'kube-apiserver', false],
      [0.55, 'etcd', false],
      [0.75, 'kube-apiserver', true],
    ] as const) {
      const wait = started + (workloadEnds - started) * at - Date.now();
      if (wait > 0) await sleep(wait);
      const t0 = Date.now();
      await e.controlPlane.restart(name, { kill });
      const what = `${name} ${kill ? 'SIGKILLed' : 'stopped'} and restarted (back in ${((Date.now() - t0) / 1000).toFixed(1)}s)`;
      kubeRestarts.push(what);
      op.note(what);
      log(what);
    }
  })();
  const progress = setInterval(() => {
    void op.scrapeMetrics();
    log(
      `kills ${op.kills}, crashes ${op.crashes.length}, live ${workload.live.length}, deleted ${workload.deleted.length}, intents ${intents.intents}, secrets seen ${secrets.values.size}`,
    );
  }, 15_000);
  // Crashes the campaign did not cause are restarted (as a Deployment would) and counted.
  const supervisor = setInterval(() => {
    if (!killing && !op.running) void op.ensureRunning();
  }, 1_000);

  await Promise.all([killLoop, workLoop, kubeLoop]);
  clearInterval(progress);
  const injected = await faults.injected();
  await faults.disable();
  intents.stop();
  await op.ensureRunning();
  log(`workload over: ${JSON.stringify(workload.counts)}; ${op.kills} kills; faults off; converging (deadline ${options.convergeS}s)`);

  const convergence = await converge(e, workload.live, workload.deleted, options.convergeS * 1000, log);
  clearInterval(supervisor);
  await secrets.sweep();
  secrets.stop();
  await op.scrapeMetrics();
  const keys = await auditKeys(e, workload.live, workload.deleted);
  const requests = await platformRequests(e);
  await op.stop();
  const leaks = await auditLeaks(e, new Set([...secrets.values, e.adminKey]), logFile, op.expositions);

  const operatorRequests = requests.total - workload.counts.platformRequests - checkRequests.count;
  const c = workload.counts;
  // Rotations: those requested, and the scheduled ones (every other slot rotates each minute).
  const scheduledRotations = Math.ceil(options.resources / 2) * Math.ceil((Date.now() - started) / 60_000);
  const actions = c.creates + c.deletes + c.secretDeletes + c.secretEdits + c.externalRevokes + c.rotations + scheduledRotations;
  // The stated bound: each workload action or kill may cost a handful of calls (create, recovery
  // list and revokes, drift lists after a restart, client retries under faults: 6 each), plus 2
  // per second for the periodic drift lists and operations polls. One resource in a hot loop at
  // 10 requests/s for the run would exceed it on its own.
  const requestBound = 6 * (actions + op.kills) + 2 * Math.round((Date.now() - started) / 1000);
  const faultsTotal = Object.values(injected).reduce((n, v) => n + v, 0);

  const invariants = {
    'every resource settled and Ready with a working key': convergence.problems.length === 0,
    'zero orphaned live keys': keys.orphans.length === 0,
    'every issued key recorded (status.keyId, status.retiringKeys) or revoked': keys.unrecorded.length === 0,
    'deleted resources have their keys revoked': keys.unrevokedAfterDelete.length === 0,
    'zero lost secrets': keys.lostSecrets.length === 0,
    'zero leaked secret strings': leaks.leaked.length === 0,
    'no operator crash': op.crashes.length === 0,
    [`platform requests within bound (${requestBound})`]: operatorRequests <= requestBound,
  };
  const report = {
    seed: options.seed,
    options,
    wallClockSeconds: Math.round((Date.now() - started) / 1000),
    convergenceSeconds: Math.round(convergence.seconds),
    kills: {
      total: op.kills,
      inCreateWindow: killsInCreateWindow,
      afterCreate: killsAfterCreate,
      random: op.kills - killsInCreateWindow - killsAfterCreate,
      operatorStarts: op.starts,
    },
    crashes: op.crashes,
    kubeRestarts,
    workload: { ...c, resourcesAtEnd: workload.live.length, createIntentsSeen: intents.intents },
    platformFaults: { injected, total: faultsTotal, shareOfRequests: Number((faultsTotal / Math.max(1, requests.total)).toFixed(3)) },
    platformRequests: { total: requests.total, byOperator: operatorRequests, bound: requestBound, byStatus: requests.byStatus, byRoute: requests.byRoute },
    keys: {
      attemptKeys: keys.attemptKeys,
      revoked: keys.revokedAttemptKeys,
      inGrace: keys.inGrace,
      orphans: keys.orphans,
      unrecorded: keys.unrecorded,
      unrevokedAfterDelete: keys.unrevokedAfterDelete,
      lostSecrets: keys.lostSecrets,
    },
    leaks: {
      secretsTracked: leaks.secretsKnown,
      leaked: leaks.leaked,
      logLinesSearched: leaks.logLines,
      eventsSearched: leaks.events,
      metricsExpositions: leaks.expositions,
    },
    unsettled: convergence.problems,
    invariants,
  };
  writeFileSync(join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);

  console.log('\n| figure | value |\n|---|---|');
  const rows: [string, string | number][] = [
    ['seed', options.seed],
    ['wall clock (s)', report.wallClockSeconds],
    [
      'operator SIGKILLs survived',
      `${op.kills} (${killsInCreateWindow} timed on a create intent, ${killsAfterCreate} right after a create, ${report.kills.random} random)`,
    ],
    ['operator crashes (unplanned exits)', op.crashes.length],
    ['control plane restarts', kubeRestarts.length === 0 ? 'none' : kubeRestarts.join('; ')],
    [
      'workload',
      `${c.creates} creates, ${c.deletes} deletes, ${c.secretDeletes} Secrets deleted, ${c.secretEdits} Secrets edited, ${c.externalRevokes} keys revoked outside, ${c.rotations} rotations requested`,
    ],
    [
      'platform faults injected',
      `${faultsTotal} (${Object.entries(injected)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')})`,
    ],
    ['platform requests', `${requests.total} (operator ${operatorRequests}, bound ${requestBound}); faulted share ${report.platformFaults.shareOfRequests}`],
    ["attempt keys created / revoked / live in a rotation's grace at the end", `${keys.attemptKeys} / ${keys.revokedAttemptKeys} / ${keys.inGrace}`],
    ['convergence after faults stopped (s)', report.convergenceSeconds],
    ['orphaned live keys', keys.orphans.length],
    ['issued keys live and unrecorded', keys.unrecorded.length],
    ['deleted resources with a live key', keys.unrevokedAfterDelete.length],
    ['lost secrets', keys.lostSecrets.length],
    ['secret values tracked / leaked', `${leaks.secretsKnown} / ${leaks.leaked.length}`],
    ['resources not settled', convergence.problems.length],
  ];
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  console.log('');
  for (const [name, ok] of Object.entries(invariants)) console.log(`${ok ? 'PASS' : 'FAIL'}  ${name}`);
  for (const p of convergence.problems.slice(0, 20)) console.log(`  unsettled ${p.resource}: ${p.problem}`);
  for (const o of [...keys.orphans, ...keys.unrecorded, ...keys.unrevokedAfterDelete, ...keys.lostSecrets, ...leaks.leaked, ...op.crashes].slice(0, 20))
    console.log(`  ${o}`);
  console.log(`\nreport: ${join(out, 'report.json')}; operator log: ${logFile}`);
  return Object.values(invariants).every(Boolean);
}

let ok = false;
try {
  env = await startEnvironment(out);
  log(`control plane ${env.controlPlane.info.server}, platform ${env.emulator.baseUrl}`);
  ok = await campaign(env);
} catch (error) {
  console.error(`chaos: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  operator?.killNow();
  await env?.stop().catch(() => undefined);
}
process.exit(ok ? 0 : 1);
