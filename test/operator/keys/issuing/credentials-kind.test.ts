import { describe, expect, it } from '@jest/globals';
import { CredentialsKinds, wrongCredentialsKind } from '../../../../src/operator/keys/issuing/credentials-kind.ts';

describe('which kind of key the credentials hold', () => {
  const user = { account_id: 'u-1', auth_method: 'api_key_user' };
  const org = { account_id: 'org-a-1', auth_method: 'api_key_org' };
  const project = { account_id: 'org-a-1', auth_method: 'api_key_org', auth_data: 'quiet-river-1' };

  it.each([
    ['Personal', user, undefined],
    ['Organization', user, undefined],
    ['Project', user, undefined],
    ['Personal', org, /organization or project-scoped API key \(of organization org-a-1\).*Personal ApiKey needs a personal API key of the user/],
    ['Organization', org, /Organization ApiKey needs a personal API key of an administrator/],
    ['Project', project, /ProjectApiKey needs a personal API key of a member/],
    ['Organization', { account_id: 'x', auth_method: 'oauth' }, /auth method is oauth/],
  ] as const)('%s with %j', (kind, auth, message) => {
    const problem = wrongCredentialsKind(kind, auth);
    if (message === undefined) expect(problem).toBeUndefined();
    else expect(problem).toMatch(message);
  });

  it('asks once per credentials while the answer is fresh, and again after', async () => {
    let now = 0;
    let asked = 0;
    const kinds = new CredentialsKinds(1_000, () => now);
    const ask = async () => {
      asked += 1;
      return user;
    };
    await kinds.of('a', ask);
    await kinds.of('a', ask);
    await kinds.of('b', ask);
    expect(asked).toBe(2);
    now = 1_000;
    await kinds.of('a', ask);
    expect(asked).toBe(3);
  });

  it('concurrent askers with one credentials share one question; a failed one is shared and not remembered', async () => {
    const kinds = new CredentialsKinds(60_000, () => 0);
    let asked = 0;
    let answer: (auth: typeof user) => void = () => undefined;
    const ask = () => {
      asked += 1;
      return new Promise<typeof user>((resolve) => {
        answer = resolve;
      });
    };
    const waiting = Array.from({ length: 16 }, () => kinds.of('a', ask));
    expect(asked).toBe(1);
    answer(user);
    expect(await Promise.all(waiting)).toEqual(Array.from({ length: 16 }, () => user));
    await kinds.of('a', ask);
    expect(asked).toBe(1);

    let failed = 0;
    const failing = async (): Promise<typeof user> => {
      failed += 1;
      throw new Error('503');
    };
    const results = await Promise.allSettled([kinds.of('b', failing), kinds.of('b', failing), kinds.of('b', failing)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(failed).toBe(1);
    expect(await kinds.of('b', async () => user)).toEqual(user);
  });
});
