// OperationsSettled on a ProjectApiKey when an operation of its project ends in `error` (the
// official OpenAPI document's status beside `failed`: the platform gave up, nothing follows): it
// reads False OperationError, never True AllTerminal, so `kubectl wait
// --for=condition=OperationsSettled` does not let a pipeline go on as if the branch existed. A real
// kube-apiserver, the emulator over HTTP producing `error` (admin fail-next-operations), the
// operator in-process with deploy/base's ServiceAccount.
import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { type Condition, group, operatorSuite, version } from './fixture.ts';

interface Resource {
  status?: { conditions?: Condition[]; operations?: { id: string; status: string }[] };
}

describe('OperationsSettled when an operation ends in error', () => {
  const suite = operatorSuite({
    namespaces: ['operations-settled'],
    operator: (s) => ({ namespace: s.namespace, driftIntervalMs: 2_000, logger: pino({ level: 'silent' }) }),
  });

  it('reads False OperationError naming the operation, and stays so', async () => {
    const project = suite.emulator.bootstrap.projects.find((p) => p.organizationId === suite.org);
    if (project === undefined) throw new Error('no org project in the seed');
    await suite.apply(
      'ProjectApiKey',
      { name: 'app' },
      { organizationId: suite.org, projectId: project.id, keyName: 'app', credentialsSecretRef: { name: 'neon-admin' } },
    );
    const get = async (): Promise<Resource> =>
      (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'projectapikeys', name: 'app' })) as Resource;
    const settled = (r: Resource): Condition | undefined => r.status?.conditions?.find((c) => c.type === 'OperationsSettled');
    await eventually(async () => (settled(await get())?.status === 'True' ? true : undefined), 30_000, 'OperationsSettled True before');

    await emulatorAdmin(suite.emulator.adminUrl, 'POST', `/projects/${project.id}/fail-next-operations`, { count: 2, outcome: 'error' });
    const { operations } = await new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: suite.adminKey }).createBranch(project.id);
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
