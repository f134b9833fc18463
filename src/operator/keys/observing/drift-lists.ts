// The state of the drift lists (keys/observing/drift.ts) and its byte budget: what each list keeps,
// what it keeps counted in bytes, and past the budget the least recently asked lists kept sparse,
// then dropped.
import type { ListedUse } from '../adapter.ts';
import {
  ENTRY_BYTES,
  FAILURE_BYTES,
  ISSUED_BYTES,
  LIST_BYTES,
  PROJECT_BYTES,
  VIEW_BYTES,
  WANTED_BYTES,
  keysBytes,
  stringBytes,
  taggedBytes,
} from './drift-budget.ts';
import type { ListingView, Snapshot, TaggedKeys } from './drift-listing.ts';

/** A key issued lately: when its create was answered, its resource (work-queue key), whether a list not showing it was told. */
export interface IssuedEntry {
  at: number;
  resource: string;
  told?: boolean;
}

function issuedBytes(entry: IssuedEntry): number {
  return ISSUED_BYTES + stringBytes(entry.resource);
}

/** What the drift lists keep, by list id, and the byte budget they are kept within. */
export class DriftLists {
  readonly #intervalMs: number;
  readonly #now: () => number;
  readonly keys = new Map<string, Snapshot<Map<number, ListedUse>>>();
  readonly projects = new Map<string, Snapshot<Set<string>>>();
  /** Per key list: its keys by attempt tag, as last taken (tagged()); `covers`: the tags a sparse one answers for. */
  readonly tagged = new Map<string, { at: number; keys: Map<string, TaggedKeys>; bytes?: number; covers?: ReadonlySet<string> }>();
  readonly failures = new Map<string, { at: number; error: unknown }>();
  /**
   * The lists checks asked for within the last interval and a half, with what refreshes them: taken
   * again when they are an interval old, checks or not (refreshDue). Refreshed only when a check
   * came round to an expired list, a list would be up to one more check spacing late; for a scope
   * with few resources that is up to another interval (the checks are jittered up to 1.1 intervals).
   */
  readonly scopes = new Map<string, { askedAt: number; refresh: () => Promise<unknown> }>();
  /**
   * What readers of whole lists keep of them (listing(): one view per ListingView id, made by the
   * same request as the drift snapshot, which keeps only each key's use); at -Infinity until the
   * list is first taken for it. A view no reader asked for in an interval and a half is no longer
   * made (its inventory is gone, or reads another list), though checks keep the list.
   */
  readonly views = new Map<
    string,
    Map<string, Snapshot<unknown> & { make: ListingView<unknown>['make']; measure?: ListingView<unknown>['bytes']; askedAt: number }>
  >();
  /** The bytes of each view's value, as its list was taken (views of one list may share one value). */
  readonly viewBytes = new WeakMap<object, number>();
  /**
   * Per list, what its askers asked for within the last interval and a half: the key ids of the
   * checks (keyState) and the attempt tags (tagged, ensureList), with when. A list kept sparse keeps
   * these only (#sparsify), so each asker is answered without a list of its own until the next.
   */
  readonly wanted = new Map<string, { keys: Map<number, number>; tags: Map<string, number> }>();
  /** Per list, the bytes it keeps (account), and their sum: at most #maxBytes once enforce has run. */
  readonly #bytes = new Map<string, number>();
  #totalBytes = 0;
  readonly #maxBytes: number;
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
  readonly issued = new Map<string, Map<number, IssuedEntry>>();
  /** Per list: the bytes its `issued` entries keep, kept up to date as entries come and go (a wave adds thousands). */
  readonly #issuedBytes = new Map<string, number>();

  constructor(intervalMs: number, now: () => number, maxBytes: number) {
    this.#intervalMs = intervalMs;
    this.#now = now;
    this.#maxBytes = maxBytes;
  }

  /** A list nobody asks for: its snapshot and failure go with it (a list in flight ends on its own). */
  forget(id: string): void {
    this.scopes.delete(id);
    this.keys.delete(id);
    this.projects.delete(id);
    this.failures.delete(id);
    this.views.delete(id);
    this.issued.delete(id);
    this.#issuedBytes.delete(id);
    this.tagged.delete(id);
    this.wanted.delete(id);
    this.account(id);
  }

  /** The bytes the lists keep in all (at most MAX_DRIFT_BYTES between two calls). */
  get bytes(): number {
    return this.#totalBytes;
  }

  /** How many key lists are kept whole (the others keep their askers' answers only). */
  get wholeLists(): number {
    let whole = 0;
    for (const snapshot of this.keys.values()) if (snapshot.covers === undefined) whole += 1;
    return whole;
  }

  /** Counts again what the list `id` keeps (#bytes); a list no longer asked for keeps nothing. */
  account(id: string): void {
    let bytes = 0;
    if (this.scopes.has(id)) {
      bytes = LIST_BYTES + 8 * stringBytes(id);
      const keys = this.keys.get(id);
      if (keys !== undefined) bytes += keys.bytes ??= keysBytes(keys.value) + (keys.covers?.size ?? 0) * WANTED_BYTES;
      const projects = this.projects.get(id);
      if (projects !== undefined) {
        bytes += projects.bytes ??= [...projects.value].reduce((n, p) => n + PROJECT_BYTES + stringBytes(p), 0);
      }
      const tagged = this.tagged.get(id);
      if (tagged !== undefined) bytes += tagged.bytes ??= taggedBytes(tagged.keys) + (tagged.covers?.size ?? 0) * WANTED_BYTES;
      const failure = this.failures.get(id);
      if (failure !== undefined) {
        const message = (failure.error as { message?: unknown } | undefined)?.message;
        bytes += FAILURE_BYTES + 2 * (typeof message === 'string' ? message.length : 0);
      }
      const values = new Set<unknown>();
      for (const [viewId, view] of this.views.get(id) ?? []) {
        bytes += VIEW_BYTES + stringBytes(viewId);
        if (view.value === undefined || values.has(view.value)) continue;
        values.add(view.value);
        const value = view.value;
        const made = typeof value === 'object' && value !== null ? this.viewBytes.get(value) : undefined;
        bytes += made ?? view.measure?.(value) ?? (keys?.value.size ?? 0) * ENTRY_BYTES;
      }
      bytes += this.#issuedBytes.get(id) ?? 0;
      const wanted = this.wanted.get(id);
      if (wanted !== undefined) bytes += (wanted.keys.size + wanted.tags.size) * WANTED_BYTES;
    }
    this.#totalBytes += bytes - (this.#bytes.get(id) ?? 0);
    if (bytes === 0) this.#bytes.delete(id);
    else this.#bytes.set(id, bytes);
  }

