// The other teams of the organization: ordinary ApiKeys (organization and personal) and
// ProjectApiKeys in their own namespaces (every second victim namespace gets its organization and
// project keys through the victims' ClusterKeyIssuer, issuers.ts), created, rotated and deleted
// throughout, with the time
// each took (apply -> Ready, rotate -> the new key Ready, delete -> gone), and a watch on their
// Secrets: every write to one must be the operator's answer to its own team's request, holding a
// key of its own resource.
import { ApiException, PatchStrategy, setHeaderOptions, Watch, type V1Secret } from '@kubernetes/client-node';
import type { Environment } from '../environment.ts';
import { GROUP, VERSION, type Cast } from './cluster.ts';
import type { VictimIntel } from './attacker.ts';
import type { Disruptions, Operation } from './disruptions.ts';
import { id, plural, type Journal, type Kind, type ResourceWatch, type Seen } from './world.ts';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The bounds a victim's operations must keep under attack (see docs/reliability.md); disruptions.ts says what a restart or a revoke outage adds. */
export const VICTIM_BOUNDS = { readyP99S: 15, readyMaxS: 30, rotateMaxS: 30, deleteMaxS: 30 };

/** One measured operation: when it was asked for and how long it took (ms). */
export interface Span {
  what: Operation;
  since: number;
  ms: number;
  resource: string;
}

interface Live {
  kind: Kind;
  name: string;
  keyName: string;
  scope: 'Organization' | 'Personal' | 'Project';
}
interface Slot {
  namespace: string;
  index: number;
  generation: number;
  live?: Live;
}
interface Pending {
  what: 'ready' | 'rotate' | 'delete';
  since: number;
  fromKeyId?: number;
  flagged?: boolean;
}
export interface Problem {
  invariant: string;
  detail: string;
  context: string[];
}

export class Victims {
  readonly #env: Environment;
  readonly #world: ResourceWatch;
  readonly #journal: Journal;
  readonly #random: () => number;
  readonly #slots: Slot[] = [];
  /** Victim namespaces whose organization and project keys come through the victims' issuer. */
  readonly #issued: Set<string>;
  readonly #pending = new Map<string, Pending>();
  /** Rotations asked of each victim since its key last changed. */
  readonly #rotationsAsked = new Map<string, number>();
  /** When each victim resource was last created or asked to rotate. */
  readonly #lastRequest = new Map<string, number>();
  readonly #intel = new Map<string, VictimIntel>();
  readonly #watches: AbortController[] = [];
  readonly latencies = { ready: [] as number[], rotate: [] as number[], delete: [] as number[] };
  /** The same operations with when they were asked for (to tell those a restart or an outage overlapped). */
  readonly spans: Span[] = [];
  readonly #disruptions: Disruptions;
  readonly problems: Problem[] = [];
  /** Every secret value seen in a victim Secret (for the leak check). */
  readonly values = new Set<string>();
  /** Victim Secret writes seen: [secret id, key id annotation, when]. */
  readonly secretWrites: { secret: string; resource: string; keyId: string | undefined; at: number }[] = [];
  readonly counts = { creates: 0, rotations: 0, deletes: 0, secretEvents: 0 };
  #stopped = false;

