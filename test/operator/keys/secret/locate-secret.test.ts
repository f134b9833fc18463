// spec.secret.immutable: which Secret holds the key (secret-locate.ts locateSecret) is found from a
// LIST of metadata only; only the Secrets this resource controls are read, by name, and the one
// believed is the one verified on that read. The port is the in-memory one (fakes.ts), which answers
// the metadata LIST with the real port's projection (kube-writes.ts ownedSecretMetadata).
import { describe, expect, it } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { ownedSecretMetadata } from '../../../../src/operator/keys/kube-writes.ts';
import { buildSecret } from '../../../../src/operator/keys/secret/secret-writer.ts';
import { MAX_LOCATE_READS, locateSecret } from '../../../../src/operator/keys/secret/secret-locate.ts';
import { Signer } from '../../../../src/operator/keys/issuing/signing.ts';
import { FINALIZER, type KeyResource } from '../../../../src/operator/resources/schema.ts';
import { FakeKube, NAMESPACE, keyResource } from '../fakes.ts';

const signer = new Signer(Buffer.alloc(32, 7));
const big = Buffer.alloc(64 * 1024, 1).toString('base64');

function immutableKey(): KeyResource {
  return keyResource('ApiKey', 'ci', { spec: { secret: { name: 'ci-neon', immutable: true } }, finalizers: [FINALIZER] });
}

/** A Secret the operator wrote for `resource`, holding key `id`. */
function written(resource: KeyResource, id: number, name = `ci-neon-${id}`): V1Secret {
  return buildSecret(resource, name, 'apiKey', { id, name: `ci-deployer-${id}`, secret: `secret-${id}-${'x'.repeat(40)}` }, signer, undefined, {
    template: undefined,
    organizationId: undefined,
    projectId: undefined,
    platformUrl: undefined,
    immutable: true,
  });
}

/** What a tenant can make: the managed-by label, this resource's uid as controller, the operator's annotations copied, no valid signature. */
function decoy(resource: KeyResource, id: number, name: string, keyName = `ci-deployer-${id}`): V1Secret {
  const real = written(resource, id, name);
  return {
    ...real,
    metadata: { ...real.metadata, annotations: { ...real.metadata!.annotations, 'keys.neon.dev/key-name': keyName, 'keys.neon.dev/signature': 'forged' } },
    data: { apiKey: big },
  };
}

describe('locating the Secret of an immutable key', () => {
  it('lists metadata only and reads by name only the Secrets this resource controls, newest verified key first', async () => {
    const kube = new FakeKube();
    const resource = immutableKey();
    kube.putSecret(written(resource, 3));
    kube.putSecret(written(resource, 5));
    // Not this resource's: another uid as controller, or no owner reference (bulk data never read).
    const other = keyResource('ApiKey', 'other');
    for (let i = 0; i < 20; i++) kube.putSecret({ ...written(other, 100 + i, `other-${i}`), data: { apiKey: big } });
    kube.putSecret({
      metadata: { name: 'plain', namespace: NAMESPACE, labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator' } },
      data: { apiKey: big },
    });
    // A tenant's decoy claiming a newer key, under this resource's uid.
    kube.putSecret(decoy(resource, 9, 'decoy-9'));
    const found = await locateSecret({ kube, signer }, resource, resource.spec as never, 'apiKey', undefined);
    expect(found.secretName).toBe('ci-neon-5');
    expect(kube.calls).toEqual([
      `list Secret ${NAMESPACE} app.kubernetes.io/managed-by=neon-key-operator`,
      `get Secret ${NAMESPACE}/decoy-9`,
      `get Secret ${NAMESPACE}/ci-neon-5`,
    ]);
  });

  it("finds a pending attempt's Secret by its signed key name, never a decoy carrying that name", async () => {
    const kube = new FakeKube();
    const resource = immutableKey();
    kube.putSecret(written(resource, 3));
    kube.putSecret(decoy(resource, 12, 'decoy-12', 'ci-deployer-3'));
    const found = await locateSecret({ kube, signer }, resource, resource.spec as never, 'apiKey', 'ci-deployer-3');
    expect(found.secretName).toBe('ci-neon-3');
    expect(kube.calls.filter((c) => c.startsWith('get'))).toEqual([`get Secret ${NAMESPACE}/decoy-12`, `get Secret ${NAMESPACE}/ci-neon-3`]);
  });

  it(`reads at most ${MAX_LOCATE_READS} candidates however many decoys a tenant makes`, async () => {
    const kube = new FakeKube();
    const resource = immutableKey();
    kube.putSecret(written(resource, 1));
    for (let i = 0; i < 3 * MAX_LOCATE_READS; i++) kube.putSecret(decoy(resource, 1_000 + i, `decoy-${i}`));
    const found = await locateSecret({ kube, signer }, resource, resource.spec as never, 'apiKey', undefined);
    // The decoys outrank the real key and use up the reads: the tenant hides its own key from itself, and no more.
    expect(found.secret).toBeUndefined();
    expect(kube.calls.filter((c) => c.startsWith('get'))).toHaveLength(MAX_LOCATE_READS);
  });

  it('keeps of a listed Secret only its identity, controller and the annotations asked for, each of bounded length', () => {
    const resource = immutableKey();
    const secret = written(resource, 3);
    const listed = {
      apiVersion: 'meta.k8s.io/v1',
      kind: 'PartialObjectMetadata',
      metadata: {
        ...secret.metadata,
        annotations: { ...secret.metadata!.annotations, 'keys.neon.dev/key-name': 'n'.repeat(600), 'tenant/huge': 'h'.repeat(200_000) },
        managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:data': { 'f:x': {} } } }],
      },
    };
    const kept = ownedSecretMetadata(listed, resource.metadata.uid, ['keys.neon.dev/key-id', 'keys.neon.dev/key-name']);
    expect(kept?.metadata?.annotations).toEqual({ 'keys.neon.dev/key-id': '3' });
    expect(kept?.metadata?.ownerReferences).toEqual([expect.objectContaining({ uid: resource.metadata.uid, controller: true })]);
    expect(kept?.metadata).not.toHaveProperty('managedFields');
    expect(JSON.stringify(kept).length).toBeLessThan(1_000);
    expect(ownedSecretMetadata(listed, 'another-uid', ['keys.neon.dev/key-id'])).toBeUndefined();
  });
});
