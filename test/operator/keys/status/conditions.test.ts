import { describe, expect, it } from '@jest/globals';
import {
  blockedConditions,
  creatingConditions,
  deletingConditions,
  readyConditions,
  setConditions,
  unverifiableConditions,
  type BlockedInputs,
  type ConditionUpdate,
} from '../../../../src/operator/keys/status/conditions.ts';

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
    const first = setConditions(
      undefined,
      [
        { type: 'Ready', status: 'False', reason: 'Creating', message: 'm' },
        { type: 'KeyIssued', status: 'Unknown', reason: 'Creating', message: 'm' },
      ],
      1,
      t0,
    );
    const next = setConditions(first, [{ type: 'Ready', status: 'True', reason: 'Ready', message: 'ok' }], 1, t1);
    expect(next.map((c) => [c.type, c.status, c.lastTransitionTime])).toEqual([
      ['Ready', 'True', '2026-11-22T21:00:00Z'],
      ['KeyIssued', 'Unknown', '2026-11-22T20:00:00Z'],
    ]);
  });
});

const brief = (updates: ConditionUpdate[]): string[] => updates.map((u) => `${u.type}=${u.status}/${u.reason}`);

const fresh: BlockedInputs = { secretExists: true, keyRecorded: false, current: undefined };
const secretGone: BlockedInputs = { secretExists: false, keyRecorded: true, current: undefined };
const missingReported: BlockedInputs = {
  secretExists: false,
  keyRecorded: true,
  current: [
    { type: 'SecretSynced', status: 'False', reason: 'SecretMissing', message: 'm', observedGeneration: 1, lastTransitionTime: '2026-11-22T20:00:00Z' },
  ],
};

describe('the condition sets', () => {
  it.each<[string, ConditionUpdate[], string[]]>([
    ['a live key in its Secret is Ready', readyConditions(7, 's'), ['KeyIssued=True/KeyLive', 'SecretSynced=True/SecretInSync', 'Ready=True/Ready']],
    [
      'an unverifiable key is Unknown',
      unverifiableConditions(7, 'CredentialsRefused', 'm'),
      ['KeyIssued=Unknown/CredentialsRefused', 'Ready=Unknown/CredentialsRefused'],
    ],
    ['a create in flight elsewhere', creatingConditions('m'), ['Ready=False/Creating', 'KeyIssued=Unknown/Creating']],
    ['deleting, blocked by a refusal', deletingConditions('Unauthorized', 'm'), ['Ready=False/Deleting']],
    ['a refusal about the key', blockedConditions(fresh, 'Unauthorized', 'm'), ['Ready=False/Unauthorized', 'KeyIssued=False/Unauthorized']],
    ['a reason about the Secret', blockedConditions(fresh, 'SecretConflict', 'm'), ['Ready=False/SecretConflict', 'SecretSynced=False/SecretConflict']],
    [
      'a Secret reason while issuing (hint) is about the key',
      blockedConditions(fresh, 'SecretMissing', 'm', 'KeyIssued'),
      ['Ready=False/SecretMissing', 'KeyIssued=False/SecretMissing'],
    ],
    [
      'a refused repair keeps the missing Secret visible',
      blockedConditions(secretGone, 'Unauthorized', 'm'),
      ['Ready=False/Unauthorized', 'KeyIssued=False/Unauthorized', 'SecretSynced=False/SecretMissing'],
    ],
    [
      'a missing Secret already reported is not set again',
      blockedConditions(missingReported, 'Unauthorized', 'm'),
      ['Ready=False/Unauthorized', 'KeyIssued=False/Unauthorized'],
    ],
  ])('%s', (_name, updates, expected) => {
    expect(brief(updates)).toEqual(expected);
  });

  it('messages name the key and the Secret, and a deletion says what blocks it', () => {
    expect(readyConditions(7, 's').map((c) => c.message)).toEqual(['key 7 is live on the platform', 'Secret s holds key 7', 'key 7 is ready in Secret s']);
    expect(unverifiableConditions(7, 'CredentialsRefused', 'no list')[1]!.message).toBe('key 7 is no longer known to be live: no list');
    expect(deletingConditions('Unauthorized', 'm')[0]!.message).toBe('Unauthorized: m');
    expect(deletingConditions('Deleting', 'm')[0]!.message).toBe('m');
  });
});
