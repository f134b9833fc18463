// What an edit of an ApiKeyInventory's spec.unusedAfter costs, in-process: `node bench/inventory-edits.ts
// [--keys 11000] [--edits 90]`. The real DriftCache with a scripted, counted platform list, an inventory
// view per value (inventory/listing.ts) and the report (inventory/report.ts), as one reconcile reads
// them; the edits cycle through nine values (more than the 4 views a list keeps), all within one
// drift interval. Prints the platform lists the edits took and the time of each edit (docs/inventory.md, Cost).
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { DriftCache } from '../src/operator/keys/observing/drift.ts';
import { listFor, type KeyPlatform, type ListedKey } from '../src/operator/keys/adapter.ts';
import { inventoryView } from '../src/operator/inventory/listing.ts';
import { report } from '../src/operator/inventory/report.ts';

const { values } = parseArgs({ options: { keys: { type: 'string', default: '11000' }, edits: { type: 'string', default: '90' } } });
const KEYS = Number(values.keys);
const EDITS = Number(values.edits);
const H = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

/** One key a minute, a third never used, half project-scoped; the first 10 of each 11 managed. */
const answer = (): ListedKey[] =>
  Array.from(
    { length: KEYS },
    (_, i) =>
      ({
        id: 1_000_000 + i,
        name: `key-${i}`,
        created_at: iso(T0 + i * 60_000),
        created_by: { id: 'u-1', name: 'alice' },
        last_used_at: i % 3 === 0 ? null : iso(T0 + i * 90_000),
        last_used_from_addr: '10.0.0.1',
        ...(i % 2 === 1 ? { project_id: 'p-1' } : {}),
      }) as ListedKey,
  );
let lists = 0;
const platform = {
  listOrganizationKeys: async () => {
    lists++;
    return answer();
  },
} as unknown as KeyPlatform;
const managed = new Set(Array.from({ length: KEYS }, (_, i) => 1_000_000 + i).filter((id) => id % 11 !== 10));
const cache = new DriftCache(600_000);

const edit = async (unusedAfterMs: number): Promise<number> => {
  const { at, view } = await cache.listing(
    'c',
    listFor('org-bench-00000001'),
    platform,
    inventoryView(unusedAfterMs, () => managed),
  );
  return report({ listing: view, isManaged: (id) => managed.has(id), unusedAfterMs, listedAt: at, scope: 'Organization' }).unused;
};

await edit(24 * H);
const first = lists;
const times: number[] = [];
for (let i = 0; i < EDITS; i++) {
  const started = performance.now();
  await edit((1 + (i % 9)) * H);
  times.push(performance.now() - started);
}
times.sort((a, b) => a - b);
const at = (q: number): string => (times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? Number.NaN).toFixed(2);
console.log(
  `${EDITS} edits of unusedAfter on a list of ${KEYS.toLocaleString('en')} keys: ${lists - first} platform lists; per edit median ${at(0.5)} ms, 90th percentile ${at(0.9)} ms, max ${at(1)} ms`,
);
