// The first creates of a namespace, all at once (the head of a flood): the questions each create
// asks before its POST are asked once for all of them. 16 new organization keys with one
// credentials Secret, 16 workers, every platform request 100 ms late (so the questions overlap):
// one GET /auth (the credentials' kind), one GET /users/me/organizations (the membership), one
// write of the credentials Secret's finalizer, and 16 creates. A real apiserver, the emulator over
// HTTP, the operator in-process; counted at the emulator.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { CREDENTIALS_FINALIZER } from '../../src/operator/resources/schema.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, emulatorAdmin, eventually, installOperatorManifests, operatorKubeConfig } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
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
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;
  let org: string;
  const logLines: string[] = [];

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'create-head');
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '' } },
    });
    await emulatorAdmin(emulator.adminUrl, 'PUT', '/faults', { rules: [{ probability: 1, kind: 'latency', latencyMs: 100 }] });
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespace,
      workers: KEYS,
      logger: createLogger({
        level: 'info',
        destination: new Writable({
          write(chunk: Buffer, _enc, done) {
            logLines.push(chunk.toString('utf8'));
            done();
          },
        }),
      }),
      identity: 'create-head',
    });
    await emulatorAdmin(emulator.adminUrl, 'DELETE', '/requests');
  });

  afterAll(async () => {
    await operator?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
  });

  it(`${KEYS} new keys at once: one GET /auth, one membership question, one finalizer write, ${KEYS} creates`, async () => {
    await Promise.all(
      Array.from({ length: KEYS }, (_, i) =>
        objects.createNamespacedCustomObject({
          group,
          version,
          namespace,
          plural: 'apikeys',
          body: {
            apiVersion: `${group}/${version}`,
            kind: 'ApiKey',
            metadata: { name: `head-${i}` },
            spec: { scope: 'Organization', organizationId: org, keyName: `head-${i}`, credentialsSecretRef: { name: 'neon-admin' } },
          },
        }),
      ),
    );
    for (let i = 0; i < KEYS; i++) {
      await eventually(
        async () => {
          const r = (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name: `head-${i}` })) as Resource;
          return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? r : undefined;
        },
        60_000,
        `head-${i} Ready`,
      );
    }
    const requests = await emulatorAdmin<RequestCount[]>(emulator.adminUrl, 'GET', '/requests');
    const count = (method: string, route: RegExp): number =>
      requests.filter((r) => r.method === method && route.test(r.route)).reduce((n, r) => n + r.count, 0);
    expect(count('GET', /\/auth$/)).toBe(1);
    expect(count('GET', /\/users\/me\/organizations$/)).toBe(1);
    expect(count('POST', /\/organizations\/[^/]+\/api_keys$/)).toBe(KEYS);
    expect(requests.filter((r) => r.status === 429)).toEqual([]);
    const secret = await core.readNamespacedSecret({ namespace, name: 'neon-admin' });
    expect(secret.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
    // One write put it there, shared by the creates that came to it at once.
    expect(logLines.filter((l) => l.includes('credentials Secret kept while keys issued with it are live'))).toHaveLength(1);
  });
});
