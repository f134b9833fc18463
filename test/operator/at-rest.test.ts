// At rest it costs nothing (issue 14): with every key Ready and nothing changing, a drift pass makes
// no apiserver request (it decides from the informers' caches and the platform's list: at-rest.ts),
// and drift is still caught from that state, by what is meant to catch it: a key revoked outside and
// a project moved out of the organization by the platform's lists (the drift check's, the operations
// poller's), a Secret deleted or edited by the Secret's watch. How soon is the drift cache's to keep
// (one list per interval, on a manual clock: keys/observing/drift-gone.test.ts), not this suite's
// to time. A change of a project's operations costs each of its keys one request (a JSON patch of
// status: operations-patch.ts), and the keys of other projects none. A real kube-apiserver, the emulator
// over HTTP, the operator in-process; the requests are counted where the operator's kube client
// signs them (every request it sends, informers' included), not timed.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions, type RequestContext } from '@kubernetes/client-node';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { settledCondition } from '../../src/operator/keys/observing/operations-poller.ts';
import { PlatformClient } from '../../src/platform/index.ts';
import { emulatorAdmin, eventually, operatorKubeConfig, intentSettled, onEveryRequest, untilAtRest } from './support.ts';
import { type Condition, group, operatorSuite, PLURALS, version } from './fixture.ts';

const DRIFT_MS = 2_000;
/** How long a wait below may take before its test fails saying what it waited for (not a bound on the operator: see above). */
const WAIT_MS = 45_000;

/** A condition as this suite compares it whole: the fixture's, with what every status write sets. */
type StatusCondition = Condition & { observedGeneration?: number; lastTransitionTime?: string };
interface Resource {
  metadata: { annotations?: Record<string, string>; generation?: number };
  status?: {
    keyId?: number;
    conditions?: StatusCondition[];
    operations?: { id: string; action: string; status: string; failuresCount: number; updatedAt: string }[];
  };
}
type Kind = 'ApiKey' | 'ProjectApiKey';

