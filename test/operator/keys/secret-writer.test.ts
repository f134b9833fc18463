import { describe, expect, it } from '@jest/globals';
import { buildSecret, observeSecret, secretHash } from '../../../src/operator/keys/secret-writer.ts';
import type { ApiKey } from '../../../src/operator/resources/schema.ts';
import { Signer } from '../../../src/operator/keys/signing.ts';

const signer = new Signer(Buffer.alloc(32, 7));

const resource: ApiKey = {
  apiVersion: 'keys.neon.dev/v1alpha1',
  kind: 'ApiKey',
  metadata: { name: 'ci', namespace: 'team-a', uid: 'uid-1' },
  spec: { scope: 'Personal', credentialsSecretRef: { name: 'c', key: 'apiKey' }, deletionPolicy: 'Revoke' },
};
const secretValue = 'a'.repeat(64);

describe('the Secret that receives a key', () => {
  it('carries the key id, attempt name, their signature, owner, label and the value only in data', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    expect(secret.metadata?.labels).toEqual({ 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(secret.metadata?.annotations).toEqual({
      'keys.neon.dev/owner': 'ApiKey/ci', 'keys.neon.dev/key-id': '42', 'keys.neon.dev/key-name': 'ci-abcd1234',
      'keys.neon.dev/signature': signer.sign('secret', ['uid-1', 42, 'ci-abcd1234']),
    });
    expect(secret.metadata?.ownerReferences).toEqual([{ apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ApiKey', name: 'ci', uid: 'uid-1', controller: true, blockOwnerDeletion: false }]);
    expect(Buffer.from(secret.data?.token ?? '', 'base64').toString()).toBe(secretValue);
    expect(JSON.stringify({ ...secret, data: undefined })).not.toContain(secretValue);
  });

  it('is observed as owned and verified, with its key id, name and an HMAC of the value', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    expect(observeSecret(resource, secret, 'token', signer)).toEqual({ owned: true, verified: true, keyId: 42, keyName: 'ci-abcd1234', hash: secretHash(resource, secretValue) });
    expect(observeSecret(resource, secret, 'other', signer)).toEqual({ owned: true, verified: true, keyId: 42, keyName: 'ci-abcd1234' });
    expect(observeSecret(resource, undefined, 'token', signer)).toBeUndefined();
  });

  it('is owned only through a controller owner reference with the resource uid, never a label or annotation', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'n', secret: secretValue }, signer);
    // label and owner annotation in place, but no owner reference: a Secret anyone could have made
    expect(observeSecret(resource, { ...secret, metadata: { ...secret.metadata, ownerReferences: [] } }, 'token', signer)).toMatchObject({ owned: false, verified: false });
    // the same name in another incarnation of the resource (another uid)
    expect(observeSecret({ ...resource, metadata: { ...resource.metadata, uid: 'uid-2' } }, secret, 'token', signer)).toMatchObject({ owned: false, verified: false });
    // an owner reference that is not the controller
    const notController = { ...secret, metadata: { ...secret.metadata, ownerReferences: secret.metadata!.ownerReferences!.map((r) => ({ ...r, controller: false })) } };
    expect(observeSecret(resource, notController, 'token', signer)?.owned).toBe(false);
    // without the label it is still owned (the label only routes the informer)
    expect(observeSecret(resource, { ...secret, metadata: { ...secret.metadata, labels: {} } }, 'token', signer)?.owned).toBe(true);
    expect(observeSecret(resource, { metadata: { annotations: { 'keys.neon.dev/key-id': 'x' } } }, 'token', signer)).toEqual({ owned: false, verified: false });
  });

  it('believes a key id only under the signature: an edited id or name, another signer or resource fails', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    const annotate = (over: Record<string, string>) => ({ ...secret, metadata: { ...secret.metadata, annotations: { ...secret.metadata!.annotations, ...over } } });
    expect(observeSecret(resource, annotate({ 'keys.neon.dev/key-id': '43' }), 'token', signer)).toMatchObject({ owned: true, verified: false, keyId: 43 });
    expect(observeSecret(resource, annotate({ 'keys.neon.dev/key-name': 'victim-abcd1234' }), 'token', signer)?.verified).toBe(false);
    expect(observeSecret(resource, annotate({ 'keys.neon.dev/signature': 'forged' }), 'token', signer)?.verified).toBe(false);
    expect(observeSecret(resource, secret, 'token', new Signer(Buffer.alloc(32, 8)))?.verified).toBe(false);
    // a tenant copies a signed Secret to its own resource, owner reference rewritten to its uid
    const other = { ...resource, metadata: { ...resource.metadata, uid: 'uid-attacker' } };
    const copied = { ...secret, metadata: { ...secret.metadata, ownerReferences: [{ ...secret.metadata!.ownerReferences![0]!, uid: 'uid-attacker' }] } };
    expect(observeSecret(other, copied, 'token', signer)).toMatchObject({ owned: true, verified: false });
  });

  it('hashes with an HMAC that reveals nothing and survives a restore into a new uid', () => {
    const hash = secretHash(resource, secretValue);
    expect(hash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(hash).not.toContain(secretValue);
    expect(secretHash({ metadata: { ...resource.metadata, uid: 'uid-2' } }, secretValue)).toBe(hash);
    expect(secretHash({ metadata: { ...resource.metadata, name: 'x' } }, secretValue)).not.toBe(hash);
  });
});
