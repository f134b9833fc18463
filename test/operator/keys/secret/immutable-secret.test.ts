// spec.secret.immutable (src/operator/keys/secret/immutable-secret.ts and its callers) against the in-memory
// Kubernetes and platform of fakes.ts: one immutable Secret per key named <name>-<key id>, status
// following it, a rotation repointing the consumers and deleting the replaced key's Secret once
// that key is revoked, adoption of an interrupted create, a foreign Secret at the new name refused.
import { describe, expect, it } from '@jest/globals';
import type { V1Deployment } from '@kubernetes/client-node';
import { restartAnnotation } from '../../../../src/operator/keys/rotation/consumers.ts';
import { encodeIntent } from '../../../../src/operator/keys/issuing/create-intent.ts';
import { DriftCache } from '../../../../src/operator/keys/observing/drift.ts';
import { annotationOp, immutableSecretName, repointOps } from '../../../../src/operator/keys/secret/immutable-secret.ts';
import { buildSecret } from '../../../../src/operator/keys/secret/secret-writer.ts';
import { ANNOTATION_CREATE_PENDING, ANNOTATION_ROTATE, type KeyResource } from '../../../../src/operator/resources/schema.ts';
import { ANNOTATION_RESTART_ON_ROTATION } from '../../../../src/operator/resources/spec-parts.ts';
import { NAMESPACE, keyResource, rig, type Rig } from '../fakes.ts';

const T0 = Date.parse('2026-11-23T10:00:00Z');
const LEAKED = 'sk-must-not-leak';

function clocked(spec: Record<string, unknown> = {}): Rig & { clock: { now: number }; resource(): KeyResource } {
  const clock = { now: T0 };
  const r = rig({ now: () => clock.now, drift: new DriftCache(60_000, () => clock.now), rotationPollMs: 1_000, minRotationGraceMs: 1_000 });
  r.kube.putResource(keyResource('ApiKey', 'ci', { spec: { secret: { name: 'ci-key', immutable: true }, ...spec } }));
  return Object.assign(r, { clock, resource: () => r.kube.resource('ApiKey', NAMESPACE, 'ci')! });
}

function annotate(r: Rig, annotations: Record<string, string>): void {
  const current = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
  current.metadata.annotations = { ...current.metadata.annotations, ...annotations };
  r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, current);
}

const secretNames = (r: Rig): string[] =>
  [...r.kube.secrets.keys()]
    .filter((id) => id.startsWith(`${NAMESPACE}/ci-key`))
    .map((id) => id.slice(NAMESPACE.length + 1))
    .sort();

/** A Deployment reading `secret` every way a pod can; `consent`: its keys.neon.dev/restart-on-rotation annotation. */
function consumer(name: string, secret: string, consent?: string): V1Deployment {
  return {
    metadata: { name, namespace: NAMESPACE, generation: 1, ...(consent !== undefined ? { annotations: { [ANNOTATION_RESTART_ON_ROTATION]: consent } } : {}) },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          initContainers: [{ name: 'init', image: 'x', envFrom: [{ secretRef: { name: secret } }] }],
          containers: [
            {
              name: 'c',
              image: 'x',
              env: [
                { name: 'OTHER', valueFrom: { secretKeyRef: { name: 'unrelated', key: 'k' } } },
                { name: 'KEY', valueFrom: { secretKeyRef: { name: secret, key: 'apiKey' } } },
              ],
            },
          ],
          volumes: [
            { name: 'key', secret: { secretName: secret } },
            { name: 'all', projected: { sources: [{ configMap: { name: 'cm' } }, { secret: { name: secret } }] } },
          ],
        },
      },
    },
    status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
  };
}

