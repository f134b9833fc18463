// One instance of each string that many cached objects repeat (a namespace, a kind, a project id, a
// condition type): JSON.parse makes a new copy of every value, so every cached resource of one
// namespace would hold its own copy of each.
// Bounded: the values come from objects tenants write, so past MAX_INTERNED distinct strings a new
// one is returned as it is (a copy again, never a table that grows without end).

const MAX_INTERNED = 4_096;
/** Longer strings are rarely repeated (messages, tokens): never kept. */
const MAX_LENGTH = 256;

const table = new Map<string, string>();

/** The shared instance of `value` (the first one seen), or `value` itself once the table is full. */
export function intern<T extends string | undefined>(value: T): T {
  if (value === undefined || value.length > MAX_LENGTH) return value;
  const known = table.get(value);
  if (known !== undefined) return known as T;
  if (table.size < MAX_INTERNED) table.set(value, value);
  return value;
}

/** How many strings are interned (for tests). */
export function internedCount(): number {
  return table.size;
}

const shared = new Map<string, object>();
/** A longer signature is not worth a table entry (a value that large is rarely repeated). */
const MAX_SIGNATURE = 1_024;

/**
 * One frozen instance of a small, read-only part of cached objects that many of them repeat (a key
 * resource's spec projection: the project, organization and credentials of a few hundred keys; its
 * conditions' types and statuses, the same for every Ready key), found by `signature`, which must
 * determine the value. The instance is frozen, deeply: a cache's reader that tried to change it would
 * change every resource's, and throws instead. Bounded as strings are: past MAX_INTERNED signatures,
 * or for a signature longer than MAX_SIGNATURE, `make()` is returned, frozen, and not kept.
 */
export function internShared<T extends object>(signature: string, make: () => T): T {
  const known = shared.get(signature);
  if (known !== undefined) return known as T;
  const value = deepFreeze(make());
  if (shared.size < MAX_INTERNED && signature.length <= MAX_SIGNATURE) shared.set(signature, value);
  return value;
}

/** How many shared objects are kept (for tests). */
export function sharedCount(): number {
  return shared.size;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
