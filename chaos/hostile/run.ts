// `npm run hostile`: a seeded, randomized hostile-tenant campaign against the operator (issue 24:
// no tenant can crash the operator or make it lose a key). Beside `npm run chaos`, on the same
// environment (its own control plane, the emulator, the operator's RBAC), everything on loopback
// and stopped at the end, also on failure.
//
//   npm run hostile -- --seed 7 --duration 1800
//
// Phases: (0) the victim teams create their keys, the operator alone with them (the baseline);
// (1) the tenants attack (attacker.ts) while the victims create, rotate and delete (victims.ts),
// the operator is restarted as a rollout would (--restarts, evenly spread), the invariants checked
// every 3 s (audit.ts); (2) the tenants put their credentials right and
// delete everything, the victims too, and the operator settles; (3) the final audit. Exit status
// 1 on any violation, each reported with the actions that led to it. Figures: stdout and
// <out>/report.json.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startEnvironment, type Environment } from '../environment.ts';
import { seededRandom, sleep } from '../options.ts';
import { Attacker } from './attacker.ts';
import { Auditor, INVARIANTS, UNRECORDED_GRACE_S } from './audit.ts';
import { castRoles } from './cluster.ts';
import { memoryCage, type MemoryCage } from './memory.ts';
import { Disruptions, LEASE_TAKEOVER_MS, type Operation } from './disruptions.ts';
import { CagedOperator, mib } from './operator.ts';
import { parseHostileOptions } from './options.ts';
import { PlatformTap } from './platform-tap.ts';
import { percentile, Victims, VICTIM_BOUNDS, type Problem } from './victims.ts';
import { Journal, ResourceWatch } from './world.ts';

