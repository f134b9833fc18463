// Rotation without downtime as users meet it: a real kube-apiserver + etcd + kube-controller-manager
// (the harness; no kubelet, no scheduler), the platform emulator over HTTP, the operator in-process
// with a token of the ServiceAccount that deploy/base creates (so its RBAC is proven sufficient).
import { beforeAll, describe, expect, it } from '@jest/globals';
import { AppsV1Api, PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { restartAnnotation } from '../../src/operator/keys/rotation/consumers.ts';
import { buildSecret } from '../../src/operator/keys/secret/secret-writer.ts';
import type { Signer } from '../../src/operator/keys/issuing/signing.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { KeyResource } from '../../src/operator/resources/schema.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { TEST_MIN_ROTATION_GRACE_MS } from '../harness/crds.ts';
import { crashedIntent, emulatorAdmin, eventually, operatorSigner, intentSettled } from './support.ts';
import { group, operatorSuite, readUntil, version } from './fixture.ts';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
  lastUsedAt: string | null;
}
type Resource = KeyResource & { metadata: { annotations?: Record<string, string> } };

describe('rotation without downtime', () => {
  let apps: AppsV1Api;
  let otherNamespace: string;
  const startedAt = Date.now();
  let scheduledFirst: Resource | undefined;

  const admin = <T>(method: string, path: string): Promise<T> => emulatorAdmin<T>(suite.emulator.adminUrl, method, path);
  const keysNamed = async (base: string): Promise<AdminKey[]> => (await admin<AdminKey[]>('GET', '/keys')).filter((k) => k.name.startsWith(`${base}-`));
  const liveIds = async (base: string): Promise<number[]> =>
    (await keysNamed(base))
      .filter((k) => !k.revoked)
      .map((k) => k.id)
      .sort((a, b) => a - b);
  const get = async (name: string, ns = suite.namespace): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: ns, plural: 'apikeys', name })) as Resource;
  const spec = (name: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    scope: 'Organization',
    organizationId: suite.org,
    keyName: name,
    credentialsSecretRef: { name: 'neon-admin' },
    ...extra,
  });
  const create = async (name: string, extra: Record<string, unknown> = {}, ns = suite.namespace): Promise<void> => {
    await suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: 'apikeys',
      body: { apiVersion: `${group}/${version}`, kind: 'ApiKey', metadata: { name }, spec: spec(name, extra) },
    });
  };
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
  const untilReady = (name: string): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(name);
        return condition(r, 'Ready') === 'True Ready' && intentSettled(r) ? r : undefined;
      },
      30_000,
      `${name} Ready`,
    );
  const secretValue = async (name: string): Promise<string> => {
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
    return Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
  };
  /** One request to the platform with a key, as a consumer makes it. */
  const use = async (key: string): Promise<number> => (await fetch(`${suite.emulator.baseUrl}/auth`, { headers: { authorization: `Bearer ${key}` } })).status;
  const events = async (name: string): Promise<{ reason: string; message: string; type: string }[]> =>
    (await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: `involvedObject.name=${name}` })).items.map((e) => ({
      reason: e.reason ?? '',
      message: e.message ?? '',
      type: e.type ?? '',
    }));

  const suite = operatorSuite({
    namespaces: ['rotation', 'rotation-other'],
    before: async (s) => {
      otherNamespace = s.namespaces[1] ?? '';
      apps = s.cp.kubeConfig.makeApiClient(AppsV1Api);
    },
    operator: (s) => ({
      namespaces: [s.namespace, otherNamespace],
      workers: 4,
      driftIntervalMs: 3_000,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      rotationPollMs: 500,
      minRotationGraceMs: TEST_MIN_ROTATION_GRACE_MS,
      logger: createLogger({ level: 'silent' }),
    }),
  });

  beforeAll(async () => {
    // Scheduled rotation: the smallest interval the CRD admits (1m), looked at by the last test. Its
    // first key's status is taken now: the tests in between take about a minute, the interval.
    await create('scheduled', { rotation: { interval: '1m', gracePeriod: '1s' } });
    scheduledFirst = await eventually(
      async () => {
        const r = await get('scheduled');
        return r.status?.rotation?.nextRotationAt !== undefined ? r : undefined;
      },
      30_000,
      'nextRotationAt',
    );
  });

  it('the CRD refuses an interval under 1m, a gracePeriod under its floor and a maxGracePeriod under the gracePeriod', async () => {
    await expect(create('too-often', { rotation: { interval: '30s' } })).rejects.toThrow(/interval must be at least 1m/);
    // The test run's floor is 1s (test/harness/crds.ts; crds/ says 1m: test/operator/resources/crd.test.ts); 0s never passes.
    await expect(create('no-grace', { rotation: { gracePeriod: '0s' } })).rejects.toThrow(/gracePeriod must be at least 1s/);
    await expect(create('short-grace', { rotation: { gracePeriod: '500ms' } })).rejects.toThrow(/gracePeriod must be at least 1s/);
    await expect(create('too-short', { rotation: { gracePeriod: '1h', maxGracePeriod: '10m' } })).rejects.toThrow(
      /maxGracePeriod must be at least gracePeriod/,
    );
    await expect(create('bad-window', { rotation: { window: { start: '25:00', end: '05:00' } } })).rejects.toThrow(/start/);
  });

  it('a consumer that reads the Secret before each request sees no 401 through a rotation, and the old key is revoked after the grace', async () => {
    await create('reader', { rotation: { gracePeriod: '3s' } });
    const first = await untilReady('reader');
    const old = first.status!.keyId!;
    // The consumer: the Secret from the apiserver, then a request with it, in a loop. Each request
    // is kept with the key it used and when it started.
    const statuses: number[] = [];
    const requests: { at: number; key: string }[] = [];
    const firstValue = await secretValue('reader');
    let running = true;
    const consumer = (async () => {
      while (running) {
        const at = Date.now();
        const key = await secretValue('reader');
        requests.push({ at, key });
        statuses.push(await use(key));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    // At every sample: at most the recorded key and the one retiring are live.
    const samples: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        // The resource, the keys, the resource again (the operator moves in between).
        const before = await get('reader');
        const keys = await keysNamed('reader');
        const r = await get('reader');
        const live = keys.filter((k) => !k.revoked).map((k) => k.id);
        const recorded = new Set([before, r].flatMap((x) => [x.status?.keyId, ...(x.status?.retiringKeys ?? []).map((k) => k.keyId)]));
        const attempts = new Set(
          [before, r].map((x) => (JSON.parse(x.metadata.annotations?.['keys.neon.dev/create-pending'] ?? '{}') as { attempt?: string }).attempt),
        );
        expect(live.filter((id) => !recorded.has(id) && !attempts.has(keys.find((k) => k.id === id)?.name))).toEqual([]);
        expect(live.length).toBeLessThanOrEqual(2);
        samples.push(live.length);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const annotatedAt = Date.now();
    await annotate('reader', { 'keys.neon.dev/rotate': 'first' });
    const rotated = await eventually(
      async () => {
        const r = await get('reader');
        return r.status?.rotation?.lastRequest === 'first' ? r : undefined;
      },
      20_000,
      'rotation recorded',
    );
    expect(rotated.status?.keyId).not.toBe(old);
    expect(rotated.status?.retiringKeys?.map((k) => k.keyId)).toEqual([old]);
    expect(condition(rotated, 'Ready')).toBe('True Ready');
    expect(condition(rotated, 'Rotating')).toBe('True RetiringKey');
    expect(await liveIds('reader')).toContain(old);
    const done = await eventually(
      async () => {
        const r = await get('reader');
        return condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      30_000,
      'rotation complete',
    );
    const completedAt = Date.now();
    // The consumer goes on until it has made a request after the old key was revoked.
    await eventually(async () => (requests.some((r) => r.at > completedAt) ? true : undefined), 10_000, 'a request after the rotation');
    running = false;
    sampling = false;
    await Promise.all([consumer, sampler]);
    console.log(
      `rotation with a consumer re-reading the Secret: ${statuses.length} requests, ${statuses.filter((x) => x !== 200).length} not 200; ` +
        `switched ${Date.parse(rotated.status!.rotation!.lastRotatedAt!) - annotatedAt} ms after the annotation, old key revoked ${completedAt - annotatedAt} ms after it (gracePeriod 3s)`,
    );
    // It used the old key, then the new one, through the whole rotation: before the switch, within
    // the grace (the old key still live) and after the old key was revoked (each as many times as the machine's load
    // allowed: a count of requests said little more and failed under load).
    const newValue = await secretValue('reader');
    expect(newValue).not.toBe(firstValue);
    expect(requests.some((r) => r.key === firstValue)).toBe(true);
    const graceEnds = Date.parse(rotated.status!.rotation!.lastRotatedAt!) + 3_000;
    expect(requests.some((r) => r.key === newValue && r.at < graceEnds)).toBe(true);
    expect(requests.some((r) => r.key === newValue && r.at > completedAt)).toBe(true);
    expect(requests.every((r) => r.key === firstValue || r.key === newValue)).toBe(true);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(await liveIds('reader')).toEqual([done.status!.keyId]);
    expect((await keysNamed('reader')).find((k) => k.id === old)?.revoked).toBe(true);
    expect(done.status?.retiringKeys).toEqual([]);
    expect(samples).toContain(2);
    // The Secret's key-id annotation changed with the key (for Reloader-style tools and GitOps diffs).
    const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name: 'reader' });
    expect(secret.metadata?.annotations?.['keys.neon.dev/key-id']).toBe(String(done.status?.keyId));
    const reasons = (await events('reader')).map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['RotationStarted', 'KeyRetired']));
    // No secret in any event.
    for (const e of await events('reader')) expect(e.message).not.toContain(await secretValue('reader'));
  });

  it('with restart.discover, the Deployment reading the Secret that consents is restarted and the old key stays live until its rollout completes', async () => {
    const deployment: V1Deployment = {
      metadata: { name: 'api' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'api' } },
        template: {
          metadata: { labels: { app: 'api' } },
          spec: {
            containers: [
              {
                name: 'api',
                image: 'example.invalid/api:1',
                env: [{ name: 'NEON_API_KEY', valueFrom: { secretKeyRef: { name: 'restarted', key: 'apiKey' } } }],
              },
            ],
          },
        },
      },
    };
    // Its owner consents to restarts for this Secret.
    await apps.createNamespacedDeployment({
      namespace: suite.namespace,
      body: { ...deployment, metadata: { name: 'api', annotations: { 'keys.neon.dev/restart-on-rotation': 'restarted' } } },
    });
    await apps.createNamespacedDeployment({
      namespace: suite.namespace,
      body: {
        ...deployment,
        metadata: { name: 'bystander' },
        spec: { ...deployment.spec!, template: { ...deployment.spec!.template, spec: { containers: [{ name: 'x', image: 'example.invalid/x:1' }] } } },
      },
    });
    await create('restarted', { rotation: { gracePeriod: '1s', maxGracePeriod: '2s', restart: { discover: true } } });
    const old = (await untilReady('restarted')).status!.keyId!;
    await annotate('restarted', { 'keys.neon.dev/rotate': 'r1' });
    const restarted = await eventually(
      async () => {
        const r = await get('restarted');
        return r.status?.retiringKeys?.[0]?.restartedAt !== undefined ? r : undefined;
      },
      20_000,
      'consumers restarted',
    );
    const fresh = restarted.status!.keyId!;
    const api = await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'api' });
    expect(api.spec?.template.metadata?.annotations?.[restartAnnotation('restarted')]).toBe(String(fresh));
    expect(restarted.status?.retiringKeys?.[0]?.restarts).toEqual([{ kind: 'Deployment', name: 'api', generation: api.metadata?.generation }]);
    expect((await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'bystander' })).metadata?.generation).toBe(1);

    // No kubelet: the new pod never becomes Ready, so the rollout is not complete. Once past
    // maxGracePeriod (RolloutStalled is said only then: decision-retirement.ts), the old key is
    // still live, and the condition says why.
    const held = await readUntil(
      () => get('restarted'),
      (r) => condition(r, 'Rotating') === 'True RolloutStalled',
      30_000,
      'Rotating RolloutStalled',
    );
    expect(await liveIds('restarted')).toContain(old);
    expect(held.status?.conditions?.find((c) => c.type === 'Rotating')?.message).toContain('Deployment/api');
    expect((await events('restarted')).map((e) => e.reason)).toContain('RolloutStalled');

    // A stand-in for the kubelet: the new pod (it carries the restart annotation) reports Ready.
    const pod = await eventually(
      async () =>
        (await suite.core.listNamespacedPod({ namespace: suite.namespace, labelSelector: 'app=api' })).items.find(
          (p) => p.metadata?.annotations?.[restartAnnotation('restarted')] === String(fresh),
        ),
      20_000,
      'the new pod',
    );
    await suite.core.patchNamespacedPodStatus(
      {
        namespace: suite.namespace,
        name: pod.metadata!.name!,
        body: { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] } },
      },
      merge,
    );
    const done = await eventually(
      async () => {
        const r = await get('restarted');
        return condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      40_000,
      'old key retired after the rollout',
    );
    expect(await liveIds('restarted')).toEqual([done.status!.keyId]);
    expect(done.status?.keyId).toBe(fresh);
    expect((await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'api' })).metadata?.generation).toBe(api.metadata?.generation);
  });

  it('a tenant naming workloads that did not consent restarts none: their pod templates unchanged, the old key retired after its grace', async () => {
    const workload = (name: string, secret: string, extra: { consent?: string; paused?: boolean } = {}): V1Deployment => ({
      metadata: { name, ...(extra.consent !== undefined ? { annotations: { 'keys.neon.dev/restart-on-rotation': extra.consent } } : {}) },
      spec: {
        replicas: 0,
        ...(extra.paused === true ? { paused: true } : {}),
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { containers: [{ name: 'c', image: 'example.invalid/c:1', envFrom: [{ secretRef: { name: secret } }] }] },
        },
      },
    });
    // A platform team's workloads in the namespace: one reading its own Secret, one paused (its
    // rollout would never complete), one reading this Secret without consenting; and one consenting.
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: workload('platform-web', 'platform-db') });
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: workload('platform-paused', 'platform-db', { paused: true }) });
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: workload('unwilling', 'naming') });
    await apps.createNamespacedDeployment({ namespace: suite.namespace, body: workload('willing', 'naming', { consent: 'naming' }) });
    const templates = async (): Promise<Record<string, string>> =>
      Object.fromEntries(
        await Promise.all(
          ['platform-web', 'platform-paused', 'unwilling'].map(async (name) => {
            const d = await apps.readNamespacedDeployment({ namespace: suite.namespace, name });
            return [name, `${d.metadata?.generation} ${JSON.stringify(d.spec?.template)}`] as const;
          }),
        ),
      );
    const before = await templates();
    await create('naming', {
      rotation: {
        gracePeriod: '2s',
        maxGracePeriod: '1m',
        restart: {
          discover: true,
          workloads: [
            { kind: 'Deployment', name: 'platform-web' },
            { kind: 'Deployment', name: 'platform-paused' },
          ],
        },
      },
    });
    const old = (await untilReady('naming')).status!.keyId!;
    await annotate('naming', { 'keys.neon.dev/rotate': 'n1' });
    const switched = await eventually(
      async () => {
        const r = await get('naming');
        return r.status?.retiringKeys?.[0]?.restartedAt !== undefined ? r : undefined;
      },
      20_000,
      'consumers restarted',
    );
    const fresh = switched.status!.keyId!;
    expect(switched.status?.retiringKeys?.[0]?.restarts?.map((r) => r.name)).toEqual(['willing']);
    const done = await eventually(
      async () => {
        const r = await get('naming');
        return condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      30_000,
      'old key retired',
    );
    expect(done.status?.keyId).toBe(fresh);
    expect(await liveIds('naming')).toEqual([fresh]);
    expect((await keysNamed('naming')).find((k) => k.id === old)?.revoked).toBe(true);
    // Not one byte of the others' pod templates moved, nor their generations.
    expect(await templates()).toEqual(before);
    expect(
      (await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'willing' })).spec?.template.metadata?.annotations?.[
        restartAnnotation('naming')
      ],
    ).toBe(String(fresh));
    const restarted = (await events('naming')).find((e) => e.reason === 'ConsumersRestarted');
    expect(restarted?.type).toBe('Warning');
    expect(restarted?.message).toBe(
      `restarted Deployment/willing for key ${fresh}; not restarted, without keys.neon.dev/restart-on-rotation naming naming: ` +
        'Deployment/platform-paused, Deployment/platform-web, Deployment/unwilling',
    );
  });

  it('an old key still in use is held until maxGracePeriod, and an event names the address', async () => {
    await create('clinging', { rotation: { gracePeriod: '2s', maxGracePeriod: '15s' } });
    await untilReady('clinging');
    const oldValue = await secretValue('clinging');
    const old = (await get('clinging')).status!.keyId!;
    await annotate('clinging', { 'keys.neon.dev/rotate': 'c1' });
    const switchedAt = Date.now();
    let running = true;
    const stale = (async () => {
      while (running) {
        await use(oldValue);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    })();
    try {
      const event = await eventually(
        async () => (await events('clinging')).find((e) => e.reason === 'OldKeyStillInUse' && e.type === 'Warning'),
        15_000,
        'OldKeyStillInUse',
      );
      expect(event.message).toContain('127.0.0.1');
      expect(event.message).toContain(`key ${old}`);
      const held = await eventually(
        async () => {
          const c = (await get('clinging')).status?.conditions?.find((x) => x.type === 'Rotating');
          return c?.reason === 'OldKeyStillInUse' ? c : undefined;
        },
        10_000,
        'Rotating OldKeyStillInUse',
      );
      expect(held.message).toContain('127.0.0.1');
      expect(await liveIds('clinging')).toContain(old);
      await eventually(async () => ((await liveIds('clinging')).includes(old) ? undefined : true), 30_000, 'old key revoked at maxGracePeriod');
    } finally {
      running = false;
      await stale;
    }
    // Not before maxGracePeriod (15 s after the switch, which followed the annotation).
    expect(Date.now() - switchedAt).toBeGreaterThanOrEqual(15_000);
    expect((await events('clinging')).filter((e) => e.reason === 'OldKeyStillInUse').length).toBeLessThanOrEqual(3);
  });

  it('a ProjectApiKey rotates the same way, and its operations mirror moves to the new key before the old one goes', async () => {
    const project = suite.emulator.bootstrap.projects.find((p) => p.organizationId === suite.org);
    if (project === undefined) throw new Error('no org project in the seed');
    await suite.apply(
      'ProjectApiKey',
      { name: 'project-key' },
      {
        organizationId: suite.org,
        projectId: project.id,
        keyName: 'project-key',
        credentialsSecretRef: { name: 'neon-admin' },
        rotation: { gracePeriod: '1s' },
      },
    );
    const getProjectKey = async (): Promise<Resource> =>
      (await suite.objects.getNamespacedCustomObject({
        group,
        version,
        namespace: suite.namespace,
        plural: 'projectapikeys',
        name: 'project-key',
      })) as Resource;
    const first = await eventually(
      async () => {
        const r = await getProjectKey();
        return condition(r, 'Ready') === 'True Ready' && condition(r, 'OperationsSettled') !== undefined ? r : undefined;
      },
      30_000,
      'project key Ready with operations',
    );
    const old = first.status!.keyId!;
    await suite.objects.patchNamespacedCustomObject(
      {
        group,
        version,
        namespace: suite.namespace,
        plural: 'projectapikeys',
        name: 'project-key',
        body: { metadata: { annotations: { 'keys.neon.dev/rotate': 'p1' } } },
      },
      merge,
    );
    const done = await eventually(
      async () => {
        const r = await getProjectKey();
        return r.status?.rotation?.lastRequest === 'p1' && condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      30_000,
      'project key rotated',
    );
    expect(done.status?.keyId).not.toBe(old);
    expect(await liveIds('project-key')).toEqual([done.status!.keyId]);
    // After a poll of the project's operations (every 5 s here) past the old key's revocation: the
    // mirror lists with the new key, so it does not read Unknown (Unauthorized).
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    const later = await getProjectKey();
    expect(condition(later, 'Ready')).toBe('True Ready');
    expect(later.status?.conditions?.find((c) => c.type === 'OperationsSettled')?.status).not.toBe('Unknown');
  });

  it('a restart list cannot reach another namespace, and a forged rotation intent revokes nothing', async () => {
    const victim: V1Deployment = {
      metadata: { name: 'victim' },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'victim' } },
        template: { metadata: { labels: { app: 'victim' } }, spec: { containers: [{ name: 'v', image: 'example.invalid/v:1' }] } },
      },
    };
    await apps.createNamespacedDeployment({ namespace: otherNamespace, body: victim });
    await create('victims-key', {}, otherNamespace);
    const victimKey = (await eventually(async () => (await get('victims-key', otherNamespace)).status?.keyId, 30_000, 'victim key')) as number;
    // A namespace field in the list is not in the schema: pruned; the name is looked up in the resource's own namespace.
    await create('reacher', { rotation: { gracePeriod: '1s', restart: { workloads: [{ kind: 'Deployment', name: 'victim', namespace: otherNamespace }] } } });
    const reacher = await untilReady('reacher');
    expect((reacher.spec.rotation?.restart?.workloads?.[0] as Record<string, unknown>).namespace).toBeUndefined();
    // A forged intent with the rotation marker, naming the victim's key (no valid signature: a tenant has no signing key).
    const forged = {
      attempt: 'reacher-aaaaaaaa',
      startedAt: new Date(0).toISOString(),
      holder: 'tenant',
      replaces: victimKey,
      rotation: { request: 'x' },
      sig: 'forged',
    };
    await annotate('reacher', { 'keys.neon.dev/create-pending': JSON.stringify(forged) });
    await eventually(
      async () => ((await get('reacher')).metadata.annotations?.['keys.neon.dev/create-pending'] === undefined ? true : undefined),
      20_000,
      'forged intent cleared',
    );
    await annotate('reacher', { 'keys.neon.dev/rotate': 'go' });
    await eventually(async () => (condition(await get('reacher'), 'Rotating') === 'False RotationComplete' ? true : undefined), 30_000, 'reacher rotated');
    expect((await apps.readNamespacedDeployment({ namespace: otherNamespace, name: 'victim' })).metadata?.generation).toBe(1);
    expect((await keysNamed('victims-key')).find((k) => k.id === victimKey)?.revoked).toBe(false);
    expect((await events('reacher')).map((e) => e.reason)).toEqual(expect.arrayContaining(['InvalidAnnotation', 'ConsumersRestarted']));
    expect((await events('reacher')).find((e) => e.reason === 'ConsumersRestarted')?.message).toContain('not found: Deployment/victim');
  });

  it('a scheduled rotation happens at the interval, shown beforehand in nextRotationAt', async () => {
    const first = scheduledFirst!;
    const created = Date.parse(first.status!.createdAt!);
    expect(Date.parse(first.status!.rotation!.nextRotationAt!)).toBe(created + 60_000);
    const firstKey = first.status!.keyId!;
    const rotated = await eventually(
      async () => {
        const r = await get('scheduled');
        return r.status?.keyId !== firstKey && condition(r, 'Rotating') === 'False RotationComplete' ? r : undefined;
      },
      Math.max(10_000, created + 60_000 - Date.now() + 30_000),
      'scheduled rotation',
    );
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(59_000);
    expect(await liveIds('scheduled')).toEqual([rotated.status!.keyId]);
    expect(Date.parse(rotated.status!.rotation!.nextRotationAt!)).toBe(Date.parse(rotated.status!.rotation!.lastRotatedAt!) + 60_000);
  }, 120_000);
});

