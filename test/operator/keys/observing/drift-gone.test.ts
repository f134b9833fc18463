// The drift cache says what a refreshed list no longer shows (DriftGone), so the manager wakes the
// resources resting on it when the list is taken instead of at their next pass (issue 14: drift is
// caught within one interval). Platform lists are scripted here; the wiring to the reconciler and
// the work queue runs against the real apiserver and emulator in test/operator/at-rest.test.ts.
import { describe, expect, it } from '@jest/globals';
import { DriftCache, type DriftGone } from '../../../../src/operator/keys/observing/drift.ts';
import type { KeyAdapter, KeyPlatform, ListedKey } from '../../../../src/operator/keys/adapter.ts';

const listed = (id: number): ListedKey =>
  ({ id, name: `key-${id}`, created_at: '2026-11-23T10:00:00Z', last_used_at: null, last_used_from_addr: '' }) as ListedKey;

function scripted() {
  let keys = [listed(1), listed(2), listed(3)];
  let projects = ['p-1', 'p-2'];
  const platform = { listProjects: async () => projects.map((id) => ({ id })) } as unknown as KeyPlatform;
  const adapter = { listScope: 'org:o-1', list: async () => keys, project: { organizationId: 'o-1', projectId: 'p-1' } } as unknown as KeyAdapter;
  return {
    platform,
    adapter,
    setKeys: (ids: number[]) => {
      keys = ids.map(listed);
    },
    setProjects: (ids: string[]) => {
      projects = ids;
    },
  };
}

