// The keys of a drift list by attempt tag (src/operator/keys/observing/drift-listing.ts): a tag's one
// key is kept as itself, several in an array; readers get a list either way.
import { describe, expect, it } from '@jest/globals';
import { attemptName } from '../../../../src/operator/keys/issuing/key-names.ts';
import { attemptTagOf } from '../../../../src/operator/keys/issuing/create-intent.ts';
import { taggedKeys, taggedList } from '../../../../src/operator/keys/observing/drift-listing.ts';

describe('taggedKeys', () => {
  it('keeps a tag of one key without an array, a tag of several in listed order, and no key named otherwise', () => {
    const one = attemptName('team-a', 'abcde');
    const lost = [attemptName('team-b', 'fghij'), attemptName('team-b', 'fghij'), attemptName('team-b', 'fghij')];
    const listed = [
      { id: 1, name: one, created_at: '2026-11-30T00:00:00Z' },
      { id: 2, name: lost[0]!, created_at: '2026-11-30T00:00:01Z' },
      { id: 3, name: 'by-hand' },
      { id: 4, name: lost[1]!, created_at: 'not a time' },
      { id: 5, name: lost[2]! },
    ];
    const byTag = taggedKeys(listed as never);
    expect(byTag.size).toBe(2);
    const single = byTag.get(attemptTagOf(one)!);
    expect(Array.isArray(single)).toBe(false);
    expect(taggedList(single)).toEqual([{ id: 1, createdAt: Date.parse('2026-11-30T00:00:00Z'), rand: one.slice(-3) }]);
    const several = taggedList(byTag.get(attemptTagOf(lost[0]!)!));
    expect(several.map((k) => [k.id, k.createdAt, k.rand])).toEqual([
      [2, Date.parse('2026-11-30T00:00:01Z'), lost[0]!.slice(-3)],
      [4, undefined, lost[1]!.slice(-3)],
      [5, undefined, lost[2]!.slice(-3)],
    ]);
    expect(taggedList(undefined)).toEqual([]);
  });

  it('keeps every key of a tag a platform lists many times, in listed order', () => {
    const name = attemptName('team-c', 'klmno');
    const listed = Array.from({ length: 5_000 }, (_, i) => ({ id: i + 1, name }));
    const keys = taggedList(taggedKeys(listed as never).get(attemptTagOf(name)!));
    expect(keys).toHaveLength(5_000);
    expect(keys.every((k, i) => k.id === i + 1)).toBe(true);
  });
});
