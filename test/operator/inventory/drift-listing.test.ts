// The inventory reads the drift cache's list (DriftCache.listing): the same request as the drift
// checks of that credentials and scope, its whole listing kept only once an inventory asks. The
// platform's list is scripted and its calls counted; the whole operator against the apiserver and
// the emulator is test/operator/inventory.test.ts.
import { describe, expect, it } from '@jest/globals';
import { DriftCache } from '../../../src/operator/keys/observing/drift.ts';
import { inventoryView, keep } from '../../../src/operator/inventory/listing.ts';
import { report } from '../../../src/operator/inventory/report.ts';
import { adapterFor, listFor, type KeyPlatform, type ListedKey } from '../../../src/operator/keys/adapter.ts';
import type { ListingView } from '../../../src/operator/keys/observing/drift-listing.ts';
import type { KeyResource } from '../../../src/operator/resources/schema.ts';

const listed = (id: number): ListedKey =>
  ({
    id,
    name: `key-${id}`,
    created_at: '2026-11-23T10:00:00Z',
    created_by: { id: 'u-1', name: 'alice', image: 'https://example.com/a.png' },
    last_used_at: null,
    last_used_from_addr: '',
  }) as ListedKey;

/** A reader that keeps the ids and names of the list, and counts what it was made from. */
function names(id = 'names'): ListingView<{ id: number; name: string }[]> & { made: number } {
  const view = {
    id,
    made: 0,
    make: (listed: readonly ListedKey[]) => {
      view.made++;
      return listed.map((k) => ({ id: k.id, name: k.name }));
    },
  };
  return view;
}

function counting() {
  let keys = [listed(1), listed(2)];
  let calls = 0;
  const platform = {
    listOrganizationKeys: async () => {
      calls++;
      return keys;
    },
    listPersonalKeys: async () => {
      calls++;
      return keys;
    },
  } as unknown as KeyPlatform;
  return {
    platform,
    calls: () => calls,
    setKeys: (ids: number[]) => {
      keys = ids.map(listed);
    },
  };
}

