import { describe, expect, it } from '@jest/globals';
import { setConditions } from '../../../src/operator/keys/conditions.ts';

const t0 = new Date('2026-11-22T20:00:00.123Z');
const t1 = new Date('2026-11-22T21:00:00Z');

describe('conditions', () => {
  it('adds a condition with observedGeneration and a second-precision transition time', () => {
    expect(setConditions(undefined, [{ type: 'Ready', status: 'False', reason: 'Creating', message: 'm' }], 3, t0)).toEqual([
      { type: 'Ready', status: 'False', observedGeneration: 3, lastTransitionTime: '2026-11-22T20:00:00Z', reason: 'Creating', message: 'm' },
    ]);
  });

  it('keeps lastTransitionTime when only reason, message or generation change', () => {
    const first = setConditions(undefined, [{ type: 'Ready', status: 'False', reason: 'Creating', message: 'm' }], 1, t0);
    const next = setConditions(first, [{ type: 'Ready', status: 'False', reason: 'Unauthorized', message: 'n' }], 2, t1);
    expect(next[0]).toEqual(expect.objectContaining({ lastTransitionTime: '2026-11-22T20:00:00Z', reason: 'Unauthorized', observedGeneration: 2 }));
  });

  it('moves lastTransitionTime on a status change and leaves other types alone', () => {
    const first = setConditions(undefined, [
      { type: 'Ready', status: 'False', reason: 'Creating', message: 'm' },
      { type: 'KeyIssued', status: 'Unknown', reason: 'Creating', message: 'm' },
    ], 1, t0);
    const next = setConditions(first, [{ type: 'Ready', status: 'True', reason: 'Ready', message: 'ok' }], 1, t1);
    expect(next.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ['Ready', 'True', '2026-11-22T21:00:00Z'],
      ['KeyIssued', 'Unknown', '2026-11-22T20:00:00Z'],
    ]);
  });
});
