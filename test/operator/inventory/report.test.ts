// The inventory's report and Ready condition, as tables (pure: inventory/report.ts, conditions.ts).
import { describe, expect, it } from '@jest/globals';
import { report, type ReportInput } from '../../../src/operator/inventory/report.ts';
import { KEPT_DETAILS, keep } from '../../../src/operator/inventory/listing.ts';
import { listFailed, listed, withReady } from '../../../src/operator/inventory/conditions.ts';
import type { ListedKey } from '../../../src/operator/keys/adapter.ts';
import { PlatformError } from '../../../src/platform/index.ts';

const H = 3_600_000;
const T0 = Date.parse('2026-11-26T00:00:00Z');
const at = (ms: number): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
const key = (id: number, createdH: number, lastUsedH?: number, extra: Partial<ListedKey> = {}): ListedKey => ({
  id,
  name: `k-${id}`,
  created_at: at(T0 + createdH * H),
  last_used_at: lastUsedH === undefined ? null : at(T0 + lastUsedH * H),
  last_used_from_addr: lastUsedH === undefined ? '' : '10.0.0.1',
  ...extra,
});

/**
 * The report of `keys` as the inventory makes it: what the list keeps (listing.ts, with the ids
 * recorded when the list was taken: `recordedAtList`, by default those managed at the report), then
 * the report.
 */
function reportOf(input: Omit<ReportInput, 'listing'> & { keys: readonly ListedKey[]; recordedAtList?: ReadonlySet<number> }) {
  const { keys, recordedAtList, ...rest } = input;
  const recorded = recordedAtList ?? new Set(keys.map((k) => k.id).filter((id) => input.isManaged(id)));
  return report({ ...rest, listing: keep(keys, input.listedAt, input.unusedAfterMs, recorded) });
}

