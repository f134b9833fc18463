// One instance of each string that many cached objects repeat (a namespace, a kind, a project id, a
// condition type): JSON.parse makes a new copy of every value, so 10,000 cached resources of one
// namespace and twenty projects held 10,000 copies of each (issue 14: about 0.4 KiB a resource).
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
