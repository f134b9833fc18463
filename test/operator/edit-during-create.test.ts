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
import { describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { emulatorAdmin, eventually, intentSettled, replaceCustomObject } from './support.ts';
import { capturedLog, group, operatorSuite, readUntil, version } from './fixture.ts';

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
  let proxy: Server;
  /** Creates of a key name starting with one of these wait, after the platform made the key, for the edit. */
  const during = new Map<string, () => Promise<void>>();
  const { logger, lines: logLines } = capturedLog('info');

  const keys = (): Promise<AdminKey[]> => emulatorAdmin<AdminKey[]>(suite.emulator.adminUrl, 'GET', '/keys');
  const get = async (kind: Kind, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind), name })) as Resource;
  /** Read, change, replace; again from a fresh read on a conflict (the operator writes too). */
  const update = (kind: Kind, name: string, change: (r: Resource) => void): Promise<void> =>
    replaceCustomObject<Resource>(suite.objects, { group, version, namespace: suite.namespace, plural: plural(kind), name }, change);
  const ready = (r: Resource): boolean => r.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True' && intentSettled(r);
  const until = (kind: Kind, name: string, test: (r: Resource) => boolean, what: string): Promise<Resource> =>
    readUntil(() => get(kind, name), test, 30_000, `${kind} ${name}: ${what}`);
  const liveKeysOf = async (keyName: string): Promise<number[]> =>
    (await keys())
      .filter((k) => !k.revoked && new RegExp(`^${keyName}-[a-z0-9]{8}$`).test(k.name))
      .map((k) => k.id)
      .sort((a, b) => a - b);
  const recorded = (r: Resource): number[] =>
    [r.status?.keyId, ...(r.status?.retiringKeys ?? []).map((k) => k.keyId)].filter((id): id is number => id !== undefined);
  /**
   * Each resource a case has settled stays watched until the last case (`everyWatchedHeld`), for at
   * least WATCH_MS (several drift intervals): at every sample, the live keys of its name are exactly
   * the ones it records. One loop samples them all, so the cases go on meanwhile instead of each
   * waiting out its own window.
   */
  const WATCH_MS = 5_000;
  const watched: { kind: Kind; name: string; keyName: string; since: number; onlyTheRecordedKey: boolean }[] = [];
  const unrecordedSeen: { name: string; unrecorded?: number[]; failed?: string }[] = [];
  let sweeps = 0;
  let watching: Promise<void> | undefined;
  let stopWatching = false;
  const sampleRecorded = async (kind: Kind, name: string, keyName: string): Promise<number[]> => {
    const before = await get(kind, name);
    const live = await liveKeysOf(keyName);
    const after = await get(kind, name);
    const known = new Set([...recorded(before), ...recorded(after)]);
    return live.filter((id) => !known.has(id));
  };
  /** Watches the resource from now on; `onlyTheRecordedKey`: once its window is over, its one live key is status.keyId. */
  const watchRecorded = async (kind: Kind, name: string, keyName: string, onlyTheRecordedKey: boolean): Promise<void> => {
    // A first sample now, as the case's own window began with one.
    expect({ name, unrecorded: await sampleRecorded(kind, name, keyName) }).toEqual({ name, unrecorded: [] });
    watched.push({ kind, name, keyName, since: Date.now(), onlyTheRecordedKey });
    watching ??= (async () => {
      while (!stopWatching) {
        for (const w of [...watched]) {
          // A read that fails fails the check, as it failed the case's own window.
          const unrecorded = await sampleRecorded(w.kind, w.name, w.keyName).catch(
            (error: unknown) => void unrecordedSeen.push({ name: w.name, failed: String(error) }),
          );
          if (unrecorded !== undefined && unrecorded.length > 0) unrecordedSeen.push({ name: w.name, unrecorded });
        }
        sweeps++;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    })();
  };
  /** Every watched resource sampled for WATCH_MS and more, never with a live key it does not record; then the settled ones' only key. */
  const everyWatchedHeld = async (): Promise<void> => {
    const last = Math.max(...watched.map((w) => w.since));
    await eventually(async () => (Date.now() >= last + WATCH_MS ? true : undefined), WATCH_MS + 5_000, 'the last window over');
    // A whole sweep begun after the last window ended.
    const from = sweeps;
    await eventually(async () => (sweeps >= from + 2 ? true : undefined), 30_000, 'a sweep after the last window');
    stopWatching = true;
    await watching;
    expect(unrecordedSeen).toEqual([]);
    for (const w of watched.filter((w) => w.onlyTheRecordedKey)) {
      expect({ name: w.name, live: await liveKeysOf(w.keyName) }).toEqual({ name: w.name, live: [(await get(w.kind, w.name)).status?.keyId] });
    }
  };
  const create = (kind: Kind, name: string, keyName: string): Promise<unknown> =>
    suite.objects.createNamespacedCustomObject({
      group,
      version,
      namespace: suite.namespace,
      plural: plural(kind),
      body: {
        apiVersion: `${group}/${version}`,
        kind,
        metadata: { name },
        spec:
          kind === 'ApiKey'
            ? { scope: 'Organization', organizationId: suite.org, keyName, credentialsSecretRef: { name: 'neon-admin' } }
            : { organizationId: suite.org, projectId: PROJECT, keyName, credentialsSecretRef: { name: 'neon-admin' } },
      },
    });

  const suite = operatorSuite({
    namespaces: ['edit-during-create'],
    before: async (s) => {
      const upstream = new URL(s.emulator.baseUrl);
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
    },
    operator: (s) => ({
      platformBaseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${new URL(s.emulator.baseUrl).pathname}`,
      namespaces: [s.namespace],
      workers: 2,
      driftIntervalMs: 1_500,
      pendingGraceMs: 2_000,
      maxBackoffMs: 4_000,
      logger,
      identity: 'edit-during-create-suite',
    }),
    after: async () => {
      proxy?.closeAllConnections();
      await new Promise<void>((resolve) => (proxy === undefined ? resolve() : proxy.close(() => resolve())));
    },
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
      await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name });
      const second = await until(kind, name, (r) => ready(r) && r.status?.keyId !== key1, 'Ready with key 2');
      expect({ edit, edited }).toEqual({ edit, edited: true });
      expect((await keys()).find((k) => k.id === key1)?.revoked).toBe(true);
      // Over several drift intervals (to the last case): the one live key is the recorded one.
      await watchRecorded(kind, name, keyName, true);
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
      await watchRecorded(kind, name, keyName, true);
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
    await watchRecorded(kind, name, keyName, false);
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
    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name });
    try {
      await until(kind, name, (r) => r.status?.keyId !== undefined && r.status.keyId !== key1, 'key 2 recorded while edited');
    } finally {
      stop = true;
      await loop;
    }
    expect(edits).toBeGreaterThan(3);
    await until(kind, name, ready, 'Ready with key 2');
    await watchRecorded(kind, name, keyName, true);
  }, 60_000);

  it("a first key whose Secret name a tenant's Secret takes in its window: the key just made is revoked, SecretConflict, that Secret untouched; deleted, a key is issued", async () => {
    const name = 'squatted';
    const keyName = 'edc-squatted';
    // The pass found no Secret (the cache showed none); the tenant's lands before the key's.
    during.set(keyName, async () => {
      await suite.core.createNamespacedSecret({ namespace: suite.namespace, body: { metadata: { name }, stringData: { note: 'the tenant made this' } } });
    });
    await create('ApiKey', name, keyName);
    const conflicted = await until(
      'ApiKey',
      name,
      (r) => r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'False' && (c as { reason?: string }).reason === 'SecretConflict') === true,
      'SecretConflict',
    );
    expect(conflicted.status?.keyId).toBeUndefined();
    expect(conflicted.metadata.annotations?.[PENDING]).toBeUndefined();
    // The key the platform made for it is revoked, and no other was made while the name is taken.
    const made = (await keys()).filter((k) => k.name.startsWith(`${keyName}-`));
    expect(made).toHaveLength(1);
    expect(made.every((k) => k.revoked)).toBe(true);
    const theirs = await suite.core.readNamespacedSecret({ namespace: suite.namespace, name });
    expect(Buffer.from(theirs.data?.note ?? '', 'base64').toString('utf8')).toBe('the tenant made this');
    expect(theirs.data?.apiKey).toBeUndefined();
    expect(theirs.metadata?.ownerReferences).toBeUndefined();
    // The name free again: a key is issued into the operator's own Secret, the only live one of the name.
    await suite.core.deleteNamespacedSecret({ namespace: suite.namespace, name });
    const issued = await until('ApiKey', name, ready, 'Ready once the Secret name is free');
    expect(await liveKeysOf(keyName)).toEqual([issued.status?.keyId]);
  }, 60_000);

  it(
    'over several drift intervals, no watched resource had a live key it did not record, and each settled one has its recorded key only',
    everyWatchedHeld,
    60_000,
  );

  it('deleting the resources revokes every key they made', async () => {
    stopWatching = true;
    await watching;
    for (const kind of ['ApiKey', 'ProjectApiKey'] as const) {
      await suite.objects.deleteCollectionNamespacedCustomObject({ group, version, namespace: suite.namespace, plural: plural(kind) });
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
