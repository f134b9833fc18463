// The status written whole (a PUT of the status subresource) is what a merge patch of it left
// before: mergePatched follows RFC 7386, whose examples these rows are (section 3), plus the
// shapes writeStatus sends (a whole status over the stored one, a member set to null).
import { describe, expect, it } from '@jest/globals';
import { mergePatched } from '../../../../src/operator/keys/status/resource-writes.ts';

describe('mergePatched', () => {
  it.each([
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [
      ['a', 'b'],
      ['c', 'd'],
      ['c', 'd'],
    ],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ])('RFC 7386: %j patched with %j is %j', (target, patch, result) => {
    expect(mergePatched(target, patch)).toEqual(result);
  });

  it('keeps what a status write leaves out, drops what it nulls, and changes neither input', () => {
    const stored = { keyId: 7, replacedKeys: [{ keyId: 5 }], rotation: { nextRotationAt: 't1', lastRequest: 'r' }, conditions: [{ type: 'Ready' }] };
    const next = { keyId: 8, replacedKeys: null, rotation: { nextRotationAt: 't2' }, conditions: [{ type: 'Ready', status: 'True' }], skipped: undefined };
    const before = JSON.stringify([stored, next]);
    expect(mergePatched(stored, next)).toEqual({
      keyId: 8,
      rotation: { nextRotationAt: 't2', lastRequest: 'r' },
      conditions: [{ type: 'Ready', status: 'True' }],
    });
    expect(JSON.stringify([stored, next])).toBe(before);
  });
});
