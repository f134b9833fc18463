// Drift detection (docs/design.md section 3.5): ONE list call per (credentials, scope) per interval
// shows every managed key of that scope, instead of one call per key. Reconciles of many resources
// share the snapshot; concurrent refreshes share one request. The check one reconcile makes of its
// recorded key through these lists is drift-check.ts.
import type { KeyAdapter, KeyPlatform, ListedKey, ListedUse } from '../adapter.ts';
import { attemptTagOf } from '../issuing/create-intent.ts';

/**
 * What a reader of a whole list (an inventory, src/operator/inventory) keeps of it: made from the
 * platform's answer when the list is taken, which is then dropped (the drift snapshot keeps each
 * key's use only). The maker bounds what it keeps (inventory/listing.ts); `id` names what it keeps,
 * so readers that keep the same share it.
 */
export interface ListingView<T> {
  id: string;
  make(listed: readonly ListedKey[], at: number): T;
  /**
   * This view from another one made from the same list (`other`, of id `otherId`), or undefined
   * when that does not keep enough: a reader asking for a view the list was not taken for then gets
   * it without a new list (the list's age alone decides when it is taken again).
   */
  from?(otherId: string, other: unknown): T | undefined;
}

/** The most views kept of one list (readers keeping different things); past it, the least recently asked goes. */
const MAX_LISTING_VIEWS = 4;

const CREATED_AT_MARGIN_MS = 5_000;

/**
 * The most lists (credentials and scope) the cache keeps, with their snapshots and failures: each
 * distinct credentials value asked with makes its own (a credentials Secret rewritten with a new
 * value every second makes a new one each time). Past it, the least recently asked goes first
 * (docs/security.md, Bounds); a list dropped is taken again when next asked.
 */
export const MAX_DRIFT_LISTS = 1_024;

interface Snapshot<T> { at: number; value: T }

/** A listed key whose name carries an attempt tag: its id and creation time (ms). */
export interface TaggedKey { id: number; createdAt: number | undefined }

/**
 * The keys of a list by the attempt tag their names carry (about 100 bytes a key named by the
 * operator; a key named otherwise costs nothing).
 */
function taggedKeys(listed: readonly ListedKey[]): Map<string, TaggedKey[]> {
  const byTag = new Map<string, TaggedKey[]>();
  for (const key of listed) {
    const tag = attemptTagOf(key.name);
    if (tag === undefined) continue;
    const createdAt = key.created_at !== undefined ? Date.parse(key.created_at) : Number.NaN;
    const entry = { id: key.id, createdAt: Number.isFinite(createdAt) ? createdAt : undefined };
    const keys = byTag.get(tag);
    if (keys === undefined) byTag.set(tag, [entry]);
    else keys.push(entry);
  }
  return byTag;
}

function listedUse(key: ListedKey): ListedUse {
  return { id: key.id, last_used_at: key.last_used_at, last_used_from_addr: key.last_used_from_addr };
}

/**
 * What a refreshed list no longer shows that the list before it did: keys revoked (by anyone) and
 * projects that left an organization since. The resources resting on them are woken at once
 * (manager.ts), so drift is caught when the list is taken, not one more interval later when each
 * resource's own pass comes round to the new list.
 */
export type DriftGone =
  /** `resources`: the work-queue keys of keys issued lately that a list taken after their create's answer does not show (not at rest yet). */
  | { what: 'keys'; credentialsId: string; listScope: string; ids: number[]; resources: string[] }
  | { what: 'projects'; credentialsId: string; organizationId: string; ids: string[] };

