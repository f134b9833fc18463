// What users and the outside world do to the operator's resources during a campaign: create
// ApiKeys (personal and organization) and ProjectApiKeys, delete them, and force drift repairs
// by deleting or editing their Secrets and by revoking their keys on the platform, and rotate keys
// (on request, and on a one-minute schedule) with a short grace.
// Every slot's incarnation has its own resource name and keyName, so after the run each platform
// key can be traced to the one resource that asked for it.
import { ApiException, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { NAMESPACE, type Environment } from './environment.ts';

export type Kind = 'ApiKey' | 'ProjectApiKey';
export const GROUP = 'keys.neon.dev';
export const VERSION = 'v1alpha1';
export const plural = (kind: Kind): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');

export interface Incarnation {
  kind: Kind;
  name: string;
  /** spec.keyName: attempt names are `${keyName}-<8 chars>`. */
  keyName: string;
  /** How the key is revoked by hand: personal or organization route. */
  scope: 'Personal' | 'Organization' | 'Project';
  createdAt: number;
}

interface Slot {
  index: number;
  incarnation: number;
  live?: Incarnation;
}

export interface WorkloadCounts {
  creates: number;
  deletes: number;
  secretDeletes: number;
  secretEdits: number;
  externalRevokes: number;
  /** Rotations requested (keys.neon.dev/rotate). */
  rotations: number;
  /** Calls that failed because the apiserver was restarting, etc. */
  errors: number;
  /** Platform requests made by the campaign itself (external revokes), not by the operator. */
  platformRequests: number;
}

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class Workload {
  readonly #env: Environment;
  readonly #random: () => number;
  readonly #slots: Slot[];
  readonly deleted: Incarnation[] = [];
  readonly counts: WorkloadCounts = {
    creates: 0,
    deletes: 0,
    secretDeletes: 0,
    secretEdits: 0,
    externalRevokes: 0,
    rotations: 0,
    errors: 0,
    platformRequests: 0,
  };

  constructor(env: Environment, resources: number, random: () => number) {
    this.#env = env;
    this.#random = random;
    this.#slots = Array.from({ length: resources }, (_, index) => ({ index, incarnation: 0 }));
  }

  get live(): Incarnation[] {
    return this.#slots.flatMap((s) => (s.live === undefined ? [] : [s.live]));
  }

  #pick<T>(items: T[]): T | undefined {
    return items[Math.floor(this.#random() * items.length)];
  }

  async createAll(): Promise<void> {
    await Promise.all(this.#slots.map((slot) => this.#create(slot)));
  }

  /** One random action; returns the created incarnation when it created one. */
  async step(): Promise<Incarnation | undefined> {
    const empty = this.#slots.filter((s) => s.live === undefined);
    const full = this.#slots.filter((s) => s.live !== undefined);
    const roll = this.#random();
    if (empty.length > 0 && (roll < 0.3 || full.length === 0)) {
      const slot = this.#pick(empty);
      return slot === undefined ? undefined : await this.#create(slot);
    }
    const slot = this.#pick(full);
    const live = slot?.live;
    if (slot === undefined || live === undefined) return undefined;
    // Young resources are mostly left alone for a moment (they are still being created); some are
    // deleted mid-create on purpose.
    if (Date.now() - live.createdAt < 8_000 && roll >= 0.38) return undefined;
    if (roll < 0.5) await this.#delete(slot, live);
    else if (roll < 0.62) await this.#deleteSecret(live);
    else if (roll < 0.7) await this.#editSecret(live);
    else if (roll < 0.85) await this.#rotate(live);
    else await this.#revokeExternally(live);
    return undefined;
  }

  async #create(slot: Slot): Promise<Incarnation | undefined> {
    slot.incarnation += 1;
    const flavour = slot.index % 3;
    const kind: Kind = flavour === 2 ? 'ProjectApiKey' : 'ApiKey';
    const name = `c${slot.index}-g${slot.incarnation}`;
    const keyName = `chaos-${slot.index}-g${slot.incarnation}`;
    const { organizationId, projectIds } = this.#env;
    // Every key rotates: on request (#rotate) and, for every other slot, each minute on its own;
    // the old key is kept for a short grace, so kills land in every step of a rotation.
    const rotation = { gracePeriod: '2s', maxGracePeriod: '8s', ...(slot.index % 2 === 0 ? { interval: '1m' } : {}) };
    const base = { keyName, credentialsSecretRef: { name: 'neon-admin' }, deletionPolicy: 'Revoke', rotation };
    const spec =
      flavour === 0
        ? { ...base, scope: 'Personal' }
        : flavour === 1
          ? { ...base, scope: 'Organization', organizationId }
          : { ...base, organizationId, projectId: projectIds[slot.index % projectIds.length] };
    const incarnation: Incarnation = {
      kind,
      name,
      keyName,
      scope: flavour === 0 ? 'Personal' : flavour === 1 ? 'Organization' : 'Project',
      createdAt: Date.now(),
    };
    try {
      await this.#env.objects.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural: plural(kind),
        body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name, namespace: NAMESPACE }, spec },
      });
    } catch (error) {
      // 409: the create reached etcd before the apiserver went away (we retried it).
      if (!(error instanceof ApiException && error.code === 409)) {
        this.counts.errors += 1;
        slot.incarnation -= 1;
        return undefined;
      }
    }
    this.counts.creates += 1;
    slot.live = incarnation;
    return incarnation;
  }

  async #delete(slot: Slot, live: Incarnation): Promise<void> {
    try {
      await this.#env.objects.deleteNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural: plural(live.kind),
        name: live.name,
      });
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 404)) {
        this.counts.errors += 1;
        return;
      }
    }
    this.counts.deletes += 1;
    this.deleted.push(live);
    delete slot.live;
  }

  async #rotate(live: Incarnation): Promise<void> {
    try {
      await this.#env.objects.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: NAMESPACE,
          plural: plural(live.kind),
          name: live.name,
          body: { metadata: { annotations: { 'keys.neon.dev/rotate': `chaos-${Date.now()}` } } },
        },
        merge,
      );
      this.counts.rotations += 1;
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 404)) this.counts.errors += 1;
    }
  }

  async #deleteSecret(live: Incarnation): Promise<void> {
    try {
      await this.#env.core.deleteNamespacedSecret({ namespace: NAMESPACE, name: live.name });
      this.counts.secretDeletes += 1;
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 404)) this.counts.errors += 1;
    }
  }

  async #editSecret(live: Incarnation): Promise<void> {
    try {
      await this.#env.core.patchNamespacedSecret(
        {
          namespace: NAMESPACE,
          name: live.name,
          body: { data: { apiKey: Buffer.from('tampered').toString('base64') } },
        },
        merge,
      );
      this.counts.secretEdits += 1;
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 404)) this.counts.errors += 1;
    }
  }

  async #revokeExternally(live: Incarnation): Promise<void> {
    let keyId: number | undefined;
    try {
      const resource = (await this.#env.objects.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural: plural(live.kind),
        name: live.name,
      })) as { status?: { keyId?: number } };
      keyId = resource.status?.keyId;
    } catch {
      this.counts.errors += 1;
      return;
    }
    if (keyId === undefined) return;
    const path = live.scope === 'Personal' ? `/api_keys/${keyId}` : `/organizations/${this.#env.organizationId}/api_keys/${keyId}`;
    // The platform is faulty too for this caller: a few tries.
    for (let attempt = 0; attempt < 5; attempt += 1) {
      this.counts.platformRequests += 1;
      try {
        const response = await fetch(`${this.#env.emulator.baseUrl}${path}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${this.#env.adminKey}` },
          signal: AbortSignal.timeout(5_000),
        });
        await response.body?.cancel();
        if (response.ok || response.status === 404) {
          this.counts.externalRevokes += 1;
          return;
        }
      } catch {
        // reset or latency fault: try again
      }
    }
    this.counts.errors += 1;
  }
}
