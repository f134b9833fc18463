// The inventory gauge (inventory/metrics.ts, docs/reference/metrics.md): the four states of every
// inventory, and the unmanaged keys split by origin only for a report that carried origins; the
// three parts add up to unmanaged; the organization label only when asked for. Unit: a real
// prom-client registry fed the reports' counts, no apiserver, no platform.
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { INVENTORY_METRIC, INVENTORY_STATES, registerInventoryGauge, type InventoryCounts } from '../../../src/operator/inventory/metrics.ts';

const withOrigins: InventoryCounts = {
  namespace: 'team-a',
  name: 'org',
  organizationId: 'org-demo-00000001',
  live: 9,
  managed: 3,
  notManaged: 6,
  unused: 2,
  notManagedByOrigin: { thisCluster: 1, otherCluster: 4, byHand: 1 },
};
const withoutOrigins: InventoryCounts = { namespace: 'team-b', name: 'personal', organizationId: undefined, live: 2, managed: 0, notManaged: 2, unused: 0 };

/** The gauge's samples as `labels → value`, its labels in a fixed order. */
async function samples(registry: Registry): Promise<Map<string, number>> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === INVENTORY_METRIC);
  const values = (metric?.values ?? []) as { labels: Record<string, string | number>; value: number }[];
  return new Map(
    values.map((v) => [
      ['namespace', 'inventory', 'state', 'organization']
        .filter((k) => k in v.labels)
        .map((k) => `${k}=${v.labels[k]}`)
        .join(','),
      v.value,
    ]),
  );
}

describe('the inventory gauge', () => {
  it('shows the four states of each inventory, and unmanaged by origin (adding up to it) where the report has origins', async () => {
    const registry = new Registry();
    const unregister = registerInventoryGauge(registry, () => [withOrigins, withoutOrigins], false);
    const got = await samples(registry);
    expect(got).toEqual(
      new Map([
        ['namespace=team-a,inventory=org,state=live', 9],
        ['namespace=team-a,inventory=org,state=managed', 3],
        ['namespace=team-a,inventory=org,state=unmanaged', 6],
        ['namespace=team-a,inventory=org,state=unused', 2],
        ['namespace=team-a,inventory=org,state=unmanaged_this_cluster', 1],
        ['namespace=team-a,inventory=org,state=unmanaged_other_cluster', 4],
        ['namespace=team-a,inventory=org,state=unmanaged_by_hand', 1],
        ['namespace=team-b,inventory=personal,state=live', 2],
        ['namespace=team-b,inventory=personal,state=managed', 0],
        ['namespace=team-b,inventory=personal,state=unmanaged', 2],
        ['namespace=team-b,inventory=personal,state=unused', 0],
      ]),
    );
    const split = [...got].filter(([k]) => k.startsWith('namespace=team-a,') && /state=unmanaged_/.test(k)).reduce((n, [, v]) => n + v, 0);
    expect(split).toBe(got.get('namespace=team-a,inventory=org,state=unmanaged'));
    // Every state written is one INVENTORY_STATES names (what the alert rules are checked against), and each is written.
    expect(new Set([...got.keys()].map((k) => /state=([a-z_]+)/.exec(k)?.[1]))).toEqual(new Set(INVENTORY_STATES));
    unregister();
    expect(await registry.getSingleMetricAsString(INVENTORY_METRIC).catch(() => 'gone')).toBe('gone');
  });

  it('labels each series with the organization only when asked for (personal for a personal inventory)', async () => {
    const registry = new Registry();
    registerInventoryGauge(registry, () => [withOrigins, withoutOrigins], true);
    const got = await samples(registry);
    expect(got.size).toBe(11);
    expect(got.get('namespace=team-a,inventory=org,state=unmanaged_by_hand,organization=org-demo-00000001')).toBe(1);
    expect(got.get('namespace=team-b,inventory=personal,state=unmanaged,organization=personal')).toBe(2);
  });
});
