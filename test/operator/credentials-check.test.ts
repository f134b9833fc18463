// The wrong kind of credentials is said early and clearly (GET /auth), never as a 403 from a
// create: for each kind of resource, a credentials Secret holding an organization key or a
// project-scoped key. A real apiserver, the emulator over HTTP, no mocks.
import { describe, expect, it } from '@jest/globals';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { capturedLog, type Condition, group, operatorSuite, version } from './fixture.ts';

const PROJECT = 'quiet-river-00000001';
type Kind = 'ApiKey' | 'ProjectApiKey';
interface Resource {
  status?: { keyId?: number; conditions?: Condition[] };
}

describe('the credentials check', () => {
  const { logger, lines: logLines } = capturedLog('debug');
  const suite = operatorSuite({
    namespaces: ['credentials-check'],
    credentials: false,
    before: async (s) => {
      const alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
      const orgKey = await alice.createOrganizationKey(s.org, { keyName: 'ci-org-key' });
      const projectKey = await alice.createOrganizationKey(s.org, { keyName: 'ci-project-key', projectId: PROJECT });
      for (const [name, key] of [
        ['org-key', orgKey.key],
        ['project-key', projectKey.key],
      ] as const) {
        await s.core.createNamespacedSecret({ namespace: s.namespace, body: { metadata: { name }, stringData: { apiKey: key } } });
      }
    },
    operator: (s) => ({
      namespace: s.namespace,
      workers: 4,
      driftIntervalMs: 5_000,
      maxBackoffMs: 4_000,
      logger,
      identity: 'credentials-check',
    }),
  });

  const creations = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(suite.emulator.adminUrl, 'GET', '/requests'))
      .filter((r) => r.method === 'POST' && /api_keys$/.test(r.route))
      .reduce((n, r) => n + r.count, 0);

  const cases: [string, Kind, Record<string, unknown>, string, RegExp][] = [
    [
      'an organization key for a personal ApiKey',
      'ApiKey',
      { scope: 'Personal' },
      'org-key',
      /organization or project-scoped API key .*Personal ApiKey needs a personal API key of the user/,
    ],
    [
      'an organization key for an organization ApiKey',
      'ApiKey',
      { scope: 'Organization', organizationId: 'ORG' },
      'org-key',
      /Organization ApiKey needs a personal API key of an administrator/,
    ],
    [
      'a project key for an organization ApiKey',
      'ApiKey',
      { scope: 'Organization', organizationId: 'ORG' },
      'project-key',
      /Organization ApiKey needs a personal API key of an administrator/,
    ],
    [
      'a project key for a ProjectApiKey (an admin personal key is needed)',
      'ProjectApiKey',
      { organizationId: 'ORG', projectId: PROJECT },
      'project-key',
      /ProjectApiKey needs a personal API key/,
    ],
    [
      'an organization key for a ProjectApiKey',
      'ProjectApiKey',
      { organizationId: 'ORG', projectId: PROJECT },
      'org-key',
      /ProjectApiKey needs a personal API key/,
    ],
  ];

  it.each(cases.map((c, i) => [c[0], i, c] as const))('%s: CredentialsWrongKind before any create', async (_story, i, [, kind, spec, secret, message]) => {
    const name = `wrong-kind-${i}`;
    const before = await creations();
    const body = { ...JSON.parse(JSON.stringify(spec).replace('"ORG"', JSON.stringify(suite.org))), keyName: name, credentialsSecretRef: { name: secret } };
    await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: kind === 'ApiKey' ? 'apikeys' : 'projectapikeys',
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name }, spec: body },
    });
    const reported = await eventually(
      async () => {
        const r = (await suite.objects.getNamespacedCustomObject({
          group,
          version,
          namespace: suite.namespace,
          plural: kind === 'ApiKey' ? 'apikeys' : 'projectapikeys',
          name,
        })) as Resource;
        return r.status?.conditions?.find((c) => c.type === 'KeyIssued')?.reason === 'CredentialsWrongKind' ? r : undefined;
      },
      20_000,
      `${name} CredentialsWrongKind`,
    );
    expect(reported.status?.conditions?.find((c) => c.type === 'KeyIssued')?.message).toMatch(message);
    expect(reported.status?.conditions?.find((c) => c.type === 'Ready')).toEqual(expect.objectContaining({ status: 'False', reason: 'CredentialsWrongKind' }));
    expect(reported.status?.keyId).toBeUndefined();
    // No create was sent for it (other cases of this suite may run concurrently: none of them creates either).
    expect(await creations()).toBe(before);
  });

  it('the fixed credentials are taken up: a personal key of an administrator issues the key', async () => {
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'org-key' });
    await suite.core.replaceNamespacedSecret({
      namespace: suite.namespace,
      name: 'org-key',
      body: { ...secret, data: { apiKey: Buffer.from(suite.adminKey).toString('base64') } },
    });
    await eventually(
      async () => {
        const r = (await suite.objects.getNamespacedCustomObject({
          group,
          version,
          namespace: suite.namespace,
          plural: 'apikeys',
          name: 'wrong-kind-1',
        })) as Resource;
        return r.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? r : undefined;
      },
      30_000,
      "wrong-kind-1 Ready once its credentials are a person's",
    );
    expect(logLines.join('')).not.toContain(suite.adminKey);
  });
});
