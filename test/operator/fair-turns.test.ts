// One team's flood never stalls another team's keys (issue 25): two namespaces of one organization;
// one applies a wave of keys, the other applies a key and has a Secret deleted meanwhile. A real
// kube-apiserver, the emulator over HTTP (every create answered after 1.5 s, so the wave is bound
// by the platform and never by this machine's load), the operator in-process watching both
// namespaces. Ordering, never wall-clock targets: "how long" is counted in the wave's creates.
import { describe, expect, it } from '@jest/globals';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import type { ReconcileRecord } from '../../src/operator/keys/reconcile-context.ts';
import { emulatorAdmin, eventually } from './support.ts';
import { group, operatorSuite, version } from './fixture.ts';

const plural = 'apikeys';
const ORG = 'org-shared-00000001';
/** Long enough that ~55 of its keys are still waiting when the other team's key comes (CreateAdmission tells keys 50 or more creates back). */
const WAVE = 80;
const CREATE_LATENCY_MS = 1_500;
/** Creates of the organization under way at once (below the default, as in create-turns.test.ts). */
const PER_ORGANIZATION = 5;
/** A fair turn comes after the creates under way when the key arrives, and one of the wave's at most: this many with room for a slot kept. */
const FAIR_BOUND = 2 * PER_ORGANIZATION + 2;

interface Condition {
  type: string;
  status: string;
  message?: string;
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

describe('two namespaces of one organization', () => {
  let flood: string;
  let quiet: string;
  const records: ReconcileRecord[] = [];
  const suite = operatorSuite({
    namespaces: ['flood', 'quiet'],
    emulator: {
      seed: {
        organizations: [{ id: ORG, name: 'shared' }],
        users: [{ name: 'alice', email: 'alice@example.com', orgRoles: { [ORG]: 'admin' } }],
      },
    },
    before: async (s) => {
      [flood = '', quiet = ''] = s.namespaces;
    },
    operator: () => ({
      namespaces: [flood, quiet],
      workers: 4,
      logger: createLogger({ level: 'silent' }),
      identity: 'fair-turns',
      createsPerOrganization: PER_ORGANIZATION,
      onReconcile: (record) => records.push(record),
    }),
    timeoutMs: 120_000,
  });

  const waveKeys = Array.from({ length: WAVE }, (_, i) => `wave-${String(i).padStart(3, '0')}`);

  const apply = async (namespace: string, name: string): Promise<void> => {
    await suite.apply(
      'ApiKey',
      { name, namespace },
      { scope: 'Organization', organizationId: ORG, keyName: name, credentialsSecretRef: { name: 'neon-admin' } },
      namespace,
    );
  };
  const get = async (namespace: string, name: string): Promise<Resource> =>
    (await suite.objects.getNamespacedCustomObject({ group, version, namespace, plural, name })) as Resource;
  const ready = (r: Resource): boolean => r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
  const of = (namespace: string, name: string): ReconcileRecord[] => records.filter((r) => r.namespace === namespace && r.name === name);
  /** When creates of `name` ended (its key in its Secret and status). */
  const createsOf = (namespace: string, name: string): number[] =>
    of(namespace, name)
      .filter((r) => r.createSent && r.result === 'Done')
      .map((r) => r.endedAt);
  const waveCreatedBetween = (from: number, to: number): number => waveKeys.filter((k) => createsOf(flood, k).some((t) => t > from && t <= to)).length;

  it(`a key applied in one namespace and a Secret deleted there are served in fair turns while the other namespace's ${WAVE} keys wait; a waiting key of the wave says where it stands`, async () => {
    // The quiet team's key, Ready before the flood.
    await apply(quiet, 'steady');
    const steady = await eventually(
      async () => {
        const r = await get(quiet, 'steady');
        return ready(r) ? r : undefined;
      },
      60_000,
      "the quiet namespace's first key Ready",
    );
    await emulatorAdmin(suite.emulator.adminUrl, 'DELETE', '/requests');
    await emulatorAdmin(suite.emulator.adminUrl, 'PUT', '/faults', {
      rules: [{ method: 'POST', route: '/api/v2/organizations/:org_id/api_keys', probability: 1, kind: 'latency', latencyMs: CREATE_LATENCY_MS }],
    });

    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < waveKeys.length) await apply(flood, waveKeys[next++] as string);
      }),
    );
    // Every wave key has been seen: the line has formed.
    await eventually(async () => (waveKeys.every((k) => of(flood, k).length > 0) ? true : undefined), 60_000, 'a first reconcile of every wave key');

    // A new key in the quiet namespace.
    const appliedAt = Date.now();
    await apply(quiet, 'newcomer');
    const [newcomerCreated] = await eventually(
      async () => {
        const t = createsOf(quiet, 'newcomer');
        return t.length > 0 ? t : undefined;
      },
      60_000,
      "the newcomer's create",
    );
    // A repair in the quiet namespace: its Secret deleted.
    const deletedAt = Date.now();
    await suite.core.deleteNamespacedSecret({ namespace: quiet, name: 'steady' });
    const repaired = await eventually(
      async () => {
        const r = await get(quiet, 'steady');
        return r.status?.keyId !== undefined && r.status.keyId !== steady.status?.keyId && ready(r) ? r : undefined;
      },
      60_000,
      "the quiet namespace's Secret repaired",
    );
    const [repairCreated] = createsOf(quiet, 'steady').filter((t) => t > deletedAt);
    expect(repaired.status?.keyId).toBeDefined();

    // A waiting key of the wave said where it stood, with its own namespace's keys before it.
    const told: string[] = [];
    for (const k of waveKeys) {
      const message = (await get(flood, k)).status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'False')?.message;
      if (message !== undefined && /creates of the organization go before it/.test(message)) told.push(message);
    }

    await eventually(
      async () => {
        for (const k of waveKeys) if (!ready(await get(flood, k))) return undefined;
        return true;
      },
      180_000,
      `all ${WAVE} wave keys Ready`,
    );

    // Fair turns: each was served after the creates under way, not behind the wave.
    const duringNewcomer = waveCreatedBetween(appliedAt, newcomerCreated as number);
    const duringRepair = waveCreatedBetween(deletedAt, repairCreated as number);
    expect({ duringNewcomer: duringNewcomer <= FAIR_BOUND, duringRepair: duringRepair <= FAIR_BOUND }).toEqual({ duringNewcomer: true, duringRepair: true });
    // And the wave was still far from done then (the test measured a wait, not an empty line).
    expect(waveCreatedBetween(0, repairCreated as number)).toBeLessThan(WAVE / 2);

    // Keys still waiting when the wave's Ready keys were read say so, for a few keys of the namespace only (writes per key).
    expect(told.length).toBeGreaterThan(0);
    expect(told.length).toBeLessThanOrEqual(5);
    for (const m of told)
      expect(m).toMatch(
        new RegExp(
          `^waiting for its turn to create a key in organization ${ORG}: \\d+ creates of the organization go before it, \\d+ of them of namespace ${flood} `,
        ),
      );

    // The platform's limit kept, one create per key.
    const requests = await emulatorAdmin<RequestCount[]>(suite.emulator.adminUrl, 'GET', '/requests');
    expect(requests.filter((r) => r.status === 429)).toEqual([]);
    const creates = requests.filter((r) => r.method === 'POST' && r.route.endsWith('/api_keys') && r.status === 200).reduce((n, r) => n + r.count, 0);
    expect(creates).toBe(WAVE + 2);
  }, 300_000);
});
