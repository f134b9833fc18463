// An issuer's Ready condition and status, as tables (pure: issuers/conditions.ts, issuer-status.ts):
// each outcome's reason, the deletion message, and when status is written at all.
import { describe, expect, it } from '@jest/globals';
import { PlatformError } from '../../../src/platform/index.ts';
import type { ClusterKeyIssuerStatus } from '../../../src/operator/resources/issuer.ts';
import { credentialsProblem, deletionBlocked, MAX_NAMED_USERS, verified, type Readiness } from '../../../src/operator/issuers/conditions.ts';
import { readyEvent } from '../../../src/operator/issuers/events.ts';
import { nextStatus, VERIFIED_AT_REFRESH_MS } from '../../../src/operator/issuers/issuer-status.ts';
import type { Verification } from '../../../src/operator/issuers/verification.ts';

const ORG = 'org-demo-00000001';
const REF = { namespace: 'issuer-secrets', name: 'platform-admin', key: 'apiKey' };
const T0 = Date.parse('2026-11-26T00:00:00Z');
const failure = (code: 'UNAUTHORIZED' | 'FORBIDDEN' | 'RATE_LIMITED' | 'UNAVAILABLE', status?: number): PlatformError =>
  new PlatformError({
    code,
    disposition: 'terminal',
    method: 'GET',
    route: '/auth',
    message: code,
    ...(status !== undefined ? { status } : {}),
    requestId: 'req-1',
  });
const alice = { id: 'u-1', email: 'alice@example.com', role: 'admin' };

describe('verified()', () => {
  const rows: [string, Verification, Readiness['ready']['status'], string, RegExp][] = [
    ['an administrator', { outcome: 'Verified', user: alice }, 'True', 'Verified', /alice@example\.com \(user u-1\), an administrator of org-demo/],
    [
      'an organization key',
      { outcome: 'WrongKind', authMethod: 'api_key_org', accountId: ORG },
      'False',
      'CredentialsWrongKind',
      /an organization key .*; an issuer needs a personal key of an administrator/,
    ],
    [
      'a session',
      { outcome: 'WrongKind', authMethod: 'session_cookie', accountId: 'u-1' },
      'False',
      'CredentialsWrongKind',
      /not an API key of a user \(session_cookie\)/,
    ],
    [
      'a revoked key',
      { outcome: 'Refused', failure: failure('UNAUTHORIZED', 401) },
      'False',
      'CredentialsRefused',
      /refused the credentials \(401\) \(request req-1\): the key is invalid or revoked/,
    ],
    [
      'not a member',
      { outcome: 'NotAMember', user: { id: 'u-2', email: 'dana@example.com' }, failure: failure('FORBIDDEN', 403) },
      'False',
      'NotAMember',
      /dana@example\.com \(user u-2\), who is not a member of org-demo/,
    ],
    [
      'a member',
      { outcome: 'NotAnAdministrator', user: { ...alice, role: 'member' } },
      'False',
      'NotAnAdministrator',
      /a member of org-demo-00000001, not an administrator/,
    ],
    ['rate-limited', { outcome: 'Unavailable', rateLimited: true, failure: failure('RATE_LIMITED', 429) }, 'Unknown', 'RateLimited', /RATE_LIMITED 429/],
    ['unavailable', { outcome: 'Unavailable', rateLimited: false, failure: failure('UNAVAILABLE', 503) }, 'Unknown', 'PlatformUnavailable', /UNAVAILABLE 503/],
  ];
  it.each(rows)('%s', (_, verification, status, reason, message) => {
    const { ready } = verified(verification, REF, ORG);
    expect(ready).toEqual({ status, reason, message: expect.stringMatching(message) });
  });

  it("keeps status.user when nothing new is known of it, drops it when the credentials are no user's", () => {
    expect(verified({ outcome: 'Unavailable', rateLimited: false, failure: failure('UNAVAILABLE') }, REF, ORG).user).toBe('keep');
    expect(verified({ outcome: 'Refused', failure: failure('UNAUTHORIZED') }, REF, ORG).user).toBeUndefined();
    expect(credentialsProblem('missing', REF, ORG)).toEqual({
      ready: {
        status: 'False',
        reason: 'CredentialsMissing',
        message:
          'the credentials Secret issuer-secrets/platform-admin (key apiKey) is missing or empty; put a personal API key of an administrator of org-demo-00000001 there',
      },
      user: undefined,
    });
  });
});

