// spec.secret.immutable as users meet it: a real kube-apiserver + etcd + kube-controller-manager
// (the harness: deployment and replicaset controllers, no kubelet), the platform emulator over
// HTTP, the operator in-process with the ServiceAccount token of deploy/base (its RBAC proven
// sufficient). One immutable Secret per key; a rotation repoints a Deployment and deletes the
// replaced Secret after revoking its key; a lost Secret, an interrupted create, a foreign Secret.
import { describe, expect, it } from '@jest/globals';
import { AppsV1Api, PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { restartAnnotation } from '../../src/operator/keys/rotation/consumers.ts';
import { buildSecret } from '../../src/operator/keys/secret/secret-writer.ts';
import type { Signer } from '../../src/operator/keys/issuing/signing.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { KeyResource } from '../../src/operator/resources/schema.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { TEST_MIN_ROTATION_GRACE_MS } from '../harness/crds.ts';
import { crashedIntent, emulatorAdmin, eventually, operatorSigner, intentSettled } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const LEAKED = 'tenant-value-must-not-leak';
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}
type Resource = KeyResource & { metadata: { annotations?: Record<string, string> } };

describe('immutable Secrets (spec.secret.immutable)', () => {
  let apps: AppsV1Api;
  let signer: Signer;
  let platform: PlatformClient;
  let adoptedKeyId = 0;

  const keysNamed = async (base: string): Promise<AdminKey[]> =>
    (await emulatorAdmin<AdminKey[]>(suite.emulator.adminUrl, 'GET', '/keys')).filter((k) => k.name.startsWith(`${base}-`));
  const liveIds = async (base: string): Promise<number[]> =>
    (await keysNamed(base))
      .filter((k) => !k.revoked)
      .map((k) => k.id)
      .sort((a, b) => a - b);
  const get = async (name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name })) as Resource;
  const spec = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    scope: 'Organization',
    organizationId: suite.org,
    keyName: name,
    credentialsSecretRef: { name: 'neon-admin' },
    secret: { name: `${name}-key`, immutable: true },
    ...extra,
  });
  const create = async (name: string, extra: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}): Promise<Resource> =>
    (await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: 'apikeys',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { name, ...metadata }, spec: spec(name, extra) },
    })) as Resource;
  const annotate = async (name: string, annotations: Record<string, string>): Promise<void> => {
    await suite.objects.patchNamespacedCustomObject(
      { group, version, namespace: suite.namespace, plural: 'apikeys', name, body: { metadata: { annotations } } },
      merge,
    );
  };
  const condition = (r: Resource, type: string): string | undefined => {
    const c = r.status?.conditions?.find((x) => x.type === type);
    return c === undefined ? undefined : `${c.status} ${c.reason}`;
  };
  const untilReady = (name: string, other?: number): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(name);
        return condition(r, 'Ready') === 'True Ready' && intentSettled(r) && r.status?.keyId !== other ? r : undefined;
      },
      30_000,
      `${name} Ready`,
    );
  const secretsOf = async (name: string): Promise<string[]> =>
    (await suite.core.listNamespacedSecret({ namespace: suite.namespace })).items
      .map((s) => s.metadata?.name ?? '')
      .filter((n) => n.startsWith(`${name}-key-`))
      .sort();
  const events = async (name: string): Promise<{ reason: string; message: string }[]> =>
    (await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: `involvedObject.name=${name}` })).items.map((e) => ({
      reason: e.reason ?? '',
      message: e.message ?? '',
    }));

  const suite = operatorSuite({
    namespaces: ['immutable'],
    before: async (s) => {
      apps = s.cp.kubeConfig.makeApiClient(AppsV1Api);
      signer = await operatorSigner(s.cp);
      platform = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });

      // Before the operator starts, what a crash between the Secret write and the status write
      // leaves: the signed intent, the key on the platform, its immutable Secret, no status.
      const created = await create('adopted', {}, { finalizers: ['keys.neon.dev/finalizer'] });
      const attempt = 'adopted-cr4sh000';
      const key = await platform.createOrganizationKey(suite.org, { keyName: attempt });
      adoptedKeyId = key.id;
      const resource = { ...created, kind: 'ApiKey' } as KeyResource;
      const shape = { template: undefined, organizationId: suite.org, projectId: undefined, platformUrl: undefined, immutable: true };
      await suite.core.createNamespacedSecret({
        namespace: suite.namespace,
        body: buildSecret(resource, `adopted-key-${key.id}`, 'apiKey', { id: key.id, name: attempt, secret: key.key }, signer, undefined, shape),
      });
      await suite.objects.patchNamespacedCustomObject(
        {
          group,
          version,
          namespace: suite.namespace,
          plural: 'apikeys',
          name: 'adopted',
          body: { metadata: { annotations: crashedIntent(signer, created.metadata.uid, { attempt, startedAt: new Date().toISOString(), holder: 'killed' }) } },
        },
        merge,
      );
    },
    operator: (s) => ({
      namespaces: [s.namespace],
      workers: 4,
      driftIntervalMs: 3_000,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      rotationPollMs: 500,
      minRotationGraceMs: TEST_MIN_ROTATION_GRACE_MS,
      logger: createLogger({ level: 'silent' }),
    }),
  });

  it('adopts the key of a create interrupted between its Secret and its status: no second key', async () => {
    const r = await untilReady('adopted');
    expect(r.status).toMatchObject({ keyId: adoptedKeyId, secretName: `adopted-key-${adoptedKeyId}` });
    expect(await liveIds('adopted')).toEqual([adoptedKeyId]);
    expect(await secretsOf('adopted')).toEqual([`adopted-key-${adoptedKeyId}`]);
    // The event is recorded after the status that makes the resource Ready: waited for, not read once.
    await eventually(async () => ((await events('adopted')).some((e) => e.reason === 'KeyAdopted') ? true : undefined), 10_000, 'the KeyAdopted event');
  });

  it('writes each key to its own immutable Secret, whose data the apiserver refuses to change; the mode is fixed at creation', async () => {
    await create('fixed', { secret: { name: 'fixed-key', immutable: true, template: { labels: { team: 'a' }, data: { id: 'KeyId' } } } });
    const r = await untilReady('fixed');
    const name = `fixed-key-${r.status!.keyId}`;
    expect(r.status?.secretName).toBe(name);
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
    expect(secret.immutable).toBe(true);
    expect(secret.metadata?.labels).toMatchObject({ team: 'a', 'app.kubernetes.io/managed-by': 'neon-key-operator' });
    expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({ uid: r.metadata.uid, controller: true });
    expect(Buffer.from(secret.data?.id ?? '', 'base64').toString()).toBe(String(r.status!.keyId));
    await expect(
      suite.core.replaceNamespacedSecret({
        namespace: suite.namespace,
        name,
        body: { ...secret, data: { ...secret.data, apiKey: Buffer.from('x').toString('base64') } },
      }),
    ).rejects.toThrow(/immutable/);
    await expect(
      suite.objects.patchNamespacedCustomObject(
        { group, version, namespace: suite.namespace, plural: 'apikeys', name: 'fixed', body: { spec: { secret: { immutable: false } } } },
        merge,
      ),
    ).rejects.toThrow(/secret.immutable cannot be changed/);
    await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: 'apikeys',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { name: 'mutable' }, spec: { ...spec('mutable'), secret: { name: 'mutable' } } },
    });
    await expect(
      suite.objects.patchNamespacedCustomObject(
        { group, version, namespace: suite.namespace, plural: 'apikeys', name: 'mutable', body: { spec: { secret: { immutable: true } } } },
        merge,
      ),
    ).rejects.toThrow(/secret.immutable cannot be changed/);
  });

  it('a rotation creates a second Secret, repoints the Deployment, revokes the old key after the rollout and deletes the old Secret', async () => {
    await create('rotated', { rotation: { gracePeriod: '1s', maxGracePeriod: '30s', restart: { discover: true } } });
    const first = await untilReady('rotated');
    const old = first.status!.keyId!;
    const oldName = `rotated-key-${old}`;
    // replicas 0: with no kubelet, the rollout completes once the deployment controller saw the new generation.
    const deployment = (name: string, secret: string, consent?: string): V1Deployment => ({
      metadata: { name, ...(consent !== undefined ? { annotations: { 'keys.neon.dev/restart-on-rotation': consent } } : {}) },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            containers: [
              {
                name: 'api',
                image: 'example.invalid/api:1',
                env: [{ name: 'NEON_API_KEY', valueFrom: { secretKeyRef: { name: secret, key: 'apiKey' } } }],
                volumeMounts: [{ name: 'key', mountPath: '/key' }],
              },
            ],
            volumes: [{ name: 'key', secret: { secretName: secret } }],
          },
        },
      },
    });
    // Consent names the Secret as spec.secret.name does (rotated-key), not one key's Secret (rotated-key-<id>).
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: deployment('api', oldName, 'rotated-key') });
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: deployment('bystander', 'something-else') });
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: deployment('unwilling', oldName) });
    await annotate('rotated', { 'keys.neon.dev/rotate': 'r1' });
    const switched = await eventually(
      async () => {
        const r = await get('rotated');
        return r.status?.retiringKeys?.[0]?.restartedAt !== undefined ? r : undefined;
      },
      20_000,
      'consumers repointed',
    );
    const fresh = switched.status!.keyId!;
    const newName = `rotated-key-${fresh}`;
    expect(switched.status?.secretName).toBe(newName);
    expect(switched.status?.retiringKeys?.[0]).toMatchObject({ keyId: old, secretName: oldName });
    const api = await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'api' });
    const pod = api.spec!.template.spec!;
    expect(pod.containers[0]!.env![0]!.valueFrom!.secretKeyRef!.name).toBe(newName);
    expect(pod.volumes![0]!.secret!.secretName).toBe(newName);
    expect(api.spec!.template.metadata?.annotations?.[restartAnnotation('rotated-key')]).toBe(String(fresh));
    expect((await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'bystander' })).metadata?.generation).toBe(1);
    // Reading the old Secret without consent: not repointed, not restarted.
    const unwilling = await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'unwilling' });
    expect(unwilling.metadata?.generation).toBe(1);
    expect(unwilling.spec!.template.spec!.volumes![0]!.secret!.secretName).toBe(oldName);

    const done = await eventually(
      async () => {
        const r = await get('rotated');
        return condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      40_000,
      'old key retired',
    );
    expect(done.status?.keyId).toBe(fresh);
    expect(await liveIds('rotated')).toEqual([fresh]);
    expect(await secretsOf('rotated')).toEqual([newName]);
    // The patch was made once: no second rollout after the record.
    expect((await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'api' })).metadata?.generation).toBe(api.metadata?.generation);
  });

  it('a deleted current Secret yields a new key in a new Secret, the old key revoked', async () => {
    await create('lost');
    const first = await untilReady('lost');
    const old = first.status!.keyId!;
    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name: `lost-key-${old}` });
    const repaired = await untilReady('lost', old);
    const fresh = repaired.status!.keyId!;
    expect(repaired.status?.secretName).toBe(`lost-key-${fresh}`);
    expect(await secretsOf('lost')).toEqual([`lost-key-${fresh}`]);
    await eventually(async () => ((await liveIds('lost')).join() === String(fresh) ? true : undefined), 20_000, 'old key revoked');
    expect((await events('lost')).map((e) => e.reason)).toContain('SecretMissing');
  });

  it("a foreign Secret at the next key's name is SecretConflict: never adopted, overwritten or deleted, the key made for it revoked", async () => {
    await create('guarded', { rotation: { gracePeriod: '1s' } });
    const first = await untilReady('guarded');
    const old = first.status!.keyId!;
    // The emulator's ids are sequential: a key made and revoked here tells the next one.
    const probe = await platform.createOrganizationKey(suite.org, { keyName: 'probe-00000000' });
    await platform.revokeOrganizationKey(suite.org, probe.id);
    const next = probe.id + 1;
    const foreign = `guarded-key-${next}`;
    await suite.core.createNamespacedSecret({
      namespace: suite.namespace,
      body: {
        // Dressed as the operator's (its label, its owner annotation), but with no controller owner
        // reference. (No owner reference at all: the garbage collector would delete a Secret naming
        // the resource as its owner once the resource is gone, which is Kubernetes', not the operator's, doing.)
        metadata: {
          name: foreign,
          labels: { 'app.kubernetes.io/managed-by': 'neon-key-operator' },
          annotations: { 'keys.neon.dev/owner': 'ApiKey/guarded' },
        },
        stringData: { apiKey: LEAKED },
      },
    });
    await annotate('guarded', { 'keys.neon.dev/rotate': 'go' });
    const conflict = await eventually(async () => (await events('guarded')).find((e) => e.reason === 'SecretConflict'), 20_000, 'SecretConflict');
    expect(conflict.message).toContain(foreign);
    expect(conflict.message).not.toContain(LEAKED);
    // The key made for that name was revoked; the rotation goes on with the next key and another name.
    const rotated = await untilReady('guarded', old);
    expect(rotated.status?.secretName).not.toBe(foreign);
    expect((await keysNamed('guarded')).find((k) => k.id === next)?.revoked).toBe(true);
    const kept = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: foreign });
    expect(Buffer.from(kept.data?.apiKey ?? '', 'base64').toString()).toBe(LEAKED);
    expect(JSON.stringify(rotated.status)).not.toContain(LEAKED);

    // Deleted: every Secret of the resource goes, the foreign one stays.
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name: 'guarded' });
    await eventually(async () => ((await secretsOf('guarded')).join() === foreign ? true : undefined), 30_000, 'Secrets of guarded deleted');
    expect(await liveIds('guarded')).toEqual([]);
  });
  it('a Secret name belongs to one resource: a later one naming it gets no key, and a consenting workload is restarted once per rotation', async () => {
    const rotation = { gracePeriod: '1s', maxGracePeriod: '30s', restart: { discover: true } };
    await create('first', { secret: { name: 'shared-key', immutable: true }, rotation });
    const owner = await untilReady('first');
    const secret = `shared-key-${owner.status!.keyId}`;
    await apps.createNamespacedDeployment({
      namespace: suite.namespace,
      body: {
        metadata: { name: 'shared-consumer', annotations: { 'keys.neon.dev/restart-on-rotation': 'shared-key' } },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: 'shared-consumer' } },
          template: {
            metadata: { labels: { app: 'shared-consumer' } },
            spec: {
              containers: [
                { name: 'api', image: 'example.invalid/api:1', env: [{ name: 'NEON_API_KEY', valueFrom: { secretKeyRef: { name: secret, key: 'apiKey' } } }] },
              ],
            },
          },
        },
      },
    });
    // The same Secret name, created after it: each key would go to its own Secret (shared-key-<id>), and
    // each rotation of each would restart the workload that consented to shared-key.
    await create('second', { secret: { name: 'shared-key', immutable: true }, rotation });
    const refused = await eventually(
      async () => {
        const r = await get('second');
        return condition(r, 'Ready') === 'False SecretConflict' ? r : undefined;
      },
      20_000,
      'second refused',
    );
    expect(refused.status?.conditions?.find((c) => c.type === 'Ready')?.message).toContain('ApiKey/first');
    expect(refused.status?.keyId).toBeUndefined();

    const before = (await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'shared-consumer' })).metadata!.generation!;
    await annotate('second', { 'keys.neon.dev/rotate': 'r1' });
    await annotate('first', { 'keys.neon.dev/rotate': 'r1' });
    const rotated = await eventually(
      async () => {
        const r = await get('first');
        return condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      40_000,
      'first rotated',
    );
    const consumer = await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'shared-consumer' });
    expect(consumer.metadata?.generation).toBe(before + 1);
    expect(consumer.spec!.template.spec!.containers[0]!.env![0]!.valueFrom!.secretKeyRef!.name).toBe(`shared-key-${rotated.status!.keyId}`);
    // The later resource made no key on the platform, before or after its rotation was asked for.
    expect(await keysNamed('second')).toEqual([]);
    expect(condition(await get('second'), 'Ready')).toBe('False SecretConflict');

    // Once the first is gone, the name is the second's (looked at again within a drift interval).
    await suite.objects.deleteNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name: 'first' });
    const taken = await untilReady('second');
    expect(taken.status?.secretName).toBe(`shared-key-${taken.status!.keyId}`);
  });
});