describe('report()', () => {
  const keys = [
    key(1, 0, 99), // managed, used an hour before the list
    key(2, 1), // managed, never used, 99 h old
    key(3, 2, 10), // by hand, last used 90 h before
    key(4, 95), // by hand, never used, 5 h old
    key(5, 3, 98, { project_id: 'p-1' }), // project-scoped, by hand, used recently
  ];
  const managed = new Set([1, 2]);
  const base = { keys, isManaged: (id: number) => managed.has(id), unusedAfterMs: 24 * H, listedAt: T0 + 100 * H, scope: 'Organization' as const };

  it('counts live, managed, not managed, unused (never used counts from creation) and never used', () => {
    const r = reportOf(base);
    expect([r.live, r.managed, r.notManaged, r.unused, r.neverUsed]).toEqual([5, 2, 3, 2, 2]);
    expect(r.notManagedKeys.map((k) => k.id)).toEqual([4, 5, 3]); // newest first
    expect(r.unusedKeys.map((k) => [k.id, k.managed])).toEqual([
      [3, false],
      [2, true],
    ]);
    expect(r.notManagedKeys[1]).toEqual({
      id: 5,
      name: 'k-5',
      kind: 'Project',
      projectId: 'p-1',
      createdAt: at(T0 + 3 * H),
      lastUsedAt: at(T0 + 98 * H),
      lastUsedFromAddr: '10.0.0.1',
      managed: false,
    });
    expect(r.notManagedKeys[0]?.lastUsedAt).toBeUndefined();
    // The first report says nothing is news.
    expect([r.appeared, r.wentUnused]).toEqual([
      { keys: [], total: 0 },
      { keys: [], total: 0 },
    ]);
  });

  it('bounds each list to 50, newest first, the counts being the totals', () => {
    const many = Array.from({ length: 120 }, (_, i) => key(1000 + i, i / 10));
    const r = reportOf({ ...base, keys: many, isManaged: () => false });
    expect([r.notManaged, r.notManagedKeys.length, r.unused, r.unusedKeys.length]).toEqual([120, 50, 120, 50]);
    expect(r.notManagedKeys[0]?.id).toBe(1119);
    // News: the newest 10 (one event each) and the total (one event counts the rest).
    const news = reportOf({ ...base, keys: many, isManaged: () => false, previous: { listedAt: T0, notManaged: new Set() } });
    expect([news.appeared.total, news.appeared.keys.map((k) => k.id)]).toEqual([120, Array.from({ length: 10 }, (_, i) => 1119 - i)]);
  });

  it('personal scope: every key is Personal', () => {
    expect(reportOf({ ...base, scope: 'Personal' }).notManagedKeys.map((k) => k.kind)).toEqual(['Personal', 'Personal', 'Personal']);
  });

  it.each([
    [
      'by the ids this process saw: a key no longer managed (retained) appears, one seen before does not',
      { listedAt: T0 + 99 * H, notManaged: new Set([3, 5]) },
      [4],
      [],
    ],
    ['without them (after a restart): by creation after the previous list', { listedAt: T0 + 90 * H }, [4], []],
    ['a managed key whose unusedAfter ran out since the previous list went unused', { listedAt: T0 + 20 * H, notManaged: new Set([3, 4, 5]) }, [], [2]],
  ] as const)('news: %s', (_, previous, appeared, wentUnused) => {
    const r = reportOf({ ...base, previous });
    expect(r.appeared.keys.map((k) => k.id)).toEqual(appeared);
    expect(r.wentUnused.keys.map((k) => k.id)).toEqual(wentUnused);
    expect([r.appeared.total, r.wentUnused.total]).toEqual([appeared.length, wentUnused.length]);
  });

  it("keeps every key's counts but the details of the newest 200 keys not managed and 200 unused only: a huge list keeps no more", () => {
    // 5,000 keys: 3,000 by hand and used lately (ids 10000..), then 2,000 managed, never used, old (ids 20000..).
    const byHand = Array.from({ length: 3_000 }, (_, i) => key(10_000 + i, 50 + i / 100, 99));
    const old = Array.from({ length: 2_000 }, (_, i) => key(20_000 + i, i / 100));
    const managedIds = new Set(old.map((k) => k.id));
    const listing = keep([...old, ...byHand], T0 + 100 * H, 24 * H, managedIds);
    expect(listing.size).toBe(5_000);
    expect(listing.details.size).toBe(2 * KEPT_DETAILS);
    const r = report({ ...base, listing, isManaged: (id) => managedIds.has(id) });
    expect([r.live, r.managed, r.notManaged, r.unused, r.neverUsed]).toEqual([5_000, 2_000, 3_000, 2_000, 2_000]);
    // The lists are the newest 50 of each, with every detail.
    expect(r.notManagedKeys.map((k) => k.id)).toEqual(Array.from({ length: 50 }, (_, i) => 12_999 - i));
    expect(r.unusedKeys.map((k) => k.id)).toEqual(Array.from({ length: 50 }, (_, i) => 21_999 - i));
    expect([...r.notManagedKeys, ...r.unusedKeys].every((k) => k.name === `k-${k.id}`)).toBe(true);
    expect(r.withoutDetails).toBe(0);
  });

  it('a key to list whose details were not kept is listed without them, and counted in withoutDetails', () => {
    // 300 keys by hand; when the list was taken the 250 newest were recorded (keys issued just then),
    // so details were kept for the 50 oldest only... and at the report none of them is managed.
    const keys = Array.from({ length: 300 }, (_, i) => key(5_000 + i, i / 10, 99));
    const r = reportOf({ ...base, keys, isManaged: () => false, recordedAtList: new Set(keys.slice(50).map((k) => k.id)) });
    expect(r.notManaged).toBe(300);
    expect(r.notManagedKeys).toHaveLength(50);
    expect(r.notManagedKeys[0]).toEqual({ id: 5_299, kind: 'Organization', createdAt: at(T0 + 29.9 * H), lastUsedAt: at(T0 + 99 * H), managed: false });
    expect(r.withoutDetails).toBe(50);
  });

  it('truncates what the platform says to the status bounds', () => {
    const r = reportOf({
      ...base,
      keys: [key(9, 0, undefined, { name: 'n'.repeat(300), created_by: { id: 'i'.repeat(300), name: 'm'.repeat(300) } })],
      isManaged: () => false,
    });
    expect(r.notManagedKeys[0]?.name).toHaveLength(64);
    expect((r.notManagedKeys[0]?.createdBy ?? '').length).toBeLessThanOrEqual(128);
  });
});

