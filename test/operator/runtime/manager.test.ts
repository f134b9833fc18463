// The runtime's manager (src/operator/runtime/manager.ts) without leader election: it serves the
// probes, is ready only once what it started says so, and shuts down once, in order: stop the
// work, close the servers, exit with the code asked for. (With election: test/operator/ha.test.ts.)
import { describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Manager } from '../../../src/operator/runtime/manager.ts';

describe('Manager', () => {
  it('is ready once the work it started is, and drains it before exiting, once', async () => {
    const steps: string[] = [];
    let ready = false;
    let exited: (code: number) => void = () => undefined;
    const exitCode = new Promise<number>((resolve) => { exited = resolve; });
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      addresses: [{ host: '127.0.0.1', port: 0 }, { host: '127.0.0.1', port: 0 }],
      start: async () => {
        steps.push('start');
        return { ready: () => ready, stop: async () => { steps.push('stop'); } };
      },
      exit: (code) => { steps.push(`exit ${code}`); exited(code); },
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
    const exitCode = new Promise<number>((resolve) => { exited = resolve; });
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      addresses: [{ host: '127.0.0.1', port: 0 }],
      start: async () => ({ ready: () => true, stop: async () => { throw new Error('stuck'); } }),
      exit: (code) => exited(code),
    });
    await manager.run();
    manager.shutdown('SIGTERM');
    expect(await exitCode).toBe(1);
  });
});