const options = parseHostileOptions(process.argv.slice(2));
const random = seededRandom(options.seed);
const out = resolve(options.out);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const started = Date.now();
const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s`;
const log = (text: string): void => console.log(`[hostile ${elapsed()}] ${text}`);
const limitBytes = options.memoryLimitMiB * 1024 * 1024;

let env: Environment | undefined;
let operator: CagedOperator | undefined;
let cage: MemoryCage | undefined;
let tap: PlatformTap | undefined;
process.once('exit', () => {
  operator?.killNow();
  cage?.remove();
});

const stats = (values: number[]): { n: number; p50S: number; p99S: number; maxS: number } => ({
  n: values.length,
  p50S: Number((percentile(values, 0.5) / 1000).toFixed(2)),
  p99S: Number((percentile(values, 0.99) / 1000).toFixed(2)),
  maxS: Number((Math.max(0, ...values) / 1000).toFixed(2)),
});

async function campaign(e: Environment): Promise<boolean> {
  cage = memoryCage(limitBytes, options.enforce);
  log(
    `seed ${options.seed}; ${options.tenants} tenant(s) with namespace credentials, ${options.issuerTenants} through issuers, ${options.victimNamespaces} victim namespace(s) x ${options.victimsPerNamespace}; ${options.durationS}s of attacks, ${options.restarts} operator restart(s), --workers=${options.workers}; memory limit ${options.memoryLimitMiB} MiB: ${cage.how}`,
  );
  const cast = await castRoles(e, options.tenants, options.victimNamespaces, options.issuerTenants);
  const journal = new Journal(started);
  const world = new ResourceWatch(e.kubeConfig, e.objects);
  await world.start();
  // The operator talks to the platform through the tap, which notes every create it sends.
  tap = await PlatformTap.start(e.emulator.baseUrl);
  const platformTap = tap;
  const disruptions = new Disruptions(e);
  const op = new CagedOperator({ cage, kubeconfig: e.operatorKubeconfig, platformUrl: platformTap.baseUrl, out, workers: options.workers });
  operator = op;
  await op.build();
  await op.start();
  for (let i = 0; op.readyAt === undefined; i += 1) {
    if (i > 600) throw new Error('the operator did not start in 60 s');
    await sleep(100);
  }
  log(`operator ready (${op.nodeFlags.join(' ')}), RSS ${op.rssMiB()} MiB`);

  const victims = new Victims(e, cast, world, journal, random, options.victimsPerNamespace, disruptions);
  await victims.start();
  const auditor = new Auditor(e, cast, world, journal, op, victims, limitBytes, platformTap);

  // (0) The baseline: every victim slot created with the operator to itself.
  const calmStart = Date.now();
  for (let i = 0; i < cast.victimNamespaces.length * options.victimsPerNamespace * 3; i += 1) await victims.step();
  while (victims.latencies.ready.length < victims.counts.creates && Date.now() - calmStart < 30_000) await sleep(200);
  const baseline = stats(victims.latencies.ready);
  log(`baseline: ${baseline.n} victim keys Ready, apply -> Ready p50 ${baseline.p50S}s, max ${baseline.maxS}s`);

  // (1) The attacks.
  const attacksEnd = Date.now() + options.durationS * 1000;
  const over = (): boolean => Date.now() > attacksEnd;
  await victims.refreshIntel();
  const attackers = cast.tenants.map(
    (t) => new Attacker(t, { env: e, cast, journal, world, random, intel: () => victims.intel, over, disruptions, tap: platformTap }),
  );
  const tasks: Promise<unknown>[] = [];
  const runs: Promise<unknown>[] = [];
  for (const attacker of attackers) {
    tasks.push(
      (async () => {
        while (!over()) {
          await attacker.step();
          await sleep(150 + random() * 300);
        }
      })(),
    );
    // The playbooks of its mode, the first round early (a short run sees each; the memory storm
    // first, its 120 big Secrets take the apiserver a while), then again every few minutes, in a
    // seeded order.
    const mine = attacker.playbookNames.filter((p) => !options.skip.includes(p));
    const later = [...mine].sort(() => random() - 0.5);
    tasks.push(
      (async () => {
        let round = 0;
        while (!over()) {
          for (const playbook of round === 0 ? mine : later) {
            const wait =
              round === 0
                ? playbook === 'memory-storm'
                  ? 500
                  : 1_000 + (random() * Math.min(15_000, options.durationS * 100)) / 2
                : 30_000 + random() * 150_000;
            await sleep(Math.min(wait, Math.max(0, attacksEnd - Date.now())));
            if (over()) break;
            const run = attacker.play(playbook, Math.min(45_000, Math.max(10_000, attacksEnd - Date.now())));
            runs.push(run.catch((error: unknown) => log(`playbook ${playbook}: ${String(error)}`)));
          }
          round += 1;
        }
      })(),
    );
  }
  tasks.push(
    (async () => {
      while (!over()) {
        await victims.step();
        await sleep(300 + random() * 600);
      }
    })(),
  );
  // The rollouts: SIGTERM, the drain, a new incarnation, at duration/(n+1), 2 duration/(n+1), ...
  // (5 restarts: every sixth of the run). The window lasts until the new incarnation is ready.
  const attacksStart = attacksEnd - options.durationS * 1000;
  tasks.push(
    (async () => {
      for (let i = 1; i <= options.restarts && !over(); i += 1) {
        await sleep(Math.max(0, attacksStart + (i * options.durationS * 1000) / (options.restarts + 1) - Date.now()));
        if (over()) break;
        const window = { from: Date.now(), to: undefined as number | undefined, by: 'rollout' };
        disruptions.restarts.push(window);
        journal.add('campaign', 'operator.restart', `incarnation ${op.starts}`, 'ok');
        const planned = await op.restart();
        for (let wait = 0; op.readyAt === undefined && wait < 600; wait += 1) await sleep(100);
        window.to = op.readyAt ?? Date.now();
        log(
          `operator restarted (rollout ${i} of ${options.restarts}): drained in ${planned === undefined ? '?' : ((planned.drainedAt - planned.from) / 1000).toFixed(1)}s, ready ${((window.to - window.from) / 1000).toFixed(1)}s after the SIGTERM`,
        );
      }
    })(),
  );
  let auditing = true;
  const auditLoop = (async () => {
    let n = 0;
    while (auditing) {
      await auditor.check().catch((error: unknown) => log(`audit: ${String(error)}`));
      if (n % 2 === 0) await victims.refreshIntel().catch(() => undefined);
      if (n % 5 === 0) {
        await op.scrapeMetrics();
        log(
          `RSS ${op.rssMiB()} MiB (peak ${mib(op.peakRss)}), exits ${op.exits.length}, actions ${journal.actions.length}, victims ${victims.latencies.ready.length} Ready / ${victims.counts.rotations} rotations / ${victims.counts.deletes} deletes, unrecorded keys ${auditor.maxUnrecorded}, violations ${auditor.problems.length + victims.problems.length}`,
        );
      }
      n += 1;
      await sleep(3_000);
    }
  })();
  // The issuers' invariants every second: a cap race is over in seconds.
  const issuerLoop = (async () => {
    while (auditing) {
      await auditor.checkIssuers().catch((error: unknown) => log(`audit of the issuers: ${String(error)}`));
      await sleep(1_000);
    }
  })();
  await Promise.all(tasks);
  await Promise.all(runs);
  log(`attacks over: ${journal.actions.length} actions; the tenants put their credentials right and delete everything; settling (up to ${options.settleS}s)`);

  // (2) Everything deleted, the operator settles.
  const left: string[] = [];
  for (const attacker of attackers) left.push(...(await attacker.leave()));
  await victims.leave();
  // Settled: nothing left, or what is left has not moved for 8 s and no victim is among it (a
  // tenant's resource the operator cannot delete keeps its key recorded: reported, not a violation).
  const settleStart = Date.now();
  let lastChange = Date.now();
  world.onChange(() => {
    lastChange = Date.now();
  });
  const victimNamespaces = new Set(cast.victimNamespaces);
  const quiet = (): boolean => Date.now() - lastChange > 8_000 && ![...world.current.values()].some((s) => victimNamespaces.has(s.namespace));
  while (world.current.size > 0 && !quiet() && Date.now() - settleStart < options.settleS * 1000) await sleep(500);
  const settleS = (Date.now() - settleStart) / 1000;
  log(`settled in ${settleS.toFixed(1)}s; ${world.current.size} resource(s) left`);
  for (let i = 0; disruptions.revokeOutages.some((w) => w.to === undefined) && i < 300; i += 1) await sleep(100);
  auditing = false;
  await auditLoop;
  await issuerLoop;

  // (3) The final audit.
  await auditor.check(true);
  const stuck = auditor.stuck();
  victims.stop();
  world.stop();
  await op.scrapeMetrics();
  const rssAtEnd = op.rssMiB();
  await op.stop();
  auditor.checkOperator();
  const secretValues = new Set([
    ...victims.values,
    ...auditor.tenantValues,
    ...attackers.flatMap((a) => [...a.credentialValues]),
    e.adminKey,
    ...cast.issuers.map((i) => i.userKey),
  ]);
  const leaks = auditor.checkLeaks(join(out, 'operator.log'), secretValues);

  const latencies = { ready: stats(victims.latencies.ready), rotate: stats(victims.latencies.rotate), delete: stats(victims.latencies.delete) };
  // Apart: the operations no restart or revoke outage overlapped (held to the bounds), and those one
  // did (each held to its bound and what disruptions.ts allows for the windows it overlaps).
  const spans = (what: Operation, disturbed: boolean) =>
    victims.spans.filter((x) => x.what === what && disruptions.disturbed(what, x.since, x.since + x.ms) === disturbed);
  const split = (what: Operation) => ({ outside: stats(spans(what, false).map((x) => x.ms)), disturbed: stats(spans(what, true).map((x) => x.ms)) });
  const windows = { ready: split('ready'), rotate: split('rotate'), delete: split('delete') };
  const problems: Problem[] = [...auditor.problems, ...victims.problems, ...attackers.flatMap((a) => a.problems)];
  if (windows.ready.outside.p99S > VICTIM_BOUNDS.readyP99S)
    problems.push({
      invariant: 'victims converge within their bounds',
      detail: `apply -> Ready p99 ${windows.ready.outside.p99S} s over ${VICTIM_BOUNDS.readyP99S} s (outside the restarts and revoke outages)`,
      context: [],
    });
  for (const [what, bound] of [
    ['ready', VICTIM_BOUNDS.readyMaxS],
    ['rotate', VICTIM_BOUNDS.rotateMaxS],
    ['delete', VICTIM_BOUNDS.deleteMaxS],
  ] as const) {
    if (windows[what].outside.maxS > bound)
      problems.push({
        invariant: 'victims converge within their bounds',
        detail: `${what} max ${windows[what].outside.maxS} s over ${bound} s (outside the restarts and revoke outages)`,
        context: [],
      });
    for (const x of spans(what, true)) {
      const allowed = bound * 1000 + disruptions.allowanceMs(what, x.since, x.since + x.ms);
      if (x.ms > allowed)
        problems.push({
          invariant: 'victims converge within their bounds',
          detail: `${what} took ${(x.ms / 1000).toFixed(1)} s at t=${journal.at(x.since)}s, over ${(allowed / 1000).toFixed(1)} s (its bound and the restarts or revoke outages it overlapped)`,
          context: [],
        });
    }
  }
  const outages = attackers.flatMap((a) => a.outages);
  const issuerDeletions = attackers.flatMap((a) => a.issuerDeletions);
  const foreign = attackers.reduce(
    (f, a) => ({
      resources: f.resources + a.foreign.resources,
      notAllowed: f.notAllowed + a.foreign.notAllowed,
      otherwise: { ...f.otherwise, ...Object.fromEntries(Object.entries(a.foreign.otherwise).map(([k, v]) => [k, v + (f.otherwise[k] ?? 0)])) },
    }),
    { resources: 0, notAllowed: 0, otherwise: {} as Record<string, number> },
  );
  const keysMade = auditor.keys.filter((k) => k.id > cast.keysBefore);
  // The requeue storms: the victims' operations they overlapped (held to the bounds like the others),
  // and each victim create whose answer was dropped meanwhile, with its apply -> Ready.
  const inStorm = (what: Operation) => victims.spans.filter((x) => x.what === what && disruptions.inStorm(x.since, x.since + x.ms)).map((x) => x.ms);
  const victimDrops = attackers
    .flatMap((a) => a.storms.flatMap((st) => st.victimDrops))
    .map((d) => {
      const base = d.keyName.replace(/-[a-z0-9]{8}$/, '');
      const resources = new Set(world.keyNames.get(base) ?? []);
      const span = victims.spans.find((x) => x.what === 'ready' && resources.has(x.resource));
      return {
        keyName: d.keyName,
        keyId: d.keyId ?? null,
        atS: journal.at(d.at),
        resource: [...resources][0] ?? null,
        applyToReadyS: span === undefined ? null : Number((span.ms / 1000).toFixed(2)),
      };
    });
  const storms = {
    runs: attackers.flatMap((a) => a.storms),
    windows: disruptions.storms.map((w) => ({ by: w.by, atS: journal.at(w.from), seconds: Number((((w.to ?? Date.now()) - w.from) / 1000).toFixed(1)) })),
    victimsDuring: { ready: stats(inStorm('ready')), rotate: stats(inStorm('rotate')), delete: stats(inStorm('delete')) },
    victimDrops,
  };
  const lostCreates = attackers.flatMap((a) => a.lostCreates);
  const discovers = attackers.flatMap((a) => a.discovers);
  const invariants = Object.fromEntries(INVARIANTS.map((name) => [name, problems.filter((p) => p.invariant === name).length]));
  const actions = Object.fromEntries([...journal.counts.entries()].sort((a, b) => a[0].localeCompare(b[0])));
  const report = {
    seed: options.seed,
    options,
    wallClockSeconds: Math.round((Date.now() - started) / 1000),
    memoryLimit: { MiB: options.memoryLimitMiB, how: cage.how, enforced: cage.enforced },
    operator: {
      nodeFlags: op.nodeFlags,
      starts: op.starts,
      exits: op.exits,
      oomKills: cage.oomKills(),
      plannedRestarts: op.restarts.map((r) => ({
        incarnation: r.incarnation,
        atS: journal.at(r.from),
        drainS: Number(((r.drainedAt - r.from) / 1000).toFixed(1)),
        readyAfterS: r.readyAt === undefined ? null : Number(((r.readyAt - r.from) / 1000).toFixed(1)),
        code: r.code,
        signal: r.signal,
        killed: r.killed,
      })),
      peakRssMiB: mib(op.peakRss),
      cgroupPeakMiB: cage.peakBytes() === undefined ? null : mib(cage.peakBytes()!),
      rssAtEndMiB: rssAtEnd,
      rssSamples: op.samples,
      rssPerSecondMiB: op.timeline,
    },
    victims: {
      baseline,
      latencies,
      windows,
      bounds: VICTIM_BOUNDS,
      leaseTakeoverS: LEASE_TAKEOVER_MS / 1000,
      counts: victims.counts,
      // Every measured operation: when it was asked for (s since the start), how long it took, whether a window overlapped it.
      operations: victims.spans.map((x) => ({
        what: x.what,
        resource: x.resource,
        atS: journal.at(x.since),
        seconds: Number((x.ms / 1000).toFixed(2)),
        disturbed: disruptions.disturbed(x.what, x.since, x.since + x.ms),
        inStorm: disruptions.inStorm(x.since, x.since + x.ms),
      })),
    },
    disruptions: {
      revokeOutages: disruptions.revokeOutages.map((w) => ({
        by: w.by,
        atS: journal.at(w.from),
        seconds: Number((((w.to ?? Date.now()) - w.from) / 1000).toFixed(1)),
        revokesRefused: w.revokesRefused,
      })),
      replacedKeys: outages,
    },
    organizations: {
      // Creates naming the victims' organization with a foreign user's credentials, or random organization ids.
      foreign,
      creates: platformTap.creates.length,
      refusedCreatesReached: platformTap.creates.filter((c) => c.organizationId !== e.organizationId).length,
      membershipChecks: platformTap.membershipChecks,
    },
    issuerDeletions,
    // Creates whose answer the tap dropped after the commit while the tenant edited the intent: what became of each key.
    lostCreates,
    // Rotations with rotation.restart.discover over the tenants' own workloads.
    discovers,
    storms,
    tenants: {
      actions,
      totalActions: journal.actions.filter((a) => a.who.startsWith('tenant-')).length,
      playbooks: attackers.map((a) => a.playbooks),
      modes: Object.fromEntries(cast.tenants.map((t) => [t.namespace, t.mode])),
    },
    issuers: {
      // What went through them: keys each minted, the most resources of a namespace seen holding
      // one (and the cap there), the refusals tenants' resources were given, the cap races.
      minted: Object.fromEntries(cast.issuers.map((i) => [i.name, keysMade.filter((k) => k.userId === i.userId && k.kind !== 'personal').length])),
      mostHeld: Object.fromEntries([...auditor.issuerHeld.entries()].map(([scope, v]) => [scope, `${v.held} of ${Number.isFinite(v.cap) ? v.cap : 'no cap'}`])),
      refusals: Object.fromEntries(
        [...world.reasonsSeen.entries()]
          .filter(([reason]) => ['NotAllowed', 'IssuerNotFound', 'KeyLimitReached', 'NamespaceTerminating'].includes(reason))
          .map(([reason, set]) => [reason, set.size]),
      ),
      capRaces: attackers.flatMap((a) => a.capRaces),
      overCapChecks: auditor.overCap,
      platformObjectsRefused: [...journal.counts.entries()].filter(([action]) => action.startsWith('platform.')).reduce((n, [, c]) => n + c.refused, 0),
      // The tenants' ApiKeyInventories naming an issuer at the end, and those refused (NotAllowed).
      tenantInventories: auditor.tenantInventories,
    },
    keys: {
      madeDuringRun: keysMade.length,
      revoked: keysMade.filter((k) => k.revoked).length,
      live: keysMade.filter((k) => !k.revoked).length,
      maxUnrecordedAtOnce: auditor.maxUnrecorded,
      unrecordedGraceS: UNRECORDED_GRACE_S,
    },
    settle: { seconds: Number(settleS.toFixed(1)), deletedByTenants: left.length, leftAtEnd: stuck },
    leaks: { valuesSearched: leaks.searched, logBytes: leaks.logBytes, metricsExpositions: op.expositions.length },
    invariants: Object.fromEntries(Object.entries(invariants).map(([k, v]) => [k, v === 0 ? 'PASS' : `FAIL (${v})`])),
    violations: problems,
  };
  writeFileSync(join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(join(out, 'journal.log'), journal.actions.map((a) => JSON.stringify(a)).join('\n') + '\n');

  console.log('\n| figure | value |\n|---|---|');
  const rows: [string, string | number][] = [
    ['seed', options.seed],
    ['wall clock (s)', report.wallClockSeconds],
    ['memory limit', `${options.memoryLimitMiB} MiB, ${cage.how}`],
    [
      'operator starts / planned restarts / exits (OOM kills)',
      `${op.starts} / ${op.restarts.length} (drains ${op.restarts.map((r) => ((r.drainedAt - r.from) / 1000).toFixed(1)).join(', ')} s; ready after ${op.restarts.map((r) => (r.readyAt === undefined ? '?' : ((r.readyAt - r.from) / 1000).toFixed(1))).join(', ')} s) / ${op.exits.length} (${cage.oomKills()})`,
    ],
    [
      'operator peak RSS (MiB)',
      `${mib(op.peakRss)}${cage.peakBytes() === undefined ? '' : ` (cgroup peak ${mib(cage.peakBytes()!)})`}; at the end ${rssAtEnd}`,
    ],
    [
      'tenant actions',
      `${report.tenants.totalActions} (${Object.values(actions).reduce((n, c) => n + c.refused, 0)} refused by the apiserver); playbooks ${JSON.stringify(report.tenants.playbooks)}`,
    ],
    ['victim operations', `${victims.counts.creates} creates, ${victims.counts.rotations} rotations, ${victims.counts.deletes} deletes`],
    [
      'victim apply -> Ready (s)',
      `baseline p50 ${baseline.p50S} max ${baseline.maxS}; under attack p50 ${latencies.ready.p50S} p99 ${latencies.ready.p99S} max ${latencies.ready.maxS} (bounds p99 ${VICTIM_BOUNDS.readyP99S}, max ${VICTIM_BOUNDS.readyMaxS})`,
    ],
    [
      'victim rotate -> new key Ready (s)',
      `p50 ${latencies.rotate.p50S} p99 ${latencies.rotate.p99S} max ${latencies.rotate.maxS} (bound ${VICTIM_BOUNDS.rotateMaxS})`,
    ],
    ['victim delete -> gone (s)', `p50 ${latencies.delete.p50S} p99 ${latencies.delete.p99S} max ${latencies.delete.maxS} (bound ${VICTIM_BOUNDS.deleteMaxS})`],
    ...(['ready', 'rotate', 'delete'] as const).map((what): [string, string] => [
      `victim ${what}: outside / overlapping restarts or outages (s)`,
      `n ${windows[what].outside.n} p99 ${windows[what].outside.p99S} max ${windows[what].outside.maxS} / n ${windows[what].disturbed.n} p99 ${windows[what].disturbed.p99S} max ${windows[what].disturbed.maxS}`,
    ]),
    [
      'lost creates: key fate (s after the drop), the intent edit',
      lostCreates.map((l) => `${l.keyId ?? '?'} ${l.fate} ${l.afterS ?? ''} (${l.edit}${l.editBeforeCut ? ' before the cut' : ' after'})`).join(', '),
    ],
    [
      'discover rounds: workloads (consenting, fat) / resources / rotations / restarts of the consenting (sum) / others changed',
      discovers.map((d) => `${d.workloads} (${d.consenting}, ${d.fat}) / ${d.resources} / ${d.rotations} / ${d.restarts} / ${d.othersChanged}`).join(', '),
    ],
    ['requeue storms: resources, intent writes, seconds', storms.runs.map((r) => `${r.resources}, ${r.writes}, ${r.seconds}`).join('; ')],
    [
      'victims during storms: apply p50 / p99 / max, rotate max (s)',
      `n ${storms.victimsDuring.ready.n} ${storms.victimsDuring.ready.p50S} / ${storms.victimsDuring.ready.p99S} / ${storms.victimsDuring.ready.maxS}, rotate n ${storms.victimsDuring.rotate.n} max ${storms.victimsDuring.rotate.maxS}`,
    ],
    [
      'victim creates with their answer dropped: apply -> Ready (s)',
      victimDrops.map((d) => `${d.resource ?? d.keyName} ${d.applyToReadyS ?? 'not Ready'}`).join(', '),
    ],
    ['revoke outages (s, revokes refused)', report.disruptions.revokeOutages.map((w) => `${w.by} ${w.seconds} (${w.revokesRefused})`).join(', ')],
    [
      'replaced keys in status / revoked after the outage (s)',
      outages.map((o) => `${o.replaced ?? '?'}${o.inStatus ? '' : ' (not seen in status)'} ${o.revokedAfterS ?? 'not yet'}`).join(', '),
    ],
    ['foreign/random organization resources: NotAllowed / otherwise', `${foreign.notAllowed} of ${foreign.resources} / ${JSON.stringify(foreign.otherwise)}`],
    [
      'organization creates sent / for another organization / membership checks',
      `${platformTap.creates.length} / ${report.organizations.refusedCreatesReached} / ${platformTap.membershipChecks}`,
    ],
    [
      'issuer-deletion attacks (Retain, Retain with credentials, finalizer, finalizer deleting, delete held by credentials, key revoked)',
      issuerDeletions
        .map((d) => `${d.retain}/${d.retainSwitch}/${d.finalizer}/${d.finalizerDeleting}/${d.heldByCredentials ? 'held' : '-'}/${String(d.revoked)}`)
        .join(', '),
    ],
    ['platform keys made / revoked / live at the end', `${keysMade.length} / ${report.keys.revoked} / ${report.keys.live}`],
    ['keys minted through issuers', JSON.stringify(report.issuers.minted)],
    ["most resources of a namespace holding an issuer's key (cap)", JSON.stringify(report.issuers.mostHeld)],
    ['tenant resources refused (distinct, by reason)', JSON.stringify(report.issuers.refusals)],
    ['cap races (racers / held / refused)', report.issuers.capRaces.map((r) => `${r.issuer} ${r.racers}/${r.holders}/${r.refused}`).join(', ')],
    ["platform team's objects asked for by tenants (403)", report.issuers.platformObjectsRefused],
    ['tenant inventories naming an issuer / NotAllowed', `${auditor.tenantInventories.naming} / ${auditor.tenantInventories.notAllowed}`],
    ['resources left after the settle', stuck.length],
    ['secret values searched in the log', `${leaks.searched} (${(leaks.logBytes / 1024 / 1024).toFixed(1)} MiB of log)`],
  ];
  for (const [k, v] of rows) console.log(`| ${k} | ${v} |`);
  console.log('');
  for (const [name, count] of Object.entries(invariants)) console.log(`${count === 0 ? 'PASS' : 'FAIL'}  ${name}${count === 0 ? '' : ` (${count})`}`);
  for (const p of problems.slice(0, 30)) {
    console.log(`\n  VIOLATION [${p.invariant}] ${p.detail}`);
    for (const c of p.context.slice(0, 14)) console.log(`    ${c}`);
  }
  for (const s of stuck.slice(0, 10)) console.log(`  left: ${s}`);
  console.log(`\nreport: ${join(out, 'report.json')}; journal: ${join(out, 'journal.log')}; operator log: ${join(out, 'operator.log')}`);
  return problems.length === 0;
}

let ok = false;
try {
  env = await startEnvironment(out);
  log(`control plane ${env.controlPlane.info.server}, platform ${env.emulator.baseUrl}`);
  ok = await campaign(env);
} catch (error) {
  console.error(`hostile: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  operator?.killNow();
  await tap?.close().catch(() => undefined);
  await env?.stop().catch(() => undefined);
  cage?.remove();
}
process.exit(ok ? 0 : 1);
