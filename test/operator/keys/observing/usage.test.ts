// The key's use in status (src/operator/keys/observing/usage.ts): lastUsedAt / lastUsedFromAddr from the
// drift check's list, written only when they change; hostile platform values dropped; the InUse
// condition of spec.usage.unusedAfter, which never touches Ready.
import { describe, expect, it } from '@jest/globals';
import { DriftCache } from '../../../../src/operator/keys/observing/drift.ts';
import { inUseCondition, statusTimestamp, usageFields } from '../../../../src/operator/keys/observing/usage.ts';
import type { ListedKey } from '../../../../src/operator/keys/adapter.ts';
import type { KeyResource } from '../../../../src/operator/resources/schema.ts';
import { NAMESPACE, keyResource, rig } from '../fakes.ts';

const listed = (last_used_at: string | null, last_used_from_addr = ''): ListedKey => ({
  id: 1,
  name: 'k',
  created_at: '2026-01-01T00:00:00Z',
  last_used_at,
  last_used_from_addr,
});

describe('status timestamps from the platform', () => {
  it('are normalized to RFC 3339 seconds', () => {
    expect(statusTimestamp('2026-11-23T10:00:00.789Z')).toBe('2026-11-23T10:00:00Z');
    expect(statusTimestamp('2026-11-23T11:00:00+01:00')).toBe('2026-11-23T10:00:00Z');
  });

  it.each([
    [null],
    [undefined],
    ['yesterday'],
    ['2026-11-23T10:00:00Z'.padEnd(65, ' ')],
    ['+275760-09-13T00:00:00.000Z'],
    ['+010000-01-01T00:00:00Z'],
    ['1969-12-31T23:59:59Z'],
  ])('%j is dropped', (value) => {
    expect(statusTimestamp(value)).toBeUndefined();
  });
});

describe('usage fields', () => {
  it('takes a valid time and address', () => {
    expect(usageFields(listed('2026-11-23T10:00:00Z', '10.1.2.3'), {})).toEqual({ lastUsedAt: '2026-11-23T10:00:00Z', lastUsedFromAddr: '10.1.2.3' });
    expect(usageFields(listed('2026-11-23T10:00:00Z', '2001:db8::1'), {})).toEqual({ lastUsedAt: '2026-11-23T10:00:00Z', lastUsedFromAddr: '2001:db8::1' });
  });

  it('writes nothing that did not change', () => {
    expect(usageFields(listed('2026-11-23T10:00:00Z', '10.1.2.3'), { lastUsedAt: '2026-11-23T10:00:00Z', lastUsedFromAddr: '10.1.2.3' })).toEqual({});
    expect(usageFields(undefined, {})).toEqual({});
  });

  it('moves lastUsedAt (and the address with it) only by the granularity: a key in constant use is not a write per check', () => {
    const recorded = { lastUsedAt: '2026-11-23T10:00:00Z', lastUsedFromAddr: '10.1.2.3' };
    expect(usageFields(listed('2026-11-23T10:59:59Z', '10.9.9.9'), recorded)).toEqual({});
    expect(usageFields(listed('2026-11-23T11:00:00Z', '10.9.9.9'), recorded)).toEqual({ lastUsedAt: '2026-11-23T11:00:00Z', lastUsedFromAddr: '10.9.9.9' });
    expect(usageFields(listed('2026-11-23T10:00:05Z', '10.1.2.3'), recorded, 1_000)).toEqual({ lastUsedAt: '2026-11-23T10:00:05Z' });
    // A platform answer going back in time is not recorded.
    expect(usageFields(listed('2026-11-22T10:00:00Z', '10.1.2.3'), recorded)).toEqual({});
  });

  it('a key never used has no usage fields', () => {
    expect(usageFields(listed(null, ''), {})).toEqual({});
  });

  it.each([
    ['not an address', 'localhost; rm -rf /'],
    ['over-long', `${'1'.repeat(70)}`],
    ['an address with a port', '10.1.2.3:443'],
    ['markup', '<script>'],
    ['a secret-looking blob', 'x'.repeat(64)],
  ])('drops an address that is %s, keeps the time', (_story, addr) => {
    expect(usageFields(listed('2026-11-23T10:00:00Z', addr), {})).toEqual({ lastUsedAt: '2026-11-23T10:00:00Z' });
  });
});

