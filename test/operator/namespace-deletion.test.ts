// Issue 40, on a real kube-apiserver + etcd with its namespace controller, and the emulator over
// HTTP: `kubectl delete namespace` on a namespace holding Ready keys, one of them in the middle of
// a rotation (its replaced key still retiring) and one being repaired (its Secret just deleted), in
// both modes: keys through a ClusterKeyIssuer, and namespace credentials (spec.credentialsSecretRef,
// whose Secret the operator keeps with a finalizer until the keys are revoked). Every key the
// namespace ever held (current, retiring, replaced) ends revoked, and the namespace goes away.
//
// NAMESPACE_DELETION_ROUNDS (default 2, CI's) namespaces per mode, deleted at the same time;
// docs/reliability.md has a run of 20 (one after the other, before they ran at once).
import { describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { TEST_MIN_ROTATION_GRACE_MS } from '../harness/crds.ts';
import { eventually } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const ORG = 'org-demo-00000001';
const PROJECT = 'quiet-river-00000001';
const ROUNDS = Math.max(1, Number(process.env.NAMESPACE_DELETION_ROUNDS ?? '2'));
const SUITE_LABEL = 'keys.neon.dev/test-suite';
type Mode = 'issuer' | 'namespace credentials';

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface KeyObject {
  metadata: { name: string };
  status?: { keyId?: number; retiringKeys?: { keyId: number }[]; conditions?: Condition[] };
}

describe('deleting a namespace revokes every key it held and the namespace goes away', () => {
  let alice: PlatformClient;
  let issuersNs: string;
  const suffix = Math.random().toString(36).slice(2, 8);
  const issuer = `deletion-${suffix}`;
  const namespaces: Record<Mode, string[]> = { issuer: [], 'namespace credentials': [] };
  const figures: { mode: Mode; seconds: number; keys: number }[] = [];

  const plural = (kind: string): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
  const read = async (kind: string, namespace: string, name: string): Promise<KeyObject> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural: plural(kind), name })) as KeyObject;
  const ready = (r: KeyObject): boolean => r.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
  /** The live keys of the organization named after the namespace (keyName defaults to <namespace>-<name>): current, retiring, replaced. */
  const keysOf = async (namespace: string): Promise<number[]> =>
    (await alice.listOrganizationKeys(ORG)).filter((k) => k.name.startsWith(`${namespace}-`)).map((k) => k.id);

  const suite = operatorSuite({
    namespaces: ['deletion-issuers', ...Array.from({ length: ROUNDS }, () => ['deletion-issuer', 'deletion-creds']).flat()],
    credentials: false,
    before: async (s) => {
      const [first = '', ...rounds] = s.namespaces;
      issuersNs = first;
      rounds.forEach((ns, i) => namespaces[i % 2 === 0 ? 'issuer' : 'namespace credentials'].push(ns));
      alice = new PlatformClient({ baseUrl: s.emulator.baseUrl, apiKey: s.adminKey, retry: { maxAttempts: 1 } });
      await s.core.createNamespacedSecret({ namespace: issuersNs, body: { metadata: { name: 'org-admin' }, stringData: { apiKey: s.adminKey } } });
      await suite.apply(
        'ClusterKeyIssuer',
        { name: issuer, labels: { [SUITE_LABEL]: suffix } },
        {
          organizationId: ORG,
          credentialsSecretRef: { name: 'org-admin' },
          allow: [{ namespaces: { names: namespaces.issuer }, kinds: ['Organization', 'Project'] }],
        },
      );
    },
    operator: () => ({
      namespaces: [issuersNs, ...namespaces.issuer, ...namespaces['namespace credentials']],
      issuerSecretsNamespace: issuersNs,
      issuerLabelSelector: `${SUITE_LABEL}=${suffix}`,
      workers: 8,
      driftIntervalMs: 2_000,
      pendingGraceMs: 2_000,
      maxBackoffMs: 2_000,
      rotationPollMs: 500,
      minRotationGraceMs: TEST_MIN_ROTATION_GRACE_MS,
      logger: createLogger({ level: 'silent' }),
      identity: 'namespace-deletion',
    }),
    after: async ({ objects }) => {
      if (figures.length > 0) {
        for (const mode of ['issuer', 'namespace credentials'] as const) {
          const s = figures
            .filter((f) => f.mode === mode)
            .map((f) => f.seconds)
            .sort((a, b) => a - b);
          if (s.length > 0)
            console.log(
              `namespace deletion, ${mode}: ${s.length} namespaces, every key revoked; seconds to gone: min ${s[0]!.toFixed(1)}, median ${s[Math.floor(s.length / 2)]!.toFixed(1)}, max ${s.at(-1)!.toFixed(1)}`,
            );
        }
      }
      const current = (await objects.getClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name: issuer }).catch(() => undefined)) as
        { metadata: Record<string, unknown> } | undefined;
      if (current !== undefined) {
        await objects
          .replaceClusterCustomObject({
            group,
            version,
            plural: 'clusterkeyissuers',
            name: issuer,
            body: { ...current, metadata: { ...current.metadata, finalizers: [] } },
          })
          .catch(() => undefined);
        await objects.deleteClusterCustomObject({ group, version, plural: 'clusterkeyissuers', name: issuer }).catch(() => undefined);
      }
    },
    timeoutMs: 120_000,
  });

  async function round(mode: Mode, namespace: string): Promise<void> {
    const credentials = mode === 'issuer' ? { issuerRef: { name: issuer } } : { organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } };
    if (mode === 'namespace credentials')
      await suite.core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: suite.adminKey } } });
    const create = (kind: string, name: string, spec: Record<string, unknown>): Promise<unknown> =>
      suite.objects.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural: plural(kind),
        body: { apiVersion: `${group}/${version}`, kind, metadata: { name, namespace }, spec: { ...credentials, ...spec } },
      });
    await create('ApiKey', 'ready', { scope: 'Organization' });
    await create('ProjectApiKey', 'rotating', { projectId: PROJECT, rotation: { gracePeriod: '1h' } });
    await create('ProjectApiKey', 'repaired', { projectId: PROJECT });
    for (const [kind, name] of [
      ['ApiKey', 'ready'],
      ['ProjectApiKey', 'rotating'],
      ['ProjectApiKey', 'repaired'],
    ] as const) {
      await eventually(async () => (ready(await read(kind, namespace, name)) ? true : undefined), 30_000, `${namespace}/${name} Ready`);
    }
    // A rotation whose replaced key stays retiring (grace 1h), and a repair under way.
    await suite.objects.patchNamespacedCustomObject(
      { group, version, namespace, plural: 'projectapikeys', name: 'rotating', body: { metadata: { annotations: { 'keys.neon.dev/rotate': 'now' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(
      async () => (((await read('ProjectApiKey', namespace, 'rotating')).status?.retiringKeys?.length ?? 0) > 0 ? true : undefined),
      30_000,
      `${namespace}/rotating retiring`,
    );
    await suite.core.deleteNamespacedSecret({ namespace, name: 'repaired' });
    const held = (await keysOf(namespace)).length;
    expect(held).toBeGreaterThanOrEqual(4);

    const started = Date.now();
    await suite.core.deleteNamespace({ name: namespace });
    await eventually(
      async () =>
        await suite.core.readNamespace({ name: namespace }).then(
          () => undefined,
          (e: { code?: number }) => (e.code === 404 ? true : undefined),
        ),
      120_000,
      `namespace ${namespace} gone`,
    );
    figures.push({ mode, seconds: (Date.now() - started) / 1000, keys: held });
    // Every key it ever held: none live (a repair's new key included, if it was made).
    expect(await keysOf(namespace)).toEqual([]);
  }

  for (const mode of ['issuer', 'namespace credentials'] as const) {
    it(
      `${mode}: ${ROUNDS} namespace(s) with Ready keys, a rotation and a repair in flight`,
      async () => {
        // The namespaces at once: each waits mostly on the namespace controller's own delays.
        await Promise.all(namespaces[mode].map((namespace) => round(mode, namespace)));
      },
      60_000 + ROUNDS * 150_000,
    );
  }
});
