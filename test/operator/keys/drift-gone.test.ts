// The drift cache says what a refreshed list no longer shows (DriftGone), so the manager wakes the
// resources resting on it when the list is taken instead of at their next pass (issue 14: drift is
// caught within one interval). Platform lists are scripted here; the wiring to the reconciler and
// the work queue runs against the real apiserver and emulator in test/operator/at-rest.test.ts.
import { describe, expect, it } from '@jest/globals';
import { DriftCache, type DriftGone } from '../../../src/operator/keys/drift.ts';
import type { KeyAdapter, KeyPlatform, ListedKey } from '../../../src/operator/keys/adapter.ts';

const listed = (id: number): ListedKey => ({ id, name: `key-${id}`, created_at: '2026-11-23T10:00:00Z', last_used_at: null, last_used_from_addr: '' }) as ListedKey;

function scripted() {
  let keys = [listed(1), listed(2), listed(3)];
  let projects = ['p-1', 'p-2'];
  const platform = { listProjects: async () => projects.map((id) => ({ id })) } as unknown as KeyPlatform;
  const adapter = { listScope: 'org:o-1', list: async () => keys, project: { organizationId: 'o-1', projectId: 'p-1' } } as unknown as KeyAdapter;
  return {
    platform,
    adapter,
    setKeys: (ids: number[]) => { keys = ids.map(listed); },
    setProjects: (ids: string[]) => { projects = ids; },
  };
}

describe('DriftCache: what a refreshed list no longer shows', () => {
  it('names the keys and projects gone since the list before, once, and nothing on the first list or a cached one', async () => {
    let now = 1_000_000;
    const gone: DriftGone[] = [];
    const cache = new DriftCache(60_000, () => now, (g) => gone.push(g));
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
      { what: 'keys', credentialsId: 'cred-a', listScope: 'org:o-1', ids: [2] },
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
    const cache = new DriftCache(60_000, () => now, (g) => gone.push(g));
    const s = scripted();
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    const failing = { ...s.adapter, list: async () => { throw new Error('unavailable'); } } as KeyAdapter;
    now += 60_000;
    await expect(cache.keyState('cred-a', failing, s.platform, 1, undefined)).rejects.toThrow('unavailable');
    expect(gone).toEqual([]);
    s.setKeys([1]);
    now += 60_000;
    await cache.keyState('cred-a', s.adapter, s.platform, 1, undefined);
    expect(gone).toEqual([{ what: 'keys', credentialsId: 'cred-a', listScope: 'org:o-1', ids: [2, 3] }]);
  });
});
