// The invariants of the hostile-tenant campaign, checked every few seconds while it runs and once
// more at the end, each violation with the actions that led to it:
// - the operator never exits (an OOM kill of the memory cage counts) and its RSS stays under the limit;
// - every live platform key made during the run is recorded by an existing resource (status.keyId,
//   retiringKeys or replacedKeys, or by name in status.lostAttempts: status, which only the operator
//   writes); one unrecorded for longer than a create takes to be recorded is a
//   forgotten key (at the end, after the resources were deleted: none at all);
// - no key of another namespace touched: a victim's recorded key stays live, and what its Secret
//   holds is a key of that very resource (victims.ts watches the Secrets' writes themselves);
// - the platform team's workloads, which declared no consent, are never restarted or repointed, nor
//   the victims' workload consenting to the Secret name the tenants' discover playbooks rotate;
// - no secret value in the operator's log or metrics;
// - every key an issuer minted (made by its user: issuers.ts) is of a namespace, kind and project
//   its policy allows, for a resource that asked for it;
// - no namespace has more resources holding a key minted through an issuer than the issuer's cap
//   for it, from that key's create to its resource's deletion (docs/issuers.md "Caps"), whatever
//   the resource names since;
// - a tenant's ApiKeyInventory naming an issuer gets nothing through it (no list, count or key, no
//   event about a key) and, once reconciled, says NotAllowed: only the operator's namespace may list
//   through an issuer, whose credentials see the whole organization;
// - no organization key create reaches the platform (the tap between the operator and the emulator,
//   platform-tap.ts) with credentials of a user who belongs to no organization (the tenants'
//   foreign-creds), or for an organization other than the one every user of the campaign belongs to
//   (random and other teams' organization ids): the operator asks GET /users/me/organizations first;
// - a planned restart (a rollout) drains within the termination grace;
// - (attacker.ts) the platform team's objects are refused to tenants (403), a request refused for
//   the cap costs no platform create, a resource naming an organization its credentials do not
//   belong to ends NotAllowed, and a key an issuer made is revoked with its resource whatever the
//   tenant writes (Retain 422, the finalizer 403).
import { readFileSync } from 'node:fs';
import { credentialsDigest, type PlatformTap } from './platform-tap.ts';
import { GROUP, VERSION } from './cluster.ts';
import { AppsV1Api } from '@kubernetes/client-node';
import type { Environment } from '../environment.ts';
import { admin } from '../platform-faults.ts';
import { ATTACKER_INVARIANTS } from './attacker.ts';
import type { Cast } from './cluster.ts';
import { capFor, policyAllows, type IssuedKind } from './issuers.ts';
import type { CagedOperator } from './operator.ts';
import { mib } from './operator.ts';
import type { Problem, Victims } from './victims.ts';
import { describeSeen, type Journal, type ResourceWatch } from './world.ts';

interface PlatformKey {
  id: number;
  name: string;
  kind: 'personal' | 'organization' | 'project';
  userId: string | null;
  organizationId: string | null;
  projectId: string | null;
  createdAt: string | null;
  revoked: boolean;
}

/** A key is recorded within seconds of its create; a minute unrecorded and it is forgotten. */
export const UNRECORDED_GRACE_S = 60;

export const INVARIANTS = [
  'no operator restart or exit',
  'operator RSS under the memory limit',
  'no orphaned or unrecorded live key',
  "no key survives its resource's delete",
  'no key of another namespace touched',
  'no workload restarted without its consent',
  'victims converge within their bounds',
  "no secret value in the operator's log or metrics",
  'no key minted through an issuer that its policy refuses',
  'no namespace holds more keys through an issuer than its cap',
  "a tenant's inventory gets nothing through an issuer",
  'no create reaches the platform for an organization its credentials do not belong to',
  ...ATTACKER_INVARIANTS,
] as const;
/** A key's attribution is looked at again for a while: its resource may not be in the watch yet. */
const ISSUER_GRACE_MS = 10_000;
/** Over a cap in the checks of two seconds in a row (checkIssuers runs every second). */
const CAP_GRACE_MS = 2_000;

