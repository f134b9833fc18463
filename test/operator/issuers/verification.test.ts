// An issuer's credentials verified against the emulator over HTTP (issuers/verification.ts): an
// administrator's personal key, a member's, a user outside the organization, an organization key, a
// revoked key, a platform that fails; and no outcome carries the key.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { inspect } from 'node:util';
import { startEmulator, type Emulator } from '../../../src/emulator/server.ts';
import { PlatformClient } from '../../../src/platform/index.ts';
import { verifyCredentials, type Verification } from '../../../src/operator/issuers/verification.ts';
import { emulatorAdmin } from '../support.ts';

const ORG = 'org-demo-00000001';

describe('verifyCredentials()', () => {
  let emulator: Emulator;
  const keys = new Set<string>();
  const client = (apiKey: string): PlatformClient => {
    keys.add(apiKey);
    return new PlatformClient({ baseUrl: emulator.baseUrl, apiKey, retry: { maxAttempts: 1 } });
  };
  const keyOf = (name: string): string => emulator.bootstrap.users.find((u) => u.name === name)?.personalKey ?? '';
  const expectNoKey = (v: Verification): void => {
    const text = `${JSON.stringify(v)} ${inspect(v, { depth: 5 })} ${'failure' in v && v.failure !== undefined ? `${v.failure.message} ${v.failure.stack ?? ''}` : ''}`;
    for (const key of keys) expect(text).not.toContain(key);
  };

  beforeAll(async () => {
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
  });
  afterAll(async () => {
    await emulator?.close();
  });

  it("an administrator's personal key is Verified, with the user's id, email and role", async () => {
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice');
    const v = await verifyCredentials(client(keyOf('alice')), ORG);
    expect(v).toEqual({ outcome: 'Verified', user: { id: alice?.id, email: 'alice@example.com', role: 'admin' } });
  });

  it("a member's is NotAnAdministrator; a user outside the organization's is NotAMember", async () => {
    expect(await verifyCredentials(client(keyOf('bob')), ORG)).toEqual({
      outcome: 'NotAnAdministrator',
      user: expect.objectContaining({ email: 'bob@example.com', role: 'member' }),
    });
    const carol = await verifyCredentials(client(keyOf('carol')), ORG);
    expect(carol).toEqual(expect.objectContaining({ outcome: 'NotAMember', user: expect.objectContaining({ email: 'carol@example.com' }) }));
    expectNoKey(carol);
  });

  it('an organization key is the wrong kind; a revoked key is refused', async () => {
    const orgKey = await client(keyOf('alice')).createOrganizationKey(ORG, { keyName: 'not-for-an-issuer' });
    const wrong = await verifyCredentials(client(orgKey.key), ORG);
    expect(wrong).toEqual({ outcome: 'WrongKind', authMethod: 'api_key_org', accountId: ORG });
    const dana = await emulatorAdmin<{ id: string; personalKey: string }>(emulator.adminUrl, 'POST', '/users', { name: 'dana', orgRoles: { [ORG]: 'admin' } });
    const own = client(dana.personalKey);
    const [first] = await own.listPersonalKeys();
    await own.revokePersonalKey(first?.id ?? 0);
    const refused = await verifyCredentials(client(dana.personalKey), ORG);
    expect(refused).toEqual({ outcome: 'Refused', failure: expect.objectContaining({ code: 'UNAUTHORIZED', status: 401 }) });
    expectNoKey(refused);
  });

  it('a platform that fails leaves nothing known (Unavailable), and a 429 says so', async () => {
    await emulatorAdmin(emulator.adminUrl, 'PUT', '/faults', { rules: [{ route: '/api/v2/users/me', probability: 1, kind: 'status', status: 503 }] });
    const down = await verifyCredentials(client(keyOf('alice')), ORG);
    expect(down).toEqual({ outcome: 'Unavailable', rateLimited: false, failure: expect.objectContaining({ status: 503 }) });
    await emulatorAdmin(emulator.adminUrl, 'PUT', '/faults', {
      rules: [{ route: '/api/v2/organizations/:org_id/members', probability: 1, kind: 'status', status: 429 }],
    });
    expect(await verifyCredentials(client(keyOf('alice')), ORG)).toEqual(expect.objectContaining({ outcome: 'Unavailable', rateLimited: true }));
    await emulatorAdmin(emulator.adminUrl, 'DELETE', '/faults');
    expectNoKey(down);
  });
});
