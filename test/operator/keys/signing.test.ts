// The signing key (signing.ts): made once in the operator's namespace, the same for every replica,
// and what it signs verifies only for the same fields, purpose and key.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { Signer, loadSigningKey } from '../../../src/operator/keys/issuing/signing.ts';
import { controlPlane } from '../../harness/index.ts';
import { createNamespace } from '../support.ts';

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

  it('signs so that only the same purpose, fields and key verify', () => {
    const signer = new Signer(Buffer.alloc(32, 1));
    const sig = signer.sign('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7]);
    expect(signer.verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(true);
    expect(signer.verify('secret', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-2', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 8], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', undefined], sig)).toBe(false);
    expect(new Signer(Buffer.alloc(32, 2)).verify('intent', ['uid-1', 'name-abcd1234', '2026-01-01T00:00:00Z', 'holder', 7], sig)).toBe(false);
    expect(signer.verify('intent', ['uid-1'], undefined)).toBe(false);
    expect(signer.verify('intent', ['uid-1'], '')).toBe(false);
    // A field cannot smuggle the separator to forge another split of the same text.
    expect(signer.sign('intent', ['a\nb', 'c'])).not.toBe(signer.sign('intent', ['a', 'b\nc']));
    expect(() => new Signer(Buffer.alloc(16))).toThrow(/32 bytes/);
    expect(signer.fingerprint('k1')).not.toBe(signer.fingerprint('k2'));
    expect(signer.fingerprint('k1')).not.toContain('k1');
  });
});
