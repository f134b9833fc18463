// Deletion of a key resource (src/operator/keys/deletion.ts) against the in-memory fakes: revoke
// then release, retain, release without revoking, and a platform that refuses the revoke.
import { describe, expect, it } from '@jest/globals';
import { ANNOTATION_RELEASE_WITHOUT_REVOKE, FINALIZER, type KeyResource } from '../../../src/operator/resources/schema.ts';
import type { V1Secret } from '@kubernetes/client-node';
import { ADMIN_KEY, CREDENTIALS, NAMESPACE, keyResource, platformError, rig, type Rig } from './fakes.ts';

/** A resource with a live key and its Secret, then marked for deletion (the finalizer holds it). */
async function issuedThenDeleted(
  spec: Record<string, unknown> = {},
  annotations: Record<string, string> = {},
  options: Parameters<typeof rig>[0] = {},
): Promise<{ r: Rig; keyId: number }> {
  const r = rig(options);
  r.kube.putResource(keyResource('ApiKey', 'ci', { spec }));
  expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
  const issued = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
  const deleting: KeyResource = {
    ...issued,
    metadata: { ...issued.metadata, deletionTimestamp: new Date().toISOString(), annotations: { ...issued.metadata.annotations, ...annotations } },
  };
  r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, deleting);
  r.platform.calls.length = 0;
  r.kube.calls.length = 0;
  r.events.events.length = 0;
  return { r, keyId: issued.status!.keyId! };
}

describe('deletion', () => {
  it('revokes the key, deletes the Secret it controls, then drops the finalizer', async () => {
    const { r, keyId } = await issuedThenDeleted();
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    // The list first: keys an interrupted create of this resource may have left (none here).
    expect(r.platform.calls).toEqual(['listOrg org-1', `revokeOrg org-1 ${keyId}`]);
    expect(r.platform.keys).toEqual([]);
    expect(r.kube.secret(NAMESPACE, 'ci')).toBeUndefined();
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([`delete Secret ${NAMESPACE}/ci`, `update ApiKey/${NAMESPACE}/ci`]);
    expect(r.events.reasons()).toEqual(['Normal KeyRevoked']);
  });

  it('keeps the resource (and its finalizer) while the platform refuses the revoke, saying why', async () => {
    const { r, keyId } = await issuedThenDeleted();
    r.platform.failNext = { method: 'revoke', error: platformError('UNAVAILABLE', 503, 'retryable') };
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    const ready = resource.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'Deleting' });
    expect(ready?.message).toContain(`PlatformUnavailable: revoking key ${keyId}`);
    expect(ready?.message).toContain(ANNOTATION_RELEASE_WITHOUT_REVOKE);
    expect(r.kube.secret(NAMESPACE, 'ci')).toBeDefined();
    expect(r.events.reasons()).toEqual(['Warning PlatformUnavailable']);
    // The platform back: revoked and released.
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
  });

  it('a key already gone from the platform is released as revoked', async () => {
    const { r } = await issuedThenDeleted();
    r.platform.keys.length = 0;
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
    expect(r.events.reasons()).toEqual(['Normal KeyRevoked']);
  });

  it('with deletionPolicy Retain keeps the key and hands the Secret over to no one', async () => {
    const { r, keyId } = await issuedThenDeleted({ deletionPolicy: 'Retain' });
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.platform.calls).toEqual(['listOrg org-1']);
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    expect(secret.metadata?.ownerReferences).toEqual([]);
    expect(secret.metadata?.annotations?.['keys.neon.dev/owner']).toBeUndefined();
    expect(secret.metadata?.annotations?.['keys.neon.dev/retained-from']).toBe('ApiKey/ci');
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
    expect(r.events.reasons()).toEqual(['Normal KeyRetained']);
  });

  it('releases without revoking when a person asks for it, and says so', async () => {
    const { r, keyId } = await issuedThenDeleted({}, { [ANNOTATION_RELEASE_WITHOUT_REVOKE]: 'true' });
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.platform.calls).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
    expect(r.events.reasons()).toEqual(['Warning ReleasedWithoutRevoke']);
  });

  it('never revokes with credentials a lagging cache still holds: the deletion reads them by name, and blocks once they are gone', async () => {
    // The cache of credentials as a lagging informer leaves it: the Secret as it was before its delete.
    const kept: V1Secret = { metadata: { name: CREDENTIALS, namespace: NAMESPACE }, data: { apiKey: Buffer.from(ADMIN_KEY).toString('base64') } };
    const cacheReads: string[] = [];
    const { r, keyId } = await issuedThenDeleted(
      {},
      {},
      {
        credentialsReads: {
          read: async (namespace, name) => {
            cacheReads.push(`${namespace}/${name}`);
            return kept;
          },
        },
      },
    );
    expect(cacheReads).toEqual([`${NAMESPACE}/${CREDENTIALS}`]);
    r.kube.secrets.delete(`${NAMESPACE}/${CREDENTIALS}`);
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    expect(r.platform.calls).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    const ready = r.kube.resource('ApiKey', NAMESPACE, 'ci')?.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'Deleting' });
    expect(ready?.message).toContain('CredentialsMissing');
    expect(cacheReads).toHaveLength(1);
  });

  it('a resource that never got a key is released after one look at its list for keys an interrupted create left (none)', async () => {
    const r = rig();
    const resource = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    resource.metadata.deletionTimestamp = new Date().toISOString();
    r.kube.putResource(resource);
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.platform.calls).toEqual(['listOrg org-1']);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
    expect(r.events.reasons()).toEqual([]);
  });
});
