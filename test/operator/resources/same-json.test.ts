// sameJson against its definition: two values are the same when JSON.stringify writes them the same
// once every object's keys are sorted. Rows for each rule, then random values of the shapes status
// holds, compared with that definition.
import { describe, expect, it } from '@jest/globals';
import { sameJson } from '../../../src/operator/resources/same-json.ts';

/** The definition: JSON with every object's keys sorted. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, (v as Record<string, unknown>)[k]]),
        )
      : v,
  );

describe('sameJson', () => {
  it.each([
    [{ a: 1, b: [1, { c: 'x', d: null }] }, { b: [1, { d: null, c: 'x' }], a: 1 }, true],
    [{ a: 1, b: undefined }, { a: 1 }, true],
    [{ a: 1 }, { a: 1, b: undefined }, true],
    [[undefined], [null], true],
    [{ a: null }, {}, false],
    [{ a: 1 }, { a: '1' }, false],
    [[1, 2], [2, 1], false],
    [[1], { 0: 1 }, false],
    [{}, [], false],
    [{ a: { b: 1 } }, { a: { b: 1, c: 2 } }, false],
    [{ a: { b: 1, c: 2 } }, { a: { b: 1 } }, false],
    [{ conditions: [{ type: 'Ready', status: 'True' }] }, { conditions: [{ status: 'True', type: 'Ready' }] }, true],
    [null, null, true],
    [null, {}, false],
    ['a', 'a', true],
    [0, false, false],
  ])('%j and %j: %s', (a, b, same) => {
    expect(sameJson(a, b)).toBe(same);
    expect(sameJson(b, a)).toBe(same);
    expect(canonical(a) === canonical(b)).toBe(same);
  });

  it('agrees with the definition on random values of the shapes status holds', () => {
    // mulberry32: the same values on every run.
    let seed = 42;
    const random = (n: number): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
    };
    const value = (depth: number): unknown => {
      switch (random(depth > 2 ? 5 : 8)) {
        case 0:
          return random(3);
        case 1:
          return ['a', 'b', ''][random(3)];
        case 2:
          return null;
        case 3:
          return random(2) === 0;
        case 4:
          return undefined;
        case 5:
        case 6: {
          const o: Record<string, unknown> = {};
          for (let i = random(4); i > 0; i--) o[['x', 'y', 'z', 'w'][random(4)]!] = value(depth + 1);
          return o;
        }
        default:
          return Array.from({ length: random(3) }, () => value(depth + 1));
      }
    };
    /** The same value with every object's keys in another order. */
    const shuffled = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(shuffled);
      if (v === null || typeof v !== 'object') return v;
      return Object.fromEntries(
        Object.entries(v)
          .reverse()
          .map(([k, x]) => [k, shuffled(x)]),
      );
    };
    let same = 0;
    let compared = 0;
    for (let i = 0; i < 5_000; i++) {
      const a = value(0);
      const b = random(2) === 0 ? shuffled(a) : value(0);
      if (a === undefined || b === undefined) continue;
      const expected = canonical(a) === canonical(b);
      compared++;
      if (expected) same++;
      expect({ a, b, same: sameJson(a, b) }).toEqual({ a, b, same: expected });
    }
    // Both answers were drawn often.
    expect(same).toBeGreaterThan(1_000);
    expect(compared - same).toBeGreaterThan(1_000);
  });
});
