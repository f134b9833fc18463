// The bounds of the drift lists (keys/observing/drift.ts): how many lists, how many bytes in all and
// how each thing kept is counted, and how many lists are taken at once.
import type { ListedUse } from '../adapter.ts';
import { taggedList, type TaggedKeys } from './drift-listing.ts';

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
 * lists keep only their askers' answers (drift-lists.ts, sparsify): the entries of the keys the checks asked for
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
 * alignment); a tagged key; a tag's own entry (its map entry; a tag of one key keeps it without an
 * array, drift-listing.ts TaggedKeys); a key id or tag an asker asked for (and its place in
 * a sparse list's coverage); a key issued lately (about 70, its resource's name aside); a project
 * id; a view's record; a failure (about 350 with its message); a list's own records (its closures
 * and the map entries of its id: about 1,760 in all).
 */
export const ENTRY_BYTES = 128;
export const STRING_BYTES = 24;
export const TAGGED_KEY_BYTES = 72;
export const TAG_BYTES = 64;
export const WANTED_BYTES = 72;
export const ISSUED_BYTES = 120;
export const PROJECT_BYTES = 48;
export const VIEW_BYTES = 200;
export const FAILURE_BYTES = 512;
export const LIST_BYTES = 1_536;

/** What a string kept costs: nothing for the empty string (shared), else its header and characters. */
export function stringBytes(value: string | null | undefined): number {
  if (value === null || value === undefined || value.length === 0) return 0;
  return STRING_BYTES + (/[\u0100-\uffff]/.test(value) ? 2 : 1) * value.length;
}

export function taggedBytes(byTag: ReadonlyMap<string, TaggedKeys>): number {
  let bytes = 0;
  for (const [tag, keys] of byTag) bytes += TAG_BYTES + stringBytes(tag) + taggedList(keys).length * (TAGGED_KEY_BYTES + STRING_BYTES + 3);
  return bytes;
}

export function keysBytes(keys: ReadonlyMap<number, ListedUse>): number {
  let bytes = keys.size * ENTRY_BYTES;
  for (const use of keys.values()) bytes += stringBytes(use.last_used_at) + stringBytes(use.last_used_from_addr);
  return bytes;
}

/**
 * Lists taken at once (MAX_LISTS_AT_ONCE): one waiting starts when another ends, a check's before
 * the sweep's. A list starts at once when a place is free.
 */
export class ListSlots {
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
