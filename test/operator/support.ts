// Shared by the operator's integration suites: the CRDs and deploy/base applied with the real
// kubectl, a token of the operator's ServiceAccount (so the RBAC in deploy/base is what the
// operator runs with), namespaces, polling.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { reuseKubeConnections } from '../../src/operator/runtime/kube-connections.ts';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type RequestContext } from '@kubernetes/client-node';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { encodeIntent } from '../../src/operator/keys/issuing/create-intent.ts';
import { fulfilledIntent } from '../../src/operator/keys/decision-intent.ts';
import type { PendingAttempt } from '../../src/operator/keys/decision-types.ts';
import { DEFAULT_SIGNING_KEY_SECRET, Signer, loadSigningKey } from '../../src/operator/keys/issuing/signing.ts';
import { CRD_FILES } from '../../src/operator/resources/crd.ts';
import { testCrdYaml } from '../harness/crds.ts';
import { CONTROLPLANE_ENV, type ControlPlane } from '../harness/index.ts';

const run = promisify(execFile);
export const root = fileURLToPath(new URL('../../', import.meta.url));
export const OPERATOR_NAMESPACE = 'neon-key-operator-system';
export const OPERATOR_SERVICE_ACCOUNT = 'neon-key-operator';

export async function kubectl(cp: ControlPlane, args: string[]): Promise<string> {
  const { stdout } = await run(join(cp.binDir, 'kubectl'), args, { env: { PATH: process.env.PATH, KUBECONFIG: cp.kubeconfigPath, HOME: '/tmp' } });
  return stdout;
}

/** The ConfigMap that says what installOperatorManifests applied in this run (in the operator's namespace). */
const INSTALLED_MARKER = 'operator-tests-installed';

/**
 * kubectl apply of the CRDs (crds/ with the test run's gracePeriod floor: test/harness/crds.ts) and
 * -k deploy/base, then waits for the CRDs to be Established. Once per run: every integration suite
 * calls it (two kubectl processes, about a second each, more on a loaded machine), and what it
 * applies is the same for all of them; a ConfigMap records the digest of what was applied, for
 * this run's control plane, and a later call whose digest matches only checks the CRDs.
 */
export async function installOperatorManifests(cp: ControlPlane): Promise<void> {
  const core = cp.kubeConfig.makeApiClient(CoreV1Api);
  const base = join(root, 'deploy/base');
  const digest = createHash('sha256')
    .update(process.env[CONTROLPLANE_ENV] ?? '')
    .update(testCrdYaml());
  for (const file of (await readdir(base)).sort()) digest.update(file).update(await readFile(join(base, file)));
  const applied = digest.digest('hex');
  const marker = await core.readNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, name: INSTALLED_MARKER }).catch(() => undefined);
  if (marker?.data?.digest !== applied) {
    const dir = await mkdtemp(join(tmpdir(), 'nko-crds-'));
    try {
      await writeFile(join(dir, 'crds.yaml'), testCrdYaml());
      await kubectl(cp, ['apply', '--server-side', '--force-conflicts', '--field-manager=operator-tests', '-f', dir]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await kubectl(cp, ['apply', '--server-side', '--force-conflicts', '--field-manager=operator-tests', '-k', base]);
    const body = { metadata: { name: INSTALLED_MARKER }, data: { digest: applied } };
    await core.replaceNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, name: INSTALLED_MARKER, body }).catch(async () => {
      // Two suites may both have applied: the second create finds the first's marker.
      await core.createNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, body }).catch(() => undefined);
    });
  }
  const crds = cp.kubeConfig.makeApiClient(ApiextensionsV1Api);
  for (const name of Object.values(CRD_FILES).map((file) => file.replace(/^keys\.neon\.dev_(.*)\.yaml$/, '$1.keys.neon.dev'))) {
    await eventually(
      async () => {
        const crd = await crds.readCustomResourceDefinition({ name });
        return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true ? true : undefined;
      },
      20_000,
      `CRD ${name} Established`,
    );
  }
}

/**
 * A kubeconfig holding a token of the ServiceAccount deploy/base creates, on the transport the
 * operator's process uses (main.ts).
 */
export async function operatorKubeConfig(cp: ControlPlane): Promise<KubeConfig> {
  return reuseKubeConnections(cp.kubeConfigForToken(await cp.mintServiceAccountToken(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, 3600)), {
    userAgent: 'neon-key-operator/test',
  });
}

export async function createNamespace(cp: ControlPlane, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await cp.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
}

export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export function customObjects(kc: KubeConfig): CustomObjectsApi {
  return kc.makeApiClient(CustomObjectsApi);
}

