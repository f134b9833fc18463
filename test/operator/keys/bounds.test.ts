// Every value of a tenant-chosen size the operator keeps is bounded (docs/security.md, Bounds):
// credentials longer than any API key are refused before a client is made; the platform clients,
// the drift cache's lists and failures, and a cached Secret's owner annotation have a ceiling.
import { describe, expect, it } from '@jest/globals';
import type { KeyAdapter, KeyPlatform } from '../../../src/operator/keys/adapter.ts';
import { cachedOwner, trimSecret } from '../../../src/operator/keys/observing/cache-projection.ts';
import { MAX_DRIFT_LISTS } from '../../../src/operator/keys/observing/drift-budget.ts';
import { DriftCache } from '../../../src/operator/keys/observing/drift.ts';
import { MAX_CLIENTS, PlatformClients } from '../../../src/operator/keys/platform-clients.ts';
import { MAX_API_KEY_LENGTH, PlatformClient, isApiKeyFormat } from '../../../src/platform/index.ts';
import { CREDENTIALS, NAMESPACE, keyResource, rig } from './fakes.ts';

describe('bounds on what a tenant sizes', () => {
  it('refuses credentials longer than any API key (here 1 MiB) before any platform client is made, with a condition saying so', async () => {
    const made: string[] = [];
    const r = rig({
      credentials: false,
      platformFor: (apiKey) => {
        made.push(apiKey);
        throw new Error('no client may be made');
      },
    });
    r.kube.putSecret({ metadata: { name: CREDENTIALS, namespace: NAMESPACE }, data: { apiKey: Buffer.alloc(1024 * 1024, 'k').toString('base64') } });
    r.kube.putResource(keyResource('ApiKey', 'ci', { finalizers: ['keys.neon.dev/finalizer'] }));
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    expect(made).toEqual([]);
    const ready = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'CredentialsMissing' });
    expect(ready?.message).toContain(`not a platform API key (at most ${MAX_API_KEY_LENGTH} visible ASCII characters)`);
    // Just over the maximum, and a value with a control character: refused the same way.
    for (const value of ['k'.repeat(MAX_API_KEY_LENGTH + 1), 'abc\u0001def']) {
      r.kube.putSecret({ metadata: { name: CREDENTIALS, namespace: NAMESPACE }, data: { apiKey: Buffer.from(value).toString('base64') } });
      await r.reconcile();
      expect(made).toEqual([]);
    }
    expect(isApiKeyFormat('k'.repeat(MAX_API_KEY_LENGTH))).toBe(true);
    expect(() => new PlatformClient({ baseUrl: 'http://127.0.0.1:1/api/v2', apiKey: 'k'.repeat(MAX_API_KEY_LENGTH + 1) })).toThrow(TypeError);
  });

  it(`keeps at most ${MAX_CLIENTS} platform clients, the least recently used dropped first, each idle one after its time`, () => {
    let now = 0;
    let made = 0;
    const clients = new PlatformClients(
      () => {
        made += 1;
        return {} as KeyPlatform;
      },
      { now: () => now },
    );
    const first = clients.for('key-0');
    for (let i = 1; i < 3 * MAX_CLIENTS; i++) {
      clients.for(`key-${i}`);
      clients.for('key-0'); // in use all along: never the one dropped
    }
    expect(clients.size).toBe(MAX_CLIENTS);
    expect(clients.byId(first.credentialsId)).toBe(first);
    expect(made).toBe(3 * MAX_CLIENTS);
    expect(clients.byId(clients.for('key-1').credentialsId)).toBeDefined(); // dropped long ago: made again
    expect(made).toBe(3 * MAX_CLIENTS + 1);
    now += 11 * 60_000;
    clients.for('key-0');
    clients.evictIdle();
    expect(clients.size).toBe(1);
  });

  it(`keeps at most ${MAX_DRIFT_LISTS} drift lists with their failures, and none nobody asked for lately`, async () => {
    let now = 0;
    const cache = new DriftCache(60_000, () => now);
    const refused = {
      listScope: 'org:o-1',
      list: async () => {
        throw new Error('401');
      },
    } as unknown as KeyAdapter;
    // A credentials Secret rewritten with a new value each time: a new id, a failed list, each time.
    for (let i = 0; i < 2 * MAX_DRIFT_LISTS; i++) {
      await expect(cache.keyState(`cred-${i}`, refused, {} as KeyPlatform, 1, undefined)).rejects.toThrow('401');
    }
    expect(cache.size).toBe(MAX_DRIFT_LISTS);
    now += 2 * 60_000;
    cache.refreshDue();
    expect(cache.size).toBe(0);
  });

  it("caches a managed Secret's owner annotation only when it can name a resource", () => {
    const secret = (owner: string) =>
      trimSecret({
        metadata: {
          name: 's',
          namespace: 'n',
          uid: 'u',
          resourceVersion: '1',
          labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator' },
          annotations: { 'keys.neon.dev/owner': owner },
        },
      });
    expect(cachedOwner(secret('ApiKey/ci'))).toBe('ApiKey/ci');
    expect(cachedOwner(secret(`ProjectApiKey/${'a'.repeat(253)}`))).toBe(`ProjectApiKey/${'a'.repeat(253)}`);
    for (const owner of [`ApiKey/${'a'.repeat(254)}`, `ApiKey/${'a'.repeat(250_000)}`, 'Deployment/x', 'ApiKey/UPPER', 'ApiKey/']) {
      const cached = secret(owner);
      expect(cachedOwner(cached)).toBeUndefined();
      expect(JSON.stringify(cached).length).toBeLessThan(200);
    }
  });
});
