// The runtime's manager (src/operator/runtime/manager.ts): it serves the probes, is ready only once
// what it started says so, and shuts down once, in order: stop the work (the Lease still renewed),
// then refuse writes and release the Lease, close the servers, exit with the code asked for. With
// election against the real apiserver: the Lease is renewed during the drain, and a stall past the
// lease refuses writes at once. (Two operator processes: test/operator/ha.test.ts.)
import { afterEach, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, CoreV1Api, KubeConfig, Watch, type V1Lease } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { LeaderElector } from '../../../src/operator/runtime/leader.ts';
import { Manager } from '../../../src/operator/runtime/manager.ts';
import { fenceKubeWrites, NotLeadingError, type Leadership } from '../../../src/operator/runtime/write-fence.ts';
import { controlPlane } from '../../harness/index.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Blocks this process's event loop (a stall: GC pause, SIGSTOP, starved CPU) for `ms`. */
function stall(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('Manager', () => {
  it('is ready once the work it started is, and drains it before exiting, once', async () => {
    const steps: string[] = [];
    let ready = false;
    let exited: (code: number) => void = () => undefined;
    const exitCode = new Promise<number>((resolve) => {
      exited = resolve;
    });
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      probes: { host: '127.0.0.1', port: 0 },
      metrics: { host: '127.0.0.1', port: 0 },
      start: async () => {
        steps.push('start');
        return {
          ready: () => ready,
          stop: async () => {
            steps.push('stop');
          },
        };
      },
      exit: (code) => {
        steps.push(`exit ${code}`);
        exited(code);
      },
    });
    expect(await manager.readyz()).toEqual({ ok: false, reasons: ['caches not synced'] });
    await manager.run();
    expect(steps).toEqual(['start']);
    expect(await manager.readyz()).toEqual({ ok: false, reasons: ['caches not synced'] });
    ready = true;
    expect(await manager.readyz()).toEqual({ ok: true });

    manager.shutdown('SIGTERM', 3);
    manager.shutdown('SIGINT', 0);
    expect(await exitCode).toBe(3);
    expect(steps).toEqual(['start', 'stop', 'exit 3']);
  });

  it('exits with 1 when draining fails', async () => {
    let exited: (code: number) => void = () => undefined;
    const exitCode = new Promise<number>((resolve) => {
      exited = resolve;
    });
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      probes: { host: '127.0.0.1', port: 0 },
      start: async () => ({
        ready: () => true,
        stop: async () => {
          throw new Error('stuck');
        },
      }),
      exit: (code) => exited(code),
    });
    await manager.run();
    manager.shutdown('SIGTERM');
    expect(await exitCode).toBe(1);
  });

  it('past the drain bound, refuses writes and aborts the work before it exits', async () => {
    let leadership: Leadership | undefined;
    let exited: (code: number) => void = () => undefined;
    const exitCode = new Promise<number>((resolve) => {
      exited = resolve;
    });
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      probes: { host: '127.0.0.1', port: 0 },
      drainTimeoutMs: 300,
      start: async (given) => {
        leadership = given;
        return { ready: () => true, stop: () => new Promise<void>(() => undefined) }; // never drains
      },
      exit: (code) => exited(code),
    });
    await manager.run();
    manager.shutdown('SIGTERM');
    await sleep(100);
    // Draining: the work may still write.
    expect(() => leadership?.check()).not.toThrow();
    expect(leadership?.signal.aborted).toBe(false);
    expect(await exitCode).toBe(0);
    expect(() => leadership?.check()).toThrow(NotLeadingError);
    expect(leadership?.signal.aborted).toBe(true);
  });
});

