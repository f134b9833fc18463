// What an ApiKeyInventory adds at 10,000 managed keys plus 1,000 others in one organization (issue
// 28), in-process: `node --expose-gc bench/inventory.ts [--managed 10000] [--others 1000] [--intervals 10]`.
// The whole operator with an inventory is bench/inventory-operator.ts (`npm run bench -- --only
// inventory`); this measures the parts the inventory adds, on the real code, and counts the
// platform's lists through the real DriftCache:
//   1. platform lists over N drift intervals: the drift checks of every managed key alone, then with
//      an inventory of the organization on the same credentials (the list is scripted and counted);
//   2. heap: the drift snapshot of the list with and without what the inventory keeps of it (after a
//      full GC; inventory/listing.ts), and the key resources' cache projection with and without status.keyId;
//   3. CPU of one inventory reconcile's work: the scan of the cached ids and the report.
// Prints a markdown table; docs/benchmarks.md "Inventory" holds a run.
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { DriftCache } from '../src/operator/keys/observing/drift.ts';
import { adapterFor, listFor, type KeyPlatform, type ListedKey } from '../src/operator/keys/adapter.ts';
import { recordedKeyIds, trimKeyResource } from '../src/operator/keys/observing/cache-projection.ts';
import { report } from '../src/operator/inventory/report.ts';
import { inventoryView } from '../src/operator/inventory/listing.ts';
import { ReferenceIndex } from '../src/operator/runtime/reference-index.ts';
import type { KeyResource } from '../src/operator/resources/schema.ts';

const { values } = parseArgs({
  options: { managed: { type: 'string', default: '10000' }, others: { type: 'string', default: '1000' }, intervals: { type: 'string', default: '10' } },
});
const MANAGED = Number(values.managed);
const OTHERS = Number(values.others);
const INTERVALS = Number(values.intervals);
const ORG = 'org-bench-00000001';
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');

/** Heap used and the typed arrays' backing stores (outside the heap: what inventory/listing.ts keeps its columns in). */
const heap = (): number => {
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
};
const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(2);

/** A listing as the platform client parses it (fresh objects and strings each time, as JSON.parse makes them). */
function platformList(): ListedKey[] {
  const text = JSON.stringify(
    Array.from({ length: MANAGED + OTHERS }, (_, i) => ({
      id: 1_000_000 + i,
      name: i < MANAGED ? `team-${i % 50}-app-${i}-x1y2z3w4` : `console-${i}`,
      created_at: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString().replace(/\.\d+Z$/, 'Z'),
      created_by: { id: 'c7f884ea-62fe-467d-a73b-98ae071b3df6', name: 'alice', image: 'https://example.com/alice.png' },
      last_used_at: i % 3 === 0 ? null : new Date(Date.UTC(2026, 10, 1) + i * 1000).toISOString().replace(/\.\d+Z$/, 'Z'),
      last_used_from_addr: i % 3 === 0 ? '' : `10.0.${(i >> 8) & 255}.${i & 255}`,
    })),
  );
  return JSON.parse(text) as ListedKey[];
}

const adapter = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Organization', organizationId: ORG } as never);

const UNUSED_AFTER_MS = 90 * 86_400_000;
const managedIds = new Set(Array.from({ length: MANAGED }, (_, i) => 1_000_000 + i));
const view = inventoryView(UNUSED_AFTER_MS, () => managedIds);

/** Phase 1: lists over INTERVALS intervals, checks of every managed key each interval, with or without an inventory. */
async function lists(withInventory: boolean): Promise<number> {
  let now = 1_000_000;
  let calls = 0;
  const platform = {
    listOrganizationKeys: async () => {
      calls++;
      return platformList();
    },
  } as unknown as KeyPlatform;
  const cache = new DriftCache(60_000, () => now);
  for (let interval = 0; interval < INTERVALS; interval++) {
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    // The checks of every managed key (sweeps spread them over the interval; here at its start).
    for (let i = 0; i < MANAGED; i += 1) await cache.keyState('cred-admin', adapter, platform, 1_000_000 + i, undefined);
    if (withInventory) await cache.listing('cred-admin', listFor(ORG), platform, view);
    now += 60_000;
  }
  return calls;
}

/** Phase 2: heap of the drift cache holding the list, with and without an inventory's listing. */
async function snapshotHeap(withInventory: boolean): Promise<number> {
  const platform = { listOrganizationKeys: async () => platformList() } as unknown as KeyPlatform;
  const before = heap();
  const cache = new DriftCache(60_000);
  if (withInventory) await cache.listing('cred-admin', listFor(ORG), platform, view);
  else await cache.keyState('cred-admin', adapter, platform, 1_000_000, undefined);
  const after = heap();
  if (cache.size === 0) throw new Error('unreachable');
  return after - before;
}