export type Invariant = (typeof INVARIANTS)[number];

export class Auditor {
  readonly #env: Environment;
  readonly #cast: Cast;
  readonly #world: ResourceWatch;
  readonly #journal: Journal;
  readonly #operator: CagedOperator;
  readonly #victims: Victims;
  readonly #limitBytes: number;
  readonly problems: Problem[] = [];
  readonly #unrecordedSince = new Map<number, number>();
  readonly #reported = new Set<string>();
  readonly #revokedVictimKeys = new Map<number, number>();
  #exitsSeen = 0;
  #overLimit = false;
  /** Secret values of the tenants' resources (their Secrets, read as they change). */
  readonly tenantValues = new Set<string>();
  readonly #collected = new Map<string, number>();
  keys: PlatformKey[] = [];
  maxUnrecorded = 0;
  /** Keys an issuer minted, found allowed (checked once). */
  readonly #allowedIssued = new Set<number>();
  readonly #refusedSince = new Map<number, number>();
  readonly #overCapSince = new Map<string, number>();
  /** The most resources of one namespace seen holding a key minted through each issuer, and its cap there. */
  readonly issuerHeld = new Map<string, { held: number; cap: number }>();
  /** The tenants' inventories naming an issuer at the last check, and how many of them said NotAllowed. */
  tenantInventories = { naming: 0, notAllowed: 0 };
  /** Every check that found a namespace over an issuer's cap (a violation once it lasts ISSUER_GRACE_MS). */
  readonly overCap: { t: number; scope: string; resources: string[] }[] = [];
  readonly #tap: PlatformTap;
  #tapSeen = 0;
  readonly #foreignDigests: Set<string>;
  #restartsSeen = 0;

  constructor(
    env: Environment,
    cast: Cast,
    world: ResourceWatch,
    journal: Journal,
    operator: CagedOperator,
    victims: Victims,
    limitBytes: number,
    tap: PlatformTap,
  ) {
    this.#env = env;
    this.#tap = tap;
    this.#foreignDigests = new Set(cast.tenants.flatMap((t) => (t.foreignKey === undefined ? [] : [credentialsDigest(t.foreignKey)])));
    this.#cast = cast;
    this.#world = world;
    this.#journal = journal;
    this.#operator = operator;
    this.#victims = victims;
    this.#limitBytes = limitBytes;
  }

  #add(invariant: Invariant, detail: string, context: string[], once = detail): void {
    if (this.#reported.has(once)) return;
    this.#reported.add(once);
    this.problems.push({ invariant, detail, context });
  }