describe('Manager with leader election', () => {
  const SHORT = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 };
  // For a test whose point is that renewals go on: CI runs it beside the other suites on 2 cores,
  // where a renewal once took longer than SHORT's 1.5 s deadline and the standby rightly took over
  // mid-drain. Longer durations leave the property the same and ride out such a slow moment.
  const LOADED = { leaseDurationMs: 6_000, renewDeadlineMs: 4_500, retryPeriodMs: 300 };

  function elected(
    kubeConfig: KubeConfig,
    lease: string,
    work: { stopMs: number; onStart?(leadership: Leadership): void },
    timing: typeof SHORT = SHORT,
  ): { manager: Manager; exitCode: Promise<number>; steps: string[]; stoppedAt: () => number } {
    const steps: string[] = [];
    let stoppedAt = Infinity;
    let exited: (code: number) => void = () => undefined;
    const exitCode = new Promise<number>((resolve) => {
      exited = resolve;
    });
    const manager = new Manager({
      kubeConfig,
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      probes: { host: '127.0.0.1', port: 0 },
      leaderElection: { namespace: 'default', name: lease, identity: 'manager', ...timing },
      start: async (leadership) => {
        steps.push('start');
        work.onStart?.(leadership);
        return {
          ready: () => true,
          stop: async () => {
            steps.push('stopping');
            await sleep(work.stopMs);
            stoppedAt = performance.now();
            steps.push('stopped');
          },
        };
      },
      exit: (code) => {
        steps.push(`exit ${code}`);
        exited(code);
      },
    });
    return { manager, exitCode, steps, stoppedAt: () => stoppedAt };
  }

  it('renews the Lease while the work drains and releases it only once the work has stopped: a standby never takes over meanwhile', async () => {
    const { kubeConfig } = await controlPlane();
    const lease = `manager-test-${randomBytes(4).toString('hex')}`;
    const leases = kubeConfig.makeApiClient(CoordinationV1Api);
    // The drain lasts two lease durations (within the manager's 15 s drain bound): without renewals, a
    // standby would take over during it.
    const { manager, exitCode, steps, stoppedAt } = elected(kubeConfig, lease, { stopMs: 2 * LOADED.leaseDurationMs }, LOADED);
    await manager.run();
    await until(
      'the manager leading',
      async () => (await leases.readNamespacedLease({ name: lease, namespace: 'default' }).catch(() => undefined))?.spec?.holderIdentity === 'manager',
      15_000,
    );
    await until('the work started', () => steps.includes('start'), 5_000);

    const standbyLed: number[] = [];
    const stop = new AbortController();
    const standby = new LeaderElector({
      kubeConfig,
      namespace: 'default',
      name: lease,
      identity: 'standby',
      ...LOADED,
      onStartedLeading: () => void standbyLed.push(performance.now()),
      onStoppedLeading: () => undefined,
    });
    const running = standby.run(stop.signal);
    cleanups.push(async () => {
      stop.abort();
      await running;
    });
    await sleep(LOADED.retryPeriodMs * 3);

    // Every version of the Lease from now on, in order (a watch misses none).
    const from = await leases.readNamespacedLease({ name: lease, namespace: 'default' });
    const holders: string[] = [];
    const leaseWatch = await new Watch(kubeConfig).watch(
      '/apis/coordination.k8s.io/v1/namespaces/default/leases',
      { fieldSelector: `metadata.name=${lease}`, resourceVersion: from.metadata?.resourceVersion },
      (phase: string, l: V1Lease) => {
        if (phase === 'ADDED' || phase === 'MODIFIED') holders.push(l.spec?.holderIdentity ?? '');
      },
      () => undefined,
    );
    cleanups.push(() => leaseWatch.abort());

    manager.shutdown('SIGTERM');
    await until('the work stopping', () => steps.includes('stopping'), 5_000);
    const atStopping = await leases.readNamespacedLease({ name: lease, namespace: 'default' });
    // Past the middle of the drain, longer after shutdown began than the lease lasts: still held (a
    // standby retrying all along would have taken an unrenewed one), and renewed since.
    await sleep(1.25 * LOADED.leaseDurationMs);
    const during = await leases.readNamespacedLease({ name: lease, namespace: 'default' });
    expect(steps).not.toContain('stopped');
    expect(during.spec?.holderIdentity).toBe('manager');
    expect(new Date(during.spec?.renewTime ?? 0).getTime()).toBeGreaterThan(new Date(atStopping.spec?.renewTime ?? 0).getTime());
    expect(standbyLed).toEqual([]);
    expect(await exitCode).toBe(0);
    expect(steps).toEqual(['start', 'stopping', 'stopped', 'exit 0']);
    // Released once the work had stopped: the standby took the released Lease (no holder), not an
    // expired one (which would go from the manager straight to the standby). How soon is not asserted.
    await until('the standby leading', () => standbyLed.length > 0, 60_000);
    expect(standbyLed[0]!).toBeGreaterThan(stoppedAt());
    await until('the watch to see the standby hold the Lease', () => holders.includes('standby'), 60_000);
    const changes = holders.filter((h, i) => i === 0 || h !== holders[i - 1]);
    expect(changes).toEqual(['manager', '', 'standby']);
  }, 120_000);

  it("an event loop stalled past the lease: writes are refused at once, the work's signal aborts, the Lease is not touched, and it exits 1", async () => {
    const { kubeConfig } = await controlPlane();
    const lease = `manager-test-${randomBytes(4).toString('hex')}`;
    const leases = kubeConfig.makeApiClient(CoordinationV1Api);
    let leadership: Leadership | undefined;
    const { manager, exitCode, steps } = elected(kubeConfig, lease, {
      stopMs: 0,
      onStart: (given) => {
        leadership = given;
      },
    });
    await manager.run();
    await until('the work started', () => leadership !== undefined, 15_000);
    const configMaps = fenceKubeWrites(kubeConfig, leadership!).makeApiClient(CoreV1Api);
    const name = `fenced-${randomBytes(3).toString('hex')}`;
    cleanups.push(async () => {
      await kubeConfig
        .makeApiClient(CoreV1Api)
        .deleteNamespacedConfigMap({ namespace: 'default', name })
        .catch(() => undefined);
    });
    // Leading: a write passes the fence.
    await configMaps.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name }, data: { n: '1' } } });

    stall(SHORT.leaseDurationMs + 500);
    // The first thing that runs after the stall, before the renew loop had a turn.
    expect(() => leadership!.check()).toThrow(NotLeadingError);
    await expect(configMaps.replaceNamespacedConfigMap({ namespace: 'default', name, body: { metadata: { name }, data: { n: '2' } } })).rejects.toBeInstanceOf(
      NotLeadingError,
    );
    // Reads still pass.
    expect((await configMaps.readNamespacedConfigMap({ namespace: 'default', name })).data).toEqual({ n: '1' });
    expect(await exitCode).toBe(1);
    expect(leadership!.signal.aborted).toBe(true);
    expect(steps).toEqual(['start', 'stopping', 'stopped', 'exit 1']);
    // Not released (a release clears the holder): a lease this replica no longer held by its own
    // clock is not its to write.
    expect((await leases.readNamespacedLease({ name: lease, namespace: 'default' })).spec?.holderIdentity).toBe('manager');
  });
});
