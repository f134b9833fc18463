// An issuer's events: a Warning when it turns not Ready (its reason: what broke), a Normal one when it
// is Ready again. An issuer is cluster-scoped, so its events live in the `default` namespace, where
// Kubernetes puts the events of cluster-scoped objects (`kubectl describe clusterkeyissuer` finds them).
import type { Logger } from 'pino';
import { API_VERSION } from '../resources/schema.ts';
import { ISSUER_KIND, type ClusterKeyIssuer } from '../resources/issuer.ts';
import type { ReadyUpdate } from './conditions.ts';
import { eventBody, eventNamespace } from '../runtime/event-body.ts';
import type { CoreClient } from '../runtime/kube-client.ts';

export interface IssuerEvents {
  record(issuer: Pick<ClusterKeyIssuer, 'metadata'>, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
}

/** The event a change of Ready makes, if any: none while its status stays, none for a first True. */
export function readyEvent(
  previous: { status: string } | undefined,
  next: ReadyUpdate,
): { type: 'Normal' | 'Warning'; reason: string; message: string } | undefined {
  if (previous?.status === next.status) return undefined;
  if (next.status !== 'True') return { type: 'Warning', reason: next.reason, message: `the issuer is not Ready: ${next.message}` };
  return previous === undefined ? undefined : { type: 'Normal', reason: next.reason, message: `the issuer is Ready again: ${next.message}` };
}

/** core/v1 Events, created only (as the key domain's). */
export class IssuerEventRecorder implements IssuerEvents {
  readonly #core: Pick<CoreClient, 'createNamespacedEvent'>;
  readonly #component: string;
  readonly #logger: Logger;

  constructor(core: Pick<CoreClient, 'createNamespacedEvent'>, component: string, logger: Logger) {
    this.#core = core;
    this.#component = component;
    this.#logger = logger;
  }

  async record(issuer: Pick<ClusterKeyIssuer, 'metadata'>, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const { name, uid, resourceVersion } = issuer.metadata;
    const now = new Date();
    try {
      const body = eventBody({ apiVersion: API_VERSION, kind: ISSUER_KIND, name, uid, resourceVersion }, type, reason, message, this.#component, now);
      await this.#core.createNamespacedEvent({ namespace: eventNamespace(body.involvedObject), body });
    } catch (error) {
      this.#logger.warn({ err: error instanceof Error ? error.message : String(error), reason }, 'could not record event');
    }
  }
}
