// The credentials Secrets as last read, kept by version. Every key of a namespace (or of an issuer)
// names the same credentials Secret, and every pass of each read it by name: a wave of a thousand
// keys read it a thousand times. The informers' cache holds every Secret's metadata (keys/watches.ts),
// so the version the apiserver has is known without a request: a Secret read once at that uid and
// resourceVersion is the same Secret until the cache shows another. Only then is it read again.
//
// What a stale cache can do: answer with the version before a change the watch has not delivered
// yet, exactly as a GET made a moment earlier would have; that change's event wakes every resource
// naming the Secret (the credentials index), and their passes find the new version. A cache whose
// watch has failed for long is not trusted: read by name, as before. Writes keep optimistic
// concurrency either way (the finalizer's update carries the version read).
//
// Bounded: a Secret over MAX_KEPT_BYTES of data (a tenant's fat Secret) is never kept, and at most
// MAX_KEPT Secrets are, the least recently used going first. What is kept is frozen: no pass can
// change what another reads. The keys in it are the ones the platform clients hold anyway.
import type { V1Secret } from '@kubernetes/client-node';
import type { KubeWrites } from '../kube-writes.ts';

/** An object's uid and resourceVersion (reconcile-context.ts ObjectVersion, not imported: the frame imports this room). */
type ObjectVersion = { uid: string | undefined; resourceVersion: string | undefined };

/** A credentials Secret with more data than this is read by name each time. */
export const MAX_KEPT_BYTES = 4 * 1024;
/** The most credentials Secrets kept at once. */
export const MAX_KEPT = 512;

export interface CredentialsCache {
  /** The Secret's uid and resourceVersion as the informers' cache holds it; undefined when not cached. */
  version(namespace: string, name: string): ObjectVersion | undefined;
  /** Whether the cache of Secrets in `namespace` is stale (its watch failing too long). */
  stale(namespace: string): boolean;
}

function dataBytes(secret: V1Secret): number {
  let bytes = 0;
  for (const [key, value] of Object.entries(secret.data ?? {})) bytes += key.length + value.length;
  for (const [key, value] of Object.entries(secret.stringData ?? {})) bytes += key.length + value.length;
  return bytes;
}

function frozen(secret: V1Secret): V1Secret {
  if (secret.metadata !== undefined) {
    for (const value of Object.values(secret.metadata)) if (typeof value === 'object' && value !== null) Object.freeze(value);
    Object.freeze(secret.metadata);
  }
  if (secret.data !== undefined) Object.freeze(secret.data);
  return Object.freeze(secret);
}

export class CredentialsReads {
  readonly #kube: Pick<KubeWrites, 'readSecret'>;
  readonly #cache: CredentialsCache;
  /** `namespace/name` -> the Secret as read; a Map's order is the use order (oldest first). */
  readonly #kept = new Map<string, V1Secret>();
  readonly #maxKept: number;
  /** Reads under way, by `namespace/name@uid/resourceVersion` as the cache showed it. */
  readonly #inFlight = new Map<string, Promise<V1Secret | undefined>>();
  #reads = 0;

  constructor(kube: Pick<KubeWrites, 'readSecret'>, cache: CredentialsCache, maxKept = MAX_KEPT) {
    this.#kube = kube;
    this.#cache = cache;
    this.#maxKept = maxKept;
  }

  /** The Secret at the version the cache holds: as kept when that is the version read last, else read by name (and kept). */
  async read(namespace: string, name: string): Promise<V1Secret | undefined> {
    const ref = `${namespace}/${name}`;
    const cached = this.#cache.stale(namespace) ? undefined : this.#cache.version(namespace, name);
    const kept = this.#kept.get(ref);
    if (
      kept !== undefined &&
      cached?.uid !== undefined &&
      cached.resourceVersion !== undefined &&
      kept.metadata?.uid === cached.uid &&
      kept.metadata.resourceVersion === cached.resourceVersion
    ) {
      this.#kept.delete(ref);
      this.#kept.set(ref, kept);
      return kept;
    }
    // The passes that ask at once for the version the cache shows share one read (a wave's first creates).
    const flight = cached?.resourceVersion !== undefined ? `${ref}@${cached.uid}/${cached.resourceVersion}` : undefined;
    const joined = flight !== undefined ? this.#inFlight.get(flight) : undefined;
    if (joined !== undefined) return joined;
    const read = this.#readAndKeep(ref, namespace, name);
    if (flight === undefined) return read;
    this.#inFlight.set(flight, read);
    try {
      return await read;
    } finally {
      this.#inFlight.delete(flight);
    }
  }

  async #readAndKeep(ref: string, namespace: string, name: string): Promise<V1Secret | undefined> {
    this.#reads++;
    const secret = await this.#kube.readSecret(namespace, name);
    this.#kept.delete(ref);
    if (secret === undefined || dataBytes(secret) > MAX_KEPT_BYTES) return secret;
    const keep = frozen(secret);
    this.#kept.set(ref, keep);
    for (const oldest of this.#kept.keys()) {
      if (this.#kept.size <= this.#maxKept) break;
      this.#kept.delete(oldest);
    }
    return keep;
  }

  /** How many Secrets are kept, and how many reads went to the apiserver (tests). */
  get stats(): { kept: number; reads: number } {
    return { kept: this.#kept.size, reads: this.#reads };
  }
}
