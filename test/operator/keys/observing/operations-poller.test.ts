// Operations mirroring against the real emulator over HTTP (docs/design.md section 4).
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { startEmulator, type Emulator } from '../../../../src/emulator/server.ts';
import {
  OperationsPollers,
  anyChanging,
  settledCondition,
  type OperationsClient,
  type OperationsSnapshot,
} from '../../../../src/operator/keys/observing/operations-poller.ts';
import {
  OPERATION_STATUS_CLASSES,
  PlatformClient,
  PlatformError,
  TERMINAL_OPERATION_STATUSES,
  isTerminalOperationStatus,
  operationStatusClass,
  type Operation,
  type OperationStatusClass,
} from '../../../../src/platform/index.ts';
import { loadOfficialDocument } from '../../../emulator/openapi-validator.ts';

const NOW = Date.parse('2026-11-22T21:00:00Z');
const op = (over: Partial<Operation>): Operation => ({
  id: 'op-1',
  project_id: 'p-1',
  branch_id: 'br-1',
  action: 'create_branch',
  status: 'finished',
  failures_count: 0,
  created_at: new Date(NOW - 12_000).toISOString(),
  updated_at: new Date(NOW - 1_000).toISOString(),
  ...over,
});

describe('settledCondition', () => {
  it.each<[string, Operation[], string, string, RegExp]>([
    ['no operations', [], 'True', 'AllTerminal', /^no recent operations$/],
    [
      'all terminal',
      [op({}), op({ id: 'b', status: 'skipped' }), op({ id: 'c', status: 'cancelled' })],
      'True',
      'AllTerminal',
      /^all 3 recent operations are terminal$/,
    ],
    ['one running', [op({ status: 'running' })], 'False', 'InProgress', /^create_branch running \(created at 2026-11-22T20:59:48Z\)$/],
    [
      'scheduling',
      [op({ action: 'start_compute', status: 'scheduling', created_at: new Date(NOW - 3_000).toISOString() })],
      'False',
      'InProgress',
      /^start_compute scheduling \(created at 2026-11-22T20:59:57Z\)$/,
    ],
    ['cancelling is not terminal', [op({ status: 'cancelling' })], 'False', 'InProgress', /^create_branch cancelling \(created at 2026-11-22T20:59:48Z\)$/],
    [
      'the oldest pending operation is named, with the count of others',
      [op({ id: 'new', action: 'start_compute', status: 'scheduling', created_at: new Date(NOW - 2_000).toISOString() }), op({ id: 'old', status: 'running' })],
      'False',
      'InProgress',
      /^create_branch running \(created at 2026-11-22T20:59:48Z\) \(and 1 more not settled\)$/,
    ],
    [
      'failed wins over running and names failures_count',
      [
        op({ id: 'r', action: 'start_compute', status: 'running', created_at: new Date(NOW - 300_000).toISOString() }),
        op({ id: 'f', status: 'failed', failures_count: 2 }),
      ],
      'False',
      'Failed',
      /^create_branch failed \(failures_count 2; created at 2026-11-22T20:59:48Z\), the platform retries it \(and 1 more not settled\)$/,
    ],
    // No age: the message must not change from one poll to the next (every change rewrites every key's status).
    [
      'no age, the time of creation',
      [op({ status: 'running', created_at: new Date(NOW - 300_000).toISOString() })],
      'False',
      'InProgress',
      /^create_branch running \(created at 2026-11-22T20:55:00Z\)$/,
    ],
    [
      'a creation time that is not one',
      [op({ status: 'running', created_at: 'yesterday' })],
      'False',
      'InProgress',
      /^create_branch running \(created at an unknown time\)$/,
    ],
    [
      'an operation that ended in error is not settled: False OperationError, whatever else is running or failed',
      [
        op({ id: 'r', status: 'running' }),
        op({ id: 'f', status: 'failed', failures_count: 1 }),
        op({ id: 'e', action: 'start_compute', status: 'error', failures_count: 1 }),
        op({ id: 'ok' }),
      ],
      'False',
      'OperationError',
      /^start_compute e ended in error \(failures_count 1\): the platform gave up on it and it will not change again; what depended on it did not happen \(and 2 more not settled\)$/,
    ],
    ['error alone', [op({ id: 'e', status: 'error', failures_count: 1 }), op({ id: 'ok' })], 'False', 'OperationError', /^create_branch e ended in error/],
    [
      'a status this operator does not know: Unknown UnknownOperationStatus, naming it',
      [op({ id: 'n', status: 'paused' }), op({ id: 'ok' })],
      'Unknown',
      'UnknownOperationStatus',
      /^create_branch n has status "paused", which this operator does not know: it cannot tell whether the operation settled$/,
    ],
    [
      'an unknown status beside a running one: still in progress',
      [op({ id: 'n', status: 'paused' }), op({ id: 'r', status: 'running' })],
      'False',
      'InProgress',
      /^create_branch running \(created at 2026-11-22T20:59:48Z\) \(and 1 more not settled\)$/,
    ],
    [
      'an unknown status is shown bounded and printable',
      [op({ id: 'n', status: `x\u0000${'y'.repeat(100)}` })],
      'Unknown',
      'UnknownOperationStatus',
      /has status "x\?y{38}\.\.\."/,
    ],
  ])('%s', (_name, operations, status, reason, message) => {
    const c = settledCondition(operations);
    expect(c.status).toBe(status);
    expect(c.reason).toBe(reason);
    expect(c.message).toMatch(message);
  });
});