describe('immutable Secret names', () => {
  it('are <base>-<key id>, a DNS subdomain of at most 253 characters, the same for the same key', () => {
    expect(immutableSecretName('ci-key', 42)).toBe('ci-key-42');
    const long = immutableSecretName(`${'a'.repeat(240)}.-b`, 123456789012345);
    expect(long.length).toBeLessThanOrEqual(253);
    expect(long).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    expect(long.endsWith('-123456789012345')).toBe(true);
    expect(immutableSecretName(`${'a'.repeat(240)}.-b`, 123456789012345)).toBe(long);
  });

  it('repointOps moves exactly the references to the retired Secrets, each behind a test of its old name', () => {
    const template = consumer('api', 'ci-key-1').spec!.template;
    const ops = repointOps(template, new Set(['ci-key-1']), 'ci-key-2');
    expect(ops.filter((o) => o.op === 'replace').map((o) => o.path)).toEqual([
      '/spec/template/spec/containers/0/env/1/valueFrom/secretKeyRef/name',
      '/spec/template/spec/initContainers/0/envFrom/0/secretRef/name',
      '/spec/template/spec/volumes/0/secret/secretName',
      '/spec/template/spec/volumes/1/projected/sources/1/secret/name',
    ]);
    expect(ops.filter((o) => o.op === 'test').every((o) => o.value === 'ci-key-1')).toBe(true);
    expect(repointOps(template, new Set(['other']), 'ci-key-2')).toEqual([]);
    expect(annotationOp(template, 'keys.neon.dev/rotated.ci-key', '2')).toEqual([
      { op: 'add', path: '/spec/template/metadata/annotations', value: { 'keys.neon.dev/rotated.ci-key': '2' } },
    ]);
    expect(annotationOp({ metadata: { annotations: { 'a/b': '1' } } }, 'a/b', '2')).toEqual([
      { op: 'add', path: '/spec/template/metadata/annotations/a~1b', value: '2' },
    ]);
    expect(annotationOp({ metadata: { annotations: { 'a/b': '2' } } }, 'a/b', '2')).toEqual([]);
  });
});

