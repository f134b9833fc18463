// What an inventory keeps of its organization's key list is bounded (inventory/listing.ts,
// docs/inventory.md "Cost"): counts of every key, details of the newest keys not managed and unused
// only. Against the emulator over HTTP (a real PlatformClient and DriftCache): more keys than a small
// cap set for the test, then a hostile platform's huge list through a FAKE, named as such: a loopback
// proxy in front of the emulator that answers the organization's key list with a list as large as
// the client reads (the emulator cannot be made to answer that).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startEmulator, type Emulator } from '../../../src/emulator/server.ts';
import { KEPT_DETAILS, inventoryView } from '../../../src/operator/inventory/listing.ts';
import { report } from '../../../src/operator/inventory/report.ts';
import { DriftCache } from '../../../src/operator/keys/observing/drift.ts';
import { adapterFor, listFor } from '../../../src/operator/keys/adapter.ts';
import type { KeyResource } from '../../../src/operator/resources/schema.ts';
import { PlatformClient } from '../../../src/platform/index.ts';

const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';
const DAY = 86_400_000;

describe('what an inventory keeps of a key list', () => {
  let emulator: Emulator;
  let alice: PlatformClient;
  let aliceKey: string;

  beforeAll(async () => {
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    alice = new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: aliceKey, retry: { maxAttempts: 1 } });
  });

  afterAll(async () => {
    await emulator?.close();
  });

  it('against the emulator: more keys than the cap set here are all counted; the lists show the newest, those past the cap without details, counted', async () => {
    // 24 keys by hand (the client paces at the platform's 10 a second), half project-scoped; 6 of them "managed".
    const made: number[] = [];
    for (let i = 0; i < 24; i++)
      made.push(
        (await alice.createOrganizationKey(ORG, { keyName: `by-hand-${String(i).padStart(2, '0')}`, ...(i % 2 === 1 ? { projectId: PROJECT } : {}) })).id,
      );
    const managed = new Set(made.slice(0, 6));
    const live = (await alice.listOrganizationKeys(ORG)).length;
    const cache = new DriftCache(60_000);
    const cap = 5;
    const { at, view } = await cache.listing(
      'alice',
      listFor(ORG),
      alice,
      inventoryView(90 * DAY, () => managed, cap),
    );
    // At most cap keys not managed and cap unused keep their details (none is unused here).
    expect(view.size).toBe(live);
    expect(view.details.size).toBe(cap);
    const r = report({ listing: view, isManaged: (id) => managed.has(id), unusedAfterMs: 90 * DAY, listedAt: at, scope: 'Organization' });
    expect([r.live, r.managed, r.notManaged, r.unused]).toEqual([live, 6, live - 6, 0]);
    // Newest first: the last made, with its details; past the cap, entries without them.
    expect(r.notManagedKeys[0]).toEqual(
      expect.objectContaining({ id: made[23], name: 'by-hand-23', kind: 'Project', projectId: PROJECT, createdBy: expect.stringContaining('alice') }),
    );
    expect(r.notManagedKeys.slice(0, cap).every((k) => k.name !== undefined)).toBe(true);
    const without = r.notManagedKeys.slice(cap);
    expect(without.length).toBe(live - 6 - cap);
    expect(without.every((k) => k.name === undefined && k.createdBy === undefined && k.projectId === undefined)).toBe(true);
    expect(without.find((k) => k.id === made[7])).toEqual({ id: made[7], kind: 'Project', createdAt: expect.any(String), managed: false });
    expect(r.withoutDetails).toBe(live - 6 - cap);
  }, 30_000);

  describe('a hostile platform answering a huge list', () => {
    let proxy: Server;
    let proxyUrl: string;
    const HUGE = 25_000;
    const LONG = 'x'.repeat(100);

    beforeAll(async () => {
      const upstream = new URL(emulator.baseUrl);
      // The huge list: 25,000 keys (ids past the emulator's), each name, creator and address over
      // 100 characters: 13 MiB of JSON, under the 16 MiB the client reads.
      const body = JSON.stringify(
        Array.from({ length: HUGE }, (_, i) => ({
          id: 900_000 + i,
          name: `${LONG}-${i}`,
          created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString().replace(/\.\d+Z$/, 'Z'),
          created_by: { id: `${LONG}-${i % 7}`, name: LONG },
          last_used_at: i % 2 === 0 ? null : '2026-11-20T00:00:00Z',
          last_used_from_addr: `${LONG}.${i}`,
          ...(i % 3 === 0 ? { project_id: `${LONG}-p` } : {}),
        })),
      );
      expect(body.length).toBeLessThan(16 * 1024 * 1024);
      proxy = createServer((req, res) => {
        if (req.method === 'GET' && /\/organizations\/[^/]+\/api_keys$/.test(req.url ?? '')) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(body);
          return;
        }
        void fetch(`${upstream.origin}${req.url}`, { method: req.method ?? 'GET', headers: { authorization: String(req.headers.authorization) } }).then(
          async (answer) => {
            res.writeHead(answer.status, { 'content-type': 'application/json' });
            res.end(await answer.text());
          },
          () => res.destroy(),
        );
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${upstream.pathname}`;
    });

    afterAll(async () => {
      proxy?.closeAllConnections();
      await new Promise<void>((resolve) => (proxy === undefined ? resolve() : proxy.close(() => resolve())));
    });

    it('counts every key exactly, keeps details of 2 × KEPT_DETAILS keys at most, each string cut to 64 characters, and about 25 bytes a key', async () => {
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      // Heap used after full GCs given time to finish (the answer's buffers and strings are freed
      // lazily); the view's columns live in array buffers, counted from their sizes below.
      const settled = async (): Promise<number> => {
        for (let i = 0; i < 3; i++) {
          gc();
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        return process.memoryUsage().heapUsed;
      };
      // What a cache retains: the heap while it is held less the heap once it is let go. Code
      // compiled on the way, the client's connections and anything else the process allocated
      // meanwhile stay on both sides, so they are not counted (CI saw them add 1.5 MiB to a
      // before-and-after difference on a busy machine). `check` reads the value while it is held.
      const kept = async <T>(take: (cache: DriftCache) => Promise<T>, check: (value: T, cache: DriftCache) => void): Promise<number> => {
        const slot: { cache?: DriftCache; value?: T } = { cache: new DriftCache(60_000) };
        slot.value = await take(slot.cache!);
        const held = await settled();
        check(slot.value, slot.cache!);
        delete slot.cache;
        delete slot.value;
        const released = await settled();
        return held - released;
      };
      const client = new PlatformClient({ baseUrl: proxyUrl, apiKey: aliceKey, retry: { maxAttempts: 1 } });
      // The drift snapshot alone (the key domain's check of a key of that list), then with the inventory's view.
      const adapter = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Organization', organizationId: ORG } as never);
      const driftBytes = await kept(
        (cache) => cache.keyState('alice', adapter, client, 900_000, undefined),
        (_, cache) => expect(cache.size).toBe(1),
      );
      let columns = 0;
      const inventoryBytes = await kept(
        (cache) =>
          cache.listing(
            'alice',
            listFor(ORG),
            client,
            inventoryView(90 * DAY, () => new Set()),
          ),
        ({ at, view }, cache) => {
          expect(cache.size).toBe(1);
          expect(view.size).toBe(HUGE);
          // The newest 200 (none managed), and the newest 200 unused (never used: every other key), half of them among those 200.
          expect(view.details.size).toBe(KEPT_DETAILS + KEPT_DETAILS / 2);
          const strings = [...view.details.values()].flatMap((d) => [
            d.name,
            d.lastUsedFromAddr,
            d.projectId ?? '',
            d.createdBy?.id ?? '',
            d.createdBy?.name ?? '',
          ]);
          expect(Math.max(...strings.map((s) => s.length))).toBeLessThanOrEqual(64);
          const r = report({ listing: view, isManaged: () => false, unusedAfterMs: 90 * DAY, listedAt: at, scope: 'Organization' });
          expect([r.live, r.notManaged, r.neverUsed, r.notManagedKeys.length, r.unusedKeys.length, r.withoutDetails]).toEqual([
            HUGE,
            HUGE,
            HUGE / 2,
            50,
            50,
            0,
          ]);
          expect(r.notManagedKeys[0]).toEqual(expect.objectContaining({ id: 900_000 + HUGE - 1, name: `${LONG}-${HUGE - 1}`.slice(0, 64) }));
          // The view's columns live in array buffers (outside the heap), counted from their sizes.
          columns = view.ids.byteLength + view.createdMs.byteLength + view.lastUsedMs.byteLength + view.flags.byteLength;
        },
      );
      // What stays: the list's drift snapshot (each key's use; the key domain's, about 100 B a key)
      // and the inventory's view. The view alone: the columns (25 B a key) and 400 small details.
      expect(columns).toBe(25 * HUGE);
      // The view's own cost: what the cache holds with it, less the drift snapshot alone. The whole
      // listing it kept before held every name, creator and address.
      const viewBytes = inventoryBytes - driftBytes + columns;
      // Both were measured: each cache, let go, gave its bytes back (the view holds a snapshot too).
      expect(driftBytes).toBeGreaterThan(HUGE * 8);
      expect(inventoryBytes).toBeGreaterThan(driftBytes / 2);
      expect(viewBytes).toBeLessThan(2 * 1024 * 1024);
      setFlagsFromString('--no-expose-gc');
    }, 60_000);
  });
});
