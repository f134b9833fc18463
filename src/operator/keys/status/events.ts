// Kubernetes events (core v1) about key resources. Messages are built by the lifecycle from ids,
// names and reasons only: a secret value never reaches an event. Repeats of the same event within
// a window are dropped, so a resource stuck in backoff does not flood the namespace. What is
// remembered for that is one digest per event of the last window (at most MAX_REMEMBERED): at rest,
// nothing (a wave of 10,000 new keys used to leave its 10,000 entries, ~2.5 MiB, until the next wave).
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { API_VERSION, type KeyResource } from '../../resources/schema.ts';
import type { Reason } from './conditions.ts';
import { eventBody } from '../../runtime/event-body.ts';
import type { CoreClient } from '../../runtime/kube-client.ts';

export type EventType = 'Normal' | 'Warning';

/** Events remembered at most; past it the oldest is forgotten early (its repeat may then be sent). */
const MAX_REMEMBERED = 10_000;

export class EventRecorder {
  readonly #core: Pick<CoreClient, 'createNamespacedEvent'>;
  readonly #component: string;
  readonly #logger: Logger;
  /** Digest of an event -> when it was last sent; in the order sent (a repeat sent again moves to the end). */
  readonly #recent = new Map<string, number>();
  readonly #windowMs: number;
  readonly #now: () => number;
  /** The next forgetting, while something is remembered (not keeping the process alive). */
  #sweep: ReturnType<typeof setTimeout> | undefined;

  constructor(core: Pick<CoreClient, 'createNamespacedEvent'>, component: string, logger: Logger, windowMs = 300_000, now: () => number = Date.now) {
    this.#core = core;
    this.#component = component;
    this.#logger = logger;
    this.#windowMs = windowMs;
    this.#now = now;
  }

  /** How many events are remembered (for tests). */
  remembered(): number {
    return this.#recent.size;
  }

  async record(resource: Pick<KeyResource, 'kind' | 'metadata'>, type: EventType, reason: Reason, message: string): Promise<void> {
    // One digest of all of it: a message may quote what a tenant wrote (a spec error), of any size;
    // the digest is one flat string of 44 characters where joined parts would each stay in memory.
    const dedupKey = createHash('sha256').update(`${resource.metadata.uid}|${type}|${reason}|`).update(message).digest('base64');
    const now = this.#now();
    this.#forget(now);
    const last = this.#recent.get(dedupKey);
    if (last !== undefined && now - last < this.#windowMs) return;
    this.#recent.delete(dedupKey);
    this.#recent.set(dedupKey, now);
    this.#sweepIn(this.#windowMs);
    const timestamp = new Date(now);
    try {
      const { metadata: m } = resource;
      const body = eventBody(
        { apiVersion: API_VERSION, kind: resource.kind, name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion },
        type,
        reason,
        message,
        this.#component,
        timestamp,
      );
      await this.#core.createNamespacedEvent({ namespace: m.namespace, body });
    } catch (error) {
      // Events are best effort: never fail a reconcile over one.
      this.#logger.warn({ err: error, reason }, 'could not record event');
    }
  }

  #sweepIn(ms: number): void {
    if (this.#sweep !== undefined) return;
    this.#sweep = setTimeout(() => {
      this.#sweep = undefined;
      const now = this.#now();
      this.#forget(now);
      const oldest = this.#recent.values().next();
      if (!oldest.done) this.#sweepIn(Math.max(1_000, oldest.value + this.#windowMs - now));
    }, ms);
    this.#sweep.unref();
  }

  /** Forgets the events sent before the window (the oldest first), and the oldest past MAX_REMEMBERED. */
  #forget(now: number): void {
    for (const [key, sent] of this.#recent) {
      if (now - sent < this.#windowMs && this.#recent.size < MAX_REMEMBERED) return;
      this.#recent.delete(key);
    }
  }
}
