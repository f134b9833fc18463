import { describe, expect, it } from '@jest/globals';
import { buildSecret, observeSecret, secretHash } from '../../src/operator/secret-writer.ts';
import type { ApiKey } from '../../src/operator/resources/schema.ts';

const resource: ApiKey = {
  apiVersion: 'keys.neon.dev/v1alpha1',
  kind: 'ApiKey',
  metadata: { name: 'ci', namespace: 'team-a', uid: 'uid-1' },
  spec: { scope: 'Personal', credentialsSecretRef: { name: 'c', key: 'apiKey' }, deletionPolicy: 'Revoke' },
};
const secretValue = 'a'.repeat(64);

describe('the Secret that receives a key', () => {
  it('carries the key id, attempt name, owner, label and the value only in data', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue });
    expect(secret.metadata?.labels).toEqual({ 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(secret.metadata?.annotations).toEqual({ 'keys.neon.dev/owner': 'ApiKey/ci', 'keys.neon.dev/key-id': '42', 'keys.neon.dev/key-name': 'ci-abcd1234' });
    expect(secret.metadata?.ownerReferences).toEqual([{ apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ApiKey', name: 'ci', uid: 'uid-1', controller: true, blockOwnerDeletion: false }]);
    expect(Buffer.from(secret.data?.token ?? '', 'base64').toString()).toBe(secretValue);
    expect(JSON.stringify({ ...secret, data: undefined })).not.toContain(secretValue);
  });

  it('is observed as owned, with its key id, name and an HMAC of the value', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue });
    expect(observeSecret(resource, secret, 'token')).toEqual({ owned: true, keyId: 42, keyName: 'ci-abcd1234', hash: secretHash(resource, secretValue) });
    expect(observeSecret(resource, secret, 'other')).toEqual({ owned: true, keyId: 42, keyName: 'ci-abcd1234' });
    expect(observeSecret(resource, undefined, 'token')).toBeUndefined();
  });

  it('is foreign without the label, or when it belongs to another resource', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'n', secret: secretValue });
    expect(observeSecret(resource, { ...secret, metadata: { ...secret.metadata, labels: {} } }, 'token')?.owned).toBe(false);
    expect(observeSecret({ ...resource, metadata: { ...resource.metadata, name: 'other' } }, secret, 'token')?.owned).toBe(false);
    expect(observeSecret(resource, { metadata: { annotations: { 'keys.neon.dev/key-id': 'x' } } }, 'token')).toEqual({ owned: false });
  });

  it('hashes with an HMAC that reveals nothing and survives a restore into a new uid', () => {
    const hash = secretHash(resource, secretValue);
    expect(hash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(hash).not.toContain(secretValue);
    expect(secretHash({ metadata: { ...resource.metadata, uid: 'uid-2' } }, secretValue)).toBe(hash);
    expect(secretHash({ metadata: { ...resource.metadata, name: 'x' } }, secretValue)).not.toBe(hash);
  });
});
