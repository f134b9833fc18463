// Regression tests for interrupted creates found by `npm run chaos` (docs/reliability.md): states a
// SIGKILL leaves behind, built by hand against a real apiserver and the emulator, then handed to
// the operator (in-process, as its ServiceAccount).
import { describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { crashedIntent, eventually, operatorSigner, intentSettled } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

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
  const suite = operatorSuite({ namespaces: ['crash-recovery'] });

  it('a key being replaced is revoked when the replacing attempt is recovered after its status was recorded', async () => {
    // chaos seed 7: drift replaced key A with attempt B; B reached the Secret and status (step 5),
    // the process died before revoking A and clearing the intent, then the Secret was deleted.
    // Recovery revoked B and cleared the intent, and A, remembered only by the intent, stayed live.
    const platform = new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: suite.adminKey, retry: { maxAttempts: 1 } });
    const a = await platform.createOrganizationKey(suite.org, { keyName: 'replacer-aaaaaaaa' });
    const b = await platform.createOrganizationKey(suite.org, { keyName: 'replacer-bbbbbbbb' });
    const created = (await suite.apply(
      'ApiKey',
      { name: 'replacer', namespace: suite.namespace, finalizers: ['keys.neon.dev/finalizer'] },
      { scope: 'Organization', organizationId: suite.org, keyName: 'replacer', credentialsSecretRef: { name: 'neon-admin' } },
    )) as { metadata: { uid: string } };
    // The intent the killed process wrote (signed for this resource; no operator runs yet).
    await suite.objects.patchNamespacedCustomObject(
      {
        group,
        version,
        namespace: suite.namespace,
        plural: 'apikeys',
        name: 'replacer',
        body: {
          metadata: {
            annotations: crashedIntent(await operatorSigner(suite.cp), created.metadata.uid, {
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
    await suite.objects.patchNamespacedCustomObjectStatus(
      {
        group,
        version,
        namespace: suite.namespace,
        plural: 'apikeys',
        name: 'replacer',
        body: { status: { keyId: b.id, keyName: 'replacer-bbbbbbbb', createdAt: new Date().toISOString(), secretName: 'replacer' } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

    await suite.startOperator({
      namespace: suite.namespace,
      workers: 2,
      driftIntervalMs: 1_500,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      logger: createLogger({ level: 'silent' }),
      identity: 'after-the-crash',
    });
    const ready = await eventually(
      async () => {
        const r = (await suite.objects.getNamespacedCustomObject({
          group,
          version,
          namespace: suite.namespace,
          plural: 'apikeys',
          name: 'replacer',
        })) as Resource;
        const isReady = r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
        return isReady && intentSettled(r) && r.status?.keyId !== b.id ? r : undefined;
      },
      30_000,
      'replacer Ready with a new key',
    );

    const keys = ((await (await fetch(`${suite.emulator.adminUrl}/keys`)).json()) as AdminKey[]).filter((k) => k.name.startsWith('replacer-'));
    expect(keys.find((k) => k.id === a.id)?.revoked).toBe(true);
    expect(keys.find((k) => k.id === b.id)?.revoked).toBe(true);
    expect(keys.filter((k) => !k.revoked).map((k) => k.id)).toEqual([ready.status?.keyId]);
  });
});
