// Status compared as values: equal when JSON.stringify would write them the same but for the order of
// object keys, compared member by member without writing either.

/**
 * Whether `a` and `b` are the same JSON value whatever the order of their objects' keys: as
 * JSON.stringify encodes them, a member that is undefined is absent and an undefined array element
 * is null. For the plain values status holds (no toJSON, no NaN).
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i] ?? null, b[i] ?? null)) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let members = 0;
  for (const key in x) {
    if (!Object.hasOwn(x, key) || x[key] === undefined) continue;
    members++;
    if (!Object.hasOwn(y, key) || !sameJson(x[key], y[key])) return false;
  }
  for (const key in y) if (Object.hasOwn(y, key) && y[key] !== undefined) members--;
  return members === 0;
}
