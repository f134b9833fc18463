import { describe, expect, it } from '@jest/globals';
import { retirementStep } from '../../../src/operator/keys/decision-retirement.ts';
import type { Observation, PendingAttempt, RetiringObservation } from '../../../src/operator/keys/decision-types.ts';
import { decide } from '../../../src/operator/keys/decision.ts';

const NOW = Date.parse('2026-11-22T21:00:00Z');
const ME = 'operator-a';

const base: Observation = {
  now: NOW,
  identity: ME,
  pendingGraceMs: 60_000,
  deleting: false,
  hasFinalizer: true,
  releaseWithoutRevoke: false,
  deletionPolicy: 'Revoke',
  status: {},
  credentials: 'Present',
  platform: { key: 'Unknown', project: 'Unknown' },
};

const attempt = (over: Partial<PendingAttempt> = {}): PendingAttempt => ({
  attempt: 'ci-deployer-abcd1234',
  startedAt: new Date(NOW - 1_000).toISOString(),
  holder: ME,
  ...over,
});

const synced = { owned: true, verified: true, keyId: 7, keyName: 'ci-deployer-zzzz0000', hash: 'h7' };
const recorded = { keyId: 7, secretHash: 'h7' };

const live = { key: 'Live', project: 'Unknown' } as const;
/** Live in the list itself (not only presumed live for being newer than the list). */
const listed = { key: 'Live', listed: true, project: 'Unknown' } as const;
const retiringKey = (over: Partial<RetiringObservation> = {}): RetiringObservation => ({
  keyId: 5,
  since: NOW - 60_000,
  graceMs: 10_000,
  maxGraceMs: 600_000,
  restart: 'NotConfigured',
  rollouts: { complete: true },
  platform: { state: 'Live', seenAt: NOW },
  ...over,
});

type Row = [name: string, over: Partial<Observation>, action: string, reason: string, extra?: Record<string, unknown>];

