// The first creates of a namespace, all at once (the head of a flood): the questions each create
// asks before its POST are asked once for all of them. 16 new organization keys with one
// credentials Secret, 16 workers, every platform request 100 ms late (so the questions overlap):
// one GET /auth (the credentials' kind), one GET /users/me/organizations (the membership), one
// write of the credentials Secret's finalizer, and 16 creates. A real apiserver, the emulator over
// HTTP, the operator in-process; counted at the emulator.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { CREDENTIALS_FINALIZER } from '../../src/operator/resources/schema.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { capturedLog, group, operatorSuite, version } from './fixture.ts';

const KEYS = 16;
interface Condition {
  type: string;
  status: string;
}
interface Resource {
  status?: { keyId?: number; conditions?: Condition[] };
}
interface RequestCount {
  method: string;
  route: string;
  status: number;
  count: number;
}

describe('the head of a flood', () => {
  const { logger, lines: logLines } = capturedLog('info');
  const suite = operatorSuite({
    namespaces: ['create-head'],
    before: async (s) => {
      await emulatorAdmin(s.emulator.adminUrl, 'PUT', '/faults', { rules: [{ probability: 1, kind: 'latency', latencyMs: 100 }] });
    },
    operator: (s) => ({
      namespace: s.namespace,
      workers: KEYS,
      logger,
      identity: 'create-head',
    }),
  });

  beforeAll(async () => {
    await emulatorAdmin(suite.emulator.adminUrl, 'DELETE', '/requests');
  });

  it(`${KEYS} new keys at once: one GET /auth, one membership question, one finalizer write, ${KEYS} creates`, async () => {
    await Promise.all(
      Array.from({ length: KEYS }, (_, i) =>
        suite.apply(
          'ApiKey',
          { name: `head-${i}` },
          { scope: 'Organization', organizationId: suite.org, keyName: `head-${i}`, credentialsSecretRef: { name: 'neon-admin' } },
        ),
      ),
    );
    for (let i = 0; i < KEYS; i++) {
      await eventually(
        async () => {
          const r = (await suite.objects.getNamespacedCustomObject({
            group,
            version,
            namespace: suite.namespace,
            plural: 'apikeys',
            name: `head-${i}`,
          })) as Resource;
          return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? r : undefined;
        },
        60_000,
        `head-${i} Ready`,
      );
    }
    const requests = await emulatorAdmin<RequestCount[]>(suite.emulator.adminUrl, 'GET', '/requests');
    const count = (method: string, route: RegExp): number =>
      requests.filter((r) => r.method === method && route.test(r.route)).reduce((n, r) => n + r.count, 0);
    expect(count('GET', /\/auth$/)).toBe(1);
    expect(count('GET', /\/users\/me\/organizations$/)).toBe(1);
    expect(count('POST', /\/organizations\/[^/]+\/api_keys$/)).toBe(KEYS);
    expect(requests.filter((r) => r.status === 429)).toEqual([]);
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'neon-admin' });
    expect(secret.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
    // One write put it there, shared by the creates that came to it at once.
    expect(logLines.filter((l) => l.includes('credentials Secret kept while keys issued with it are live'))).toHaveLength(1);
  });
});