describe('the Ready condition', () => {
  const failure = (code: ConstructorParameters<typeof PlatformError>[0]['code'], status?: number): PlatformError =>
    new PlatformError({ code, message: 'm', ...(status !== undefined ? { status } : {}), requestId: 'r-1' } as ConstructorParameters<typeof PlatformError>[0]);

  it.each([
    ['UNAUTHORIZED', 401, undefined, 'Organization', 'CredentialsRefused'],
    ['FORBIDDEN', 403, { auth_method: 'api_key_user', account_id: 'u-1' }, 'Organization', 'CredentialsRefused'],
    ['FORBIDDEN', 403, { auth_method: 'api_key_org', account_id: 'org-a-1' }, 'Organization', 'CredentialsWrongKind'],
    ['FORBIDDEN', 403, { auth_method: 'api_key_org', account_id: 'org-a-1' }, 'Personal', 'CredentialsWrongKind'],
    ['FORBIDDEN', 403, undefined, 'Organization', 'CredentialsRefused'],
    ['NOT_FOUND', 404, undefined, 'Organization', 'NotFound'],
    ['RATE_LIMITED', 429, undefined, 'Organization', 'RateLimited'],
    ['UNAVAILABLE', 503, undefined, 'Organization', 'PlatformUnavailable'],
    ['TIMEOUT', undefined, undefined, 'Organization', 'PlatformUnavailable'],
    ['INVALID_RESPONSE', 200, undefined, 'Organization', 'PlatformUnavailable'],
  ] as const)('%s (%s), auth %j, scope %s: %s', (code, status, auth, scope, reason) => {
    const ready = listFailed(failure(code, status), scope, auth as never);
    expect(ready).toEqual(expect.objectContaining({ status: 'False', reason }));
    expect(ready.message).toContain('request r-1');
  });

  it('Listed names the entries shown without details, when there are', () => {
    expect(listed(300, 0, 300, 0).message).toBe('300 live keys: 0 managed in this cluster, 300 not managed, 0 unused');
    expect(listed(300, 0, 300, 0, 50)).toEqual(
      expect.objectContaining({
        status: 'True',
        reason: 'Listed',
        message: expect.stringContaining('; 50 of the keys listed are shown without name, creator, project and address'),
      }),
    );
  });

  it('keeps lastTransitionTime while the status holds, and moves it when it changes', () => {
    const t1 = new Date('2026-11-26T01:00:00Z');
    const first = withReady(undefined, listed(3, 1, 2, 0), 1, t1);
    expect(first).toEqual([
      {
        type: 'Ready',
        status: 'True',
        reason: 'Listed',
        message: '3 live keys: 1 managed in this cluster, 2 not managed, 0 unused',
        observedGeneration: 1,
        lastTransitionTime: '2026-11-26T01:00:00Z',
      },
    ]);
    expect(withReady(first, listed(4, 1, 3, 0), 2, new Date('2026-11-26T02:00:00Z'))[0]?.lastTransitionTime).toBe('2026-11-26T01:00:00Z');
    expect(withReady(first, listFailed(undefined, 'Organization'), 2, new Date('2026-11-26T02:00:00Z'))[0]).toEqual(
      expect.objectContaining({ status: 'False', lastTransitionTime: '2026-11-26T02:00:00Z', reason: 'PlatformUnavailable' }),
    );
  });
});
