// The inventory's gauge (docs/inventory.md, Metrics): neon_key_operator_inventory_keys{namespace,
// inventory, state}, state one of live, managed, unmanaged, unused, and the unmanaged keys split by
// what their names say made them (docs/clusters.md): unmanaged_this_cluster, unmanaged_other_cluster,
// unmanaged_by_hand, which add up to unmanaged. Counted when scraped from what the last reports
// found. No key id in any label; the organization id is a label only when asked for
// (--inventory-organization-label): it names a customer of the platform.
import { Gauge, type Registry } from 'prom-client';

export const INVENTORY_METRIC = 'neon_key_operator_inventory_keys';

/** Every value of the gauge's state label (alert rules may name only these). */
export const INVENTORY_STATES = ['live', 'managed', 'unmanaged', 'unused', 'unmanaged_this_cluster', 'unmanaged_other_cluster', 'unmanaged_by_hand'] as const;
type InventoryState = (typeof INVENTORY_STATES)[number];

export interface InventoryCounts {
  namespace: string;
  name: string;
  organizationId: string | undefined;
  live: number;
  managed: number;
  notManaged: number;
  unused: number;
  /** The not-managed keys by origin (report.ts), when the listing carried origins: else no split series. */
  notManagedByOrigin?: { thisCluster: number; otherCluster: number; byHand: number } | undefined;
}

/** Registers the gauge; `counts` is read at each scrape. Returns what unregisters it. */
export function registerInventoryGauge(registry: Registry, counts: () => Iterable<InventoryCounts>, withOrganization: boolean): () => void {
  const labelNames = withOrganization ? (['namespace', 'inventory', 'state', 'organization'] as const) : (['namespace', 'inventory', 'state'] as const);
  new Gauge({
    name: INVENTORY_METRIC,
    help:
      "Live keys of each ApiKeyInventory by state: live, managed (recorded in this cluster), unmanaged, unused; and unmanaged by what the key's name says made it: " +
      'unmanaged_this_cluster, unmanaged_other_cluster, unmanaged_by_hand (they add up to unmanaged). The organization label only with --inventory-organization-label.',
    labelNames: [...labelNames],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of counts()) {
        const base: Record<string, string> = {
          namespace: c.namespace,
          inventory: c.name,
          ...(withOrganization ? { organization: c.organizationId ?? 'personal' } : {}),
        };
        const set = (state: InventoryState, value: number): void => {
          this.set({ ...base, state }, value);
        };
        set('live', c.live);
        set('managed', c.managed);
        set('unmanaged', c.notManaged);
        set('unused', c.unused);
        const origin = c.notManagedByOrigin;
        if (origin !== undefined) {
          set('unmanaged_this_cluster', origin.thisCluster);
          set('unmanaged_other_cluster', origin.otherCluster);
          set('unmanaged_by_hand', origin.byHand);
        }
      }
    },
  });
  return () => registry.removeSingleMetric(INVENTORY_METRIC);
}
