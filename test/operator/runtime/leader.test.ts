// Leader election against a real kube-apiserver: exactly one replica reconciles at any moment.
import { afterEach, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, CoreV1Api, RbacAuthorizationV1Api, V1MicroTime, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { LeaderElector } from '../../../src/operator/runtime/leader.ts';
import { ownNamespaceGrants } from '../../deploy/rbac-contract.ts';
import { controlPlane } from '../../harness/index.ts';

const NAMESPACE = 'default';

interface Candidate {
  elector: LeaderElector;
  identity: string;
  stop: AbortController;
  running: Promise<void>;
  events: string[];
  leadingSignal?: AbortSignal;
}

const cleanups: (() => Promise<void> | void)[] = [];
/** Aborted when a test ends (its timeout too): ends the waits it left running. */
let testOver = new AbortController();
afterEach(async () => {
  testOver.abort();
  testOver = new AbortController();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function candidate(
  kubeConfig: KubeConfig,
  lease: string,
  identity: string,
  durations: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number },
): Candidate {
  const events: string[] = [];
  const c: Partial<Candidate> = { identity, events, stop: new AbortController() };
  c.elector = new LeaderElector({
    kubeConfig,
    namespace: NAMESPACE,
    name: lease,
    identity,
    ...durations,
    onStartedLeading: (signal) => {
      events.push('started');
      c.leadingSignal = signal;
    },
    onStoppedLeading: () => events.push('stopped'),
  });
  c.running = c.elector.run(c.stop!.signal);
  const full = c as Candidate;
  cleanups.push(async () => {
    full.stop.abort();
    await full.running;
  });
  return full;
}

/** Samples isLeader() of every candidate every 5 ms; records the most simultaneous leaders seen. */
function watchLeaders(candidates: Candidate[]): { max: () => number; stop: () => void } {
  let max = 0;
  const timer = setInterval(() => {
    max = Math.max(max, candidates.filter((c) => c.elector.isLeader()).length);
  }, 5);
  cleanups.push(() => clearInterval(timer));
  return { max: () => max, stop: () => clearInterval(timer) };
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const over = testOver.signal;
  while (!check()) {
    if (performance.now() > deadline || over.aborted) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const leaseName = (): string => `leader-test-${randomBytes(4).toString('hex')}`;
const SHORT = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 };
/**
 * For the test that a leader keeps leading through a full lease: a renew deadline that outlasts the
 * apiserver's answers on a busy machine. With SHORT's 1.5 s a CI run once saw the leader step down
 * (correctly: no renewal answered within its deadline) before the check that it still led.
 */
const STEADY = { leaseDurationMs: 5_000, renewDeadlineMs: 4_000, retryPeriodMs: 200 };

describe('LeaderElector', () => {
  it('rejects durations that would let two leaders overlap', () => {
    const kubeConfig = {} as KubeConfig;
    const base = { kubeConfig, namespace: 'ns', name: 'l', identity: 'a', onStartedLeading: () => {}, onStoppedLeading: () => {} };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 1_000, renewDeadlineMs: 1_000 })).toThrow(/leaseDurationMs > renewDeadlineMs/);
    expect(() => new LeaderElector({ ...base, renewDeadlineMs: 1_000, retryPeriodMs: 1_000 })).toThrow(/renewDeadlineMs > retryPeriodMs/);
  });

  it('of two replicas exactly one leads; when the leader crashes the standby takes over once the lease expires', async () => {
    const { kubeConfig } = await controlPlane();
    const lease = leaseName();
    const a = candidate(kubeConfig, lease, 'replica-a', STEADY);
    const b = candidate(kubeConfig, lease, 'replica-b', STEADY);
    const leaders = watchLeaders([a, b]);
    await until('a leader', () => a.elector.isLeader() || b.elector.isLeader(), 15_000);
    // Past one full lease, counted on the leader's renewals in the Lease (not on a timer): while they
    // go on, the standby, which reads the lease at every retry, must still wait.
    const leases = kubeConfig.makeApiClient(CoordinationV1Api);
    const holder = a.elector.isLeader() ? a.identity : b.identity;
    let firstRenewal: number | undefined;
    for (;;) {
      const current = await leases.readNamespacedLease({ name: lease, namespace: NAMESPACE });
      expect(current.spec?.holderIdentity).toBe(holder);
      const renewed = new Date(current.spec?.renewTime ?? 0).getTime();
      firstRenewal ??= renewed;
      if (renewed - firstRenewal > STEADY.leaseDurationMs) break;
      await sleep(50);
    }
    const [leader, standby] = a.elector.isLeader() ? [a, b] : [b, a];
    expect(leader.elector.isLeader()).toBe(true);
    expect(standby.elector.isLeader()).toBe(false);
    expect(leader.events).toEqual(['started']);
    expect(standby.events).toEqual([]);

    const stored = await leases.readNamespacedLease({ name: lease, namespace: NAMESPACE });
    expect(stored.spec?.holderIdentity).toBe(leader.identity);
    expect(stored.spec?.leaseDurationSeconds).toBe(5);

    // crash: stop renewing without releasing the lease
    const crashedAt = performance.now();
    leader.stop.abort();
    await leader.running;
    expect(leader.elector.isLeader()).toBe(false);
    expect(leader.events).toEqual(['started', 'stopped']);
    expect(leader.leadingSignal?.aborted).toBe(true);

    await until('the standby to take over', () => standby.elector.isLeader(), 15_000);
    const takeoverMs = performance.now() - crashedAt;
    // The standby saw the last renewal about one retry period (plus one request) before the crash,
    // and must then wait a full lease duration on its own clock. Half a lease is a lower bound that
    // a slow machine cannot break (slowness only adds) and that an eager standby (taking over at
    // its next retry, ~0.4 s) fails.
    expect(takeoverMs).toBeGreaterThanOrEqual(STEADY.leaseDurationMs / 2);
    expect(standby.events).toEqual(['started']);
    const after = await kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: lease, namespace: NAMESPACE });
    expect(after.spec?.holderIdentity).toBe(standby.identity);
    expect(after.spec?.leaseTransitions).toBe(1);
    leaders.stop();
    expect(leaders.max()).toBe(1);
  });

  it('release() hands the lease over at once, without waiting for it to expire', async () => {
    const { kubeConfig } = await controlPlane();
    const lease = leaseName();
    // A lease of an hour, far longer than the test's timeout: only a release lets the standby in,
    // so the takeover is waited for without a bound of its own.
    const LONG = { leaseDurationMs: 3_600_000, renewDeadlineMs: 40_000, retryPeriodMs: 200 };
    const a = candidate(kubeConfig, lease, 'replica-a', LONG);
    await until('a to lead', () => a.elector.isLeader(), 15_000);
    const b = candidate(kubeConfig, lease, 'replica-b', LONG);
    const leaders = watchLeaders([a, b]);
    // The standby retries as often as the leader renews: two renewals by a since b started gave b
    // its turns to read the held lease; it still waits.
    const leases = kubeConfig.makeApiClient(CoordinationV1Api);
    const renewals = new Set<string>();
    for (;;) {
      const current = await leases.readNamespacedLease({ name: lease, namespace: NAMESPACE });
      expect(current.spec?.holderIdentity).toBe('replica-a');
      renewals.add(new Date(current.spec?.renewTime ?? 0).toISOString());
      if (renewals.size >= 3) break;
      await sleep(50);
    }
    expect(b.elector.isLeader()).toBe(false);

    await a.elector.release();
    await a.running; // release() stops the campaign too
    expect(a.elector.isLeader()).toBe(false);
    expect(a.events).toEqual(['started', 'stopped']);
    await until('b to take over', () => b.elector.isLeader(), Number.POSITIVE_INFINITY);
    leaders.stop();
    expect(leaders.max()).toBe(1);
    const after = await kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: lease, namespace: NAMESPACE });
    expect(after.spec?.holderIdentity).toBe('replica-b');
  });

  it('a leader whose lease is taken over stops leading within the renew deadline and does not come back', async () => {
    const { kubeConfig } = await controlPlane();
    const lease = leaseName();
    const a = candidate(kubeConfig, lease, 'replica-a', SHORT);
    await until('a to lead', () => a.elector.isLeader(), 15_000);

    // An intruder overwrites the lease and keeps renewing it (as a replica with a skewed view would).
    const api = kubeConfig.makeApiClient(CoordinationV1Api);
    let intruding = true;
    const intruder = (async () => {
      while (intruding) {
        try {
          const current = await api.readNamespacedLease({ name: lease, namespace: NAMESPACE });
          await api.replaceNamespacedLease({
            name: lease,
            namespace: NAMESPACE,
            body: { ...current, spec: { ...current.spec, holderIdentity: 'intruder', renewTime: new V1MicroTime() } },
          });
        } catch {
          // a 409 against the elector's renewal: read again
        }
        await sleep(100);
      }
    })();
    cleanups.push(async () => {
      intruding = false;
      await intruder;
    });

    await a.running; // run() resolves once leadership is lost
    expect(a.elector.isLeader()).toBe(false);
    expect(a.events).toEqual(['started', 'stopped']);
    await sleep(SHORT.retryPeriodMs * 2);
    expect(a.elector.isLeader()).toBe(false);
  });

  it('works with only the leader-election rights deploy/ grants (get and update of its Lease by name, create)', async () => {
    const cp = await controlPlane();
    const namespace = `leader-rbac-${randomBytes(3).toString('hex')}`;
    const core = cp.kubeConfig.makeApiClient(CoreV1Api);
    const rbac = cp.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    cleanups.push(async () => {
      await core.deleteNamespace({ name: namespace }).catch(() => undefined);
    });
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'operator' } } });
    const rules = ownNamespaceGrants()
      .filter((entry) => entry.includes('|leases|'))
      .map((entry) => {
        const [group, resource, grant] = entry.split('|') as [string, string, string];
        const [verb, name] = grant.split('@') as [string, string | undefined];
        return { apiGroups: [group], resources: [resource], verbs: [verb], ...(name !== undefined ? { resourceNames: [name] } : {}) };
      });
    await rbac.createNamespacedRole({ namespace, body: { metadata: { name: 'leader-election' }, rules } });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'leader-election' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'leader-election' },
        subjects: [{ kind: 'ServiceAccount', name: 'operator', namespace }],
      },
    });
    const kubeConfig = cp.kubeConfigForToken(await cp.mintServiceAccountToken(namespace, 'operator'));

    let started = 0;
    const stop = new AbortController();
    const elector = new LeaderElector({
      kubeConfig,
      namespace,
      name: 'neon-key-operator',
      identity: 'replica-a',
      ...SHORT,
      onStartedLeading: () => void started++,
      onStoppedLeading: () => {},
    });
    const running = elector.run(stop.signal);
    cleanups.push(async () => {
      stop.abort();
      await running;
    });
    // RBAC is evaluated by an informer-fed cache: the first requests may still be denied.
    await until('leading with the ServiceAccount token', () => elector.isLeader(), 20_000);
    await sleep(SHORT.retryPeriodMs * 3); // renewals (update) succeed too
    expect(elector.isLeader()).toBe(true);
    await elector.release();
    expect(started).toBe(1);
    const lease = await cp.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'neon-key-operator', namespace });
    expect(lease.spec?.holderIdentity ?? '').toBe('');
  });

  it("a standby judges expiry by the record's leaseDurationSeconds, not its own setting (a rollout that changes the duration)", async () => {
    const { kubeConfig } = await controlPlane();
    const lease = leaseName();
    const api = kubeConfig.makeApiClient(CoordinationV1Api);
    // A leader with a 6 s lease (another version's setting) that last renewed now, and renews no more.
    const now = new V1MicroTime();
    await api.createNamespacedLease({
      namespace: NAMESPACE,
      body: {
        metadata: { name: lease, namespace: NAMESPACE },
        spec: { holderIdentity: 'longer-lease', leaseDurationSeconds: 6, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      },
    });
    const startedAt = performance.now();
    const standby = candidate(kubeConfig, lease, 'replica-short', SHORT); // its own lease: 2 s
    // Well past its own 2 s (and two jittered retries): the record says 6 s.
    await sleep(4_000);
    expect(standby.elector.isLeader()).toBe(false);
    expect((await api.readNamespacedLease({ name: lease, namespace: NAMESPACE })).spec?.holderIdentity).toBe('longer-lease');
    await until("the standby to take over once the record's duration has passed", () => standby.elector.isLeader(), 15_000);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(6_000);
    // It writes its own duration into the record it now holds.
    expect((await api.readNamespacedLease({ name: lease, namespace: NAMESPACE })).spec?.leaseDurationSeconds).toBe(2);
  });

  it('after an event-loop stall past the renew deadline, isLeader() is false at once, run() ends, and release() writes nothing', async () => {
    const { kubeConfig } = await controlPlane();
    const lease = leaseName();
    const api = kubeConfig.makeApiClient(CoordinationV1Api);
    const a = candidate(kubeConfig, lease, 'replica-a', SHORT);
    await until('a to lead', () => a.elector.isLeader(), 15_000);
    // A stall (GC pause, SIGSTOP, a starved node): the renew loop gets no turn.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, SHORT.renewDeadlineMs + 300);
    expect(a.elector.isLeader()).toBe(false);
    await a.running;
    expect(a.events).toEqual(['started', 'stopped']);
    expect(a.leadingSignal?.aborted).toBe(true);
    const before = await api.readNamespacedLease({ name: lease, namespace: NAMESPACE });
    await a.elector.release();
    const after = await api.readNamespacedLease({ name: lease, namespace: NAMESPACE });
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect(after.spec?.holderIdentity).toBe('replica-a');
  });
});