function resources(withKeyId: boolean): ReturnType<typeof trimKeyResource>[] {
  return Array.from({ length: MANAGED }, (_, i) =>
    trimKeyResource({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: {
        name: `app-${i}`,
        namespace: `team-${i % 50}`,
        uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
        resourceVersion: String(100_000 + i),
        generation: 1,
      },
      spec: { scope: 'Organization', organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } },
      status: { ...(withKeyId ? { keyId: 1_000_000 + i } : {}), conditions: [{ type: 'Ready', status: 'True', reason: 'Ready' }] },
    } as never),
  );
}

function projectionHeap(withKeyId: boolean): number {
  const before = heap();
  const kept = resources(withKeyId);
  const after = heap();
  if (kept.length !== MANAGED) throw new Error('unreachable');
  return after - before;
}

/** What an index of the recorded ids (value -> keys) would keep, for comparison with the scan. */
function indexHeap(): number {
  const before = heap();
  const index = new ReferenceIndex();
  for (let i = 0; i < MANAGED; i++) index.set(`ApiKey/team-${i % 50}/app-${i}`, [String(1_000_000 + i)]);
  const after = heap();
  if (index.size !== MANAGED) throw new Error('unreachable');
  return after - before;
}

const listsAlone = await lists(false);
const listsWithInventory = await lists(true);
const snapshotAlone = await snapshotHeap(false);
const snapshotWithInventory = await snapshotHeap(true);
const projectionWithout = projectionHeap(false);
const projectionWith = projectionHeap(true);
const index = indexHeap();

// Phase 3: what the list costs an inventory when it is taken (keep(): columns, sort, details), and
// one reconcile's work; medians of 9.
const answer = platformList();
const keepTimes: number[] = [];
for (let round = 0; round < 9; round++) {
  const started = performance.now();
  view.make(answer, Date.now());
  keepTimes.push(performance.now() - started);
}
keepTimes.sort((a, b) => a - b);
const cached = resources(true);
const listing = (await new DriftCache(60_000).listing('c', listFor(ORG), { listOrganizationKeys: async () => platformList() } as unknown as KeyPlatform, view))
  .view;
const times: number[] = [];
let counted = 0;
for (let round = 0; round < 9; round++) {
  const started = performance.now();
  const ids = recordedKeyIds(cached, new Set());
  const r = report({ listing, isManaged: (id) => ids.has(id), unusedAfterMs: UNUSED_AFTER_MS, listedAt: Date.now(), scope: 'Organization' });
  counted = r.managed;
  times.push(performance.now() - started);
}
times.sort((a, b) => a - b);
if (counted !== MANAGED) throw new Error(`counted ${counted} managed, expected ${MANAGED}`);

console.log(
  `| measurement (${MANAGED.toLocaleString('en')} managed keys + ${OTHERS.toLocaleString('en')} others, one organization, ${INTERVALS} drift intervals) | result |`,
);
console.log('|---|---|');
console.log(
  `| platform lists: drift checks alone / with an inventory on the same credentials | ${listsAlone} / ${listsWithInventory} (**${listsWithInventory - listsAlone} more**: the list the checks took before the inventory first read it, taken once more; none after) |`,
);
console.log(
  `| heap of the drift list: use only (no inventory) / with what an inventory keeps of it (counts of every key, details of ${listing.details.size} keys) | ${mib(snapshotAlone)} / ${mib(snapshotWithInventory)} MiB (**+${mib(snapshotWithInventory - snapshotAlone)} MiB**, ${((snapshotWithInventory - snapshotAlone) / (MANAGED + OTHERS)).toFixed(0)} B a key) |`,
);
console.log(
  `| heap of ${MANAGED.toLocaleString('en')} cached key resources: without / with status.keyId kept | ${mib(projectionWithout)} / ${mib(projectionWith)} MiB (**${((projectionWith - projectionWithout) / MANAGED).toFixed(1)} B a resource**) |`,
);
console.log(
  `| (not kept) an index of the recorded ids instead, ${MANAGED.toLocaleString('en')} entries | ${mib(index)} MiB (${(index / MANAGED).toFixed(0)} B a resource) |`,
);
console.log(
  `| what an inventory keeps of a list, made when the list is taken (columns, newest-first sort, details; median of 9) | **${keepTimes[4]?.toFixed(1)} ms** (min ${keepTimes[0]?.toFixed(1)}, max ${keepTimes[8]?.toFixed(1)}) |`,
);
console.log(
  `| one inventory reconcile's work: scan of the cached ids + report (median of 9) | **${times[4]?.toFixed(1)} ms** (min ${times[0]?.toFixed(1)}, max ${times[8]?.toFixed(1)}) |`,
);
