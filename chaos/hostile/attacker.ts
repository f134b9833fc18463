// A hostile tenant: random actions, with its own ServiceAccount token only, over every field it can
// write in its namespace (spec values valid and not, ids of other namespaces' keys and projects,
// annotations and labels of its resources and Secrets up to the apiserver's sizes, Secret data,
// replays of what the operator wrote, copies of the victims' objects, wake storms), and three
// playbooks, each the attack of issue 24 step by step: the memory storm, the forgotten key, the
// restart of workloads that never consented. Every action is journaled (world.ts).
// Left out on purpose, because they are the tenant's sanctioned ways to keep a key beyond its
// resource (docs/security.md): deletionPolicy Retain, keys.neon.dev/release-without-revoke,
// removing the finalizer, and keys.neon.dev/abandon-key naming the resource's own key.
import { ApiException, PatchStrategy, setHeaderOptions, type V1Secret } from '@kubernetes/client-node';
import type { Environment } from '../environment.ts';
import { sleep } from '../options.ts';
import { GROUP, VERSION, type Cast, type Tenant } from './cluster.ts';
import { id, plural, type Journal, type Kind, type ResourceWatch } from './world.ts';

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
}

interface Saved { intents: string[]; secretMeta: Record<string, string>[]; values: string[] }

export class Attacker {
  readonly #t: Tenant;
  readonly #c: AttackerContext;
  readonly #who: string;
  readonly #saved: Saved = { intents: [], secretMeta: [], values: [] };
  /** Every value written into a credentials entry (the leak check searches the log for them). */
  readonly credentialValues = new Set<string>();
  #generation = 0;
  /** Resources of a playbook in progress: random actions leave them to it. */
  readonly #busy = new Set<string>();
  #bulk = 0;
  readonly #bulkMade = new Set<string>();
  readonly playbooks = { 'memory-storm': 0, 'forgotten-key': 0, 'restart-door': 0 };

  constructor(tenant: Tenant, context: AttackerContext) {
    this.#t = tenant;
    this.#c = context;
    this.#who = `tenant-${tenant.index}`;
    this.credentialValues.add(tenant.userKey);
  }