describe('at rest: no apiserver request per drift pass, and drift still caught', () => {
  let namespace: string;
  const records: ReconcileRecord[] = [];
  /** Every request the operator's kube client sent: method and URL. */
  const sent: { method: string; url: string }[] = [];
  /** Runs before a request of the operator's kube client is sent (a concurrent edit made at that moment). */
  let beforeSend: ((context: RequestContext) => Promise<void>) | undefined;
  const ORG_KEYS = 8;
  const PROJECT_KEYS = 4;

  const create = async (kind: Kind, name: string, spec: Record<string, unknown>): Promise<void> => {
    await suite.apply(kind, { name, namespace }, spec);
  };
  const get = (kind: Kind, name: string): Promise<Resource> => suite.get<Resource>(PLURALS[kind], name);
  const condition = (r: Resource, type: string): StatusCondition | undefined => r.status?.conditions?.find((c) => c.type === type);
  const readyOther = (kind: Kind, name: string, notKeyId: number, timeoutMs: number): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(kind, name);
        return condition(r, 'Ready')?.status === 'True' && r.status?.keyId !== notKeyId && intentSettled(r) ? r : undefined;
      },
      timeoutMs,
      `${kind} ${name} Ready with a key other than ${notKeyId}`,
    );
  const atRest = (name: string): boolean => records.some((r) => r.namespace === namespace && r.name === name && r.atRest === true);
  /**
   * What took `name` out of rest after records[from]: the change that its first pass since then not
   * decided at rest found (at-rest.ts). A pass is recorded when it ends, after its status write.
   */
  const wokenBy = async (from: number, name: string): Promise<ReconcileRecord['restBroken']> =>
    (
      await eventually(
        async () => records.slice(from).find((r) => r.namespace === namespace && r.name === name && r.atRest !== true),
        WAIT_MS,
        `the pass that took ${name} out of rest`,
      )
    ).restBroken;
  /** Requests other than watches (a watch is one long request per informer, O(1), not per key). */
  const requestsSince = (from: number): { method: string; url: string }[] => sent.slice(from).filter((r) => !new URL(r.url).searchParams.has('watch'));
  const orgKeys = Array.from({ length: ORG_KEYS }, (_, i) => `org-${i}`);
  const projectKeys = Array.from({ length: PROJECT_KEYS }, (_, i) => `project-${i}`);

  const suite = operatorSuite({
    namespaces: ['at-rest'],
    // Time scale 1: an operation's states last seconds, longer than a poll (5 s) for a failed one.
    emulator: { timeScale: 1 },
    operator: async (s) => {
      namespace = s.namespace;
      const config = await operatorKubeConfig(s.cp);
      onEveryRequest(config, async (context) => {
        sent.push({ method: context.getHttpMethod(), url: context.getUrl() });
        await beforeSend?.(context);
      });
      return {
        kubeConfig: config,
        namespace,
        workers: 4,
        driftIntervalMs: DRIFT_MS,
        logger: createLogger({ level: 'silent' }),
        identity: 'at-rest',
        onReconcile: (record) => records.push(record),
      };
    },
  });

  // The keys, made once the operator runs.
  beforeAll(async () => {
    const projects = suite.emulator.bootstrap.projects.filter((p) => p.organizationId === suite.org);
    for (const name of orgKeys)
      await create('ApiKey', name, { scope: 'Organization', organizationId: suite.org, keyName: name, credentialsSecretRef: { name: 'neon-admin' } });
    for (const [i, name] of projectKeys.entries()) {
      const project = projects[i % 2];
      if (project === undefined) throw new Error('the seed has fewer than two org projects');
      await create('ProjectApiKey', name, { organizationId: suite.org, projectId: project.id, keyName: name, credentialsSecretRef: { name: 'neon-admin' } });
    }
    // The operations of each project polled, mirrored and settled (a first snapshot is a change, not
    // a rest; so is the end of an operation the seed started: at time scale 1 it runs for seconds).
    await eventually(
      async () => {
        for (const name of projectKeys) if (condition(await get('ProjectApiKey', name), 'OperationsSettled')?.status !== 'True') return undefined;
        return true;
      },
      60_000,
      'OperationsSettled True on every ProjectApiKey',
    );
    // Every key at rest: over the last drift interval, every pass of every key decided from the
    // caches (the first uses of the project keys by the operations pollers are recorded by then).
    await untilAtRest(records, namespace, [...orgKeys, ...projectKeys], DRIFT_MS, 90_000);
  }, 120_000);

  it(`drift passes of ${ORG_KEYS + PROJECT_KEYS} Ready keys send no request to the apiserver`, async () => {
    const from = sent.length;
    const recordsFrom = records.length;
    // Two drift passes of every key, however long the machine takes to run them.
    const passes = await eventually(
      async () => {
        const since = records.slice(recordsFrom).filter((r) => r.namespace === namespace);
        const each = [...orgKeys, ...projectKeys].map((name) => since.filter((r) => r.name === name).length);
        return each.every((n) => n >= 2) ? since : undefined;
      },
      WAIT_MS,
      'two drift passes of every key',
    );
    // Every key had its drift passes, all decided at rest.
    expect(passes.length).toBeGreaterThanOrEqual(2 * (ORG_KEYS + PROJECT_KEYS));
    expect(passes.filter((r) => r.atRest !== true)).toEqual([]);
    expect(passes.every((r) => r.actions.join() === 'InSync' && r.result === 'Done')).toBe(true);
    // Not one request: no GET of a resource or a Secret, no status patch, no event.
    expect(requestsSince(from)).toEqual([]);
  });

  describe('an operations change of a project', () => {
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    /** project-0 and project-2 are of the first project; project-1 and project-3 of the second. */
    const mine = ['project-0', 'project-2'];
    const firstProject = (): { id: string } => {
      const project = suite.emulator.bootstrap.projects.filter((p) => p.organizationId === suite.org)[0];
      if (project === undefined) throw new Error('no org project in the seed');
      return project;
    };
    const platform = (): PlatformClient => new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: suite.adminKey });
    const path = (r: { method: string; url: string }): string => `${r.method} ${new URL(r.url).pathname}`;
    const ofKey =
      (name: string) =>
      (r: { url: string }): boolean =>
        new URL(r.url).pathname.endsWith(`/projectapikeys/${name}`) || new URL(r.url).pathname.endsWith(`/projectapikeys/${name}/status`);
    const since = (from: number, name: string): ReconcileRecord[] => records.slice(from).filter((r) => r.namespace === namespace && r.name === name);

    /** What a full pass writes from the project's operations as the platform lists them now (operations-poller.ts). */
    const expected = async (): Promise<{ settled: ReturnType<typeof settledCondition>; operations: unknown }> => {
      const { operations } = await platform().listOperations(firstProject().id, { limit: 10 });
      return {
        settled: settledCondition(operations),
        operations: operations.map((op) => ({ id: op.id, action: op.action, status: op.status, failuresCount: op.failures_count, updatedAt: op.updated_at })),
      };
    };

    /** Waits until every key of the project mirrors `ids` finished and rests again; the OperationsSettled reasons seen on the way. */
    const settledWith = async (ids: string[], recordsFrom: number): Promise<Set<string>> => {
      const seen = new Set<string>();
      await eventually(
        async () => {
          for (const name of mine) {
            const r = await get('ProjectApiKey', name);
            const c = condition(r, 'OperationsSettled');
            if (c !== undefined) seen.add(`${c.status} ${c.reason}`);
            const finished = ids.every((id) => r.status?.operations?.some((o) => o.id === id && o.status === 'finished'));
            if (!finished || c?.status !== 'True') return undefined;
            // At rest again after the last change: its latest pass decided from the caches.
            if (since(recordsFrom, name).at(-1)?.atRest !== true) return undefined;
          }
          return true;
        },
        60_000,
        `${mine.join(', ')} mirroring ${ids.join(', ')} finished, at rest again`,
      );
      return seen;
    };

    /** Per key of the project: the passes an operations change woke, and the requests it sent for that key. */
    const costs = (from: number, recordsFrom: number, name: string): { changes: ReconcileRecord[]; requests: string[] } => ({
      changes: since(recordsFrom, name).filter((r) => r.restBroken === 'operations'),
      requests: requestsSince(from).filter(ofKey(name)).map(path),
    });

    it('costs each key of the project ONE request per change (a JSON patch of status), no read, keys of other projects none', async () => {
      const from = sent.length;
      const recordsFrom = records.length;
      const startedAt = new Date(Date.now() - 1_000).toISOString();
      // An operation that fails once, is retried 5 s later and finishes (emulator time scale 1):
      // seen running or failed (False), then settled (True).
      await emulatorAdmin(suite.emulator.adminUrl, 'POST', `/projects/${firstProject().id}/fail-next-operations`, { count: 1, outcome: 'failed' });
      const { operations } = await platform().createBranch(firstProject().id);
      const seen = await settledWith(
        operations.map((o) => o.id),
        recordsFrom,
      );
      expect([...seen].some((s) => s.startsWith('False'))).toBe(true);
      for (const name of mine) {
        const { changes, requests } = costs(from, recordsFrom, name);
        // The operation started and finished: at least two changes, each one PATCH of status.
        expect(changes.length).toBeGreaterThanOrEqual(2);
        expect({ name, requests }).toEqual({
          name,
          requests: changes.map(() => `PATCH /apis/${group}/${version}/namespaces/${namespace}/projectapikeys/${name}/status`),
        });
        expect(changes.filter((r) => r.operationsPatched !== true)).toEqual([]);
        // Nothing else sent this key the full way.
        expect(since(recordsFrom, name).filter((r) => r.restBroken !== undefined && r.restBroken !== 'operations')).toEqual([]);
      }
      // Not one other request: no GET of a resource or Secret, no event, nothing for the keys of other projects.
      expect(
        requestsSince(from)
          .filter((r) => !mine.some((name) => ofKey(name)(r)))
          .map(path),
      ).toEqual([]);
      // What it wrote is what a full pass writes: the condition of the operations listed, the key's generation.
      const want = await expected();
      for (const name of mine) {
        const r = await get('ProjectApiKey', name);
        expect(condition(r, 'OperationsSettled')).toEqual({
          type: 'OperationsSettled',
          ...want.settled,
          observedGeneration: r.metadata.generation,
          lastTransitionTime: expect.any(String),
        });
        // False, then True: lastTransitionTime moved with the status.
        expect(condition(r, 'OperationsSettled')?.lastTransitionTime?.localeCompare(startedAt.replace(/\.\d+Z$/, 'Z'))).toBeGreaterThanOrEqual(0);
        expect(r.status?.operations).toEqual(want.operations);
      }
      // And a full pass of the same key finds nothing to write: its status is exactly what it would write.
      const fullFrom = sent.length;
      const fullRecordsFrom = records.length;
      await suite.objects.patchNamespacedCustomObject(
        { group, version, namespace, plural: 'projectapikeys', name: 'project-0', body: { metadata: { annotations: { 'test/touched': 'yes' } } } },
        merge,
      );
      await eventually(
        async () => (since(fullRecordsFrom, 'project-0').some((r) => r.restBroken === 'resource' && r.result === 'Done') ? true : undefined),
        20_000,
        'project-0 read fresh',
      );
      const full = requestsSince(fullFrom).filter(ofKey('project-0')).map(path);
      expect(full).toContain(`GET /apis/${group}/${version}/namespaces/${namespace}/projectapikeys/project-0`);
      expect(full.filter((r) => r.startsWith('PATCH') || r.startsWith('PUT'))).toEqual([]);
    }, 90_000);

    it('falls back to the full pass when the resource changed under the patch: no lost write, the same status', async () => {
      // Rest again first (project-0 was touched by the previous test).
      await eventually(
        async () => (mine.every((name) => records.filter((r) => r.namespace === namespace && r.name === name).at(-1)?.atRest === true) ? true : undefined),
        20_000,
        'the project keys at rest',
      );
      const from = sent.length;
      const recordsFrom = records.length;
      let edited = false;
      // Right before the operator's JSON patch of project-2 leaves, someone else edits project-2: the
      // version the patch tests is no longer the resource's.
      beforeSend = async (context): Promise<void> => {
        if (
          context.getHttpMethod() !== 'PATCH' ||
          !new URL(context.getUrl()).pathname.endsWith('/projectapikeys/project-2/status') ||
          !String(context.getBody()).startsWith('[')
        )
          return;
        beforeSend = undefined;
        await suite.objects.patchNamespacedCustomObject(
          { group, version, namespace, plural: 'projectapikeys', name: 'project-2', body: { metadata: { annotations: { 'test/concurrent': 'kept' } } } },
          merge,
        );
        edited = true;
      };
      try {
        const { operations } = await platform().createBranch(firstProject().id);
        await settledWith(
          operations.map((o) => o.id),
          recordsFrom,
        );
      } finally {
        beforeSend = undefined;
      }
      expect(edited).toBe(true);
      // The patch did not land (its test failed): the same pass read project-2 fresh and wrote the status.
      const fellBack = since(recordsFrom, 'project-2').filter((r) => r.restBroken === 'operations' && r.operationsPatched !== true);
      expect(fellBack.length).toBeGreaterThanOrEqual(1);
      const requests = requestsSince(from).filter(ofKey('project-2')).map(path);
      const base = `/apis/${group}/${version}/namespaces/${namespace}/projectapikeys/project-2`;
      expect(requests.slice(0, 3)).toEqual([`PATCH ${base}/status`, `GET ${base}`, `PUT ${base}/status`]);
      const r = await get('ProjectApiKey', 'project-2');
      expect(r.metadata.annotations?.['test/concurrent']).toBe('kept');
      const want = await expected();
      expect(condition(r, 'OperationsSettled')).toEqual({
        type: 'OperationsSettled',
        ...want.settled,
        observedGeneration: r.metadata.generation,
        lastTransitionTime: expect.any(String),
      });
      expect(r.status?.operations).toEqual(want.operations);
      // project-0 was not edited: one request per change, as before.
      const { changes, requests: other } = costs(from, recordsFrom, 'project-0');
      expect(changes.length).toBeGreaterThanOrEqual(1);
      expect(other).toEqual(changes.map(() => `PATCH /apis/${group}/${version}/namespaces/${namespace}/projectapikeys/project-0/status`));
    }, 90_000);
  });

  it('a key revoked outside is caught by the drift check, from rest', async () => {
    const before = await get('ApiKey', 'org-0');
    const keyId = before.status?.keyId ?? -1;
    expect(atRest('org-0')).toBe(true);
    const platform = new PlatformClient({ baseUrl: suite.emulator.baseUrl, apiKey: suite.adminKey, retry: { maxAttempts: 1 } });
    const from = records.length;
    await platform.revokeOrganizationKey(suite.org, keyId);
    // Nothing in the cluster changed: only the platform's key list, which the drift check reads, shows it.
    await readyOther('ApiKey', 'org-0', keyId, WAIT_MS);
    expect(await wokenBy(from, 'org-0')).toBe('key absent');
    const events = await suite.core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=org-0' });
    expect(events.items.map((e) => e.reason)).toContain('RevokedExternally');
  });

  it('a Secret deleted is caught by its watch, from rest', async () => {
    const keyId = (await get('ApiKey', 'org-1')).status?.keyId ?? -1;
    const from = records.length;
    await suite.core.deleteNamespacedSecret({ namespace, name: 'org-1' });
    await readyOther('ApiKey', 'org-1', keyId, WAIT_MS);
    expect(await wokenBy(from, 'org-1')).toBe('secret');
    const events = await suite.core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=org-1' });
    expect(events.items.map((e) => e.reason)).toContain('SecretMissing');
  });

  it('a Secret edited is caught by its watch, from rest', async () => {
    const keyId = (await get('ApiKey', 'org-2')).status?.keyId ?? -1;
    const from = records.length;
    await suite.core.patchNamespacedSecret({
      namespace,
      name: 'org-2',
      body: [{ op: 'replace', path: '/data/apiKey', value: Buffer.from('edited by hand').toString('base64') }],
    });
    const repaired = await readyOther('ApiKey', 'org-2', keyId, WAIT_MS);
    expect(await wokenBy(from, 'org-2')).toBe('secret');
    const secret = await suite.core.readNamespacedSecret({ namespace, name: 'org-2' });
    const value = Buffer.from(secret.data?.apiKey ?? '', 'base64').toString('utf8');
    expect(value).not.toBe('edited by hand');
    expect(repaired.status?.keyId).not.toBe(keyId);
    const events = await suite.core.listNamespacedEvent({ namespace, fieldSelector: 'involvedObject.name=org-2' });
    expect(events.items.map((e) => e.reason)).toContain('SecretTampered');
  });

  it("a project moved out of the organization is caught from the platform's lists, from rest", async () => {
    const project = suite.emulator.bootstrap.projects.filter((p) => p.organizationId === suite.org)[1];
    if (project === undefined) throw new Error('the seed has fewer than two org projects');
    expect(atRest('project-1')).toBe(true);
    const from = records.length;
    await emulatorAdmin(suite.emulator.adminUrl, 'POST', `/projects/${project.id}/transfer`, { organizationId: null });
    const moved = await eventually(
      async () => {
        const r = await get('ProjectApiKey', 'project-1');
        return condition(r, 'KeyIssued')?.reason === 'ProjectNotInOrganization' ? r : undefined;
      },
      WAIT_MS,
      'project-1 ProjectNotInOrganization',
    );
    expect(condition(moved, 'Ready')?.status).toBe('False');
    // Nothing in the cluster changed: the platform's side shows it, the organization's project list
    // the drift check reads (project gone) or, first at times, the project's operations the poller
    // lists (operations: they are no longer the organization's to list).
    expect(['project gone', 'operations']).toContain(await wokenBy(from, 'project-1'));
  });

  it('a credentials Secret replaced sends its resources the full way (a change, not a rest)', async () => {
    const from = records.length;
    await suite.core.patchNamespacedSecret({ namespace, name: 'neon-admin', body: [{ op: 'add', path: '/metadata/labels', value: { touched: 'yes' } }] });
    // Same key, new resourceVersion: each resource that names it is read fresh once, then rests again.
    await eventually(
      async () => {
        const after = records.slice(from).filter((r) => r.namespace === namespace && r.name === 'org-5');
        return after.some((r) => r.atRest !== true) && after.some((r) => r.atRest === true) ? true : undefined;
      },
      WAIT_MS,
      'org-5 read fresh, then at rest again',
    );
  });
});
