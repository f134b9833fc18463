// The emulator's HTTP server (node:http): the public API under /api/v2 (docs/platform-api.md), the
// admin API under /admin and the console at /console (docs/emulator.md). One dispatch path: request
// id, route match, fault injection, authentication, handler, GeneralError on failure, request counting.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino, type Logger } from 'pino';
import { authenticate } from './auth.ts';
import { applySeed, bootstrapRecord, DEFAULT_SEED, type Bootstrap, type Seed } from './bootstrap.ts';
import { consoleRoutes } from './console.ts';
import { refuseCrossSite } from './cross-site-guard.ts';
import { faultInjector, type Fault } from './faults.ts';
import { ApiError, readJson, sendError, sendJson } from './http-io.ts';
import { startOperationsEngine } from './operations-engine.ts';
import { slidingWindowLimiter } from './rate-limit.ts';
import { createRouter, requestCounter, type EmulatorParts, type Reply, type RequestContext, type Route } from './router.ts';
import { adminRoutes } from './routes/admin.ts';
import { apiKeyRoutes } from './routes/api-keys.ts';
import { memberRoutes } from './routes/members.ts';
import { operationRoutes } from './routes/operations.ts';
import { projectRoutes } from './routes/projects.ts';
import { userRoutes } from './routes/users.ts';
import { openStore } from './store.ts';

export type { Bootstrap, Seed };

export interface EmulatorOptions {
  /** Listen address; loopback by default. */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** SQLite file path, or ':memory:' (default). */
  db?: string;
  /** Applied only when the store is empty; DEFAULT_SEED when absent. */
  seed?: Seed;
  /** Multiplies every operation and control-plane duration; tests use e.g. 0.01. */
  timeScale?: number;
  logger?: Logger;
  /** Periodic suspend_compute / check_availability; default true. */
  controlPlaneActivity?: boolean;
}

export interface Emulator {
  /** http://127.0.0.1:PORT/api/v2 */
  baseUrl: string;
  /** http://127.0.0.1:PORT/admin */
  adminUrl: string;
  bootstrap: Bootstrap;
  close(): Promise<void>;
}

/** Secrets never reach the logs: the Authorization header and any key-shaped field are redacted. */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'key',
  '*.key',
  'personalKey',
  '*.personalKey',
  'secret',
];

/** Every route the emulator serves: the public API, the admin API and the console (docs/emulator.md documents each). */
export const EMULATOR_ROUTES: readonly Route[] = [
  ...apiKeyRoutes,
  ...memberRoutes,
  ...projectRoutes,
  ...operationRoutes,
  ...userRoutes,
  ...adminRoutes,
  ...consoleRoutes,
];

