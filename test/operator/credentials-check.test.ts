// The wrong kind of credentials is said early and clearly (GET /auth), never as a 403 from a
// create: for each kind of resource, a credentials Secret holding an organization key or a
// project-scoped key. A real apiserver, the emulator over HTTP, no mocks.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, emulatorAdmin, eventually, installOperatorManifests, operatorKubeConfig } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const PROJECT = 'quiet-river-00000001';
type Kind = 'ApiKey' | 'ProjectApiKey';
interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}
interface Resource {
  status?: { keyId?: number; conditions?: Condition[] };
}

describe('the credentials check', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;
  let org: string;
  const logLines: string[] = [];

  const creations = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(emulator.adminUrl, 'GET', '/requests'))
      .filter((r) => r.method === 'POST' && /api_keys$/.test(r.route))
      .reduce((n, r) => n + r.count, 0);

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    const alice = new PlatformClient({
      baseUrl: emulator.baseUrl,
      apiKey: emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '',
      retry: { maxAttempts: 1 },
    });
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'credentials-check');
    const orgKey = await alice.createOrganizationKey(org, { keyName: 'ci-org-key' });
    const projectKey = await alice.createOrganizationKey(org, { keyName: 'ci-project-key', projectId: PROJECT });
    for (const [name, key] of [
      ['org-key', orgKey.key],
      ['project-key', projectKey.key],
    ] as const) {
      await core.createNamespacedSecret({ namespace, body: { metadata: { name }, stringData: { apiKey: key } } });
    }
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespace,
      workers: 4,
      driftIntervalMs: 5_000,
      maxBackoffMs: 4_000,
      logger: createLogger({
        level: 'debug',
        destination: new Writable({
          write(chunk: Buffer, _enc, done) {
            logLines.push(chunk.toString('utf8'));
            done();
          },
        }),
      }),
      identity: 'credentials-check',
    });
  });

  afterAll(async () => {
    await operator?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
  });

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
    const body = { ...JSON.parse(JSON.stringify(spec).replace('"ORG"', JSON.stringify(org))), keyName: name, credentialsSecretRef: { name: secret } };
    await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: kind === 'ApiKey' ? 'apikeys' : 'projectapikeys',
      body: { apiVersion: `${group}/${version}`, kind, metadata: { name }, spec: body },
    });
    const reported = await eventually(
      async () => {
        const r = (await objects.getNamespacedCustomObject({
          group,
          version,
          namespace,
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
    const aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    const secret = await core.readNamespacedSecret({ namespace, name: 'org-key' });
    await core.replaceNamespacedSecret({ namespace, name: 'org-key', body: { ...secret, data: { apiKey: Buffer.from(aliceKey).toString('base64') } } });
    await eventually(
      async () => {
        const r = (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name: 'wrong-kind-1' })) as Resource;
        return r.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' ? r : undefined;
      },
      30_000,
      "wrong-kind-1 Ready once its credentials are a person's",
    );
    expect(logLines.join('')).not.toContain(aliceKey);
  });
});