export class DriftCache {
  readonly #intervalMs: number;
  readonly #now: () => number;
  readonly #onGone: ((gone: DriftGone) => void) | undefined;
  readonly #keys = new Map<string, Snapshot<Map<number, ListedUse>>>();
  readonly #projects = new Map<string, Snapshot<Set<string>>>();
  readonly #inflight = new Map<string, Promise<unknown>>();
  /** Per key list: its keys by attempt tag, as last taken (tagged()). */
  readonly #tagged = new Map<string, { at: number; keys: Map<string, TaggedKey[]> }>();
  readonly #failures = new Map<string, { at: number; error: unknown }>();
  /**
   * The lists checks asked for within the last interval and a half, with what refreshes them: taken
   * again when they are an interval old, checks or not (refreshDue). Refreshed only when a check
   * came round to an expired list, a list was up to one more check spacing late; for a scope with
   * few resources that is up to another interval (the checks are jittered up to 1.1 intervals), and
   * a bench run at a 1 min interval caught a project leaving its organization after 71 s.
   */
  readonly #scopes = new Map<string, { askedAt: number; refresh: () => Promise<unknown> }>();
  /**
   * What readers of whole lists keep of them (listing(): one view per ListingView id, made by the
   * same request as the drift snapshot, which keeps only each key's use); at -Infinity until the
   * list is first taken for it. A view no reader asked for in an interval and a half is no longer
   * made (its inventory is gone, or reads another list), though checks keep the list.
   */
  readonly #views = new Map<string, Map<string, Snapshot<unknown> & { make: ListingView<unknown>['make']; askedAt: number }>>();
  /**
   * Per list: keys issued lately (issued()) that no list has shown yet, with when their create was
   * answered and their resource's work-queue key. Such a key is in no list before it, so the
   * comparison of two lists (DriftGone) never sees it go: one revoked a few seconds after its
   * create was found only at the second check of its resource, 2.5 intervals later (issue 25).
   * An entry leaves once a list shows the key (from then on the comparison covers it), two intervals
   * after the answer (a list taken after the answer that does not show it has woken its resource),
   * or with its list.
   * Memory: about 150 bytes per key issued within the last interval (at the platform's 10 creates
   * per second per organization and a 5 min interval, at most 3,000 entries, ~0.5 MiB, per organization).
   */
  readonly #issued = new Map<string, Map<number, { at: number; resource: string; told?: boolean }>>();

  constructor(intervalMs: number, now: () => number = Date.now, onGone?: (gone: DriftGone) => void) {
    this.#intervalMs = intervalMs;
    this.#now = now;
    this.#onGone = onGone;
  }

