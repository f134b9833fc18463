// The create protocol (src/operator/keys/create-protocol.ts, docs/design.md sections 3.1 and 3.2) against the
// in-memory Kubernetes and platform of fakes.ts: the calls each step makes, in order, and what a
// crash, an ambiguous answer, a refusal or a wrong answer leaves behind.
import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { pino } from 'pino';
import { encodeIntent } from '../../../src/operator/keys/issuing/create-intent.ts';
import { DriftCache } from '../../../src/operator/keys/observing/drift.ts';
import { Signer } from '../../../src/operator/keys/issuing/signing.ts';
import { buildSecret } from '../../../src/operator/keys/secret/secret-writer.ts';
import { ANNOTATION_CREATE_PENDING, FINALIZER, type KeyResource } from '../../../src/operator/resources/schema.ts';
import { ADMIN_KEY, CREDENTIALS, NAMESPACE, keyResource, platformError, rig } from './fakes.ts';

const condition = (resource: KeyResource | undefined, type: string): string | undefined => {
  const c = resource?.status?.conditions?.find((x) => x.type === type);
  return c === undefined ? undefined : `${c.status} ${c.reason}`;
};

describe('the create protocol', () => {
  it('writes the finalizer with the intent, creates the key, writes the Secret, records status (which fulfils the intent): in that order, in one reconcile', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    const result = await r.reconcile();
    expect(result).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    const key = r.platform.keys[0]!;
    // The credentials' kind asked beside their organizations (create-head-start.ts), the create after both:
    // nothing enters the organization's line or limiter before the organizations' answer (organization-membership.ts).
    expect(r.platform.calls).toEqual(['getAuth', 'listMyOrganizations', `createOrg org-1 ${key.name}`]);
    expect(key.name).toMatch(/^ci-deployer-[a-z0-9]{8}$/);
    // Three apiserver writes and the event (issue 14): the finalizer with the intent, the Secret,
    // the status that records the key and so fulfils the intent (no write to clear it).
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([
      `update ApiKey/${NAMESPACE}/ci`, // finalizer + intent
      `create Secret ${NAMESPACE}/ci`,
      `put status ApiKey/${NAMESPACE}/ci`,
    ]);
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(resource.metadata.finalizers).toEqual([FINALIZER]);
    expect(JSON.parse(resource.metadata.annotations?.[ANNOTATION_CREATE_PENDING] ?? '{}')).toMatchObject({ attempt: key.name });
    expect(resource.status).toMatchObject({ keyId: key.id, keyName: key.name, secretName: 'ci', secretHash: expect.stringMatching(/^hmac-sha256:/) });
    expect(condition(resource, 'Ready')).toBe('True Ready');
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    expect(Buffer.from(secret.data!.apiKey!, 'base64').toString()).toBe(key.key);
    expect(secret.metadata?.ownerReferences).toEqual([expect.objectContaining({ uid: resource.metadata.uid, controller: true })]);
    expect(secret.metadata?.annotations?.['keys.neon.dev/key-id']).toBe(String(key.id));
    expect(r.events.reasons()).toEqual(['Normal KeyIssued']);
    // Every write's version is known, so none of their watch events wakes the key again.
    expect(r.ownWrites.consume(`ApiKey/${NAMESPACE}/ci`, resource.metadata.resourceVersion)).toBe(true);
    expect(r.ownWrites.consume(`Secret/${NAMESPACE}/ci`, secret.metadata?.resourceVersion)).toBe(true);
  });

  it('a ProjectApiKey is created with its project and scoped to it', async () => {
    const r = rig();
    r.kube.putResource(keyResource('ProjectApiKey', 'pk'));
    expect(await r.reconcile('ProjectApiKey', 'pk')).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.calls).toEqual(['getAuth', 'listMyOrganizations', `createOrg org-1 ${r.platform.keys[0]!.name} p-1`]);
  });

  it("a ProjectApiKey's status is written once, with its project's operations (polled already, or by the first poll its key starts)", async () => {
    for (const firstPollMs of [undefined, 30]) {
      const snapshot = {
        operations: [{ id: 'op-1', action: 'create_branch', status: 'finished', failuresCount: 0, updatedAt: '2026-11-23T00:00:00Z' }],
        settled: { status: 'True' as const, reason: 'AllTerminal' as const, message: 'all 1 recent operations are terminal' },
      };
      let ensuredAt: number | undefined;
      const pollers = {
        ensure: (): void => {
          ensuredAt ??= performance.now();
        },
        release: (): void => undefined,
        // undefined: the project was polled before this key; a number: its first poll ends that long after ensure().
        snapshot: () => (firstPollMs === undefined || (ensuredAt !== undefined && performance.now() - ensuredAt >= firstPollMs) ? snapshot : undefined),
      };
      const r = rig({ operations: { pollers } });
      r.kube.putResource(keyResource('ProjectApiKey', 'pk'));
      expect(await r.reconcile('ProjectApiKey', 'pk')).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
      expect(r.kube.calls.filter((c) => c.startsWith('put status'))).toEqual([`put status ProjectApiKey/${NAMESPACE}/pk`]);
      const resource = r.kube.resource('ProjectApiKey', NAMESPACE, 'pk')!;
      expect(condition(resource, 'OperationsSettled')).toBe('True AllTerminal');
      expect(condition(resource, 'Ready')).toBe('True Ready');
      expect((resource.status as { operations?: unknown[] }).operations).toEqual(snapshot.operations);
    }
  });

  it('an ambiguous create leaves the intent, and the next reconcile revokes the key of that attempt and starts again', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    r.platform.answerCreate = (): never => {
      throw platformError('TIMEOUT', undefined, 'ambiguous');
    };
    expect(await r.reconcile()).toEqual({ type: 'Retry' });
    const lost = r.platform.keys[0]!;
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toContain(lost.name);
    expect(r.kube.secret(NAMESPACE, 'ci')).toBeUndefined();
    expect(r.events.reasons()).toEqual(['Warning CreateOutcomeUnknown']);

    r.platform.answerCreate = undefined;
    // Recovery: list, revoke the attempt's key, clear the intent; then the next step, which creates afresh.
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    expect(r.platform.calls.slice(3)).toEqual(['listOrg org-1', `revokeOrg org-1 ${lost.id}`]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.events.reasons()).toEqual(['Warning CreateOutcomeUnknown', 'Warning CreateRecovered']);
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.keys.map((k) => k.id)).toEqual([r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyId]);
  });

  it('a definite refusal clears the intent, reports it and backs off after what the platform asked', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    r.platform.failNext = { method: 'create', error: platformError('RATE_LIMITED', 429, 'retryable', 1_500) };
    expect(await r.reconcile()).toEqual({ type: 'Backoff', minDelayMs: 1_500 });
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(resource.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(condition(resource, 'Ready')).toBe('False RateLimited');
    expect(condition(resource, 'KeyIssued')).toBe('False RateLimited');
    expect(r.events.reasons()).toEqual(['Warning RateLimited']);
    expect(r.platform.keys).toEqual([]);
  });

  it('a created key that is not the one asked for is revoked at once and never written to the Secret', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    r.platform.answerCreate = (key) => ({ ...key, name: 'someone-else' });
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    expect(r.platform.keys).toEqual([]);
    expect(r.platform.calls[3]).toMatch(/^revokeOrg org-1 \d+$/);
    expect(r.kube.secret(NAMESPACE, 'ci')).toBeUndefined();
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(resource.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(condition(resource, 'KeyIssued')).toBe('False PlatformResponseInvalid');
    expect(r.events.reasons()).toEqual(['Warning PlatformResponseInvalid']);
  });

  it('a resource gone before its new key is recorded (its finalizer removed by someone else): the key is revoked at once, never left live and recorded nowhere', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    const createSecret = r.kube.createSecret.bind(r.kube);
    r.kube.createSecret = async (namespace, body) => {
      const written = await createSecret(namespace, body);
      // Between the Secret and the status write, the resource goes (as the apiserver deletes one without finalizers).
      r.kube.resources.delete(`ApiKey/${NAMESPACE}/ci`);
      return written;
    };
    expect(await r.reconcile()).toEqual({ type: 'Done' });
    expect(r.platform.calls.at(-1)).toMatch(/^revokeOrg org-1 \d+$/);
    expect(r.platform.keys).toEqual([]);
  });

  it('a status write answered 404 while the resource is still there is an error, not a reason to revoke', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    r.kube.failNext = { call: 'put status', error: new ApiException(404, 'not found', {}, {}) };
    await expect(r.reconcile()).rejects.toThrow('not found');
    expect(r.platform.keys).toHaveLength(1);
    expect(r.platform.calls.some((c) => c.startsWith('revoke'))).toBe(false);
  });

  it('adopts the key of an interrupted attempt that the Secret already holds, revoking nothing', async () => {
    const r = rig();
    const base = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    const pending = { attempt: 'ci-deployer-abcd1234', startedAt: new Date().toISOString(), holder: 'operator-a' };
    base.metadata.annotations = { [ANNOTATION_CREATE_PENDING]: encodeIntent(r.signer, base.metadata.uid, pending) };
    r.kube.putResource(base);
    r.platform.keys.push({ id: 77, name: pending.attempt, key: 'k'.repeat(40), created_at: new Date().toISOString() });
    r.kube.putSecret(buildSecret(base, 'ci', 'apiKey', { id: 77, name: pending.attempt, secret: 'k'.repeat(40) }, r.signer));
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(resource.status).toMatchObject({ keyId: 77, keyName: pending.attempt, createdAt: pending.startedAt });
    expect(resource.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.platform.calls).toEqual([]);
    expect(r.events.reasons()).toEqual(['Normal KeyAdopted']);
    // Then it is simply in sync.
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.keys.map((k) => k.id)).toEqual([77]);
  });

  it('clears an intent it did not sign (forged, or copied from another resource) without revoking anything', async () => {
    const r = rig();
    const base = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    const other = keyResource('ApiKey', 'other');
    const victim = { id: 5, name: 'team-b-key-abcd1234', key: 'v'.repeat(40), created_at: new Date().toISOString() };
    r.platform.keys.push(victim);
    base.metadata.annotations = {
      [ANNOTATION_CREATE_PENDING]: encodeIntent(r.signer, other.metadata.uid, { attempt: victim.name, startedAt: new Date(0).toISOString(), holder: 'x' }),
    };
    r.kube.putResource(base);
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.events.reasons()).toEqual(['Warning InvalidAnnotation']);
    expect(r.platform.calls).toEqual([]);
    expect(r.platform.keys).toEqual([victim]);
  });

  it('waits for an attempt another process has in flight, saying so in its conditions', async () => {
    const r = rig();
    const base = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    const pending = { attempt: 'ci-deployer-abcd1234', startedAt: new Date().toISOString(), holder: 'operator-b' };
    base.metadata.annotations = { [ANNOTATION_CREATE_PENDING]: encodeIntent(r.signer, base.metadata.uid, pending) };
    r.kube.putResource(base);
    const result = await r.reconcile();
    expect(result.type).toBe('Done');
    expect(result.type === 'Done' ? result.requeueAfterMs : 0).toBeGreaterThan(100_000);
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(condition(resource, 'Ready')).toBe('False Creating');
    expect(condition(resource, 'KeyIssued')).toBe('Unknown Creating');
    expect(r.platform.calls).toEqual([]);
  });

  it('retries with a fresh read when a write meets a concurrent change (409), creating nothing', async () => {
    const r = rig();
    r.kube.putResource(keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] }));
    const { ApiException } = await import('@kubernetes/client-node');
    r.kube.failNext = { call: 'update', error: new ApiException(409, 'conflict', {}, {}) };
    expect(await r.reconcile()).toEqual({ type: 'Retry' });
    // The credentials checks may have asked who the credentials are and their organizations; nothing was created.
    expect(r.platform.calls.filter((c) => c !== 'getAuth' && c !== 'listMyOrganizations')).toEqual([]);
    expect(r.platform.keys).toEqual([]);
  });

  it("refuses credentials that are not a person's key before creating anything, and asks once while the answer is fresh", async () => {
    const r = rig();
    r.kube.putResource(keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] }));
    r.platform.auth = { account_id: 'org-1', auth_method: 'api_key_org' };
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    expect(r.platform.calls).toEqual(['getAuth', 'listMyOrganizations']);
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(condition(resource, 'KeyIssued')).toBe('False CredentialsWrongKind');
    expect(resource.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.platform.keys).toEqual([]);
  });

  it('a crash after the status write (a fulfilled intent left) converges with no other key, no revocation and no write', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const issued = r.platform.keys[0]!;
    // What a process that crashed right after its status write leaves: the intent, fulfilled.
    expect(JSON.parse(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING] ?? '{}')).toMatchObject({
      attempt: issued.name,
    });
    r.kube.calls.length = 0;
    r.platform.calls.length = 0;
    // Another process (another identity), long after: the intent's grace is over.
    const later = rig({
      kube: r.kube,
      platformFor: (apiKey) => ({ platform: r.platform, credentialsId: apiKey.slice(0, 8) }),
      identity: 'operator-b',
      now: () => Date.now() + 3_600_000,
    });
    expect(await later.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.calls.filter((c) => !c.startsWith('listOrg'))).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([issued.id]);
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([]);
    expect(later.events.reasons()).toEqual([]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyId).toBe(issued.id);
  });

  it('a fulfilled intent signed under another signing key (the operator installed again elsewhere) is no forgery: no InvalidAnnotation, no write for it, the recorded key kept', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const issued = r.platform.keys[0]!;
    const intent = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations![ANNOTATION_CREATE_PENDING]!;
    expect(JSON.parse(intent)).toMatchObject({ attempt: issued.name });
    // Another installation: another signing key, another identity (the e2e's kustomize install after Helm's).
    const elsewhere = rig({
      kube: r.kube,
      platformFor: (apiKey) => ({ platform: r.platform, credentialsId: apiKey.slice(0, 8) }),
      identity: 'operator-b',
      signer: new Signer(Buffer.alloc(32, 9)),
    });
    r.platform.calls.length = 0;
    await elsewhere.settle();
    expect(elsewhere.events.reasons()).not.toContain('Warning InvalidAnnotation');
    expect(r.platform.calls.filter((c) => c.startsWith('create') || c.startsWith('revoke'))).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([issued.id]);
    const after = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(after.status?.keyId).toBe(issued.id);
    expect(after.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBe(intent);
    // An intent it cannot verify that names any other attempt is still refused and cleared, nothing revoked.
    after.metadata.annotations = {
      ...after.metadata.annotations,
      [ANNOTATION_CREATE_PENDING]: JSON.stringify({ ...(JSON.parse(intent) as object), attempt: `${issued.name}x` }),
    };
    r.kube.putResource(after);
    await elsewhere.settle();
    expect(elsewhere.events.reasons()).toContain('Warning InvalidAnnotation');
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.platform.calls.filter((c) => c.startsWith('create') || c.startsWith('revoke'))).toEqual([]);
  });

  it('a key whose intent was cleared after success (by the previous version) stays in sync as before', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const issued = r.platform.keys[0]!;
    // The previous version's end state: no intent at all.
    const cleared = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    delete cleared.metadata.annotations?.[ANNOTATION_CREATE_PENDING];
    r.kube.putResource(cleared);
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.keys.map((k) => k.id)).toEqual([issued.id]);
    expect(r.platform.calls.filter((c) => c.startsWith('revoke') || c.startsWith('create'))).toEqual([`createOrg org-1 ${issued.name}`]);
  });

  it('a re-applied fulfilled intent of an earlier key does not touch the key recorded now', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const first = r.platform.keys[0]!;
    const firstIntent = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations![ANNOTATION_CREATE_PENDING]!;
    // A tenant saves the intent, then re-applies it while it is still the recorded key's: nothing happens.
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    resource.metadata.annotations = { ...resource.metadata.annotations, [ANNOTATION_CREATE_PENDING]: firstIntent };
    r.kube.putResource(resource);
    r.platform.calls.length = 0;
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.platform.calls.filter((c) => !c.startsWith('listOrg'))).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([first.id]);
    expect(r.events.reasons()).toEqual(['Normal KeyIssued']);
  });

  it('a fulfilled intent of an earlier spec.keyName is not refused when keyName changes (no InvalidAnnotation, no new key)', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const issued = r.platform.keys[0]!;
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    resource.spec = { ...resource.spec, keyName: 'renamed' };
    resource.metadata.generation = 2;
    r.kube.putResource(resource);
    r.kube.calls.length = 0;
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(r.events.reasons()).toEqual(['Normal KeyIssued']);
    expect(r.platform.keys.map((k) => k.id)).toEqual([issued.id]);
    // The new generation observed in status; the intent left as it was.
    expect(r.kube.calls.filter((c) => !c.startsWith('get'))).toEqual([`put status ApiKey/${NAMESPACE}/ci`]);
  });

  it('spec.keyName edited while an attempt is pending (issue 24, campaign seed 24): the attempt of the old name is still recovered, its key revoked, none left unrecorded', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    r.platform.answerCreate = (): never => {
      throw platformError('TIMEOUT', undefined, 'ambiguous');
    };
    expect(await r.reconcile()).toEqual({ type: 'Retry' });
    const lost = r.platform.keys[0]!;
    r.platform.answerCreate = undefined;
    // The tenant renames the key before the operator comes back to the attempt.
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(lost.name.startsWith('renamed-')).toBe(false);
    resource.spec = { ...resource.spec, keyName: 'renamed' };
    resource.metadata.generation = 2;
    r.kube.putResource(resource);
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    expect(r.platform.calls.slice(3)).toEqual(['listOrg org-1', `revokeOrg org-1 ${lost.id}`]);
    expect(r.events.reasons()).toEqual(['Warning CreateOutcomeUnknown', 'Warning CreateRecovered']);
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    const recorded = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status;
    expect(recorded?.keyName?.startsWith('renamed-')).toBe(true);
    // Every key the operator made is recorded or revoked.
    expect(r.platform.keys.map((k) => k.id)).toEqual([recorded?.keyId]);
  });

  it("attack 2 (issue 24): key 1's fulfilled intent and signed Secret annotations replayed over key 2 are refused; key 2 stays recorded, nothing revoked", async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.reconcile();
    const first = r.platform.keys[0]!;
    const saved = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations![ANNOTATION_CREATE_PENDING]!;
    const signedAnnotations = { ...r.kube.secret(NAMESPACE, 'ci')!.metadata!.annotations };
    // Drift: the Secret deleted; the repair issues a second key, revokes the first, clears its own intent.
    r.kube.secrets.delete(`${NAMESPACE}/ci`);
    await r.settle();
    const second = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    expect(second).not.toBe(first.id);
    expect(r.platform.keys.map((k) => k.id)).toEqual([second]);
    // The tenant puts the first key's intent back on the resource, and its annotations on the Secret holding the second key.
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    resource.metadata.annotations = { ...resource.metadata.annotations, [ANNOTATION_CREATE_PENDING]: saved };
    r.kube.putResource(resource);
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    r.kube.putSecret({ ...secret, metadata: { ...secret.metadata, annotations: signedAnnotations } });
    const revokesBefore = r.platform.calls.filter((c) => c.startsWith('revoke'));
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    // Stale: cleared, nothing adopted, nothing revoked.
    expect(r.events.reasons().at(-1)).toBe('Warning StaleIntent');
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyId).toBe(second);
    expect(r.platform.calls.filter((c) => c.startsWith('revoke'))).toEqual(revokesBefore);
    // The Secret's replayed annotations do not verify (they vouch for key 1's value): its key id no longer
    // matches status, so it is repaired as any edited Secret is: a new key, the recorded one revoked after.
    await r.settle();
    const third = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    expect(r.platform.keys.map((k) => k.id)).toEqual([third]);
    expect(r.platform.calls.filter((c) => c.startsWith('revoke'))).toEqual([`revokeOrg org-1 ${first.id}`, `revokeOrg org-1 ${second}`]);
    expect(r.events.reasons()).toContain('Warning SecretTampered');
  });

  it('recovering a replayed intent of the recorded key (its Secret gone) revokes neither the recorded key nor a retiring one', async () => {
    const r = rig();
    const base = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    const recorded = await r.platform.createOrganizationKey('org-1', { keyName: 'ci-deployer-abcd1234' });
    const retiring = await r.platform.createOrganizationKey('org-1', { keyName: 'ci-deployer-old00000' });
    // The rotation that made the recorded key, replayed: its attempt is the recorded one (consistent), it replaced the retiring key.
    const pending = { attempt: recorded.name, startedAt: new Date().toISOString(), holder: 'operator-a', replaces: retiring.id, rotation: { request: 't' } };
    base.metadata.annotations = { [ANNOTATION_CREATE_PENDING]: encodeIntent(r.signer, base.metadata.uid, pending) };
    base.status = {
      keyId: recorded.id,
      keyName: recorded.name,
      secretName: 'ci',
      retiringKeys: [{ keyId: retiring.id, since: new Date().toISOString() }],
    } as KeyResource['status'];
    r.kube.putResource(base);
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    expect(r.events.reasons()).toEqual(['Warning CreateRecovered']);
    expect(r.platform.calls.filter((c) => c.startsWith('revoke'))).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([recorded.id, retiring.id]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    // Then the missing Secret is repaired as ever: a new key first, the recorded one revoked after it.
    await r.settle();
    const now = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!;
    expect(now.keyId).not.toBe(recorded.id);
    expect(r.platform.keys.map((k) => k.id)).not.toContain(recorded.id);
    expect(now.retiringKeys?.map((k) => k.keyId)).toEqual([retiring.id]);
    expect(r.platform.keys.map((k) => k.id)).toContain(retiring.id);
  });

  it('a given-up key (keys.neon.dev/abandon-key) names itself in the intent: a crash after the Secret is adopted, the given-up key never revoked', async () => {
    const r = rig();
    const base = keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] });
    const fresh = await r.platform.createOrganizationKey('org-1', { keyName: 'ci-deployer-abcd1234' });
    const pending = { attempt: fresh.name, startedAt: new Date().toISOString(), holder: 'operator-a', abandons: 555 };
    base.metadata.annotations = { [ANNOTATION_CREATE_PENDING]: encodeIntent(r.signer, base.metadata.uid, pending) };
    base.status = { keyId: 555, keyName: 'ci-deployer-given000', secretName: 'ci' } as KeyResource['status'];
    r.kube.putResource(base);
    r.kube.putSecret(buildSecret(base, 'ci', 'apiKey', { id: fresh.id, name: fresh.name, secret: fresh.key }, r.signer));
    expect(await r.reconcile()).toEqual({ type: 'Continue' });
    expect(r.events.reasons()).toEqual(['Normal KeyAdopted']);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status).toMatchObject({ keyId: fresh.id, keyName: fresh.name });
    expect(r.platform.calls.filter((c) => c.startsWith('revoke'))).toEqual([]);
    // The same intent without its given-up key (as a tenant could strip it), before its adoption,
    // fails its signature: refused and cleared, the given-up key never revoked.
    const stripped = JSON.parse(encodeIntent(r.signer, base.metadata.uid, pending)) as Record<string, unknown>;
    delete stripped.abandons;
    const s = rig();
    s.kube.putResource({ ...base, metadata: { ...base.metadata, annotations: { [ANNOTATION_CREATE_PENDING]: JSON.stringify(stripped) } } });
    s.kube.putSecret(buildSecret(base, 'ci', 'apiKey', { id: fresh.id, name: fresh.name, secret: fresh.key }, s.signer));
    await s.reconcile();
    expect(s.events.reasons()).toEqual(['Warning InvalidAnnotation']);
    expect(s.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(s.platform.calls.filter((c) => c.startsWith('revoke'))).toEqual([]);
  });

  it('the KeyAbandoned create signs the given-up key into its intent', async () => {
    // Every drift check lists afresh: the key gone from the list is seen at once.
    const r = rig({ drift: new DriftCache(0) });
    // A personal key: only a personal list depends on whose credentials ask.
    r.kube.putResource(keyResource('ApiKey', 'ci', { spec: { scope: 'Personal', organizationId: undefined } }));
    await r.settle();
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    const given = resource.status!.keyId!;
    // Other credentials, which cannot see the key: a person gives it up.
    resource.status = { ...resource.status, credentialsFingerprint: 'someone-else', createdAt: '2020-01-01T00:00:00Z' } as KeyResource['status'];
    resource.metadata.annotations = { ...resource.metadata.annotations, 'keys.neon.dev/abandon-key': String(given) };
    r.kube.putResource(resource);
    r.platform.keys.splice(0, r.platform.keys.length);
    r.platform.answerCreate = (): never => {
      throw platformError('TIMEOUT', undefined, 'ambiguous');
    };
    // The list is asked for a clock tick after the key was issued: a list of the same millisecond
    // may have been asked before the create's answer, so the drift cache counts the key live then
    // (drift.ts keyState), and nothing would be given up.
    const issued = Date.now();
    while (Date.now() <= issued) await new Promise((resolve) => setTimeout(resolve, 1));
    await r.reconcile('ApiKey', 'ci');
    const intent = JSON.parse(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.metadata.annotations?.[ANNOTATION_CREATE_PENDING] ?? '{}') as Record<string, unknown>;
    expect(intent).toMatchObject({ abandons: given });
    expect(intent.replaces).toBeUndefined();
  });

  it("a personal key an interrupted create left, recorded in replacedKeys with the credentials that found it: another person's credentials put in the Secret later neither drop it on their NOT_FOUND nor issue a new key over it (campaign seed 24)", async () => {
    const r = rig();
    r.kube.putResource(keyResource('ApiKey', 'ci', { spec: { scope: 'Personal', organizationId: undefined } }));
    r.platform.answerCreate = (): never => {
      throw platformError('TIMEOUT', undefined, 'ambiguous');
    };
    expect(await r.reconcile()).toEqual({ type: 'Retry' });
    const lost = r.platform.keys[0]!;
    r.platform.answerCreate = undefined;
    // Recovery finds the attempt's key in the list of these credentials, and the platform refuses its revoke now.
    r.platform.failNext = { method: 'revoke', error: platformError('UNAVAILABLE', 503, 'retryable') };
    await r.reconcile();
    let status = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status;
    expect(status?.keyId).toBeUndefined();
    expect(status?.replacedKeys?.map((k) => k.keyId)).toEqual([lost.id]);
    expect(status?.credentialsFingerprint).toBe(r.signer.fingerprint(ADMIN_KEY));

    // Another person's key in the credentials Secret: a personal key of someone else is NOT_FOUND to them.
    r.kube.putSecret({ metadata: { name: CREDENTIALS, namespace: NAMESPACE }, data: { apiKey: Buffer.from('another-persons-key-98765').toString('base64') } });
    const calls = r.platform.calls.length;
    for (let i = 0; i < 3; i++) {
      r.platform.failNext = { method: 'revoke', error: platformError('NOT_FOUND', 404) };
      await r.reconcile();
    }
    status = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status;
    expect(status?.replacedKeys?.map((k) => k.keyId)).toEqual([lost.id]);
    expect(status?.keyId).toBeUndefined();
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'Ready')).toBe('False CredentialsChanged');
    expect(r.platform.calls.slice(calls).filter((c) => c.startsWith('create') || c.startsWith('revoke'))).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([lost.id]);
    r.platform.failNext = undefined;

    // The credentials that found it back: a new key (the list has room), then the replaced key revoked.
    r.kube.putSecret({ metadata: { name: CREDENTIALS, namespace: NAMESPACE }, data: { apiKey: Buffer.from(ADMIN_KEY).toString('base64') } });
    for (let i = 0; i < 4; i++) await r.reconcile();
    status = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status;
    expect(status?.replacedKeys ?? []).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([status?.keyId]);
    expect(status?.keyId).not.toBe(lost.id);
  });

  it('blocks without credentials, with backoff, and without calling the platform', async () => {
    const r = rig({ credentials: false });
    r.kube.putResource(keyResource('ApiKey', 'ci', { finalizers: [FINALIZER] }));
    expect(await r.reconcile()).toEqual({ type: 'Backoff' });
    expect(condition(r.kube.resource('ApiKey', NAMESPACE, 'ci'), 'Ready')).toBe('False CredentialsMissing');
    expect(r.platform.calls).toEqual([]);
  });
});

