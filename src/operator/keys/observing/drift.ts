// Drift detection (docs/design.md section 3.5): ONE list call per (credentials, scope) per interval
// shows every managed key of that scope, instead of one call per key. Reconciles of many resources
// share the snapshot; concurrent refreshes share one request. The check one reconcile makes of its
// recorded key through these lists is drift-check.ts.
import type { KeyAdapter, KeyPlatform, ListedUse } from '../adapter.ts';
import { ENTRY_BYTES, ListSlots, MAX_DRIFT_BYTES, MAX_DRIFT_LISTS, MAX_LISTS_AT_ONCE } from './drift-budget.ts';
import { DriftLists } from './drift-lists.ts';
import { MAX_LISTING_VIEWS, listedUse, taggedKeys, taggedList, type ListingView, type Snapshot, type TaggedKey } from './drift-listing.ts';

const CREATED_AT_MARGIN_MS = 5_000;

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
  readonly #inflight = new Map<string, Promise<unknown>>();
  readonly #lists: DriftLists;
  readonly #slots = new ListSlots(MAX_LISTS_AT_ONCE);

  /** `options.maxBytes`: MAX_DRIFT_BYTES but in tests. */
  constructor(intervalMs: number, now: () => number = Date.now, onGone?: (gone: DriftGone) => void, options: { maxBytes?: number } = {}) {
    this.#intervalMs = intervalMs;
    this.#now = now;
    this.#onGone = onGone;
    this.#lists = new DriftLists(intervalMs, now, options.maxBytes ?? MAX_DRIFT_BYTES);
  }

  /**
   * Takes again every list asked for lately that is an interval old (the sweep calls this about
   * every second): a change on the platform is seen, and the resources on it woken (onGone), within
   * one interval of it, however the checks of the resources fall. A list no check asked for in an
   * interval and a half is no longer taken (its resources are gone, or on other credentials).
   */
  refreshDue(): void {
    const now = this.#now();
    for (const [id, scope] of this.#lists.scopes) {
      if (now - scope.askedAt > 1.5 * this.#intervalMs) {
        this.#lists.forget(id);
        continue;
      }
      const taken = Math.max(this.#lists.keys.get(id)?.at ?? this.#lists.projects.get(id)?.at ?? -Infinity, this.#lists.failures.get(id)?.at ?? -Infinity);
      if (now - taken >= this.#intervalMs && !this.#inflight.has(id)) scope.refresh().catch(() => undefined);
    }
  }

  #asked(id: string, refresh: () => Promise<unknown>): void {
    // Kept in the order last asked: the first is the one to drop.
    const known = this.#lists.scopes.delete(id);
    this.#lists.scopes.set(id, { askedAt: this.#now(), refresh });
    for (const oldest of this.#lists.scopes.keys()) {
      if (this.#lists.scopes.size <= MAX_DRIFT_LISTS) break;
      this.#lists.forget(oldest);
    }
    if (known) return;
    this.#lists.account(id);
    this.#lists.enforce();
  }

  /** The bytes the lists keep in all (at most MAX_DRIFT_BYTES between two calls). */
  get bytes(): number {
    return this.#lists.bytes;
  }

  /** How many key lists are kept whole (the others keep their askers' answers only). */
  get wholeLists(): number {
    return this.#lists.wholeLists;
  }

  /** How many lists are kept (tests: bounded). */
  get size(): number {
    return this.#lists.size;
  }

  /**
   * The snapshot of the list `id` taken within `maxAgeMs`, else a new one. `more.usable`: whether a
   * kept one answers this asker (a sparse list answers only what was asked for before it was taken);
   * `more.background`: taken by the sweep, not for an asker waiting on it (its turn comes after theirs).
   */
  async #fresh<T>(
    cache: Map<string, Snapshot<T>>,
    id: string,
    load: () => Promise<T>,
    maxAgeMs = this.#intervalMs,
    gone?: (before: T | undefined, after: T, at: number) => void,
    more: { usable?: (snapshot: Snapshot<T>) => boolean; background?: boolean } = {},
  ): Promise<Snapshot<T>> {
    const cached = cache.get(id);
    if (cached !== undefined && this.#now() - cached.at < maxAgeMs && (more.usable?.(cached) ?? true)) return cached;
    // A failed list is remembered for the interval too: every resource on broken credentials (or
    // an unavailable platform) asks once per interval, not once per resource and requeue. Fixed
    // credentials are other credentials (another id), asked at once.
    const failed = this.#lists.failures.get(id);
    if (failed !== undefined && this.#now() - failed.at < maxAgeMs) throw failed.error;
    const running = this.#inflight.get(id) as Promise<Snapshot<T>> | undefined;
    if (running !== undefined) {
      if (more.background !== true) this.#slots.hurry(id);
      return running;
    }
    // Taken when its turn comes (MAX_LISTS_AT_ONCE): the snapshot's time is then.
    let at = this.#now();
    const take = (): Promise<T> => {
      at = this.#now();
      return load();
    };
    // Kept only while the list is asked for (a list dropped meanwhile keeps nothing: DriftLists forget).
    const promise = this.#slots
      .run(id, take, more.background !== true)
      .then(
        (value) => {
          const snapshot: Snapshot<T> = { at, value };
          const before = cache.get(id);
          if (this.#lists.scopes.has(id)) cache.set(id, snapshot);
          gone?.(before?.value, value, at);
          this.#lists.failures.delete(id);
          if (this.#lists.wanted.has(id)) this.#lists.wantedOf(id);
          // Within the budget again: a list larger than it keeps only its askers' answers (the ones
          // waiting on this list read it whole, from this snapshot).
          this.#lists.account(id);
          this.#lists.enforce(id);
          return snapshot;
        },
        (error: unknown) => {
          if (this.#lists.scopes.has(id)) this.#lists.failures.set(id, { at, error });
          this.#lists.account(id);
          this.#lists.enforce(id);
          throw error;
        },
      )
      .finally(() => this.#inflight.delete(id));
    this.#inflight.set(id, promise);
    return promise;
  }

  /**
   * Live / Absent for a recorded key. A key created after the list was taken is not in it, so
   * absence counts only for keys older than the snapshot.
   */
  async keyState(
    credentialsId: string,
    adapter: KeyAdapter,
    platform: KeyPlatform,
    keyId: number,
    createdAt: number | undefined,
    maxAgeMs?: number,
  ): Promise<{ state: 'Live' | 'Absent'; key?: ListedUse; at: number }> {
    // maxAgeMs: a retiring key's last use is read from a fresher snapshot (still one list per
    // credentials and scope, shared by every resource that asks within that age).
    const { id, refresh, load, gone } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    this.#lists.want(id, { key: keyId });
    const covered = (s: Snapshot<Map<number, ListedUse>>): boolean => s.covers === undefined || s.covers.has(keyId);
    const snapshot = await this.#fresh(this.#lists.keys, id, load, maxAgeMs ?? this.#intervalMs, gone, { usable: covered });
    const key = snapshot.value.get(keyId);
    const at = snapshot.at;
    if (key !== undefined) return { state: 'Live', key, at };
    // A key issued lately is absent for sure from a list asked for after its create was answered
    // (both instants on this process's clock).
    const issuedAt = this.#lists.issued.get(id)?.get(keyId)?.at;
    if (issuedAt !== undefined) return { state: issuedAt < at ? 'Absent' : 'Live', at };
    // created_at has second precision and clocks differ: only keys clearly older than the list count.
    if (createdAt === undefined || createdAt >= snapshot.at - CREATED_AT_MARGIN_MS) return { state: 'Live', at };
    return { state: 'Absent', at };
  }

  /**
   * The keys of the list last taken for these credentials and scope (no request) whose names carry
   * a resource's attempt tag (create-intent.ts attemptTagOf), with when each was made and when the
   * list was taken: what its interrupted creates may have left (observe.ts, orphans). Undefined when
   * no list is kept, or a sparse one was taken before this tag was asked for (the next list answers it).
   */
  tagged(credentialsId: string, listScope: string, tag: string): { at: number; keys: readonly TaggedKey[] } | undefined {
    const id = `keys|${credentialsId}|${listScope}`;
    this.#lists.want(id, { tag });
    const list = this.#lists.tagged.get(id);
    if (list === undefined || (list.covers !== undefined && !list.covers.has(tag))) return undefined;
    return { at: list.at, keys: taggedList(list.keys.get(tag)) };
  }

  /** Keys revoked by this process: gone from the tagged keys of the list until it is taken again. */
  revokedTagged(credentialsId: string, listScope: string, ids: readonly number[]): void {
    const id = `keys|${credentialsId}|${listScope}`;
    const list = this.#lists.tagged.get(id);
    if (list === undefined) return;
    for (const [tag, keys] of list.keys) {
      const all = taggedList(keys);
      const left = all.filter((k) => !ids.includes(k.id));
      if (left.length === 0) list.keys.delete(tag);
      else if (left.length !== all.length) list.keys.set(tag, left.length === 1 ? left[0]! : left);
    }
    delete list.bytes;
    this.#lists.account(id);
  }

  /**
   * The list of these credentials and scope taken within the interval (shared, as the checks'), for
   * a resource being deleted; one that answers tagged() for each of `tags` (a sparse list taken
   * before one of them was asked for is taken again).
   */
  async ensureList(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform, tags: readonly string[] = []): Promise<void> {
    const { id, refresh, load, gone } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    for (const tag of tags) this.#lists.want(id, { tag });
    const covers = this.#lists.tagged.get(id)?.covers;
    const covered = (): boolean => covers === undefined || tags.every((tag) => covers.has(tag));
    await this.#fresh(this.#lists.keys, id, load, this.#intervalMs, gone, { usable: covered });
  }

  /**
   * A key was just issued (its create answered) for the resource `resource` (its work-queue key):
   * its list is taken each interval from now on, and a list that does not show it wakes the
   * resource, at rest or not (DriftLists issued).
   */
  issued(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform, keyId: number, resource: string): void {
    const { id, refresh } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    this.#lists.issue(id, keyId, { at: this.#now(), resource });
    this.#lists.account(id);
    this.#lists.enforce();
  }

  /** The list of the managed keys of one credentials and scope: its id, how it is taken, and what a new one no longer shows. */
  #keyList(
    credentialsId: string,
    adapter: Pick<KeyAdapter, 'listScope' | 'list'>,
    platform: KeyPlatform,
  ): {
    id: string;
    refresh: () => Promise<unknown>;
    load: () => Promise<Map<number, ListedUse>>;
    gone: (before: Map<number, ListedUse> | undefined, after: Map<number, ListedUse>, at: number) => void;
  } {
    const id = `keys|${credentialsId}|${adapter.listScope}`;
    const load = async (): Promise<Map<number, ListedUse>> => {
      const at = this.#now();
      const listed = await adapter.list(platform);
      // What readers of the whole list keep of it (listing()): the same request.
      const views = this.#lists.scopes.has(id) ? this.#lists.views.get(id) : undefined;
      for (const [viewId, view] of views ?? []) {
        if (at - view.askedAt > 1.5 * this.#intervalMs) views?.delete(viewId);
        else Object.assign(view, { at, value: view.make(listed, at) });
      }
      // Each value's bytes once all are made (views of one list may share one, made in turns).
      for (const view of views?.values() ?? []) {
        const value = view.value;
        if (view.at !== at || typeof value !== 'object' || value === null) continue;
        this.#lists.viewBytes.set(value, view.measure?.(value) ?? listed.length * ENTRY_BYTES);
      }
      if (this.#lists.scopes.has(id)) this.#lists.tagged.set(id, { at, keys: taggedKeys(listed) });
      return new Map(listed.map((k) => [k.id, listedUse(k)] as const));
    };
    const gone = (before: Map<number, ListedUse> | undefined, after: Map<number, ListedUse>, at: number): void => {
      const ids = before === undefined ? [] : [...before.keys()].filter((k) => !after.has(k));
      const resources: string[] = [];
      for (const [keyId, entry] of this.#lists.issued.get(id) ?? []) {
        // Kept a while once told (the woken pass must see it absent too, whatever created_at says).
        if (after.has(keyId) || at - entry.at > 2 * this.#intervalMs) {
          this.#lists.unissue(id, keyId);
        } else if (entry.at < at && !entry.told) {
          entry.told = true;
          ids.push(keyId);
          resources.push(entry.resource);
        }
      }
      if (ids.length > 0) this.#onGone?.({ what: 'keys', credentialsId, listScope: adapter.listScope, ids, resources });
    };
    return { id, load, gone, refresh: () => this.#fresh(this.#lists.keys, id, load, this.#intervalMs, gone, { background: true }) };
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
  async listing<T>(
    credentialsId: string,
    list: Pick<KeyAdapter, 'listScope' | 'list'>,
    platform: KeyPlatform,
    view: ListingView<T>,
  ): Promise<{ at: number; view: T }> {
    const { id, refresh, load, gone } = this.#keyList(credentialsId, list, platform);
    this.#asked(id, refresh);
    let views = this.#lists.views.get(id);
    if (views === undefined) this.#lists.views.set(id, (views = new Map()));
    // Kept in the order last asked for: the first is the one to drop.
    const kept = views.get(view.id);
    views.delete(view.id);
    views.set(view.id, { ...(kept ?? { at: -Infinity, value: undefined, make: view.make, measure: view.bytes }), askedAt: this.#now() });
    for (const oldest of views.keys()) {
      if (views.size <= MAX_LISTING_VIEWS) break;
      views.delete(oldest);
    }
    this.#lists.account(id);
    const snapshot = await this.#fresh(this.#lists.keys, id, load, this.#intervalMs, gone);
    let made = this.#lists.views.get(id)?.get(view.id);
    const other =
      made === undefined || made.at >= snapshot.at
        ? undefined
        : [...(this.#lists.views.get(id) ?? [])].find(([otherId, v]) => otherId !== view.id && v.at === snapshot.at);
    const derived = other === undefined ? undefined : view.from?.(other[0], other[1].value);
    if (made !== undefined && derived !== undefined) Object.assign(made, { at: snapshot.at, value: derived });
    else if (made === undefined || made.at < snapshot.at) {
      await this.#fresh(this.#lists.keys, id, load, 0, gone);
      made = this.#lists.views.get(id)?.get(view.id);
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
    this.#asked(id, () => this.#fresh(this.#lists.projects, id, load, this.#intervalMs, gone, { background: true }));
    const snapshot = await this.#fresh(this.#lists.projects, id, load, this.#intervalMs, gone);
    return snapshot.value.has(projectId);
  }
}