  /** What the tenants were doing over the `seconds` before a moment (ms), by action, and the last ones. */
  #mixContext(at: number, seconds: number): string[] {
    const t = this.#journal.at(at);
    const mix = Object.entries(this.#journal.mix(t - seconds, t))
      .sort((a, b) => b[1] - a[1])
      .slice(0, 10)
      .map(([k, v]) => `${k} x${v}`)
      .join(', ');
    return [`at t=${t}s; actions of the ${seconds} s before: ${mix}`, ...this.#journal.before(t, seconds, 'victims')];
  }

  /** Who asked for a key of this name: the resources that used its keyName, and what was done to them. */
  #attribution(keyName: string): string[] {
    const base = keyName.replace(/-[a-z0-9]{8}$/, '');
    const owners = [...(this.#world.keyNames.get(base) ?? [])];
    if (owners.length === 0) return [`no resource ever had keyName ${base}`];
    return owners.flatMap((o) => {
      const now = this.#world.current.get(o);
      const gone = this.#world.gone.get(o);
      const state =
        now !== undefined
          ? `  now: ${describeSeen(now)}`
          : gone !== undefined
            ? `  gone at t=${this.#journal.at(gone.at)}s, last seen: ${describeSeen(gone.last)}`
            : '  never seen by the watch';
      return [`resource ${o}${now !== undefined ? '' : ' (deleted)'}:`, ...this.#journal.about(o, 14).map((a) => `  ${a}`), state];
    });
  }

  async check(final = false): Promise<void> {
    this.checkOperator();
    this.#checkCreates();
    await this.#checkKeys(final);
    await this.#checkWorkloads();
    this.#victims.overdue(final);
    await this.#collectTenantValues();
    await this.#checkInventories(final);
  }

  /**
   * The tenants' ApiKeyInventories (each names an issuer: attacker.ts): none shows a list, a count or
   * a key, none has an event about a key; at the end, each reconciled one says NotAllowed.
   */
  async #checkInventories(final: boolean): Promise<void> {
    const tenants = new Set(this.#cast.tenants.map((t) => t.namespace));
    type Inventory = {
      metadata: { namespace: string; name: string; generation?: number };
      spec?: { issuerRef?: { name?: string } };
      status?: Record<string, unknown> & { observedGeneration?: number; conditions?: { type: string; status: string; reason: string; message: string }[] };
    };
    let items: Inventory[];
    try {
      items = ((await this.#env.objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'apikeyinventories' })) as { items: Inventory[] })
        .items;
    } catch {
      return;
    }
    const mine = items.filter((i) => tenants.has(i.metadata.namespace) && i.spec?.issuerRef?.name !== undefined);
    const ready = (i: Inventory) => i.status?.conditions?.find((c) => c.type === 'Ready');
    this.tenantInventories = { naming: mine.length, notAllowed: mine.filter((i) => ready(i)?.reason === 'NotAllowed').length };
    for (const i of mine) {
      const resource = `${i.metadata.namespace}/ApiKeyInventory/${i.metadata.name}`;
      const got = ['listedAt', 'live', 'managed', 'notManaged', 'unused', 'neverUsed', 'notManagedKeys', 'unusedKeys'].filter(
        (f) => i.status?.[f] !== undefined,
      );
      if (got.length > 0 || ready(i)?.status === 'True') {
        this.#add(
          "a tenant's inventory gets nothing through an issuer",
          `${resource} names ClusterKeyIssuer ${i.spec?.issuerRef?.name} and shows ${got.length > 0 ? got.join(', ') : 'Ready True'}`,
          this.#journal.on(resource),
          `inventory ${resource}`,
        );
      }
      const settled = i.status?.observedGeneration === i.metadata.generation;
      if (final && settled && ready(i)?.reason !== 'NotAllowed') {
        this.#add(
          "a tenant's inventory gets nothing through an issuer",
          `${resource} names ClusterKeyIssuer ${i.spec?.issuerRef?.name} and says ${ready(i)?.reason ?? 'nothing'}, not NotAllowed: ${ready(i)?.message ?? ''}`,
          this.#journal.on(resource),
          `inventory-reason ${resource}`,
        );
      }
    }
    for (const namespace of tenants) {
      try {
        const events = await this.#env.core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.kind=ApiKeyInventory' });
        // Only those of inventories naming an issuer: one taken with the tenant's own credentials shows what they may list.
        const naming = new Set(mine.filter((i) => i.metadata.namespace === namespace).map((i) => i.metadata.name));
        for (const e of events.items.filter((x) => (x.reason === 'KeyNotManaged' || x.reason === 'KeyUnused') && naming.has(x.involvedObject.name ?? ''))) {
          this.#add(
            "a tenant's inventory gets nothing through an issuer",
            `${namespace}/ApiKeyInventory/${e.involvedObject.name ?? ''} has a ${e.reason} event: ${e.message?.slice(0, 200) ?? ''}`,
            [],
            `inventory-event ${e.metadata?.uid ?? ''}`,
          );
        }
      } catch {
        // the apiserver is busy: next time
      }
    }
  }

  /**
   * Every organization key create the operator sent since the last check: none with a foreign
   * user's credentials, none for another organization than the campaign's (every user the campaign
   * made, the tenants' administrators and the issuers', belongs to that one only; a tenant's garbage
   * credentials list no organization).
   */
  #checkCreates(): void {
    for (const create of this.#tap.creates.slice(this.#tapSeen)) {
      const foreign = this.#foreignDigests.has(create.credentials);
      if (!foreign && create.organizationId === this.#env.organizationId) continue;
      this.#add(
        'no create reaches the platform for an organization its credentials do not belong to',
        `POST /organizations/${create.organizationId.slice(0, 80)}/api_keys sent ${foreign ? "with the credentials of a user of no organization (a tenant's foreign-creds)" : 'for an organization no user of the campaign belongs to'}, answered ${create.status}`,
        this.#mixContext(create.at, 10),
        `create ${create.at} ${create.organizationId.slice(0, 80)} ${create.credentials}`,
      );
    }
    this.#tapSeen = this.#tap.creates.length;
  }

  /** Exits and RSS so far (also after the last audit, until the operator is stopped). */
  checkOperator(): void {
    for (const planned of this.#operator.restarts.slice(this.#restartsSeen)) {
      if (planned.killed)
        this.#add(
          'no operator restart or exit',
          `the planned restart of incarnation ${planned.incarnation - 1} did not drain within the termination grace: SIGKILL after 30 s`,
          this.#mixContext(planned.from, 30),
        );
    }
    this.#restartsSeen = this.#operator.restarts.length;
    for (const exit of this.#operator.exits.slice(this.#exitsSeen)) {
      this.#add(
        'no operator restart or exit',
        `incarnation ${exit.incarnation} exited at ${exit.at} (${exit.oomKilled ? 'OOM-killed by the memory limit' : `code ${exit.code}, signal ${exit.signal}`}; its peak RSS ${exit.peakRssMiB} MiB)`,
        this.#mixContext(Date.parse(exit.at), 30),
      );
    }
    this.#exitsSeen = this.#operator.exits.length;
    if (!this.#overLimit && this.#operator.peakRss > this.#limitBytes) {
      this.#overLimit = true;
      this.#add(
        'operator RSS under the memory limit',
        `RSS reached ${mib(this.#operator.peakRss)} MiB (limit ${mib(this.#limitBytes)} MiB)`,
        this.#mixContext(this.#operator.peakAt, 30),
      );
    }
  }

  async #checkKeys(final: boolean): Promise<void> {
    let keys: PlatformKey[];
    try {
      keys = await admin<PlatformKey[]>(this.#env.emulator, 'GET', '/keys');
    } catch {
      return;
    }
    this.keys = keys;
    const byId = new Map(keys.map((k) => [k.id, k]));
    const recorded = this.#world.recorded();
    // Recorded by name: a create whose answer was lost, in its resource's status.lostAttempts.
    const recordedNames = this.#world.recordedNames();
    const now = Date.now();
    let unrecorded = 0;
    for (const key of keys) {
      if (key.id <= this.#cast.keysBefore || key.revoked || recorded.has(key.id) || recordedNames.has(key.name)) {
        this.#unrecordedSince.delete(key.id);
        continue;
      }
      unrecorded += 1;
      const since = this.#unrecordedSince.get(key.id) ?? now;
      this.#unrecordedSince.set(key.id, since);
      if (final || now - since > UNRECORDED_GRACE_S * 1000) {
        const base = key.name.replace(/-[a-z0-9]{8}$/, '');
        const owners = [...(this.#world.keyNames.get(base) ?? [])];
        const deleted = owners.length > 0 && owners.every((o) => !this.#world.current.has(o));
        this.#add(
          deleted ? "no key survives its resource's delete" : 'no orphaned or unrecorded live key',
          `key ${key.id} (${key.name}, made at t=${key.createdAt === null ? '?' : this.#journal.at(Date.parse(key.createdAt))}s) live and recorded by no resource ` +
            `for ${((now - since) / 1000).toFixed(0)} s${final ? ' (at the end)' : ''}`,
          this.#attribution(key.name),
          `key ${key.id}`,
        );
      }
    }
    this.maxUnrecorded = Math.max(this.maxUnrecorded, unrecorded);
    if (final) this.#checkIssued(keys, byId, now, final);

    // A victim's recorded key is live (twice revoked in a row: not a watch that lags a rotation).
    const victimNamespaces = new Set(this.#cast.victimNamespaces);
    for (const [key, seen] of this.#world.current) {
      if (!victimNamespaces.has(seen.namespace) || seen.deleting || seen.keyId === undefined) continue;
      if (byId.get(seen.keyId)?.revoked !== true) {
        this.#revokedVictimKeys.delete(seen.keyId);
        continue;
      }
      const first = this.#revokedVictimKeys.get(seen.keyId);
      if (first === undefined) this.#revokedVictimKeys.set(seen.keyId, now);
      else if (now - first > 5_000)
        this.#add(
          'no key of another namespace touched',
          `${key}: its recorded key ${seen.keyId} was revoked`,
          this.#journal.recent(60).filter((a) => !a.includes(' victims ')),
          `revoked ${seen.keyId}`,
        );
    }
    // What a victim's Secret holds is a key issued for that resource.
    for (const write of this.#victims.secretWrites.splice(0)) {
      if (write.keyId === undefined) continue;
      const key = byId.get(Number(write.keyId));
      const keyName = this.#world.current.get(write.resource)?.keyName;
      if (key === undefined || (keyName !== undefined && !key.name.startsWith(`${keyName}-`))) {
        this.#add(
          'no key of another namespace touched',
          `${write.secret} holds key ${write.keyId} (${key?.name ?? 'unknown to the platform'}), not a key of ${write.resource}`,
          this.#journal.recent(30),
        );
      }
    }
  }

  /**
   * The issuers' invariants alone, every second while the campaign runs (the full check takes
   * seconds under load; a cap race is over in a few): the platform's keys and the watch, nothing else.
   */
  async checkIssuers(): Promise<void> {
    let keys: PlatformKey[];
    try {
      keys = await admin<PlatformKey[]>(this.#env.emulator, 'GET', '/keys');
    } catch {
      return;
    }
    this.#checkIssued(keys, new Map(keys.map((k) => [k.id, k])), Date.now(), false);
  }

  /**
   * Keys made by an issuer's user: each for a resource (one that recorded it, else those whose
   * keyName it bears) in a namespace where the issuer's policy allows its kind and project; and per
   * namespace, the resources holding such a key (status.keyId, live) within the issuer's cap.
   */
  #checkIssued(keys: PlatformKey[], byId: Map<number, PlatformKey>, now: number, final: boolean): void {
    const issuers = new Map(this.#cast.issuers.map((i) => [i.userId, i]));
    const labels = (namespace: string): Record<string, string> => this.#cast.namespaceLabels.get(namespace) ?? {};
    const namespaceOf = (resource: string): string => resource.split('/')[0] ?? '';
    for (const key of keys) {
      const issuer = key.userId === null ? undefined : issuers.get(key.userId);
      if (key.id <= this.#cast.keysBefore || issuer === undefined || this.#allowedIssued.has(key.id)) continue;
      const kind: IssuedKind | undefined = key.kind === 'organization' ? 'Organization' : key.kind === 'project' ? 'Project' : undefined;
      const base = key.name.replace(/-[a-z0-9]{8}$/, '');
      const owners = [...(this.#world.recordedBy.get(key.id) ?? this.#world.keyNames.get(base) ?? [])];
      const allowed =
        kind !== undefined &&
        key.organizationId === this.#env.organizationId &&
        owners.some((o) => policyAllows(issuer, namespaceOf(o), labels(namespaceOf(o)), kind, key.projectId ?? undefined));
      if (allowed) {
        this.#allowedIssued.add(key.id);
        this.#refusedSince.delete(key.id);
        continue;
      }
      const since = this.#refusedSince.get(key.id) ?? now;
      this.#refusedSince.set(key.id, since);
      if (!final && now - since < ISSUER_GRACE_MS) continue;
      this.#add(
        'no key minted through an issuer that its policy refuses',
        `key ${key.id} (${key.name}: ${key.kind}${key.projectId !== null ? ` of project ${key.projectId}` : ''}, organization ${key.organizationId}${key.revoked ? ', revoked' : ''}) minted through ClusterKeyIssuer ${issuer.name} for ${owners.length === 0 ? 'no resource' : owners.join(', ')}: its policy allows none of them`,
        this.#attribution(key.name),
        `issued ${key.id}`,
      );
    }

    // The cap: resources of a namespace whose recorded key that issuer minted, live.
    const held = new Map<string, { resource: string; moved: boolean; text: string }[]>();
    for (const [resource, seen] of this.#world.current) {
      const key = seen.keyId === undefined ? undefined : byId.get(seen.keyId);
      const issuer = key === undefined || key.revoked || key.userId === null ? undefined : issuers.get(key.userId);
      if (issuer === undefined) continue;
      const scope = `${seen.namespace}/${issuer.name}`;
      const moved = (this.#world.sourcesHolding.get(seen.uid)?.size ?? 0) > 1;
      const text = `${resource} (key ${key!.id}${seen.issuer === issuer.name ? '' : `, naming ${seen.issuer ?? 'credentials of the namespace'} now`}${moved ? ', moved while holding a key' : ''})`;
      held.set(scope, [...(held.get(scope) ?? []), { resource, moved, text }]);
    }
    for (const [scope, resources] of held) {
      const [namespace = '', name = ''] = scope.split('/');
      const issuer = this.#cast.issuers.find((i) => i.name === name)!;
      const cap = capFor(issuer, namespace, labels(namespace));
      const most = this.issuerHeld.get(scope);
      if (most === undefined || resources.length > most.held) this.issuerHeld.set(scope, { held: resources.length, cap });
      if (resources.length > cap && this.overCap.length < 200) this.overCap.push({ t: this.#journal.at(now), scope, resources: resources.map((r) => r.text) });
      if (resources.length <= cap) {
        this.#overCapSince.delete(scope);
        continue;
      }
      // Seen over the cap for two seconds: a watch a step behind shows a resource with a key it
      // still holds, never one it does not (a key is revoked before its resource goes).
      const since = this.#overCapSince.get(scope) ?? now;
      this.#overCapSince.set(scope, since);
      if (!final && now - since < CAP_GRACE_MS) continue;
      this.#overCapSince.delete(scope);
      const problem = {
        invariant: 'no namespace holds more keys through an issuer than its cap' as const,
        detail: `namespace ${namespace}: ${resources.length} resources hold a key minted through ClusterKeyIssuer ${name}, whose cap there is ${cap}: ${resources.map((r) => r.text).join(', ')}`,
        context: resources.flatMap((r) => this.#journal.about(r.resource, 6)),
      };
      this.#add(
        problem.invariant,
        problem.detail,
        problem.context,
        `cap ${scope} ${resources
          .map((r) => r.resource)
          .sort()
          .join(',')}`,
      );
    }
  }

  async #checkWorkloads(): Promise<void> {
    const apps = this.#env.kubeConfig.makeApiClient(AppsV1Api);
    for (const w of this.#cast.workloads) {
      try {
        const current =
          w.kind === 'Deployment'
            ? await apps.readNamespacedDeployment({ namespace: w.namespace, name: w.name })
            : w.kind === 'StatefulSet'
              ? await apps.readNamespacedStatefulSet({ namespace: w.namespace, name: w.name })
              : await apps.readNamespacedDaemonSet({ namespace: w.namespace, name: w.name });
        const template = JSON.stringify(current.spec?.template);
        if (current.metadata?.generation !== w.generation || template !== w.template) {
          const annotations = Object.entries(current.spec?.template.metadata?.annotations ?? {})
            .map(([k, v]) => `${k}=${v}`)
            .join(', ');
          // A victim's workload consenting to the Secret name the tenants rotate: restarted from another namespace.
          if (w.consents !== undefined) {
            this.#add(
              ATTACKER_INVARIANTS[4],
              `${w.namespace}/${w.kind}/${w.name} (consenting to restarts for ${w.consents}, which no resource of its namespace rotates) changed: generation ${w.generation} -> ${current.metadata?.generation}; pod template annotations now {${annotations}}`,
              this.#journal
                .recent(60)
                .filter((a) => /discover|rotat/.test(a))
                .slice(-10),
              `${w.namespace}/${w.kind}/${w.name}`,
            );
            continue;
          }
          this.#add(
            'no workload restarted without its consent',
            `${w.namespace}/${w.kind}/${w.name} changed: generation ${w.generation} -> ${current.metadata?.generation}; pod template annotations now {${annotations}}`,
            this.#journal
              .on(`${w.namespace}/`, 60)
              .filter((a) => /rotat|door/.test(a))
              .slice(-10),
            `${w.namespace}/${w.kind}/${w.name}`,
          );
        }
      } catch {
        // the apiserver is busy: next time
      }
    }
  }

  async #collectTenantValues(): Promise<void> {
    const tenants = new Set(this.#cast.tenants.map((t) => t.namespace));
    for (const [key, seen] of this.#world.current) {
      if (!tenants.has(seen.namespace) || seen.secretName === undefined || seen.keyId === undefined) continue;
      // Once per key: a tenant's Secret may weigh 1 MiB.
      if (this.#collected.get(key) === seen.keyId) continue;
      this.#collected.set(key, seen.keyId);
      try {
        const secret = await this.#env.core.readNamespacedSecret({ namespace: seen.namespace, name: seen.secretName });
        for (const v of Object.values(secret.data ?? {})) {
          const value = Buffer.from(v, 'base64').toString('utf8');
          if (/^[a-z0-9]{64}$/.test(value)) this.tenantValues.add(value);
        }
      } catch {
        // gone
      }
    }
  }

  /** Every secret value seen, searched for in the operator's log and metrics expositions. */
  checkLeaks(logFile: string, values: Set<string>): { searched: number; logBytes: number } {
    const log = readFileSync(logFile, 'utf8');
    const metrics = this.#operator.expositions.join('\n');
    for (const value of values) {
      // A long value is looked for by two 48-character slices of it (the log may hold a part).
      const needles = value.length <= 64 ? [value] : [value.slice(0, 48), value.slice(Math.floor(value.length / 2), Math.floor(value.length / 2) + 48)];
      const where = [
        ['log', log],
        ['metrics', metrics],
      ]
        .filter(([, text]) => needles.some((n) => text!.includes(n)))
        .map(([w]) => w);
      if (where.length > 0)
        this.#add(
          "no secret value in the operator's log or metrics",
          `a secret value (${value.length} characters, ${value.slice(0, 4)}...) in the operator's ${where.join(' and ')}`,
          [],
        );
    }
    return { searched: values.size, logBytes: log.length };
  }

  /** Resources still present at the end, with why (their keys stay recorded by them). */
  stuck(): string[] {
    return [...this.#world.current.entries()].map(
      ([key, s]) => `${key}: ${s.deleting ? 'deleting' : 'not deleted'}, Ready ${s.ready} ${s.reason}: ${s.message.slice(0, 160)}`,
    );
  }
}
