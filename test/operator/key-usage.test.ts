// The key's use in view, on a real kube-apiserver + etcd and the emulator over HTTP: status.lastUsedAt
// and lastUsedFromAddr follow the platform's list (no extra platform call, no status write on a
// drift pass where nothing changed, nor for uses within the hour of the recorded one), `kubectl
// get` shows Last Used, and spec.usage.unusedAfter sets InUse without touching Ready.
import { describe, expect, it } from '@jest/globals';
import { isIP } from 'node:net';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, kubectl } from './support.ts';
import { type Condition, operatorSuite } from './fixture.ts';

const ORG = 'org-demo-00000001';
const DRIFT_MS = 1_500;

interface Resource {
  metadata: { name: string; resourceVersion: string; generation: number };
  status?: { keyId?: number; createdAt?: string; lastUsedAt?: string; lastUsedFromAddr?: string; conditions?: Condition[] };
}

describe("the key's use in view", () => {
  const suite = operatorSuite({
    namespaces: ['key-usage'],
    operator: (s) => ({
      namespace: s.namespace,
      workers: 2,
      driftIntervalMs: DRIFT_MS,
      pendingGraceMs: 5_000,
      maxBackoffMs: 4_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'key-usage',
    }),
  });

  const create = (name: string, extra: Record<string, unknown> = {}): Promise<unknown> =>
    suite.apply(
      'ApiKey',
      { name, namespace: suite.namespace },
      { scope: 'Organization', organizationId: ORG, keyName: name, credentialsSecretRef: { name: 'neon-admin' }, ...extra },
    );
  const get = (name: string): Promise<Resource> => suite.get<Resource>('apikeys', name);
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const until = (name: string, test: (r: Resource) => boolean, what: string, timeoutMs = 20_000): Promise<Resource> =>
    suite.until<Resource>('apikeys', name, test, what, timeoutMs);
  const useKey = async (name: string): Promise<void> => {
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
    const apiKey = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
    await new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey, retry: { maxAttempts: 1 } }).listProjects({ orgId: ORG });
  };
  const requests = async (): Promise<number> =>
    (await emulatorAdmin<{ method: string; route: string; count: number }[]>(suite.emulator.adminUrl, 'GET', '/requests')).reduce((n, r) => n + r.count, 0);

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
    const table = await kubectl(suite.cp, ['get', 'apikeys', 'used', '-n', suite.namespace]);
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