/**
 * Read, change, replace, as kubectl edit and a tenant's tools do: again from a fresh read when the
 * resource was written in between (409 Conflict: the operator writes its status meanwhile), up to
 * 5 attempts. `change` gets each fresh read.
 */
export async function replaceCustomObject<T extends object>(
  api: CustomObjectsApi,
  at: { group: string; version: string; namespace: string; plural: string; name: string },
  change: (current: T) => T | void,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const current = (await api.getNamespacedCustomObject(at)) as T;
    const body = change(current) ?? current;
    try {
      await api.replaceNamespacedCustomObject({ ...at, body });
      return;
    } catch (error) {
      if ((error as { code?: unknown }).code !== 409 || attempt === 5) throw error;
    }
  }
}

/**
 * The operator's signing key (the Secret it makes in its namespace; made here if no operator ran
 * yet), for tests that write what a crashed operator would have left: a signed create intent, a
 * signed Secret. Only a test with the cluster admin's rights can do this; a tenant cannot.
 */
export async function operatorSigner(cp: ControlPlane): Promise<Signer> {
  return new Signer(await loadSigningKey(cp.kubeConfig.makeApiClient(CoreV1Api), OPERATOR_NAMESPACE, DEFAULT_SIGNING_KEY_SECRET));
}

/** What a crashed operator leaves on a resource: its create intent, signed for that resource's uid. */
export function crashedIntent(signer: Signer, uid: string, pending: PendingAttempt): Record<string, string> {
  return { 'keys.neon.dev/create-pending': encodeIntent(signer, uid, pending) };
}

/** A call to the emulator's admin API (JSON in and out), failing on any non-2xx answer. */
export async function emulatorAdmin<T>(adminUrl: string, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${adminUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status} ${text}`);
  return (text === '' ? undefined : JSON.parse(text)) as T;
}

/**
 * The create protocol has ended for this resource: no intent, or the intent is fulfilled (its
 * attempt is the key status records: a new key's intent stays in place then, decision.ts
 * fulfilledIntent). What "settled" means since issue 14; before, only an absent intent.
 */
export function intentSettled(r: { metadata: { annotations?: Record<string, string> }; status?: { keyId?: number; keyName?: string } }): boolean {
  const intent = r.metadata.annotations?.['keys.neon.dev/create-pending'];
  if (intent === undefined) return true;
  try {
    // The signature is the operator's business; whether the create ended is the product's own rule.
    const pending = JSON.parse(intent) as PendingAttempt;
    const { keyId, keyName } = r.status ?? {};
    return (
      typeof pending.attempt === 'string' &&
      fulfilledIntent(pending, { ...(keyId !== undefined ? { keyId } : {}), ...(keyName !== undefined ? { keyName } : {}) })
    );
  } catch {
    return false;
  }
}

/**
 * Every request the operator's kube clients send (API clients and informers alike), seen where
 * the kube config signs it: `onSend` runs before each is signed and sent. Counts requests, not time.
 */
export function onEveryRequest(config: KubeConfig, onSend: (context: RequestContext) => void | Promise<void>): void {
  const sign = config.applySecurityAuthentication.bind(config);
  config.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
    await onSend(context);
    await sign(context);
  };
}

/**
 * Every named key at rest: over the last drift interval, each had a pass and every pass was decided
 * from the caches (keys/observing/at-rest.ts), as the reconcile records say.
 */
export async function untilAtRest(
  records: readonly ReconcileRecord[],
  namespace: string,
  names: readonly string[],
  driftMs: number,
  timeoutMs: number,
): Promise<void> {
  await eventually(
    async () => {
      const recent = records.filter((r) => r.namespace === namespace && r.startedAt >= Date.now() - 1.2 * driftMs);
      const seen = new Set(recent.map((r) => r.name));
      return recent.every((r) => r.atRest === true) && names.every((n) => seen.has(n)) ? true : undefined;
    },
    timeoutMs,
    'every key at rest',
  );
}

/**
 * How long this process is held up from now on: the sum of the lateness of a 20 ms timer, past the
 * 5 ms a timer is late anyway. On a loaded machine (CI runs at load 16-28 on 2 cores) a process
 * waits for a core, and every timer of an operator running in it (its drift passes, its backoffs)
 * fires late by that much: a test that bounds the operator's time adds it, and logs it.
 */
export function heldUp(): { stop(): number } {
  const PERIOD_MS = 20;
  let total = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    total += Math.max(0, now - last - PERIOD_MS - 5);
    last = now;
  }, PERIOD_MS);
  return {
    stop: () => {
      clearInterval(timer);
      const now = performance.now();
      return Math.round(total + Math.max(0, now - last - PERIOD_MS - 5));
    },
  };
}
