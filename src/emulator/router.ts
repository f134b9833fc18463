// Routes by method and path template. The template (e.g. '/api/v2/organizations/:org_id/api_keys')
// is also the name used by the request counters and the fault rules of the admin API.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Principal } from './auth.ts';
import type { Faults } from './faults.ts';
import type { OperationsEngine } from './operations-engine.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { Store } from './store.ts';

/** What every handler can reach: the emulator's parts. */
export interface EmulatorParts {
  store: Store;
  engine: OperationsEngine;
  faults: Faults;
  orgKeyLimiter: RateLimiter;
  requests: RequestCounter;
  logger: Logger;
  /** Set once the server listens. */
  urls: { baseUrl: string; adminUrl: string };
}

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
  requestId: string;
  parts: EmulatorParts;
  /** The authenticated caller; reading it on a route with `auth: false` is a programming error. */
  principal: Principal;
  body(): Promise<unknown>;
}

export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  html?: boolean;
}

export interface Route {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  template: string;
  /** Public API routes authenticate with a Bearer key; admin and console routes do not. */
  auth: boolean;
  handle(ctx: RequestContext): Promise<Reply> | Reply;
}

interface Compiled {
  route: Route;
  pattern: RegExp;
  names: string[];
}

export interface Router {
  match(method: string, path: string): { route: Route; params: Record<string, string> } | { allowed: string[] } | undefined;
}

export function createRouter(routes: readonly Route[]): Router {
  const compiled: Compiled[] = routes.map((route) => {
    const names: string[] = [];
    const source = route.template
      .split('/')
      .map((seg) => {
        if (!seg.startsWith(':')) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        names.push(seg.slice(1));
        return '([^/]+)';
      })
      .join('/');
    return { route, pattern: new RegExp(`^${source}/?$`), names };
  });
  return {
    match(method, path) {
      const allowed: string[] = [];
      for (const c of compiled) {
        const m = c.pattern.exec(path);
        if (m === null) continue;
        if (c.route.method !== method) {
          allowed.push(c.route.method);
          continue;
        }
        const params: Record<string, string> = {};
        c.names.forEach((name, i) => {
          const raw = m[i + 1] ?? '';
          try {
            params[name] = decodeURIComponent(raw);
          } catch {
            // Malformed percent-encoding: kept raw, so the handler's id check answers 404.
            params[name] = raw;
          }
        });
        return { route: c.route, params };
      }
      return allowed.length > 0 ? { allowed } : undefined;
    },
  };
}

/** Counts requests by (method, route template, status) so tests can prove there are no hot loops. */
export interface RequestCounter {
  record(method: string, route: string, status: number): void;
  list(): { method: string; route: string; status: number; count: number }[];
  reset(): void;
}

export function requestCounter(): RequestCounter {
  const counts = new Map<string, { method: string; route: string; status: number; count: number }>();
  return {
    record(method, route, status) {
      const k = `${method} ${route} ${status}`;
      const entry = counts.get(k);
      if (entry !== undefined) entry.count += 1;
      else counts.set(k, { method, route, status, count: 1 });
    },
    list: () => [...counts.values()].map((e) => ({ ...e })),
    reset() {
      counts.clear();
    },
  };
}