// Built by hand against the real apiserver and the emulator, with no operator running: each state
// a SIGKILL at one step of a rotation leaves. Then the operator starts, and at every sample the
// platform holds at most the recorded key plus the one retiring (or an attempt its intent names),
// and it converges: the old key revoked, one live key, in the Secret, working.
describe('a rotation interrupted at each step', () => {
  let apps: AppsV1Api;
  let signer: Signer;
  let platform: PlatformClient;
  const admin = <T>(path: string): Promise<T> => emulatorAdmin<T>(suite.emulator.adminUrl, 'GET', path);

  const suite = operatorSuite({
    namespaces: ['rotation-crash'],
    before: async (s) => {
      apps = s.cp.kubeConfig.makeApiClient(AppsV1Api);
      signer = await operatorSigner(s.cp);
      platform = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
    },
  });

  it('converges from every step with never more than the recorded keys live', async () => {
    const now = new Date().toISOString();
    const rotationSpec = { gracePeriod: '1s', maxGracePeriod: '1m' };
    const names = ['intent-written', 'key-created', 'secret-written', 'status-written', 'restarts-patched', 'old-revoked'] as const;
    const olds = new Map<string, number>();
    const expectNotRevoked = new Map<string, number>();
    for (const name of names) {
      const old = await platform.createOrganizationKey(suite.org, { keyName: `${name}-0ld0ld00` });
      olds.set(name, old.id);
      const withRestart = name === 'restarts-patched';
      const created = (await suite.apply(
        'ApiKey',
        { name, namespace: suite.namespace, finalizers: ['keys.neon.dev/finalizer'], annotations: { 'keys.neon.dev/rotate': 'crash' } },
        {
          scope: 'Organization',
          organizationId: suite.org,
          keyName: name,
          credentialsSecretRef: { name: 'neon-admin' },
          rotation: withRestart ? { ...rotationSpec, restart: { workloads: [{ kind: 'Deployment', name: 'consumer' }] } } : rotationSpec,
        },
      )) as Resource;
      const resource = { ...created, kind: 'ApiKey' } as KeyResource;
      // What the operator writes: a rotation's key names the key it replaced (under the signature).
      const putSecret = async (key: { id: number; name?: string | undefined; key: string }, replaces?: number): Promise<void> => {
        const body = buildSecret(
          resource,
          name,
          'apiKey',
          { id: key.id, name: key.name ?? '', secret: key.key, ...(replaces !== undefined ? { replaces } : {}) },
          signer,
        );
        await suite.core.createNamespacedSecret({ namespace: suite.namespace, body });
      };
      const setStatus = async (status: Record<string, unknown>): Promise<void> => {
        await suite.objects.patchNamespacedCustomObjectStatus({ group, version, namespace: suite.namespace, plural: 'apikeys', name, body: { status } }, merge);
      };
      const intent = (attempt: string): Record<string, string> =>
        crashedIntent(signer, created.metadata.uid, { attempt, startedAt: now, holder: 'killed', replaces: old.id, rotation: { request: 'crash' } });
      const setIntent = async (attempt: string): Promise<void> => {
        await suite.objects.patchNamespacedCustomObject(
          { group, version, namespace: suite.namespace, plural: 'apikeys', name, body: { metadata: { annotations: intent(attempt) } } },
          merge,
        );
      };
      const oldStatus = { keyId: old.id, keyName: old.name, createdAt: now, secretName: name };
      const attempt = `${name}-n3wn3w00`;
      switch (name) {
        case 'intent-written':
          await putSecret(old);
          await setStatus(oldStatus);
          await setIntent(attempt);
          break;
        case 'key-created': {
          await putSecret(old);
          await setStatus(oldStatus);
          await setIntent(attempt);
          await platform.createOrganizationKey(suite.org, { keyName: attempt });
          break;
        }
        case 'secret-written': {
          const fresh = await platform.createOrganizationKey(suite.org, { keyName: attempt });
          await putSecret(fresh, old.id);
          await setStatus(oldStatus);
          await setIntent(attempt);
          expectNotRevoked.set(name, fresh.id);
          break;
        }
        case 'status-written': {
          const fresh = await platform.createOrganizationKey(suite.org, { keyName: attempt });
          await putSecret(fresh, old.id);
          await setStatus({
            keyId: fresh.id,
            keyName: attempt,
            createdAt: now,
            secretName: name,
            retiringKeys: [{ keyId: old.id, keyName: old.name, since: now }],
            rotation: { lastRequest: 'crash', lastRotatedAt: now },
          });
          await setIntent(attempt);
          expectNotRevoked.set(name, fresh.id);
          break;
        }
        case 'restarts-patched': {
          const fresh = await platform.createOrganizationKey(suite.org, { keyName: attempt });
          await putSecret(fresh, old.id);
          await setStatus({
            keyId: fresh.id,
            keyName: attempt,
            createdAt: now,
            secretName: name,
            retiringKeys: [{ keyId: old.id, keyName: old.name, since: now }],
            rotation: { lastRequest: 'crash', lastRotatedAt: now },
          });
          // The restart was patched (replicas 0: its rollout completes without a kubelet), its record lost.
          await apps.createNamespacedDeployment({
            namespace: suite.namespace,
            body: {
              metadata: { name: 'consumer', annotations: { 'keys.neon.dev/restart-on-rotation': name } },
              spec: {
                replicas: 0,
                selector: { matchLabels: { app: 'consumer' } },
                template: {
                  metadata: { labels: { app: 'consumer' }, annotations: { [restartAnnotation(name)]: String(fresh.id) } },
                  spec: { containers: [{ name: 'c', image: 'example.invalid/c:1' }] },
                },
              },
            },
          });
          expectNotRevoked.set(name, fresh.id);
          break;
        }
        case 'old-revoked': {
          const fresh = await platform.createOrganizationKey(suite.org, { keyName: attempt });
          await putSecret(fresh, old.id);
          await setStatus({
            keyId: fresh.id,
            keyName: attempt,
            createdAt: now,
            secretName: name,
            retiringKeys: [{ keyId: old.id, keyName: old.name, since: now }],
            rotation: { lastRequest: 'crash', lastRotatedAt: now },
          });
          await platform.revokeOrganizationKey(suite.org, old.id);
          expectNotRevoked.set(name, fresh.id);
          break;
        }
      }
    }
    const consumerGeneration = (await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'consumer' })).metadata?.generation;

    await suite.startOperator({
      namespace: suite.namespace,
      workers: 4,
      driftIntervalMs: 2_000,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      rotationPollMs: 500,
      minRotationGraceMs: TEST_MIN_ROTATION_GRACE_MS,
      logger: createLogger({ level: 'silent' }),
      identity: 'after-the-crash',
    });
    const converged = new Set<string>();
    const deadline = Date.now() + 60_000;
    while (converged.size < names.length) {
      if (Date.now() > deadline) throw new Error(`not converged: ${names.filter((n) => !converged.has(n)).join(', ')}`);
      // The resources, the platform's keys, the resources again: the operator moves in between, so
      // a key counts as recorded when either read of its resource records it (or names its attempt).
      const read = async (): Promise<Map<string, Resource>> =>
        new Map(
          await Promise.all(
            names.map(
              async (name) =>
                [
                  name,
                  (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name })) as Resource,
                ] as const,
            ),
          ),
        );
      const before = await read();
      const keys = await admin<AdminKey[]>('/keys');
      const after = await read();
      for (const name of names) {
        const r = after.get(name)!;
        const live = keys.filter((k) => k.name.startsWith(`${name}-`) && !k.revoked).map((k) => k.id);
        const recordedBy = (x: Resource): number[] => [x.status?.keyId ?? -1, ...(x.status?.retiringKeys ?? []).map((k) => k.keyId)];
        const attemptOf = (x: Resource): string | undefined =>
          (JSON.parse(x.metadata.annotations?.['keys.neon.dev/create-pending'] ?? '{}') as { attempt?: string }).attempt;
        const recorded = new Set([...recordedBy(before.get(name)!), ...recordedBy(r)]);
        const attempts = new Set([attemptOf(before.get(name)!), attemptOf(r)]);
        const unrecorded = live.filter((id) => !recorded.has(id) && !attempts.has(keys.find((k) => k.id === id)?.name));
        expect({ name, unrecorded }).toEqual({ name, unrecorded: [] });
        expect(live.length).toBeLessThanOrEqual(2);
        expect((r.status?.retiringKeys ?? []).length).toBeLessThanOrEqual(1);
        const done =
          live.length === 1 &&
          live[0] === r.status?.keyId &&
          (r.status?.retiringKeys ?? []).length === 0 &&
          intentSettled(r) &&
          r.status?.rotation?.lastRequest === 'crash';
        if (done) converged.add(name);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    for (const name of names) {
      const r = (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name })) as Resource;
      const keys = await admin<AdminKey[]>('/keys');
      expect(keys.find((k) => k.id === olds.get(name))?.revoked).toBe(true);
      const secret = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
      expect(secret.metadata?.annotations?.['keys.neon.dev/key-id']).toBe(String(r.status?.keyId));
      const value = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
      expect((await fetch(`${suite.emulator.baseUrl}/auth`, { headers: { authorization: `Bearer ${value}` } })).status).toBe(200);
      // Where the new key had reached the Secret, it is the one kept: no second rotation.
      if (expectNotRevoked.has(name)) expect(r.status?.keyId).toBe(expectNotRevoked.get(name));
    }
    // The restart repeated after the crash changed nothing: no second rollout.
    expect((await apps.readNamespacedDeployment({ namespace: suite.namespace, name: 'consumer' })).metadata?.generation).toBe(consumerGeneration);
  }, 120_000);
});

