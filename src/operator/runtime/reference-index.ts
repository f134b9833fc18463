// An index of the objects a controller reconciles by what they refer to (client-go's Indexer,
// controller-runtime's field indexes): value -> keys, kept from the informer events of the
// reconciled kind. A watch of the referenced objects looks its object up here and wakes exactly
// the keys that refer to it, in O(keys woken) per event, never a scan of every cached object.

export class ReferenceIndex {
  /** value -> the keys whose objects name it. */
  readonly #byValue = new Map<string, Set<string>>();
  /**
   * key -> the values its object names now (so an update or delete removes the old ones); one value
   * as itself, not in an array (most objects name one: an array of one is ~56 bytes a key).
   */
  readonly #byKey = new Map<string, string | readonly string[]>();

  /**
   * The object of `key` now names `values` (an add or an update). An update that names what it
   * named leaves the tables untouched, and one that changes them replaces the key's entry in place:
   * a Map entry deleted and added again leaves a hole its table keeps until it is rebuilt, and with
   * every resource updated a few times (each status write) V8 rebuilt the table of 12,000 keys at
   * twice the size, 0.9 MiB each instead of 0.45.
   */
  set(key: string, values: readonly string[]): void {
    const old = this.#byKey.get(key);
    if (values.length === 0) {
      this.delete(key);
      return;
    }
    if (old !== undefined && sameValues(old, values)) return;
    const olds = old === undefined ? [] : typeof old === 'string' ? [old] : old;
    for (const value of olds) if (!values.includes(value)) this.#unindex(key, value);
    this.#byKey.set(key, values.length === 1 ? values[0]! : values);
    for (const value of values) {
      if (olds.includes(value)) continue;
      let keys = this.#byValue.get(value);
      if (keys === undefined) {
        keys = new Set();
        this.#byValue.set(value, keys);
      }
      keys.add(key);
    }
  }

  /** The object of `key` is gone. */
  delete(key: string): void {
    const old = this.#byKey.get(key);
    if (old === undefined) return;
    this.#byKey.delete(key);
    if (typeof old === 'string') this.#unindex(key, old);
    else for (const value of old) this.#unindex(key, value);
  }

  #unindex(key: string, value: string): void {
    const keys = this.#byValue.get(value);
    keys?.delete(key);
    if (keys?.size === 0) this.#byValue.delete(value);
  }

  /** The keys whose objects name `value`. */
  keysOf(value: string): readonly string[] {
    return [...(this.#byValue.get(value) ?? [])];
  }

  /** How many values are indexed (tests: nothing is left behind). */
  get size(): number {
    return this.#byValue.size;
  }
}

function sameValues(old: string | readonly string[], values: readonly string[]): boolean {
  if (typeof old === 'string') return values.length === 1 && values[0] === old;
  return old.length === values.length && old.every((value, i) => values[i] === value);
}