  // ---- random helpers (every choice from the seeded source) ----
  #r(): number { return this.#c.random(); }
  #chance(p: number): boolean { return this.#r() < p; }
  #int(lo: number, hi: number): number { return lo + Math.floor(this.#r() * (hi - lo + 1)); }
  #pick<T>(items: readonly T[]): T { return items[Math.floor(this.#r() * items.length)] as T; }
  #text(length: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
    // Long values: a random block repeated (the content matters less than the size; cheap to make).
    const block = Array.from({ length: Math.min(length, 4096) }, () => alphabet[Math.floor(this.#r() * alphabet.length)]).join('');
    return block.repeat(Math.ceil(length / block.length)).slice(0, length);
  }

  get #ns(): string { return this.#t.namespace; }

  /** The tenant's resources as the administrator's watch sees them. */
  #mine(): { kind: Kind; name: string; uid: string; keyId: number | undefined; secretName: string | undefined; ready: boolean; reason: string }[] {
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
    const name = roll < 0.6 ? 'neon-admin' : roll < 0.75 ? 'creds-storm' : roll < 0.85 ? 'creds-odd' : roll < 0.95 ? 'creds-missing' : this.#text(this.#int(1, 253), 'abc');
    return this.#chance(0.9) ? { name } : { name, key: this.#pick(['token', 'missing-entry', this.#text(253, 'xyz'), 'apiKey']) };
  }

  #spec(kind: Kind, name: string): Record<string, unknown> {
    const { organizationId, projectIds, emulator } = this.#c.env;
    const otherProjects = emulator.bootstrap.projects.filter((p) => p.organizationId !== organizationId).map((p) => p.id);
    const org = this.#chance(0.85) ? organizationId : this.#pick(['org-does-not-exist-00000000', emulator.bootstrap.organizations.find((o) => o.id !== organizationId)?.id ?? 'org-other-1', 'ORG BAD', 'org-' + this.#text(60)]);
    const spec: Record<string, unknown> = { credentialsSecretRef: this.#credentialsRef(), deletionPolicy: 'Revoke' };
    const keyName = this.#keyName(name);
    if (keyName !== undefined) spec.keyName = keyName;
    if (kind === 'ApiKey') {
      spec.scope = this.#chance(0.6) ? 'Organization' : 'Personal';
      if (spec.scope === 'Organization' || this.#chance(0.05)) spec.organizationId = org;
    } else {
      spec.organizationId = org;
      spec.projectId = this.#chance(0.8) ? this.#pick(projectIds) : this.#pick([...otherProjects, 'no-such-project-12345678', 'p'.repeat(64)]);
    }
    if (this.#chance(0.5)) spec.secret = this.#secretTarget(name);
    if (this.#chance(0.4)) spec.rotation = this.#rotation();
    if (this.#chance(0.1)) spec.usage = { unusedAfter: this.#pick(['1s', '720h', '0s']) };
    return spec;
  }

  #secretTarget(name: string): Record<string, unknown> {
    const target: Record<string, unknown> = {};
    if (this.#chance(0.4)) target.name = this.#pick([`${name}-out`, 'shared-out', this.#c.cast.workloadSecret, 'neon-admin', 'creds-storm', `bulk-${this.#int(0, 5)}`]);
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
        workloads: [{ kind: 'Deployment', name: 'platform-api' }, { kind: 'StatefulSet', name: 'platform-store' }, { kind: 'DaemonSet', name: 'no-such' }].filter(() => this.#chance(0.7)),
      };
    }
    return rotation;
  }

  // ---- actions ----

  async #create(kind: Kind, name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}): Promise<boolean> {
    return await this.#act('resource.create', this.#target(kind, name), () => this.#t.objects.createNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(kind),
      body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name, ...metadata }, spec },
    }));
  }

  async #patchResource(action: string, kind: Kind, name: string, body: Record<string, unknown>): Promise<boolean> {
    return await this.#act(action, this.#target(kind, name), () => this.#t.objects.patchNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(kind), name, body,
    }, merge));
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
        await this.#t.core.replaceNamespacedSecret({ namespace: this.#ns, name, body: { ...secret, metadata: { ...secret.metadata, resourceVersion: current.metadata?.resourceVersion } } });
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
        const full = await this.#t.objects.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(r.kind), name: r.name }) as { metadata: { annotations?: Record<string, string> } };
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
      await this.#create(kind, name, this.#spec(kind, name));
      return;
    }
    if (roll < 15) return await this.#copyVictim();
    if (roll < 23) return await this.#editSpec(some.kind, some.name);
    if (roll < 26) return await this.#bigAnnotations(some.kind, some.name);
    if (roll < 36) return await this.#operatorAnnotations(some.kind, some.name, some.keyId);
    if (roll < 39) return void await this.#patchResource('resource.labels', some.kind, some.name, { metadata: { labels: { ...MANAGED, [`example.com/l${this.#int(0, 9)}`]: this.#text(this.#int(0, 63), 'ab') } } });
    if (roll < 45) return await this.#rotate(some.kind, some.name);
    if (roll < 50) return await this.#deleteResource(some);
    if (roll < 58) return await this.#secretData(some.secretName ?? some.name);
    if (roll < 64) return await this.#replaySecretAnnotations(some.secretName ?? some.name);
    if (roll < 68) return await this.#copySecret(some.secretName ?? some.name);
    if (roll < 72) return void await this.#bigSecret();
    if (roll < 77) return void await this.#act('secret.delete', this.#target('Secret', some.secretName ?? some.name), () => this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name: some.secretName ?? some.name }));
    if (roll < 84) return await this.#rewriteCredentials(this.#pick(['creds-storm', 'creds-odd', 'neon-admin']));

    await this.#observe();
  }

  async #deleteResource(r: { kind: Kind; name: string }): Promise<void> {
    await this.#act('resource.delete', this.#target(r.kind, r.name), () => this.#t.objects.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: plural(r.kind), name: r.name }));
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
      const forged = { attempt: victim?.keyName ?? `${name}-abcdefgh`, startedAt: '2001-01-01T00:00:00Z', holder: 'gone', ...(victim?.keyId !== undefined ? { replaces: victim.keyId } : {}) };
      annotations = { [PENDING]: this.#pick([JSON.stringify(forged), JSON.stringify({ ...forged, sig: 'A'.repeat(43) }), victim?.intent ?? '{', this.#text(this.#int(1, 200 * KIB))]) };
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
        'keys.neon.dev/key-id': String(victim?.keyId ?? 1), 'keys.neon.dev/key-name': victim?.keyName ?? 'x',
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
      await this.#patchResource('resource.rotation-restart', kind, name, { spec: { rotation: { gracePeriod: '0s', maxGracePeriod: '0s', restart: { discover: true, workloads: [{ kind: 'Deployment', name: 'platform-api' }, { kind: 'StatefulSet', name: 'platform-store' }] } } } });
    }
    await this.#patchResource('resource.rotate', kind, name, { metadata: { annotations: { 'keys.neon.dev/rotate': `r${Date.now()}-${this.#int(0, 1e6)}` } } });
  }

  async #secretData(secretName: string): Promise<void> {
    const roll = this.#r();
    const other = this.#saved.values.length > 0 ? this.#pick(this.#saved.values) : undefined;
    const value = roll < 0.25 ? this.#text(this.#int(100 * KIB, 900 * KIB)) : roll < 0.4 ? '' : roll < 0.6 ? this.#text(this.#int(1, 80), '!@#$%^&*()_+ \n\t') : roll < 0.8 && other !== undefined ? other : this.#text(64);
    const key = this.#chance(0.85) ? 'apiKey' : this.#pick(['token', 'other']);
    await this.#patchSecret('secret.data', secretName, { data: { [key]: Buffer.from(value).toString('base64') } });
  }

  async #replaySecretAnnotations(secretName: string): Promise<void> {
    const saved = this.#saved.secretMeta.length > 0 ? this.#pick(this.#saved.secretMeta) : undefined;
    const victim = this.#c.intel().length > 0 ? this.#pick(this.#c.intel()) : undefined;
    const annotations = saved !== undefined && this.#chance(0.7) ? saved : victim?.secretAnnotations ?? {};
    const uids = [...this.#mine().map((r) => ({ uid: r.uid, kind: r.kind, name: r.name })), ...(victim !== undefined ? [{ uid: victim.uid, kind: victim.kind, name: victim.name }] : [])];
    const owner = uids.length > 0 && this.#chance(0.4) ? this.#pick(uids) : undefined;
    await this.#patchSecret('secret.replay-annotations', secretName, {
      metadata: {
        annotations, labels: MANAGED,
        ...(owner !== undefined ? { ownerReferences: [{ apiVersion: `${GROUP}/${VERSION}`, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: false }] } : {}),
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
        name, labels: source.metadata?.labels ?? MANAGED, annotations: source.metadata?.annotations ?? {},
        ...(owner !== undefined ? { ownerReferences: [{ apiVersion: `${GROUP}/${VERSION}`, kind: owner.kind, name: owner.name, uid: owner.uid, controller: true, blockOwnerDeletion: false }] } : {}),
      },
      data: source.data ?? {},
    });
  }

  /** A managed-labelled Secret near the apiserver's ~1 MiB, made or rewritten. */
  async #bigSecret(size = this.#int(500, 1000) * KIB, name = `bulk-${this.#bulk++ % 160}`): Promise<boolean> {
    return await this.#putSecret('secret.big', {
      metadata: { name, labels: MANAGED, annotations: { 'keys.neon.dev/owner': this.#pick(['ApiKey/r1', 'ProjectApiKey/r2', this.#text(this.#int(1, 200 * KIB))]) } },
      data: { apiKey: Buffer.from(this.#text(size - 400)).toString('base64') },
    });
  }

  async #rewriteCredentials(name: string, value?: string): Promise<void> {
    const roll = this.#r();
    const others = this.#c.cast.tenants.filter((t) => t.index !== this.#t.index).map((t) => t.userKey);
    // neon-admin always holds a key that works (its own or another tenant's administrator's): the
    // tenant still wants keys issued; the others get anything.
    const v = value ?? (name === 'neon-admin' ? (roll < 0.7 || others.length === 0 ? this.#t.userKey : this.#pick(others)) : roll < 0.3 ? this.#t.userKey : roll < 0.45 && others.length > 0 ? this.#pick(others) : roll < 0.65 ? this.#text(this.#int(65, 900 * KIB)) : roll < 0.75 ? '' : roll < 0.9 ? undefined : this.#text(64));
    if (v !== undefined && v.length >= 16) this.credentialValues.add(v);
    await this.#putSecret('credentials.rewrite', { metadata: { name }, data: v === undefined ? { other: Buffer.from(this.#text(16)).toString('base64') } : { apiKey: Buffer.from(v).toString('base64') } });
  }

  async #copyVictim(): Promise<void> {
    const victims = this.#c.intel();
    if (victims.length === 0) return;
    const v = this.#pick(victims);
    const name = this.#chance(0.5) && !this.#mine().some((r) => r.name === v.name) ? v.name : this.#freshName('copy-r');
    const metadata: Record<string, unknown> = {
      finalizers: ['keys.neon.dev/finalizer'],
      annotations: { ...(v.intent !== undefined ? { [PENDING]: v.intent } : { [PENDING]: JSON.stringify({ attempt: v.keyName, startedAt: '2001-01-01T00:00:00Z', holder: 'gone', replaces: v.keyId }) }) },
    };
    // The Secret first, with the victim's signed annotations, so it is in place before any key.
    await this.#putSecret('secret.copy-victim', { metadata: { name, labels: MANAGED, annotations: v.secretAnnotations }, data: { apiKey: Buffer.from(this.#text(64)).toString('base64') } });
    await this.#create(v.kind, name, { ...v.spec, credentialsSecretRef: { name: 'neon-admin' } }, metadata);
  }

  // ---- the playbooks of issue 24 ----

  #untilSeen(kind: Kind, name: string, test: (s: { ready: boolean; keyId: number | undefined; reason: string }) => boolean, ms: number): Promise<boolean> {
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

  /** 1: many big managed-labelled Secrets, an immutable ApiKey that never records a key, its credentials rewritten every 0.5 s. */
  async memoryStorm(stormMs: number): Promise<void> {
    await this.#playbook('memory-storm', 'storm', (name) => this.#memoryStorm(name, stormMs));
  }

  /** 2: a replayed fulfilled intent and replayed Secret annotations over a recorded newer key. */
  async forgottenKey(): Promise<void> {
    await this.#playbook('forgotten-key', 'forget', (name) => this.#forgottenKey(name));
  }

  /** 3: rotations that name the platform team's workloads, with no grace. */
  async restartDoor(): Promise<void> {
    await this.#playbook('restart-door', 'door', (name) => this.#restartDoor(name));
  }

  async #playbook(playbook: keyof Attacker['playbooks'], prefix: string, body: (name: string) => Promise<void>): Promise<void> {
    this.playbooks[playbook] += 1;
    const name = this.#freshName(prefix);
    this.#busy.add(name);
    try {
      await body(name);
    } finally {
      this.#busy.delete(name);
    }
  }

  async #memoryStorm(name: string, stormMs: number): Promise<void> {
    // The 120 big Secrets (the 700 KiB, here 1000: a loaded apiserver writes few of them
    // in a short run, and their total is what a list of them with their data weighs) are written while the storm blows (writes of 700 KiB take the apiserver
    // a while: made first, the storm of a short run would never start).
    const batch = Array.from({ length: 120 }, (_, i) => `bulk-${i}`);
    const bulk = (async () => {
      // Made once: a long run's later storms find them there (rewriting 120 MiB each time would fill etcd).
      for (let i = 0; i < batch.length && !this.#c.over(); i += 4) {
        await Promise.all(batch.slice(i, i + 4).filter((name) => !this.#bulkMade.has(name)).map(async (name) => {
          if (await this.#bigSecret(1000 * KIB, name)) this.#bulkMade.add(name);
        }));
      }
    })();
    await this.#putSecret('credentials.rewrite', { metadata: { name: 'creds-storm' }, data: { other: Buffer.from('no apiKey entry').toString('base64') } });
    await this.#create('ApiKey', name, { scope: 'Organization', organizationId: this.#c.env.organizationId, credentialsSecretRef: { name: 'creds-storm' }, secret: { immutable: true }, deletionPolicy: 'Revoke' });
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
        writes.push((async () => {
          await this.#putSecret('credentials.storm', { metadata: { name: 'creds-storm' }, data: value === undefined ? { other: Buffer.from(`n${i}`).toString('base64') } : { apiKey: Buffer.from(value).toString('base64') } });
          if (i % 2 === 0) await this.#patchResource('resource.annotation-churn', 'ApiKey', name, { metadata: { annotations: { 'example.com/churn': String(i) } } });
          inFlight -= 1;
        })());
      }
      await sleep(500);
    }
    await Promise.all([bulk, ...writes]);
  }

  async #forgottenKey(name: string): Promise<void> {
    if (!await this.#create('ApiKey', name, { scope: 'Organization', organizationId: this.#c.env.organizationId, keyName: `${this.#ns}-${name}`, credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke' })) return;
    if (!await this.#untilSeen('ApiKey', name, (s) => s.ready && s.keyId !== undefined, 30_000)) return;
    const first = this.#c.world.current.get(id(this.#ns, 'ApiKey', name))?.keyId;
    const resource = await this.#t.objects.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: this.#ns, plural: 'apikeys', name }).catch(() => undefined) as { metadata: { annotations?: Record<string, string> } } | undefined;
    const intent = resource?.metadata.annotations?.[PENDING];
    const secret = await this.#readSecret(name);
    const signed = Object.fromEntries(SIGNED.filter((k) => secret?.metadata?.annotations?.[k] !== undefined).map((k) => [k, secret!.metadata!.annotations![k]!]));
    this.#c.journal.add(this.#who, intent === undefined ? 'playbook.forgotten-key.saved-secret-only' : 'playbook.forgotten-key.saved', this.#target('ApiKey', name), 'ok');
    await this.#act('secret.delete', this.#target('Secret', name), () => this.#t.core.deleteNamespacedSecret({ namespace: this.#ns, name }));
    if (!await this.#untilSeen('ApiKey', name, (s) => s.ready && s.keyId !== undefined && s.keyId !== first, 30_000)) return;
    await this.#patchResource('resource.spec.credentialsSecretRef', 'ApiKey', name, { spec: { credentialsSecretRef: { name: 'creds-missing' } } });
    await this.#untilSeen('ApiKey', name, (s) => !s.ready, 10_000);
    if (intent !== undefined) await this.#patchResource('resource.annotations.replay-intent', 'ApiKey', name, { metadata: { annotations: { [PENDING]: intent } } });
    await this.#patchSecret('secret.replay-annotations', name, { metadata: { annotations: signed } });
    await this.#patchResource('resource.spec.credentialsSecretRef', 'ApiKey', name, { spec: { credentialsSecretRef: { name: 'neon-admin' } } });
    await this.#untilSeen('ApiKey', name, (s) => s.ready, 20_000);
    if (this.#chance(0.5)) {
      await sleep(3_000);
      await this.#deleteResource({ kind: 'ApiKey', name });
    }
  }

  async #restartDoor(name: string): Promise<void> {
    const rotation = { gracePeriod: '0s', maxGracePeriod: '0s', restart: { discover: true, workloads: [{ kind: 'Deployment', name: 'platform-api' }, { kind: 'StatefulSet', name: 'platform-store' }] } };
    if (!await this.#create('ApiKey', name, {
      scope: 'Organization', organizationId: this.#c.env.organizationId, credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke', rotation,
    })) return;
    await this.#untilSeen('ApiKey', name, (s) => s.ready, 30_000);
    for (let i = 0; i < 3 && !this.#c.over(); i += 1) {
      await this.#patchResource('resource.rotate', 'ApiKey', name, { metadata: { annotations: { 'keys.neon.dev/rotate': `door-${i}-${Date.now()}` } } });
      await sleep(3_000);
    }
  }

  /** Everything the tenant wrote that could hold a key, put right so its resources can be deleted (the end of the run). */
  async leave(): Promise<string[]> {
    await this.#putSecret('leave.credentials', { metadata: { name: 'neon-admin' }, data: { apiKey: Buffer.from(this.#t.userKey).toString('base64') } });
    const names: string[] = [];
    for (const r of this.#mine()) {
      await this.#patchResource('leave.credentials-ref', r.kind, r.name, { spec: { credentialsSecretRef: { name: 'neon-admin', key: 'apiKey' } } });
      await this.#deleteResource(r);
      names.push(id(this.#ns, r.kind, r.name));
    }
    return names;
  }
}