describe('a rotation asked for while the previous one retires', () => {
  const suite = operatorSuite({
    namespaces: ['rotation-queued'],
    // A drift interval far longer than the test (its timeout is 2 minutes): the second rotation
    // cannot wait for a drift pass, so the test waits for it without a bound of its own.
    operator: (s) => ({
      namespace: s.namespace,
      workers: 2,
      driftIntervalMs: 10 * 60_000,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      rotationPollMs: 500,
      minRotationGraceMs: TEST_MIN_ROTATION_GRACE_MS,
      logger: createLogger({ level: 'silent' }),
    }),
  });

  it('starts as soon as the retiring key is revoked, not at the next drift pass', async () => {
    const get = async (): Promise<Resource> =>
      (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name: 'queued' })) as Resource;
    const annotate = async (token: string): Promise<void> => {
      await suite.objects.patchNamespacedCustomObject(
        {
          group,
          version,
          namespace: suite.namespace,
          plural: 'apikeys',
          name: 'queued',
          body: { metadata: { annotations: { 'keys.neon.dev/rotate': token } } },
        },
        merge,
      );
    };
    await suite.apply(
      'ApiKey',
      { name: 'queued' },
      { scope: 'Organization', organizationId: suite.org, keyName: 'queued', credentialsSecretRef: { name: 'neon-admin' }, rotation: { gracePeriod: '3s' } },
    );
    const first = await eventually(
      async () => {
        const r = await get();
        return r.status?.keyId !== undefined && intentSettled(r) ? r.status.keyId : undefined;
      },
      30_000,
      'first key',
    );

    await annotate('one');
    const second = await eventually(
      async () => {
        const r = await get();
        return r.status?.rotation?.lastRequest === 'one' && (r.status.retiringKeys ?? []).some((k) => k.keyId === first) ? r.status.keyId : undefined;
      },
      30_000,
      'rotation one retiring the first key',
    );
    // Asked while the first key is in its grace: it waits for the retirement, and says so.
    await annotate('two');
    const waiting = await eventually(
      async () => {
        const r = await get();
        return r.status?.conditions?.some((c) => c.message.includes('the requested rotation waits until key')) === true ? r : undefined;
      },
      30_000,
      'the second request waiting',
    );
    expect(waiting.status?.rotation?.lastRequest).toBe('one');

    const retiredAt = await eventually(
      async () => {
        const r = await get();
        return (r.status?.retiringKeys ?? []).every((k) => k.keyId !== first) ? Date.now() : undefined;
      },
      30_000,
      'the first key retired',
    );
    // Only the retirement's own pass can start it: the drift pass is 10 minutes away, past the test's timeout.
    const third = await eventually(
      async () => {
        const r = await get();
        return r.status?.rotation?.lastRequest === 'two' ? r.status.keyId : undefined;
      },
      110_000,
      'rotation two started',
    );
    expect(third).not.toBe(second);
    expect(third).not.toBe(first);
    console.log(`rotation two started ${Date.now() - retiredAt} ms after the first key retired (drift interval 10 min)`);
  }, 120_000);
});
