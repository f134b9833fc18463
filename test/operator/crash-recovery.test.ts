// Regression tests for interrupted creates found by `npm run chaos` (docs/reliability.md): states a
// SIGKILL leaves behind, built by hand against a real apiserver and the emulator, then handed to
// the operator (in-process, as its ServiceAccount).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import {
  crashedIntent,
  createNamespace,
  customObjects,
  eventually,
  installOperatorManifests,
  operatorKubeConfig,
  operatorSigner,
  intentSettled,
} from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
interface Resource {
  metadata: { annotations?: Record<string, string> };
  status?: { keyId?: number; conditions?: { type: string; status: string }[] };
}
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}

describe('recovery of an interrupted create', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator | undefined;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;
  let org: string;
  let aliceKey: string;

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice');
    aliceKey = alice?.personalKey ?? '';
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'crash-recovery');
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: aliceKey } } });
  });

  afterAll(async () => {
    await operator?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
  });

  it('a key being replaced is revoked when the replacing attempt is recovered after its status was recorded', async () => {
    // chaos seed 7: drift replaced key A with attempt B; B reached the Secret and status (step 5),
    // the process died before revoking A and clearing the intent, then the Secret was deleted.
    // Recovery revoked B and cleared the intent, and A, remembered only by the intent, stayed live.
    const platform = new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: aliceKey, retry: { maxAttempts: 1 } });
    const a = await platform.createOrganizationKey(org, { keyName: 'replacer-aaaaaaaa' });
    const b = await platform.createOrganizationKey(org, { keyName: 'replacer-bbbbbbbb' });
    const created = (await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'apikeys',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ApiKey',
        metadata: { name: 'replacer', namespace, finalizers: ['keys.neon.dev/finalizer'] },
        spec: { scope: 'Organization', organizationId: org, keyName: 'replacer', credentialsSecretRef: { name: 'neon-admin' } },
      },
    })) as { metadata: { uid: string } };
    // The intent the killed process wrote (signed for this resource; no operator runs yet).
    await objects.patchNamespacedCustomObject(
      {
        group,
        version,
        namespace,
        plural: 'apikeys',
        name: 'replacer',
        body: {
          metadata: {
            annotations: crashedIntent(await operatorSigner(cp), created.metadata.uid, {
              attempt: 'replacer-bbbbbbbb',
              startedAt: '2020-01-01T00:00:00Z',
              holder: 'killed',
              replaces: a.id,
            }),
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await objects.patchNamespacedCustomObjectStatus(
      {
        group,
        version,
        namespace,
        plural: 'apikeys',
        name: 'replacer',
        body: { status: { keyId: b.id, keyName: 'replacer-bbbbbbbb', createdAt: new Date().toISOString(), secretName: 'replacer' } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespace,
      workers: 2,
      driftIntervalMs: 1_500,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'after-the-crash',
    });
    const ready = await eventually(
      async () => {
        const r = (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'apikeys', name: 'replacer' })) as Resource;
        const isReady = r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
        return isReady && intentSettled(r) && r.status?.keyId !== b.id ? r : undefined;
      },
      30_000,
      'replacer Ready with a new key',
    );

    const keys = ((await (await fetch(`${emulator.adminUrl}/keys`)).json()) as AdminKey[]).filter((k) => k.name.startsWith('replacer-'));
    expect(keys.find((k) => k.id === a.id)?.revoked).toBe(true);
    expect(keys.find((k) => k.id === b.id)?.revoked).toBe(true);
    expect(keys.filter((k) => !k.revoked).map((k) => k.id)).toEqual([ready.status?.keyId]);
  });
});