  constructor(env: Environment, cast: Cast, world: ResourceWatch, journal: Journal, random: () => number, perNamespace: number, disruptions: Disruptions) {
    this.#env = env;
    this.#disruptions = disruptions;
    this.#world = world;
    this.#journal = journal;
    this.#random = random;
    for (const namespace of cast.victimNamespaces) for (let index = 0; index < perNamespace; index += 1) this.#slots.push({ namespace, index, generation: 0 });
    this.#issued = new Set(cast.issuers.some((i) => i.name === 'victim-keys') ? cast.victimNamespaces.filter((_, i) => i % 2 === 1) : []);
    world.onChange((before, after) => this.#observe(before, after));
  }

  get intel(): VictimIntel[] {
    return [...this.#intel.values()];
  }

  get live(): { namespace: string; live: Live }[] {
    return this.#slots.flatMap((s) => (s.live === undefined ? [] : [{ namespace: s.namespace, live: s.live }]));
  }

  #observe(before: Seen | undefined, after: Seen | undefined): void {
    const seen = after ?? before;
    if (seen === undefined || !this.#slots.some((s) => s.namespace === seen.namespace)) return;
    const key = id(seen.namespace, seen.kind, seen.name);
    const pending = this.#pending.get(key);
    const now = Date.now();
    if (after === undefined) {
      if (pending?.what === 'delete') this.#measured('delete', pending.since, now, key);
      this.#pending.delete(key);
      return;
    }
    if (pending?.what === 'ready' && after.ready && after.settled && after.keyId !== undefined) {
      this.#measured('ready', pending.since, now, key);
      this.#pending.delete(key);
    }
    if (pending?.what === 'rotate' && after.ready && after.settled && after.keyId !== undefined && after.keyId !== pending.fromKeyId) {
      this.#measured('rotate', pending.since, now, key);
      this.#pending.delete(key);
    }
    if (before?.keyId !== undefined && after.keyId !== undefined && before.keyId !== after.keyId) {
      if ((this.#rotationsAsked.get(key) ?? 0) === 0) {
        this.problems.push({
          invariant: 'no key of another namespace touched',
          detail: `${key}: its key changed from ${before.keyId} to ${after.keyId} with no rotation asked (${after.reason}: ${after.message})`,
          context: this.#journal.recent(30),
        });
      }
      this.#rotationsAsked.set(key, 0);
    }
  }

  #measured(what: Operation, since: number, now: number, resource: string): void {
    this.latencies[what].push(now - since);
    this.spans.push({ what, since, ms: now - since, resource });
  }

  async start(): Promise<void> {
    const watch = new Watch(this.#env.kubeConfig);
    for (const namespace of new Set(this.#slots.map((s) => s.namespace))) {
      const follow = async (): Promise<void> => {
        if (this.#stopped) return;
        try {
          this.#watches.push(
            await watch.watch(
              `/api/v1/namespaces/${namespace}/secrets`,
              {},
              (type, secret: V1Secret) => this.#secretEvent(namespace, type, secret),
              () => {
                if (!this.#stopped) setTimeout(() => void follow(), 300).unref();
              },
            ),
          );
        } catch {
          if (!this.#stopped) setTimeout(() => void follow(), 300).unref();
        }
      };
      await follow();
    }
  }

  #secretEvent(namespace: string, type: string, secret: V1Secret): void {
    const name = secret.metadata?.name ?? '';
    if (name === 'neon-admin') return;
    this.counts.secretEvents += 1;
    for (const v of Object.values(secret.data ?? {})) {
      const value = Buffer.from(v, 'base64').toString('utf8');
      if (value.length >= 16) this.values.add(value);
    }
    const slot = this.#slots.find((s) => s.namespace === namespace && s.live?.name === name);
    const resource = slot?.live === undefined ? `${namespace}/?/${name}` : id(namespace, slot.live.kind, slot.live.name);
    const seen = this.#world.current.get(resource);
    if (type === 'DELETED') {
      if (seen !== undefined && !seen.deleting && slot?.live !== undefined) {
        this.problems.push({
          invariant: 'no key of another namespace touched',
          detail: `${namespace}/Secret/${name} deleted while its resource ${resource} lives`,
          context: this.#journal.recent(30),
        });
      }
      return;
    }
    if (type === 'ADDED' && secret.metadata?.creationTimestamp !== undefined && Date.now() - new Date(secret.metadata.creationTimestamp).getTime() > 5_000)
      return; // a list of old ones
    const keyId = secret.metadata?.annotations?.['keys.neon.dev/key-id'];
    this.secretWrites.push({ secret: `${namespace}/Secret/${name}`, resource, keyId, at: Date.now() });
    const asked = this.#lastRequest.get(resource);
    if (asked === undefined || Date.now() - asked > 120_000) {
      this.problems.push({
        invariant: 'no key of another namespace touched',
        detail: `${namespace}/Secret/${name} written (resourceVersion ${secret.metadata?.resourceVersion}, key-id ${keyId}) with no create or rotation of its own in the last 120 s`,
        context: this.#journal.recent(30),
      });
    }
  }

  /** One action of a victim team (at most one operation in flight per resource). */
  async step(): Promise<void> {
    const slot = this.#slots[Math.floor(this.#random() * this.#slots.length)];
    if (slot === undefined) return;
    const roll = this.#random();
    if (slot.live === undefined) return await this.#create(slot);
    const key = id(slot.namespace, slot.live.kind, slot.live.name);
    if (this.#pending.has(key)) return;
    const seen = this.#world.current.get(key);
    // A rotation is asked for once the previous one's replaced key is retired (a victim's habit, not
    // a rule of the operator: a rotation asked meanwhile starts once the retirement ends). A delete
    // any time: during a revoke outage, retiring keys wait for it.
    if (seen === undefined || !seen.ready) return;
    if (roll < 0.6) {
      if (seen.retiring.length === 0) await this.#rotate(slot.namespace, slot.live, seen.keyId);
    } else if (roll < 0.85) await this.#delete(slot);
  }

  async #create(slot: Slot): Promise<void> {
    slot.generation += 1;
    const flavour = slot.index % 3;
    const kind: Kind = flavour === 1 ? 'ProjectApiKey' : 'ApiKey';
    const name = `v${slot.index}-g${slot.generation}`;
    const keyName = `${slot.namespace}-v${slot.index}-g${slot.generation}`;
    const { organizationId, projectIds } = this.#env;
    const base = { keyName, credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke', rotation: { gracePeriod: '1s', maxGracePeriod: '5s' } };
    // Through the victims' issuer: no credentials of the namespace, the organization the issuer's.
    const { credentialsSecretRef: _, ...issued } = { ...base, issuerRef: { name: 'victim-keys' } };
    const spec =
      this.#issued.has(slot.namespace) && flavour !== 2
        ? flavour === 0
          ? { ...issued, scope: 'Organization' }
          : { ...issued, projectId: projectIds[slot.index % projectIds.length] }
        : flavour === 0
          ? { ...base, scope: 'Organization', organizationId }
          : flavour === 1
            ? { ...base, organizationId, projectId: projectIds[slot.index % projectIds.length] }
            : { ...base, scope: 'Personal' };
    const key = id(slot.namespace, kind, name);
    this.#pending.set(key, { what: 'ready', since: Date.now() });
    this.#lastRequest.set(key, Date.now());
    // Known before the create returns: the operator may write its Secret first.
    slot.live = { kind, name, keyName, scope: flavour === 0 ? 'Organization' : flavour === 1 ? 'Project' : 'Personal' };
    try {
      await this.#env.objects.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: slot.namespace,
        plural: plural(kind),
        body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
      });
      this.#journal.add('victims', 'victim.create', key, 'ok');
      this.counts.creates += 1;
    } catch (error) {
      // An apiserver in trouble (etcd timing out) may answer 500 to a create it committed: the
      // resource is the team's all the same, and the operator gives it a key.
      const exists =
        !(error instanceof ApiException && error.code < 500) &&
        (await this.#env.objects.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: slot.namespace, plural: plural(kind), name }).then(
          () => true,
          () => false,
        ));
      this.#journal.add(
        'victims',
        'victim.create',
        key,
        `${exists ? 'committed, answered' : 'failed'} ${error instanceof ApiException ? error.code : String(error)}`,
      );
      if (exists) {
        this.counts.creates += 1;
        return;
      }
      delete slot.live;
      this.#pending.delete(key);
    }
  }

  async #rotate(namespace: string, live: Live, fromKeyId: number | undefined): Promise<void> {
    const key = id(namespace, live.kind, live.name);
    this.#rotationsAsked.set(key, (this.#rotationsAsked.get(key) ?? 0) + 1);
    this.#lastRequest.set(key, Date.now());
    this.#pending.set(key, { what: 'rotate', since: Date.now(), ...(fromKeyId !== undefined ? { fromKeyId } : {}) });
    try {
      await this.#env.objects.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace,
          plural: plural(live.kind),
          name: live.name,
          body: { metadata: { annotations: { 'keys.neon.dev/rotate': `v${Date.now()}` } } },
        },
        merge,
      );
      this.#journal.add('victims', 'victim.rotate', key, 'ok');
      this.counts.rotations += 1;
    } catch (error) {
      this.#pending.delete(key);
      this.#journal.add('victims', 'victim.rotate', key, `failed ${String(error).slice(0, 60)}`);
    }
  }

  async #delete(slot: Slot): Promise<void> {
    const live = slot.live;
    if (live === undefined) return;
    const key = id(slot.namespace, live.kind, live.name);
    this.#pending.set(key, { what: 'delete', since: Date.now() });
    this.#lastRequest.set(key, Date.now());
    try {
      await this.#env.objects.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: slot.namespace,
        plural: plural(live.kind),
        name: live.name,
      });
      this.#journal.add('victims', 'victim.delete', key, 'ok');
      this.counts.deletes += 1;
      delete slot.live;
    } catch (error) {
      this.#pending.delete(key);
      this.#journal.add('victims', 'victim.delete', key, `failed ${String(error).slice(0, 60)}`);
    }
  }

  /** Operations that took longer than their bound, with what a restart or a revoke outage they overlap adds (checked continuously; each reported once). */
  overdue(final = false): void {
    const bound = { ready: VICTIM_BOUNDS.readyMaxS, rotate: VICTIM_BOUNDS.rotateMaxS, delete: VICTIM_BOUNDS.deleteMaxS };
    for (const [key, p] of this.#pending) {
      const now = Date.now();
      const age = (now - p.since) / 1000;
      const allowed = bound[p.what] + this.#disruptions.allowanceMs(p.what, p.since, now) / 1000;
      if (p.flagged === true || age <= allowed) continue;
      p.flagged = true;
      const seen = this.#world.current.get(key);
      this.problems.push({
        invariant: 'victims converge within their bounds',
        detail: `${key}: ${p.what} not done after ${age.toFixed(1)} s (bound ${bound[p.what]} s${allowed > bound[p.what] ? `, ${allowed.toFixed(1)} s with the restarts or revoke outages it overlaps` : ''})${seen === undefined ? '' : `; Ready ${seen.ready} ${seen.reason}: ${seen.message}`}${final ? ' (at the end)' : ''}`,
        context: this.#journal
          .recent(bound[p.what] + 5)
          .filter((a) => !a.includes(' victims '))
          .slice(-12),
      });
    }
  }

  /** What a tenant may learn of the victims: their objects and their Secrets' annotations. */
  async refreshIntel(): Promise<void> {
    for (const { namespace, live } of this.live) {
      try {
        const r = (await this.#env.objects.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace,
          plural: plural(live.kind),
          name: live.name,
        })) as {
          metadata: { uid: string; annotations?: Record<string, string> };
          spec: Record<string, unknown>;
          status?: { keyId?: number; keyName?: string };
        };
        const secret = await this.#env.core.readNamespacedSecret({ namespace, name: live.name }).catch(() => undefined);
        this.#intel.set(id(namespace, live.kind, live.name), {
          kind: live.kind,
          name: live.name,
          uid: r.metadata.uid,
          spec: r.spec,
          keyName: r.status?.keyName ?? live.keyName,
          keyId: r.status?.keyId,
          intent: r.metadata.annotations?.['keys.neon.dev/create-pending'],
          secretAnnotations: Object.fromEntries(Object.entries(secret?.metadata?.annotations ?? {}).filter(([k]) => k.startsWith('keys.neon.dev/'))),
        });
      } catch {
        this.#intel.delete(id(namespace, live.kind, live.name));
      }
    }
    if (this.#intel.size > 40) for (const key of [...this.#intel.keys()].slice(0, this.#intel.size - 40)) this.#intel.delete(key);
  }

  /** The end: every victim resource deleted. */
  async leave(): Promise<void> {
    for (const slot of this.#slots) await this.#delete(slot);
  }

  stop(): void {
    this.#stopped = true;
    for (const w of this.#watches) w.abort();
  }
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? 0;
}