describe('Secrets signed in the format before issue 24 (an upgrade)', () => {
  const legacySignature = (r: ReturnType<typeof rig>, uid: string, keyId: number, keyName: string): string => r.signer.sign('secret', [uid, keyId, keyName]);

  it('are believed for the key status records and re-signed in place: no new key, nothing revoked', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.settle();
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    const keyId = resource.status!.keyId!;
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    const current = secret.metadata!.annotations!['keys.neon.dev/signature'];
    r.kube.putSecret({
      ...secret,
      metadata: {
        ...secret.metadata,
        annotations: {
          ...secret.metadata!.annotations,
          'keys.neon.dev/signature': legacySignature(r, resource.metadata.uid, keyId, resource.status!.keyName!),
        },
      },
    });
    const calls = r.platform.calls.length;
    await r.settle();
    expect(r.events.reasons().at(-1)).toBe('Normal SecretRewritten');
    expect(r.kube.secret(NAMESPACE, 'ci')!.metadata!.annotations!['keys.neon.dev/signature']).toBe(current);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.keyId).toBe(keyId);
    expect(r.platform.calls.slice(calls).filter((c) => !c.startsWith('list'))).toEqual([]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    // Once re-signed, it stays as it is.
    const version = r.kube.secret(NAMESPACE, 'ci')!.metadata?.resourceVersion;
    await r.settle();
    expect(r.kube.secret(NAMESPACE, 'ci')!.metadata?.resourceVersion).toBe(version);
  });

  it('status lost: a legacy Secret still names the key (as before), status is rebuilt from it, then the Secret re-signed', async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.settle();
    const before = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    const keyId = before.status!.keyId!;
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    const current = secret.metadata!.annotations!['keys.neon.dev/signature'];
    r.kube.putSecret({
      ...secret,
      metadata: {
        ...secret.metadata,
        annotations: { ...secret.metadata!.annotations, 'keys.neon.dev/signature': legacySignature(r, before.metadata.uid, keyId, before.status!.keyName!) },
      },
    });
    // A restore without status (and without the fulfilled intent).
    const restored = structuredClone(before);
    delete restored.status;
    delete restored.metadata.annotations;
    r.kube.putResource(restored);
    await r.settle();
    const after = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(after.status).toMatchObject({ keyId, keyName: before.status!.keyName, secretHash: before.status!.secretHash });
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    // Its next full pass (the value now checked against the rebuilt status.secretHash) re-signs it.
    await r.settle();
    expect(r.kube.secret(NAMESPACE, 'ci')!.metadata!.annotations!['keys.neon.dev/signature']).toBe(current);
    expect(r.events.reasons().at(-1)).toBe('Normal SecretRewritten');
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
  });

  it("are not believed for another key: an old key's legacy annotations replayed are tampering, and adopt nothing", async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    await r.settle();
    const first = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    const saved = first.metadata.annotations![ANNOTATION_CREATE_PENDING]!;
    const old = { id: first.status!.keyId!, name: first.status!.keyName! };
    r.kube.secrets.delete(`${NAMESPACE}/ci`);
    await r.settle();
    const second = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    // The first key's legacy annotations (as the version before wrote them) and its intent, replayed.
    const secret = r.kube.secret(NAMESPACE, 'ci')!;
    r.kube.putSecret({
      ...secret,
      metadata: {
        ...secret.metadata,
        annotations: {
          ...secret.metadata!.annotations,
          'keys.neon.dev/key-id': String(old.id),
          'keys.neon.dev/key-name': old.name,
          'keys.neon.dev/signature': legacySignature(r, first.metadata.uid, old.id, old.name),
        },
      },
    });
    const resource = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    resource.metadata.annotations = { ...resource.metadata.annotations, [ANNOTATION_CREATE_PENDING]: saved };
    r.kube.putResource(resource);
    await r.settle();
    const now = r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    expect(r.events.reasons()).toEqual(expect.arrayContaining(['Warning StaleIntent', 'Warning SecretTampered']));
    expect(r.events.reasons()).not.toContain('Normal KeyAdopted');
    // Every key but the recorded one revoked: key 2 replaced (revoked after key 3 was recorded), key 1 long gone.
    expect(r.platform.keys.map((k) => k.id)).toEqual([now]);
    expect(now).not.toBe(second);
    expect(now).not.toBe(old.id);
  });
});

describe('a replica that no longer leads', () => {
  it("goes no further once its worker's signal has aborted: no apiserver or platform call", async () => {
    const r = rig();
    r.kube.putResource(keyResource());
    const lost = new AbortController();
    lost.abort(new Error('not leading'));
    const worker = { release: <T>(wait: Promise<T>): Promise<T> => wait, signal: lost.signal };
    await expect(r.reconciler.reconcile({ kind: 'ApiKey', namespace: NAMESPACE, name: 'ci' }, pino({ level: 'silent' }), worker)).rejects.toThrow(
      'not leading',
    );
    expect(r.kube.calls).toEqual([]);
    expect(r.platform.calls).toEqual([]);
  });
});
