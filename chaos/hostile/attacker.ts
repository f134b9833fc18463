// A hostile tenant: random actions, with its own ServiceAccount token only, over every field it can
// write in its namespace (spec values valid and not, ids of other namespaces' keys and projects,
// annotations and labels of its resources and Secrets up to the apiserver's sizes, Secret data,
// replays of what the operator wrote, copies of the victims' objects, wake storms), and playbooks:
// the three attacks of issue 24 step by step (the memory storm, the forgotten key, the restart of
// workloads that never consented) and those of issue 40 (a cap raced with many creates, issuerRef
// switched on a Ready key, the platform team's issuers, Namespace labels and Secrets asked for, an
// ApiKeyInventory naming an issuer, which lists the whole organization) and of issue 41 (creates
// naming the victims' organization with a user's credentials that do not belong to it, and random
// organization ids; the platform refusing revokes while the tenant deletes a Secret and strips or
// forges the create intent; in issuer mode, Retain, release-without-revoke and the finalizer's
// removal on a key an issuer made, before and after its delete; a create whose answer the platform
// drops after committing it while the tenant strips or replaces the intent; many Deployments,
// StatefulSets and DaemonSets of its own, consenting or not, some fat, rotated with
// rotation.restart.discover or naming them in restart.workloads; a storm of invalid intents over many
// resources while victims' creates lose their answers too). Random actions also write
// spec.rotation.window, ApiKeyInventories taken with credentials of the namespace (their
// credentialsSecretRef repointed, unusedAfter rewritten in a loop), and lift
// keys.neon.dev/credentials-in-use from the tenant's own credentials Secrets, and some creates come
// with a Secret under the new key's name made at the same moment (issue 44: a new key's Secret is
// looked for in the informer's cache, which may not show it yet).
// A tenant holds namespace credentials (an administrator's key in its Secret neon-admin) or, in
// issuer mode, no platform key at all: its keys come through the issuers of issuers.ts, and what
// it may write in spec.credentialsSecretRef is only what it has (garbage, the keys it was issued).
// Every action is journaled (world.ts).
// Left out on purpose, because they are the tenant's sanctioned ways to keep a key beyond its
// resource (docs/security.md): with credentials of the namespace, deletionPolicy Retain,
// keys.neon.dev/release-without-revoke and removing the finalizer; in both modes
// keys.neon.dev/abandon-key naming the resource's own key. Through an issuer the first three are
// tried (the issuer-deletion playbook): none may keep the key.
import { ApiException, PatchStrategy, setHeaderOptions, type V1DaemonSet, type V1Deployment, type V1Secret, type V1StatefulSet } from '@kubernetes/client-node';
import { CHAOS_MIN_ROTATION_GRACE, type Environment } from '../environment.ts';
import { CREDENTIALS_FINALIZER } from '../../src/operator/resources/schema.ts';
import { sleep } from '../options.ts';
import { admin } from '../platform-faults.ts';
import { DISCOVER_SECRET, FOREIGN_CREDENTIALS, GROUP, NO_NODE, RESTART_CONSENT, VERSION, type Cast, type Tenant } from './cluster.ts';
import type { Disruptions } from './disruptions.ts';
import { ISSUER_LABEL, ISSUERS_NAMESPACE, MISSING_ISSUER } from './issuers.ts';
import type { DroppedCreate, PlatformTap } from './platform-tap.ts';
import type { Problem } from './victims.ts';
import { id, plural, type Journal, type Kind, type ResourceWatch, type Seen } from './world.ts';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const PENDING = 'keys.neon.dev/create-pending';
const SIGNED = ['keys.neon.dev/key-id', 'keys.neon.dev/key-name', 'keys.neon.dev/signature', 'keys.neon.dev/owner'];
const MANAGED = { 'app.kubernetes.io/managed-by': 'neon-key-operator' };
const KIB = 1024;

/** What the campaign lets a tenant know of the victims (as if leaked): their objects as they are. */
export interface VictimIntel {
  kind: Kind;
  name: string;
  uid: string;
  spec: Record<string, unknown>;
  keyName: string;
  keyId: number | undefined;
  intent: string | undefined;
  secretAnnotations: Record<string, string>;
}

export interface AttackerContext {
  env: Environment;
  cast: Cast;
  journal: Journal;
  world: ResourceWatch;
  random: () => number;
  intel: () => VictimIntel[];
  /** Whether the attacks are over. */
  over: () => boolean;
  /** The revoke outages (one at a time: the platform's faults are global) and the requeue storms. */
  disruptions: Disruptions;
  /** Between the operator and the platform: drops a chosen create's answer after its commit. */
  tap: PlatformTap;
}

interface Saved {
  intents: string[];
  secretMeta: Record<string, string>[];
  values: string[];
}

/** The playbooks of each mode of tenant. The memory storm is a namespace-credentials attack (its credentials Secret churns). */
const PLAYBOOKS = {
  credentials: [
    'memory-storm',
    'forgotten-key',
    'restart-door',
    'platform-objects',
    'foreign-organization',
    'revoke-outage',
    'lost-create',
    'discover',
    'requeue-storm',
  ],
  issuer: [
    'forgotten-key',
    'restart-door',
    'cap-race',
    'issuer-switch',
    'platform-objects',
    'revoke-outage',
    'issuer-deletion',
    'lost-create',
    'discover',
    'requeue-storm',
  ],
} as const;
export type Playbook = (typeof PLAYBOOKS)[keyof typeof PLAYBOOKS][number];

/** Invariants an attacker checks itself, as it acts (audit.ts lists them with the others). */
export const ATTACKER_INVARIANTS = [
  "tenants are refused the platform team's objects (403)",
  'a refused request costs no platform create',
  'a resource naming an organization its credentials do not belong to ends NotAllowed',
  'a key an issuer made is revoked with its resource, whatever the tenant does',
  'a workload is restarted only with its consent, for its own namespace, at most once per rotation',
] as const;

/** The workloads a rotation may restart (src/operator/keys/rotation/consumers.ts): each kind's restart is its pod template's annotation. */
const WORKLOAD_KINDS = ['Deployment', 'StatefulSet', 'DaemonSet'] as const;
type WorkloadKind = (typeof WORKLOAD_KINDS)[number];
type Workload = V1Deployment | V1StatefulSet | V1DaemonSet;

/** A workload's annotations but its controller's own (deployment.kubernetes.io/revision, a DaemonSet's template generation). */
const ownAnnotations = (d: Workload): string =>
  JSON.stringify(
    Object.entries(d.metadata?.annotations ?? {})
      .filter(([k]) => !k.startsWith('deployment.kubernetes.io/') && k !== 'deprecated.daemonset.template.generation')
      .sort(),
  );

/** A victim's create (the victims' keyNames: victims.ts), for the drops of the requeue storm. */
const VICTIM_ATTEMPT = /^victim-\d+-v\d+-g\d+-[a-z0-9]{8}$/;

/** The platform's record of a key (the emulator's admin API). */
interface PlatformKey {
  id: number;
  name: string;
  revoked: boolean;
}

/** A valid-looking organization id no organization has (`org-<word>-<word>-<8 digits>`, as the platform makes them). */
function randomOrganizationId(r: () => number): string {
  const words = ['amber', 'bold', 'calm', 'dawn', 'ember', 'frost', 'gale', 'holly', 'iris', 'jade', 'kite', 'lunar', 'moss', 'north', 'opal', 'pine'];
  const word = (): string => words[Math.floor(r() * words.length)]!;
  return `org-${word()}-${word()}-${String(Math.floor(r() * 1e8)).padStart(8, '0')}`;
}

export class Attacker {
  readonly #t: Tenant;
  readonly #c: AttackerContext;
  readonly #who: string;
  readonly #issuerMode: boolean;
  readonly #saved: Saved = { intents: [], secretMeta: [], values: [] };
  /** Every value written into a credentials entry (the leak check searches the log for them). */
  readonly credentialValues = new Set<string>();
  #generation = 0;
  /** Resources of a playbook in progress: random actions leave them to it. */
  readonly #busy = new Set<string>();
  #bulk = 0;
  readonly #bulkMade = new Set<string>();
  /** The ApiKeyInventories it made (each naming an issuer). */
  readonly #inventories: string[] = [];
  /** The ApiKeyInventories it made with credentials of its namespace. */
  readonly #credentialInventories: string[] = [];
  readonly playbooks: Partial<Record<Playbook, number>>;
  /** Each cap race: the issuer, its racers, how many held a key when it settled, how many were refused. */
  readonly capRaces: { issuer: string; racers: number; holders: number; refused: number }[] = [];
  /** What the attacker's own checks found (ATTACKER_INVARIANTS). */
  readonly problems: Problem[] = [];
  /** Foreign and random organization ids named (foreign-organization): resources, how many ended NotAllowed, by another reason. */
  readonly foreign = { resources: 0, notAllowed: 0, otherwise: {} as Record<string, number> };
  /** Revoke outages this tenant ran: its replaced key, whether it was in status.replacedKeys, when it ended revoked (s after the outage). */
  readonly outages: { resource: string; ms: number; replaced: number | undefined; inStatus: boolean; revokedAfterS: number | null }[] = [];
  /** Issuer-deletion attacks: the answers to Retain, the finalizer's removal (before, during the delete), and whether the key ended revoked. */
  readonly issuerDeletions: {
    resource: string;
    keyId: number;
    retain: string;
    retainSwitch: string;
    finalizer: string;
    finalizerDeleting: string;
    heldByCredentials: boolean;
    revoked: boolean | null;
  }[] = [];
  /** Lost creates (lost-create): the dropped key, what the tenant did to the intent and when, what became of the key (s after the drop). */
  readonly lostCreates: {
    resource: string;
    keyId: number | undefined;
    edit: string;
    editBeforeCut: boolean;
    fate: 'recorded' | 'revoked' | 'live, unrecorded' | 'unknown';
    afterS: number | null;
  }[] = [];
  /** Discover rounds: workloads (consenting / fat), how they were named, rotations completed, restarts seen of the consenting and of the others, by kind. */
  readonly discovers: {
    base: string;
    workloads: number;
    consenting: number;
    fat: number;
    resources: number;
    discover: boolean;
    named: number;
    rotations: number;
    restarts: number;
    othersChanged: number;
    unnamedChanged: number;
    byKind: Record<string, { workloads: number; consenting: number; restarts: number; othersChanged: number }>;
  }[] = [];
  /** Requeue storms: resources, intent writes, victims' creates whose answer was dropped (their key ids). */
  readonly storms: { resources: number; writes: number; seconds: number; victimDrops: DroppedCreate[] }[] = [];
  #discovering = false;
  #discoverRounds = 0;

  constructor(tenant: Tenant, context: AttackerContext) {
    this.#t = tenant;
    this.#c = context;
    this.#who = `tenant-${tenant.index}`;
    this.#issuerMode = tenant.mode === 'issuer';
    this.playbooks = Object.fromEntries(PLAYBOOKS[tenant.mode].map((p) => [p, 0]));
    if (tenant.userKey !== undefined) this.credentialValues.add(tenant.userKey);
  }

