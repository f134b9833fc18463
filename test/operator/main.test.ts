// The operator as a process, the way the Deployment runs it (the source entry point, through
// test/harness/operator-process.ts): the ServiceAccount's token, --leader-elect (a Lease in its
// namespace), probes and metrics, and a SIGTERM that drains and exits 0; /metrics and the probes
// each on their own address only.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { freePort, kubeconfigYaml } from '../harness/controlplane.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { OperatorProcess, PROCESS_START_MS } from '../harness/operator-process.ts';
import { createNamespace, customObjects, eventually, installOperatorManifests, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT } from './support.ts';

describe('the operator process', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: OperatorProcess | undefined;
  let namespace: string;
  /** The kubeconfig's folder, removed in afterAll. */
  let scratch: string | undefined;

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    namespace = await createNamespace(cp, 'cli');
  });

  afterAll(async () => {
    await operator?.kill();
    await cp?.kubeConfig
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => undefined);
    await emulator?.close();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('elects itself leader, reconciles, serves probes and metrics, and drains on SIGTERM', async () => {
    const token = await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 600);
    scratch = mkdtempSync(join(tmpdir(), 'nko-cli-'));
    const kubeconfig = join(scratch, 'kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(cp, token, 'operator'), { mode: 0o600 });
    const [health, metrics] = [await freePort(), await freePort()];
    const identity = `cli-test-${namespace}`;
    operator = new OperatorProcess({
      args: [
        '--kubeconfig',
        kubeconfig,
        '--platform-url',
        emulator.baseUrl,
        '--watch-namespace',
        namespace,
        '--leader-elect',
        `--health-probe-bind-address=127.0.0.1:${health}`,
        `--metrics-bind-address=127.0.0.1:${metrics}`,
        '--drift-interval',
        '2s',
      ],
      env: { PATH: process.env.PATH, POD_NAME: identity, POD_NAMESPACE: OPERATOR_NAMESPACE, LOG_LEVEL: 'info' },
    });

    await operator.alive(health, PROCESS_START_MS);
    const lease = await eventually(
      async () => {
        const l = await cp.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: OPERATOR_NAMESPACE, name: 'neon-key-operator' });
        return l.spec?.holderIdentity === identity ? l : undefined;
      },
      30_000,
      'the Lease held by the process',
    );
    expect(lease.spec?.holderIdentity).toBe(identity);
    await eventually(async () => ((await fetch(`http://127.0.0.1:${health}/readyz`)).ok ? true : undefined), 20_000, 'readyz');

    const alice = emulator.bootstrap.users.find((u) => u.name === 'alice');
    await cp.kubeConfig
      .makeApiClient(CoreV1Api)
      .createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: alice?.personalKey ?? '' } } });
    const objects = customObjects(cp.kubeConfig);
    await objects.createNamespacedCustomObject({
      group: 'keys.neon.dev',
      version: 'v1alpha1',
      namespace,
      plural: 'apikeys',
      body: {
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ApiKey',
        metadata: { name: 'cli' },
        spec: { scope: 'Personal', keyName: 'cli', credentialsSecretRef: { name: 'neon-admin' } },
      },
    });
    await eventually(
      async () => {
        const r = (await objects.getNamespacedCustomObject({ group: 'keys.neon.dev', version: 'v1alpha1', namespace, plural: 'apikeys', name: 'cli' })) as {
          status?: { conditions?: { type: string; status: string }[] };
        };
        return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true ? true : undefined;
      },
      30_000,
      'the ApiKey Ready',
    );

    // Ready is written inside the reconcile that creates the key (which goes on to clear its intent
    // and record an event): the reconcile is counted when it ends, a moment after Ready shows.
    const exposition = await eventually(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text();
        return /controller_runtime_reconcile_total\{[^}]*controller="apikey"[^}]*\} [1-9]/.test(text) ? text : undefined;
      },
      15_000,
      'controller_runtime_reconcile_total',
    );
    expect(exposition).toMatch(/controller_runtime_reconcile_total\{[^}]*controller="apikey"[^}]*\} [1-9]/);
    expect(exposition).toMatch(/neon_key_operator_platform_requests_total\{[^}]*method="POST"/);
    // /metrics on the metrics address only, the probes on theirs only.
    expect((await fetch(`http://127.0.0.1:${health}/metrics`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metrics}/healthz`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metrics}/readyz`)).status).toBe(404);
    // Run from src/, nothing was stamped (npm run build stamps dist/: test/deploy/image.test.ts).
    expect(exposition).toMatch(/^neon_key_operator_build_info\{version="dev",revision="unknown",node_version="v[0-9.]+"\} 1$/m);
    await eventually(
      async () =>
        /neon_key_operator_managed_keys\{[^}]*condition="Ready"[^}]*status="True"[^}]*\} 1/.test(
          await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text(),
        )
          ? true
          : undefined,
      15_000,
      'managed_keys',
    );

    // SIGTERM, no SIGKILL before the test's own timeout: the drain must end by itself, with 0.
    const { code } = await operator.stop(90_000);
    expect(code).toBe(0);
    expect(operator.output()).toContain('draining in-flight reconciles');
    expect(operator.output().includes(alice?.personalKey ?? 'never')).toBe(false);
  }, 210_000);
});
