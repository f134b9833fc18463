import { afterEach, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { startHealthServer, type HealthServer, type Readiness } from '../../../src/operator/runtime/health-server.ts';
import { createMetrics } from '../../../src/operator/keys/status/metrics.ts';

let server: HealthServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const get = async (path: string, method = 'GET'): Promise<{ status: number; body: string; type: string | null }> => {
  const res = await fetch(`http://127.0.0.1:${server!.port}${path}`, { method });
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
};

describe('startHealthServer', () => {
  it('answers /healthz and /readyz on the probe address, and not /metrics', async () => {
    server = await startHealthServer({ port: 0, probes: { healthz: () => true, readyz: async () => ({ ok: true }) } });
    expect(server.port).toBeGreaterThan(0);
    expect(await get('/healthz')).toMatchObject({ status: 200, body: 'ok\n' });
    expect(await get('/readyz')).toMatchObject({ status: 200, body: 'ok\n' });
    expect(await get('/metrics')).toMatchObject({ status: 404, body: 'not found\n' });
  });

  it('answers /metrics on the metrics address, and not the probes', async () => {
    const metrics = createMetrics(new Registry(), { defaultMetrics: false, version: '1.2.3', revision: 'abc123', leaseName: 'lease' });
    metrics.setLeading(true);
    server = await startHealthServer({ port: 0, registry: metrics.registry });
    const m = await get('/metrics');
    expect(m.status).toBe(200);
    expect(m.type).toContain('text/plain');
    expect(m.body).toContain('leader_election_master_status{name="lease"} 1');
    expect(m.body).toMatch(/^neon_key_operator_build_info\{version="1\.2\.3",revision="abc123",node_version="v[0-9.]+"\} 1$/m);
    expect((await get('/healthz')).status).toBe(404);
    expect((await get('/readyz')).status).toBe(404);
  });

  it('answers 503 with the reasons when not ready, and follows the checks as they change', async () => {
    let readiness: Readiness = { ok: false, reasons: ['ApiKey informer not synced', 'Secret informer not synced'] };
    let healthy = false;
    server = await startHealthServer({
      port: 0,
      probes: { healthz: async () => healthy, readyz: async () => readiness },
    });
    const notReady = await get('/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body).toContain('ApiKey informer not synced');
    expect(notReady.body).toContain('Secret informer not synced');
    expect((await get('/healthz')).status).toBe(503);
    readiness = { ok: true };
    healthy = true;
    expect((await get('/readyz')).status).toBe(200);
    expect((await get('/healthz')).status).toBe(200);
  });

  it('answers 503 when a check throws, 404 for unknown paths and 405 for other methods', async () => {
    server = await startHealthServer({
      port: 0,
      probes: {
        healthz: () => true,
        readyz: async () => {
          throw new Error('boom');
        },
      },
    });
    expect(await get('/readyz')).toMatchObject({ status: 503, body: 'error: boom\n' });
    expect((await get('/nope')).status).toBe(404);
    expect((await get('/healthz', 'POST')).status).toBe(405);
    expect(await get('/healthz?verbose', 'HEAD')).toMatchObject({ status: 200, body: '' });
  });

  it('close() releases the port', async () => {
    const first = await startHealthServer({ port: 0, registry: new Registry() });
    const port = first.port;
    await first.close();
    server = await startHealthServer({ port, registry: new Registry() });
    expect(server.port).toBe(port);
  });
});
