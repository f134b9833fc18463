// The inventory controller's reconcile (docs/inventory.md): read the ApiKeyInventory and its
// credentials Secret (of its own namespace, or of an issuer for an inventory of the operator's
// namespace: credentials-source.ts), read the key list through the drift cache (the
// very list the key domain takes for that scope and credentials: no request of its own when one is
// taken), mark each key managed or not from the key ids the informers' caches of key resources record (no LIST),
// and write the report to status. Report only: nothing is ever revoked or written on the platform.
import type { Logger } from 'pino';
import { MAX_API_KEY_LENGTH, isApiKeyFormat, type AuthDetails } from '../../platform/index.ts';
import type { ReconcileResult, Reconciler, Request } from '../runtime/workers.ts';
import { objectRef, type OwnWrites } from '../runtime/own-writes.ts';
import { MERGE_PATCH, type CoreClient, type CustomObjectsClient } from '../runtime/kube-client.ts';
import { GROUP, VERSION } from '../resources/schema.ts';
import { ApiKeyInventorySpec, INVENTORY_KIND, INVENTORY_PLURAL, type ApiKeyInventory, type ApiKeyInventoryStatus } from '../resources/inventory.ts';
import { ISSUER_PLURAL } from '../resources/issuer.ts';
import { parseGoDuration } from '../go-duration.ts';
import { asPlatformFailure, listFor, type DriftCache, type KeyPlatform } from '../keys/index.ts';
import { listFailed, listed, withReady, type ReadyUpdate } from './conditions.ts';
import { inventorySource, type InventoryIssuers, type IssuerObject } from './credentials-source.ts';
import { recordKeyEvents, type InventoryEvents } from './events.ts';
import type { InventoryCounts } from './metrics.ts';
import { inventoryView, type KeptListing } from './listing.ts';
import { originsOf, withOrigins } from './origins.ts';
import { report, reportStatus } from './report.ts';
import { sameJson } from '../resources/same-json.ts';

/** How many credentials' GET /auth answers are remembered (asked only after a refused list). */
const MAX_AUTH = 256;

export interface InventoryDeps {
  objects: Pick<CustomObjectsClient, 'getNamespacedCustomObject' | 'patchNamespacedCustomObjectStatus' | 'getClusterCustomObject'>;
  core: Pick<CoreClient, 'readNamespacedSecret'>;
  drift: Pick<DriftCache, 'listing'>;
  /** The platform client of one credentials, with its id (the key domain's: keys/platform-clients.ts). */
  platformFor(apiKey: string): { platform: Pick<KeyPlatform, 'listOrganizationKeys' | 'listPersonalKeys' | 'getAuth'>; credentialsId: string };
  /** The key ids key resources of this cluster record (status.keyId, retiringKeys), from the caches: one scan per reconcile. */
  managedKeyIds(): ReadonlySet<number>;
  events: InventoryEvents;
  /** Which inventories may name a ClusterKeyIssuer, and where its credentials are (credentials-source.ts). */
  issuers: InventoryIssuers;
  driftIntervalMs: number;
  /** This cluster's name (--cluster-name), '' or absent for none: what a key's name must carry to be this cluster's (origins.ts). */
  clusterName?: string;
  ownWrites?: OwnWrites;
  now?: () => number;
}

function statusCode(error: unknown): number | undefined {
  const e = error as { code?: unknown; statusCode?: unknown };
  return typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : undefined;
}

/**
 * What this process knows of an inventory between reconciles: its last list, the ids it found
 * managed and not, its counts (the gauge), and the keys released since (`released`).
 */
interface Known {
  /** The metadata.generation it was made for. */
  generation: number;
  listedAt: number;
  managed: Set<number>;
  notManaged: Set<number>;
  /**
   * Keys managed at the last report whose resource is gone from the caches, with when that was
   * seen. A resource deleted with deletionPolicy Revoke leaves the caches once its key is revoked,
   * but a list taken before the revocation still shows the key: until a list taken after the
   * release shows it, it counts as managed (else each deletion read as a key by hand appearing,
   * with its event). One still listed after that was retained: not managed from then on.
   */
  released: Map<number, number>;
  counts: InventoryCounts;
}

export class InventoryReconciler implements Reconciler {
  readonly #d: InventoryDeps;
  readonly #now: () => number;
  /** By uid. */
  readonly #known = new Map<string, Known>();
  /** By `namespace/name`: the uid whose counts the gauge shows. */
  readonly #uids = new Map<string, string>();
  readonly #auth = new Map<string, AuthDetails>();

  constructor(deps: InventoryDeps) {
    this.#d = deps;
    this.#now = deps.now ?? Date.now;
  }