  /**
   * Takes again every list asked for lately that is an interval old (the sweep calls this about
   * every second): a change on the platform is seen, and the resources on it woken (onGone), within
   * one interval of it, however the checks of the resources fall. A list no check asked for in an
   * interval and a half is no longer taken (its resources are gone, or on other credentials).
   */
  refreshDue(): void {
    const now = this.#now();
    for (const [id, scope] of this.#scopes) {
      if (now - scope.askedAt > 1.5 * this.#intervalMs) {
        this.#forget(id);
        continue;
      }
      const taken = Math.max(this.#keys.get(id)?.at ?? this.#projects.get(id)?.at ?? -Infinity, this.#failures.get(id)?.at ?? -Infinity);
      if (now - taken >= this.#intervalMs && !this.#inflight.has(id)) scope.refresh().catch(() => undefined);
    }
  }

  #asked(id: string, refresh: () => Promise<unknown>): void {
    // Kept in the order last asked: the first is the one to drop.
    this.#scopes.delete(id);
    this.#scopes.set(id, { askedAt: this.#now(), refresh });
    for (const oldest of this.#scopes.keys()) {
      if (this.#scopes.size <= MAX_DRIFT_LISTS) break;
      this.#forget(oldest);
    }
  }

  /** A list nobody asks for: its snapshot and failure go with it (a list in flight ends on its own). */
  #forget(id: string): void {
    this.#scopes.delete(id);
    this.#keys.delete(id);
    this.#projects.delete(id);
    this.#failures.delete(id);
    this.#views.delete(id);
    this.#issued.delete(id);
    this.#tagged.delete(id);
  }

  /** How many lists are kept (tests: bounded). */
  get size(): number {
    return Math.max(this.#scopes.size, this.#keys.size + this.#projects.size, this.#failures.size);
  }

  async #fresh<T>(cache: Map<string, Snapshot<T>>, id: string, load: () => Promise<T>, maxAgeMs = this.#intervalMs, gone?: (before: T | undefined, after: T, at: number) => void): Promise<Snapshot<T>> {
    const cached = cache.get(id);
    if (cached !== undefined && this.#now() - cached.at < maxAgeMs) return cached;
    // A failed list is remembered for the interval too: every resource on broken credentials (or
    // an unavailable platform) asks once per interval, not once per resource and requeue. Fixed
    // credentials are other credentials (another id), asked at once.
    const failed = this.#failures.get(id);
    if (failed !== undefined && this.#now() - failed.at < maxAgeMs) throw failed.error;
    const running = this.#inflight.get(id) as Promise<Snapshot<T>> | undefined;
    if (running !== undefined) return running;
    const at = this.#now();
    // Kept only while the list is asked for (a list dropped meanwhile keeps nothing: #forget).
    const promise = load().then((value) => {
      const snapshot = { at, value };
      const before = cache.get(id);
      if (this.#scopes.has(id)) cache.set(id, snapshot);
      gone?.(before?.value, value, at);
      this.#failures.delete(id);
      return snapshot;
    }, (error: unknown) => {
      if (this.#scopes.has(id)) this.#failures.set(id, { at, error });
      throw error;
    }).finally(() => this.#inflight.delete(id));
    this.#inflight.set(id, promise);
    return promise;
  }

  /**
   * Live / Absent for a recorded key. A key created after the list was taken is not in it, so
   * absence counts only for keys older than the snapshot.
   */
  async keyState(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform, keyId: number, createdAt: number | undefined, maxAgeMs?: number): Promise<{ state: 'Live' | 'Absent'; key?: ListedUse; at: number }> {
    // maxAgeMs: a retiring key's last use is read from a fresher snapshot (still one list per
    // credentials and scope, shared by every resource that asks within that age).
    const { id, refresh, load, gone } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    const snapshot = await this.#fresh(this.#keys, id, load, maxAgeMs ?? this.#intervalMs, gone);
    const key = snapshot.value.get(keyId);
    const at = snapshot.at;
    if (key !== undefined) return { state: 'Live', key, at };
    // A key issued lately is absent for sure from a list asked for after its create was answered
    // (both instants on this process's clock).
    const issuedAt = this.#issued.get(id)?.get(keyId)?.at;
    if (issuedAt !== undefined) return { state: issuedAt < at ? 'Absent' : 'Live', at };
    // created_at has second precision and clocks differ: only keys clearly older than the list count.
    if (createdAt === undefined || createdAt >= snapshot.at - CREATED_AT_MARGIN_MS) return { state: 'Live', at };
    return { state: 'Absent', at };
  }

  /**
   * The keys of the list last taken for these credentials and scope (no request) whose names carry
   * a resource's attempt tag (create-intent.ts attemptTagOf), with when each was made and when the
   * list was taken: what its interrupted creates may have left (observe.ts, orphans).
   */
  tagged(credentialsId: string, listScope: string, tag: string): { at: number; keys: readonly TaggedKey[] } | undefined {
    const list = this.#tagged.get(`keys|${credentialsId}|${listScope}`);
    return list === undefined ? undefined : { at: list.at, keys: list.keys.get(tag) ?? [] };
  }

  /** Keys revoked by this process: gone from the tagged keys of the list until it is taken again. */
  revokedTagged(credentialsId: string, listScope: string, ids: readonly number[]): void {
    const list = this.#tagged.get(`keys|${credentialsId}|${listScope}`);
    if (list === undefined) return;
    for (const [tag, keys] of list.keys) {
      const left = keys.filter((k) => !ids.includes(k.id));
      if (left.length === 0) list.keys.delete(tag);
      else if (left.length !== keys.length) list.keys.set(tag, left);
    }
  }

  /** The list of these credentials and scope taken within the interval (shared, as the checks'), for a resource being deleted. */
  async ensureList(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform): Promise<void> {
    const { id, refresh, load, gone } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    await this.#fresh(this.#keys, id, load, this.#intervalMs, gone);
  }

  /**
   * A key was just issued (its create answered) for the resource `resource` (its work-queue key):
   * its list is taken each interval from now on, and a list that does not show it wakes the
   * resource, at rest or not (#issued).
   */
  issued(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform, keyId: number, resource: string): void {
    const { id, refresh } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    let keys = this.#issued.get(id);
    if (keys === undefined) {
      keys = new Map();
      this.#issued.set(id, keys);
    }
    keys.set(keyId, { at: this.#now(), resource });
  }

  /** The list of the managed keys of one credentials and scope: its id, how it is taken, and what a new one no longer shows. */
  #keyList(credentialsId: string, adapter: Pick<KeyAdapter, 'listScope' | 'list'>, platform: KeyPlatform): { id: string; refresh: () => Promise<unknown>; load: () => Promise<Map<number, ListedUse>>; gone: (before: Map<number, ListedUse> | undefined, after: Map<number, ListedUse>, at: number) => void } {
    const id = `keys|${credentialsId}|${adapter.listScope}`;
    const load = async (): Promise<Map<number, ListedUse>> => {
      const at = this.#now();
      const listed = await adapter.list(platform);
      // What readers of the whole list keep of it (listing()): the same request.
      const views = this.#scopes.has(id) ? this.#views.get(id) : undefined;
      for (const [viewId, view] of views ?? []) {
        if (at - view.askedAt > 1.5 * this.#intervalMs) views?.delete(viewId);
        else Object.assign(view, { at, value: view.make(listed, at) });
      }
      this.#tagged.set(id, { at, keys: taggedKeys(listed) });
      return new Map(listed.map((k) => [k.id, listedUse(k)] as const));
    };
    const gone = (before: Map<number, ListedUse> | undefined, after: Map<number, ListedUse>, at: number): void => {
      const ids = before === undefined ? [] : [...before.keys()].filter((k) => !after.has(k));
      const resources: string[] = [];
      const issued = this.#issued.get(id);
      for (const [keyId, entry] of issued ?? []) {
        // Kept a while once told (the woken pass must see it absent too, whatever created_at says).
        if (after.has(keyId) || at - entry.at > 2 * this.#intervalMs) {
          issued?.delete(keyId);
        } else if (entry.at < at && !entry.told) {
          entry.told = true;
          ids.push(keyId);
          resources.push(entry.resource);
        }
      }
      if (issued?.size === 0) this.#issued.delete(id);
      if (ids.length > 0) this.#onGone?.({ what: 'keys', credentialsId, listScope: adapter.listScope, ids, resources });
    };
    return { id, load, gone, refresh: () => this.#fresh(this.#keys, id, load, this.#intervalMs, gone) };
  }

  /**
   * The whole list of one credentials and scope, for an inventory (src/operator/inventory,
   * docs/inventory.md): the very list drift takes for the keys of that scope and credentials, so an
   * inventory beside them costs no platform request of its own; taken again each interval
   * (refreshDue) while an inventory or a check asks for it. What is kept of it is the reader's
   * `view` (made when the list is taken; the answer itself is dropped). Only when the list was taken
   * before any reader of this view asked (its snapshot kept each key's use only), and no view made
   * from it answers this one (`view.from`), is it taken once more, at once. Throws the list's failure (remembered for the interval, as for the checks).
   */
  async listing<T>(credentialsId: string, list: Pick<KeyAdapter, 'listScope' | 'list'>, platform: KeyPlatform, view: ListingView<T>): Promise<{ at: number; view: T }> {
    const { id, refresh, load, gone } = this.#keyList(credentialsId, list, platform);
    this.#asked(id, refresh);
    let views = this.#views.get(id);
    if (views === undefined) this.#views.set(id, views = new Map());
    // Kept in the order last asked for: the first is the one to drop.
    const kept = views.get(view.id);
    views.delete(view.id);
    views.set(view.id, { ...kept ?? { at: -Infinity, value: undefined, make: view.make }, askedAt: this.#now() });
    for (const oldest of views.keys()) {
      if (views.size <= MAX_LISTING_VIEWS) break;
      views.delete(oldest);
    }
    const snapshot = await this.#fresh(this.#keys, id, load, this.#intervalMs, gone);
    let made = this.#views.get(id)?.get(view.id);
    const other = made === undefined || made.at >= snapshot.at ? undefined : [...this.#views.get(id) ?? []].find(([otherId, v]) => otherId !== view.id && v.at === snapshot.at);
    const derived = other === undefined ? undefined : view.from?.(other[0], other[1].value);
    if (made !== undefined && derived !== undefined) Object.assign(made, { at: snapshot.at, value: derived });
    else if (made === undefined || made.at < snapshot.at) {
      await this.#fresh(this.#keys, id, load, 0, gone);
      made = this.#views.get(id)?.get(view.id);
    }
    if (made === undefined || made.at === -Infinity) throw Object.assign(new Error('the key list was dropped while it was taken'), { code: 'LIST_DROPPED' });
    return { at: made.at, view: made.value as T };
  }

  async projectInOrganization(credentialsId: string, platform: KeyPlatform, organizationId: string, projectId: string): Promise<boolean> {
    const id = `projects|${credentialsId}|${organizationId}`;
    const load = async (): Promise<Set<string>> => new Set((await platform.listProjects({ orgId: organizationId })).map((p) => p.id));
    const gone = (before: Set<string> | undefined, after: Set<string>): void => {
      if (before === undefined) return;
      const ids = [...before].filter((p) => !after.has(p));
      if (ids.length > 0) this.#onGone?.({ what: 'projects', credentialsId, organizationId, ids });
    };
    this.#asked(id, () => this.#fresh(this.#projects, id, load, this.#intervalMs, gone));
    const snapshot = await this.#fresh(this.#projects, id, load, this.#intervalMs, gone);
    return snapshot.value.has(projectId);
  }
}
