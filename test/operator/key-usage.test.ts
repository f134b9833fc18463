// The key's use in view, on a real kube-apiserver + etcd and the emulator over HTTP: status.lastUsedAt
// and lastUsedFromAddr follow the platform's list (no extra platform call, no status write on a
// drift pass where nothing changed, nor for uses within the hour of the recorded one), `kubectl
// get` shows Last Used, and spec.usage.unusedAfter sets InUse without touching Ready.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { isIP } from 'node:net';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, emulatorAdmin, eventually, installOperatorManifests, kubectl, operatorKubeConfig } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const ORG = 'org-demo-00000001';
const DRIFT_MS = 1_500;

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}
interface Resource {
  metadata: { name: string; resourceVersion: string; generation: number };
  status?: { keyId?: number; createdAt?: string; lastUsedAt?: string; lastUsedFromAddr?: string; conditions?: Condition[] };
}

describe("the key's use in view", () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;

  const create = (name: string, extra: Record<string, unknown> = {}): Promise<unknown> =>
    objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'apikeys',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ApiKey',
        metadata: { name, namespace },
        spec: { scope: 'Organization', organizationId: ORG, keyName: name, credentialsSecretRef: { name: 'neon-admin' }, ...extra },
      },
    });
  const get = async (name: string): Promise<Resource> =>
    (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name })) as Resource;
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const until = (name: string, test: (r: Resource) => boolean, what: string, timeoutMs = 20_000): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(name);
        return test(r) ? r : undefined;
      },
      timeoutMs,
      `${name}: ${what}`,
    );
  const useKey = async (name: string): Promise<void> => {
    const secret = await core.readNamespacedSecret({ namespace, name });
    const apiKey = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
    await new PlatformClient({ baseUrl: emulator.baseUrl, apiKey, retry: { maxAttempts: 1 } }).listProjects({ orgId: ORG });
  };
  const requests = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(emulator.adminUrl, 'GET', '/requests')).reduce((n, r) => n + r.count, 0);

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'key-usage');
    const aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: aliceKey } } });
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespace,
      workers: 2,
      driftIntervalMs: DRIFT_MS,
      pendingGraceMs: 5_000,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'key-usage',
    });
  });

  afterAll(async () => {
    await operator?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
  });

  it('a used key shows when and from where in status and in kubectl get; a pass that finds nothing new writes nothing', async () => {
    await create('used');
    const ready = await until('used', (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
    expect(ready.status?.lastUsedAt).toBeUndefined();
    expect(condition(ready, 'InUse')).toBeUndefined();
    const before = Date.now();
    await useKey('used');
    const seen = await until('used', (r) => r.status?.lastUsedAt !== undefined, 'lastUsedAt recorded');
    expect(Date.parse(seen.status?.lastUsedAt ?? '')).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(seen.status?.lastUsedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(isIP(seen.status?.lastUsedFromAddr ?? '')).not.toBe(0);
    const table = await kubectl(cp, ['get', 'apikeys', 'used', '-n', namespace]);
    expect(table.split('\n')[0]).toMatch(/LAST USED/);
    expect(table.split('\n')[1]).not.toMatch(/<none>\s+\S+$/);

    // Three drift passes, the key used again meanwhile (within the hour of the recorded use): the
    // platform is listed (one call per pass for the organization), the resource is not written.
    const version = (await get('used')).metadata.resourceVersion;
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await useKey('used');
    const calls = await requests();
    await new Promise((resolve) => setTimeout(resolve, 3 * DRIFT_MS + 500));
    expect((await get('used')).metadata.resourceVersion).toBe(version);
    expect((await requests()) - calls).toBeLessThanOrEqual(5);
  });

  it('spec.usage.unusedAfter: InUse False for a key never used since issued, True once used; Ready stays True', async () => {
    await create('idle', { usage: { unusedAfter: '3s' } });
    const ready = await until('idle', (r) => condition(r, 'Ready')?.status === 'True' && condition(r, 'InUse') !== undefined, 'Ready with InUse');
    expect(condition(ready, 'InUse')).toEqual(expect.objectContaining({ status: 'True', reason: 'UsedRecently' }));
    const idle = await until('idle', (r) => condition(r, 'InUse')?.status === 'False', 'InUse False');
    expect(condition(idle, 'InUse')).toEqual(
      expect.objectContaining({ reason: 'NotUsedRecently', message: `never used since issued at ${idle.status?.createdAt} (more than 3s)` }),
    );
    expect(condition(idle, 'Ready')?.status).toBe('True');
    await useKey('idle');
    const used = await until('idle', (r) => condition(r, 'InUse')?.status === 'True', 'InUse True again');
    expect(condition(used, 'InUse')?.message).toBe('used within the last 3s');
    expect(used.status?.lastUsedAt).toBeDefined();
    expect(condition(used, 'Ready')?.status).toBe('True');
  });
});