  /** A key issued lately, kept for the list `id` until a list shows it (or it is let go: unissue). */
  issue(id: string, keyId: number, entry: IssuedEntry): void {
    let keys = this.issued.get(id);
    if (keys === undefined) {
      keys = new Map();
      this.issued.set(id, keys);
    }
    const before = keys.get(keyId);
    keys.set(keyId, entry);
    this.#issuedBytes.set(id, (this.#issuedBytes.get(id) ?? 0) + issuedBytes(entry) - (before === undefined ? 0 : issuedBytes(before)));
  }

  /** That key let go (a list showed it, or its time is over); the list keeps none once the last goes. */
  unissue(id: string, keyId: number): void {
    const keys = this.issued.get(id);
    const entry = keys?.get(keyId);
    if (keys === undefined || entry === undefined) return;
    keys.delete(keyId);
    if (keys.size > 0) {
      this.#issuedBytes.set(id, (this.#issuedBytes.get(id) ?? 0) - issuedBytes(entry));
      return;
    }
    this.issued.delete(id);
    this.#issuedBytes.delete(id);
  }

  /**
   * Within the budget again: past it, the lists asked for least recently keep only their askers'
   * answers (a list just taken that alone is over it first), then go altogether.
   */
  enforce(latest?: string): void {
    if (this.#totalBytes <= this.#maxBytes) return;
    if (latest !== undefined && (this.#bytes.get(latest) ?? 0) > this.#maxBytes) this.#sparsify(latest);
    for (const id of this.scopes.keys()) {
      if (this.#totalBytes <= this.#maxBytes) return;
      this.#sparsify(id);
    }
    for (const id of this.scopes.keys()) {
      if (this.#totalBytes <= this.#maxBytes) return;
      this.forget(id);
    }
  }

  /** The asks of the list `id` within the last interval and a half (older ones dropped: #sparsify, and each list taken). */
  wantedOf(id: string): { keys: Map<number, number>; tags: Map<string, number> } {
    let wanted = this.wanted.get(id);
    if (wanted === undefined) this.wanted.set(id, (wanted = { keys: new Map(), tags: new Map() }));
    const since = this.#now() - 1.5 * this.#intervalMs;
    for (const [key, at] of wanted.keys) if (at < since) wanted.keys.delete(key);
    for (const [tag, at] of wanted.tags) if (at < since) wanted.tags.delete(tag);
    return wanted;
  }

  /** An asker of the list `id` asks for this key id or tag: a sparse list keeps its answer from the next list on. */
  want(id: string, what: { key: number } | { tag: string }): void {
    if (!this.scopes.has(id)) return;
    let wanted = this.wanted.get(id);
    if (wanted === undefined) this.wanted.set(id, (wanted = { keys: new Map(), tags: new Map() }));
    const asked = 'key' in what ? wanted.keys : wanted.tags;
    const known = 'key' in what ? wanted.keys.has(what.key) : wanted.tags.has(what.tag);
    (asked as Map<number | string, number>).set('key' in what ? what.key : what.tag, this.#now());
    if (known) return;
    this.account(id);
    this.enforce();
  }

  /**
   * The list `id` keeps only its askers' answers: the entries of the key ids asked for (present or
   * not) and the tagged keys of the tags asked for; its views (each bounded by its reader) stay.
   * An asker asking for anything else takes the list once more (then it is answered too).
   */
  #sparsify(id: string): void {
    const keys = this.keys.get(id);
    const tagged = this.tagged.get(id);
    const wholeKeys = keys !== undefined && keys.covers === undefined;
    const wholeTagged = tagged !== undefined && tagged.covers === undefined;
    if (!wholeKeys && !wholeTagged) return;
    const wanted = this.wantedOf(id);
    if (keys !== undefined && keys.covers === undefined) {
      const value = new Map<number, ListedUse>();
      for (const keyId of wanted.keys.keys()) {
        const use = keys.value.get(keyId);
        if (use !== undefined) value.set(keyId, use);
      }
      this.keys.set(id, { at: keys.at, value, covers: new Set(wanted.keys.keys()) });
    }
    if (tagged !== undefined && tagged.covers === undefined) {
      const kept = new Map<string, TaggedKeys>();
      for (const tag of wanted.tags.keys()) {
        const found = tagged.keys.get(tag);
        if (found !== undefined) kept.set(tag, found);
      }
      this.tagged.set(id, { at: tagged.at, keys: kept, covers: new Set(wanted.tags.keys()) });
    }
    this.account(id);
  }

  /** How many lists are kept (tests: bounded). */
  get size(): number {
    return Math.max(this.scopes.size, this.keys.size + this.projects.size, this.failures.size);
  }
}
