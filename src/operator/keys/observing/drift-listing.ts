// What a drift list keeps of its keys besides their use (keys/observing/drift.ts): the views of its
// whole-list readers (an inventory), the keys named by an attempt tag, and the snapshot's shape.
import type { ListedKey, ListedUse } from '../adapter.ts';
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
export const MAX_LISTING_VIEWS = 4;

/** A snapshot: when the list was taken and what is kept of it; `covers`: the key ids a sparse one answers for (drift-lists.ts, sparsify). */
export interface Snapshot<T> {
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
 * The keys of one attempt tag: nearly always one, kept as itself (an array of one cost ~56 bytes a
 * key, 12,000 keys at rest in a list); several (an attempt's lost keys) in an array.
 */
export type TaggedKeys = TaggedKey | readonly TaggedKey[];

/** The keys of one tag as a list. */
export function taggedList(keys: TaggedKeys | undefined): readonly TaggedKey[] {
  return keys === undefined ? [] : isTaggedKey(keys) ? [keys] : keys;
}

function isTaggedKey(keys: TaggedKeys): keys is TaggedKey {
  return !Array.isArray(keys);
}

/**
 * The keys of a list by the attempt tag their names carry (TAGGED_KEY_BYTES a key named by the
 * operator; a key named otherwise costs nothing).
 */
export function taggedKeys(listed: readonly ListedKey[]): Map<string, TaggedKeys> {
  const byTag = new Map<string, TaggedKeys>();
  for (const key of listed) {
    const tag = attemptTagOf(key.name);
    if (tag === undefined) continue;
    const createdAt = key.created_at !== undefined ? Date.parse(key.created_at) : Number.NaN;
    const entry: TaggedKey = { id: key.id, createdAt: Number.isFinite(createdAt) ? createdAt : undefined, rand: key.name.slice(-3) };
    const keys = byTag.get(tag);
    if (keys === undefined) byTag.set(tag, entry);
    else if (isTaggedKey(keys)) byTag.set(tag, [keys, entry]);
    // An array this loop made: added to in place, so a list of many keys of one tag (whatever the
    // platform answers) costs no copy per key.
    else (keys as TaggedKey[]).push(entry);
  }
  return byTag;
}

export function listedUse(key: ListedKey): ListedUse {
  return { id: key.id, last_used_at: key.last_used_at, last_used_from_addr: key.last_used_from_addr };
}
