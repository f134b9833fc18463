// The platform clients of the credentials in use, one per distinct key. Cached by a digest of the
// key, never by the key itself (the id also names the credentials in Verified and the drift
// cache's lists). Each client holds its key and carries the connection pool of its requests.
//
// Bounded both ways (docs/security.md, Bounds): a client unused for IDLE_MS (credentials replaced,
// resources gone) is dropped by evictIdle(), and at most MAX_CLIENTS are kept, the least recently
// used going first. A credentials Secret rewritten with a new value every second makes a new client
// each time; without the count bound those lived ten minutes each. Observe refuses a value that is
// not an API key before any client is made (observe.ts), so each client's key is small too.
import { createHash } from 'node:crypto';
import type { KeyPlatform } from './adapter.ts';

/** How long a client nobody used is kept. */
export const CLIENT_IDLE_MS = 10 * 60_000;
/** The most clients kept: far more distinct credentials than a cluster's teams use at once. */
export const MAX_CLIENTS = 256;

export interface PlatformClientEntry {
  platform: KeyPlatform;
  credentialsId: string;
}

export class PlatformClients {
  readonly #make: (apiKey: string) => KeyPlatform;
  readonly #max: number;
  readonly #idleMs: number;
  readonly #now: () => number;
  /** In order of last use, the least recent first (a use moves an entry to the end). */
  readonly #clients = new Map<string, PlatformClientEntry & { usedAt: number }>();

  constructor(make: (apiKey: string) => KeyPlatform, options: { max?: number; idleMs?: number; now?: () => number } = {}) {
    this.#make = make;
    this.#max = options.max ?? MAX_CLIENTS;
    this.#idleMs = options.idleMs ?? CLIENT_IDLE_MS;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The client acting with `apiKey`: the cached one, or a new one (the least recently used dropped when full). */
  for(apiKey: string): PlatformClientEntry {
    const credentialsId = createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
    const known = this.#touch(credentialsId);
    if (known !== undefined) return known;
    while (this.#clients.size >= this.#max) {
      const oldest = this.#clients.keys().next().value;
      if (oldest === undefined) break;
      this.#clients.delete(oldest);
    }
    const entry = { platform: this.#make(apiKey), credentialsId, usedAt: this.#now() };
    this.#clients.set(credentialsId, entry);
    return entry;
  }

  /** The client of credentials already read, by id; undefined once dropped (at-rest.ts: a full pass then). */
  byId(credentialsId: string): PlatformClientEntry | undefined {
    return this.#touch(credentialsId);
  }

  /** Drops the clients unused for the idle time. */
  evictIdle(): void {
    const now = this.#now();
    for (const [id, entry] of this.#clients) if (now - entry.usedAt > this.#idleMs) this.#clients.delete(id);
  }

  get size(): number {
    return this.#clients.size;
  }

  #touch(credentialsId: string): PlatformClientEntry | undefined {
    const entry = this.#clients.get(credentialsId);
    if (entry === undefined) return undefined;
    entry.usedAt = this.#now();
    this.#clients.delete(credentialsId);
    this.#clients.set(credentialsId, entry);
    return entry;
  }
}