const rows: Row[] = [
  // creation
  ['a new resource gets the finalizer first', { hasFinalizer: false }, 'AddFinalizer', 'Creating'],
  ['the finalizer comes before credentials are checked', { hasFinalizer: false, credentials: 'SecretNotFound' }, 'AddFinalizer', 'Creating'],
  ['an invalid spec blocks without retry', { specError: 'spec.scope: bad' }, 'Blocked', 'InvalidSpec', { retry: false }],
  ['an invalid spec blocks even before the finalizer', { specError: 'x', hasFinalizer: false }, 'Blocked', 'InvalidSpec'],
  ['with the finalizer and nothing recorded, a key is created', {}, 'Create', 'Creating'],
  ['no credentials Secret blocks creation with backoff', { credentials: 'SecretNotFound' }, 'Blocked', 'CredentialsMissing', { retry: true }],
  ['an empty credentials entry blocks creation', { credentials: 'KeyNotFound' }, 'Blocked', 'CredentialsMissing'],
  ['a foreign Secret of the target name blocks creation', { secret: { owned: false, verified: false } }, 'Blocked', 'SecretConflict', { retry: false }],
  ['a foreign Secret blocks even with a recorded key', { status: recorded, secret: { owned: false, verified: false, keyId: 7 } }, 'Blocked', 'SecretConflict'],
  [
    'a Secret name an older resource holds (immutable on one side) blocks the first key',
    { secretNameTakenBy: 'ApiKey/first' },
    'Blocked',
    'SecretConflict',
    { retry: false },
  ],
  [
    'a Secret name an older resource holds: a recorded key stays InSync',
    { status: recorded, secret: synced, platform: listed, secretNameTakenBy: 'ApiKey/first' },
    'InSync',
    'Ready',
  ],
  [
    'a Secret name an older resource holds: a due rotation is not started, the key kept',
    { status: recorded, secret: synced, platform: listed, rotation: { request: 't1' }, secretNameTakenBy: 'ApiKey/first' },
    'Blocked',
    'SecretConflict',
  ],

  // steady state and drift
  ['a recorded key with its Secret in sync is InSync', { status: recorded, secret: synced }, 'InSync', 'Ready', { keyId: 7 }],
  [
    'a live key in the platform list with the Secret in sync is InSync',
    { status: recorded, secret: synced, platform: { key: 'Live', project: 'Unknown' } },
    'InSync',
    'Ready',
  ],
  ['InSync does not need credentials', { status: recorded, secret: synced, credentials: 'SecretNotFound' }, 'InSync', 'Ready'],
  ['status lost: the Secret the operator signed for this resource names the key, InSync', { status: {}, secret: synced }, 'InSync', 'Ready', { keyId: 7 }],
  [
    'a key revoked outside is replaced (and revoked again, in case the list was wrong)',
    { status: recorded, secret: synced, platform: { key: 'Absent', project: 'Unknown' } },
    'Create',
    'RevokedExternally',
    { replaces: 7 },
  ],
  [
    'a key revoked outside without credentials blocks',
    { status: recorded, secret: synced, platform: { key: 'Absent', project: 'Unknown' }, credentials: 'KeyNotFound' },
    'Blocked',
    'CredentialsMissing',
  ],
  ['a deleted Secret is repaired by rotation, revoking the old key', { status: recorded }, 'Create', 'SecretMissing', { replaces: 7 }],
  ['a deleted Secret without credentials blocks', { status: recorded, credentials: 'SecretNotFound' }, 'Blocked', 'CredentialsMissing'],
  ['an edited secret value is repaired by rotation', { status: recorded, secret: { ...synced, hash: 'other' } }, 'Create', 'SecretTampered', { replaces: 7 }],
  [
    'a Secret emptied of its data is repaired by rotation',
    { status: recorded, secret: { ...synced, hash: undefined } },
    'Create',
    'SecretTampered',
    { replaces: 7 },
  ],
  [
    'a Secret naming another key id is repaired by rotation',
    { status: recorded, secret: { ...synced, keyId: 8 } },
    'Create',
    'SecretTampered',
    { replaces: 7 },
  ],
  ['without a recorded hash, a Secret holding the key id is trusted', { status: { keyId: 7 }, secret: { ...synced, hash: 'anything' } }, 'InSync', 'Ready'],
  [
    'a project that left the organization blocks with a clear reason',
    { status: recorded, secret: synced, platform: { key: 'Live', project: 'NotInOrganization' } },
    'Blocked',
    'ProjectNotInOrganization',
    { retry: true },
  ],
  [
    'a project still in the organization is fine',
    { status: recorded, secret: synced, platform: { key: 'Live', project: 'InOrganization' } },
    'InSync',
    'Ready',
  ],
  // spec.secret.template (secret-template.ts): the key entry intact, the rest out of line
  [
    'a Secret out of line with its template is rewritten with the same key',
    { status: recorded, secret: { ...synced, inLine: false } },
    'RewriteSecret',
    'SecretRewritten',
    { keyId: 7 },
  ],
  [
    'a rewrite needs no credentials (no platform call)',
    { status: recorded, secret: { ...synced, inLine: false }, credentials: 'SecretNotFound' },
    'RewriteSecret',
    'SecretRewritten',
  ],
  [
    'a rewrite does not wait for the platform to answer',
    {
      status: recorded,
      secret: { ...synced, inLine: false },
      platform: { key: 'Unverifiable', project: 'Unknown', check: { reason: 'PlatformUnavailable', message: 'm', failingForMs: 1, reportAfterMs: 2 } },
    },
    'RewriteSecret',
    'SecretRewritten',
  ],
  [
    'an edited key entry is tampering, not a rewrite',
    { status: recorded, secret: { ...synced, hash: 'other', inLine: false } },
    'Create',
    'SecretTampered',
    { replaces: 7 },
  ],
  [
    'a key revoked outside is replaced, not rewritten',
    { status: recorded, secret: { ...synced, inLine: false }, platform: { key: 'Absent', project: 'Unknown' } },
    'Create',
    'RevokedExternally',
    { replaces: 7 },
  ],

  // the pending intent (docs/design.md section 3.2)
  ['my own unfinished attempt is recovered at once', { pending: attempt() }, 'Recover', 'Recovering'],
  [
    'an attempt whose key is in the Secret is adopted, nothing revoked',
    { pending: attempt(), secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' } },
    'Adopt',
    'Adopting',
    { keyId: 9 },
  ],
  [
    'adoption works for another holder without waiting',
    { pending: attempt({ holder: 'other' }), secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' } },
    'Adopt',
    'Adopting',
  ],
  ['a Secret holding an older attempt is not adopted', { pending: attempt(), secret: { ...synced } }, 'Recover', 'Recovering'],
  [
    'a foreign Secret with the attempt name is not adopted',
    { pending: attempt(), secret: { owned: false, verified: false, keyId: 9, keyName: 'ci-deployer-abcd1234' } },
    'Recover',
    'Recovering',
  ],
  [
    'a Secret with the attempt name but no key id is not adopted',
    { pending: attempt(), secret: { owned: true, verified: true, keyName: 'ci-deployer-abcd1234' } },
    'Recover',
    'Recovering',
  ],
  ["another holder's fresh attempt is waited for", { pending: attempt({ holder: 'other' }) }, 'Wait', 'Creating', { afterMs: 59_000 }],
  [
    "another holder's stale attempt is recovered",
    { pending: attempt({ holder: 'other', startedAt: new Date(NOW - 61_000).toISOString() }) },
    'Recover',
    'Recovering',
  ],
  [
    "another holder's attempt with an unreadable timestamp is recovered",
    { pending: attempt({ holder: 'other', startedAt: 'yesterday' }) },
    'Recover',
    'Recovering',
  ],
  ['recovery needs credentials', { pending: attempt(), credentials: 'SecretNotFound' }, 'Blocked', 'CredentialsMissing'],
  [
    'a rotation attempt in the Secret is adopted with what it replaces',
    {
      pending: attempt({ replaces: 7 }),
      status: recorded,
      secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9', replaces: 7 },
    },
    'Adopt',
    'Adopting',
  ],
  ['a rotation attempt not in the Secret is recovered', { pending: attempt({ replaces: 7 }), status: recorded, secret: synced }, 'Recover', 'Recovering'],
  [
    'the pending intent comes before drift',
    { pending: attempt({ replaces: 7 }), status: recorded, secret: synced, platform: { key: 'Absent', project: 'Unknown' } },
    'Recover',
    'Recovering',
  ],
  ['an unreadable intent is cleared', { pending: 'Malformed' }, 'ClearPending', 'InvalidAnnotation'],
  ['the finalizer comes before the intent', { pending: attempt(), hasFinalizer: false }, 'AddFinalizer', 'Creating'],

  // a fulfilled intent (issue 14): a new key's intent stays once status records its attempt
  [
    'a fulfilled intent is no pending attempt: in sync, nothing adopted or recovered',
    { pending: attempt(), status: { ...recorded, keyName: 'ci-deployer-abcd1234' }, secret: { ...synced, keyName: 'ci-deployer-abcd1234' }, platform: live },
    'InSync',
    'Ready',
    { keyId: 7 },
  ],
  [
    'a fulfilled intent does not stop a drift check from repairing',
    {
      pending: attempt(),
      status: { ...recorded, keyName: 'ci-deployer-abcd1234' },
      secret: { ...synced, keyName: 'ci-deployer-abcd1234' },
      platform: { key: 'Absent', project: 'Unknown' },
    },
    'Create',
    'RevokedExternally',
    { replaces: 7 },
  ],
  [
    'a fulfilled intent with its Secret gone: a new key replaces the recorded one (no recovery)',
    { pending: attempt(), status: { ...recorded, keyName: 'ci-deployer-abcd1234' }, platform: live },
    'Create',
    'SecretMissing',
    { replaces: 7 },
  ],
  [
    'a fulfilled intent on deletion: the recorded key is revoked, nothing adopted',
    { deleting: true, pending: attempt(), status: { ...recorded, keyName: 'ci-deployer-abcd1234' }, secret: { ...synced, keyName: 'ci-deployer-abcd1234' } },
    'Revoke',
    'Deleting',
    { keyId: 7 },
  ],
  [
    'an old intent re-applied (another attempt than the recorded key, replacing nothing) is stale: cleared, nothing recovered',
    { pending: attempt(), status: { ...recorded, keyName: 'ci-deployer-zzzz0000' }, secret: synced },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'an intent whose attempt is in the Secret but not in status is adopted as before (status lost, or a crash before it)',
    { pending: attempt(), secret: { ...synced, keyName: 'ci-deployer-abcd1234' } },
    'Adopt',
    'Adopting',
    { keyId: 7 },
  ],
  [
    "the recorded attempt's name without a key id in status is not fulfilled",
    { pending: attempt(), status: { keyName: 'ci-deployer-abcd1234' }, secret: { ...synced, keyName: 'ci-deployer-abcd1234' } },
    'Adopt',
    'Adopting',
  ],
  [
    'an intent that replaces a key is never fulfilled by status: the replaced key is still to be revoked (adopted as before)',
    {
      pending: attempt({ replaces: 5 }),
      status: { ...recorded, keyName: 'ci-deployer-abcd1234' },
      secret: { ...synced, keyName: 'ci-deployer-abcd1234', replaces: 5 },
    },
    'Adopt',
    'Adopting',
    { keyId: 7 },
  ],
  [
    "a rotation's intent is never fulfilled by status: adopted as before",
    {
      pending: attempt({ replaces: 5, rotation: {} }),
      status: { ...recorded, keyName: 'ci-deployer-abcd1234' },
      secret: { ...synced, keyName: 'ci-deployer-abcd1234', replaces: 5 },
    },
    'Adopt',
    'Adopting',
    { keyId: 7 },
  ],

  // deletion
  ['deleted without our finalizer: nothing', { deleting: true, hasFinalizer: false }, 'Nothing', 'Deleted'],
  ['deletion revokes the recorded key', { deleting: true, status: recorded, secret: synced }, 'Revoke', 'Deleting', { keyId: 7 }],
  ['deletion revokes the key named by the Secret when status was lost', { deleting: true, secret: synced }, 'Revoke', 'Deleting', { keyId: 7 }],
  ['deletion revokes even when the Secret is gone', { deleting: true, status: recorded }, 'Revoke', 'Deleting'],
  ['deletion without any key releases', { deleting: true }, 'Release', 'NoKey'],
  // A create whose key never reached its Secret (a foreign Secret took the name) and whose revoke
  // failed then: status.replacedKeys is its only record, and it goes with the resource.
  [
    'deletion revokes a key only status.replacedKeys records',
    { deleting: true, replacedKeyIds: [77] },
    'Revoke',
    'Deleting',
    { keyId: undefined, retiring: [77] },
  ],
  [
    'deletion revokes retiring keys with no key in a Secret',
    { deleting: true, retiringKeyIds: [5] },
    'Revoke',
    'Deleting',
    { keyId: undefined, retiring: [5] },
  ],
  [
    'deletion of keys only status records waits for credentials',
    { deleting: true, replacedKeyIds: [77], credentials: 'SecretNotFound' },
    'Blocked',
    'CredentialsMissing',
    { retry: true },
  ],
  [
    'Retain revokes what only status records, and keeps nothing else',
    { deleting: true, deletionPolicy: 'Retain', replacedKeyIds: [77] },
    'Retain',
    'Retained',
    { retiring: [77] },
  ],
  ['deletion ignores a foreign Secret key id', { deleting: true, secret: { owned: false, verified: false, keyId: 3 } }, 'Release', 'NoKey'],
  ['Retain keeps the key', { deleting: true, deletionPolicy: 'Retain', status: recorded, secret: synced }, 'Retain', 'Retained'],
  ['Retain does not need credentials', { deleting: true, deletionPolicy: 'Retain', status: recorded, credentials: 'SecretNotFound' }, 'Retain', 'Retained'],
  [
    'revoking without credentials blocks with backoff',
    { deleting: true, status: recorded, credentials: 'SecretNotFound' },
    'Blocked',
    'CredentialsMissing',
    { retry: true },
  ],
  [
    'a person can release without revoking',
    { deleting: true, status: recorded, credentials: 'SecretNotFound', releaseWithoutRevoke: true },
    'Release',
    'ReleasedWithoutRevoke',
  ],
  ['release-without-revoke wins over a pending intent', { deleting: true, pending: attempt(), releaseWithoutRevoke: true }, 'Release', 'ReleasedWithoutRevoke'],
  ['deletion with a pending intent recovers first', { deleting: true, pending: attempt({ replaces: 7 }), status: recorded }, 'Recover', 'Recovering'],
  [
    'deletion with a pending intent in the Secret adopts first',
    { deleting: true, pending: attempt(), secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' } },
    'Adopt',
    'Adopting',
  ],
  ["deletion waits for another holder's fresh attempt", { deleting: true, pending: attempt({ holder: 'other' }) }, 'Wait', 'Creating'],
  ['deletion with Retain still recovers a pending intent', { deleting: true, deletionPolicy: 'Retain', pending: attempt() }, 'Recover', 'Recovering'],
  ['deletion with an unreadable intent clears it', { deleting: true, pending: 'Malformed' }, 'ClearPending', 'InvalidAnnotation'],
  ['deletion ignores an invalid spec', { deleting: true, specError: 'bad', status: recorded }, 'Revoke', 'Deleting'],

  // authority comes only from what the operator wrote (docs/security.md)
  [
    'an intent without a valid signature is cleared, nothing revoked',
    { pending: 'Unsigned', status: recorded, secret: synced },
    'ClearPending',
    'InvalidAnnotation',
  ],
  ['deleting with an unsigned intent clears it, nothing revoked', { deleting: true, pending: 'Unsigned' }, 'ClearPending', 'InvalidAnnotation'],
  [
    'an owned Secret whose key id is not signed is not adopted for a pending attempt',
    { pending: attempt(), secret: { owned: true, verified: false, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' } },
    'Recover',
    'Recovering',
  ],
  [
    'status lost: an owned Secret whose key id is not signed names no key, a new one is issued',
    { status: {}, secret: { ...synced, verified: false } },
    'Create',
    'Creating',
  ],
  ['deletion never revokes the key id of an unsigned Secret', { deleting: true, secret: { ...synced, verified: false } }, 'Release', 'NoKey'],
  [
    'status wins over the Secret: a signed Secret naming another key is tampering',
    { status: recorded, secret: { ...synced, keyId: 8 } },
    'Create',
    'SecretTampered',
    { replaces: 7 },
  ],
  ['the credentials Secret as the target Secret is refused', { secretIsCredentials: true }, 'Blocked', 'InvalidSpec', { retry: false }],

  // authority over the key record (issue 24): an intent is acted on only as a step from status.keyId
  [
    "attack 2: key 1's intent and Secret annotations replayed over recorded key 2 are stale: cleared, key 2 stays",
    {
      pending: attempt(),
      status: { keyId: 2, keyName: 'ci-deployer-two00000', secretHash: 'h2' },
      secret: { owned: true, verified: true, keyId: 1, keyName: 'ci-deployer-abcd1234', hash: 'h2' },
    },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'a stale intent is cleared even when its Secret verifies',
    { pending: attempt(), status: recorded, secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' } },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'a stale intent of another holder is not waited for',
    { pending: attempt({ holder: 'other' }), status: recorded, secret: synced },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'a stale intent is cleared without credentials (nothing to revoke)',
    { pending: attempt(), status: recorded, secret: synced, credentials: 'SecretNotFound' },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'a replayed repair intent that replaced an older key is stale',
    {
      pending: attempt({ replaces: 3 }),
      status: { ...recorded, keyName: 'ci-deployer-zzzz0000' },
      secret: { ...synced, keyId: 9, keyName: 'ci-deployer-abcd1234', replaces: 3 },
    },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'a replayed rotation intent that replaced an older key is stale, the retiring key kept',
    {
      pending: attempt({ replaces: 5, rotation: { request: 't0' } }),
      status: { ...recorded, keyName: 'ci-deployer-zzzz0000' },
      retiringKeyIds: [5],
      secret: { ...synced, keyId: 9, keyName: 'ci-deployer-abcd1234', replaces: 5 },
    },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'deleting: a stale intent is cleared, then the recorded key is revoked (never an older one adopted)',
    { deleting: true, pending: attempt(), status: recorded, secret: { owned: true, verified: true, keyId: 1, keyName: 'ci-deployer-abcd1234', hash: 'h7' } },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'an intent replacing the recorded key is adopted from its Secret',
    {
      pending: attempt({ replaces: 7 }),
      status: recorded,
      secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9', replaces: 7 },
    },
    'Adopt',
    'Adopting',
    { keyId: 9 },
  ],
  [
    'a Secret naming another replaced key than the intent is not adopted (recovered)',
    {
      pending: attempt({ replaces: 7 }),
      status: recorded,
      secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9', replaces: 6 },
    },
    'Recover',
    'Recovering',
  ],
  [
    'a legacy-signed Secret (no replaced key in its signature) is adopted for a replacing intent',
    {
      pending: attempt({ replaces: 7 }),
      status: recorded,
      secret: { owned: true, verified: true, legacy: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' },
    },
    'Adopt',
    'Adopting',
    { keyId: 9 },
  ],
  [
    'status already records the attempt (crash before clearing a replacing intent): adopted again, the same key',
    {
      pending: attempt({ replaces: 5 }),
      status: { ...recorded, keyName: 'ci-deployer-abcd1234' },
      secret: { ...synced, keyName: 'ci-deployer-abcd1234', replaces: 5 },
    },
    'Adopt',
    'Adopting',
    { keyId: 7 },
  ],
  [
    'status records the attempt but the Secret names another key of that name: not adopted',
    {
      pending: attempt({ replaces: 5 }),
      status: { ...recorded, keyName: 'ci-deployer-abcd1234' },
      secret: { ...synced, keyId: 8, keyName: 'ci-deployer-abcd1234', replaces: 5 },
    },
    'Recover',
    'Recovering',
  ],
  [
    'a given-up key: its create intent names it (abandons) and fits the record after a crash: adopted',
    {
      pending: attempt({ abandons: 7 }),
      status: recorded,
      credentialsChanged: true,
      secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' },
    },
    'Adopt',
    'Adopting',
    { keyId: 9 },
  ],
  [
    'a given-up key: its intent without the Secret is recovered (the given-up key is not the attempt)',
    { pending: attempt({ abandons: 7 }), status: recorded, credentialsChanged: true },
    'Recover',
    'Recovering',
  ],
  [
    'an intent giving up another key than the recorded one is stale',
    { pending: attempt({ abandons: 6 }), status: recorded, secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9' } },
    'ClearPending',
    'StaleIntent',
  ],
  [
    'nothing recorded (first create, or status lost): a signed intent is not stale',
    { pending: attempt({ replaces: 3 }), secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9', replaces: 3 } },
    'Adopt',
    'Adopting',
    { keyId: 9 },
  ],
  [
    'a legacy Secret to re-sign is rewritten with the same key',
    { status: recorded, secret: { ...synced, legacy: true, resign: true, inLine: false } },
    'RewriteSecret',
    'SecretRewritten',
    { keyId: 7 },
  ],

  // credentials change is a state, not drift
  [
    'a key the new credentials cannot see is not taken for revoked',
    { status: recorded, secret: synced, credentialsChanged: true, platform: { key: 'Absent', project: 'Unknown' } },
    'Blocked',
    'CredentialsChanged',
    { retry: false },
  ],
  ['a key the new credentials see is fine', { status: recorded, secret: synced, credentialsChanged: true, platform: listed }, 'InSync', 'Ready'],
  [
    'a key presumed live under other credentials (newer than their list) is left as it is',
    { status: recorded, secret: synced, credentialsChanged: true, platform: live },
    'InSync',
    'Ready',
  ],
  [
    'a person can give up the key: a new one, nothing revoked, the given-up key in the intent',
    { status: recorded, secret: synced, credentialsChanged: true, abandonKey: 7, platform: { key: 'Absent', project: 'Unknown' } },
    'Create',
    'KeyAbandoned',
    { replaces: undefined, abandons: 7 },
  ],
  // issue 24 (hostile campaign seed 7): a key is replaced only with credentials that can revoke it
  [
    'a deleted Secret under other credentials that have not shown the key: no new key (its revoke would be a NOT_FOUND that proves nothing)',
    { status: recorded, credentialsChanged: true },
    'Blocked',
    'CredentialsChanged',
    { retry: false },
  ],
  [
    'a tampered Secret under other credentials that have not shown the key: no new key',
    {
      status: recorded,
      secret: { ...synced, hash: 'other' },
      credentialsChanged: true,
      platform: { key: 'Unverifiable', project: 'Unknown', check: { reason: 'CredentialsRefused', message: 'm', failingForMs: 1, reportAfterMs: 10_000 } },
    },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'a deleted Secret under other credentials that see the key (in their list): repaired',
    { status: recorded, credentialsChanged: true, platform: listed },
    'Create',
    'SecretMissing',
    { replaces: 7 },
  ],
  // hostile campaign seed 24: "Live" only because the key is newer than the list is not "shown"
  [
    'a tampered Secret under other credentials, the key only presumed live (newer than their list): no new key',
    { status: recorded, secret: { ...synced, hash: 'other' }, credentialsChanged: true, platform: live },
    'Blocked',
    'CredentialsChanged',
    { retry: false },
  ],
  [
    'a deleted Secret under other credentials, the key only presumed live: no new key',
    { status: recorded, credentialsChanged: true, platform: live },
    'Blocked',
    'CredentialsChanged',
    { retry: false },
  ],
  [
    'a rotation due under other credentials, the key only presumed live: no new key',
    { status: recorded, secret: synced, credentialsChanged: true, platform: live, rotation: { request: 't1' } },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'a tampered Secret under other credentials that list the key: repaired',
    { status: recorded, secret: { ...synced, hash: 'other' }, credentialsChanged: true, platform: listed },
    'Create',
    'SecretTampered',
    { replaces: 7 },
  ],
  // an interrupted repair or rotation is finished only with credentials that can revoke what it replaced
  [
    'an interrupted repair under other credentials is not adopted (its revoke of the replaced key would prove nothing)',
    {
      pending: attempt({ replaces: 7 }),
      status: recorded,
      credentialsChanged: true,
      secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9', replaces: 7 },
    },
    'Blocked',
    'CredentialsChanged',
    { retry: false },
  ],
  [
    'an interrupted repair under other credentials is not recovered (they list neither its keys nor the replaced one)',
    { pending: attempt({ replaces: 7 }), status: recorded, credentialsChanged: true },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'an interrupted repair already recorded, under other credentials: the replaced key is not revoked with them',
    {
      pending: attempt({ replaces: 5 }),
      status: { ...recorded, keyName: 'ci-deployer-abcd1234' },
      credentialsChanged: true,
      secret: { ...synced, keyName: 'ci-deployer-abcd1234', replaces: 5 },
    },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'an interrupted rotation under other credentials waits for the ones that issued the key',
    { pending: attempt({ replaces: 7, rotation: { request: 't1' } }), status: recorded, credentialsChanged: true, platform: live },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'an interrupted repair under other credentials that list the recorded key is adopted',
    {
      pending: attempt({ replaces: 7 }),
      status: recorded,
      credentialsChanged: true,
      platform: listed,
      secret: { owned: true, verified: true, keyId: 9, keyName: 'ci-deployer-abcd1234', hash: 'h9', replaces: 7 },
    },
    'Adopt',
    'Adopting',
    { keyId: 9 },
  ],
  [
    'deleting with an interrupted repair under other credentials waits for the ones that issued the key',
    { deleting: true, pending: attempt({ replaces: 7 }), status: recorded, credentialsChanged: true },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'a deleted Secret of a given-up key: a new key, the given-up one named, not revoked',
    { status: recorded, credentialsChanged: true, abandonKey: 7 },
    'Create',
    'KeyAbandoned',
    { replaces: undefined, abandons: 7 },
  ],
  [
    'a rotation due under other credentials that have not shown the key waits for the ones that issued it',
    { status: recorded, secret: synced, credentialsChanged: true, rotation: { request: 't1' } },
    'Blocked',
    'CredentialsChanged',
  ],
  [
    'giving up another key id does nothing',
    { status: recorded, secret: synced, credentialsChanged: true, abandonKey: 8, platform: { key: 'Absent', project: 'Unknown' } },
    'Blocked',
    'CredentialsChanged',
  ],

  // a check that cannot ask the platform
  [
    'a failed check is not reported before the bound',
    {
      status: recorded,
      secret: synced,
      platform: { key: 'Unverifiable', project: 'Unknown', check: { reason: 'CredentialsRefused', message: 'm', failingForMs: 1_000, reportAfterMs: 10_000 } },
    },
    'Unverifiable',
    'CredentialsRefused',
    { report: false, retryAfterMs: 9_000 },
  ],
  [
    'a check failing past the bound is reported',
    {
      status: recorded,
      secret: synced,
      platform: {
        key: 'Unverifiable',
        project: 'Unknown',
        check: { reason: 'PlatformUnavailable', message: 'm', failingForMs: 10_000, reportAfterMs: 10_000 },
      },
    },
    'Unverifiable',
    'PlatformUnavailable',
    { report: true, keyId: 7 },
  ],
  [
    'a failed check never mints: a deleted Secret is still repaired',
    {
      status: recorded,
      platform: { key: 'Unverifiable', project: 'Unknown', check: { reason: 'CredentialsRefused', message: 'm', failingForMs: 99_000, reportAfterMs: 10_000 } },
    },
    'Create',
    'SecretMissing',
  ],

  // rotation (spec.rotation, keys.neon.dev/rotate)
  [
    'a request not handled yet rotates an in-sync key, keeping the old one',
    { status: recorded, secret: synced, platform: live, rotation: { request: 't1' } },
    'Create',
    'RotationStarted',
    { replaces: 7, rotation: { request: 't1' } },
  ],
  [
    'a scheduled rotation that is due rotates',
    { status: recorded, secret: synced, platform: live, rotation: { scheduledAt: NOW - 1 } },
    'Create',
    'RotationStarted',
    { replaces: 7, rotation: {} },
  ],
  [
    'a scheduled rotation not yet due does nothing',
    { status: recorded, secret: synced, platform: live, rotation: { scheduledAt: NOW + 60_000 } },
    'InSync',
    'Ready',
  ],
  [
    'a retiring key due for revocation waits for credentials',
    { status: recorded, secret: synced, platform: live, credentials: 'KeyNotFound', retiring: retiringKey(), retiringKeyIds: [5] },
    'Retire',
    'CredentialsMissing',
    { step: { step: 'Wait', afterMs: 5_000, waitingFor: 'Platform' } },
  ],
  [
    'a retiring key missing from the list of other credentials stays recorded',
    {
      status: recorded,
      secret: synced,
      platform: live,
      credentialsChanged: true,
      retiring: retiringKey({ platform: { state: 'Absent' } }),
      retiringKeyIds: [5],
    },
    'Retire',
    'CredentialsChanged',
    { step: { step: 'Wait', afterMs: 30_000, waitingFor: 'Platform' } },
  ],
  [
    'a rotation waits while a replaced key retires',
    { status: recorded, secret: synced, platform: live, rotation: { request: 't2' }, retiring: retiringKey({ since: NOW - 1_000 }), retiringKeyIds: [5] },
    'Retire',
    'RetiringKey',
    { keyId: 7, retiring: 5 },
  ],
  [
    'without credentials, a due rotation waits and the live key stays',
    { status: recorded, secret: synced, rotation: { request: 't1' }, credentials: 'SecretNotFound' },
    'InSync',
    'Ready',
  ],
  [
    'drift comes before rotation: a tampered Secret is repaired, revoking at once',
    { status: recorded, secret: { ...synced, hash: 'x' }, rotation: { request: 't1' } },
    'Create',
    'SecretTampered',
    { replaces: 7, rotation: undefined },
  ],
  [
    'drift comes before retirement',
    { status: recorded, platform: { key: 'Absent', project: 'Unknown' }, secret: synced, retiring: retiringKey(), retiringKeyIds: [5] },
    'Create',
    'RevokedExternally',
    { replaces: 7 },
  ],
  [
    'an intent comes before rotation',
    { status: recorded, secret: synced, rotation: { request: 't1' }, pending: attempt({ replaces: 7, rotation: { request: 't1' } }) },
    'Recover',
    'Recovering',
  ],
  [
    'a key that cannot be checked is not rotated',
    {
      status: recorded,
      secret: synced,
      rotation: { request: 't1' },
      platform: { key: 'Unverifiable', project: 'Unknown', check: { reason: 'PlatformUnavailable', message: 'm', failingForMs: 1, reportAfterMs: 10 } },
    },
    'Unverifiable',
    'PlatformUnavailable',
  ],
  [
    'deletion revokes the retiring keys with the current one',
    { deleting: true, status: recorded, secret: synced, retiringKeyIds: [5] },
    'Revoke',
    'Deleting',
    { keyId: 7, retiring: [5] },
  ],
  [
    'Retain revokes the retiring keys (in no Secret)',
    { deleting: true, deletionPolicy: 'Retain', status: recorded, retiringKeyIds: [5] },
    'Retain',
    'Retained',
    { retiring: [5] },
  ],
  [
    'deletion with retiring keys and no credentials blocks',
    { deleting: true, deletionPolicy: 'Retain', status: recorded, retiringKeyIds: [5], credentials: 'SecretNotFound' },
    'Blocked',
    'CredentialsMissing',
  ],
];

type RetireRow = [name: string, over: Partial<RetiringObservation>, now: number, step: string, reason: string, extra?: Record<string, unknown>];
const SINCE = NOW - 60_000;
const retireRows: RetireRow[] = [
  ['a key gone from the platform is dropped', { platform: { state: 'Absent' } }, NOW, 'Drop', 'KeyRetired'],
  ['gone wins over a restart not yet made', { platform: { state: 'Absent' }, restart: 'Due' }, NOW, 'Drop', 'KeyRetired'],
  ['consumers are restarted first', { restart: 'Due' }, NOW, 'RestartConsumers', 'RetiringKey'],
  [
    'a rollout not complete holds the key',
    { restart: 'Done', rollouts: { complete: false, waitingFor: ['Deployment/api'], stalled: [] } },
    NOW,
    'Wait',
    'RetiringKey',
    { waitingFor: 'Rollouts' },
  ],
  [
    'a stalled rollout holds the key, and says so',
    { restart: 'Done', rollouts: { complete: false, waitingFor: ['Deployment/api'], stalled: ['Deployment/api'] } },
    NOW,
    'Wait',
    'RolloutStalled',
    { stalled: true },
  ],
  [
    'maxGracePeriod does not cut a rollout short: stalled',
    { restart: 'Done', rollouts: { complete: false, waitingFor: ['Deployment/api'], stalled: [] } },
    SINCE + 600_001,
    'Wait',
    'RolloutStalled',
    { waitingFor: 'Rollouts' },
  ],
  ['the grace period counts from the switch', { since: NOW - 5_000 }, NOW, 'Wait', 'RetiringKey', { waitingFor: 'Grace', afterMs: 5_000 }],
  [
    'the grace period counts from the rollouts completed',
    { restart: 'Done', rollouts: { complete: true, completedAt: NOW - 2_000 } },
    NOW,
    'Wait',
    'RetiringKey',
    { waitingFor: 'Grace', afterMs: 8_000 },
  ],
  ['never used: revoked after the grace', { platform: { state: 'Live', seenAt: NOW } }, NOW, 'Revoke', 'KeyRetired', { stillInUse: false }],
  ['last used before the grace window: revoked', { platform: { state: 'Live', seenAt: NOW, lastUsedAt: NOW - 30_000 } }, NOW, 'Revoke', 'KeyRetired'],
  [
    'still used: held, the address named',
    { platform: { state: 'Live', seenAt: NOW, lastUsedAt: NOW - 1_000, lastUsedFromAddr: '10.0.0.9' } },
    NOW,
    'Wait',
    'OldKeyStillInUse',
    { waitingFor: 'Usage' },
  ],
  [
    'still used past maxGracePeriod: revoked, said so',
    { platform: { state: 'Live', seenAt: NOW, lastUsedAt: NOW - 1_000, lastUsedFromAddr: '10.0.0.9' }, maxGraceMs: 50_000 },
    NOW,
    'Revoke',
    'OldKeyStillInUse',
    { stillInUse: true },
  ],
  [
    'a snapshot older than the grace period says nothing of later uses: held',
    { platform: { state: 'Live', seenAt: NOW - 55_000 } },
    NOW,
    'Wait',
    'RetiringKey',
    { waitingFor: 'Platform' },
  ],
  [
    'used 1s before the snapshot, seen now: held',
    { platform: { state: 'Live', seenAt: NOW - 3_000, lastUsedAt: NOW - 4_000 } },
    NOW,
    'Wait',
    'OldKeyStillInUse',
  ],
  ['last use unreadable: held', { platform: { state: 'Unknown', message: 'm' } }, NOW, 'Wait', 'RetiringKey', { waitingFor: 'Platform' }],
  ['last use unreadable past maxGracePeriod: revoked', { platform: { state: 'Unknown', message: 'm' }, maxGraceMs: 50_000 }, NOW, 'Revoke', 'KeyRetired'],
];

describe('retirementStep: the next step of a replaced key', () => {
  it.each(retireRows)('%s', (...[_name, over, now, step, reason, extra]: RetireRow) => {
    const decided = retirementStep(retiringKey(over), now);
    expect(decided.step.step).toBe(step);
    expect(decided.reason).toBe(reason);
    for (const [key, value] of Object.entries(extra ?? {})) expect((decided.step as Record<string, unknown>)[key]).toEqual(value);
  });

  it('names the address and time of the last use while it holds the key', () => {
    const decided = retirementStep(retiringKey({ platform: { state: 'Live', seenAt: NOW, lastUsedAt: NOW - 1_000, lastUsedFromAddr: '10.0.0.9' } }), NOW);
    expect(decided.message).toContain('10.0.0.9');
    expect(decided.message).toContain(new Date(NOW - 1_000).toISOString());
  });

  it('never revokes before every rollout completed, at any time', () => {
    for (const now of [NOW, SINCE + 600_000, SINCE + 10 * 600_000]) {
      for (const platform of [
        { state: 'Live', seenAt: NOW } as const,
        { state: 'Unknown', message: 'm' } as const,
        { state: 'Live', seenAt: NOW, lastUsedAt: NOW } as const,
      ]) {
        const decided = retirementStep(
          retiringKey({ restart: 'Done', platform, rollouts: { complete: false, waitingFor: ['Deployment/api'], stalled: [] } }),
          now,
        );
        expect(decided.step.step).toBe('Wait');
      }
    }
  });
});

describe('decide: what next for a key resource', () => {
  // A rest parameter: jest passes a `done` callback to an each-callback declaring more parameters
  // than a row has values, and the test would wait for it until it times out.
  it.each(rows)('%s', (...[_name, over, action, reason, extra]: Row) => {
    const decision = decide({ ...base, ...over });
    expect(decision.action.type).toBe(action);
    expect(decision.reason).toBe(reason);
    expect(decision.message.length).toBeGreaterThan(0);
    for (const [key, value] of Object.entries(extra ?? {})) {
      expect((decision.action as Record<string, unknown>)[key]).toEqual(value);
    }
  });

  it('never creates while an intent is pending, whatever else is observed', () => {
    const secrets = [undefined, synced, { owned: false, verified: false }, { owned: true, verified: true, keyName: 'x' }];
    for (const secret of secrets) {
      for (const key of ['Live', 'Absent', 'Unknown', 'Unverifiable'] as const) {
        for (const holder of [ME, 'other']) {
          const d = decide({ ...base, pending: attempt({ holder }), secret, status: recorded, platform: { key, project: 'Unknown' } });
          expect(d.action.type).not.toBe('Create');
        }
      }
    }
  });

  it('never adopts, recovers or waits on an intent that does not fit the recorded key, whatever else is observed (issue 24)', () => {
    const stale = [
      attempt(),
      attempt({ replaces: 3 }),
      attempt({ replaces: 3, rotation: { request: 'old' } }),
      attempt({ abandons: 3 }),
      attempt({ holder: 'other' }),
    ];
    const secrets = [
      undefined,
      synced,
      { owned: true, verified: true, keyId: 1, keyName: 'ci-deployer-abcd1234', hash: 'h7' },
      { owned: true, verified: true, legacy: true, keyId: 1, keyName: 'ci-deployer-abcd1234', hash: 'h1' },
    ];
    for (const pending of stale) {
      for (const secret of secrets) {
        for (const deleting of [false, true]) {
          for (const credentials of ['Present', 'SecretNotFound'] as const) {
            const d = decide({
              ...base,
              pending,
              secret,
              deleting,
              credentials,
              status: { ...recorded, keyName: 'ci-deployer-zzzz0000' },
              retiringKeyIds: [3],
            });
            expect({ pending, secret, deleting, action: d.action.type, reason: d.reason }).toEqual({
              pending,
              secret,
              deleting,
              action: 'ClearPending',
              reason: 'StaleIntent',
            });
          }
        }
      }
    }
  });
});