const ERROR_CODES: Record<number, string> = {
  423: 'LOCKED',
  429: 'TOO_MANY_REQUESTS',
  500: 'INTERNAL_ERROR',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
  504: 'GATEWAY_TIMEOUT',
};
const REQUEST_ID = /^[\w.:-]{1,128}$/;
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const logger = options.logger ?? pino({ level: 'silent', redact: LOG_REDACT_PATHS });
  const store = openStore(options.db ?? ':memory:');
  const engine = startOperationsEngine(store, { timeScale: options.timeScale ?? 1, controlPlaneActivity: options.controlPlaneActivity ?? true, logger });
  const parts: EmulatorParts = {
    store,
    engine,
    logger,
    faults: faultInjector(),
    orgKeyLimiter: slidingWindowLimiter(10, 1000),
    requests: requestCounter(),
    urls: { baseUrl: '', adminUrl: '' },
  };
  const issued = store.isEmpty() ? applySeed(store, engine, options.seed ?? DEFAULT_SEED) : new Map<string, string>();
  const stopping = new AbortController();
  const router = createRouter(EMULATOR_ROUTES);

  async function dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('x-request-id', requestId);
    const method = (req.method ?? 'GET').toUpperCase();
    const started = performance.now();
    let path: string;
    let query: URLSearchParams;
    try {
      const url = new URL(req.url ?? '/', 'http://emulator.invalid');
      path = url.pathname;
      query = url.searchParams;
    } catch {
      sendError(res, new ApiError(400, 'BAD_REQUEST', 'malformed request URL'), requestId);
      return;
    }
    const matched = router.match(method, path);
    const template = matched !== undefined && 'route' in matched ? matched.route.template : path.startsWith('/api/v2') ? '(unmatched)' : undefined;
    if (template !== undefined && (template.startsWith('/api/v2') || template === '(unmatched)')) {
      res.on('close', () => parts.requests.record(method, template ?? '', res.headersSent ? res.statusCode : 0));
    }
    // The user agent says which client sent it (the operator names its process in it): who wrote what, and when.
    const userAgent = String(req.headers['user-agent'] ?? '').slice(0, 200);
    res.on('close', () =>
      logger.info(
        {
          reqId: requestId,
          method,
          route: template ?? path,
          status: res.headersSent ? res.statusCode : 0,
          ms: Math.round(performance.now() - started),
          userAgent,
        },
        'request',
      ),
    );

    if (matched === undefined) throw new ApiError(404, 'NOT_FOUND', `no route for ${method} ${path.slice(0, 200)}`);
    if (!('route' in matched))
      throw new ApiError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here; allowed: ${matched.allowed.join(', ')}`, {
        allow: matched.allowed.join(', '),
      });
    const { route, params } = matched;
    const isPublic = route.template.startsWith('/api/v2');
    if (!isPublic && !LOOPBACK.test(req.socket.remoteAddress ?? ''))
      throw new ApiError(403, 'PERMISSION_DENIED', 'the admin API and the console answer loopback clients only');
    // Loopback is not enough: a web page in the developer's browser connects from loopback too (cross-site-guard.ts).
    if (!isPublic) refuseCrossSite(req, method);

    const fault: Fault | undefined = isPublic ? parts.faults.pick(method, route.template) : undefined;
    if (fault !== undefined) {
      logger.warn({ reqId: requestId, method, route: route.template, fault: fault.kind }, 'injecting fault');
      // Abortable: close() must not leave an injected delay (up to 600 s) holding the process.
      if (fault.kind === 'latency') await sleep(fault.latencyMs ?? 1000, undefined, { signal: stopping.signal });
      if (fault.kind === 'reset') {
        req.socket.destroy();
        return;
      }
      if (fault.kind === 'status') {
        const status = fault.status ?? 503;
        throw new ApiError(status, ERROR_CODES[status] ?? 'INJECTED_FAULT', `injected fault: HTTP ${status}`, status === 429 ? { 'retry-after': '1' } : {});
      }
    }

    let bodyPromise: Promise<unknown> | undefined;
    const principal = route.auth ? authenticate(store, req) : undefined;
    const ctx: RequestContext = {
      req,
      res,
      params,
      query,
      requestId,
      parts,
      get principal() {
        if (principal === undefined) throw new Error(`route ${route.template} is not authenticated`);
        return principal;
      },
      body: () => (bodyPromise ??= readJson(req)),
    };
    let reply: Reply;
    try {
      reply = await route.handle(ctx);
    } catch (err) {
      if (fault?.kind === 'drop-after-commit') {
        req.socket.destroy();
        return;
      }
      throw err;
    }
    if (fault?.kind === 'drop-after-commit') {
      // The write has committed; the caller never learns its outcome.
      req.socket.destroy();
      return;
    }
    if (reply.html === true) {
      const text = String(reply.body);
      res.writeHead(reply.status, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(text), ...reply.headers });
      res.end(text);
    } else {
      sendJson(res, reply.status, reply.body, reply.headers);
    }
  }

  // An idle connection is kept 65 s, as the load balancers in front of hosted APIs keep theirs (60 s
  // and more), not node's 5 s: a client's pool (the operator's keeps one at most 60 s, node's
  // Keep-Alive hint less a margin) then never sends on a connection the server has just closed, which
  // a busy event loop, late to evict it, otherwise does (ECONNRESET). close() ends them at once.
  const server = createServer({ requestTimeout: 60_000, keepAliveTimeout: 65_000 }, (req, res) => {
    dispatch(req, res).catch((err: unknown) => {
      const requestId = String(res.getHeader('x-request-id') ?? randomUUID());
      if (res.headersSent || res.destroyed) {
        res.destroy();
        return;
      }
      if (err instanceof ApiError) {
        sendError(res, err, requestId);
        return;
      }
      logger.error({ err, reqId: requestId }, 'unexpected error');
      sendError(res, new ApiError(500, 'INTERNAL_ERROR', 'internal error'), requestId);
    });
  });

  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const origin = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  parts.urls.baseUrl = `${origin}/api/v2`;
  parts.urls.adminUrl = `${origin}/admin`;
  const bootstrap = bootstrapRecord(store, parts.urls, issued);
  logger.info({ baseUrl: parts.urls.baseUrl }, 'emulator listening');

  let closing: Promise<void> | undefined;
  return {
    baseUrl: parts.urls.baseUrl,
    adminUrl: parts.urls.adminUrl,
    bootstrap,
    close() {
      closing ??= (async () => {
        stopping.abort();
        engine.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        store.close();
      })();
      return closing;
    },
  };
}
