// Kubernetes events (core v1) about key resources. Messages are built by the lifecycle from ids,
// names and reasons only: a secret value never reaches an event. Repeats of the same event within
// a window are dropped, so a resource stuck in backoff does not flood the namespace.
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { API_VERSION, type KeyResource } from '../../resources/schema.ts';
import type { Reason } from './conditions.ts';
import { eventBody } from '../../runtime/event-body.ts';
import type { CoreClient } from '../../runtime/kube-client.ts';

export type EventType = 'Normal' | 'Warning';

export class EventRecorder {
  readonly #core: Pick<CoreClient, 'createNamespacedEvent'>;
  readonly #component: string;
  readonly #logger: Logger;
  readonly #recent = new Map<string, number>();
  readonly #windowMs: number;

  constructor(core: Pick<CoreClient, 'createNamespacedEvent'>, component: string, logger: Logger, windowMs = 300_000) {
    this.#core = core;
    this.#component = component;
    this.#logger = logger;
    this.#windowMs = windowMs;
  }

  async record(resource: Pick<KeyResource, 'kind' | 'metadata'>, type: EventType, reason: Reason, message: string): Promise<void> {
    // A digest of the message: a message may quote what a tenant wrote (a spec error), of any size.
    const dedupKey = `${resource.metadata.uid}|${type}|${reason}|${createHash('sha256').update(message).digest('base64')}`;
    const now = Date.now();
    const last = this.#recent.get(dedupKey);
    if (last !== undefined && now - last < this.#windowMs) return;
    this.#recent.set(dedupKey, now);
    if (this.#recent.size > 10_000) this.#recent.clear();
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
}