describe('DriftCache: what a refreshed list no longer shows', () => {
  it('names the keys and projects gone since the list before, once, and nothing on the first list or a cached one', async () => {
    let now = 1_000_000;
    const gone: DriftGone[] = [];
    const cache = new DriftCache(
      60_000,
      () => now,
      (g) => gone.push(g),
    );
    const s = scripted();
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    await cache.projectInOrganization('cred-a', s.platform, 'o-1', 'p-1');
    expect(gone).toEqual([]); // a first list has nothing to compare with

    s.setKeys([1, 3, 4]); // 2 revoked outside, 4 created
    s.setProjects(['p-2']); // p-1 left the organization
    now += 30_000;
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    await cache.projectInOrganization('cred-a', s.platform, 'o-1', 'p-1');
    expect(gone).toEqual([]); // still the cached lists: nothing refreshed, nothing said

    now += 30_000;
    expect((await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined)).state).toBe('Live');
    expect(await cache.projectInOrganization('cred-a', s.platform, 'o-1', 'p-1')).toBe(false);
    expect(gone).toEqual([
      { what: 'keys', credentialsId: 'cred-a', listScope: 'org:o-1', ids: [2], resources: [] },
      { what: 'projects', credentialsId: 'cred-a', organizationId: 'o-1', ids: ['p-1'] },
    ]);

    now += 60_000; // the same lists again: nothing more is gone
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    await cache.projectInOrganization('cred-a', s.platform, 'o-1', 'p-1');
    expect(gone).toHaveLength(2);
  });

  it('a failed refresh says nothing gone (the previous list stays the one compared with)', async () => {
    let now = 0;
    const gone: DriftGone[] = [];
    const cache = new DriftCache(
      60_000,
      () => now,
      (g) => gone.push(g),
    );
    const s = scripted();
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    const failing = {
      ...s.adapter,
      list: async () => {
        throw new Error('unavailable');
      },
    } as KeyAdapter;
    now += 60_000;
    await expect(cache.keyState('cred-a', failing, s.platform, 1, undefined)).rejects.toThrow('unavailable');
    expect(gone).toEqual([]);
    s.setKeys([1]);
    now += 60_000;
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    expect(gone).toEqual([{ what: 'keys', credentialsId: 'cred-a', listScope: 'org:o-1', ids: [2, 3], resources: [] }]);
  });

  it('a key issued lately and revoked before any list showed it: absent from the next list taken after its create was answered, its resource woken (issue 25)', async () => {
    let now = 0;
    const gone: DriftGone[] = [];
    const cache = new DriftCache(
      60_000,
      () => now,
      (g) => gone.push(g),
    );
    const s = scripted();
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    // Key 9 issued at 10 s and key 10 at 20 s (neither in the list of 0 s); 9 revoked outside at 15 s.
    now = 10_000;
    cache.issued('cred-a', s.adapter, s.platform, 9, 'ApiKey/team-a/nine');
    now = 20_000;
    cache.issued('cred-a', s.adapter, s.platform, 10, 'ApiKey/team-a/ten');
    s.setKeys([1, 2, 3, 10]);
    // The cached list (of 0 s, before both creates) says nothing against them.
    expect((await cache.keyState('cred-a', s.adapter, s.platform, 9, now)).state).toBe('Live');
    now = 60_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    // Issued within 5 s of the list's creation time or not, 9 is gone: its resource is woken, not at rest.
    expect(gone).toEqual([{ what: 'keys', credentialsId: 'cred-a', listScope: 'org:o-1', ids: [9], resources: ['ApiKey/team-a/nine'] }]);
    expect((await cache.keyState('cred-a', s.adapter, s.platform, 9, now - 1_000)).state).toBe('Absent');
    // 10 was shown: from now on the comparison of two lists covers it, as any key.
    s.setKeys([1, 2, 3]);
    now = 120_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(gone[1]).toEqual({ what: 'keys', credentialsId: 'cred-a', listScope: 'org:o-1', ids: [10], resources: [] });
  });

  it('refreshDue takes a list again once it is an interval old, with no check asking: a project gone is told within one interval', async () => {
    let now = 0;
    let projectLists = 0;
    const gone: DriftGone[] = [];
    const cache = new DriftCache(
      60_000,
      () => now,
      (g) => gone.push(g),
    );
    const s = scripted();
    const counting = {
      listProjects: async (q: { orgId: string }) => {
        projectLists += 1;
        return await s.platform.listProjects(q);
      },
    } as unknown as KeyPlatform;
    // One check (a resource whose next check is 1.1 intervals away): the lists are taken at 0.
    await cache.keyState('cred-a', s.adapter, counting, 1, undefined);
    await cache.projectInOrganization('cred-a', counting, 'o-1', 'p-1');
    expect(projectLists).toBe(1);
    s.setProjects(['p-2']); // p-1 leaves right after the list
    now = 59_999;
    cache.refreshDue();
    await Promise.resolve();
    expect(projectLists).toBe(1); // not an interval old yet
    now = 60_000;
    cache.refreshDue();
    cache.refreshDue(); // a tick while the first refresh is under way: one request
    await new Promise((resolve) => setImmediate(resolve));
    expect(projectLists).toBe(2);
    expect(gone).toEqual([{ what: 'projects', credentialsId: 'cred-a', organizationId: 'o-1', ids: ['p-1'] }]);
  });

  it('refreshDue stops taking a list no check asked for in an interval and a half', async () => {
    let now = 0;
    let keyLists = 0;
    const cache = new DriftCache(60_000, () => now);
    const s = scripted();
    const adapter = {
      ...s.adapter,
      list: async () => {
        keyLists += 1;
        return await s.adapter.list(s.platform);
      },
    } as KeyAdapter;
    await cache.keyState('cred-a', adapter, s.platform, 1, undefined);
    expect(keyLists).toBe(1);
    now = 60_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(keyLists).toBe(2); // asked 60 s ago: still in use
    now = 90_001; // no check since 0: the resources are gone (or on other credentials)
    cache.refreshDue();
    now = 130_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(keyLists).toBe(2);
    // A check asks again: taken as before, and refreshed again from then on.
    await cache.keyState('cred-a', adapter, s.platform, 1, undefined);
    expect(keyLists).toBe(3);
    now = 190_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(keyLists).toBe(4);
  });

  it('refreshDue retries a failed list an interval after the failure, not on every tick', async () => {
    let now = 0;
    let attempts = 0;
    let failing = true;
    const cache = new DriftCache(60_000, () => now);
    const s = scripted();
    const adapter = {
      ...s.adapter,
      list: async () => {
        attempts += 1;
        if (failing) throw new Error('unavailable');
        return await s.adapter.list(s.platform);
      },
    } as KeyAdapter;
    await expect(cache.keyState('cred-a', adapter, s.platform, 1, undefined)).rejects.toThrow('unavailable');
    for (now = 1_000; now < 60_000; now += 1_000) cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(attempts).toBe(1);
    failing = false;
    now = 60_000;
    cache.refreshDue();
    await new Promise((resolve) => setImmediate(resolve));
    expect(attempts).toBe(2);
    expect((await cache.keyState('cred-a', adapter, s.platform, 1, undefined)).state).toBe('Live');
    expect(attempts).toBe(2); // the refreshed list serves the check
  });
});
