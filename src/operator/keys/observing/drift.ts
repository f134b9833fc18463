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
  /**
   * The bytes a value made by `make` holds, for the cache's budget (MAX_DRIFT_BYTES). A view that
   * does not say is counted as one drift entry a listed key (ENTRY_BYTES).
   */
  bytes?(value: T): number;
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

/**
 * The most bytes the lists keep in all (snapshots, tagged keys, views, what their askers asked,
 * failures), counted by what each keeps (the figures below). Past it, the least recently asked
 * lists keep only their askers' answers (#sparsify): the entries of the keys the checks asked for
 * and the tagged keys of the tags asked for; a list larger than the budget is never kept whole. Past
 * it still, the least recently asked lists go altogether. 16 MiB holds 40,000 to 130,000 listed
 * keys whole (as counted: 128 bytes a key never used, about 210 used, up to 430 with a tag of its
 * own) and the answers of about 50,000 askers: a fixed 6% of the chart's 256 MiB (docs/security.md,
 * Bounds).
 */
export const MAX_DRIFT_BYTES = 16 * 1024 * 1024;

/**
 * The most lists (keys or projects) taken at once. Each answer is held whole while it is read and
 * its snapshot made: its text, its parsed and its checked objects, about 4 times its JSON (a list
 * of 10,000 keys, 2.3 MB of JSON: 9.6 MB; the client reads at most 16 MiB). Refreshes of many
 * credentials that come due together wait their turn, the checks' lists before the sweep's.
 */
export const MAX_LISTS_AT_ONCE = 2;

/**
 * Heap held per item, as V8 lays out the client's parsed answers (heap held by a cache
 * less the heap once it is let go; test/operator/keys/observing/drift-bytes.test.ts measures the whole cache
 * against them): a key's use in a snapshot (its map entry and object, and an id past 2^31: 102 to
 * 120 bytes as the map's table fills); a string kept, besides its characters (header and
 * alignment); a tagged key; a tag's own entry; a key id or tag an asker asked for (and its place in
 * a sparse list's coverage); a key issued lately (about 70, its resource's name aside); a project
 * id; a view's record; a failure (about 350 with its message); a list's own records (its closures
 * and the map entries of its id: about 1,760 in all).
 */
const ENTRY_BYTES = 128;
const STRING_BYTES = 24;
const TAGGED_KEY_BYTES = 72;
const TAG_BYTES = 120;
const WANTED_BYTES = 72;
const ISSUED_BYTES = 120;
const PROJECT_BYTES = 48;
const VIEW_BYTES = 200;
const FAILURE_BYTES = 512;
const LIST_BYTES = 1_536;

/** What a string kept costs: nothing for the empty string (shared), else its header and characters. */
function stringBytes(value: string | null | undefined): number {
  if (value === null || value === undefined || value.length === 0) return 0;
  return STRING_BYTES + (/[\u0100-\uffff]/.test(value) ? 2 : 1) * value.length;
}

/** A snapshot: when the list was taken and what is kept of it; `covers`: the key ids a sparse one answers for (#sparsify). */
interface Snapshot<T> {
  at: number;
  value: T;
  bytes?: number;
  covers?: ReadonlySet<number>;
}

/** A listed key whose name carries an attempt tag: its id and creation time (ms). */
/** `rand`: the 3 random characters that end its name (after the tag), which tell one attempt of the resource from another. */
export interface TaggedKey {
  id: number;
  createdAt: number | undefined;
  rand: string;
}

/**
 * The keys of a list by the attempt tag their names carry (TAGGED_KEY_BYTES a key named by the
 * operator; a key named otherwise costs nothing).
 */
function taggedKeys(listed: readonly ListedKey[]): Map<string, TaggedKey[]> {
  const byTag = new Map<string, TaggedKey[]>();
  for (const key of listed) {
    const tag = attemptTagOf(key.name);
    if (tag === undefined) continue;
    const createdAt = key.created_at !== undefined ? Date.parse(key.created_at) : Number.NaN;
    const entry = { id: key.id, createdAt: Number.isFinite(createdAt) ? createdAt : undefined, rand: key.name.slice(-3) };
    const keys = byTag.get(tag);
    if (keys === undefined) byTag.set(tag, [entry]);
    else keys.push(entry);
  }
  return byTag;
}