describe('operation status classes', () => {
  it.each<[string, OperationStatusClass]>([
    ['scheduling', 'running'],
    ['running', 'running'],
    ['cancelling', 'running'],
    ['finished', 'settled'],
    ['skipped', 'settled'],
    ['cancelled', 'settled'],
    ['failed', 'retrying'],
    ['error', 'gaveUp'],
    ['paused', 'unknown'],
    ['', 'unknown'],
    ['constructor', 'unknown'],
    ['toString', 'unknown'],
    ['FINISHED', 'unknown'],
  ])('%s is %s', (status, cls) => {
    expect(operationStatusClass(status)).toBe(cls);
  });

  it('has a row for every status of the official OpenAPI document, and no other', () => {
    const schema = (loadOfficialDocument() as unknown as { components: { schemas: { OperationStatus: { enum: string[] } } } }).components.schemas
      .OperationStatus;
    expect(Object.keys(OPERATION_STATUS_CLASSES).sort()).toEqual([...schema.enum].sort());
  });

  it('terminal (a wait ends) is settled or given up; the fast cadence is for what will change soon', () => {
    expect([...TERMINAL_OPERATION_STATUSES].sort()).toEqual(['cancelled', 'error', 'finished', 'skipped']);
    expect(isTerminalOperationStatus('paused')).toBe(false);
    expect(anyChanging([{ status: 'error' }, { status: 'finished' }, { status: 'paused' }])).toBe(false);
    expect(anyChanging([{ status: 'error' }, { status: 'failed' }])).toBe(true);
    expect(anyChanging([{ status: 'scheduling' }])).toBe(true);
  });
});

let emulator: Emulator;
let client: PlatformClient;
let projectId: string;
let pollers: OperationsPollers | undefined;

beforeAll(async () => {
  emulator = await startEmulator({
    // create_branch runs 360 ms and a failed operation is retried after 1.5 s at this scale: wide
    // enough windows for 20 ms polls to see them on a busy machine. No control-plane activity, so
    // only the operations a test starts come and go.
    timeScale: 0.3,
    controlPlaneActivity: false,
  });
  const user = emulator.bootstrap.users.find((u) => u.personalKey !== undefined);
  if (user?.personalKey === undefined) throw new Error('the emulator bootstrap printed no personal key');
  const project = emulator.bootstrap.projects.find((p) => p.organizationId !== null && user.orgRoles[p.organizationId] !== undefined);
  if (project === undefined) throw new Error('no project of the bootstrap user');
  projectId = project.id;
  client = new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: user.personalKey });
});
afterAll(async () => {
  await emulator.close();
});
afterEach(async () => {
  await pollers?.stop();
  pollers = undefined;
});