  /** The counts of every inventory this process reported (the gauge, inventory/metrics.ts). */
  counts(): Iterable<InventoryCounts> {
    return [...this.#known.values()].map((k) => k.counts);
  }

  async reconcile(request: Request, logger: Logger): Promise<ReconcileResult> {
    const { namespace, name } = request;
    let inventory: ApiKeyInventory;
    try {
      inventory = (await this.#d.objects.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: INVENTORY_PLURAL,
        name,
      })) as ApiKeyInventory;
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      this.#forget(`${namespace}/${name}`);
      return { type: 'Done' };
    }
    const ref = `${namespace}/${name}`;
    const previousUid = this.#uids.get(ref);
    if (previousUid !== undefined && previousUid !== inventory.metadata.uid) this.#forget(ref);
    const parsed = ApiKeyInventorySpec.safeParse(inventory.spec);
    const unusedAfterMs = parsed.success ? parseGoDuration(parsed.data.unusedAfter) : undefined;
    if (!parsed.success || unusedAfterMs === undefined) {
      const message = parsed.success
        ? `spec.unusedAfter: not a duration: ${parsed.data.unusedAfter.slice(0, 64)}`
        : parsed.error.issues
            .map((i) => `spec.${i.path.join('.')}: ${i.message}`)
            .join('; ')
            .slice(0, 1024);
      await this.#writeStatus(inventory, {}, { status: 'False', reason: 'InvalidSpec', message });
      // A spec change wakes it (the informer); nothing else can fix it.
      return { type: 'Done' };
    }
    const spec = parsed.data;
    const scope = spec.scope;
    const source = await inventorySource(namespace, spec, this.#d.issuers, (issuer) => this.#readIssuer(issuer));
    if ('refusal' in source) {
      const { reason, message } = source.refusal;
      // No platform request. A change of the inventory wakes it; of the issuer, an issuer's
      // reconcile (issuers/reconciler.ts: every resource naming it, inventories of this namespace too).
      const wrote = await this.#writeStatus(inventory, {}, { status: 'False', reason, message });
      if (wrote && reason !== 'InvalidSpec') {
        logger.info({ reason }, 'inventory refused');
        await this.#d.events.record(inventory, reason, message);
      }
      // An issuer made later wakes it (its first reconcile); one deleted by hand, or not this operator's, is read again each interval.
      return reason === 'IssuerNotFound' ? { type: 'Done', requeueAfterMs: this.#d.driftIntervalMs } : { type: 'Done' };
    }
    const { secret, organizationId } = source;
    const apiKey = await this.#credentials(secret.namespace, secret.name, secret.key);
    if (apiKey === 'missing' || apiKey === 'not-a-key') {
      // The credentials Secret's watch wakes it when the Secret changes (keys/watches.ts, CREDENTIALS_INDEX);
      // an issuer's wakes the issuer, whose reconcile wakes it.
      const what =
        source.issuer !== undefined
          ? `the credentials Secret ${secret.namespace}/${secret.name} of ClusterKeyIssuer ${source.issuer}`
          : `the credentials Secret ${secret.name}`;
      await this.#writeStatus(
        inventory,
        {},
        {
          status: 'False',
          reason: 'CredentialsMissing',
          message:
            apiKey === 'missing'
              ? `${what} (key ${secret.key}) is missing or empty${source.issuer !== undefined ? '' : ' in this namespace'}; put a platform API key there`
              : `the entry ${secret.key} of ${what} is not a platform API key (at most ${MAX_API_KEY_LENGTH} visible ASCII characters); put a platform API key there`,
        },
      );
      return { type: 'Done' };
    }
    const client = this.#d.platformFor(apiKey);
    let listing: { at: number; view: KeptListing };
    try {
      const view = withOrigins(
        inventoryView(unusedAfterMs, () => this.#d.managedKeyIds()),
        this.#d.clusterName ?? '',
      );
      listing = await this.#d.drift.listing(client.credentialsId, listFor(organizationId), client.platform as KeyPlatform, view);
    } catch (error) {
      const failure = asPlatformFailure(error);
      let auth: AuthDetails | undefined;
      if (failure?.code === 'FORBIDDEN') auth = await this.#authOf(client).catch(() => undefined);
      const ready = listFailed(failure, scope, auth);
      logger.warn({ code: failure?.code ?? 'unknown', reason: ready.reason }, 'inventory list failed');
      await this.#writeStatus(inventory, {}, ready);
      // The cache remembers the failure for the interval; new credentials (a Secret change) are asked at once.
      return { type: 'Done', requeueAfterMs: this.#d.driftIntervalMs };
    }
    // What the previous report knew counts only for the same spec: another organization, scope or
    // credentials is a first list again (no event for each of its keys).
    const generation = inventory.metadata.generation ?? 0;
    const sameSpec = inventory.status?.observedGeneration === generation;
    const remembered = this.#known.get(inventory.metadata.uid);
    const known = remembered?.generation === generation ? remembered : undefined;
    const now = this.#now();
    const recorded = this.#d.managedKeyIds();
    const released = new Map<number, number>();
    for (const [id, since] of known?.released ?? []) if (listing.at <= since) released.set(id, since);
    for (const id of known?.managed ?? []) if (!recorded.has(id) && !released.has(id)) released.set(id, now);
    const isManaged = (id: number): boolean => recorded.has(id) || released.has(id);
    const previousAt = known?.listedAt ?? (sameSpec && inventory.status?.listedAt !== undefined ? Date.parse(inventory.status.listedAt) : undefined);
    const fresh = previousAt === undefined || listing.at > previousAt + (known === undefined ? 999 : 0);
    const origins = originsOf(listing.view, this.#d.clusterName ?? '');
    const r = report({
      listing: listing.view,
      isManaged,
      unusedAfterMs,
      listedAt: listing.at,
      scope,
      ...(origins !== undefined ? { origins: { rows: origins, cluster: this.#d.clusterName ?? '' } } : {}),
      ...(previousAt !== undefined && Number.isFinite(previousAt) && fresh
        ? { previous: { listedAt: previousAt, ...(known !== undefined ? { notManaged: known.notManaged } : {}) } }
        : {}),
    });
    const counts: InventoryCounts = {
      namespace,
      name,
      organizationId,
      live: r.live,
      managed: r.managed,
      notManaged: r.notManaged,
      unused: r.unused,
      notManagedByOrigin: r.notManagedByOrigin,
    };
    const managed = new Set<number>();
    const notManaged = new Set<number>();
    for (const id of listing.view.ids) (isManaged(id) ? managed : notManaged).add(id);
    // A released key the list no longer shows needs no more care.
    for (const id of released.keys()) if (!managed.has(id)) released.delete(id);
    this.#known.set(inventory.metadata.uid, { generation, listedAt: listing.at, managed, notManaged, released, counts });
    this.#uids.set(ref, inventory.metadata.uid);
    await this.#writeStatus(inventory, reportStatus(r, listing.at), listed(r.live, r.managed, r.notManaged, r.unused, r.withoutDetails));
    if (fresh) await recordKeyEvents(this.#d.events, inventory, r.appeared, r.wentUnused);
    // Looked at again once the list is an interval old: the drift cache (or this reconcile) takes it again then.
    const next = Math.max(1_000, listing.at + this.#d.driftIntervalMs - this.#now() + 1_000);
    return { type: 'Done', requeueAfterMs: next };
  }

  #forget(ref: string): void {
    const uid = this.#uids.get(ref);
    if (uid !== undefined) this.#known.delete(uid);
    this.#uids.delete(ref);
  }

  async #authOf(client: ReturnType<InventoryDeps['platformFor']>): Promise<AuthDetails> {
    const known = this.#auth.get(client.credentialsId);
    if (known !== undefined) return known;
    const auth = await client.platform.getAuth();
    this.#auth.set(client.credentialsId, auth);
    for (const id of this.#auth.keys()) {
      if (this.#auth.size <= MAX_AUTH) break;
      this.#auth.delete(id);
    }
    return auth;
  }

  /** The ClusterKeyIssuer of this name, fresh from the apiserver; undefined when there is none. */
  async #readIssuer(name: string): Promise<IssuerObject | undefined> {
    try {
      return (await this.#d.objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: ISSUER_PLURAL, name })) as IssuerObject;
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  /**
   * The API key in the credentials Secret (of the inventory's own namespace, or an issuer's): 'missing', 'not-a-key'
   * (measured before it is decoded, as keys/observe.ts does: an entry of any size longer than any
   * API key never reaches a platform client), or the key.
   */
  async #credentials(namespace: string, name: string, key: string): Promise<string | 'missing' | 'not-a-key'> {
    try {
      const secret = await this.#d.core.readNamespacedSecret({ namespace, name });
      const encoded = secret.data?.[key];
      if (encoded === undefined) return 'missing';
      if (encoded.length > 4 * Math.ceil((MAX_API_KEY_LENGTH + 64) / 3)) return 'not-a-key';
      const value = Buffer.from(encoded, 'base64').toString('utf8').trim();
      return value === '' ? 'missing' : isApiKeyFormat(value) ? value : 'not-a-key';
    } catch (error) {
      if (statusCode(error) === 404) return 'missing';
      throw error;
    }
  }

  /**
   * Writes the report (fields absent from `fields` keep what status says: a failed list leaves the
   * last report in place, dated by listedAt) and Ready, when anything changed; whether it wrote.
   */
  async #writeStatus(
    inventory: ApiKeyInventory,
    fields: Omit<ApiKeyInventoryStatus, 'conditions' | 'observedGeneration'>,
    ready: ReadyUpdate,
  ): Promise<boolean> {
    const generation = inventory.metadata.generation ?? 0;
    const current = inventory.status ?? {};
    const conditions = withReady(current.conditions, ready, generation, new Date(this.#now()));
    const next: ApiKeyInventoryStatus = { ...current, ...fields, observedGeneration: generation, conditions };
    if (sameJson(next, current)) return false;
    const patched = (await this.#d.objects.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        namespace: inventory.metadata.namespace,
        plural: INVENTORY_PLURAL,
        name: inventory.metadata.name,
        body: { metadata: { resourceVersion: inventory.metadata.resourceVersion }, status: next },
      },
      MERGE_PATCH,
    )) as ApiKeyInventory;
    this.#d.ownWrites?.record(
      objectRef(INVENTORY_KIND, inventory.metadata.namespace, inventory.metadata.name),
      inventory.metadata.resourceVersion,
      patched.metadata?.resourceVersion,
    );
    return true;
  }
}