function taggedBytes(byTag: ReadonlyMap<string, readonly TaggedKey[]>): number {
  let bytes = 0;
  for (const [tag, keys] of byTag) bytes += TAG_BYTES + stringBytes(tag) + keys.length * (TAGGED_KEY_BYTES + STRING_BYTES + 3);
  return bytes;
}

function keysBytes(keys: ReadonlyMap<number, ListedUse>): number {
  let bytes = keys.size * ENTRY_BYTES;
  for (const use of keys.values()) bytes += stringBytes(use.last_used_at) + stringBytes(use.last_used_from_addr);
  return bytes;
}

/**
 * Lists taken at once (MAX_LISTS_AT_ONCE): one waiting starts when another ends, a check's before
 * the sweep's. A list starts at once when a place is free.
 */
class ListSlots {
  #free: number;
  readonly #waiting: { id: string; urgent: boolean; start: () => void }[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  async run<T>(id: string, task: () => Promise<T>, urgent: boolean): Promise<T> {
    if (this.#free > 0) this.#free -= 1;
    else await new Promise<void>((start) => this.#waiting.push({ id, urgent, start }));
    try {
      return await task();
    } finally {
      const i = this.#waiting.findIndex((w) => w.urgent);
      const [next] = this.#waiting.splice(i === -1 ? 0 : i, 1);
      if (next === undefined) this.#free += 1;
      else next.start();
    }
  }

  /** A check now waits for the list `id`, queued by the sweep: it goes before the sweep's others. */
  hurry(id: string): void {
    const waiting = this.#waiting.find((w) => w.id === id);
    if (waiting !== undefined) waiting.urgent = true;
  }
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
  /** Per key list: its keys by attempt tag, as last taken (tagged()); `covers`: the tags a sparse one answers for. */
  readonly #tagged = new Map<string, { at: number; keys: Map<string, TaggedKey[]>; bytes?: number; covers?: ReadonlySet<string> }>();
  readonly #failures = new Map<string, { at: number; error: unknown }>();
  /**
   * The lists checks asked for within the last interval and a half, with what refreshes them: taken
   * again when they are an interval old, checks or not (refreshDue). Refreshed only when a check
   * came round to an expired list, a list would be up to one more check spacing late; for a scope
   * with few resources that is up to another interval (the checks are jittered up to 1.1 intervals).
   */
  readonly #scopes = new Map<string, { askedAt: number; refresh: () => Promise<unknown> }>();
  /**
   * What readers of whole lists keep of them (listing(): one view per ListingView id, made by the
   * same request as the drift snapshot, which keeps only each key's use); at -Infinity until the
   * list is first taken for it. A view no reader asked for in an interval and a half is no longer
   * made (its inventory is gone, or reads another list), though checks keep the list.
   */
  readonly #views = new Map<
    string,
    Map<string, Snapshot<unknown> & { make: ListingView<unknown>['make']; measure?: ListingView<unknown>['bytes']; askedAt: number }>
  >();
  /** The bytes of each view's value, as its list was taken (views of one list may share one value). */
  readonly #viewBytes = new WeakMap<object, number>();
  /**
   * Per list, what its askers asked for within the last interval and a half: the key ids of the
   * checks (keyState) and the attempt tags (tagged, ensureList), with when. A list kept sparse keeps
   * these only (#sparsify), so each asker is answered without a list of its own until the next.
   */
  readonly #wanted = new Map<string, { keys: Map<number, number>; tags: Map<string, number> }>();
  /** Per list, the bytes it keeps (#account), and their sum: at most #maxBytes once #enforce has run. */
  readonly #bytes = new Map<string, number>();
  #totalBytes = 0;
  readonly #maxBytes: number;
  readonly #slots = new ListSlots(MAX_LISTS_AT_ONCE);
  /**
   * Per list: keys issued lately (issued()) that no list has shown yet, with when their create was
   * answered and their resource's work-queue key. Such a key is in no list before it, so the
   * comparison of two lists (DriftGone) never sees it go: one revoked a few seconds after its
   * create was found only at the second check of its resource, 2.5 intervals later.
   * An entry leaves once a list shows the key (from then on the comparison covers it), two intervals
   * after the answer (a list taken after the answer that does not show it has woken its resource),
   * or with its list.
   * Memory: about 150 bytes per key issued within the last interval (at the platform's 10 creates
   * per second per organization and a 5 min interval, at most 3,000 entries, ~0.5 MiB, per organization).
   */
  readonly #issued = new Map<string, Map<number, { at: number; resource: string; told?: boolean }>>();

  /** `options.maxBytes`: MAX_DRIFT_BYTES but in tests. */
  constructor(intervalMs: number, now: () => number = Date.now, onGone?: (gone: DriftGone) => void, options: { maxBytes?: number } = {}) {
    this.#intervalMs = intervalMs;
    this.#now = now;
    this.#onGone = onGone;
    this.#maxBytes = options.maxBytes ?? MAX_DRIFT_BYTES;
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
    const known = this.#scopes.delete(id);
    this.#scopes.set(id, { askedAt: this.#now(), refresh });
    for (const oldest of this.#scopes.keys()) {
      if (this.#scopes.size <= MAX_DRIFT_LISTS) break;
      this.#forget(oldest);
    }
    if (known) return;
    this.#account(id);
    this.#enforce();
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
    this.#wanted.delete(id);
    this.#account(id);
  }

  /** The bytes the lists keep in all (at most MAX_DRIFT_BYTES between two calls). */
  get bytes(): number {
    return this.#totalBytes;
  }

  /** How many key lists are kept whole (the others keep their askers' answers only). */
  get wholeLists(): number {
    let whole = 0;
    for (const snapshot of this.#keys.values()) if (snapshot.covers === undefined) whole += 1;
    return whole;
  }

  /** Counts again what the list `id` keeps (#bytes); a list no longer asked for keeps nothing. */
  #account(id: string): void {
    let bytes = 0;
    if (this.#scopes.has(id)) {
      bytes = LIST_BYTES + 8 * stringBytes(id);
      const keys = this.#keys.get(id);
      if (keys !== undefined) bytes += keys.bytes ??= keysBytes(keys.value) + (keys.covers?.size ?? 0) * WANTED_BYTES;
      const projects = this.#projects.get(id);
      if (projects !== undefined) {
        bytes += projects.bytes ??= [...projects.value].reduce((n, p) => n + PROJECT_BYTES + stringBytes(p), 0);
      }
      const tagged = this.#tagged.get(id);
      if (tagged !== undefined) bytes += tagged.bytes ??= taggedBytes(tagged.keys) + (tagged.covers?.size ?? 0) * WANTED_BYTES;
      const failure = this.#failures.get(id);
      if (failure !== undefined) {
        const message = (failure.error as { message?: unknown } | undefined)?.message;
        bytes += FAILURE_BYTES + 2 * (typeof message === 'string' ? message.length : 0);
      }
      const values = new Set<unknown>();
      for (const [viewId, view] of this.#views.get(id) ?? []) {
        bytes += VIEW_BYTES + stringBytes(viewId);
        if (view.value === undefined || values.has(view.value)) continue;
        values.add(view.value);
        const value = view.value;
        const made = typeof value === 'object' && value !== null ? this.#viewBytes.get(value) : undefined;
        bytes += made ?? view.measure?.(value) ?? (keys?.value.size ?? 0) * ENTRY_BYTES;
      }
      for (const entry of this.#issued.get(id)?.values() ?? []) bytes += ISSUED_BYTES + stringBytes(entry.resource);
      const wanted = this.#wanted.get(id);
      if (wanted !== undefined) bytes += (wanted.keys.size + wanted.tags.size) * WANTED_BYTES;
    }
    this.#totalBytes += bytes - (this.#bytes.get(id) ?? 0);
    if (bytes === 0) this.#bytes.delete(id);
    else this.#bytes.set(id, bytes);
  }

  /**
   * Within the budget again: past it, the lists asked for least recently keep only their askers'
   * answers (a list just taken that alone is over it first), then go altogether.
   */
  #enforce(latest?: string): void {
    if (this.#totalBytes <= this.#maxBytes) return;
    if (latest !== undefined && (this.#bytes.get(latest) ?? 0) > this.#maxBytes) this.#sparsify(latest);
    for (const id of this.#scopes.keys()) {
      if (this.#totalBytes <= this.#maxBytes) return;
      this.#sparsify(id);
    }
    for (const id of this.#scopes.keys()) {
      if (this.#totalBytes <= this.#maxBytes) return;
      this.#forget(id);
    }
  }

  /** The asks of the list `id` within the last interval and a half (older ones dropped: #sparsify, and each list taken). */
  #wantedOf(id: string): { keys: Map<number, number>; tags: Map<string, number> } {
    let wanted = this.#wanted.get(id);
    if (wanted === undefined) this.#wanted.set(id, (wanted = { keys: new Map(), tags: new Map() }));
    const since = this.#now() - 1.5 * this.#intervalMs;
    for (const [key, at] of wanted.keys) if (at < since) wanted.keys.delete(key);
    for (const [tag, at] of wanted.tags) if (at < since) wanted.tags.delete(tag);
    return wanted;
  }

  /** An asker of the list `id` asks for this key id or tag: a sparse list keeps its answer from the next list on. */
  #want(id: string, what: { key: number } | { tag: string }): void {
    if (!this.#scopes.has(id)) return;
    let wanted = this.#wanted.get(id);
    if (wanted === undefined) this.#wanted.set(id, (wanted = { keys: new Map(), tags: new Map() }));
    const asked = 'key' in what ? wanted.keys : wanted.tags;
    const known = 'key' in what ? wanted.keys.has(what.key) : wanted.tags.has(what.tag);
    (asked as Map<number | string, number>).set('key' in what ? what.key : what.tag, this.#now());
    if (known) return;
    this.#account(id);
    this.#enforce();
  }

  /**
   * The list `id` keeps only its askers' answers: the entries of the key ids asked for (present or
   * not) and the tagged keys of the tags asked for; its views (each bounded by its reader) stay.
   * An asker asking for anything else takes the list once more (then it is answered too).
   */
  #sparsify(id: string): void {
    const keys = this.#keys.get(id);
    const tagged = this.#tagged.get(id);
    const wholeKeys = keys !== undefined && keys.covers === undefined;
    const wholeTagged = tagged !== undefined && tagged.covers === undefined;
    if (!wholeKeys && !wholeTagged) return;
    const wanted = this.#wantedOf(id);
    if (keys !== undefined && keys.covers === undefined) {
      const value = new Map<number, ListedUse>();
      for (const keyId of wanted.keys.keys()) {
        const use = keys.value.get(keyId);
        if (use !== undefined) value.set(keyId, use);
      }
      this.#keys.set(id, { at: keys.at, value, covers: new Set(wanted.keys.keys()) });
    }
    if (tagged !== undefined && tagged.covers === undefined) {
      const kept = new Map<string, TaggedKey[]>();
      for (const tag of wanted.tags.keys()) {
        const found = tagged.keys.get(tag);
        if (found !== undefined) kept.set(tag, found);
      }
      this.#tagged.set(id, { at: tagged.at, keys: kept, covers: new Set(wanted.tags.keys()) });
    }
    this.#account(id);
  }

  /** How many lists are kept (tests: bounded). */
  get size(): number {
    return Math.max(this.#scopes.size, this.#keys.size + this.#projects.size, this.#failures.size);
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
    const failed = this.#failures.get(id);
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
    // Kept only while the list is asked for (a list dropped meanwhile keeps nothing: #forget).
    const promise = this.#slots
      .run(id, take, more.background !== true)
      .then(
        (value) => {
          const snapshot: Snapshot<T> = { at, value };
          const before = cache.get(id);
          if (this.#scopes.has(id)) cache.set(id, snapshot);
          gone?.(before?.value, value, at);
          this.#failures.delete(id);
          if (this.#wanted.has(id)) this.#wantedOf(id);
          // Within the budget again: a list larger than it keeps only its askers' answers (the ones
          // waiting on this list read it whole, from this snapshot).
          this.#account(id);
          this.#enforce(id);
          return snapshot;
        },
        (error: unknown) => {
          if (this.#scopes.has(id)) this.#failures.set(id, { at, error });
          this.#account(id);
          this.#enforce(id);
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
    this.#want(id, { key: keyId });
    const covered = (s: Snapshot<Map<number, ListedUse>>): boolean => s.covers === undefined || s.covers.has(keyId);
    const snapshot = await this.#fresh(this.#keys, id, load, maxAgeMs ?? this.#intervalMs, gone, { usable: covered });
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
   * list was taken: what its interrupted creates may have left (observe.ts, orphans). Undefined when
   * no list is kept, or a sparse one was taken before this tag was asked for (the next list answers it).
   */
  tagged(credentialsId: string, listScope: string, tag: string): { at: number; keys: readonly TaggedKey[] } | undefined {
    const id = `keys|${credentialsId}|${listScope}`;
    this.#want(id, { tag });
    const list = this.#tagged.get(id);
    if (list === undefined || (list.covers !== undefined && !list.covers.has(tag))) return undefined;
    return { at: list.at, keys: list.keys.get(tag) ?? [] };
  }

  /** Keys revoked by this process: gone from the tagged keys of the list until it is taken again. */
  revokedTagged(credentialsId: string, listScope: string, ids: readonly number[]): void {
    const id = `keys|${credentialsId}|${listScope}`;
    const list = this.#tagged.get(id);
    if (list === undefined) return;
    for (const [tag, keys] of list.keys) {
      const left = keys.filter((k) => !ids.includes(k.id));
      if (left.length === 0) list.keys.delete(tag);
      else if (left.length !== keys.length) list.keys.set(tag, left);
    }
    delete list.bytes;
    this.#account(id);
  }

  /**
   * The list of these credentials and scope taken within the interval (shared, as the checks'), for
   * a resource being deleted; one that answers tagged() for each of `tags` (a sparse list taken
   * before one of them was asked for is taken again).
   */
  async ensureList(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform, tags: readonly string[] = []): Promise<void> {
    const { id, refresh, load, gone } = this.#keyList(credentialsId, adapter, platform);
    this.#asked(id, refresh);
    for (const tag of tags) this.#want(id, { tag });
    const covers = this.#tagged.get(id)?.covers;
    const covered = (): boolean => covers === undefined || tags.every((tag) => covers.has(tag));
    await this.#fresh(this.#keys, id, load, this.#intervalMs, gone, { usable: covered });
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
    this.#account(id);
    this.#enforce();
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
      const views = this.#scopes.has(id) ? this.#views.get(id) : undefined;
      for (const [viewId, view] of views ?? []) {
        if (at - view.askedAt > 1.5 * this.#intervalMs) views?.delete(viewId);
        else Object.assign(view, { at, value: view.make(listed, at) });
      }
      // Each value's bytes once all are made (views of one list may share one, made in turns).
      for (const view of views?.values() ?? []) {
        const value = view.value;
        if (view.at !== at || typeof value !== 'object' || value === null) continue;
        this.#viewBytes.set(value, view.measure?.(value) ?? listed.length * ENTRY_BYTES);
      }
      if (this.#scopes.has(id)) this.#tagged.set(id, { at, keys: taggedKeys(listed) });
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
    return { id, load, gone, refresh: () => this.#fresh(this.#keys, id, load, this.#intervalMs, gone, { background: true }) };
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
    let views = this.#views.get(id);
    if (views === undefined) this.#views.set(id, (views = new Map()));
    // Kept in the order last asked for: the first is the one to drop.
    const kept = views.get(view.id);
    views.delete(view.id);
    views.set(view.id, { ...(kept ?? { at: -Infinity, value: undefined, make: view.make, measure: view.bytes }), askedAt: this.#now() });
    for (const oldest of views.keys()) {
      if (views.size <= MAX_LISTING_VIEWS) break;
      views.delete(oldest);
    }
    this.#account(id);
    const snapshot = await this.#fresh(this.#keys, id, load, this.#intervalMs, gone);
    let made = this.#views.get(id)?.get(view.id);
    const other =
      made === undefined || made.at >= snapshot.at
        ? undefined
        : [...(this.#views.get(id) ?? [])].find(([otherId, v]) => otherId !== view.id && v.at === snapshot.at);
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
    this.#asked(id, () => this.#fresh(this.#projects, id, load, this.#intervalMs, gone, { background: true }));
    const snapshot = await this.#fresh(this.#projects, id, load, this.#intervalMs, gone);
    return snapshot.value.has(projectId);
  }
}
