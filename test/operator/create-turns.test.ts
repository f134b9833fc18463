// A throttled organization does not hold the workers (issue 14): the platform creates 10 keys per
// second per organization, so a wave of one organization's new keys takes seconds to minutes; a key
// of another organization, a Secret repair and a deletion must not wait behind it, and the wave's
// keys must not be read again and again while they wait for their turn (keys/issuing/create-admission.ts).
// A real kube-apiserver, the emulator over HTTP, the operator in-process with its default
// admission; what each reconcile did comes from its ReconcileRecord. Ordering, never wall-clock
// targets: "before A's wave is done" is counted in A's creates.
import { afterAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { writeFileSync } from 'node:fs';
import { group, operatorSuite, version } from './fixture.ts';

const plural = 'apikeys';
const ORG_A = 'org-wave-0000000a';
const ORG_B = 'org-other-000000b';
/** About 20 s of creates (see CREATE_LATENCY_MS): long next to one create of another organization. */
const WAVE = 60;
const CREATE_LATENCY_MS = 1_500;
/**
 * Creates of one organization under way at once. Below the default (30), so that A's line forms
 * after a few reads whatever the machine's load: the test is about the line, the bench about the
 * default's throughput.
 */
const PER_ORGANIZATION = 5;

interface Condition {
  type: string;
  status: string;
}
interface Resource {
  status?: { keyId?: number; conditions?: Condition[] };
}
interface RequestCount {
  method: string;
  route: string;
  status: number;
  count: number;
}

describe("a wave of one organization's new keys holds no worker", () => {
  const records: ReconcileRecord[] = [];
  const suite = operatorSuite({
    namespaces: ['turns'],
    emulator: {
      seed: {
        organizations: [
          { id: ORG_A, name: 'wave' },
          { id: ORG_B, name: 'other' },
        ],
        users: [{ name: 'alice', email: 'alice@example.com', orgRoles: { [ORG_A]: 'admin', [ORG_B]: 'admin' } }],
      },
    },
    operator: (s) => ({
      namespace: s.namespace,
      workers: 4,
      logger: createLogger({ level: 'silent' }),
      identity: 'create-turns',
      createsPerOrganization: PER_ORGANIZATION,
      onReconcile: (record) => records.push(record),
    }),
    timeoutMs: 120_000,
  });

  afterAll(() => {
    if (process.env.TURNS_DEBUG !== undefined) writeFileSync(process.env.TURNS_DEBUG, JSON.stringify(records));
  });

  const waveKeys = Array.from({ length: WAVE }, (_, i) => `wave-${String(i).padStart(3, '0')}`);

  const apply = async (name: string, organizationId: string): Promise<void> => {
    await suite.apply(
      'ApiKey',
      { name, namespace: suite.namespace },
      { scope: 'Organization', organizationId, keyName: name, credentialsSecretRef: { name: 'neon-admin' } },
    );
  };
  const ready = async (name: string): Promise<boolean> => {
    const r = (await suite.objects.getNamespacedCustomObject({ group, version, namespace: suite.namespace, plural, name })) as Resource;
    return r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
  };
  const of = (name: string): ReconcileRecord[] => records.filter((r) => r.namespace === suite.namespace && r.name === name);
  /** When the create of `name` ended (its key in its Secret and status), or undefined. */
  const createdAt = (name: string): number | undefined => of(name).find((r) => r.createSent && r.result === 'Done')?.endedAt;
  const wavesCreatedBefore = (t: number): number => waveKeys.filter((k) => (createdAt(k) ?? Infinity) <= t).length;

  it(`a key of another organization is Ready while ${WAVE} keys of one organization wait for the platform's rate limit; each wave key is read a bounded number of times`, async () => {
    await emulatorAdmin(suite.emulator.adminUrl, 'DELETE', '/requests');
    // Every create answered after 1.5 s: with PER_ORGANIZATION creates under way, A's wave is bound
    // by the platform (at most 5 / 1.5 s), never by this machine, however loaded it is.
    await emulatorAdmin(suite.emulator.adminUrl, 'PUT', '/faults', {
      rules: [{ method: 'POST', route: '/api/v2/organizations/:org_id/api_keys', probability: 1, kind: 'latency', latencyMs: CREATE_LATENCY_MS }],
    });
    // The wave, all at once (16 creates in flight).
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < waveKeys.length) await apply(waveKeys[next++] as string, ORG_A);
      }),
    );
    // Every wave key has been looked at once: B's key queues after all of them.
    await eventually(async () => (waveKeys.every((k) => of(k).length > 0) ? true : undefined), 60_000, 'a first reconcile of every wave key');
    await apply('other-org', ORG_B);
    // Its create's reconcile recorded (Ready is written inside that reconcile, the record after it).
    const otherCreated = await eventually(async () => createdAt('other-org'), 60_000, "the create of organization B's key");
    expect(await ready('other-org')).toBe(true);

    await eventually(
      async () => {
        for (const k of waveKeys) if (!(await ready(k))) return undefined;
        return true;
      },
      120_000,
      `all ${WAVE} wave keys Ready`,
    );
    // B's key did not wait behind A's wave: before its create ended, fewer than half of A's had.
    // (Before issue 14, four workers waiting on A's creates reached B's key after ~56 of A's.)
    expect(wavesCreatedBefore(otherCreated)).toBeLessThan(WAVE / 2);
    expect(wavesCreatedBefore(Infinity)).toBe(WAVE);
    // The wave waited in its organization's line (not in the workers), and left it at its turn.
    const deferred = waveKeys.filter((k) => of(k).some((r) => r.deferred === true));
    expect(deferred.length).toBeGreaterThan(WAVE / 2);
    for (const k of waveKeys) {
      const passes = of(k);
      // A handful of passes in all (no loop while waiting), and one create each: a turn never makes a second key.
      expect([k, passes.length <= 6]).toEqual([k, true]);
      expect([k, passes.filter((r) => r.createSent).length]).toEqual([k, 1]);
      // Each reconcile that is neither at rest nor sent to the line unread reads the resource: the
      // first look, the turn, and at most one more (an event that arrived meanwhile), never once
      // per retry while it waits.
      expect([k, passes.filter((r) => r.atRest !== true && !(r.deferred === true && r.actions.length === 0)).length <= 3]).toEqual([k, true]);
    }
    // And the platform's limit was kept: no 429, one create per key.
    const requests = await emulatorAdmin<RequestCount[]>(suite.emulator.adminUrl, 'GET', '/requests');
    expect(requests.filter((r) => r.status === 429)).toEqual([]);
    const creates = requests.filter((r) => r.method === 'POST' && r.route.endsWith('/api_keys') && r.status === 200).reduce((n, r) => n + r.count, 0);
    expect(creates).toBe(WAVE + 1);
  }, 240_000);
});