  /** This tenant's playbooks, in their first round's order. */
  get playbookNames(): readonly Playbook[] {
    return PLAYBOOKS[this.#t.mode];
  }

  // ---- random helpers (every choice from the seeded source) ----
  #r(): number {
    return this.#c.random();
  }
  #chance(p: number): boolean {
    return this.#r() < p;
  }
  #int(lo: number, hi: number): number {
    return lo + Math.floor(this.#r() * (hi - lo + 1));
  }
  #pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#r() * items.length)] as T;
  }
  #text(length: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
    // Long values: a random block repeated (the content matters less than the size; cheap to make).
    const block = Array.from({ length: Math.min(length, 4096) }, () => alphabet[Math.floor(this.#r() * alphabet.length)]).join('');
    return block.repeat(Math.ceil(length / block.length)).slice(0, length);
  }

  get #ns(): string {
    return this.#t.namespace;
  }

  /** The tenant's resources as the administrator's watch sees them. */
  #mine(): Seen[] {
    return [...this.#c.world.current.values()].filter((s) => s.namespace === this.#ns);
  }

  async #act(action: string, target: string, work: () => Promise<unknown>): Promise<boolean> {
    try {
      await work();
      this.#c.journal.add(this.#who, action, target, 'ok');
      return true;
    } catch (error) {
      const outcome = error instanceof ApiException ? `refused ${error.code}` : `failed ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`;
      this.#c.journal.add(this.#who, action, target, outcome);
      return false;
    }
  }

  #target(kind: Kind | 'Secret', name: string): string {
    return kind === 'Secret' ? `${this.#ns}/Secret/${name}` : id(this.#ns, kind, name);
  }

  // ---- values a tenant may write ----

  #keyName(name: string): string | undefined {
    const roll = this.#r();
    const victims = this.#c.intel();
    if (roll < 0.15 && victims.length > 0) return this.#pick(victims).keyName.replace(/-[a-z0-9]{8}$/, ''); // the victim's base
    if (roll < 0.22) return `tenant-${(this.#t.index + 1) % Math.max(1, this.#c.cast.tenants.length)}-r1`; // another tenant's
    if (roll < 0.3) return this.#text(55, 'abc');
    if (roll < 0.33) return 'has space'; // refused by admission
    if (roll < 0.45) return undefined; // the default, <namespace>-<name>
    return `${this.#ns}-${name}-${this.#generation}`;
  }

  #credentialsRef(): Record<string, string> {
    const roll = this.#r();
    const name =
      roll < 0.55
        ? 'neon-admin'
        : roll < 0.6 && this.#t.foreignKey !== undefined
          ? FOREIGN_CREDENTIALS
          : roll < 0.75
            ? 'creds-storm'
            : roll < 0.85
              ? 'creds-odd'
              : roll < 0.95
                ? 'creds-missing'
                : this.#text(this.#int(1, 253), 'abc');
    return this.#chance(0.9) ? { name } : { name, key: this.#pick(['token', 'missing-entry', this.#text(253, 'xyz'), 'apiKey']) };
  }

  /** An issuer to name: the tenants' own (allowed to issuer tenants), the victims', one that does not exist, odd names. */
  #issuerName(): string {
    const roll = this.#r();
    if (roll < 0.45) return 'tenant-keys';
    if (roll < 0.65) return 'tenant-extra';
    if (roll < 0.8) return 'victim-keys';
    if (roll < 0.9) return MISSING_ISSUER;
    if (roll < 0.95) return `issuer-${this.#text(this.#int(1, 40))}`;
    return this.#pick(['Bad Name', this.#text(254, 'ab'), '']); // refused by admission
  }

  /**
   * Where the key's credentials come from: an issuer tenant mostly names an issuer, else credentials
   * of its namespace (what it has: garbage, the keys it was issued), now and then both or neither
   * (refused by admission); a tenant with credentials now and then names an issuer (none allows it).
   */
  #source(): Record<string, unknown> {
    const roll = this.#r();
    if (!this.#issuerMode) return roll < 0.9 ? { credentialsSecretRef: this.#credentialsRef() } : { issuerRef: { name: this.#issuerName() } };
    if (roll < 0.75) return { issuerRef: { name: this.#issuerName() } };
    if (roll < 0.92) return { credentialsSecretRef: this.#credentialsRef() };
    if (roll < 0.96) return { issuerRef: { name: 'tenant-keys' }, credentialsSecretRef: this.#credentialsRef() };
    return {};
  }

  #spec(kind: Kind, name: string): Record<string, unknown> {
    const { organizationId, projectIds, emulator } = this.#c.env;
    const otherProjects = emulator.bootstrap.projects.filter((p) => p.organizationId !== organizationId).map((p) => p.id);
    const org = this.#chance(0.85)
      ? organizationId
      : this.#pick([
          'org-does-not-exist-00000000',
          emulator.bootstrap.organizations.find((o) => o.id !== organizationId)?.id ?? 'org-other-1',
          'ORG BAD',
          'org-' + this.#text(60),
          randomOrganizationId(() => this.#r()),
          randomOrganizationId(() => this.#r()),
        ]);
    const source = this.#source();
    // Through an issuer organizationId may be left out (the issuer's), or given: the issuer's or another.
    const orgOptional = source.issuerRef !== undefined && source.credentialsSecretRef === undefined && this.#chance(0.6);
    const spec: Record<string, unknown> = { ...source, deletionPolicy: 'Revoke' };
    const keyName = this.#keyName(name);
    if (keyName !== undefined) spec.keyName = keyName;
    if (kind === 'ApiKey') {
      // A Personal key through an issuer is refused by admission: tried now and then.
      spec.scope = this.#chance(this.#issuerMode ? 0.85 : 0.6) ? 'Organization' : 'Personal';
      if ((spec.scope === 'Organization' && !orgOptional) || this.#chance(0.05)) spec.organizationId = org;
    } else {
      if (!orgOptional) spec.organizationId = org;
      spec.projectId = this.#chance(0.8) ? this.#pick(projectIds) : this.#pick([...otherProjects, 'no-such-project-12345678', 'p'.repeat(64)]);
    }
    if (this.#chance(0.5)) spec.secret = this.#secretTarget(name);
    if (this.#chance(0.4)) spec.rotation = this.#rotation();
    if (this.#chance(0.1)) spec.usage = { unusedAfter: this.#pick(['1s', '720h', '0s']) };
    return spec;
  }

  #secretTarget(name: string): Record<string, unknown> {
    const target: Record<string, unknown> = {};
    if (this.#chance(0.4))
      target.name = this.#pick([`${name}-out`, 'shared-out', this.#c.cast.workloadSecret, 'neon-admin', 'creds-storm', `bulk-${this.#int(0, 5)}`]);
    if (this.#chance(0.2)) target.key = this.#pick(['token', 'apiKey', this.#text(200, 'k')]);
    if (this.#chance(0.3)) target.immutable = true;
    if (this.#chance(0.4)) {
      const many = this.#chance(0.3);
      const entries = many ? 32 : this.#int(1, 4);
      const annotations: Record<string, string> = {};
      const labels: Record<string, string> = {};
      for (let i = 0; i < entries; i += 1) {
        annotations[`example.com/a${i}`] = this.#text(many ? 4096 : this.#int(1, 200));
        if (this.#chance(0.5)) labels[`example.com/l${i}`] = this.#text(this.#int(1, 63), 'abc');
      }
      if (this.#chance(0.1)) annotations['keys.neon.dev/owner'] = 'ApiKey/victim'; // refused by admission
      target.template = { annotations, labels, data: this.#chance(0.5) ? { id: 'KeyId', url: 'PlatformUrl', name: 'KeyName' } : { copy: 'Key' } };
    }
    return target;
  }

  #rotation(): Record<string, unknown> {
    const rotation: Record<string, unknown> = {
      gracePeriod: this.#pick(['0s', '1s', '2s', '10s']),
      maxGracePeriod: this.#pick(['0s', '2s', '30s', '1h']),
    };
    if (this.#chance(0.3)) rotation.interval = '1m';
    if (this.#chance(0.6)) {
      rotation.restart = {
        discover: this.#chance(0.5),
        workloads: [
          { kind: 'Deployment', name: 'platform-api' },
          { kind: 'StatefulSet', name: 'platform-store' },
          { kind: 'DaemonSet', name: 'no-such' },
        ].filter(() => this.#chance(0.7)),
      };
    }
    return rotation;
  }

  // ---- actions ----

  async #create(kind: Kind, name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}): Promise<boolean> {
    return await this.#act('resource.create', this.#target(kind, name), () =>
      this.#t.objects.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: this.#ns,
        plural: plural(kind),
        body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name, ...metadata }, spec },
      }),
    );
  }

  async #patchResource(action: string, kind: Kind, name: string, body: Record<string, unknown>): Promise<boolean> {
    return await this.#act(action, this.#target(kind, name), () =>
      this.#t.objects.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: this.#ns,
          plural: plural(kind),
          name,
          body,
        },
        merge,
      ),
    );
  }

  async #patchSecret(action: string, name: string, body: Record<string, unknown>): Promise<boolean> {
    return await this.#act(action, this.#target('Secret', name), () => this.#t.core.patchNamespacedSecret({ namespace: this.#ns, name, body }, merge));
  }

  /** Create, or replace whole (data and metadata) when it exists. */
  async #putSecret(action: string, secret: V1Secret): Promise<boolean> {
    const name = secret.metadata?.name ?? '';
    return await this.#act(action, this.#target('Secret', name), async () => {
      try {
        await this.#t.core.createNamespacedSecret({ namespace: this.#ns, body: secret });
      } catch (error) {
        if (!(error instanceof ApiException && error.code === 409)) throw error;
        const current = await this.#t.core.readNamespacedSecret({ namespace: this.#ns, name });
        await this.#t.core.replaceNamespacedSecret({
          namespace: this.#ns,
          name,
          body: { ...secret, metadata: { ...secret.metadata, resourceVersion: current.metadata?.resourceVersion } },
        });
      }
    });
  }

  async #readSecret(name: string): Promise<V1Secret | undefined> {
    try {
      return await this.#t.core.readNamespacedSecret({ namespace: this.#ns, name });
    } catch {
      return undefined;
    }
  }

  /** Reads its resources and their Secrets: what the operator wrote is saved for replays. */
  async #observe(): Promise<void> {
    for (const r of this.#mine()) {
      try {
        const full = (await this.#t.objects.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: this.#ns,
          plural: plural(r.kind),
          name: r.name,
        })) as { metadata: { annotations?: Record<string, string> } };
        const intent = full.metadata.annotations?.[PENDING];
        if (intent !== undefined && intent.includes('"sig"') && !this.#saved.intents.includes(intent)) this.#saved.intents.push(intent);
      } catch {
        // gone meanwhile
      }
      const secret = r.secretName === undefined ? undefined : await this.#readSecret(r.secretName);
      const annotations = secret?.metadata?.annotations ?? {};
      if (annotations['keys.neon.dev/signature'] !== undefined) {
        this.#saved.secretMeta.push(Object.fromEntries(SIGNED.filter((k) => annotations[k] !== undefined).map((k) => [k, annotations[k]!])));
      }
      for (const v of Object.values(secret?.data ?? {})) this.#saved.values.push(Buffer.from(v, 'base64').toString('utf8'));
    }
    for (const list of [this.#saved.intents, this.#saved.secretMeta, this.#saved.values]) list.splice(0, Math.max(0, list.length - 40));
    this.#c.journal.add(this.#who, 'observe', `${this.#ns}/*`, 'ok');
  }

  #freshName(prefix: string): string {
    this.#generation += 1;
    return `${prefix}${this.#generation}`;
  }

  /** One random action. */
  async step(): Promise<void> {
    const mine = this.#mine().filter((r) => !this.#busy.has(r.name));
    const some = mine.length > 0 ? this.#pick(mine) : undefined;
    const roll = this.#r() * 100;
    if (roll < 12 || some === undefined) {
      if (mine.length >= 14) return await this.#deleteResource(this.#pick(mine));
      const kind: Kind = this.#chance(0.55) ? 'ApiKey' : 'ProjectApiKey';
      const name = this.#freshName('r');
      if (this.#chance(0.2)) {
        // A Secret under the new key's name, made at the same moment as the resource: the key's first
        // pass may decide before the operator's cache shows it (a new key's Secret absent from the
        // cache is not read: secret-writer.ts locateSecret), and must still mint nothing it keeps
        // unrecorded, nor write into a Secret that is not its own.
        await Promise.all([
          this.#create(kind, name, this.#spec(kind, name)),
          this.#putSecret('secret.squat', { metadata: { name }, data: { apiKey: Buffer.from(this.#text(40)).toString('base64') } }),
        ]);
        return;
      }
      await this.#create(kind, name, this.#spec(kind, name));
      return;
    }
    if (roll < 15) return await this.#copyVictim();
    if (roll < 23) return await this.#editSpec(some.kind, some.name);
    if (roll < 26) return await this.#bigAnnotations(some.kind, some.name);
    if (roll < 36) return await this.#operatorAnnotations(some.kind, some.name, some.keyId);
    if (roll < 39)
      return void (await this.#patchResource('resource.labels', some.kind, some.name, {
        metadata: { labels: { ...MANAGED, [`example.com/l${this.#int(0, 9)}`]: this.#text(this.#int(0, 63), 'ab') } },
      }));
    if (roll < 45) return await this.#rotate(some.kind, some.name);
    if (roll < 50) return await this.#deleteResource(some);
    if (roll < 58) return await this.#secretData(some.secretName ?? some.name);
    if (roll < 64) return await this.#replaySecretAnnotations(some.secretName ?? some.name);
    if (roll < 68) return await this.#copySecret(some.secretName ?? some.name);
    if (roll < 72) return void (await this.#bigSecret());
    if (roll < 77)
      return void (await this.#act('secret.delete', this.#target('Secret', some.secretName ?? some.name), () =>
        this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name: some.secretName ?? some.name }),
      ));
    if (roll < 84)
      return await this.#rewriteCredentials(
        this.#pick(this.#issuerMode ? ['creds-storm', 'creds-odd', 'neon-admin', 'own-key'] : ['creds-storm', 'creds-odd', 'neon-admin']),
      );
    if (roll < 89) return await this.#switchSource(some.kind, some.name);
    if (roll < 91) return void (await this.#platformProbe(this.#pick(this.#platformProbes())));
    if (roll < 93) return await this.#issuerInventory();
    if (roll < 95) return await this.#rotationWindow(some.kind, some.name);
    if (roll < 96) return await this.#credentialsInventory();
    if (roll < 98) return await this.#liftCredentialsFinalizer();

    await this.#observe();
  }

  /**
   * spec.issuerRef and spec.credentialsSecretRef switched on a resource (whatever it holds): to an
   * issuer (one that may not allow it, or not exist), or to credentials of the namespace (with the
   * organizationId these need).
   */
  async #switchSource(kind: Kind, name: string): Promise<void> {
    const toIssuer = this.#issuerMode ? this.#chance(0.7) : this.#chance(0.2);
    const spec: Record<string, unknown> = toIssuer
      ? {
          issuerRef: { name: this.#issuerMode && this.#chance(0.5) ? this.#pick(['tenant-keys', 'tenant-extra']) : this.#issuerName() },
          credentialsSecretRef: null,
        }
      : {
          credentialsSecretRef: this.#chance(0.3) && this.#issuerMode ? { name: 'own-key' } : this.#credentialsRef(),
          issuerRef: null,
          organizationId: this.#c.env.organizationId,
        };
    await this.#patchResource(toIssuer ? 'resource.switch-to-issuer' : 'resource.switch-to-credentials', kind, name, { spec });
  }

  // ---- the platform team's objects (attacks 6 and 7 of issue 40): each must be refused, 403 ----

  /** What a tenant may try on the issuers, its Namespace and the issuers' Secrets. */
  #platformProbes(): { what: string; call: () => Promise<unknown> }[] {
    const issuers = { group: GROUP, version: VERSION, plural: 'clusterkeyissuers' };
    const target = this.#pick(this.#c.cast.issuers.map((i) => i.name));
    const everything = { namespaces: { selector: {} }, kinds: ['Organization', 'Project'] };
    const label = `/metadata/labels/${ISSUER_LABEL.replace('/', '~1')}`;
    const secret = this.#pick(this.#c.cast.issuers.map((i) => i.secretName));
    return [
      {
        what: 'issuer.create',
        call: () =>
          this.#t.objects.createClusterCustomObject({
            ...issuers,
            body: {
              apiVersion: `${GROUP}/${VERSION}`,
              kind: 'ClusterKeyIssuer',
              metadata: { name: `${this.#ns}-own` },
              spec: { organizationId: this.#c.env.organizationId, credentialsSecretRef: { name: secret }, allow: [everything] },
            },
          }),
      },
      {
        what: 'issuer.lift-cap',
        call: () =>
          this.#t.objects.patchClusterCustomObject({
            ...issuers,
            name: target,
            body: [{ op: 'replace', path: '/spec/allow/0/maxKeysPerNamespace', value: 100_000 }],
          }),
      },
      {
        what: 'issuer.allow-all',
        call: () => this.#t.objects.patchClusterCustomObject({ ...issuers, name: target, body: [{ op: 'add', path: '/spec/allow/-', value: everything }] }),
      },
      {
        what: 'issuer.name-namespace',
        call: () =>
          this.#t.objects.patchClusterCustomObject(
            { ...issuers, name: target, body: { spec: { allow: [{ ...everything, namespaces: { names: [this.#ns] } }] } } },
            merge,
          ),
      },
      { what: 'issuer.delete', call: () => this.#t.objects.deleteClusterCustomObject({ ...issuers, name: target }) },
      { what: 'issuer.read', call: () => this.#t.objects.getClusterCustomObject({ ...issuers, name: target }) },
      { what: 'issuer.list', call: () => this.#t.objects.listClusterCustomObject(issuers) },
      {
        what: 'issuer.status',
        call: () =>
          this.#t.objects.patchClusterCustomObjectStatus({ ...issuers, name: target, body: [{ op: 'add', path: '/status', value: { resources: 0 } }] }),
      },
      {
        what: 'namespace.label',
        call: () => this.#t.core.patchNamespace({ name: this.#ns, body: [{ op: 'add', path: label, value: this.#pick(['victim-keys', 'tenant-keys']) }] }),
      },
      {
        what: 'namespace.unlabel',
        call: () => this.#t.core.patchNamespace({ name: this.#ns, body: { metadata: { labels: { [ISSUER_LABEL]: null } } } }, merge),
      },
      {
        what: 'namespace.create-labelled',
        call: () => this.#t.core.createNamespace({ body: { metadata: { name: `${this.#ns}-twin`, labels: { [ISSUER_LABEL]: 'victim-keys' } } } }),
      },
      { what: 'issuer-secrets.list', call: () => this.#t.core.listNamespacedSecret({ namespace: ISSUERS_NAMESPACE }) },
      { what: 'issuer-secrets.read', call: () => this.#t.core.readNamespacedSecret({ namespace: ISSUERS_NAMESPACE, name: secret }) },
      {
        what: 'issuer-secrets.replace',
        call: () =>
          this.#t.core.replaceNamespacedSecret({
            namespace: ISSUERS_NAMESPACE,
            name: secret,
            body: { metadata: { name: secret }, stringData: { apiKey: this.#text(64) } },
          }),
      },
      {
        what: 'issuer-secrets.create',
        call: () =>
          this.#t.core.createNamespacedSecret({
            namespace: ISSUERS_NAMESPACE,
            body: { metadata: { name: `${this.#ns}-planted` }, stringData: { apiKey: this.#text(64) } },
          }),
      },
    ];
  }

  /** One probe: anything but a 403 is a hole (journaled, and a problem of the campaign). */
  async #platformProbe(probe: { what: string; call: () => Promise<unknown> }): Promise<void> {
    let outcome: string;
    try {
      await probe.call();
      outcome = 'ok';
    } catch (error) {
      outcome = error instanceof ApiException ? `refused ${error.code}` : `failed ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`;
    }
    const a = this.#c.journal.add(this.#who, `platform.${probe.what}`, this.#ns, outcome);
    // A failure to connect proves nothing either way; any answer of the apiserver but 403 is a hole.
    if (outcome !== 'refused 403' && !outcome.startsWith('failed')) {
      this.problems.push({
        invariant: ATTACKER_INVARIANTS[0],
        detail: `${this.#who} ${probe.what}: ${outcome === 'ok' ? 'allowed' : outcome}, not 403`,
        context: [`#${a.n} t=${a.t}s ${a.who} ${a.action} ${a.target} (${outcome})`],
      });
    }
  }

  /**
   * An ApiKeyInventory of the tenant's namespace naming an issuer (one it may use for keys, the
   * victims', one that does not exist), with or without an organization, or one it made pointed at
   * another issuer. An issuer's credentials list the whole organization: a tenant's inventory must get
   * nothing through one (the audit: no list, no count, no key, no key event; NotAllowed).
   */
  async #issuerInventory(): Promise<void> {
    const at = { group: GROUP, version: VERSION, namespace: this.#ns, plural: 'apikeyinventories' };
    const issuerRef = { name: this.#issuerName() };
    const existing = this.#inventories.length > 0 && (this.#inventories.length >= 6 || this.#chance(0.4)) ? this.#pick(this.#inventories) : undefined;
    if (existing !== undefined) {
      await this.#act('inventory.issuer-switch', `${this.#ns}/ApiKeyInventory/${existing}`, () =>
        this.#t.objects.patchNamespacedCustomObject({ ...at, name: existing, body: { spec: { issuerRef } } }, merge),
      );
      return;
    }
    const spec: Record<string, unknown> = { issuerRef, unusedAfter: this.#pick(['1s', '2160h']) };
    if (this.#chance(0.3))
      spec.organizationId = this.#chance(0.7)
        ? this.#c.env.organizationId
        : (this.#c.env.emulator.bootstrap.organizations.find((o) => o.id !== this.#c.env.organizationId)?.id ?? 'org-other-1');
    if (this.#chance(0.05)) spec.scope = 'Personal'; // refused by admission
    const name = this.#freshName('inv');
    const made = await this.#act('inventory.issuer', `${this.#ns}/ApiKeyInventory/${name}`, () =>
      this.#t.objects.createNamespacedCustomObject({
        ...at,
        body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'ApiKeyInventory', metadata: { name }, spec },
      }),
    );
    if (made) this.#inventories.push(name);
  }

  /**
   * spec.rotation.window on a resource: valid ones (all day, across midnight in a time zone, some
   * days), one of an unknown time zone (valid for admission, reported in the Rotating condition), and
   * invalid ones (refused by admission), or removed; now and then with a scheduled interval, and a
   * rotation asked at once (requested ones do not wait for the window).
   */
  async #rotationWindow(kind: Kind, name: string): Promise<void> {
    const clock = (): string => `${String(this.#int(0, 23)).padStart(2, '0')}:${String(this.#int(0, 59)).padStart(2, '0')}`;
    const days = (): string[] => ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'].filter(() => this.#chance(0.5));
    const windows: [string, Record<string, unknown> | null][] = [
      ['all-day', { start: '00:00', end: '23:59' }],
      ['midnight', { start: '22:00', end: '02:00', timeZone: this.#pick(['Europe/Berlin', 'America/New_York', 'Asia/Kolkata']), daysOfWeek: ['Sat', 'Sun'] }],
      ['random', { start: clock(), end: clock(), ...(this.#chance(0.5) ? { daysOfWeek: [...days(), 'Mon'] } : {}) }],
      ['empty', { start: '01:00', end: '01:00' }],
      ['unknown-zone', { start: clock(), end: clock(), timeZone: this.#pick(['Mars/Olympus_Mons', 'UTC+99', this.#text(64, 'abc/')]) }],
      [
        'invalid',
        this.#pick([
          { start: '24:00', end: '25:61' },
          { start: '9:00', end: '10:00' },
          { start: '10:00' },
          { start: '10:00', end: '11:00', daysOfWeek: [] },
          { start: '10:00', end: '11:00', daysOfWeek: ['Funday'] },
          { start: '10:00', end: '11:00', timeZone: this.#text(65) },
          { start: '10:00', end: '11:00', timeZone: '' },
        ]),
      ],
      ['removed', null],
    ];
    const [what, window] = this.#pick(windows);
    const rotation: Record<string, unknown> = { window };
    if (this.#chance(0.4)) rotation.interval = '1m';
    await this.#patchResource(`resource.rotation-window.${what}`, kind, name, { spec: { rotation } });
    if (this.#chance(0.3))
      await this.#patchResource('resource.rotate', kind, name, { metadata: { annotations: { 'keys.neon.dev/rotate': `w${Date.now()}` } } });
  }

  /**
   * An ApiKeyInventory taken with credentials of the namespace (the tenant's own Secret, a victim's
   * Secret name, which in this namespace is the tenant's or nothing, one missing), made or repointed,
   * then its unusedAfter rewritten in a loop for a few seconds, valid and invalid values. What it
   * lists is what the tenant's own credentials may list (docs/security.md); the audit holds only the
   * inventories naming an issuer to nothing.
   */
  async #credentialsInventory(): Promise<void> {
    const at = { group: GROUP, version: VERSION, namespace: this.#ns, plural: 'apikeyinventories' };
    const victims = this.#c.intel();
    const roll = this.#r();
    const secret = roll < 0.5 ? (this.#issuerMode ? 'own-key' : 'neon-admin') : roll < 0.8 && victims.length > 0 ? this.#pick(victims).name : 'creds-missing';
    const existing =
      this.#credentialInventories.length > 0 && (this.#credentialInventories.length >= 2 || this.#chance(0.6))
        ? this.#pick(this.#credentialInventories)
        : undefined;
    let name: string;
    if (existing !== undefined) {
      name = existing;
      await this.#act('inventory.credentials-switch', `${this.#ns}/ApiKeyInventory/${name}`, () =>
        this.#t.objects.patchNamespacedCustomObject({ ...at, name, body: { spec: { credentialsSecretRef: { name: secret } } } }, merge),
      );
    } else {
      name = this.#freshName('cinv');
      const personal = this.#chance(0.2);
      const spec = {
        credentialsSecretRef: { name: secret },
        ...(personal ? { scope: 'Personal' } : { organizationId: this.#c.env.organizationId }),
        unusedAfter: '720h',
      };
      if (
        !(await this.#act('inventory.credentials', `${this.#ns}/ApiKeyInventory/${name}`, () =>
          this.#t.objects.createNamespacedCustomObject({
            ...at,
            body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'ApiKeyInventory', metadata: { name }, spec },
          }),
        ))
      )
        return;
      this.#credentialInventories.push(name);
    }
    const end = Date.now() + this.#int(2, 5) * 1000;
    while (Date.now() < end && !this.#c.over()) {
      const unusedAfter = this.#pick(['1s', '90s', '1h30m', '720h', '2160h', `${this.#int(1, 100_000)}s`, '0s', '500ms', 'abc', '']);
      await this.#act('inventory.unused-after', `${this.#ns}/ApiKeyInventory/${name}`, () =>
        this.#t.objects.patchNamespacedCustomObject({ ...at, name, body: { spec: { unusedAfter } } }, merge),
      );
    }
  }

  /**
   * keys.neon.dev/credentials-in-use lifted from one of the tenant's credentials Secrets, and now and
   * then that Secret deleted afterwards (never neon-admin: the tenant keeps minting). docs/security.md
   * promises no more here: the keys issued with a deleted Secret stay live and their resources hold
   * their deletion (CredentialsMissing) until credentials come back (leave() puts them back); what the
   * audit holds still: no resource goes while its key lives.
   */
  async #liftCredentialsFinalizer(): Promise<void> {
    // One that carries it (a whole rewrite of a credentials Secret drops it too, and the operator puts it back at its next create).
    const names = this.#issuerMode ? ['own-key', 'creds-storm', 'creds-odd'] : ['neon-admin', 'creds-storm', 'creds-odd'];
    const kept = (await Promise.all(names.map((n) => this.#readSecret(n)))).filter((x) => x?.metadata?.finalizers?.includes(CREDENTIALS_FINALIZER) === true);
    if (kept.length === 0) {
      this.#c.journal.add(this.#who, 'credentials.finalizer-absent', `${this.#ns}/Secret/*`, 'ok');
      return;
    }
    const secret = this.#pick(kept);
    const name = secret?.metadata?.name ?? '';
    const finalizers = secret?.metadata?.finalizers ?? [];
    const rest = finalizers.filter((f) => f !== CREDENTIALS_FINALIZER);
    const lifted = await this.#patchSecret('credentials.finalizer-lift', name, {
      metadata: { finalizers: rest, resourceVersion: secret?.metadata?.resourceVersion },
    });
    if (lifted && name !== 'neon-admin' && this.#chance(0.4)) {
      await this.#act('credentials.delete-unkept', this.#target('Secret', name), () => this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name }));
    }
  }

  async #deleteResource(r: { kind: Kind; name: string }): Promise<void> {
    await this.#act('resource.delete', this.#target(r.kind, r.name), () =>
      this.#t.objects.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(r.kind), name: r.name }),
    );
  }

  async #editSpec(kind: Kind, name: string): Promise<void> {
    const full = this.#spec(kind, name);
    const field = this.#pick(Object.keys(full));
    const value = this.#chance(0.1) ? null : full[field];
    await this.#patchResource(`resource.spec.${field}`, kind, name, { spec: { [field]: value } });
  }

  async #bigAnnotations(kind: Kind, name: string): Promise<void> {
    // Up to and over the apiserver's 256 KiB of annotations per object.
    const total = this.#pick([100, 200, 250, 255, 260]) * KIB;
    const parts = this.#int(1, 8);
    const annotations: Record<string, string> = {};
    for (let i = 0; i < parts; i += 1) annotations[`example.com/big-${i}`] = this.#text(Math.floor(total / parts) - 40);
    await this.#patchResource('resource.annotations-big', kind, name, { metadata: { annotations } });
  }

  async #operatorAnnotations(kind: Kind, name: string, keyId: number | undefined): Promise<void> {
    const victims = this.#c.intel();
    const victim = victims.length > 0 ? this.#pick(victims) : undefined;
    const roll = this.#r();
    let annotations: Record<string, string | null>;
    let what: string;
    if (roll < 0.35 && this.#saved.intents.length > 0) {
      annotations = { [PENDING]: this.#pick(this.#saved.intents) };
      what = 'replay-intent';
    } else if (roll < 0.5) {
      const forged = {
        attempt: victim?.keyName ?? `${name}-abcdefgh`,
        startedAt: '2001-01-01T00:00:00Z',
        holder: 'gone',
        ...(victim?.keyId !== undefined ? { replaces: victim.keyId } : {}),
      };
      annotations = {
        [PENDING]: this.#pick([
          JSON.stringify(forged),
          JSON.stringify({ ...forged, sig: 'A'.repeat(43) }),
          victim?.intent ?? '{',
          this.#text(this.#int(1, 200 * KIB)),
        ]),
      };
      what = 'forge-intent';
    } else if (roll < 0.7) {
      annotations = { 'keys.neon.dev/rotate': this.#text(this.#pick([1, 64, 65, 4096, 200 * KIB])) };
      what = 'rotate-token';
    } else if (roll < 0.8) {
      // Never the resource's own key (that is a person's sanctioned acknowledgement).
      const other = victim?.keyId ?? this.#int(1, 10_000);
      annotations = { 'keys.neon.dev/abandon-key': other === keyId ? String(other + 100_000) : this.#pick([String(other), 'x'.repeat(300), '-1']) };
      what = 'abandon-key-forged';
    } else {
      // Status-looking annotations, and what the operator writes on Secrets, on the resource.
      annotations = {
        'keys.neon.dev/key-id': String(victim?.keyId ?? 1),
        'keys.neon.dev/key-name': victim?.keyName ?? 'x',
        'keys.neon.dev/signature': victim?.secretAnnotations['keys.neon.dev/signature'] ?? 'B'.repeat(43),
        'keys.neon.dev/status': JSON.stringify({ keyId: victim?.keyId, conditions: [{ type: 'Ready', status: 'True' }] }),
        'keys.neon.dev/owner': victim === undefined ? 'ApiKey/x' : `${victim.kind}/${victim.name}`,
      };
      what = 'status-looking';
    }
    await this.#patchResource(`resource.annotations.${what}`, kind, name, { metadata: { annotations } });
  }

  async #rotate(kind: Kind, name: string): Promise<void> {
    // Rotations that name the platform team's workloads, with no grace, asked again and again.
    if (this.#chance(0.5)) {
      await this.#patchResource('resource.rotation-restart', kind, name, {
        spec: {
          rotation: {
            gracePeriod: CHAOS_MIN_ROTATION_GRACE,
            maxGracePeriod: CHAOS_MIN_ROTATION_GRACE,
            restart: {
              discover: true,
              workloads: [
                { kind: 'Deployment', name: 'platform-api' },
                { kind: 'StatefulSet', name: 'platform-store' },
              ],
            },
          },
        },
      });
    }
    await this.#patchResource('resource.rotate', kind, name, { metadata: { annotations: { 'keys.neon.dev/rotate': `r${Date.now()}-${this.#int(0, 1e6)}` } } });
  }

  async #secretData(secretName: string): Promise<void> {
    const roll = this.#r();
    const other = this.#saved.values.length > 0 ? this.#pick(this.#saved.values) : undefined;
    const value =
      roll < 0.25
        ? this.#text(this.#int(100 * KIB, 900 * KIB))
        : roll < 0.4
          ? ''
          : roll < 0.6
            ? this.#text(this.#int(1, 80), '!@#$%^&*()_+ \n\t')
            : roll < 0.8 && other !== undefined
              ? other
              : this.#text(64);
    const key = this.#chance(0.85) ? 'apiKey' : this.#pick(['token', 'other']);
    await this.#patchSecret('secret.data', secretName, { data: { [key]: Buffer.from(value).toString('base64') } });
  }

  async #replaySecretAnnotations(secretName: string): Promise<void> {
    const saved = this.#saved.secretMeta.length > 0 ? this.#pick(this.#saved.secretMeta) : undefined;
    const victim = this.#c.intel().length > 0 ? this.#pick(this.#c.intel()) : undefined;
    const annotations = saved !== undefined && this.#chance(0.7) ? saved : (victim?.secretAnnotations ?? {});
    const uids = [
      ...this.#mine().map((r) => ({ uid: r.uid, kind: r.kind, name: r.name })),
      ...(victim !== undefined ? [{ uid: victim.uid, kind: victim.kind, name: victim.name }] : []),
    ];
    const owner = uids.length > 0 && this.#chance(0.4) ? this.#pick(uids) : undefined;
    await this.#patchSecret('secret.replay-annotations', secretName, {
      metadata: {
        annotations,
        labels: MANAGED,
        ...(owner !== undefined
          ? {
              ownerReferences: [
                { apiVersion: `${GROUP}/${VERSION}`, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: false },
              ],
            }
          : {}),
      },
    });
  }

  async #copySecret(secretName: string): Promise<void> {
    const source = await this.#readSecret(secretName);
    if (source === undefined) return;
    const others = this.#mine().filter((r) => r.name !== secretName);
    const owner = others.length > 0 ? this.#pick(others) : undefined;
    const name = owner !== undefined && this.#chance(0.5) ? `${owner.name}-${owner.keyId ?? 1}` : this.#freshName('copy-');
    await this.#putSecret('secret.copy', {
      metadata: {
        name,
        labels: source.metadata?.labels ?? MANAGED,
        annotations: source.metadata?.annotations ?? {},
        ...(owner !== undefined
          ? {
              ownerReferences: [
                { apiVersion: `${GROUP}/${VERSION}`, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: false },
              ],
            }
          : {}),
      },
      data: source.data ?? {},
    });
  }

  /** A managed-labelled Secret near the apiserver's ~1 MiB, made or rewritten. */
  async #bigSecret(size = this.#int(500, 1000) * KIB, name = `bulk-${this.#bulk++ % 160}`): Promise<boolean> {
    return await this.#putSecret('secret.big', {
      metadata: {
        name,
        labels: MANAGED,
        annotations: { 'keys.neon.dev/owner': this.#pick(['ApiKey/r1', 'ProjectApiKey/r2', this.#text(this.#int(1, 200 * KIB))]) },
      },
      data: { apiKey: Buffer.from(this.#text(size - 400)).toString('base64') },
    });
  }

  /** A key the tenant holds: its administrator's; in issuer mode, one it was issued (or what looks like one). */
  #ownKey(): string {
    if (this.#t.userKey !== undefined) return this.#t.userKey;
    const issued = this.#saved.values.filter((v) => /^[a-z0-9]{64}$/.test(v));
    return issued.length > 0 ? this.#pick(issued) : this.#text(64);
  }

  async #rewriteCredentials(name: string, value?: string): Promise<void> {
    const roll = this.#r();
    const others = this.#c.cast.tenants.filter((t) => t.index !== this.#t.index && t.userKey !== undefined).map((t) => t.userKey!);
    // neon-admin always holds a key that works (its own or another tenant's administrator's): the
    // tenant still wants keys issued; the others get anything. An issuer tenant has no such key:
    // it writes the keys it was issued (organization and project keys, which mint nothing).
    const v =
      value ??
      (name === 'neon-admin'
        ? roll < 0.7 || others.length === 0 || this.#issuerMode
          ? this.#ownKey()
          : this.#pick(others)
        : roll < 0.3
          ? this.#ownKey()
          : roll < 0.45 && others.length > 0
            ? this.#pick(others)
            : roll < 0.65
              ? this.#text(this.#int(65, 900 * KIB))
              : roll < 0.75
                ? ''
                : roll < 0.9
                  ? undefined
                  : this.#text(64));
    if (v !== undefined && v.length >= 16) this.credentialValues.add(v);
    await this.#putSecret('credentials.rewrite', {
      metadata: { name },
      data: v === undefined ? { other: Buffer.from(this.#text(16)).toString('base64') } : { apiKey: Buffer.from(v).toString('base64') },
    });
  }

  async #copyVictim(): Promise<void> {
    const victims = this.#c.intel();
    if (victims.length === 0) return;
    const v = this.#pick(victims);
    const name = this.#chance(0.5) && !this.#mine().some((r) => r.name === v.name) ? v.name : this.#freshName('copy-r');
    const metadata: Record<string, unknown> = {
      finalizers: ['keys.neon.dev/finalizer'],
      annotations: {
        ...(v.intent !== undefined
          ? { [PENDING]: v.intent }
          : { [PENDING]: JSON.stringify({ attempt: v.keyName, startedAt: '2001-01-01T00:00:00Z', holder: 'gone', replaces: v.keyId }) }),
      },
    };
    // The Secret first, with the victim's signed annotations, so it is in place before any key.
    await this.#putSecret('secret.copy-victim', {
      metadata: { name, labels: MANAGED, annotations: v.secretAnnotations },
      data: { apiKey: Buffer.from(this.#text(64)).toString('base64') },
    });
    // The victim's issuer as it is (it does not allow this namespace), or the tenant's own source.
    const { issuerRef, credentialsSecretRef: _, ...rest } = v.spec;
    const source =
      issuerRef !== undefined && this.#chance(0.5)
        ? { issuerRef }
        : this.#issuerMode
          ? { issuerRef: { name: 'tenant-keys' } }
          : { credentialsSecretRef: { name: 'neon-admin' }, ...(v.spec.scope !== 'Personal' ? { organizationId: this.#c.env.organizationId } : {}) };
    await this.#create(v.kind, name, { ...rest, ...source }, metadata);
  }

  // ---- the playbooks ----

  #untilSeen(kind: Kind, name: string, test: (s: Seen) => boolean, ms: number): Promise<boolean> {
    return (async () => {
      const end = Date.now() + ms;
      while (Date.now() < end && !this.#c.over()) {
        const s = this.#c.world.current.get(id(this.#ns, kind, name));
        if (s !== undefined && test(s)) return true;
        await sleep(200);
      }
      return false;
    })();
  }

  /** Runs one playbook (`stormMs`: how long a memory storm blows). */
  async play(playbook: Playbook, stormMs: number): Promise<void> {
    switch (playbook) {
      // 1 (issue 24): many big managed-labelled Secrets, an immutable ApiKey that never records a key, its credentials rewritten every 0.5 s.
      case 'memory-storm':
        return await this.#playbook(playbook, 'storm', (name) => this.#memoryStorm(name, stormMs));
      // 2 (issue 24): a replayed fulfilled intent and replayed Secret annotations over a recorded newer key.
      case 'forgotten-key':
        return await this.#playbook(playbook, 'forget', (name) => this.#forgottenKey(name));
      // 3 (issue 24): rotations that name the platform team's workloads, with no grace.
      case 'restart-door':
        return await this.#playbook(playbook, 'door', (name) => this.#restartDoor(name));
      // Issue 40: many creates at once against an issuer's cap.
      case 'cap-race':
        return await this.#playbook(playbook, 'cap', (name) => this.#capRace(name));
      // Issue 40: issuerRef switched on a Ready key, and another create through the issuer it left.
      case 'issuer-switch':
        return await this.#playbook(playbook, 'switch', (name) => this.#issuerSwitch(name));
      // Issue 40: the issuers, the tenant's Namespace labels and the issuers' Secrets, each asked for once.
      case 'platform-objects':
        return await this.#playbook(playbook, 'probe', async () => {
          for (const probe of this.#platformProbes()) await this.#platformProbe(probe);
          await this.#issuerInventory();
        });
      // Issue 41: the victims' organization named with credentials of a user who is not a member, and random organization ids.
      case 'foreign-organization':
        return await this.#playbook(playbook, 'foreign', (name) => this.#foreignOrganization(name));
      // Issue 41: revokes refused by the platform while the tenant deletes a Secret (a repair) and strips or forges the intent.
      case 'revoke-outage':
        return await this.#playbook(playbook, 'outage', (name) => this.#revokeOutage(name));
      // Issue 40/41: Retain, release-without-revoke and the finalizer's removal on a key an issuer made.
      case 'issuer-deletion':
        return await this.#playbook(playbook, 'deletion', (name) => this.#issuerDeletion(name));
      // Issue 41: a create committed by the platform whose answer is lost, while the tenant strips or replaces the intent.
      case 'lost-create':
        return await this.#playbook(playbook, 'lost', (name) => this.#lostCreate(name));
      // Issue 41: many workloads of its own, consenting or not, some fat, and rotations that discover them.
      case 'discover':
        return await this.#playbook(playbook, 'disc', (name) => this.#discover(name));
      // Issue 41: invalid intents rewritten on many resources in a loop while victims recover from lost creates.
      case 'requeue-storm':
        return await this.#playbook(playbook, 'flood', (name) => this.#requeueStorm(name, stormMs));
    }
  }

  async #playbook(playbook: Playbook, prefix: string, body: (name: string) => Promise<void>): Promise<void> {
    this.playbooks[playbook] = (this.playbooks[playbook] ?? 0) + 1;
    const name = this.#freshName(prefix);
    this.#busy.add(name);
    try {
      await body(name);
    } finally {
      this.#busy.delete(name);
    }
  }

  /** An issuer tenant's key as its playbooks make it: a Project key of the first project through tenant-keys. */
  #issuedSpec(issuer = 'tenant-keys'): Record<string, unknown> {
    return { projectId: this.#c.env.projectIds[0], issuerRef: { name: issuer }, deletionPolicy: 'Revoke' };
  }

  /**
   * Until the resource is Ready with a key (40 s at most). Refused for the cap (KeyLimitReached),
   * the tenant makes room as a team would: it deletes one of its own resources holding a key
   * through the same issuer, once.
   */
  async #untilIssued(kind: Kind, name: string, ms = 40_000): Promise<boolean> {
    const end = Date.now() + ms;
    let freed = false;
    while (Date.now() < end && !this.#c.over()) {
      const s = this.#c.world.current.get(id(this.#ns, kind, name));
      if (s?.ready === true && s.keyId !== undefined) return true;
      if (!freed && s?.reason === 'KeyLimitReached') {
        const holder = this.#mine().find((r) => r.name !== name && !this.#busy.has(r.name) && r.issuer === s.issuer && r.keyId !== undefined && !r.deleting);
        if (holder !== undefined) {
          await this.#deleteResource(holder);
          freed = true;
        }
      }
      await sleep(200);
    }
    return false;
  }

  async #memoryStorm(name: string, stormMs: number): Promise<void> {
    // The 120 big Secrets (the issue's 700 KiB, here 1000: a loaded apiserver writes few of them
    // in a short run, and their total is what a list of them with their data weighs) are written while the storm blows (writes of 700 KiB take the apiserver
    // a while: made first, the storm of a short run would never start).
    const batch = Array.from({ length: 120 }, (_, i) => `bulk-${i}`);
    const bulk = (async () => {
      // Made once: a long run's later storms find them there (rewriting 120 MiB each time would fill etcd).
      for (let i = 0; i < batch.length && !this.#c.over(); i += 4) {
        await Promise.all(
          batch
            .slice(i, i + 4)
            .filter((name) => !this.#bulkMade.has(name))
            .map(async (name) => {
              if (await this.#bigSecret(1000 * KIB, name)) this.#bulkMade.add(name);
            }),
        );
      }
    })();
    await this.#putSecret('credentials.rewrite', { metadata: { name: 'creds-storm' }, data: { other: Buffer.from('no apiKey entry').toString('base64') } });
    await this.#create('ApiKey', name, {
      scope: 'Organization',
      organizationId: this.#c.env.organizationId,
      credentialsSecretRef: { name: 'creds-storm' },
      secret: { immutable: true },
      deletionPolicy: 'Revoke',
    });
    const end = Date.now() + stormMs;
    // A write every 0.5 s, whatever the previous one's answer time (at most two in flight).
    let inFlight = 0;
    const writes: Promise<unknown>[] = [];
    for (let i = 0; Date.now() < end && !this.#c.over(); i += 1) {
      if (inFlight < 2) {
        // Mostly no apiKey entry (no key is ever recorded); every fourth write a new ~1 MiB value.
        const value = i % 4 === 3 ? this.#text(900 * KIB) : undefined;
        if (value !== undefined) this.credentialValues.add(value);
        inFlight += 1;
        writes.push(
          (async () => {
            await this.#putSecret('credentials.storm', {
              metadata: { name: 'creds-storm' },
              data: value === undefined ? { other: Buffer.from(`n${i}`).toString('base64') } : { apiKey: Buffer.from(value).toString('base64') },
            });
            if (i % 2 === 0)
              await this.#patchResource('resource.annotation-churn', 'ApiKey', name, { metadata: { annotations: { 'example.com/churn': String(i) } } });
            inFlight -= 1;
          })(),
        );
      }
      await sleep(500);
    }
    await Promise.all([bulk, ...writes]);
  }

  async #forgottenKey(name: string): Promise<void> {
    // With namespace credentials an organization key, whose repairs stop when the credentials point
    // at a missing Secret; through an issuer a project key, whose repairs stop at an issuer that
    // does not exist.
    const kind: Kind = this.#issuerMode ? 'ProjectApiKey' : 'ApiKey';
    const source = this.#issuerMode ? 'issuerRef' : 'credentialsSecretRef';
    const spec = this.#issuerMode
      ? { ...this.#issuedSpec(), keyName: `${this.#ns}-${name}` }
      : {
          scope: 'Organization',
          organizationId: this.#c.env.organizationId,
          keyName: `${this.#ns}-${name}`,
          credentialsSecretRef: { name: 'neon-admin' },
          deletionPolicy: 'Revoke',
        };
    const stop = this.#issuerMode ? { name: MISSING_ISSUER } : { name: 'creds-missing' };
    const restore = this.#issuerMode ? { name: 'tenant-keys' } : { name: 'neon-admin' };
    if (!(await this.#create(kind, name, spec))) return;
    if (!(await this.#untilIssued(kind, name))) return;
    const first = this.#c.world.current.get(id(this.#ns, kind, name))?.keyId;
    const resource = (await this.#t.objects
      .getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(kind), name })
      .catch(() => undefined)) as { metadata: { annotations?: Record<string, string> } } | undefined;
    const intent = resource?.metadata.annotations?.[PENDING];
    const secret = await this.#readSecret(name);
    const signed = Object.fromEntries(
      SIGNED.filter((k) => secret?.metadata?.annotations?.[k] !== undefined).map((k) => [k, secret!.metadata!.annotations![k]!]),
    );
    this.#c.journal.add(
      this.#who,
      intent === undefined ? 'playbook.forgotten-key.saved-secret-only' : 'playbook.forgotten-key.saved',
      this.#target(kind, name),
      'ok',
    );
    await this.#act('secret.delete', this.#target('Secret', name), () => this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name }));
    if (!(await this.#untilSeen(kind, name, (s) => s.ready && s.keyId !== undefined && s.keyId !== first, 30_000))) return;
    await this.#patchResource(`resource.spec.${source}`, kind, name, { spec: { [source]: stop } });
    await this.#untilSeen(kind, name, (s) => !s.ready, 10_000);
    if (intent !== undefined) await this.#patchResource('resource.annotations.replay-intent', kind, name, { metadata: { annotations: { [PENDING]: intent } } });
    await this.#patchSecret('secret.replay-annotations', name, { metadata: { annotations: signed } });
    await this.#patchResource(`resource.spec.${source}`, kind, name, { spec: { [source]: restore } });
    await this.#untilSeen(kind, name, (s) => s.ready, 20_000);
    if (this.#chance(0.5)) {
      await sleep(3_000);
      await this.#deleteResource({ kind, name });
    }
  }

  async #restartDoor(name: string): Promise<void> {
    const rotation = {
      gracePeriod: CHAOS_MIN_ROTATION_GRACE,
      maxGracePeriod: CHAOS_MIN_ROTATION_GRACE,
      restart: {
        discover: true,
        workloads: [
          { kind: 'Deployment', name: 'platform-api' },
          { kind: 'StatefulSet', name: 'platform-store' },
        ],
      },
    };
    const kind: Kind = this.#issuerMode ? 'ProjectApiKey' : 'ApiKey';
    const spec = this.#issuerMode
      ? { ...this.#issuedSpec(), rotation }
      : { scope: 'Organization', organizationId: this.#c.env.organizationId, credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke', rotation };
    if (!(await this.#create(kind, name, spec))) return;
    if (this.#issuerMode) await this.#untilIssued(kind, name);
    else await this.#untilSeen(kind, name, (s) => s.ready, 30_000);
    for (let i = 0; i < 3 && !this.#c.over(); i += 1) {
      await this.#patchResource('resource.rotate', kind, name, { metadata: { annotations: { 'keys.neon.dev/rotate': `door-${i}-${Date.now()}` } } });
      await sleep(3_000);
    }
  }

  /**
   * Ten creates at once through one capped issuer. Each racer ends Ready with a key or refused
   * (KeyLimitReached); a refused one must have cost no platform create: no key, live or revoked,
   * was ever made with its name (`<namespace>-<name>-<8 characters>`). How many may hold a key is
   * the audit's cap invariant (audit.ts).
   */
  async #capRace(prefix: string): Promise<void> {
    const issuer = this.#pick(['tenant-keys', 'tenant-extra']);
    const names = Array.from({ length: 10 }, (_, i) => `${prefix}-${i}`);
    for (const name of names) this.#busy.add(name);
    try {
      const made = await Promise.all(names.map((name) => this.#create('ProjectApiKey', name, this.#issuedSpec(issuer))));
      const racers = names.filter((_, i) => made[i]);
      const seen = (name: string): Seen | undefined => this.#c.world.current.get(id(this.#ns, 'ProjectApiKey', name));
      const refused = (s: Seen | undefined): boolean => s !== undefined && s.reason === 'KeyLimitReached' && s.keyId === undefined && s.settled;
      const end = Date.now() + 60_000;
      while (Date.now() < end && !this.#c.over() && !racers.every((n) => (seen(n)?.ready === true && seen(n)?.keyId !== undefined) || refused(seen(n))))
        await sleep(300);
      // The platform's keys first, then each refused racer read afresh: still refused, no key
      // recorded, no intent (written before any create, so a racer woken by a slot freed meanwhile
      // shows it), and never a key recorded in the watch.
      const keys = await admin<PlatformKey[]>(this.#c.env.emulator, 'GET', '/keys').catch(() => undefined);
      const still: string[] = [];
      for (const name of racers.filter((n) => refused(seen(n)))) {
        const fresh = (await this.#c.env.objects
          .getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: 'projectapikeys', name })
          .catch(() => undefined)) as
          | {
              metadata: { annotations?: Record<string, string> };
              status?: { keyId?: number; conditions?: { type: string; reason: string }[] };
            }
          | undefined;
        const reason = fresh?.status?.conditions?.find((c) => c.type === 'Ready')?.reason;
        if (
          fresh !== undefined &&
          reason === 'KeyLimitReached' &&
          fresh.status?.keyId === undefined &&
          fresh.metadata.annotations?.[PENDING] === undefined &&
          ![...this.#c.world.recordedBy.values()].some((set) => set.has(id(this.#ns, 'ProjectApiKey', name)))
        )
          still.push(name);
      }
      const holders = racers.filter((n) => seen(n)?.keyId !== undefined).length;
      this.#c.journal.add(this.#who, 'playbook.cap-race.settled', `${this.#ns}/${issuer}`, 'ok');
      this.capRaces.push({ issuer, racers: racers.length, holders, refused: still.length });
      for (const name of keys === undefined ? [] : still) {
        const attempt = new RegExp(`^${this.#ns}-${name}-[a-z0-9]{8}$`);
        const minted = keys!.filter((k) => attempt.test(k.name));
        if (minted.length > 0) {
          this.problems.push({
            invariant: ATTACKER_INVARIANTS[1],
            detail: `${this.#ns}/ProjectApiKey/${name} refused (KeyLimitReached, ${issuer}) but key(s) ${minted.map((k) => `${k.id} (${k.name}${k.revoked ? ', revoked' : ''})`).join(', ')} were made for it`,
            context: this.#c.journal.about(id(this.#ns, 'ProjectApiKey', name)),
          });
        }
      }
      await sleep(3_000);
      for (const name of racers) await this.#deleteResource({ kind: 'ProjectApiKey', name });
    } finally {
      for (const name of names) this.#busy.delete(name);
    }
  }

  /**
   * A Ready key's source switched: to the other issuer that allows it, to credentials of the
   * namespace (the tenant's own issued key, which mints nothing, or whatever neon-admin holds), to an
   * issuer that does not exist, and back; with its Secret deleted on the way now and then (a repair
   * the credentials of the moment must not make, or must make right). Before, the namespace is
   * filled up to the issuer's cap (probes through it until one is refused); once the key has moved
   * away, the refused probe is looked at again: the slot the moved key holds must not go to it (the
   * audit's cap invariant).
   */
  async #issuerSwitch(name: string): Promise<void> {
    const kind: Kind = 'ProjectApiKey';
    if (!(await this.#create(kind, name, this.#issuedSpec()))) return;
    if (!(await this.#untilIssued(kind, name))) return;
    const value = (await this.#readSecret(name))?.data?.apiKey;
    if (value !== undefined) {
      this.credentialValues.add(Buffer.from(value, 'base64').toString('utf8'));
      await this.#putSecret('credentials.rewrite', { metadata: { name: 'own-key' }, data: { apiKey: value } });
    }
    const probes: string[] = [];
    try {
      for (let i = 0; i < 5 && !this.#c.over(); i += 1) {
        const probe = this.#freshName('probe');
        this.#busy.add(probe);
        probes.push(probe);
        if (!(await this.#create(kind, probe, this.#issuedSpec()))) break;
        await this.#untilSeen(kind, probe, (s) => (s.ready && s.keyId !== undefined) || s.reason === 'KeyLimitReached', 15_000);
        if (this.#c.world.current.get(id(this.#ns, kind, probe))?.reason === 'KeyLimitReached') break;
      }
      const waiting = probes.at(-1);
      const steps: [string, Record<string, unknown>][] = [
        ['to-issuer', { issuerRef: { name: 'tenant-extra' } }],
        [
          'to-credentials',
          {
            issuerRef: null,
            organizationId: this.#c.env.organizationId,
            credentialsSecretRef: { name: this.#pick(['own-key', 'neon-admin', 'creds-missing']) },
          },
        ],
        ['to-missing-issuer', { credentialsSecretRef: null, issuerRef: { name: MISSING_ISSUER } }],
        ['back', { issuerRef: { name: 'tenant-keys' } }],
      ];
      for (const [what, spec] of steps) {
        if (this.#c.over()) break;
        await this.#patchResource(`playbook.issuer-switch.${what}`, kind, name, { spec });
        await sleep(2_000);
        // The waiting probe looked at again (its own edit wakes it).
        if (waiting !== undefined) await this.#patchResource('resource.labels', kind, waiting, { metadata: { labels: { 'example.com/nudge': what } } });
        if (this.#chance(0.4))
          await this.#act('secret.delete', this.#target('Secret', name), () => this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name }));
        await sleep(3_000);
      }
      await this.#untilSeen(kind, name, (s) => s.ready, 20_000);
      for (const probe of probes) await this.#deleteResource({ kind, name: probe });
      if (this.#chance(0.5)) await this.#deleteResource({ kind, name });
    } finally {
      for (const probe of probes) this.#busy.delete(probe);
    }
  }

  /**
   * Creates naming the victims' organization with the credentials of a user of no organization
   * (foreign-creds), and naming random valid-looking organization ids with the tenant's own
   * administrator (a member of the victims' organization only), both kinds. Each must end NotAllowed
   * (audit.ts checks, from the platform tap, that none of their creates reached the platform).
   */
  async #foreignOrganization(prefix: string): Promise<void> {
    const { organizationId, projectIds } = this.#c.env;
    const plans: { kind: Kind; spec: Record<string, unknown> }[] = [];
    for (const kind of ['ApiKey', 'ProjectApiKey'] as const) {
      const scope = kind === 'ApiKey' ? { scope: 'Organization' } : { projectId: this.#pick(projectIds) };
      plans.push({ kind, spec: { ...scope, organizationId, credentialsSecretRef: { name: FOREIGN_CREDENTIALS }, deletionPolicy: 'Revoke' } });
      for (let i = 0; i < 2; i += 1)
        plans.push({
          kind,
          spec: { ...scope, organizationId: randomOrganizationId(() => this.#r()), credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke' },
        });
    }
    const names: { kind: Kind; name: string }[] = [];
    try {
      for (const [i, plan] of plans.entries()) {
        const name = `${prefix}-${i}`;
        this.#busy.add(name);
        if (await this.#create(plan.kind, name, { ...plan.spec, keyName: `${this.#ns}-${name}` })) names.push({ kind: plan.kind, name });
      }
      const settled = (s: Seen | undefined): boolean => s !== undefined && s.reason !== '' && s.reason !== 'Creating' && s.reason !== 'Pending' && s.settled;
      const end = Date.now() + 40_000;
      while (Date.now() < end && !this.#c.over() && !names.every((n) => this.#c.world.current.get(id(this.#ns, n.kind, n.name))?.reason === 'NotAllowed'))
        await sleep(300);
      for (const n of names) {
        const s = this.#c.world.current.get(id(this.#ns, n.kind, n.name));
        this.foreign.resources += 1;
        if (s?.reason === 'NotAllowed' && s.keyId === undefined) {
          this.foreign.notAllowed += 1;
          continue;
        }
        const reason = s === undefined ? 'not seen' : s.keyId !== undefined ? `key ${s.keyId}` : s.reason === '' ? 'no condition' : s.reason;
        this.foreign.otherwise[reason] = (this.foreign.otherwise[reason] ?? 0) + 1;
        // Not reconciled within the wait (the attacks ended, a busy operator) is not a refusal of something else.
        if (s !== undefined && (s.keyId !== undefined || settled(s)) && !this.#c.over()) {
          this.problems.push({
            invariant: ATTACKER_INVARIANTS[2],
            detail: `${id(this.#ns, n.kind, n.name)} names organization ${String(plans[Number(n.name.split('-').at(-1))]?.spec.organizationId)} with credentials that do not belong to it, and is ${reason}${s.keyId === undefined ? `: ${s.message}` : ''}, not NotAllowed`,
            context: this.#c.journal.about(id(this.#ns, n.kind, n.name)),
          });
        }
      }
      this.#c.journal.add(this.#who, 'playbook.foreign-organization.settled', `${this.#ns}/${prefix}`, 'ok');
      for (const n of names) await this.#deleteResource(n);
    } finally {
      for (const [i] of plans.entries()) this.#busy.delete(`${prefix}-${i}`);
    }
  }

  /**
   * A Ready key; the platform answers 503 to every revoke for 10-20 s (disruptions.ts, one outage
   * at a time); meanwhile the tenant deletes the key's Secret (a repair: a new key, the old one's
   * revoke refused, so recorded in status.replacedKeys) and strips the create intent, forges one or
   * puts the old one back. Then revokes work again: the replaced key must end revoked, never live
   * and recorded nowhere (audit.ts), and after the resource's delete none of its keys is live.
   */
  async #revokeOutage(name: string): Promise<void> {
    const kind: Kind = this.#issuerMode ? 'ProjectApiKey' : 'ApiKey';
    const keyName = `${this.#ns}-${name}`;
    const spec = this.#issuerMode
      ? { ...this.#issuedSpec(), keyName }
      : { scope: 'Organization', organizationId: this.#c.env.organizationId, keyName, credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke' };
    if (!(await this.#create(kind, name, spec))) return;
    if (!(await this.#untilIssued(kind, name))) return;
    const first = this.#c.world.current.get(id(this.#ns, kind, name))?.keyId;
    const ms = this.#int(10, 20) * 1000;
    const record = { resource: id(this.#ns, kind, name), ms, replaced: first, inStatus: false, revokedAfterS: null as number | null };
    const saved = (await this.#t.objects
      .getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(kind), name })
      .catch(() => undefined)) as { metadata: { annotations?: Record<string, string> } } | undefined;
    if (this.#c.over()) return;
    const ran = await this.#c.disruptions.revokeOutage(this.#ns, ms, 30_000, this.#c.over, async (until) => {
      this.#c.journal.add(this.#who, 'playbook.revoke-outage.begin', `${this.#ns}/${ms}ms`, 'ok');
      await this.#act('secret.delete', this.#target('Secret', name), () => this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name }));
      // The repair records the new key and, its revoke refused, the old one beside it.
      await this.#untilSeen(kind, name, (s) => s.keyId !== undefined && s.keyId !== first, Math.max(0, until - Date.now() - 2_000));
      record.inStatus = first !== undefined && (this.#c.world.current.get(id(this.#ns, kind, name))?.retiring.includes(first) ?? false);
      const forged = JSON.stringify({
        attempt: `${keyName}-forged00`,
        startedAt: new Date().toISOString(),
        holder: 'gone',
        ...(first !== undefined ? { replaces: first } : {}),
        sig: 'A'.repeat(43),
      });
      const old = saved?.metadata.annotations?.[PENDING];
      const edits: [string, string | null][] = [
        ['strip-intent', null],
        ['forge-intent', forged],
        ...(old !== undefined ? [['replay-intent', old] as [string, string]] : []),
        ['strip-intent', null],
      ];
      for (const [what, value] of edits.filter(() => this.#chance(0.8))) {
        await this.#patchResource(`playbook.revoke-outage.${what}`, kind, name, { metadata: { annotations: { [PENDING]: value } } });
        await sleep(Math.min(1_500, Math.max(0, until - Date.now())));
      }
      return true;
    });
    if (ran === undefined) {
      this.#c.journal.add(this.#who, 'playbook.revoke-outage.skipped', `${this.#ns}/${name}`, 'ok');
      return;
    }
    const ended = Date.now();
    this.#c.journal.add(this.#who, 'playbook.revoke-outage.end', this.#target(kind, name), 'ok');
    // Until the replaced key is revoked (the audit judges it; this is the figure).
    while (first !== undefined && Date.now() - ended < 60_000 && !this.#c.over()) {
      const keys = await admin<PlatformKey[]>(this.#c.env.emulator, 'GET', '/keys').catch(() => []);
      if (keys.find((k) => k.id === first)?.revoked === true) {
        record.revokedAfterS = Math.round((Date.now() - ended) / 100) / 10;
        break;
      }
      await sleep(500);
    }
    this.outages.push(record);
    if (this.#chance(0.5)) await this.#deleteResource({ kind, name });
  }

  /**
   * A key an issuer made, and the tenant's ways to keep a key beyond its resource, each of which an
   * issuer's key must survive: deletionPolicy Retain (refused by the CRD with issuerRef: 422), Retain
   * with a switch to credentials of the namespace in the same write (accepted: status.issuer stays,
   * so the operator ignores it), keys.neon.dev/release-without-revoke, the finalizer removed before and
   * during the delete (the admission policy: 403). The key must end revoked once the resource is gone.
   */
  async #issuerDeletion(name: string): Promise<void> {
    const kind: Kind = 'ProjectApiKey';
    const issuer = this.#pick(['tenant-keys', 'tenant-extra']);
    if (!(await this.#create(kind, name, { ...this.#issuedSpec(issuer), keyName: `${this.#ns}-${name}` }))) return;
    // A slot freed during a revoke outage takes the outage to be revoked: a longer wait.
    if (!(await this.#untilIssued(kind, name, 90_000))) {
      this.#c.journal.add(this.#who, 'playbook.issuer-deletion.not-issued', this.#target(kind, name), 'ok');
      return;
    }
    const keyId = this.#c.world.current.get(id(this.#ns, kind, name))?.keyId;
    if (keyId === undefined) return;
    const target = this.#target(kind, name);
    const outcome = async (action: string, call: () => Promise<unknown>): Promise<string> => {
      let result: string;
      try {
        await call();
        result = 'ok';
      } catch (error) {
        result = error instanceof ApiException ? `refused ${error.code}` : `failed ${error instanceof Error ? error.message.slice(0, 80) : String(error)}`;
      }
      this.#c.journal.add(this.#who, `playbook.issuer-deletion.${action}`, target, result);
      return result;
    };
    const at = { group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(kind), name };
    const patch = (body: Record<string, unknown>) => () => this.#t.objects.patchNamespacedCustomObject({ ...at, body }, merge);
    const record = {
      resource: target,
      keyId,
      retain: '',
      retainSwitch: 'not tried',
      finalizer: '',
      finalizerDeleting: 'not tried',
      heldByCredentials: false,
      revoked: null as boolean | null,
    };
    const problem = (detail: string): void => {
      this.problems.push({
        invariant: ATTACKER_INVARIANTS[3],
        detail: `${target} (key ${keyId} made through an issuer): ${detail}`,
        context: this.#c.journal.about(target),
      });
    };
    record.retain = await outcome('retain', patch({ spec: { deletionPolicy: 'Retain' } }));
    if (record.retain === 'ok') problem('deletionPolicy Retain accepted with issuerRef (the CRD refuses it: 422)');
    if (this.#chance(0.5)) {
      // Accepted: the resource names credentials of the namespace now, but status.issuer says who made its key.
      record.retainSwitch = await outcome(
        'retain-with-credentials',
        patch({
          spec: {
            issuerRef: null,
            credentialsSecretRef: { name: this.#pick(['own-key', 'neon-admin', 'creds-missing']) },
            organizationId: this.#c.env.organizationId,
            deletionPolicy: 'Retain',
          },
        }),
      );
    }
    await outcome('release-without-revoke', patch({ metadata: { annotations: { 'keys.neon.dev/release-without-revoke': 'true' } } }));
    record.finalizer = await outcome('remove-finalizer', patch({ metadata: { finalizers: null } }));
    if (record.finalizer === 'ok') problem("the tenant removed the operator's finalizer (the admission policy refuses it: 403)");
    await this.#deleteResource({ kind, name });
    if (this.#c.world.current.has(id(this.#ns, kind, name))) {
      record.finalizerDeleting = await outcome('remove-finalizer-deleting', patch({ metadata: { finalizers: null } }));
      if (record.finalizerDeleting === 'ok')
        problem("the tenant removed the operator's finalizer while the resource was being deleted (the admission policy refuses it: 403)");
    }
    // Gone, and then its key revoked (the operator revokes before it lets the resource go). Moved to
    // credentials of the namespace, the delete revokes with those (docs/issuers.md "Deletion"): ones
    // that cannot revoke hold it, and the tenant puts the issuer back, as a team would.
    await this.#untilGone(kind, name, 20_000);
    if (record.retainSwitch === 'ok' && this.#c.world.current.has(id(this.#ns, kind, name)) && !this.#c.over()) {
      record.heldByCredentials = true;
      await outcome('back-to-issuer', patch({ spec: { issuerRef: { name: issuer }, credentialsSecretRef: null, deletionPolicy: 'Revoke' } }));
    }
    await this.#untilGone(kind, name, 40_000);
    if (!this.#c.world.current.has(id(this.#ns, kind, name))) {
      const end = Date.now() + 10_000;
      while (record.revoked !== true && Date.now() < end) {
        const keys = await admin<PlatformKey[]>(this.#c.env.emulator, 'GET', '/keys').catch(() => undefined);
        record.revoked = keys === undefined ? record.revoked : keys.find((k) => k.id === keyId)?.revoked === true;
        if (record.revoked !== true) await sleep(500);
      }
      if (record.revoked === false) problem('live 10 s after its resource is gone');
    }
    this.issuerDeletions.push(record);
  }

  /** The spec of a playbook's key: an organization ApiKey with neon-admin, or through an issuer a ProjectApiKey of `issuer`. */
  #playbookKey(keyName: string, issuer = 'tenant-keys'): { kind: Kind; spec: Record<string, unknown> } {
    return this.#issuerMode
      ? { kind: 'ProjectApiKey', spec: { ...this.#issuedSpec(issuer), keyName } }
      : {
          kind: 'ApiKey',
          spec: {
            scope: 'Organization',
            organizationId: this.#c.env.organizationId,
            keyName,
            credentialsSecretRef: { name: 'neon-admin' },
            deletionPolicy: 'Revoke',
          },
        };
  }

  /** A platform key's state (the emulator's admin API): undefined when the platform does not answer. */
  async #platformKey(keyId: number): Promise<PlatformKey | null | undefined> {
    const keys = await admin<PlatformKey[]>(this.#c.env.emulator, 'GET', '/keys').catch(() => undefined);
    return keys === undefined ? undefined : (keys.find((k) => k.id === keyId) ?? null);
  }

  /**
   * The platform commits a create but its answer never reaches the operator (the tap cuts the
   * connection: drop-after-commit), and the tenant strips the create intent, forges one or puts an
   * older one back, before the cut (the operator finds no intent of its attempt when it recovers)
   * or right after it. The key so made must end recorded by the resource or revoked (the orphan
   * path: its name carries the resource's tag), never live and recorded nowhere (audit.ts); the
   * figure here is which, and when.
   */
  async #lostCreate(name: string): Promise<void> {
    const keyName = `${this.#ns}-${name}`;
    const { kind, spec } = this.#playbookKey(keyName);
    const target = this.#target(kind, name);
    const older = this.#saved.intents.length > 0 ? this.#pick(this.#saved.intents) : undefined;
    const forged = JSON.stringify({ attempt: `${keyName}-forged00`, startedAt: new Date().toISOString(), holder: 'gone', sig: 'A'.repeat(43) });
    const edits: [string, string | null][] = [
      ['strip-intent', null],
      ['forge-intent', forged],
      ...(older !== undefined ? [['replay-older-intent', older] as [string, string]] : []),
    ];
    const [edit, value] = this.#pick(edits);
    const beforeCut = this.#chance(0.7);
    // Long: the tenant's own storms and big writes may hold its namespace's turn in the work queue a while.
    const drop = this.#c.tap.dropCreate(
      (n) => n.startsWith(`${keyName}-`),
      120_000,
      async () => {
        await this.#patchResource(`playbook.lost-create.${edit}`, kind, name, { metadata: { annotations: { [PENDING]: value } } });
      },
      !beforeCut,
    );
    if (!(await this.#create(kind, name, spec))) {
      await drop;
      return;
    }
    // Through an issuer, refused for the cap: the tenant makes room as a team would.
    if (this.#issuerMode) void this.#untilIssued(kind, name, 120_000);
    const dropped = await drop;
    if (dropped === undefined) {
      this.#c.journal.add(this.#who, 'playbook.lost-create.no-create', target, 'ok');
      return;
    }
    this.#c.journal.add(this.#who, 'playbook.lost-create.dropped', `${target} key ${dropped.keyId ?? '?'}`, 'ok');
    const record = {
      resource: target,
      keyId: dropped.keyId,
      edit,
      editBeforeCut: beforeCut,
      fate: 'unknown' as 'recorded' | 'revoked' | 'live, unrecorded' | 'unknown',
      afterS: null as number | null,
    };
    // Until the dropped key is revoked, or recorded by the resource (its key, or one it retires or replaced).
    const end = Date.now() + 90_000;
    while (dropped.keyId !== undefined && Date.now() < end) {
      const key = await this.#platformKey(dropped.keyId);
      const seen = this.#c.world.current.get(id(this.#ns, kind, name));
      const afterS = Math.round((Date.now() - dropped.at) / 100) / 10;
      if (key?.revoked === true) {
        Object.assign(record, { fate: 'revoked', afterS });
        break;
      }
      if (seen !== undefined && (seen.keyId === dropped.keyId || seen.retiring.includes(dropped.keyId))) Object.assign(record, { fate: 'recorded', afterS });
      else if (key !== undefined) Object.assign(record, { fate: 'live, unrecorded', afterS });
      // Recorded: watched a little longer (a record may still move on), then left to the audit.
      if (record.fate === 'recorded' && afterS > 20) break;
      await sleep(500);
    }
    this.lostCreates.push(record);
    this.#c.journal.add(this.#who, 'playbook.lost-create.settled', `${target} key ${dropped.keyId ?? '?'} ${record.fate}`, 'ok');
    if (this.#chance(0.5)) await this.#deleteResource({ kind, name });
  }

  /** Creates, reads or deletes a workload of the tenant's namespace, with its own token. */
  #workloadCall(kind: WorkloadKind, op: 'create', name: string, body: Workload): Promise<Workload>;
  #workloadCall(kind: WorkloadKind, op: 'read' | 'delete', name: string): Promise<unknown>;
  #workloadCall(kind: WorkloadKind, op: 'create' | 'read' | 'delete', name: string, body?: Workload): Promise<unknown> {
    const apps = this.#t.apps;
    const namespace = this.#ns;
    if (op === 'create') {
      if (kind === 'Deployment') return apps.createNamespacedDeployment({ namespace, body: body as V1Deployment });
      if (kind === 'StatefulSet') return apps.createNamespacedStatefulSet({ namespace, body: body as V1StatefulSet });
      return apps.createNamespacedDaemonSet({ namespace, body: body as V1DaemonSet });
    }
    if (op === 'read') {
      if (kind === 'Deployment') return apps.readNamespacedDeployment({ namespace, name });
      if (kind === 'StatefulSet') return apps.readNamespacedStatefulSet({ namespace, name });
      return apps.readNamespacedDaemonSet({ namespace, name });
    }
    if (kind === 'Deployment') return apps.deleteNamespacedDeployment({ namespace, name });
    if (kind === 'StatefulSet') return apps.deleteNamespacedStatefulSet({ namespace, name });
    return apps.deleteNamespacedDaemonSet({ namespace, name });
  }

  /**
   * Many workloads of the tenant's own reading DISCOVER_SECRET, Deployments, StatefulSets (replicas
   * 0) and DaemonSets (a node selector no node matches), half consenting to restarts for it
   * (keys.neon.dev/restart-on-rotation), some fat (200 KiB of annotations and a 300 KiB environment
   * value), and resources naming that Secret, rotated a few times: with rotation.restart.discover,
   * restart.workloads naming some consenting workloads of each kind and one that did not consent with
   * discover, or those named only (in turn). Then: a workload that did not consent is never changed; a
   * consenting one is restarted (its pod template's annotation: its generation) at most as many times
   * as the resources holding that Secret name rotated (keys made for them, less their first); without
   * discover, a consenting workload not named is not changed either; the victims' consenting workloads
   * are another namespace's (audit.ts). Only one round of a tenant at a time: the bound is per Secret name.
   */
  async #discover(name: string): Promise<void> {
    if (this.#discovering) return;
    this.#discovering = true;
    const workloads: { kind: WorkloadKind; name: string; consents: boolean; fat: boolean; generation: number; template: string; annotations: string }[] = [];
    const resources: { kind: Kind; name: string; keyName: string }[] = [];
    try {
      const count = this.#int(8, 16);
      for (let i = 0; i < count && !this.#c.over(); i += 1) {
        // Every kind both consenting and not within the first six.
        const kind = WORKLOAD_KINDS[i % 3]!;
        const consents = i % 2 === 0;
        const fat = i % 5 === 1 || i % 5 === 4;
        const workload = `${name}-w${i}`;
        const annotations: Record<string, string> = consents
          ? { [RESTART_CONSENT]: this.#pick([DISCOVER_SECRET, `other, ${DISCOVER_SECRET}`]) }
          : this.#chance(0.3)
            ? { [RESTART_CONSENT]: 'another-secret' }
            : {};
        if (fat) annotations['example.com/blob'] = this.#text(200 * KIB);
        const selector = { matchLabels: { app: workload } };
        const template = {
          metadata: { labels: { app: workload } },
          spec: {
            ...(kind === 'DaemonSet' ? { nodeSelector: NO_NODE } : {}),
            containers: [
              {
                name: 'app',
                image: 'example.invalid/app:1',
                envFrom: [{ secretRef: { name: DISCOVER_SECRET } }],
                ...(fat ? { env: [{ name: 'BLOB', value: this.#text(300 * KIB) }] } : {}),
              },
            ],
          },
        };
        const spec =
          kind === 'Deployment'
            ? { replicas: 0, selector, template }
            : kind === 'StatefulSet'
              ? { replicas: 0, serviceName: workload, selector, template }
              : { selector, template };
        let made: Workload | undefined;
        await this.#act(
          `playbook.discover.${kind.toLowerCase()}${consents ? '.consenting' : ''}${fat ? '.fat' : ''}`,
          `${this.#ns}/${kind}/${workload}`,
          async () => {
            made = await this.#workloadCall(kind, 'create', workload, {
              metadata: { name: workload, labels: { 'example.com/discover': name }, annotations },
              spec,
            } as Workload);
          },
        );
        if (made === undefined) continue;
        workloads.push({
          kind,
          name: workload,
          consents,
          fat,
          generation: made.metadata?.generation ?? 1,
          template: JSON.stringify(made.spec?.template),
          annotations: ownAnnotations(made),
        });
      }
      // In turn (by tenant and round, so a short run sees each): discover alone; workloads named (up to two
      // consenting ones of each kind, one that did not consent, one missing) and discover; named only.
      const mode = (this.#t.index + 1 + this.#discoverRounds++) % 3;
      const named =
        mode === 0
          ? []
          : [
              ...WORKLOAD_KINDS.flatMap((kind) => workloads.filter((w) => w.kind === kind && w.consents).slice(0, this.#int(1, 2))),
              ...workloads.filter((w) => !w.consents).slice(0, 1),
            ].map((w) => ({ kind: w.kind, name: w.name }));
      const discover = mode !== 2;
      const restart = { discover, ...(named.length > 0 ? { workloads: [...named, { kind: this.#pick(WORKLOAD_KINDS), name: `${name}-missing` }] } : {}) };
      // One resource holds the Secret name; now and then a second names it too (an older one holds it).
      const rotation = { gracePeriod: CHAOS_MIN_ROTATION_GRACE, maxGracePeriod: CHAOS_MIN_ROTATION_GRACE, restart };
      for (let i = 0; i < (this.#chance(0.4) ? 2 : 1); i += 1) {
        const keyName = `${this.#ns}-${name}-k${i}`;
        const { kind, spec } = this.#playbookKey(keyName, 'tenant-extra');
        const r = { kind, name: `${name}-k${i}`, keyName };
        this.#busy.add(r.name);
        if (await this.#create(kind, r.name, { ...spec, secret: { name: DISCOVER_SECRET }, rotation })) resources.push(r);
        if (i === 0) await this.#untilIssued(kind, r.name);
      }
      for (let round = 0; round < 3 && !this.#c.over(); round += 1) {
        for (const r of resources) {
          const before = this.#c.world.current.get(id(this.#ns, r.kind, r.name))?.keyId;
          await this.#patchResource('playbook.discover.rotate', r.kind, r.name, {
            metadata: { annotations: { 'keys.neon.dev/rotate': `disc-${round}-${Date.now()}` } },
          });
          await this.#untilSeen(r.kind, r.name, (s) => s.keyId !== before && s.retiring.length === 0, 20_000);
        }
      }
      // The restarts of the last rotation land within seconds of it.
      await sleep(3_000);
      // The workloads first, then the keys: a restart seen was made for a key the list then has.
      const read = await Promise.all(
        workloads.map(async (w) => ({
          w,
          now: await this.#workloadCall(w.kind, 'read', w.name).then(
            (x) => x as Workload,
            () => undefined,
          ),
        })),
      );
      const keys = await admin<PlatformKey[]>(this.#c.env.emulator, 'GET', '/keys').catch(() => undefined);
      if (keys === undefined) return;
      const rotations = resources.reduce((n, r) => n + Math.max(0, keys.filter((k) => k.name.startsWith(`${r.keyName}-`)).length - 1), 0);
      const byKind = Object.fromEntries(WORKLOAD_KINDS.map((k) => [k, { workloads: 0, consenting: 0, restarts: 0, othersChanged: 0 }]));
      const figure = {
        base: `${this.#ns}/${DISCOVER_SECRET}`,
        workloads: workloads.length,
        consenting: workloads.filter((w) => w.consents).length,
        fat: workloads.filter((w) => w.fat).length,
        resources: resources.length,
        discover,
        named: named.length,
        rotations,
        restarts: 0,
        othersChanged: 0,
        unnamedChanged: 0,
        byKind,
      };
      const isNamed = (w: { kind: WorkloadKind; name: string }): boolean => named.some((n) => n.kind === w.kind && n.name === w.name);
      for (const { w, now } of read) {
        if (now === undefined) continue;
        const kindFigure = byKind[w.kind]!;
        kindFigure.workloads += 1;
        const restarts = (now.metadata?.generation ?? w.generation) - w.generation;
        const changed = restarts !== 0 || JSON.stringify(now.spec?.template) !== w.template || ownAnnotations(now) !== w.annotations;
        const target = `${this.#ns}/${w.kind}/${w.name}`;
        const context = this.#c.journal
          .on(`${this.#ns}/`, 120)
          .filter((a) => /discover/.test(a))
          .slice(-12);
        if (w.consents) {
          kindFigure.consenting += 1;
          kindFigure.restarts += restarts;
          figure.restarts += restarts;
          if (restarts > rotations)
            this.problems.push({
              invariant: ATTACKER_INVARIANTS[4],
              detail: `${target} (consenting to ${DISCOVER_SECRET}) restarted ${restarts} times for ${rotations} rotation(s) of the ${resources.length} resource(s) holding that Secret name`,
              context,
            });
          if (!discover && !isNamed(w) && changed) {
            figure.unnamedChanged += 1;
            const detail = `${target} (consenting to ${DISCOVER_SECRET}, not named in restart.workloads, discover false) was changed: generation ${w.generation} -> ${now.metadata?.generation}`;
            this.problems.push({ invariant: ATTACKER_INVARIANTS[4], detail, context });
          }
        } else if (changed) {
          kindFigure.othersChanged += 1;
          figure.othersChanged += 1;
          const detail = `${target} (no consent to ${DISCOVER_SECRET}${isNamed(w) ? ', named in restart.workloads' : ''}) was changed: generation ${w.generation} -> ${now.metadata?.generation}`;
          this.problems.push({ invariant: ATTACKER_INVARIANTS[4], detail, context });
        }
      }
      this.discovers.push(figure);
      this.#c.journal.add(this.#who, 'playbook.discover.settled', `${this.#ns}/${name} ${rotations} rotations, ${figure.restarts} restarts`, 'ok');
    } finally {
      for (const r of resources) {
        await this.#deleteResource(r);
        this.#busy.delete(r.name);
      }
      for (const w of workloads)
        await this.#act('playbook.discover.workload-delete', `${this.#ns}/${w.kind}/${w.name}`, () => this.#workloadCall(w.kind, 'delete', w.name));
      this.#discovering = false;
    }
  }

  /**
   * A storm of wakes: 12 resources of the tenant (a few holding keys, the others waiting on
   * credentials or an issuer that are missing), each given an invalid create intent (garbage, a
   * fake signature, a forged attempt) again and again for the storm's length; meanwhile the answers
   * of two victims' creates are dropped after the platform committed them (the tap), so their
   * recovery (the paced retry after an ambiguous create) and the victims' rotations run through the
   * storm. The victims' times over the storms are reported apart (run.ts) and held to the bounds.
   */
  async #requeueStorm(prefix: string, stormMs: number): Promise<void> {
    const names = Array.from({ length: 12 }, (_, i) => `${prefix}-${i}`);
    for (const n of names) this.#busy.add(n);
    const made: { kind: Kind; name: string }[] = [];
    const figure = { resources: 0, writes: 0, seconds: 0, victimDrops: [] as DroppedCreate[] };
    try {
      for (const [i, n] of names.entries()) {
        const { kind, spec } = this.#playbookKey(`${this.#ns}-${n}`);
        const idle = this.#issuerMode ? { issuerRef: { name: MISSING_ISSUER } } : { credentialsSecretRef: { name: 'creds-missing' } };
        if (await this.#create(kind, n, i < (this.#issuerMode ? 1 : 3) ? spec : { ...spec, ...idle })) made.push({ kind, name: n });
      }
      figure.resources = made.length;
      if (made.length === 0 || this.#c.over()) return;
      const window = { from: Date.now(), to: undefined as number | undefined, by: this.#ns };
      this.#c.disruptions.storms.push(window);
      const end = Date.now() + Math.max(10_000, stormMs);
      this.#c.journal.add(this.#who, 'playbook.requeue-storm.begin', `${this.#ns}/${prefix}`, 'ok');
      const drops = (async () => {
        const victimDrops = this.#c.disruptions.victimDrops;
        for (let i = 0; i < 2 && Date.now() < end - 5_000; i += 1) {
          // One armed at a time across the storms, and a victim's resource dropped once (not its recovery's create as well).
          while (victimDrops.armed && Date.now() < end - 5_000) await sleep(500);
          if (victimDrops.armed) break;
          victimDrops.armed = true;
          const d = await this.#c.tap
            .dropCreate((n) => VICTIM_ATTEMPT.test(n) && !victimDrops.bases.has(n.slice(0, -9)), Math.max(0, end - Date.now() - 5_000))
            .finally(() => {
              victimDrops.armed = false;
            });
          if (d !== undefined) {
            victimDrops.bases.add(d.keyName.slice(0, -9));
            figure.victimDrops.push(d);
            this.#c.journal.add(this.#who, 'playbook.requeue-storm.victim-create-dropped', `${d.keyName} key ${d.keyId ?? '?'}`, 'ok');
          }
        }
      })();
      const invalid = (): string =>
        this.#pick([
          this.#text(this.#int(1, 64), '{}[]":,ab'),
          JSON.stringify({ attempt: `${this.#ns}-x-${this.#text(8)}`, startedAt: new Date().toISOString(), holder: 'storm', sig: this.#text(43) }),
          JSON.stringify({ attempt: 42, sig: null }),
        ]);
      // Four writers over the resources, as fast as the apiserver takes them.
      await Promise.all(
        Array.from({ length: 4 }, async (_, w) => {
          for (let i = w; Date.now() < end && !this.#c.over(); i += 4) {
            const r = made[i % made.length]!;
            if (await this.#patchResource('playbook.requeue-storm.intent', r.kind, r.name, { metadata: { annotations: { [PENDING]: invalid() } } }))
              figure.writes += 1;
          }
        }),
      );
      window.to = Date.now();
      figure.seconds = Math.round((window.to - window.from) / 100) / 10;
      await drops;
      this.#c.journal.add(this.#who, 'playbook.requeue-storm.end', `${this.#ns}/${prefix} ${figure.writes} writes`, 'ok');
    } finally {
      this.storms.push(figure);
      for (const r of made) await this.#deleteResource(r);
      for (const n of names) this.#busy.delete(n);
    }
  }

  async #untilGone(kind: Kind, name: string, ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (Date.now() < end && !this.#c.over() && this.#c.world.current.has(id(this.#ns, kind, name))) await sleep(200);
  }

  /** Everything the tenant wrote that could hold a key, put right so its resources can be deleted (the end of the run). */
  async leave(): Promise<string[]> {
    // Credentials that can revoke: the administrator's key in neon-admin, or an issuer of the tenant's
    // (an organization's list shows every organization and project key to each of its administrators).
    if (this.#t.userKey !== undefined)
      await this.#putSecret('leave.credentials', { metadata: { name: 'neon-admin' }, data: { apiKey: Buffer.from(this.#t.userKey).toString('base64') } });
    // deletionPolicy Revoke too: an issuer with Retain is refused (a resource the issuer-deletion playbook moved to credentials with Retain).
    const source = this.#issuerMode
      ? { issuerRef: { name: 'tenant-keys' }, credentialsSecretRef: null, deletionPolicy: 'Revoke' }
      : { credentialsSecretRef: { name: 'neon-admin', key: 'apiKey' }, issuerRef: null };
    const names: string[] = [];
    for (const r of this.#mine()) {
      // A resource that named an issuer with no organizationId needs one with credentials of the namespace.
      if (!(await this.#patchResource('leave.credentials-ref', r.kind, r.name, { spec: source })) && !this.#issuerMode) {
        await this.#patchResource('leave.credentials-ref', r.kind, r.name, { spec: { ...source, organizationId: this.#c.env.organizationId } });
      }
      await this.#deleteResource(r);
      names.push(id(this.#ns, r.kind, r.name));
    }
    return names;
  }
}
