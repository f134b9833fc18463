// At rest it costs nothing (issue 14): with every key Ready and nothing changing, a drift pass makes
// no apiserver request (it decides from the informers' caches and the platform's list: at-rest.ts),
// and drift is still caught, from that state, within a drift interval: a key revoked outside, a
// Secret deleted, a Secret edited, a project moved out of the organization. A real kube-apiserver,
// the emulator over HTTP, the operator in-process; the requests are counted where the operator's
// kube client signs them (every request it sends, informers' included), not timed.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type CustomObjectsApi, type RequestContext } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, emulatorAdmin, eventually, installOperatorManifests, operatorKubeConfig, intentSettled } from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const DRIFT_MS = 2_000;
/**
 * How long drift may take to be caught: the platform's list may be up to one interval old when a
 * pass reads it, and a pass comes one interval (±10% jitter) after the last; plus the repair
 * itself on a shared machine. The same bound held before the at-rest check.
 */
const CAUGHT_WITHIN_MS = 2 * 1.1 * DRIFT_MS + 6_000;

interface Condition { type: string; status: string; reason: string; message: string }
interface Resource { metadata: { annotations?: Record<string, string> }; status?: { keyId?: number; conditions?: Condition[] } }

describe('at rest: no apiserver request per drift pass, and drift still caught', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let operator: RunningOperator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let namespace: string;
  let org: string;
  let adminKey: string;
  const records: ReconcileRecord[] = [];
  /** Every request the operator's kube client sent: method and URL. */
  const sent: { method: string; url: string }[] = [];
  const ORG_KEYS = 8;
  const PROJECT_KEYS = 4;

  const plural = (kind: string): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
  const create = async (kind: 'ApiKey' | 'ProjectApiKey', name: string, spec: Record<string, unknown>): Promise<void> => {
    await objects.createNamespacedCustomObject({ group, version, namespace, plural: plural(kind), body: { apiVersion: `${group}/${version}`, kind, metadata: { name, namespace }, spec } });
  };
  const get = async (kind: string, name: string): Promise<Resource> => await objects.getNamespacedCustomObject({ group, version, namespace, plural: plural(kind), name }) as Resource;
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const readyOther = (kind: string, name: string, notKeyId: number, timeoutMs: number): Promise<Resource> => eventually(async () => {
    const r = await get(kind, name);
    return condition(r, 'Ready')?.status === 'True' && r.status?.keyId !== notKeyId && intentSettled(r) ? r : undefined;
  }, timeoutMs, `${kind} ${name} Ready with a key other than ${notKeyId}`);
  const atRest = (name: string): boolean => records.some((r) => r.namespace === namespace && r.name === name && r.atRest === true);
  /** Requests other than watches (a watch is one long request per informer, O(1), not per key). */
  const requestsSince = (from: number): { method: string; url: string }[] => sent.slice(from).filter((r) => !new URL(r.url).searchParams.has('watch'));
  const orgKeys = Array.from({ length: ORG_KEYS }, (_, i) => `org-${i}`);
  const projectKeys = Array.from({ length: PROJECT_KEYS }, (_, i) => `project-${i}`);

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    adminKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    namespace = await createNamespace(cp, 'at-rest');
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: adminKey } } });
    const config = await operatorKubeConfig(cp);
    // Every request of the operator's kube clients (API clients and informers) is signed here.
    const sign = config.applySecurityAuthentication.bind(config);
    config.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
      sent.push({ method: context.getHttpMethod(), url: context.getUrl() });
      await sign(context);
    };
    operator = await startOperator({
      kubeConfig: config,
      platformBaseUrl: emulator.baseUrl,
      namespace,
      workers: 4,
      driftIntervalMs: DRIFT_MS,
      logger: createLogger({ level: 'silent' }),
      identity: 'at-rest',
      onReconcile: (record) => records.push(record),
    });
    const projects = emulator.bootstrap.projects.filter((p) => p.organizationId === org);
    for (const name of orgKeys) await create('ApiKey', name, { scope: 'Organization', organizationId: org, keyName: name, credentialsSecretRef: { name: 'neon-admin' } });
    for (const [i, name] of projectKeys.entries()) {
      const project = projects[i % 2];
      if (project === undefined) throw new Error('the seed has fewer than two org projects');
      await create('ProjectApiKey', name, { organizationId: org, projectId: project.id, keyName: name, credentialsSecretRef: { name: 'neon-admin' } });
    }
    // The operations of each project polled and mirrored (a first snapshot is a change, not a rest).
    await eventually(async () => {
      for (const name of projectKeys) if (condition(await get('ProjectApiKey', name), 'OperationsSettled') === undefined) return undefined;
      return true;
    }, 60_000, 'OperationsSettled on every ProjectApiKey');
    // Every key at rest: over the last drift interval, every pass of every key decided from the
    // caches (the first uses of the project keys by the operations pollers are recorded by then).
    await eventually(async () => {
      const recent = records.filter((r) => r.namespace === namespace && r.startedAt >= Date.now() - 1.2 * DRIFT_MS);
      const names = new Set(recent.map((r) => r.name));
      return recent.every((r) => r.atRest === true) && [...orgKeys, ...projectKeys].every((n) => names.has(n)) ? true : undefined;
    }, 90_000, 'every key at rest');
  }, 120_000);

  afterAll(async () => {
    await operator?.stop();
    await core?.deleteNamespace({ name: namespace }).catch(() => undefined);
    await emulator?.close();
  });

  it(`drift passes of ${ORG_KEYS + PROJECT_KEYS} Ready keys send no request to the apiserver`, async () => {
    const from = sent.length;
    const startedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 3 * DRIFT_MS));
    const passes = records.filter((r) => r.namespace === namespace && r.startedAt >= startedAt);
    // Every key had its drift passes (about three each), all decided at rest.
    expect(passes.length).toBeGreaterThanOrEqual(2 * (ORG_KEYS + PROJECT_KEYS));
    expect(passes.filter((r) => r.atRest !== true)).toEqual([]);
    expect(passes.every((r) => r.actions.join() === 'InSync' && r.result === 'Done')).toBe(true);
    // Not one request: no GET of a resource or a Secret, no status patch, no event.
    expect(requestsSince(from)).toEqual([]);
  });

  it('a key revoked outside is caught within a drift interval, from rest', async () => {
    const before = await get('ApiKey', 'org-0');
    const keyId = before.status?.keyId ?? -1;
    expect(atRest('org-0')).toBe(true);
    const platform = new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: adminKey, retry: { maxAttempts: 1 } });
    await platform.revokeOrganizationKey(org, keyId);
    const started = Date.now();
    await readyOther('ApiKey', 'org-0', keyId, CAUGHT_WITHIN_MS);
    expect(Date.now() - started).toBeLessThan(CAUGHT_WITHIN_MS);
    const events = await core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=org-0' });
    expect(events.items.map((e) => e.reason)).toContain('RevokedExternally');
  });

  it('a Secret deleted is caught within a drift interval, from rest', async () => {
    const keyId = (await get('ApiKey', 'org-1')).status?.keyId ?? -1;
    await core.deleteNamespacedSecret({ namespace, name: 'org-1' });
    await readyOther('ApiKey', 'org-1', keyId, CAUGHT_WITHIN_MS);
    const events = await core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=org-1' });
    expect(events.items.map((e) => e.reason)).toContain('SecretMissing');
  });

  it('a Secret edited is caught within a drift interval, from rest', async () => {
    const keyId = (await get('ApiKey', 'org-2')).status?.keyId ?? -1;
    await core.patchNamespacedSecret({ namespace, name: 'org-2', body: [{ op: 'replace', path: '/data/apiKey', value: Buffer.from('edited by hand').toString('base64') }] });
    const repaired = await readyOther('ApiKey', 'org-2', keyId, CAUGHT_WITHIN_MS);
    const secret = await core.readNamespacedSecret({ namespace, name: 'org-2' });
    const value = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
    expect(value).not.toBe('edited by hand');
    expect(repaired.status?.keyId).not.toBe(keyId);
    const events = await core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=org-2' });
    expect(events.items.map((e) => e.reason)).toContain('SecretTampered');
  });

  it('a project moved out of the organization is caught within a drift interval, from rest', async () => {
    const project = emulator.bootstrap.projects.filter((p) => p.organizationId === org)[1];
    if (project === undefined) throw new Error('the seed has fewer than two org projects');
    expect(atRest('project-1')).toBe(true);
    await emulatorAdmin(emulator.adminUrl, 'POST', `/projects/${project.id}/transfer`, { organizationId: null });
    const moved = await eventually(async () => {
      const r = await get('ProjectApiKey', 'project-1');
      return condition(r, 'KeyIssued')?.reason === 'ProjectNotInOrganization' ? r : undefined;
    }, CAUGHT_WITHIN_MS, 'project-1 ProjectNotInOrganization');
    expect(condition(moved, 'Ready')?.status).toBe('False');
  });

  it('a credentials Secret replaced sends its resources the full way (a change, not a rest)', async () => {
    const from = records.length;
    await core.patchNamespacedSecret({ namespace, name: 'neon-admin', body: [{ op: 'add', path: '/metadata/labels', value: { touched: 'yes' } }] });
    // Same key, new resourceVersion: each resource that names it is read fresh once, then rests again.
    await eventually(async () => {
      const after = records.slice(from).filter((r) => r.namespace === namespace && r.name === 'org-5');
      return after.some((r) => r.atRest !== true) && after.some((r) => r.atRest === true) ? true : undefined;
    }, 4 * DRIFT_MS + 10_000, 'org-5 read fresh, then at rest again');
  });
});
