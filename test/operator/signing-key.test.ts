// The signing key (src/operator/keys/issuing/signing.ts loadSigningKey) against the apiserver: made
// once in the operator's namespace, the same for every replica. What it signs:
// test/operator/keys/issuing/signing.test.ts.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { loadSigningKey } from '../../src/operator/keys/issuing/signing.ts';
import { controlPlane } from '../harness/index.ts';
import { createNamespace } from './support.ts';

describe('the signing key', () => {
  let core: CoreV1Api;
  let namespace: string;

  beforeAll(async () => {
    const cp = await controlPlane();
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'signing');
  });

  afterAll(async () => {
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('is made once: replicas starting together all get the same 32 bytes', async () => {
    const keys = await Promise.all(Array.from({ length: 4 }, () => loadSigningKey(core, namespace, 'signing-key')));
    for (const key of keys) expect(key.equals(keys[0]!)).toBe(true);
    expect(keys[0]!.length).toBe(32);
    expect((await loadSigningKey(core, namespace, 'signing-key')).equals(keys[0]!)).toBe(true);
    const secret = await core.readNamespacedSecret({ namespace, name: 'signing-key' });
    expect(secret.metadata?.labels?.['app.kubernetes.io/component']).toBe('signing-key');
  });

  it('refuses a Secret that does not hold a usable key, at once', async () => {
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'short-key' }, stringData: { key: 'too short' } } });
    await expect(loadSigningKey(core, namespace, 'short-key')).rejects.toThrow(/32-byte entry/);
  });
});
