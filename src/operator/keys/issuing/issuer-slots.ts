// The cap of an issuer's rule (maxKeysPerNamespace, docs/issuers.md): how many key resources of one
// namespace may hold a key made through one ClusterKeyIssuer. A resource holds a slot of the issuer
// that made its key (status.issuer, or its create intent's issuer) from the moment its intent is
// written (the platform may have made the key) until its deletion revoked it, whatever it names
// later: moved to another issuer or to credentials of the namespace, its key still counts where it
// was made, and a key it brings along takes no slot of its new issuer until one is made there (a
// repair, a rotation), which takes a slot like a first key. The keys of a rotation still retiring
// are its own and not counted again.
//
// Counted from the informers' cache (the resources of the namespace naming the issuer or holding a
// key made through it), plus the claims this process made whose intent the cache does not show
// yet. A claim is taken synchronously, at the last step before the intent is written
// (create-protocol.ts), so two concurrent creates of one process never both take the last slot.
// Across a leader change the new leader's cache is listed after the old leader's writes were fenced
// (runtime/write-fence.ts): every intent the old leader wrote is in it, and a claim it took without
// writing its intent made no key.
//
// A refused resource waits (KeyLimitReached); when a key of the namespace is released, the waiters
// are woken and the first to reach its create takes the slot, the others are refused again.

/**
 * Whether a key made through `issuer` takes a slot: a first key (status records none), or one
 * replacing a key made elsewhere (status.issuer, `recordedIssuer`).
 */
export function needsSlot(recordedKeyId: number | undefined, recordedIssuer: unknown, issuer: string): boolean {
  return recordedKeyId === undefined || recordedIssuer !== issuer;
}

/** What the slots read of the informers' cache. */
export interface SlotView {
  /** The work-queue keys of the resources of `namespace` naming `issuer` or holding a key made through it. */
  users(issuer: string, namespace: string): readonly string[];
  /** The issuers the cached resource holds a key through (a recorded key, or an intent). */
  holders(key: string): readonly string[];
}

export class IssuerSlots {
  readonly #view: SlotView;
  readonly #wake: (key: string) => void;
  /** Slots this process gave: resource key to its `namespace/issuer`, kept while the resource lives. */
  readonly #claims = new Map<string, string>();
  /** Resources whose keys were revoked as they are deleted, until the cache lets them go. */
  readonly #released = new Set<string>();
  /** Per `namespace/issuer`: the resources refused for the cap, woken when a slot frees. */
  readonly #waiting = new Map<string, Set<string>>();

  constructor(view: SlotView, wake: (key: string) => void) {
    this.#view = view;
    this.#wake = wake;
  }

  /** The keys held in the namespace through the issuer (the cache's and this process's claims). */
  held(issuer: string, namespace: string): number {
    const scope = `${namespace}/${issuer}`;
    const users = new Set(this.#view.users(issuer, namespace));
    let held = 0;
    for (const key of users) {
      if (this.#released.has(key)) continue;
      // Counted once, from the cache or its claim. A claim stays while its resource lives (dropped
      // when it is released, deleted, or its intent was not written): the cache may show an intent
      // this process has cleared since (a recovery, keep()), and the slot must not go meanwhile.
      if (this.#view.holders(key).includes(issuer) || this.#claims.get(key) === scope) held++;
    }
    for (const [key, claimScope] of this.#claims) {
      // A claim of a resource gone from the cache (deleted), or neither naming the issuer nor holding a key of it now.
      if (claimScope === scope && !users.has(key)) this.#claims.delete(key);
    }
    for (const key of this.#released) if (this.#view.holders(key).length === 0 || !users.has(key)) this.#released.delete(key);
    return held;
  }

  /** Whether a slot is free for the resource (its own claim counts as its slot). Takes nothing. */
  available(issuer: string, namespace: string, key: string, cap: number): boolean {
    return this.#claims.get(key) === `${namespace}/${issuer}` || this.held(issuer, namespace) < cap;
  }

  /** The resource waits for a slot: woken when one frees. */
  wait(issuer: string, namespace: string, key: string): void {
    const scope = `${namespace}/${issuer}`;
    let waiting = this.#waiting.get(scope);
    if (waiting === undefined) this.#waiting.set(scope, (waiting = new Set()));
    waiting.add(key);
  }

  /**
   * Takes a slot for a key the resource makes through the issuer (its first, or one replacing a key
   * made elsewhere), or says there is none (the resource waits for one).
   * Synchronous: the count and the claim are one step.
   */
  claim(issuer: string, namespace: string, key: string, cap: number): boolean {
    const scope = `${namespace}/${issuer}`;
    if (this.#claims.get(key) === scope) return true;
    if (this.held(issuer, namespace) >= cap) {
      this.wait(issuer, namespace, key);
      return false;
    }
    this.#claims.set(key, scope);
    this.#waiting.get(scope)?.delete(key);
    return true;
  }

  /**
   * The resource keeps the slot its intent held while the intent is cleared (an interrupted create
   * recovered, to be made again): without it, another resource could take the slot in between, and
   * this one, whose key the platform did make (then revoked), would end refused.
   */
  keep(issuer: string, namespace: string, key: string): void {
    this.#claims.set(key, `${namespace}/${issuer}`);
  }

  /** A claim whose intent was not written after all (a conflict, a refusal before the create). */
  unclaim(key: string): void {
    this.#claims.delete(key);
  }

  /**
   * The resource's keys are revoked (or retained) and it is going: its slots (of `issuers`, those it
   * named and held keys through) go to their waiters.
   */
  release(issuers: Iterable<string>, namespace: string, key: string): void {
    this.#claims.delete(key);
    this.#released.add(key);
    for (const issuer of new Set(issuers)) {
      const scope = `${namespace}/${issuer}`;
      const waiting = this.#waiting.get(scope);
      if (waiting === undefined) continue;
      this.#waiting.delete(scope);
      for (const waiter of waiting) if (waiter !== key) this.#wake(waiter);
    }
  }

  /** How many claims and waiters are kept (tests: nothing grows without bound). */
  get size(): { claims: number; waiting: number; released: number } {
    let waiting = 0;
    for (const set of this.#waiting.values()) waiting += set.size;
    return { claims: this.#claims.size, waiting, released: this.#released.size };
  }
}
