// decide() with creates whose answer was lost (status.lostAttempts), and status.replacedKeys beside
// a create: what comes first, what a full list holds back, what keeps a deletion's finalizer.
import { describe, expect, it } from '@jest/globals';
import { lostUnresolved } from '../../../src/operator/keys/decision-intent.ts';
import type { Observation } from '../../../src/operator/keys/decision-types.ts';
import { decide, MAX_REPLACED_KEYS } from '../../../src/operator/keys/decision.ts';
import { MAX_LOST_ATTEMPTS } from '../../../src/operator/resources/key-status.ts';

const NOW = Date.parse('2026-11-28T18:00:00Z');

const base: Observation = {
  now: NOW,
  identity: 'operator-a',
  pendingGraceMs: 60_000,
  deleting: false,
  hasFinalizer: true,
  releaseWithoutRevoke: false,
  deletionPolicy: 'Revoke',
  status: {},
  credentials: 'Present',
  platform: { key: 'Unknown', project: 'Unknown' },
};
const synced = { owned: true, verified: true, keyId: 7, keyName: 'ci-deployer-zzzz0000', hash: 'h7' };
const recorded = { keyId: 7, secretHash: 'h7' };
const names = (n: number): string[] => Array.from({ length: n }, (_, i) => `ci-deployer-abcde00${i}`);

describe('lost attempts (status.lostAttempts)', () => {
  it('a lost attempt no list has answered for: a new create goes ahead (the name keeps its key accounted for)', () => {
    const d = decide({ ...base, lostAttempts: { names: names(1), keys: [], gone: [] } });
    expect(d.action).toEqual({ type: 'Create' });
  });

  it('a full list: no new create, its answer could be lost too', () => {
    const d = decide({ ...base, lostAttempts: { names: names(MAX_LOST_ATTEMPTS), keys: [], gone: [] } });
    expect(d.action).toEqual({ type: 'Wait', afterMs: 60_000 });
    expect(d.reason).toBe('Recovering');
  });

  it('a key of a listed name in the list: revoked before anything else, at any age, with the name to drop', () => {
    const keys = [{ keyId: 41, keyName: 'ci-deployer-abcde000' }];
    const d = decide({ ...base, status: recorded, secret: synced, lostAttempts: { names: names(2), keys, gone: ['ci-deployer-abcde001'] } });
    expect(d.action).toEqual({ type: 'RevokeOrphans', keyIds: [41], lost: keys, gone: ['ci-deployer-abcde001'] });
  });

  it('a name a list shows no key of (past the grace): dropped, nothing revoked', () => {
    const d = decide({ ...base, status: recorded, secret: synced, lostAttempts: { names: names(1), keys: [], gone: names(1) } });
    expect(d.action).toEqual({ type: 'RevokeOrphans', keyIds: [], gone: names(1) });
  });

  it('a key found both by its tag and by its name is revoked once', () => {
    const keys = [{ keyId: 41, keyName: 'ci-deployer-abcde000' }];
    const d = decide({ ...base, status: recorded, secret: synced, orphanKeyIds: [41, 42], lostAttempts: { names: names(1), keys, gone: [] } });
    expect(d.action).toEqual({ type: 'RevokeOrphans', keyIds: [41, 42], lost: keys });
  });

  it("under other credentials than the recorded key's, nothing is revoked or dropped on their word", () => {
    const d = decide({ ...base, status: recorded, secret: synced, credentialsChanged: true, lostAttempts: { names: names(1), keys: [], gone: names(1) } });
    expect(d.action.type).not.toBe('RevokeOrphans');
  });

  it("an intent present comes first (recovery revokes the listed names' keys too)", () => {
    const pending = { attempt: 'ci-deployer-abcde000', startedAt: new Date(NOW - 1_000).toISOString(), holder: 'operator-a' };
    const d = decide({ ...base, pending, lostAttempts: { names: names(MAX_LOST_ATTEMPTS), keys: [], gone: [] } });
    expect(d.action).toEqual({ type: 'Recover', attempt: pending });
  });

  it('deleting: a listed name no list has answered for keeps the finalizer; its key found is revoked; all answered, released', () => {
    const deleting = { ...base, deleting: true };
    const open = decide({ ...deleting, lostAttempts: { names: names(1), keys: [], gone: [] } });
    expect(open.action).toEqual({ type: 'Blocked', retry: true });
    expect(lostUnresolved({ lostAttempts: { names: names(1), keys: [], gone: [] } })).toEqual(names(1));
    const found = decide({ ...deleting, lostAttempts: { names: names(2), keys: [{ keyId: 41, keyName: 'ci-deployer-abcde000' }], gone: [] } });
    expect(found.action).toEqual({ type: 'RevokeOrphans', keyIds: [41] });
    const withKey = decide({
      ...deleting,
      status: recorded,
      secret: synced,
      lostAttempts: { names: names(1), keys: [{ keyId: 41, keyName: 'ci-deployer-abcde000' }], gone: [] },
    });
    expect(withKey.action).toEqual({ type: 'Revoke', keyId: 7, retiring: [41] });
    const answered = decide({ ...deleting, lostAttempts: { names: names(1), keys: [], gone: names(1) } });
    expect(answered.action).toEqual({ type: 'Release' });
    const retained = decide({ ...deleting, deletionPolicy: 'Retain', lostAttempts: { names: names(1), keys: [], gone: [] } });
    expect(retained.action).toEqual({ type: 'Blocked', retry: true });
    const noCredentials = decide({ ...deleting, credentials: 'SecretNotFound', lostAttempts: { names: names(1), keys: [], gone: [] } });
    expect(noCredentials.reason).toBe('CredentialsMissing');
  });
});

describe('status.replacedKeys beside a create', () => {
  it('no key recorded and replaced keys the platform still refuses: the create goes first while the list has room', () => {
    expect(decide({ ...base, replacedKeyIds: [41] }).action).toEqual({ type: 'Create' });
  });

  it('a full list: revoked first, as before', () => {
    const full = Array.from({ length: MAX_REPLACED_KEYS }, (_, i) => 40 + i);
    expect(decide({ ...base, replacedKeyIds: full }).action).toEqual({ type: 'RevokeReplaced', keyIds: full });
  });

  it('a recorded key in sync: the replaced keys are revoked first, as before', () => {
    expect(decide({ ...base, status: recorded, secret: synced, replacedKeyIds: [41] }).action).toEqual({ type: 'RevokeReplaced', keyIds: [41] });
  });
});
