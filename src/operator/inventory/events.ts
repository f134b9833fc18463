// The inventory's events (docs/inventory.md, Events): a key not managed appeared, a managed key went
// unused; and a Warning when an issuerRef is refused (NotAllowed, IssuerNotFound). At most MAX_KEY_EVENTS of each per list, then one that counts the rest, so a first list of
// thousands of keys by hand is not thousands of events. A message names the key (id, name, kind,
// creator, last use): what the credentials could list anyway. Never which resource, in which
// namespace, records a managed key, and never a secret.
import type { Logger } from 'pino';
import { API_VERSION } from '../resources/schema.ts';
import { INVENTORY_KIND, type ApiKeyInventory, type InventoryKey } from '../resources/inventory.ts';
import { eventBody } from '../runtime/event-body.ts';
import type { CoreClient } from '../runtime/kube-client.ts';

export const MAX_KEY_EVENTS = 10;

export type InventoryEventReason = 'KeyNotManaged' | 'KeyUnused' | 'NotAllowed' | 'IssuerNotFound';

/** Keys that are news of one reason: the newest MAX_KEY_EVENTS, and how many there are. */
export interface KeyNews {
  keys: InventoryKey[];
  total: number;
}

export interface InventoryEvents {
  record(inventory: Pick<ApiKeyInventory, 'metadata'>, reason: InventoryEventReason, message: string): Promise<void>;
}

function describe(key: InventoryKey): string {
  const kind =
    key.kind === 'Project' ? `project-scoped key${key.projectId !== undefined ? ` of project ${key.projectId}` : ''}` : `${key.kind.toLowerCase()} key`;
  const by = key.createdBy !== undefined ? ` by ${key.createdBy}` : '';
  const used =
    key.lastUsedAt !== undefined ? `last used ${key.lastUsedAt}${key.lastUsedFromAddr !== undefined ? ` from ${key.lastUsedFromAddr}` : ''}` : 'never used';
  const name = key.name !== undefined ? ` "${key.name}"` : '';
  return `key ${key.id}${name} (${kind}, created ${key.createdAt}${by}, ${used})`;
}

/** What the key's name says made it (origins.ts), when it says anything. */
function namedAs(key: InventoryKey): string {
  if (key.origin === 'ThisCluster') return '; it is named as this cluster names its keys';
  if (key.origin !== 'OtherCluster') return '';
  return key.cluster !== undefined
    ? `; it is named as cluster ${key.cluster} names its keys`
    : '; it is named as a cluster without a cluster name names its keys';
}

/** The events of one list: each key in turn, at most MAX_KEY_EVENTS per reason, then a count of the rest. */
export async function recordKeyEvents(
  events: InventoryEvents,
  inventory: Pick<ApiKeyInventory, 'metadata'>,
  appeared: KeyNews,
  wentUnused: KeyNews,
): Promise<void> {
  const each = async (
    { keys, total }: KeyNews,
    reason: InventoryEventReason,
    what: (key: InventoryKey) => string,
    rest: (n: number) => string,
  ): Promise<void> => {
    for (const key of keys.slice(0, MAX_KEY_EVENTS)) await events.record(inventory, reason, what(key));
    if (total > MAX_KEY_EVENTS) await events.record(inventory, reason, rest(total - MAX_KEY_EVENTS));
  };
  await each(
    appeared,
    'KeyNotManaged',
    (k) => `${describe(k)} is live and not managed by any ApiKey or ProjectApiKey of this cluster${namedAs(k)}`,
    (n) => `and ${n} more keys not managed appeared; status.notManagedKeys lists the newest`,
  );
  await each(
    wentUnused,
    'KeyUnused',
    (k) => `managed ${describe(k)} has not been used within spec.unusedAfter`,
    (n) => `and ${n} more managed keys went unused; status.unusedKeys lists the newest`,
  );
}

/** Events as core/v1 Events on the inventory (created only, as the key domain's: keys/status/events.ts). */
export class InventoryEventRecorder implements InventoryEvents {
  readonly #core: Pick<CoreClient, 'createNamespacedEvent'>;
  readonly #component: string;
  readonly #logger: Logger;

  constructor(core: Pick<CoreClient, 'createNamespacedEvent'>, component: string, logger: Logger) {
    this.#core = core;
    this.#component = component;
    this.#logger = logger;
  }

  async record(inventory: Pick<ApiKeyInventory, 'metadata'>, reason: InventoryEventReason, message: string): Promise<void> {
    const { namespace, name, uid, resourceVersion } = inventory.metadata;
    const now = new Date();
    try {
      const body = eventBody(
        { apiVersion: API_VERSION, kind: INVENTORY_KIND, name, namespace, uid, resourceVersion },
        reason === 'KeyUnused' ? 'Normal' : 'Warning',
        reason,
        message,
        this.#component,
        now,
      );
      await this.#core.createNamespacedEvent({ namespace, body });
    } catch (error) {
      this.#logger.warn({ err: error instanceof Error ? error.message : String(error), reason }, 'could not record event');
    }
  }
}