describe('the InUse condition', () => {
  const now = Date.parse('2026-11-23T12:00:00Z');
  it('is True while the key was used within the window', () => {
    // The message does not carry the time of the use: a key in use would change it on every check.
    expect(inUseCondition('1h', '2026-11-23T11:30:00Z', '2026-01-01T00:00:00Z', now)).toEqual({
      type: 'InUse',
      status: 'True',
      reason: 'UsedRecently',
      message: 'used within the last 1h',
    });
    expect(inUseCondition('1h', '2026-11-23T11:59:00Z', '2026-01-01T00:00:00Z', now)).toEqual(
      inUseCondition('1h', '2026-11-23T11:30:00Z', '2026-01-01T00:00:00Z', now),
    );
  });

  it('is False once it was not', () => {
    expect(inUseCondition('1h', '2026-11-23T10:00:00Z', '2026-01-01T00:00:00Z', now)).toEqual({
      type: 'InUse',
      status: 'False',
      reason: 'NotUsedRecently',
      message: 'not used since 2026-11-23T10:00:00Z (more than 1h)',
    });
  });

  it('a key never used counts from its creation', () => {
    expect(inUseCondition('720h', undefined, '2026-11-20T00:00:00Z', now)?.status).toBe('True');
    expect(inUseCondition('24h', undefined, '2026-11-20T00:00:00Z', now)).toEqual({
      type: 'InUse',
      status: 'False',
      reason: 'NotUsedRecently',
      message: 'never used since issued at 2026-11-20T00:00:00Z (more than 24h)',
    });
  });

  it('says nothing when it cannot tell', () => {
    expect(inUseCondition('1h', undefined, undefined, now)).toBeUndefined();
    expect(inUseCondition('soon', '2026-11-23T11:30:00Z', undefined, now)).toBeUndefined();
  });
});

const condition = (resource: KeyResource | undefined, type: string): string | undefined => {
  const c = resource?.status?.conditions?.find((x) => x.type === type);
  return c === undefined ? undefined : `${c.status} ${c.reason}`;
};

describe('a reconcile of a key in sync', () => {
  function clocked(spec: Record<string, unknown> = {}) {
    let t = Date.now();
    const now = (): number => t;
    const r = rig({ now, drift: new DriftCache(60_000, now) });
    r.kube.putResource(keyResource('ApiKey', 'ci', { spec }));
    return {
      r,
      advance: (ms: number) => {
        t += ms;
      },
    };
  }

  it('records the last use from the drift list once, and writes nothing on a pass where it did not change', async () => {
    const { r, advance } = clocked();
    await r.reconcile();
    const key = r.platform.keys[0]!;
    key.last_used_at = '2026-11-23T10:00:00Z';
    key.last_used_from_addr = '10.1.2.3';
    advance(61_000);
    await r.reconcile();
    const status = r.kube.resource('ApiKey', NAMESPACE, 'ci')?.status;
    expect(status).toEqual(expect.objectContaining({ lastUsedAt: '2026-11-23T10:00:00Z', lastUsedFromAddr: '10.1.2.3' }));
    advance(61_000);
    r.kube.calls.length = 0;
    r.platform.calls.length = 0;
    await r.reconcile();
    expect(r.platform.calls).toEqual(['listOrg org-1']);
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([]);
  });

  it('a hostile last-use answer is dropped and the status write still lands', async () => {
    const { r, advance } = clocked();
    await r.reconcile();
    const key = r.platform.keys[0]!;
    key.last_used_at = '+275760-09-13T00:00:00.000Z';
    key.last_used_from_addr = `evil${'x'.repeat(200)}`;
    advance(61_000);
    await r.reconcile();
    const status = r.kube.resource('ApiKey', NAMESPACE, 'ci')?.status;
    expect(status?.lastUsedAt).toBeUndefined();
    expect(status?.lastUsedFromAddr).toBeUndefined();
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'Ready')).toBe('True Ready');
  });

  it('InUse follows spec.usage.unusedAfter, never touches Ready, and goes when the field goes', async () => {
    const { r, advance } = clocked({ usage: { unusedAfter: '1h' } });
    await r.reconcile();
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'InUse')).toBe('True UsedRecently');
    advance(2 * 3_600_000);
    await r.reconcile();
    let resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(condition(resource, 'InUse')).toBe('False NotUsedRecently');
    expect(resource.status?.conditions?.find((c) => c.type === 'InUse')?.message).toMatch(/^never used since issued at /);
    expect(condition(resource, 'Ready')).toBe('True Ready');
    // Used now: True again on the next drift pass (from the list, whatever status records).
    r.platform.keys[0]!.last_used_at = new Date(Date.now() + 2 * 3_600_000).toISOString();
    advance(61_000);
    await r.reconcile();
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'InUse')).toBe('True UsedRecently');
    resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    r.kube.putResource({ ...resource, spec: { ...resource.spec, usage: undefined } } as KeyResource);
    await r.reconcile();
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'InUse')).toBeUndefined();
  });
});
