// A key that is live and in its Secret (src/operator/keys/observing/in-sync.ts), the drift check of it
// (observing/drift-check.ts checkRecordedKey) and what a reconcile does with each finding: repair by rotation,
// report an unverifiable key, refuse to touch a foreign Secret, mirror a project's operations.
import { describe, expect, it } from '@jest/globals';
import { DriftCache } from '../../../../src/operator/keys/observing/drift.ts';
import type { OperationsSnapshot } from '../../../../src/operator/keys/observing/operations-poller.ts';
import { ANNOTATION_CREATE_PENDING, FINALIZER, type KeyResource } from '../../../../src/operator/resources/schema.ts';
import { NAMESPACE, keyResource, platformError, rig } from '../fakes.ts';

const condition = (resource: KeyResource | undefined, type: string): string | undefined => {
  const c = resource?.status?.conditions?.find((x) => x.type === type);
  return c === undefined ? undefined : `${c.status} ${c.reason}`;
};

/** A clock the reconciler and the drift cache share, set well after the key was made. */
function later(): { now: () => number; advance(ms: number): void } {
  let t = Date.now();
  return {
    now: () => t,
    advance: (ms) => {
      t += ms;
    },
  };
}

describe('a key in sync', () => {
  it('is checked with one list call and left alone: Ready, no write', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    r.platform.calls.length = 0;
    r.kube.calls.length = 0;
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.calls).toEqual(['listOrg org-1']);
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([]);
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'Ready')).toBe('True Ready');
  });

  it('learns a missing status.keyName from the Secret only under its signature (it decides which intents fit the record)', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.settle();
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    const keyName = resource.status!.keyName!;
    // A status written before keyName existed; the tenant has edited the Secret's key-name annotation.
    const older = structuredClone(resource);
    delete older.status!.keyName;
    r.kube.putResource(older);
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    r.kube.putSecret({
      ...secret,
      metadata: { ...secret.metadata, annotations: { ...secret.metadata!.annotations, 'keys.neon.dev/key-name': 'ci-deployer-chosen00' } },
    });
    await r.reconcile();
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyName).toBeUndefined();
    // The operator's own annotations back: learned.
    r.kube.putSecret({ ...secret, metadata: { ...secret.metadata, resourceVersion: undefined } });
    await r.reconcile();
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyName).toBe(keyName);
  });

  it("a ProjectApiKey mirrors its project's operations into status, polled with its own issued key", async () => {
    const ensured: string[] = [];
    const snapshot: OperationsSnapshot = {
      operations: [{ id: 'op-1', action: 'create_branch', status: 'running', failuresCount: 0, updatedAt: '2026-11-23T00:00:00Z' }],
      settled: { status: 'False', reason: 'InProgress', message: 'create_branch running (created at 2026-11-22T20:59:57Z)' },
    };
    const r = rig({
      operations: {
        pollers: {
          ensure: (projectId, owner, apiKey) => {
            ensured.push(`${projectId} ${owner} ${apiKey === undefined ? '-' : apiKey.length}`);
          },
          release: () => undefined,
          snapshot: () => snapshot,
        },
      },
    });
    r.kube.putResource(keyResource('ProjectApiKey', 'pk'));
    await r.reconcile('ProjectApiKey', 'pk');
    expect(await r.reconcile('ProjectApiKey', 'pk')).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    // Ensured with its own issued key, each time: by the create (its operations go in the create's
    // status write, issue 14) and by the pass in sync (level-triggered; ensure() is idempotent).
    expect(ensured).toEqual([`p-1 ${NAMESPACE}/pk 64`, `p-1 ${NAMESPACE}/pk 64`]);
    const resource = r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!;
    expect((resource.status as { operations?: unknown }).operations).toEqual(snapshot.operations);
    expect(condition(resource, 'OperationsSettled')).toBe('False InProgress');
    // The status as the apiserver keeps it (keys sorted) is the same status: no write (issue 14:
    // a comparison by text rewrote every ProjectApiKey with operations on every drift pass).
    r.kube.calls.length = 0;
    await r.reconcile('ProjectApiKey', 'pk');
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([]);
  });
});

