// Credentials take effect at once (issue 13): the operator watches every Secret's metadata
// (PartialObjectMetadata, keys/watches.ts) and wakes exactly the resources whose
// credentialsSecretRef names a Secret that was created, changed or deleted, even while they hold
// in a refusal backoff (runtime/controller.ts). A real kube-apiserver, the emulator over HTTP, the
// operator in-process with deploy/base's ServiceAccount (its RBAC is enough). Reconciles are
// counted from the operator's metrics (reconcile_total) and its typed per-reconcile report.
import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createMetrics, type OperatorMetrics } from '../../src/operator/keys/status/metrics.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { eventually } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const BOGUS = 'b'.repeat(64);
/** Waits that claim nothing about speed end with their test (its timeout), not before. */
const UNTIL_THE_TEST_ENDS = 115_000;

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface Resource {
  status?: { conditions?: Condition[] };
}

describe('a fixed or changed credentials Secret takes effect at once', () => {
  const metrics: OperatorMetrics = createMetrics(new Registry(), { defaultMetrics: false });
  const suite = operatorSuite({
    namespaces: ['credentials-watch'],
    credentials: false,
    operator: (s) => ({
      namespace: s.namespace,
      // An hour, longer than any test here may run: only a watch event can explain a reconcile
      // of a key that was refused (its backoff) or verified (its drift check).
      driftIntervalMs: 3_600_000,
      // The wakes are what this suite measures, not their limit (test/operator/runtime/wake-limiter.test.ts):
      // its writes of creds-bogus (created, fixed, broken, fixed again within seconds) fit the burst
      // whatever the machine's speed, where the default 3 left the fourth waiting for its token.
      inputWakes: { burst: 10, everyMs: 5_000 },
      unverifiedAfterMs: 1,
      minBackoffMs: 3_600_000,
      maxBackoffMs: 3_600_000,
      logger: pino({ level: 'silent' }),
      metrics,
      onReconcile: (record) => records.push(record),
    }),
  });

  const records: ReconcileRecord[] = [];

  const create = async (name: string, credentials: string): Promise<void> => {
    await suite.apply('ApiKey', { name }, { scope: 'Organization', organizationId: suite.org, keyName: name, credentialsSecretRef: { name: credentials } });
  };
  const condition = async (name: string, type: string): Promise<Condition | undefined> =>
    (
      (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys', name })) as Resource
    ).status?.conditions?.find((c) => c.type === type);
  const until = (name: string, type: string, test: (c: Condition) => boolean, timeoutMs = 30_000): Promise<Condition> =>
    eventually(
      async () => {
        const c = await condition(name, type);
        return c !== undefined && test(c) ? c : undefined;
      },
      timeoutMs,
      `${name} ${type}`,
    );
  const putSecret = async (name: string, apiKey: string): Promise<void> => {
    try {
      const current = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
      await suite.core.replaceNamespacedSecret({
        namespace: suite.namespace,
        name,
        body: { metadata: { name, resourceVersion: current.metadata?.resourceVersion }, stringData: { apiKey } },
      });
    } catch (error) {
      if ((error as { code?: number }).code !== 404) throw error;
      await suite.core.createNamespacedSecret({ namespace: suite.namespace, body: { metadata: { name }, stringData: { apiKey } } });
    }
  };
  /** Reconciles counted by the operator's metrics (every kind and result). */
  const reconciles = async (): Promise<number> => await total('controller_runtime_reconcile_total');
  /** A counter's total, or a histogram's count of observations, over every label. */
  const total = async (name: string): Promise<number> =>
    (((await metrics.registry.getSingleMetric(name)?.get())?.values ?? []) as { value: number; metricName?: string }[])
      .filter((v) => v.metricName === undefined || v.metricName === `${name}_count`)
      .reduce((n, v) => n + v.value, 0);
  /**
   * The operator has caught up with everything written so far: its caches hold every Secret and
   * ApiKey of the namespace at the version the apiserver has (so every event was handled, and any
   * wake it caused is in the work queue), and every key added to the work queue was worked (none
   * waiting, none in flight). A wake still travelling (a Secret's event arrives on its own watch,
   * later under load) is no longer counted against the next step.
   */
  const caughtUp = (): Promise<true> =>
    eventually(
      async () => {
        const [secrets, keys] = await Promise.all([
          suite.core.listNamespacedSecret({ namespace: suite.namespace }),
          suite.objects.listNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: 'apikeys' }) as Promise<{
            items: { metadata: { name: string; resourceVersion: string } }[];
          }>,
        ]);
        const cached = new Map(
          suite.operator
            .cacheContents()
            .filter((o) => o.metadata?.namespace === suite.namespace)
            .map((o) => [`${o.kind}/${o.metadata?.name}`, o.metadata?.resourceVersion]),
        );
        const current = [
          ...secrets.items.map((o) => [`Secret/${o.metadata?.name}`, o.metadata?.resourceVersion] as const),
          ...keys.items.map((o) => [`ApiKey/${o.metadata.name}`, o.metadata.resourceVersion] as const),
        ];
        if (cached.size !== current.length || current.some(([k, rv]) => cached.get(k) !== rv)) return undefined;
        const [added, worked] = await Promise.all([total('workqueue_adds_total'), total('workqueue_work_duration_seconds')]);
        return added > 0 && added === worked ? true : undefined;
      },
      UNTIL_THE_TEST_ENDS,
      'the operator caught up with every write',
    );
  const refusalsOf = (name: string): ReconcileRecord[] => records.filter((r) => r.name === name && r.result === 'Backoff');

  it('CredentialsMissing and Unauthorized, holding in a refusal backoff of an hour, are woken by the Secret being created or fixed', async () => {
    await putSecret('creds-bogus', BOGUS);
    await create('missing', 'creds-missing');
    await create('unauthorized', 'creds-bogus');
    await until('missing', 'Ready', (c) => c.reason === 'CredentialsMissing');
    await until('unauthorized', 'Ready', (c) => c.reason === 'Unauthorized');
    // Refused once each, now holding for an hour: nothing but a wake by the Secret can bring them back.
    await caughtUp();
    expect(refusalsOf('missing')).toHaveLength(1);
    expect(refusalsOf('unauthorized')).toHaveLength(1);

    const fixedAt = Date.now();
    await Promise.all([putSecret('creds-missing', suite.adminKey), putSecret('creds-bogus', suite.adminKey)]);
    // Waited for without a bound of its own: the backoff and the drift check are an hour away.
    await Promise.all([
      until('missing', 'Ready', (c) => c.status === 'True', UNTIL_THE_TEST_ENDS),
      until('unauthorized', 'Ready', (c) => c.status === 'True', UNTIL_THE_TEST_ENDS),
    ]);
    const readyAfterMs = Date.now() - fixedAt;
    // The reconcile that made each Ready started after the fix and sent the create.
    const wokenAfterMs: number[] = [];
    for (const name of ['missing', 'unauthorized']) {
      // (Reported once it ended: the status it wrote may be read first.)
      const woken = await eventually(
        async () => records.find((r) => r.name === name && r.startedAt >= fixedAt && r.createSent),
        UNTIL_THE_TEST_ENDS,
        `${name}'s create reported`,
      );
      expect(woken.actions).toContain('Create');
      wokenAfterMs.push(woken.startedAt - fixedAt);
    }
    // A measurement, not a bound (how fast is the machine's business; npm run bench measures it).
    console.log(`credentials fixed: woken after ${wokenAfterMs.join(' / ')} ms, Ready after ${readyAfterMs} ms (backoff and drift interval: 1 h)`);
    expect(refusalsOf('missing')).toHaveLength(1);
    expect(refusalsOf('unauthorized')).toHaveLength(1);
  }, 120_000);

  it('CredentialsRefused (a recorded key that cannot be checked) is cleared by the Secret being fixed, not by the drift check an hour away', async () => {
    // Both Ready keys share creds-bogus (now alice's): break it, then fix it.
    await putSecret('creds-bogus', BOGUS);
    await until('unauthorized', 'KeyIssued', (c) => c.reason === 'CredentialsRefused', UNTIL_THE_TEST_ENDS);
    const fixedAt = Date.now();
    await putSecret('creds-bogus', suite.adminKey);
    await until('unauthorized', 'Ready', (c) => c.status === 'True', UNTIL_THE_TEST_ENDS);
    const readyAfterMs = Date.now() - fixedAt;
    const woken = await eventually(
      async () => records.find((r) => r.name === 'unauthorized' && r.startedAt >= fixedAt && r.reasons.includes('Ready')),
      UNTIL_THE_TEST_ENDS,
      'the reconcile that cleared it reported',
    );
    console.log(`credentials refused then fixed: woken after ${woken.startedAt - fixedAt} ms, Ready after ${readyAfterMs} ms (drift interval 1 h)`);
    expect(woken.startedAt).toBeGreaterThanOrEqual(fixedAt);
  }, 120_000);

  it('a change of a Secret no resource names wakes nothing; a change of a credentials Secret wakes exactly the resources naming it', async () => {
    await create('other', 'creds-other');
    await putSecret('creds-other', suite.adminKey);
    await until('other', 'Ready', (c) => c.status === 'True');
    // Quiet: every resource Ready, the next drift check an hour away, and the operator caught
    // up with every write (creds-other's own event may wake "other" once more after it was Ready).
    await caughtUp();
    const before = await reconciles();
    await putSecret('unrelated', 'nothing-to-do-with-keys');
    await putSecret('unrelated', 'still-nothing');
    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name: 'unrelated' });
    // A later write on the same watch: once the cache holds it, every event before it was handled,
    // and caughtUp() also waits for any wake they queued to be worked.
    await putSecret('marker-1', 'nothing-either');
    await caughtUp();
    expect(await reconciles()).toBe(before);

    // creds-missing is named by "missing" only: one reconcile, of it.
    const since = Date.now();
    await suite.core.patchNamespacedSecret({
      namespace: suite.namespace,
      name: 'creds-missing',
      body: [{ op: 'add', path: '/metadata/annotations', value: { touched: 'yes' } }],
    });
    await eventually(async () => ((await reconciles()) > before ? true : undefined), UNTIL_THE_TEST_ENDS, 'a reconcile');
    // Any other wake the patch caused was queued before the cache holds the later marker, and worked once caught up.
    await putSecret('marker-2', 'nothing-either');
    await caughtUp();
    // Which resources were reconciled first (a failure then names the extra one), then how many passes.
    expect(records.filter((r) => r.startedAt >= since).map((r) => r.name)).toEqual(['missing']);
    expect(await reconciles()).toBe(before + 1);
  }, 120_000);

  it("the operator's caches hold the credentials Secrets' identity, never their value", async () => {
    const cached = suite.operator.cacheContents();
    const secrets = cached.filter((o) => o.kind === 'Secret');
    expect(secrets.map((s) => s.metadata?.name)).toEqual(expect.arrayContaining(['creds-missing', 'creds-bogus', 'creds-other']));
    for (const s of secrets) expect(s).not.toHaveProperty('data');
    const text = JSON.stringify(cached);
    for (const value of [suite.adminKey, BOGUS]) {
      expect(text).not.toContain(value);
      expect(text).not.toContain(Buffer.from(value).toString('base64'));
    }
  });
});
