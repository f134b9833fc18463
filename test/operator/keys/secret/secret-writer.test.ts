import { describe, expect, it } from '@jest/globals';
import { buildSecret, observeSecret, secretHash } from '../../../../src/operator/keys/secret/secret-writer.ts';
import type { ApiKey } from '../../../../src/operator/resources/schema.ts';
import { Signer } from '../../../../src/operator/keys/issuing/signing.ts';

const signer = new Signer(Buffer.alloc(32, 7));

const resource: ApiKey = {
  apiVersion: 'keys.neon.dev/v1alpha1',
  kind: 'ApiKey',
  metadata: { name: 'ci', namespace: 'team-a', uid: 'uid-1' },
  spec: { scope: 'Personal', credentialsSecretRef: { name: 'c', key: 'apiKey' }, deletionPolicy: 'Revoke' },
};
const secretValue = 'a'.repeat(64);

describe('the Secret that receives a key', () => {
  it('carries the key id, attempt name, their signature (over the value too), owner, label and the value only in data', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    expect(secret.metadata?.labels).toEqual({ 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(secret.metadata?.annotations).toEqual({
      'keys.neon.dev/owner': 'ApiKey/ci',
      'keys.neon.dev/key-id': '42',
      'keys.neon.dev/key-name': 'ci-abcd1234',
      'keys.neon.dev/signature': signer.sign('secret', ['uid-1', 42, 'ci-abcd1234', 'v2', secretHash(resource, secretValue), undefined]),
    });
    // A key that replaced another names it, under the signature.
    const replacing = buildSecret(resource, 'ci-neon', 'token', { id: 43, name: 'ci-efgh5678', secret: secretValue, replaces: 42 }, signer, secret);
    expect(replacing.metadata?.annotations).toMatchObject({
      'keys.neon.dev/replaces': '42',
      'keys.neon.dev/signature': signer.sign('secret', ['uid-1', 43, 'ci-efgh5678', 'v2', secretHash(resource, secretValue), 42]),
    });
    // and the next key written over it, replacing nothing, does not inherit it
    expect(
      buildSecret(resource, 'ci-neon', 'token', { id: 44, name: 'ci-ijkl9012', secret: secretValue }, signer, replacing).metadata?.annotations?.[
        'keys.neon.dev/replaces'
      ],
    ).toBeUndefined();
    expect(secret.metadata?.ownerReferences).toEqual([
      { apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ApiKey', name: 'ci', uid: 'uid-1', controller: true, blockOwnerDeletion: false },
    ]);
    expect(Buffer.from(secret.data?.token ?? '', 'base64').toString()).toBe(secretValue);
    expect(JSON.stringify({ ...secret, data: undefined })).not.toContain(secretValue);
  });

  it('is observed as owned and verified, with its key id, name and an HMAC of the value', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    expect(observeSecret(resource, secret, 'token', signer)).toEqual({
      owned: true,
      verified: true,
      keyId: 42,
      keyName: 'ci-abcd1234',
      hash: secretHash(resource, secretValue),
    });
    // Without the value its signature covers, nothing verifies (spec.secret.key pointing elsewhere, the entry emptied).
    expect(observeSecret(resource, secret, 'other', signer)).toEqual({ owned: true, verified: false, keyId: 42, keyName: 'ci-abcd1234' });
    const replacing = buildSecret(resource, 'ci-neon', 'token', { id: 43, name: 'ci-efgh5678', secret: secretValue, replaces: 42 }, signer);
    expect(observeSecret(resource, replacing, 'token', signer)).toEqual({
      owned: true,
      verified: true,
      keyId: 43,
      keyName: 'ci-efgh5678',
      replaces: 42,
      hash: secretHash(resource, secretValue),
    });
    expect(observeSecret(resource, undefined, 'token', signer)).toBeUndefined();
  });

  it('is owned only through a controller owner reference with the resource uid, never a label or annotation', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'n', secret: secretValue }, signer);
    // label and owner annotation in place, but no owner reference: a Secret anyone could have made
    expect(observeSecret(resource, { ...secret, metadata: { ...secret.metadata, ownerReferences: [] } }, 'token', signer)).toMatchObject({
      owned: false,
      verified: false,
    });
    // the same name in another incarnation of the resource (another uid)
    expect(observeSecret({ ...resource, metadata: { ...resource.metadata, uid: 'uid-2' } }, secret, 'token', signer)).toMatchObject({
      owned: false,
      verified: false,
    });
    // an owner reference that is not the controller
    const notController = {
      ...secret,
      metadata: { ...secret.metadata, ownerReferences: secret.metadata!.ownerReferences!.map((r) => ({ ...r, controller: false })) },
    };
    expect(observeSecret(resource, notController, 'token', signer)?.owned).toBe(false);
    // without the label it is still owned (the label only routes the informer)
    expect(observeSecret(resource, { ...secret, metadata: { ...secret.metadata, labels: {} } }, 'token', signer)?.owned).toBe(true);
    expect(observeSecret(resource, { metadata: { annotations: { 'keys.neon.dev/key-id': 'x' } } }, 'token', signer)).toEqual({ owned: false, verified: false });
  });

  it('believes a key id only under the signature: an edited id or name, another signer or resource fails', () => {
    const secret = buildSecret(resource, 'ci-neon', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    const annotate = (over: Record<string, string>) => ({
      ...secret,
      metadata: { ...secret.metadata, annotations: { ...secret.metadata!.annotations, ...over } },
    });
    expect(observeSecret(resource, annotate({ 'keys.neon.dev/key-id': '43' }), 'token', signer)).toMatchObject({ owned: true, verified: false, keyId: 43 });
    expect(observeSecret(resource, annotate({ 'keys.neon.dev/key-name': 'victim-abcd1234' }), 'token', signer)?.verified).toBe(false);
    expect(observeSecret(resource, annotate({ 'keys.neon.dev/signature': 'forged' }), 'token', signer)?.verified).toBe(false);
    expect(observeSecret(resource, secret, 'token', new Signer(Buffer.alloc(32, 8)))?.verified).toBe(false);
    // a tenant copies a signed Secret to its own resource, owner reference rewritten to its uid
    const other = { ...resource, metadata: { ...resource.metadata, uid: 'uid-attacker' } };
    const copied = { ...secret, metadata: { ...secret.metadata, ownerReferences: [{ ...secret.metadata!.ownerReferences![0]!, uid: 'uid-attacker' }] } };
    expect(observeSecret(other, copied, 'token', signer)).toMatchObject({ owned: true, verified: false });
  });

  it("does not verify a key's signed annotations replayed onto a Secret holding another key (issue 24, attack 2)", () => {
    const first = buildSecret(resource, 'ci', 'token', { id: 1, name: 'ci-one00000', secret: 'b'.repeat(64) }, signer);
    const second = buildSecret(resource, 'ci', 'token', { id: 2, name: 'ci-two00000', secret: secretValue, replaces: 1 }, signer, first);
    expect(observeSecret(resource, second, 'token', signer)?.verified).toBe(true);
    const annotations = { ...second.metadata!.annotations };
    delete annotations['keys.neon.dev/replaces'];
    for (const name of ['keys.neon.dev/key-id', 'keys.neon.dev/key-name', 'keys.neon.dev/signature']) annotations[name] = first.metadata!.annotations![name]!;
    const replayed = { ...second, metadata: { ...second.metadata, annotations } };
    expect(observeSecret(resource, replayed, 'token', signer)).toMatchObject({ owned: true, verified: false, keyId: 1, keyName: 'ci-one00000' });
    expect(observeSecret(resource, replayed, 'token', signer)?.legacy).toBeUndefined();
    // Nor an edited replaced key, nor a replaced key added to a Secret signed without one.
    const edit = (secret: typeof first, over: Record<string, string>) => ({
      ...secret,
      metadata: { ...secret.metadata, annotations: { ...secret.metadata!.annotations, ...over } },
    });
    expect(observeSecret(resource, edit(second, { 'keys.neon.dev/replaces': '7' }), 'token', signer)?.verified).toBe(false);
    expect(observeSecret(resource, edit(second, { 'keys.neon.dev/replaces': 'x' }), 'token', signer)).toMatchObject({ verified: false });
    expect(observeSecret(resource, edit(first, { 'keys.neon.dev/replaces': '1' }), 'token', signer)?.verified).toBe(false);
    // Nor the same annotations on an edited value.
    expect(observeSecret(resource, { ...second, data: { token: Buffer.from('c'.repeat(64)).toString('base64') } }, 'token', signer)?.verified).toBe(false);
  });

  it('reads a signature of the format before issue 24 as legacy (not verified): observe.ts decides whether to believe it', () => {
    const current = buildSecret(resource, 'ci', 'token', { id: 42, name: 'ci-abcd1234', secret: secretValue }, signer);
    const old = {
      ...current,
      metadata: {
        ...current.metadata,
        annotations: { ...current.metadata!.annotations, 'keys.neon.dev/signature': signer.sign('secret', ['uid-1', 42, 'ci-abcd1234']) },
      },
    };
    expect(observeSecret(resource, old, 'token', signer)).toEqual({
      owned: true,
      verified: false,
      legacy: true,
      keyId: 42,
      keyName: 'ci-abcd1234',
      hash: secretHash(resource, secretValue),
    });
    // of another resource, or not owned: neither
    expect(observeSecret({ ...resource, metadata: { ...resource.metadata, uid: 'uid-2' } }, old, 'token', signer)?.legacy).toBeUndefined();
    expect(observeSecret(resource, { ...old, metadata: { ...old.metadata, ownerReferences: [] } }, 'token', signer)?.legacy).toBeUndefined();
    // with a replaced key (which the old format never wrote): neither
    expect(
      observeSecret(
        resource,
        { ...old, metadata: { ...old.metadata, annotations: { ...old.metadata.annotations, 'keys.neon.dev/replaces': '41' } } },
        'token',
        signer,
      ),
    ).toMatchObject({ verified: false });
    expect(
      observeSecret(
        resource,
        { ...old, metadata: { ...old.metadata, annotations: { ...old.metadata.annotations, 'keys.neon.dev/replaces': '41' } } },
        'token',
        signer,
      )?.legacy,
    ).toBeUndefined();
  });

  it('hashes with an HMAC that reveals nothing and survives a restore into a new uid', () => {
    const hash = secretHash(resource, secretValue);
    expect(hash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(hash).not.toContain(secretValue);
    expect(secretHash({ metadata: { ...resource.metadata, uid: 'uid-2' } }, secretValue)).toBe(hash);
    expect(secretHash({ metadata: { ...resource.metadata, name: 'x' } }, secretValue)).not.toBe(hash);
  });
});
