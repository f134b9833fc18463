// The probe and metrics endpoints of the operator (docs/design.md section 5.5): `/healthz` (liveness: the
// process is not wedged), `/readyz` (readiness: caches synced; a standby that does not hold the
// lease is still ready, it just does not reconcile) and `/metrics` (Prometheus exposition). One
// server serves what it is given: the probes on the health address, the metrics on the metrics
// address, so a NetworkPolicy that opens the health port to the kubelet opens no metrics.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface Readiness {
  ok: boolean;
  reasons?: string[];
}

export interface HealthServerOptions {
  /** Default 127.0.0.1; a Deployment passes 0.0.0.0 so the kubelet and Prometheus reach it. */
  host?: string;
  /** 0 picks a free port (see the returned `port`). */
  port: number;
  /** Serves /metrics from it; none: /metrics is 404. */
  registry?: Registry;
  /** Serve /healthz and /readyz with these; none: both are 404. */
  probes?: {
    healthz: () => boolean | Promise<boolean>;
    readyz: () => Promise<Readiness>;
  };
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const { host = '127.0.0.1', port, registry, probes } = options;

  const server = createServer((req, res) => {
    const send = (status: number, body: string, contentType = 'text/plain; charset=utf-8'): void => {
      res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      send(405, 'method not allowed\n');
      return;
    }
    const path = (req.url ?? '/').split('?', 1)[0];
    const handle = async (): Promise<void> => {
      switch (path) {
        case '/healthz': {
          if (probes === undefined) break;
          const ok = await probes.healthz();
          send(ok ? 200 : 503, ok ? 'ok\n' : 'unhealthy\n');
          return;
        }
        case '/readyz': {
          if (probes === undefined) break;
          const { ok, reasons = [] } = await probes.readyz();
          send(ok ? 200 : 503, ok ? 'ok\n' : `not ready\n${reasons.map((r) => `- ${r}\n`).join('')}`);
          return;
        }
        case '/metrics': {
          if (registry === undefined) break;
          const body = await registry.metrics();
          send(200, body, registry.contentType);
          return;
        }
      }
      send(404, 'not found\n');
    };
    // A probe whose check throws answers 503: the kubelet must see "not ok", never a hung socket.
    handle().catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      send(503, `error: ${error instanceof Error ? error.message : String(error)}\n`);
    });
  });
  // Probes are short; an idle keep-alive connection must not hold close() open.
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeIdleConnections();
      }),
  };
}
