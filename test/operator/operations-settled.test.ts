// OperationsSettled on a ProjectApiKey when an operation of its project ends in `error` (the
// official OpenAPI document's status beside `failed`: the platform gave up, nothing follows): it
// reads False OperationError, never True AllTerminal, so `kubectl wait
// --for=condition=OperationsSettled` does not let a pipeline go on as if the branch existed. A real
// kube-apiserver, the emulator over HTTP producing `error` (admin fail-next-operations), the
// operator in-process with deploy/base's ServiceAccount.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, emulatorAdmin, eventually, installOperatorManifests, operatorKubeConfig } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}
interface Resource {
  status?: { conditions?: Condition[]; operations?: { id: string; status: string }[] };
}

describe('OperationsSettled when an operation ends in error', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'operations-settled');
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: alice } } });
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: emulator.baseUrl,
      namespace,
      driftIntervalMs: 2_000,
      logger: pino({ level: 'silent' }),
    });
  });

  afterAll(async () => {
    await operator?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
  });

  it('reads False OperationError naming the operation, and stays so', async () => {
    const org = emulator.bootstrap.organizations[0]?.id ?? '';
    const project = emulator.bootstrap.projects.find((p) => p.organizationId === org);
    if (project === undefined) throw new Error('no org project in the seed');
    await objects.createNamespacedCustomObject({
      group,
      version,
      namespace,
      plural: 'projectapikeys',
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'ProjectApiKey',
        metadata: { name: 'app' },
        spec: { organizationId: org, projectId: project.id, keyName: 'app', credentialsSecretRef: { name: 'neon-admin' } },
      },
    });
    const get = async (): Promise<Resource> =>
      (await objects.getNamespacedCustomObject({ group, version, namespace, plural: 'projectapikeys', name: 'app' })) as Resource;
    const settled = (r: Resource): Condition | undefined => r.status?.conditions?.find((c) => c.type === 'OperationsSettled');
    await eventually(async () => (settled(await get())?.status === 'True' ? true : undefined), 30_000, 'OperationsSettled True before');

    await emulatorAdmin(emulator.adminUrl, 'POST', `/projects/${project.id}/fail-next-operations`, { count: 2, outcome: 'error' });
    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    const { operations } = await new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: alice }).createBranch(project.id);
    const ids = operations.map((o) => o.id);
    const errored = await eventually(
      async () => {
        const r = await get();
        return settled(r)?.reason === 'OperationError' && r.status?.operations?.some((o) => ids.includes(o.id) && o.status === 'error') === true
          ? r
          : undefined;
      },
      30_000,
      'OperationsSettled OperationError',
    );
    const condition = settled(errored);
    expect(condition?.status).toBe('False');
    expect(condition?.message).toMatch(/ended in error \(failures_count 1\): the platform gave up on it and it will not change again/);
    // The key itself is fine: Ready stays True.
    expect(errored.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    // Final: several drift intervals later it still says so (never AllTerminal, never flapping).
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(settled(await get())).toEqual(expect.objectContaining({ status: 'False', reason: 'OperationError' }));
  }, 60_000);
});
