// What an inventory reports of the keys it does not manage by their names (inventory/origins.ts,
// docs/clusters.md): this cluster's format, another cluster's (with its name when the format has
// one), or none; counted exactly whatever details were kept, and shared by the views of one list.
// Unit: the listing and the report, no apiserver, no platform.
import { describe, expect, it } from '@jest/globals';
import { inventoryView } from '../../../src/operator/inventory/listing.ts';
import { originsOf, withOrigins } from '../../../src/operator/inventory/origins.ts';
import { report } from '../../../src/operator/inventory/report.ts';
import type { ListedKey } from '../../../src/operator/keys/adapter.ts';

const T0 = Date.parse('2026-11-28T00:00:00Z');
const key = (id: number, name: string): ListedKey => ({
  id,
  name,
  created_at: new Date(T0 + id * 1_000).toISOString(),
  last_used_at: null,
  last_used_from_addr: '',
});

describe('origins of the keys not managed', () => {
  const keys = [
    key(1, 'team-a-web.prod.abcde123'), // managed by prod
    key(2, 'team-b-web.staging.abcde123'),
    key(3, 'team-b-worker.staging.fghij456'),
    key(4, 'old-web-abcde123'), // the format without a cluster name
    key(5, 'left.prod.zzzzz999'), // prod's format, recorded by nobody
    key(6, 'console-made'),
  ];
  const listedAt = T0 + 3_600_000;

  it('counts and lists them as prod sees them', () => {
    const view = withOrigins(
      inventoryView(60_000, () => new Set([1])),
      'prod',
    );
    const listing = view.make(keys, listedAt);
    const origins = originsOf(listing, 'prod');
    expect(origins).toBeDefined();
    const r = report({
      listing,
      isManaged: (id) => id === 1,
      unusedAfterMs: 60_000,
      listedAt,
      scope: 'Organization',
      origins: { rows: origins as Uint8Array, cluster: 'prod' },
    });
    expect(r.notManaged).toBe(5);
    expect(r.notManagedByOrigin).toEqual({ thisCluster: 1, otherCluster: 3, byHand: 1 });
    const by = new Map(r.notManagedKeys.map((k) => [k.id, { origin: k.origin, cluster: k.cluster }]));
    expect(Object.fromEntries(by)).toEqual({
      2: { origin: 'OtherCluster', cluster: 'staging' },
      3: { origin: 'OtherCluster', cluster: 'staging' },
      4: { origin: 'OtherCluster', cluster: undefined },
      5: { origin: 'ThisCluster', cluster: undefined },
      6: { origin: 'ByHand', cluster: undefined },
    });
    // A managed key carries no origin: it is this cluster's by its record, whatever its name.
    expect(r.unusedKeys.find((k) => k.id === 1)).toEqual(expect.objectContaining({ managed: true }));
    expect(r.unusedKeys.find((k) => k.id === 1)?.origin).toBeUndefined();
  });

  it("the format without a cluster name is this cluster's for a cluster without one", () => {
    const listing = withOrigins(
      inventoryView(60_000, () => new Set()),
      '',
    ).make([...keys], listedAt);
    const r = report({
      listing,
      isManaged: () => false,
      unusedAfterMs: 60_000,
      listedAt,
      scope: 'Organization',
      origins: { rows: originsOf(listing, '') as Uint8Array, cluster: '' },
    });
    expect(r.notManagedByOrigin).toEqual({ thisCluster: 1, otherCluster: 4, byHand: 1 });
    expect(r.notManagedKeys.find((k) => k.id === 1)).toEqual(expect.objectContaining({ origin: 'OtherCluster', cluster: 'prod' }));
  });

  it('counts exactly the keys whose details were not kept, and lists them without a cluster', () => {
    const many = Array.from({ length: 30 }, (_, i) => key(100 + i, `k-${i}.staging.abcde${String(i).padStart(3, '0')}`));
    const listing = withOrigins(
      inventoryView(60_000, () => new Set(), 5),
      'prod',
    ).make(many, listedAt);
    const r = report({
      listing,
      isManaged: () => false,
      unusedAfterMs: 3_600_000 * 24 * 365,
      listedAt,
      scope: 'Organization',
      origins: { rows: originsOf(listing, 'prod') as Uint8Array, cluster: 'prod' },
    });
    expect(r.notManagedByOrigin).toEqual({ thisCluster: 0, otherCluster: 30, byHand: 0 });
    const withoutDetails = r.notManagedKeys.filter((k) => k.name === undefined);
    expect(withoutDetails.length).toBe(25);
    for (const k of withoutDetails) expect([k.origin, k.cluster]).toEqual(['OtherCluster', undefined]);
  });

  it("views of one list share its origins; a listing made for another cluster's name is not read as this one's", () => {
    const listed = [...keys];
    const first = withOrigins(
      inventoryView(60_000, () => new Set([1])),
      'prod',
    ).make(listed, listedAt);
    const second = withOrigins(
      inventoryView(120_000, () => new Set([1])),
      'prod',
    ).make(listed, listedAt);
    expect(second).toBe(first);
    expect(originsOf(second, 'prod')).toBe(originsOf(first, 'prod'));
    expect(originsOf(first, 'staging')).toBeUndefined();
  });

  it('a report without origins (a listing made otherwise) has no origin counts', () => {
    const listing = inventoryView(60_000, () => new Set()).make([...keys], listedAt);
    expect(originsOf(listing, '')).toBeUndefined();
    const r = report({ listing, isManaged: () => false, unusedAfterMs: 60_000, listedAt, scope: 'Organization' });
    expect(r.notManagedByOrigin).toBeUndefined();
    expect(r.notManagedKeys.every((k) => k.origin === undefined)).toBe(true);
  });
});
