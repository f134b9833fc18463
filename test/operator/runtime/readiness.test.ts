// Readiness of the replica that runs the work (src/operator/runtime/manager.ts): not ready while a
// cache is stale (its watch failing for longer than the bound), with /readyz naming each one, and
// ready again once none is (issue 30). The end-to-end story, over a real apiserver:
// test/operator/watch-refused.test.ts.
import { describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Manager } from '../../../src/operator/runtime/manager.ts';

describe('readiness with stale caches', () => {
  it('answers 503 naming every stale cache, and 200 once none is', async () => {
    let stale: string[] = [];
    const manager = new Manager({
      kubeConfig: new KubeConfig(),
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      start: async () => ({ ready: () => true, staleCaches: () => stale, stop: async () => undefined }),
      exit: () => undefined,
    });
    await manager.run();
    expect(await manager.readyz()).toEqual({ ok: true });
    stale = [
      'Secret cache of namespace team-b is stale: its watch has failed for 185 s (HTTP 403)',
      'ApiKey cache of namespace team-b is stale: its watch has failed for 190 s (HTTP 403)',
    ];
    expect(await manager.readyz()).toEqual({ ok: false, reasons: stale });
    stale = [];
    expect(await manager.readyz()).toEqual({ ok: true });
  });
});