describe('spec.secret.immutable', () => {
  it('writes the key to its own immutable Secret, owned and signed, named in status', async () => {
    const r = clocked({ secret: { name: 'ci-key', immutable: true, template: { labels: { team: 'a' }, data: { id: 'KeyId' } } } });
    await r.settle();
    const status = r.resource().status!;
    const name = `ci-key-${status.keyId}`;
    expect(status.secretName).toBe(name);
    expect(secretNames(r)).toEqual([name]);
    const secret = r.kube.secret(NAMESPACE, name)!;
    expect(secret.immutable).toBe(true);
    expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({ uid: r.resource().metadata.uid, controller: true });
    expect(secret.metadata?.labels).toMatchObject({ team: 'a', 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(Buffer.from(secret.data!.id!, 'base64').toString()).toBe(String(status.keyId));
    expect(secret.metadata?.annotations?.['keys.neon.dev/signature']).toBeDefined();
    // Steady: nothing rewritten, no new key.
    r.clock.now += 120_000;
    await r.settle();
    expect(r.resource().status?.keyId).toBe(status.keyId);
    expect(secretNames(r)).toEqual([name]);
  });

  it('a template label change is applied in place; its data applies from the next key', async () => {
    const r = clocked();
    await r.settle();
    const keyId = r.resource().status!.keyId!;
    const current = r.resource();
    (current.spec as { secret: Record<string, unknown> }).secret = {
      name: 'ci-key',
      immutable: true,
      template: { labels: { tier: 'gold' }, data: { id: 'KeyId' } },
    };
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, current);
    await r.settle();
    const secret = r.kube.secret(NAMESPACE, `ci-key-${keyId}`)!;
    expect(secret.metadata?.labels?.tier).toBe('gold');
    expect(secret.data?.id).toBeUndefined();
    expect(r.resource().status?.keyId).toBe(keyId);
  });

  it('a deleted current Secret means a new key in a new Secret, the old key revoked', async () => {
    const r = clocked();
    await r.settle();
    const old = r.resource().status!.keyId!;
    await r.kube.deleteSecret(NAMESPACE, `ci-key-${old}`);
    r.clock.now += 1_000;
    await r.settle();
    const fresh = r.resource().status!.keyId!;
    expect(fresh).not.toBe(old);
    expect(r.resource().status?.secretName).toBe(`ci-key-${fresh}`);
    expect(secretNames(r)).toEqual([`ci-key-${fresh}`]);
    expect(r.platform.keys.map((k) => k.id)).toEqual([fresh]);
    expect(r.events.reasons()).toContain('Warning SecretMissing');
  });

  it('a rotation creates a second Secret, repoints the consumers that consent once, and deletes the first after revoking its key', async () => {
    const r = clocked({ rotation: { gracePeriod: '10s', restart: { discover: true } } });
    await r.settle();
    const old = r.resource().status!.keyId!;
    const oldName = `ci-key-${old}`;
    // Consent names spec.secret.name, the base of every key's Secret name.
    r.kube.putWorkload('Deployment', consumer('api', oldName, 'ci-key'));
    r.kube.putWorkload('Deployment', consumer('bystander', 'unrelated', 'ci-key'));
    r.kube.putWorkload('Deployment', consumer('unwilling', oldName));
    r.kube.putWorkload('Deployment', {
      ...consumer('elsewhere', oldName, 'ci-key'),
      metadata: { name: 'elsewhere', namespace: 'team-b', generation: 1, annotations: { [ANNOTATION_RESTART_ON_ROTATION]: 'ci-key' } },
    });
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.settle();
    const rotated = r.resource();
    const fresh = rotated.status!.keyId!;
    const newName = `ci-key-${fresh}`;
    expect(rotated.status?.secretName).toBe(newName);
    expect(rotated.status?.retiringKeys?.[0]).toMatchObject({ keyId: old, secretName: oldName });
    expect(secretNames(r)).toEqual([oldName, newName].sort());

    const api = r.kube.workloads.get(`Deployment/${NAMESPACE}/api`)!;
    const pod = api.spec!.template.spec!;
    expect(pod.containers[0]!.env!.map((e) => e.valueFrom?.secretKeyRef?.name)).toEqual(['unrelated', newName]);
    expect(pod.initContainers![0]!.envFrom![0]!.secretRef!.name).toBe(newName);
    expect(pod.volumes![0]!.secret!.secretName).toBe(newName);
    expect(pod.volumes![1]!.projected!.sources![1]!.secret!.name).toBe(newName);
    expect(api.spec!.template.metadata?.annotations?.[restartAnnotation('ci-key')]).toBe(String(fresh));
    expect(api.metadata?.generation).toBe(2);
    // Consenting but reading none of its Secrets: restarted, nothing to repoint.
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/bystander`)!.metadata?.generation).toBe(2);
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/bystander`)!.spec!.template.spec!.volumes![0]!.secret!.secretName).toBe('unrelated');
    // Without consent: not repointed, not restarted.
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/unwilling`)!.metadata?.generation).toBe(1);
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/unwilling`)!.spec!.template.spec!.volumes![0]!.secret!.secretName).toBe(oldName);
    expect(r.events.events.find((e) => e.includes('ConsumersRestarted'))).toContain(
      'without keys.neon.dev/restart-on-rotation naming ci-key: Deployment/unwilling',
    );
    expect(r.kube.workloads.get('Deployment/team-b/elsewhere')!.spec!.template.spec!.volumes![0]!.secret!.secretName).toBe(oldName);

    // A crash before the restart was recorded: the repeat finds nothing to move and patches nothing.
    const status = structuredClone(r.resource().status!);
    status.retiringKeys = status.retiringKeys!.map(({ restartedAt: _r, restarts: _s, ...rest }) => rest);
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, { ...r.resource(), status });
    const patches = r.kube.calls.filter((c) => c.startsWith('json-patch')).length;
    await r.reconcile();
    expect(r.kube.calls.filter((c) => c.startsWith('json-patch')).length).toBe(patches);
    expect(r.resource().status?.retiringKeys?.[0]?.restarts).toEqual([
      { kind: 'Deployment', name: 'api', generation: 2 },
      { kind: 'Deployment', name: 'bystander', generation: 2 },
    ]);

    // Held until the rollout completed, then the grace period, then revoked and its Secret deleted.
    r.clock.now += 60_000;
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    expect(secretNames(r)).toContain(oldName);
    r.kube.workloads.get(`Deployment/${NAMESPACE}/api`)!.status = { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 };
    r.kube.workloads.get(`Deployment/${NAMESPACE}/bystander`)!.status = { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 };
    await r.reconcile();
    r.clock.now += 11_000;
    await r.settle();
    expect(r.platform.keys.map((k) => k.id)).toEqual([fresh]);
    expect(secretNames(r)).toEqual([newName]);
    expect(r.resource().status?.retiringKeys).toEqual([]);
  });

  it('adopts a key whose Secret was written before a crash, found by the attempt named in the intent', async () => {
    const r = clocked();
    await r.settle();
    const before = r.resource();
    const old = before.status!.keyId!;
    const fresh = await r.platform.createOrganizationKey('org-1', { keyName: 'ci-deployer-newnew00' });
    const intent = encodeIntent(r.signer, before.metadata.uid, {
      attempt: 'ci-deployer-newnew00',
      startedAt: new Date(T0).toISOString(),
      holder: 'killed',
      replaces: old,
      rotation: { request: 'tok' },
    });
    annotate(r, { [ANNOTATION_CREATE_PENDING]: intent, [ANNOTATION_ROTATE]: 'tok' });
    r.kube.putSecret(
      buildSecret(r.resource(), `ci-key-${fresh.id}`, 'apiKey', { id: fresh.id, name: fresh.name, secret: fresh.key, replaces: old }, r.signer, undefined, {
        template: undefined,
        organizationId: 'org-1',
        projectId: undefined,
        platformUrl: undefined,
        immutable: true,
      }),
    );
    await r.reconcile();
    const adopted = r.resource();
    expect(adopted.status).toMatchObject({ keyId: fresh.id, secretName: `ci-key-${fresh.id}` });
    expect(adopted.status?.retiringKeys?.[0]).toMatchObject({ keyId: old, secretName: `ci-key-${old}` });
    expect(r.events.reasons()).toContain('Normal KeyAdopted');
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
  });

  it('a Secret at the new name that this resource does not own is SecretConflict: never adopted nor overwritten, the new key revoked', async () => {
    const r = clocked();
    await r.settle();
    const old = r.resource().status!.keyId!;
    const next = r.platform.nextId;
    // A tenant's Secret, labelled as ours and even naming the resource's uid as a plain (non-controller) owner.
    r.kube.putSecret({
      metadata: {
        name: `ci-key-${next}`,
        namespace: NAMESPACE,
        labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator' },
        ownerReferences: [{ apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ApiKey', name: 'ci', uid: r.resource().metadata.uid }],
      },
      data: { apiKey: Buffer.from(LEAKED).toString('base64') },
    });
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.reconcile();
    expect(r.events.reasons()).toContain('Warning SecretConflict');
    expect(r.kube.secret(NAMESPACE, `ci-key-${next}`)!.data!.apiKey).toBe(Buffer.from(LEAKED).toString('base64'));
    expect(r.platform.keys.map((k) => k.id)).toEqual([old]);
    expect(r.resource().status).toMatchObject({ keyId: old, secretName: `ci-key-${old}` });
    // The current key stays Ready; the rotation says what stopped it.
    const conditions = Object.fromEntries((r.resource().status?.conditions ?? []).map((c) => [c.type, `${c.status} ${c.reason}`]));
    expect(conditions).toMatchObject({ Ready: 'True Ready', Rotating: 'False SecretConflict' });
    expect(r.resource().metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(JSON.stringify(r.resource().status)).not.toContain(LEAKED);
    expect(r.events.events.join('\n')).not.toContain(LEAKED);
    // Deleting the resource never deletes the tenant's Secret.
    const current = r.resource();
    current.metadata.deletionTimestamp = new Date(T0).toISOString();
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, current);
    await r.settle();
    expect(r.kube.secret(NAMESPACE, `ci-key-${next}`)).toBeDefined();
  });

  it('deletion: Revoke deletes the current and the retiring Secrets; Retain keeps the current one, released, and deletes the retiring ones', async () => {
    for (const policy of ['Revoke', 'Retain'] as const) {
      const r = clocked({ deletionPolicy: policy, rotation: { gracePeriod: '1h' } });
      await r.settle();
      const old = r.resource().status!.keyId!;
      annotate(r, { [ANNOTATION_ROTATE]: 'go' });
      await r.settle();
      const fresh = r.resource().status!.keyId!;
      expect(secretNames(r)).toEqual([`ci-key-${old}`, `ci-key-${fresh}`].sort());
      const current = r.resource();
      current.metadata.deletionTimestamp = new Date(T0).toISOString();
      r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, current);
      await r.settle();
      expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
      if (policy === 'Revoke') {
        expect(secretNames(r)).toEqual([]);
        expect(r.platform.keys).toEqual([]);
      } else {
        expect(secretNames(r)).toEqual([`ci-key-${fresh}`]);
        expect(r.kube.secret(NAMESPACE, `ci-key-${fresh}`)?.metadata?.ownerReferences).toEqual([]);
        expect(r.platform.keys.map((k) => k.id)).toEqual([fresh]);
      }
    }
  });

  it('a lost status is rebuilt from the newest Secret this resource owns under the signature: no second key', async () => {
    const r = clocked();
    await r.settle();
    const keyId = r.resource().status!.keyId!;
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, { ...r.resource(), status: {} });
    r.clock.now += 1_000;
    await r.settle();
    expect(r.resource().status).toMatchObject({ keyId, secretName: `ci-key-${keyId}` });
    expect(r.platform.keys.map((k) => k.id)).toEqual([keyId]);
    expect(secretNames(r)).toEqual([`ci-key-${keyId}`]);
  });
});
