// A tenant edits its resource while the operator creates a key for it (hostile campaign, seed 24,
// in CI: a live key recorded by no resource). The window is between the intent's write and the
// status that records the new key: the POST, then the Secret. Whoever may edit the resource may
// write in it, and may replace the intent annotation with an old one of the same resource or a
// forged one. The new key must be recorded all the same, and nothing the edit put in the intent
// may revoke or record anything.
//
// The window is held open by a FAKE, named as such: a loopback proxy in front of the emulator that
// answers a create of a watched name only after the test made its edit (the key exists on the
// platform by then). Nothing else can make a real apiserver edit land inside that window every time.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator } from '../../src/emulator/server.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { startOperator, type RunningOperator } from '../../src/operator/manager.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import {
  createNamespace,
  customObjects,
  emulatorAdmin,
  eventually,
  installOperatorManifests,
  intentSettled,
  operatorKubeConfig,
  replaceCustomObject,
} from './support.ts';

const group = 'keys.neon.dev';
const version = 'v1alpha1';
const PENDING = 'keys.neon.dev/create-pending';
const PROJECT = 'quiet-river-00000001';
type Kind = 'ApiKey' | 'ProjectApiKey';
interface Resource {
  metadata: { name: string; uid: string; resourceVersion: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: Record<string, unknown>;
  status?: { keyId?: number; keyName?: string; conditions?: { type: string; status: string }[]; retiringKeys?: { keyId: number }[] };
}
interface AdminKey {
  id: number;
  name: string;
  revoked: boolean;
}

const plural = (kind: Kind): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');

describe('an edit of the resource while its key is created', () => {
  let cp: ControlPlane;
  let emulator: Emulator;
  let proxy: Server;
  let operator: RunningOperator;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let ns: string;
  let org: string;
  /** Creates of a key name starting with one of these wait, after the platform made the key, for the edit. */
  const during = new Map<string, () => Promise<void>>();
  const logLines: string[] = [];

  const keys = (): Promise<AdminKey[]> => emulatorAdmin<AdminKey[]>(emulator.adminUrl, 'GET', '/keys');
  const get = async (kind: Kind, name: string): Promise<Resource> =>
    (await objects.getNamespacedCustomObject({ group, version, namespace: ns, plural: plural(kind), name })) as Resource;
  /** Read, change, replace; again from a fresh read on a conflict (the operator writes too). */
  const update = (kind: Kind, name: string, change: (r: Resource) => void): Promise<void> =>
    replaceCustomObject<Resource>(objects, { group, version, namespace: ns, plural: plural(kind), name }, change);
  const ready = (r: Resource): boolean => r.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' && intentSettled(r);
  const until = (kind: Kind, name: string, test: (r: Resource) => boolean, what: string): Promise<Resource> =>
    eventually(
      async () => {
        const r = await get(kind, name);
        return test(r) ? r : undefined;
      },
      30_000,
      `${kind} ${name}: ${what}`,
    );
  const liveKeysOf = async (keyName: string): Promise<number[]> =>
    (await keys())
      .filter((k) => !k.revoked && new RegExp(`^${keyName}-[a-z0-9]{8}$`).test(k.name))
      .map((k) => k.id)
      .sort((a, b) => a - b);
  const recorded = (r: Resource): number[] =>
    [r.status?.keyId, ...(r.status?.retiringKeys ?? []).map((k) => k.keyId)].filter((id): id is number => id !== undefined);
  /** For `forMs` (several drift intervals): the live keys of the name are exactly the ones the resource records. */
  const onlyRecordedKeysLive = async (kind: Kind, name: string, keyName: string, forMs: number): Promise<void> => {
    const end = Date.now() + forMs;
    do {
      const before = await get(kind, name);
      const live = await liveKeysOf(keyName);
      const after = await get(kind, name);
      const known = new Set([...recorded(before), ...recorded(after)]);
      expect({ name, unrecorded: live.filter((id) => !known.has(id)) }).toEqual({ name, unrecorded: [] });
      await new Promise((resolve) => setTimeout(resolve, 200));
    } while (Date.now() < end);
  };
  const create = (kind: Kind, name: string, keyName: string): Promise<unknown> =>
    objects.createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: plural(kind),
      body: {
        apiVersion: `${group}/${version}`,
        kind,
        metadata: { name },
        spec:
          kind === 'ApiKey'
            ? { scope: 'Organization', organizationId: org, keyName, credentialsSecretRef: { name: 'neon-admin' } }
            : { organizationId: org, projectId: PROJECT, keyName, credentialsSecretRef: { name: 'neon-admin' } },
      },
    });

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    org = emulator.bootstrap.organizations[0]?.id ?? '';
    const aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    const upstream = new URL(emulator.baseUrl);
    proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on(
        'end',
        () =>
          void (async () => {
            const body = Buffer.concat(chunks);
            const headers: Record<string, string> = {};
            for (const h of ['authorization', 'content-type', 'accept']) if (req.headers[h] !== undefined) headers[h] = String(req.headers[h]);
            const answer = await fetch(`${upstream.origin}${req.url}`, { method: req.method ?? 'GET', headers, ...(body.length > 0 ? { body } : {}) });
            const text = await answer.text();
            if (req.method === 'POST' && answer.ok) {
              const name = (JSON.parse(body.toString('utf8')) as { key_name?: string }).key_name ?? '';
              const edit = [...during].find(([prefix]) => name.startsWith(`${prefix}-`));
              if (edit !== undefined) {
                during.delete(edit[0]);
                await edit[1]();
              }
            }
            res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
            res.end(text);
          })().catch(() => res.destroy()),
      );
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    objects = customObjects(cp.kubeConfig);
    core = cp.kubeConfig.makeApiClient(CoreV1Api);
    ns = await createNamespace(cp, 'edit-during-create');
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: aliceKey } } });
    operator = await startOperator({
      kubeConfig: await operatorKubeConfig(cp),
      platformBaseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${upstream.pathname}`,
      namespaces: [ns],
      workers: 2,
      driftIntervalMs: 1_500,
      pendingGraceMs: 2_000,
      maxBackoffMs: 4_000,
      logger: createLogger({
        level: 'info',
        destination: new Writable({
          write(chunk: Buffer, _enc, done) {
            logLines.push(chunk.toString('utf8'));
            done();
          },
        }),
      }),
      identity: 'edit-during-create-suite',
    });
  });

  afterAll(async () => {
    await operator?.stop();
    if (ns !== undefined) await core?.deleteNamespace({ name: ns }).catch(() => undefined);
    proxy?.closeAllConnections();
    await new Promise<void>((resolve) => (proxy === undefined ? resolve() : proxy.close(() => resolve())));
    await emulator?.close();
  });

  const cases: { kind: Kind; edit: string; change: (r: Resource, saved: string | undefined) => void }[] = [
    {
      kind: 'ApiKey',
      edit: 'a label',
      change: (r) => {
        r.metadata.labels = { ...r.metadata.labels, 'example.com/touched': 'yes' };
      },
    },
    {
      kind: 'ProjectApiKey',
      edit: 'a forged intent',
      change: (r) => {
        r.metadata.annotations = {
          ...r.metadata.annotations,
          [PENDING]: JSON.stringify({ attempt: `${r.spec.keyName as string}-abcdefgh`, startedAt: '2001-01-01T00:00:00Z', holder: 'gone' }),
        };
      },
    },
    {
      kind: 'ProjectApiKey',
      edit: "the resource's own first intent put back",
      change: (r, saved) => {
        r.metadata.annotations = { ...r.metadata.annotations, [PENDING]: saved! };
      },
    },
    {
      kind: 'ApiKey',
      edit: 'the intent removed',
      change: (r) => {
        delete r.metadata.annotations?.[PENDING];
      },
    },
  ];

  it.each(cases.map((c, i) => ({ ...c, i })))(
    'a repair (the Secret deleted) with $edit in its window: the new key is recorded, the replaced one revoked, none forgotten',
    async ({ kind, edit, change, i }) => {
      const name = `repair-${i}`;
      const keyName = `edc-repair-${i}`;
      await create(kind, name, keyName);
      const first = await until(kind, name, ready, 'Ready with key 1');
      const key1 = first.status!.keyId!;
      const saved = first.metadata.annotations?.[PENDING];
      expect(saved).toBeDefined();
      // The Secret deleted: the operator issues key 2 to replace key 1; the edit lands while the platform answers.
      let edited = false;
      during.set(keyName, async () => {
        await update(kind, name, (r) => change(r, saved));
        edited = true;
      });
      await core.deleteNamespacedSecret({ namespace: ns, name });
      const second = await until(kind, name, (r) => ready(r) && r.status?.keyId !== key1, 'Ready with key 2');
      expect({ edit, edited }).toEqual({ edit, edited: true });
      expect((await keys()).find((k) => k.id === key1)?.revoked).toBe(true);
      // Over several drift intervals: the one live key is the recorded one.
      await onlyRecordedKeysLive(kind, name, keyName, 5_000);
      expect(await liveKeysOf(keyName)).toEqual([(await get(kind, name)).status?.keyId]);
      expect((await get(kind, name)).status?.keyId).toBe(second.status?.keyId);
    },
    60_000,
  );

  // A first key has no earlier intent to put back.
  it.each(cases.map((c, i) => ({ ...c, i })).filter((c) => !c.edit.includes('put back')))(
    'a first key with $edit in its window: recorded, and the only live key of the resource',
    async ({ kind, edit, change, i }) => {
      const name = `first-${i}`;
      const keyName = `edc-first-${i}`;
      let edited = false;
      during.set(keyName, async () => {
        await update(kind, name, (r) => change(r, undefined));
        edited = true;
      });
      await create(kind, name, keyName);
      await until(kind, name, ready, 'Ready');
      expect({ edit, edited }).toEqual({ edit, edited: true });
      await onlyRecordedKeysLive(kind, name, keyName, 5_000);
      expect(await liveKeysOf(keyName)).toEqual([(await get(kind, name)).status?.keyId]);
    },
    60_000,
  );

  it('a rotation with a forged intent in its window: the new key recorded, the old one retiring, none forgotten', async () => {
    const kind = 'ProjectApiKey';
    const name = 'rotated';
    const keyName = 'edc-rotated';
    await create(kind, name, keyName);
    const key1 = (await until(kind, name, ready, 'Ready with key 1')).status!.keyId!;
    let edited = false;
    during.set(keyName, async () => {
      await update(kind, name, cases[1]!.change as (r: Resource) => void);
      edited = true;
    });
    await update(kind, name, (r) => {
      r.metadata.annotations = { ...r.metadata.annotations, 'keys.neon.dev/rotate': 'now' };
    });
    const rotated = await until(kind, name, (r) => r.status?.keyId !== key1 && r.status?.keyId !== undefined, 'rotated to key 2');
    expect(edited).toBe(true);
    expect(recorded(rotated)).toContain(key1);
    await onlyRecordedKeysLive(kind, name, keyName, 5_000);
  }, 60_000);

  it('a tenant editing in a loop through the window of a repair (with the intent removed) cannot make the record conflict again', async () => {
    const kind = 'ProjectApiKey';
    const name = 'looped';
    const keyName = 'edc-looped';
    await create(kind, name, keyName);
    const key1 = (await until(kind, name, ready, 'Ready with key 1')).status!.keyId!;
    let edits = 0;
    let stop = false;
    const loop = (async () => {
      while (!stop) {
        await update(kind, name, (r) => {
          delete r.metadata.annotations?.[PENDING];
          r.metadata.labels = { ...r.metadata.labels, 'example.com/edit': String(edits) };
        });
        edits++;
      }
    })();
    // The loop starts once the platform made key 2, and goes on until status records it.
    during.set(keyName, async () => {
      const first = edits;
      while (edits < first + 3) await new Promise((resolve) => setTimeout(resolve, 5));
    });
    await core.deleteNamespacedSecret({ namespace: ns, name });
    try {
      await until(kind, name, (r) => r.status?.keyId !== undefined && r.status.keyId !== key1, 'key 2 recorded while edited');
    } finally {
      stop = true;
      await loop;
    }
    expect(edits).toBeGreaterThan(3);
    await until(kind, name, ready, 'Ready with key 2');
    await onlyRecordedKeysLive(kind, name, keyName, 5_000);
    expect(await liveKeysOf(keyName)).toEqual([(await get(kind, name)).status?.keyId]);
  }, 60_000);

  it('deleting the resources revokes every key they made', async () => {
    for (const kind of ['ApiKey', 'ProjectApiKey'] as const) {
      await objects.deleteCollectionNamespacedCustomObject({ group, version, namespace: ns, plural: plural(kind) });
    }
    await eventually(async () => ((await keys()).some((k) => !k.revoked && k.name.startsWith('edc-')) ? undefined : true), 30_000, 'every edc- key revoked');
    expect(logLines.join('')).not.toMatch(/"level":"(error|fatal)"/);
    // Every edit met the record's write (a 409), and the record was written again on a fresh read.
    const recordedAgain = new Set(
      logLines.filter((l) => l.includes('recording the key on it as read afresh')).map((l) => (JSON.parse(l) as { name: string }).name),
    );
    expect([...recordedAgain].sort()).toEqual(['first-0', 'first-1', 'first-3', 'looped', 'repair-0', 'repair-1', 'repair-2', 'repair-3', 'rotated']);
  }, 60_000);
});
