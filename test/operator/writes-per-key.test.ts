// A new key costs at most 4 apiserver writes (issue 14), events included: the finalizer with the
// signed intent (one metadata update), the Secret, the status (the key recorded, which fulfils the
// intent; a ProjectApiKey's operations mirrored in the same patch), the KeyIssued event. Fewer
// writes also shorten the apiserver's watch backlog after a wave of new keys. A real kube-apiserver,
// the emulator over HTTP, the operator in-process; the requests are counted where the operator's
// kube client signs them (every request it sends), from the creates until every key is at rest.
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { eventually, onEveryRequest, operatorKubeConfig, untilAtRest } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const DRIFT_MS = 2_000;
/** The budget: finalizer + intent, Secret, status, KeyIssued event. */
const MAX_WRITES_PER_KEY = 4;
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

interface Condition {
  type: string;
  status: string;
  reason: string;
}
interface Resource {
  metadata: { annotations?: Record<string, string>; finalizers?: string[] };
  status?: { keyId?: number; keyName?: string; conditions?: Condition[]; operations?: unknown[] };
}
interface Sent {
  method: string;
  url: string;
  body: string;
}

describe('writes per issued key', () => {
  const records: ReconcileRecord[] = [];
  const sent: Sent[] = [];
  const ORG_KEYS = 6;
  const PROJECT_KEYS = 6;
  const orgKeys = Array.from({ length: ORG_KEYS }, (_, i) => `org-${i}`);
  const projectKeys = Array.from({ length: PROJECT_KEYS }, (_, i) => `project-${i}`);

  const plural = (kind: string): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');
  const get = async (kind: string, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind), name })) as Resource;
  const condition = (r: Resource, type: string): Condition | undefined => r.status?.conditions?.find((c) => c.type === type);

  /**
   * Which key resource a write is about: the resource (and its status), its Secret (named after it
   * here), or an event (by its involvedObject). Anything else in the namespace is 'other'.
   */
  const subject = (request: Sent): string => {
    const path = new URL(request.url).pathname;
    const resource = new RegExp(`/namespaces/${suite.namespace}/(?:apikeys|projectapikeys|secrets)/([^/]+)`).exec(path);
    if (resource !== null) return resource[1] ?? 'other';
    // A POST names its object in its body: an event by its involvedObject, a Secret by its name.
    if (path.endsWith(`/namespaces/${suite.namespace}/events`) || path.endsWith(`/namespaces/${suite.namespace}/secrets`)) {
      try {
        const body = JSON.parse(request.body) as { involvedObject?: { name?: string }; metadata?: { name?: string } };
        return (path.endsWith('/events') ? body.involvedObject?.name : body.metadata?.name) ?? 'other';
      } catch {
        return 'other';
      }
    }
    return 'other';
  };
  const shown = (request: Sent): string => {
    const path = new URL(request.url).pathname;
    if (!path.endsWith('/events')) return `${request.method} ${path}`;
    const reason = (JSON.parse(request.body) as { reason?: string }).reason;
    return `${request.method} ${path} (${reason ?? '?'})`;
  };

  let writesFrom = 0;

  const suite = operatorSuite({
    namespaces: ['writes'],
    operator: async (s) => {
      const config = await operatorKubeConfig(s.cp);
      onEveryRequest(config, (context) => {
        const body = context.getBody();
        sent.push({ method: context.getHttpMethod(), url: context.getUrl(), body: typeof body === 'string' ? body : '' });
      });
      return {
        kubeConfig: config,
        namespace: s.namespace,
        workers: 4,
        driftIntervalMs: DRIFT_MS,
        logger: createLogger({ level: 'silent' }),
        identity: 'writes',
        onReconcile: (record) => records.push(record),
      };
    },
  });

  beforeAll(async () => {
    await eventually(async () => (suite.operator.ready() ? true : undefined), 30_000, 'operator ready');
    writesFrom = sent.length;
    const projects = suite.emulator.bootstrap.projects.filter((p) => p.organizationId === suite.org);
    const create = async (kind: 'ApiKey' | 'ProjectApiKey', name: string, spec: Record<string, unknown>): Promise<void> => {
      await suite.objects.createNamespacedCustomObject({
        group,
        version,
        namespace: suite.namespace,
        plural: plural(kind),
        body: { apiVersion: `${group}/${version}`, kind, metadata: { name, namespace: suite.namespace }, spec },
      });
    };
    await Promise.all([
      ...orgKeys.map((name) =>
        create('ApiKey', name, { scope: 'Organization', organizationId: suite.org, keyName: name, credentialsSecretRef: { name: 'neon-admin' } }),
      ),
      ...projectKeys.map((name, i) => {
        const project = projects[i % 2];
        if (project === undefined) throw new Error('the seed has fewer than two org projects');
        return create('ProjectApiKey', name, { organizationId: suite.org, projectId: project.id, keyName: name, credentialsSecretRef: { name: 'neon-admin' } });
      }),
    ]);
    // Issued, mirrored, and then at rest: every write the new keys cause is in by then (a second
    // status write of the operations mirror, a status written by the first drift pass).
    await eventually(
      async () => {
        for (const name of orgKeys) if (condition(await get('ApiKey', name), 'Ready')?.status !== 'True') return undefined;
        for (const name of projectKeys) {
          const r = await get('ProjectApiKey', name);
          if (condition(r, 'Ready')?.status !== 'True' || condition(r, 'OperationsSettled') === undefined) return undefined;
        }
        return true;
      },
      60_000,
      'every key Ready, every ProjectApiKey with OperationsSettled',
    );
    await untilAtRest(records, suite.namespace, [...orgKeys, ...projectKeys], DRIFT_MS, 60_000);
  }, 150_000);

  /**
   * A status patch whose only change from the resource's previous one is status.lastUsedAt /
   * lastUsedFromAddr: the key's use reported (usage.ts), not its issuing. The operations poller of a
   * project lists with one of its keys, which is thereby used moments after its creation.
   */
  const usageOnly = (previous: string | undefined, request: Sent): boolean => {
    if (previous === undefined || !new URL(request.url).pathname.endsWith('/status')) return false;
    const statusOf = (body: string): Record<string, unknown> => (JSON.parse(body) as { status: Record<string, unknown> }).status;
    const before = statusOf(previous);
    const after = statusOf(request.body);
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    const changed = [...keys].filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
    return changed.length > 0 && changed.every((k) => k === 'lastUsedAt' || k === 'lastUsedFromAddr');
  };

  it(`issuing ${ORG_KEYS} ApiKeys and ${PROJECT_KEYS} ProjectApiKeys costs at most ${MAX_WRITES_PER_KEY} apiserver writes per key, events included`, () => {
    const writes = sent.slice(writesFrom).filter((r) => WRITE_METHODS.has(r.method) && new URL(r.url).pathname.includes(`/namespaces/${suite.namespace}/`));
    const byKey = new Map<string, string[]>();
    const usage = new Map<string, string[]>();
    const lastStatus = new Map<string, string>();
    for (const w of writes) {
      const key = subject(w);
      if (usageOnly(lastStatus.get(key), w)) usage.set(key, [...(usage.get(key) ?? []), shown(w)]);
      else byKey.set(key, [...(byKey.get(key) ?? []), shown(w)]);
      if (new URL(w.url).pathname.endsWith('/status')) lastStatus.set(key, w.body);
    }
    const usageReport = [...usage].map(([key, list]) => `${key}: ${list.join('; ')}`).join('\n');
    process.stdout.write(`status writes that only report a use of the key (not counted as issuing):\n${usageReport || '(none)'}\n`);
    // At most one each, and only of ProjectApiKeys (the key the project's operations poller lists with).
    for (const [key, list] of usage) {
      expect(projectKeys).toContain(key);
      expect(list.length).toBe(1);
    }
    const report = [...byKey].map(([key, list]) => `${key}: ${list.length}\n  ${list.join('\n  ')}`).join('\n');
    // The figure of the issue, printed for docs/benchmarks.md.
    process.stdout.write(`writes per issued key (${writes.length} writes, ${ORG_KEYS + PROJECT_KEYS} keys):\n${report}\n`);
    // Reads, for the record (not budgeted): every GET of the window but watches.
    const reads = sent
      .slice(writesFrom)
      .filter((r) => r.method === 'GET' && !new URL(r.url).searchParams.has('watch') && new URL(r.url).pathname.includes(`/namespaces/${suite.namespace}/`));
    process.stdout.write(`reads (GET) from the creates until at rest: ${reads.length} for ${ORG_KEYS + PROJECT_KEYS} keys\n`);
    // Nothing written that is not about one of the keys (the namespace's own Secrets are the tenant's).
    expect(byKey.get('other') ?? []).toEqual([]);
    const over = [...byKey].filter(([, list]) => list.length > MAX_WRITES_PER_KEY);
    expect(over.length === 0 ? 'every key within budget' : `over ${MAX_WRITES_PER_KEY} writes:\n${report}`).toBe('every key within budget');
    // Each key was written at all (a count of 0 everywhere would pass the budget and prove nothing).
    for (const name of [...orgKeys, ...projectKeys]) expect(byKey.get(name)?.length ?? 0).toBeGreaterThanOrEqual(3);
  });

  it('reads: a new key is issued and rests with no read of itself or its Secret; the credentials Secret is read once per version', () => {
    const reads = sent
      .slice(writesFrom)
      .filter((r) => r.method === 'GET' && !new URL(r.url).searchParams.has('watch') && new URL(r.url).pathname.includes(`/namespaces/${suite.namespace}/`));
    const marker = `/namespaces/${suite.namespace}/`;
    const paths = reads.map((r) => {
      const path = new URL(r.url).pathname;
      return path.slice(path.indexOf(marker) + marker.length);
    });
    process.stdout.write(`reads from the creates until at rest (${reads.length}):\n  ${paths.join('\n  ') || '(none)'}\n`);
    // The credentials Secret had two versions in the window (as made, then with the finalizer): one read each at most.
    expect(paths.filter((p) => p === 'secrets/neon-admin').length).toBeLessThanOrEqual(2);
    // Nobody uses an organization key here: its create read neither it (the informer's copy) nor its
    // Secret (not in the cache: not there), and its first drift passes rested on what the create wrote.
    for (const name of orgKeys) {
      expect(paths.filter((p) => p === `apikeys/${name}` || p === `secrets/${name}`)).toEqual([]);
      const passes = records.filter((r) => r.namespace === suite.namespace && r.name === name);
      expect(passes.filter((r) => r.createSent)).toHaveLength(1);
      expect(passes.filter((r) => !r.createSent && r.atRest !== true && r.deferred !== true)).toEqual([]);
    }
    // A project key is used by its project's operations poller: the pass that reports the use reads it and its Secret, once.
    for (const name of projectKeys) expect(paths.filter((p) => p === `projectapikeys/${name}` || p === `secrets/${name}`).length).toBeLessThanOrEqual(2);
  });

  it('every key ended issued with its intent fulfilled, once each (one create per key)', async () => {
    for (const [kind, names] of [
      ['ApiKey', orgKeys],
      ['ProjectApiKey', projectKeys],
    ] as const) {
      for (const name of names) {
        const r = await get(kind, name);
        expect(r.metadata.finalizers).toContain('keys.neon.dev/finalizer');
        expect(r.status?.keyId).toBeDefined();
        const intent = r.metadata.annotations?.['keys.neon.dev/create-pending'];
        // Left in place and fulfilled (status records its attempt), or gone.
        if (intent !== undefined) expect((JSON.parse(intent) as { attempt: string }).attempt).toBe(r.status?.keyName);
      }
    }
    const creates = records.filter((r) => r.namespace === suite.namespace && r.createSent);
    expect(creates.length).toBe(ORG_KEYS + PROJECT_KEYS);
  });
});