describe('DriftCache.listing: an inventory on the drift list', () => {
  it("lists with the key adapters' scopes (one list per scope, whoever asks)", () => {
    const org = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Organization', organizationId: 'org-a-1' } as never);
    const project = adapterFor({ kind: 'ProjectApiKey' } as KeyResource, { organizationId: 'org-a-1', projectId: 'p-1' } as never);
    const personal = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Personal' } as never);
    expect([org.listScope, project.listScope]).toEqual([listFor('org-a-1').listScope, listFor('org-a-1').listScope]);
    expect(personal.listScope).toBe(listFor(undefined).listScope);
  });

  it("shares the checks' request: an inventory asking from the start costs no list of its own, per interval", async () => {
    let now = 1_000_000;
    const cache = new DriftCache(60_000, () => now);
    const p = counting();
    const view = names();
    const first = await cache.listing('cred-a', listFor('org-a-1'), p.platform, view);
    expect(p.calls()).toBe(1);
    // What the reader's view kept of the answer, made once.
    expect(first.view).toEqual([
      { id: 1, name: 'key-1' },
      { id: 2, name: 'key-2' },
    ]);
    expect(view.made).toBe(1);
    // A drift check of a key of that organization, on the same credentials, reads the same snapshot.
    const adapter = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Organization', organizationId: 'org-a-1' } as never);
    expect((await cache.keyState('cred-a', adapter, p.platform, 2, undefined)).state).toBe('Live');
    expect(p.calls()).toBe(1);
    // An interval on, the sweep takes the list again (once), and both read it.
    p.setKeys([2, 3]);
    now += 60_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(p.calls()).toBe(2);
    expect((await cache.listing('cred-a', listFor('org-a-1'), p.platform, view)).view.map((k) => k.id)).toEqual([2, 3]);
    expect((await cache.keyState('cred-a', adapter, p.platform, 3, undefined)).state).toBe('Live');
    expect(p.calls()).toBe(2);
    // Other credentials are another list.
    await cache.listing('cred-b', listFor('org-a-1'), p.platform, view);
    expect(p.calls()).toBe(3);
  });

  it('a list the checks took before any inventory read it is taken once more, at once; then shared again', async () => {
    let now = 1_000_000;
    const cache = new DriftCache(60_000, () => now);
    const p = counting();
    const adapter = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Organization', organizationId: 'org-a-2' } as never);
    await cache.keyState('cred-a', adapter, p.platform, 1, undefined);
    expect(p.calls()).toBe(1);
    await cache.listing('cred-a', listFor('org-a-2'), p.platform, names());
    expect(p.calls()).toBe(2);
    now += 10_000;
    await cache.listing('cred-a', listFor('org-a-2'), p.platform, names());
    await cache.keyState('cred-a', adapter, p.platform, 1, undefined);
    expect(p.calls()).toBe(2);
  });

  it("keeps one view per reader's id: a new view takes the list once more; at most four are kept", async () => {
    const now = 1_000_000;
    const cache = new DriftCache(60_000, () => now);
    const p = counting();
    const a = names('a');
    await cache.listing('cred-a', listFor('org-a-4'), p.platform, a);
    await cache.listing('cred-a', listFor('org-a-4'), p.platform, names('a'));
    expect([p.calls(), a.made]).toEqual([1, 1]);
    // Another view of the same list: taken once more, and both made from that answer.
    const b = names('b');
    expect((await cache.listing('cred-a', listFor('org-a-4'), p.platform, b)).view).toHaveLength(2);
    expect([p.calls(), a.made, b.made]).toEqual([2, 2, 1]);
    // Three more views: the least recently asked (a) goes, and is taken again when asked again.
    for (const id of ['c', 'd', 'e']) await cache.listing('cred-a', listFor('org-a-4'), p.platform, names(id));
    expect(p.calls()).toBe(5);
    await cache.listing('cred-a', listFor('org-a-4'), p.platform, names('b'));
    expect(p.calls()).toBe(5);
    await cache.listing('cred-a', listFor('org-a-4'), p.platform, names('a'));
    expect(p.calls()).toBe(6);
  });

  it("a view that another view of the same list answers (from) costs no list: the list's age alone decides when it is taken again", async () => {
    let now = 1_000_000;
    const cache = new DriftCache(60_000, () => now);
    const p = counting();
    const derivable = (id: string): ReturnType<typeof names> & { derived: number } => {
      const view = Object.assign(names(id), {
        derived: 0,
        from: (_: string, other: unknown) => {
          view.derived++;
          return other as { id: number; name: string }[];
        },
      });
      return view;
    };
    const first = derivable('v-0');
    await cache.listing('cred-a', listFor('org-a-6'), p.platform, first);
    // 40 views asked one after the other (a spec edited in a loop): none takes the list, none is made from an answer.
    const views = Array.from({ length: 40 }, (_, i) => derivable(`v-${i + 1}`));
    for (const view of views) expect((await cache.listing('cred-a', listFor('org-a-6'), p.platform, view)).view).toHaveLength(2);
    expect([p.calls(), first.made, views.reduce((n, v) => n + v.made, 0), views.reduce((n, v) => n + v.derived, 0)]).toEqual([1, 1, 0, 40]);
    // An interval on, the list is taken once, and the four views asked last are made from it.
    now += 60_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(p.calls()).toBe(2);
    expect(views.slice(-4).map((v) => v.made)).toEqual([1, 1, 1, 1]);
    expect(views.slice(0, -4).every((v) => v.made === 0)).toBe(true);
    // A view that cannot be made from the others (no from) still takes the list once more.
    await cache.listing('cred-a', listFor('org-a-6'), p.platform, names('plain'));
    expect(p.calls()).toBe(3);
  });

  it("inventory views: one listing per list whatever the unusedAfter; another unusedAfter is answered from it with exact counts, unused keys' details from the next list", async () => {
    let now = Date.parse('2026-11-26T00:00:00Z');
    const H = 3_600_000;
    const cache = new DriftCache(60_000, () => now);
    let calls = 0;
    // 300 keys never used, one an hour, all managed: the only details kept are the unused ones'.
    const keys = Array.from({ length: 300 }, (_, i) => ({ ...listed(1 + i), created_at: new Date(now - (300 - i) * H).toISOString().replace(/\.\d+Z$/, 'Z') }));
    const platform = {
      listOrganizationKeys: async () => {
        calls++;
        return keys;
      },
    } as unknown as KeyPlatform;
    const recorded = new Set(keys.map((k) => k.id));
    const ask = (unusedAfterMs: number) =>
      cache.listing(
        'cred-a',
        listFor('org-a-7'),
        platform,
        inventoryView(unusedAfterMs, () => recorded),
      );
    const reportOf = (r: Awaited<ReturnType<typeof ask>>, unusedAfterMs: number) =>
      report({ listing: r.view, isManaged: () => true, unusedAfterMs, listedAt: r.at, scope: 'Organization' });
    const first = await ask(250 * H);
    expect(calls).toBe(1);
    expect([...first.view.unusedDetailsFor]).toEqual([250 * H]);
    expect(first.view.details.size).toBe(51);
    // Another unusedAfter: the same listing (no list, no sort), exact counts and entries; the unused
    // keys' details were kept for 250h only, so its 50 entries are shown without them, and counted.
    const other = await ask(10 * H);
    expect(calls).toBe(1);
    expect(other.view).toBe(first.view);
    const expected = report({
      listing: keep(keys, other.at, 10 * H, recorded),
      isManaged: () => true,
      unusedAfterMs: 10 * H,
      listedAt: other.at,
      scope: 'Organization',
    });
    const derived = reportOf(other, 10 * H);
    expect([derived.live, derived.unused, derived.neverUsed]).toEqual([300, 291, 300]);
    expect([derived.live, derived.unused, derived.neverUsed]).toEqual([expected.live, expected.unused, expected.neverUsed]);
    expect(derived.unusedKeys.map((k) => k.id)).toEqual(expected.unusedKeys.map((k) => k.id));
    expect([derived.withoutDetails, expected.withoutDetails]).toEqual([50, 0]);
    // The next list keeps the details of both: the 10h view shows them all.
    now += 60_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toBe(2);
    const next = await ask(10 * H);
    expect(calls).toBe(2);
    expect(next.view).not.toBe(first.view);
    expect(new Set(next.view.unusedDetailsFor)).toEqual(new Set([250 * H, 10 * H]));
    expect(reportOf(next, 10 * H).withoutDetails).toBe(0);
    expect((await ask(250 * H)).view).toBe(next.view);
  });

  it('a view no reader asked for in an interval and a half is no longer made, though the checks keep the list', async () => {
    let now = 1_000_000;
    const cache = new DriftCache(60_000, () => now);
    const p = counting();
    const v = names('v');
    const adapter = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Organization', organizationId: 'org-a-5' } as never);
    await cache.listing('cred-a', listFor('org-a-5'), p.platform, v);
    for (let i = 0; i < 3; i++) {
      now += 60_000;
      await cache.keyState('cred-a', adapter, p.platform, 1, undefined);
    }
    // Made from the first list and the one an interval after it; not from those 2 and 3 intervals after.
    expect([p.calls(), v.made]).toEqual([4, 2]);
    // Asked again: a new view, so the list is taken once more.
    await cache.listing('cred-a', listFor('org-a-5'), p.platform, v);
    expect([p.calls(), v.made]).toEqual([5, 3]);
  });

  it("a failed list is the inventory's failure, remembered for the interval as for the checks", async () => {
    let now = 1_000_000;
    const cache = new DriftCache(60_000, () => now);
    let calls = 0;
    const platform = {
      listOrganizationKeys: async () => {
        calls++;
        throw Object.assign(new Error('refused'), { code: 'UNAUTHORIZED', status: 401 });
      },
    } as unknown as KeyPlatform;
    await expect(cache.listing('cred-x', listFor('org-a-3'), platform, names())).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    await expect(cache.listing('cred-x', listFor('org-a-3'), platform, names())).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(calls).toBe(1);
    now += 60_000;
    await expect(cache.listing('cred-x', listFor('org-a-3'), platform, names())).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(calls).toBe(2);
  });
});
