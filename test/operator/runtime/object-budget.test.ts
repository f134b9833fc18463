// The bytes of large objects the reconciles may hold at once (src/operator/runtime/object-budget.ts):
// small objects never wait; large ones take their size, in order; one over the budget runs alone.
import { describe, expect, it } from '@jest/globals';
import { LARGE_OBJECT_BYTES, ObjectBudget } from '../../../src/operator/runtime/object-budget.ts';

const MIB = 1024 * 1024;

describe('the budget of large objects in reconciles', () => {
  it('counts nothing for a small object or one of unknown size', () => {
    const budget = new ObjectBudget(4 * MIB);
    expect(budget.weight(undefined)).toBe(0);
    expect(budget.weight(LARGE_OBJECT_BYTES - 1)).toBe(0);
    expect(budget.take(0)).toBeUndefined();
    expect(budget.inUse()).toBe(0);
  });

  it('grants large objects up to the budget, then in order as they give back; one over the budget takes all of it', async () => {
    const budget = new ObjectBudget(4 * MIB);
    const one = budget.weight(1.5 * MIB);
    expect(budget.take(one)).toBeUndefined();
    expect(budget.take(one)).toBeUndefined();
    const granted: string[] = [];
    const third = budget.take(one);
    expect(third).toBeDefined();
    void third?.then(() => granted.push('third'));
    const huge = budget.weight(9 * MIB);
    expect(huge).toBe(4 * MIB);
    void budget.take(huge)?.then(() => granted.push('huge'));
    // A small object passes the waiting ones: it takes nothing.
    expect(budget.take(budget.weight(2_000))).toBeUndefined();
    budget.give(one);
    await Promise.resolve();
    expect(granted).toEqual(['third']);
    budget.give(one);
    budget.give(one);
    await Promise.resolve();
    expect(granted).toEqual(['third', 'huge']);
    expect(budget.inUse()).toBe(4 * MIB);
    budget.give(huge);
    expect(budget.inUse()).toBe(0);
  });
});