describe('deletionBlocked()', () => {
  it('names the resources as namespace/name, sorted, at most ten, and counts the rest', () => {
    expect(deletionBlocked(['ProjectApiKey/team-b/db', 'ApiKey/team-a/ci']).ready).toEqual({
      status: 'False',
      reason: 'DeletionBlocked',
      message: 'deletion waits for 2 resources that use this issuer: team-a/ci, team-b/db; delete them, or point their spec.issuerRef elsewhere',
    });
    const many = Array.from({ length: 13 }, (_, i) => `ApiKey/ns/k-${String(i).padStart(2, '0')}`);
    const { message } = deletionBlocked(many).ready;
    expect(message).toMatch(/^deletion waits for 13 resources .*: ns\/k-00, .*, ns\/k-09 and 3 more;/);
    expect(message.match(/ns\//g)).toHaveLength(MAX_NAMED_USERS);
    expect(deletionBlocked(['ApiKey/ns/one']).ready.message).toMatch(/^deletion waits for 1 resource that uses this issuer: ns\/one;/);
  });
});

describe('nextStatus()', () => {
  const ok = verified({ outcome: 'Verified', user: alice }, REF, ORG);
  const written = nextStatus(undefined, { generation: 1, readiness: ok, resources: 2, verifiedAt: T0, now: T0 }) as ClusterKeyIssuerStatus;

  it('writes a first status whole', () => {
    expect(written).toEqual({
      observedGeneration: 1,
      user: alice,
      resources: 2,
      verifiedAt: '2026-11-26T00:00:00Z',
      conditions: [
        { type: 'Ready', status: 'True', observedGeneration: 1, lastTransitionTime: '2026-11-26T00:00:00Z', reason: 'Verified', message: expect.any(String) },
      ],
    });
  });

  const rows: [string, Parameters<typeof nextStatus>[1], 'none' | 'write'][] = [
    [
      'the same outcome verified again within the hour',
      { generation: 1, readiness: ok, resources: 2, verifiedAt: T0 + VERIFIED_AT_REFRESH_MS - 1, now: T0 + VERIFIED_AT_REFRESH_MS - 1 },
      'none',
    ],
    [
      'the same outcome, not verified in this pass',
      { generation: 1, readiness: ok, resources: 2, verifiedAt: undefined, now: T0 + 2 * VERIFIED_AT_REFRESH_MS },
      'none',
    ],
    [
      'the same outcome verified an hour later',
      { generation: 1, readiness: ok, resources: 2, verifiedAt: T0 + VERIFIED_AT_REFRESH_MS, now: T0 + VERIFIED_AT_REFRESH_MS },
      'write',
    ],
    ['another count of resources', { generation: 1, readiness: ok, resources: 3, verifiedAt: undefined, now: T0 + 1_000 }, 'write'],
    ['a new generation', { generation: 2, readiness: ok, resources: 2, verifiedAt: T0 + 1_000, now: T0 + 1_000 }, 'write'],
    [
      'another reason',
      {
        generation: 1,
        readiness: verified({ outcome: 'NotAnAdministrator', user: { ...alice, role: 'member' } }, REF, ORG),
        resources: 2,
        verifiedAt: T0 + 1_000,
        now: T0 + 1_000,
      },
      'write',
    ],
  ];
  it.each(rows)('%s: %s', (_, input, expected) => {
    expect(nextStatus(written, input) === undefined ? 'none' : 'write').toBe(expected);
  });

  it('keeps verifiedAt and lastTransitionTime when another field changes without a verification', () => {
    const next = nextStatus(written, { generation: 1, readiness: ok, resources: 5, verifiedAt: undefined, now: T0 + 60_000 });
    expect(next?.verifiedAt).toBe('2026-11-26T00:00:00Z');
    expect(next?.conditions?.[0]?.lastTransitionTime).toBe('2026-11-26T00:00:00Z');
  });

  it("keeps status.user through an outage, dates a transition, and keeps the last verification's time", () => {
    const outage = verified({ outcome: 'Unavailable', rateLimited: false, failure: failure('UNAVAILABLE', 503) }, REF, ORG);
    const next = nextStatus(written, { generation: 1, readiness: outage, resources: 2, verifiedAt: undefined, now: T0 + 60_000 });
    expect(next).toEqual(expect.objectContaining({ user: alice, verifiedAt: '2026-11-26T00:00:00Z' }));
    expect(next?.conditions?.[0]).toEqual(
      expect.objectContaining({ status: 'Unknown', reason: 'PlatformUnavailable', lastTransitionTime: '2026-11-26T00:01:00Z' }),
    );
  });

  it("drops status.user once the credentials are no user's", () => {
    const refused = verified({ outcome: 'Refused', failure: failure('UNAUTHORIZED', 401) }, REF, ORG);
    expect(nextStatus(written, { generation: 1, readiness: refused, resources: 2, verifiedAt: T0 + 1_000, now: T0 + 1_000 })?.user).toBeUndefined();
  });
});

describe('readyEvent()', () => {
  const ok = { status: 'True' as const, reason: 'Verified' as const, message: 'ok' };
  const refused = { status: 'False' as const, reason: 'CredentialsRefused' as const, message: 'refused' };
  it('warns when an issuer turns not Ready, tells when it is Ready again, and is silent otherwise', () => {
    expect(readyEvent(undefined, refused)).toEqual({ type: 'Warning', reason: 'CredentialsRefused', message: 'the issuer is not Ready: refused' });
    expect(readyEvent({ status: 'True' }, refused)?.type).toBe('Warning');
    expect(readyEvent({ status: 'False' }, ok)).toEqual({ type: 'Normal', reason: 'Verified', message: 'the issuer is Ready again: ok' });
    expect(readyEvent(undefined, ok)).toBeUndefined();
    expect(readyEvent({ status: 'False' }, refused)).toBeUndefined();
  });
});