interface Recorder {
  snapshots: OperationsSnapshot[];
  until(what: string, check: (s: OperationsSnapshot) => boolean, timeoutMs?: number): Promise<OperationsSnapshot>;
}

function recorder(): Recorder {
  const snapshots: OperationsSnapshot[] = [];
  return {
    snapshots,
    async until(what, check, timeoutMs = 20_000) {
      const deadline = performance.now() + timeoutMs;
      let seen = 0;
      for (;;) {
        for (; seen < snapshots.length; seen++) if (check(snapshots[seen]!)) return snapshots[seen]!;
        if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(snapshots.at(-1)?.settled)}`);
        await sleep(5);
      }
    },
  };
}

function counting(inner: OperationsClient): OperationsClient & { calls: number } {
  const c = {
    calls: 0,
    listOperations: (id: string, opts?: Parameters<OperationsClient['listOperations']>[1]) => {
      c.calls++;
      return inner.listOperations(id, opts);
    },
  };
  return c;
}

/** Waits until the project is settled, then forgets what was recorded so far. */
async function settledNow(rec: Recorder): Promise<void> {
  await rec.until('all operations terminal', (s) => s.settled.status === 'True');
  rec.snapshots.length = 0;
}

describe('OperationsPollers against the emulator', () => {
  it('a new branch makes the project InProgress, then AllTerminal once its operations finish', async () => {
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => client, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 200 });
    pollers.ensure(projectId, 'ns/key-a', 'k');
    await settledNow(rec);

    const created = await client.createBranch(projectId);
    expect(created.operations.map((o) => o.action).sort()).toEqual(['create_branch', 'start_compute']);
    const ids = new Set(created.operations.map((o) => o.id));

    const inProgress = await rec.until('InProgress', (s) => s.settled.reason === 'InProgress');
    expect(inProgress.settled.status).toBe('False');
    expect(inProgress.settled.message).toMatch(/^(create_branch running|start_compute (scheduling|running)) \(created at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)/);
    expect(inProgress.operations.some((o) => ids.has(o.id))).toBe(true);

    const done = await rec.until(
      'AllTerminal with the branch operations',
      (s) => s.settled.status === 'True' && [...ids].every((id) => s.operations.some((o) => o.id === id)),
    );
    expect(done.settled.reason).toBe('AllTerminal');
    for (const o of done.operations.filter((x) => ids.has(x.id))) {
      expect(o).toEqual({ id: o.id, action: expect.any(String), status: 'finished', failuresCount: 0, updatedAt: expect.any(String) });
    }
    expect(pollers.snapshot(projectId)?.settled.status).toBe('True');
    expect(done.operations.length).toBeLessThanOrEqual(10);
  });

  it('a failing operation reads Failed with its failures_count, and settles once the platform retries it', async () => {
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => client, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 200 });
    pollers.ensure(projectId, 'ns/key', 'k');
    await settledNow(rec);

    const res = await fetch(`${emulator.adminUrl}/projects/${projectId}/fail-next-operations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ count: 1 }),
    });
    expect(res.status).toBe(200);
    await client.createBranch(projectId);

    const failed = await rec.until('Failed', (s) => s.settled.reason === 'Failed');
    expect(failed.settled.status).toBe('False');
    expect(failed.settled.message).toMatch(/^\w+ failed \(failures_count 1; created at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\), the platform retries it/);
    expect(failed.operations.some((o) => o.status === 'failed' && o.failuresCount === 1)).toBe(true);
    const settled = await rec.until('settled after the retry', (s) => s.settled.status === 'True');
    expect(settled.operations.some((o) => o.failuresCount === 1 && o.status === 'finished')).toBe(true);
  });

  it('an operation the platform gave up on (status error) reads False OperationError, stays so, and is polled at the slow cadence', async () => {
    // Another project of the same user: an operation in error never changes again, so this
    // project never reads AllTerminal while it is among the recent ones (the other tests need that).
    const other = emulator.bootstrap.projects.find((p) => p.id !== projectId && p.organizationId !== null);
    if (other === undefined) throw new Error('no second project');
    const counted = counting(client);
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => counted, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 400 });
    pollers.ensure(other.id, 'ns/key', 'k');
    await settledNow(rec);
    const res = await fetch(`${emulator.adminUrl}/projects/${other.id}/fail-next-operations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ count: 2, outcome: 'error' }),
    });
    expect(res.status).toBe(200);
    await client.createBranch(other.id);
    const errored = await rec.until(
      'OperationError',
      (s) => s.settled.reason === 'OperationError' && !s.operations.some((o) => ['running', 'scheduling'].includes(o.status)),
    );
    expect(errored.settled.status).toBe('False');
    expect(errored.settled.message).toMatch(/^\w+ [0-9a-f-]+ ended in error \(failures_count 1\): the platform gave up on it/);
    expect(errored.operations.filter((o) => o.status === 'error').length).toBeGreaterThanOrEqual(1);
    // Final: nothing changes, so the poller goes slow (400 ms) and reports nothing new.
    const reported = rec.snapshots.length;
    const before = counted.calls;
    await sleep(1_000);
    expect(counted.calls - before).toBeLessThanOrEqual(4);
    expect(rec.snapshots.length).toBe(reported);
    expect(pollers.snapshot(other.id)?.settled.reason).toBe('OperationError');
  });

  it('an operation status the operator does not know reads Unknown UnknownOperationStatus, at the slow cadence, never InProgress forever', async () => {
    // A FAKE client: no emulated flow produces a status outside the document's enum, and this is
    // the case of a platform that added one after this operator was written.
    const listed: Operation[] = [op({ id: 'new-status', status: 'hibernating' }), op({ id: 'done' })];
    const fake = counting({ listOperations: async () => ({ operations: listed, pagination: { cursor: '' } }) } as unknown as OperationsClient);
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => fake, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 400 });
    pollers.ensure('p-fake', 'ns/key', 'k');
    const unknown = await rec.until('Unknown', (s) => s.settled.status === 'Unknown');
    expect(unknown.settled).toEqual({ status: 'Unknown', reason: 'UnknownOperationStatus', message: expect.stringContaining('"hibernating"') });
    await sleep(1_000);
    // Fast would be ~50 polls in a second; slow is at most 3 or 4.
    expect(fake.calls).toBeLessThanOrEqual(4);
    expect(rec.snapshots).toHaveLength(1);
  });

  it('an operation running over many polls is one snapshot: nothing in it changes from poll to poll (issue 14)', async () => {
    // A FAKE client: an operation that stays running (the emulator's finish within a second);
    // each snapshot rewrites the status of every ProjectApiKey of the project.
    const listed: Operation[] = [op({ id: 'slow', status: 'running', created_at: new Date(Date.now() - 5_000).toISOString() })];
    const fake = counting({ listOperations: async () => ({ operations: listed, pagination: { cursor: '' } }) } as unknown as OperationsClient);
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => fake, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 400 });
    pollers.ensure('p-running', 'ns/key', 'k');
    await rec.until('InProgress', (s) => s.settled.reason === 'InProgress');
    // Over more than a second (a new age in seconds would have been a new snapshot), at the fast cadence.
    await sleep(1_300);
    expect(fake.calls).toBeGreaterThanOrEqual(10);
    expect(rec.snapshots).toHaveLength(1);
  });

  it('a failed list reads the reason of the shared table (platform-reasons.ts): a 5xx and a timeout PlatformUnavailable, a 429 RateLimited', async () => {
    for (const [error, reason] of [
      [
        new PlatformError({
          code: 'SERVER_ERROR',
          disposition: 'retryable',
          status: 502,
          method: 'GET',
          route: '/projects/{project_id}/operations',
          message: 'm',
        }),
        'PlatformUnavailable',
      ],
      [
        new PlatformError({ code: 'TIMEOUT', disposition: 'retryable', method: 'GET', route: '/projects/{project_id}/operations', message: 'm' }),
        'PlatformUnavailable',
      ],
      [
        new PlatformError({
          code: 'RATE_LIMITED',
          disposition: 'retryable',
          status: 429,
          method: 'GET',
          route: '/projects/{project_id}/operations',
          message: 'm',
        }),
        'RateLimited',
      ],
    ] as const) {
      // A FAKE client: the error objects are what src/platform throws; the emulator-produced 401
      // is covered above.
      const rec = recorder();
      const failing = {
        listOperations: async () => {
          throw error;
        },
      } as unknown as OperationsClient;
      const poller = new OperationsPollers({
        clientForKey: () => failing,
        onUpdate: (_p, s) => void rec.snapshots.push(s),
        fastIntervalMs: 20,
        slowIntervalMs: 400,
      });
      try {
        poller.ensure('p-fake', 'ns/key', 'k');
        const s = await rec.until(reason, (x) => x.settled.status === 'Unknown');
        expect(s.settled.reason).toBe(reason);
      } finally {
        await poller.stop();
      }
    }
  });

  it('polls one project once however many resources ensure it, and stops when the last releases it', async () => {
    const counted = counting(client);
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => counted, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 50 });
    pollers.ensure(projectId, 'ns/a', 'ka');
    pollers.ensure(projectId, 'ns/b', 'kb');
    pollers.ensure(projectId, 'ns/a', 'ka'); // a level-triggered reconciler ensures on every pass
    expect(pollers.projects()).toEqual([projectId]);
    await settledNow(rec);
    pollers.release(projectId, 'ns/a');
    expect(pollers.projects()).toEqual([projectId]);
    const before = counted.calls;
    await sleep(150);
    expect(counted.calls).toBeGreaterThan(before);
    pollers.release(projectId, 'ns/b');
    expect(pollers.projects()).toEqual([]);
    await sleep(20); // a request already in flight may still land
    const after = counted.calls;
    await sleep(150);
    expect(counted.calls).toBe(after);
  });

  it('an owner moved to another project leaves the one before: 1,000 projects named in turn by one resource leave one poller', async () => {
    const counted = counting(client);
    pollers = new OperationsPollers({ clientForKey: () => counted, onUpdate: () => undefined, fastIntervalMs: 20, slowIntervalMs: 50 });
    pollers.ensure(projectId, 'ns/other', 'ko');
    for (let i = 0; i < 1_000; i++) pollers.ensure(`p-moved-${i}`, 'ns/a', 'ka');
    expect(pollers.projects().sort()).toEqual([projectId, 'p-moved-999'].sort());
    pollers.ensure(projectId, 'ns/a', 'ka');
    expect(pollers.projects()).toEqual([projectId]);
    pollers.release(projectId, 'ns/a');
    expect(pollers.projects()).toEqual([projectId]); // ns/other still polls it
    pollers.release(projectId, 'ns/other');
    expect(pollers.projects()).toEqual([]);
  });

  it('reports Unknown with the error code and backs off instead of hot-looping on a bad credential', async () => {
    const bad = counting(new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: 'x'.repeat(64) }));
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => bad, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 160 });
    pollers.ensure(projectId, 'ns/key', 'k');
    const unknown = await rec.until('Unknown', (s) => s.settled.status === 'Unknown');
    expect(unknown.settled.reason).toBe('Unauthorized');
    expect(unknown.settled.message).not.toContain('x'.repeat(64));
    await sleep(700);
    // the refused key is not tried again until it is replaced: one call, never hundreds
    expect(bad.calls).toBe(1);
    expect(rec.snapshots.length).toBe(1); // an unchanged snapshot is not reported again
  });

  it('reports Unknown NoCredentials while there is no client for the project', async () => {
    const rec = recorder();
    pollers = new OperationsPollers({
      clientForKey: () => {
        throw new Error('no key is ever given');
      },
      onUpdate: (_p, s) => void rec.snapshots.push(s),
      fastIntervalMs: 20,
      slowIntervalMs: 100,
    });
    pollers.ensure(projectId, 'ns/key');
    const s = await rec.until('Unknown', (x) => x.settled.status === 'Unknown');
    expect(s.settled.reason).toBe('NoCredentials');
  });

  it("one owner's refused key degrades only that owner: the others' keys list, and a new key clears it", async () => {
    const bad = counting(new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: 'y'.repeat(64) }));
    const good = counting(client);
    const rec = recorder();
    const outcomes: string[] = [];
    pollers = new OperationsPollers({
      clientForKey: (key) => (key === 'broken' ? bad : good),
      onUpdate: (_p, s) => void rec.snapshots.push(s),
      onPoll: (outcome) => void outcomes.push(outcome),
      fastIntervalMs: 20,
      slowIntervalMs: 100,
    });
    // The broken key registers first, so it is the first one tried.
    pollers.ensure(projectId, 'tenant/broken', 'broken');
    pollers.ensure(projectId, 'victim/fine', 'fine');
    await rec.until('a listed snapshot', (s) => s.settled.status === 'True');
    expect(bad.calls).toBe(1);
    expect(outcomes).toContain('key_refused');
    expect(pollers.snapshot(projectId, 'victim/fine')?.settled.status).toBe('True');
    const tenant = pollers.snapshot(projectId, 'tenant/broken');
    expect(tenant?.settled).toEqual(expect.objectContaining({ status: 'Unknown', reason: 'Unauthorized' }));
    expect(tenant?.operations).toEqual([]);
    // Through a branch creation the victim's view follows the operations and never reads Unknown.
    await client.createBranch(projectId);
    await rec.until('InProgress', (s) => s.settled.reason === 'InProgress');
    await rec.until('settled again', (s) => s.settled.status === 'True');
    expect(rec.snapshots.some((s) => s.settled.status === 'Unknown')).toBe(false);
    expect(bad.calls).toBe(1); // never tried again
    // The tenant's key replaced by a working one: its own view recovers.
    pollers.ensure(projectId, 'tenant/broken', 'fine-too');
    await sleep(200);
    expect(pollers.snapshot(projectId, 'tenant/broken')?.settled.reason).not.toBe('Unauthorized');
    expect(pollers.snapshot(projectId, 'tenant/broken')).toEqual(pollers.snapshot(projectId));
  });

  it('makes a client only for an owner whose key it lists with (most owners of a project never need one)', async () => {
    const made: string[] = [];
    const rec = recorder();
    pollers = new OperationsPollers({
      clientForKey: (key) => {
        made.push(key);
        return client;
      },
      onUpdate: (_p, s) => void rec.snapshots.push(s),
      fastIntervalMs: 20,
      slowIntervalMs: 100,
    });
    for (let i = 0; i < 50; i++) pollers.ensure(projectId, `ns/key-${i}`, `key-${i}`);
    await rec.until('a listed snapshot', (s) => s.settled.status === 'True');
    await sleep(250); // more polls, with the key that listed
    expect(made).toEqual(['key-0']);
    for (let i = 0; i < 50; i++) expect(pollers.snapshot(projectId, `ns/key-${i}`)?.settled.status).toBe('True');
  });

  it('stop() ends every poller', async () => {
    const counted = counting(client);
    const rec = recorder();
    pollers = new OperationsPollers({ clientForKey: () => counted, onUpdate: (_p, s) => void rec.snapshots.push(s), fastIntervalMs: 20, slowIntervalMs: 20 });
    pollers.ensure(projectId, 'ns/key', 'k');
    await rec.until('a snapshot', () => true);
    await pollers.stop();
    const after = counted.calls;
    pollers.ensure(projectId, 'ns/key', 'k'); // ignored once stopped
    await sleep(100);
    expect(counted.calls).toBe(after);
    expect(pollers.projects()).toEqual([]);
  });
});
