// The inventory's gauge (docs/inventory.md, Metrics): neon_key_operator_inventory_keys{namespace,
// inventory, state}, state one of live, managed, unmanaged, unused, counted when scraped from what
// the last reports found. No key id in any label; the organization id is a label only when asked
// for (--inventory-organization-label): it names a customer of the platform.
import { Gauge, type Registry } from 'prom-client';

export const INVENTORY_METRIC = 'neon_key_operator_inventory_keys';

export interface InventoryCounts {
  namespace: string;
  name: string;
  organizationId: string | undefined;
  live: number;
  managed: number;
  notManaged: number;
  unused: number;
}

/** Registers the gauge; `counts` is read at each scrape. Returns what unregisters it. */
export function registerInventoryGauge(registry: Registry, counts: () => Iterable<InventoryCounts>, withOrganization: boolean): () => void {
  const labelNames = withOrganization ? ['namespace', 'inventory', 'state', 'organization'] as const : ['namespace', 'inventory', 'state'] as const;
  new Gauge({
    name: INVENTORY_METRIC,
    help: 'Live keys of each ApiKeyInventory by state: live, managed (recorded in this cluster), unmanaged, unused. The organization label only with --inventory-organization-label.',
    labelNames: [...labelNames],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of counts()) {
        const base: Record<string, string> = { namespace: c.namespace, inventory: c.name, ...(withOrganization ? { organization: c.organizationId ?? 'personal' } : {}) };
        this.set({ ...base, state: 'live' }, c.live);
        this.set({ ...base, state: 'managed' }, c.managed);
        this.set({ ...base, state: 'unmanaged' }, c.notManaged);
        this.set({ ...base, state: 'unused' }, c.unused);
      }
    },
  });
  return () => registry.removeSingleMetric(INVENTORY_METRIC);
}