describe('drift', () => {
  it('a key revoked outside the operator is replaced: a new key, written, then the old one revoked', async () => {
    const clock = later();
    const r = rig({ now: clock.now, drift: new DriftCache(60_000, clock.now) });
    r.kube.putResource(keyResource());
    await r.reconcile();
    const old = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    r.platform.keys.length = 0; // revoked by a person
    clock.advance(10 * 60_000);
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    const now = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(now.status?.keyId).not.toBe(old);
    expect(r.platform.calls.slice(-1)).toEqual([`revokeOrg org-1 ${old}`]);
    expect(r.events.reasons()).toEqual(['Normal KeyIssued', 'Warning RevokedExternally', 'Normal KeyIssued']);
  });

  it('a deleted Secret is repaired by rotation, and the key it held is revoked', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const old = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    r.kube.secrets.delete(`${NAMESPACE}/ci`);
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.keys.map((k) => k.id)).toEqual([r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId]);
    expect(r.platform.keys[0]!.id).not.toBe(old);
    expect(r.kube.secret(NAMESPACE, 'ci')).toBeDefined();
    expect(r.events.reasons()).toEqual(['Normal KeyIssued', 'Warning SecretMissing', 'Normal KeyIssued']);
  });

  it('a repair whose revoke of the replaced key fails records it in status: stripping the intent loses nothing, a later pass revokes it, and so does the delete', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const old = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    r.kube.secrets.delete(`${NAMESPACE}/ci`);
    r.platform.failNext = { method: 'revoke', error: platformError('UNAVAILABLE', 503, 'retryable') };
    await r.reconcile();
    const repaired = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(repaired.status?.keyId).not.toBe(old);
    expect(repaired.status?.replacedKeys?.map((k) => k.keyId)).toEqual([old]);
    expect(r.events.reasons()).toContain('Warning PlatformUnavailable');
    // The intent is cleared by the operator, or stripped by whoever may edit the resource: status still names the key.
    expect(repaired.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.platform.keys.map((k) => k.id).sort()).toEqual([old, repaired.status!.keyId!].sort());
    // The next pass revokes it and drops it from status.
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toEqual([repaired.status!.keyId]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.replacedKeys).toBeUndefined();
  });

  it('a replaced key the platform still refuses to revoke is revoked with its resource', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const old = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    r.kube.secrets.delete(`${NAMESPACE}/ci`);
    r.platform.failNext = { method: 'revoke', error: platformError('UNAVAILABLE', 503, 'retryable') };
    await r.reconcile();
    const current = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    const issued = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, { ...issued, metadata: { ...issued.metadata, deletionTimestamp: new Date().toISOString() } });
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(
      r.platform.calls
        .filter((c) => c.startsWith('revokeOrg'))
        .slice(-2)
        .sort(),
    ).toEqual([`revokeOrg org-1 ${current}`, `revokeOrg org-1 ${old}`].sort());
    expect(r.platform.keys).toEqual([]);
  });

  it("a key an interrupted create left, its intent stripped, is found by the resource's tag in the drift list and revoked; a key of the same name base by hand, a fresh one and one older than the resource are not", async () => {
    const clock = later();
    const r = rig({ now: clock.now, drift: new DriftCache(60_000, clock.now) });
    r.platform.now = clock.now;
    const resource = keyResource();
    resource.metadata.creationTimestamp = new Date(clock.now()).toISOString();
    const tag = r.signer.attemptTag(resource.metadata.uid);
    // Made before the resource existed (the tag is a coincidence there): never its.
    clock.advance(-30_000);
    const before = (await r.platform.createOrganizationKey('org-1', { keyName: `ci-deployer-${tag}old` })).id;
    clock.advance(30_000);
    r.kube.putResource(resource);
    await r.reconcile();
    const recorded = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyName).toMatch(new RegExp(`^ci-deployer-${tag}[a-z0-9]{3}$`));
    // An attempt whose answer was lost and whose intent was then removed, and a person's key named like the resource's.
    const orphan = (await r.platform.createOrganizationKey('org-1', { keyName: `ci-deployer-${tag}zzz` })).id;
    const byHand = (await r.platform.createOrganizationKey('org-1', { keyName: 'ci-deployer-abcdefgh' })).id;
    // Within --pending-grace (the rig's 2 minutes) of its create it may still be on its way to a record: left alone.
    clock.advance(121_000);
    const late = (await r.platform.createOrganizationKey('org-1', { keyName: `ci-deployer-${tag}new` })).id;
    await r.settle();
    expect(r.platform.keys.map((k) => k.id).sort()).toEqual([before, recorded, byHand, late].sort());
    expect(r.events.reasons()).toContain('Warning CreateRecovered');
    expect(r.events.events.find((e) => e.startsWith('Warning CreateRecovered'))).toContain(`revoked key(s) ${orphan},`);
    // Past it, the late one too (the resource at rest is looked at again for it).
    clock.advance(121_000);
    await r.settle();
    expect(r.platform.keys.map((k) => k.id).sort()).toEqual([before, recorded, byHand].sort());
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId).toBe(recorded);
  });

  it('a resource deleted with no key but a key an interrupted create left: that key is revoked before the finalizer goes', async () => {
    const r = rig();
    const resource = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    resource.metadata.creationTimestamp = new Date(Date.now() - 60_000).toISOString();
    const orphan = (await r.platform.createOrganizationKey('org-1', { keyName: `ci-deployer-${r.signer.attemptTag(resource.metadata.uid)}abc` })).id;
    resource.metadata.deletionTimestamp = new Date().toISOString();
    r.kube.putResource(resource);
    r.platform.calls.length = 0;
    await r.settle();
    expect(r.platform.calls).toEqual(['listOrg org-1', `revokeOrg org-1 ${orphan}`]);
    expect(r.platform.keys).toEqual([]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
  });

  it('a key whose list the credentials may not read is reported unverifiable once that lasts, never revoked or replaced', async () => {
    const r = rig({ unverifiedAfterMs: 0 });
    r.kube.putResource(keyResource());
    await r.reconcile();
    const keyId = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    r.platform.failNext = { method: 'list', error: platformError('UNAUTHORIZED', 401) };
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(condition(resource, 'KeyIssued')).toBe('Unknown CredentialsRefused');
    expect(condition(resource, 'Ready')).toBe('Unknown CredentialsRefused');
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    expect(r.events.reasons()).toEqual(['Normal KeyIssued', 'Warning CredentialsRefused']);
  });

  it('before unverifiedAfterMs, a failed check changes nothing and is looked at again sooner', async () => {
    const clock = later();
    const r = rig({ unverifiedAfterMs: 30_000, now: clock.now, drift: new DriftCache(60_000, clock.now) });
    r.kube.putResource(keyResource());
    await r.reconcile();
    r.kube.calls.length = 0;
    r.platform.failNext = { method: 'list', error: platformError('UNAVAILABLE', 503, 'retryable') };
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 30_000 });
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([]);
  });

  it('a Secret of the target name that this resource does not control is never touched', async () => {
    const r = rig();
    r.kube.putSecret({ metadata: { name: 'ci', namespace: NAMESPACE }, data: { apiKey: Buffer.from('theirs').toString('base64') } });
    r.kube.putResource(keyResource());
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.calls).toEqual([]);
    expect(Buffer.from(r.kube.secret(NAMESPACE, 'ci')!.data!.apiKey!, 'base64').toString()).toBe('theirs');
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'SecretSynced')).toBe('False SecretConflict');
    expect(r.events.reasons()).toEqual(['Warning SecretConflict']);
  });

  it('an invalid spec is reported and looked at again each drift interval, without a platform call', async () => {
    const r = rig();
    r.kube.putResource(keyResource('ApiKey', 'ci', { spec: { scope: 'Team' } }));
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.calls).toEqual([]);
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'Ready')).toBe('False InvalidSpec');
  });

  it('a resource that is gone is done', async () => {
    const r = rig();
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.kube.calls).toEqual([`get ApiKey ${NAMESPACE}/ci`]);
  });
});
