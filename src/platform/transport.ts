// The platform client's request core (client.ts): one request per attempt, with the caller's key in
// its Authorization header, its deadline, the org key limiter's permit and the write fence; the
// retries of a call (retry.ts) for failures classified 'retryable' only; an answer or a transport
// failure made a PlatformError (errors.ts classify()), with the key never in its message.
import { randomUUID } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import type { z } from 'zod';
import { classify, isPlatformError, PlatformError, type Failure } from './errors.ts';
import { nextRetryDelay, parseRetryAfter, resolveRetryPolicy, sleep, type RetryPolicy } from './retry.ts';
import { GeneralErrorSchema } from './schemas.ts';
import { defaultOrgKeyLimiter, type Answer, type Permit, type RateLimiter } from './sliding-window.ts';
import {
  abortedError,
  errorCode,
  errorMessage,
  headerValue,
  invalidResponse,
  parseResponse,
  readBounded,
  ResponseTooLarge,
  type AttemptContext,
} from './responses.ts';

/**
 * The longest API key the client sends. The platform's keys are 64 characters (docs/platform-api.md,
 * API key: a random token); this leaves room for other formats, and bounds what a caller holding
 * keys it was handed (credentials Secrets anyone may fill) keeps in memory and sends in a header.
 */
export const MAX_API_KEY_LENGTH = 256;
/** What an API key can be: visible ASCII (it travels in the Authorization header), at most MAX_API_KEY_LENGTH. */
const API_KEY_FORMAT = /^[\x21-\x7e]+$/;

/** Whether `apiKey` can be an API key (a caller checks before making a client with it, which refuses any other). */
export function isApiKeyFormat(apiKey: string): boolean {
  return apiKey.length > 0 && apiKey.length <= MAX_API_KEY_LENGTH && API_KEY_FORMAT.test(apiKey);
}

export interface PlatformClientOptions {
  /** Base address including the version segment, e.g. https://console.neon.tech/api/v2 (docs/platform-api.md, Versioning). */
  baseUrl: string;
  apiKey: string;
  /** Shared keep-alive Agent by default. */
  dispatcher?: Dispatcher;
  /**
   * Limiter awaited before every POST /organizations/{org}/api_keys; default: one per process (10/s).
   * A function gets the organization id and returns its bucket: the platform limits per organization.
   */
  orgKeyLimiter?: RateLimiter | ((orgId: string) => RateLimiter);
  retry?: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  /** Per attempt: connect, headers and body each, and the whole attempt. Default 30 000. */
  timeoutMs?: number;
  userAgent?: string;
  /** Metrics hook, called once per attempt (so retries are visible). Exceptions in it are ignored. */
  onResponse?: (info: ResponseInfo) => void;
  /**
   * Allow plain http to a host that is not loopback. The credentials travel in every request's
   * Authorization header: http is accepted by default only to 127.0.0.0/8, localhost and [::1].
   */
  allowInsecureHttp?: boolean;
  /** A response body larger than this fails the attempt as INVALID_RESPONSE. Default 16 MiB. */
  maxResponseBytes?: number;
  /**
   * Called right before each attempt of a write (POST, DELETE), retries included; what it throws
   * ends the call, nothing sent. The operator's write fence (a replica that no longer leads).
   */
  beforeWrite?: () => void;
}

export interface ResponseInfo {
  method: string;
  /** Route template, e.g. '/organizations/:org_id/api_keys': bounded label cardinality. */
  route: string;
  status: number | 'error';
  durationMs: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
/** A list of 10,000 keys is about 2.5 MB; a platform (or something posing as it) gets no more than this. */
const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
const DEFAULT_USER_AGENT = 'neon-key-operator/platform-client';

let sharedAgent: Agent | undefined;

function defaultDispatcher(): Dispatcher {
  // Keep-alive shorter than Node's http server default (5 s) so we rarely write onto a socket the
  // server is closing: for a POST that race surfaces as an ambiguous reset.
  sharedAgent ??= new Agent({ keepAliveTimeout: 4_000, keepAliveMaxTimeout: 60_000, connect: { timeout: 10_000 } });
  return sharedAgent;
}

/** Error codes of failures to open a connection: the request never left the process. */
const CONNECT_ERROR_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);
const TIMEOUT_ERROR_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

export interface CallSpec<S extends z.ZodType> {
  method: 'GET' | 'POST' | 'DELETE';
  route: string;
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  schema: S;
  signal?: AbortSignal | undefined;
  /** Awaits the org key limiter first (docs/platform-api.md, Limits). */
  limited?: boolean;
  /** The organization the limited request counts against. */
  orgId?: string;
  /** Handed to the limiter's take() unread. */
  waiter?: unknown;
}

/** The requests of one client: its address, key, limiter and bounds (the options checked once, when it is made). */
export class PlatformTransport {
  readonly #baseUrl: string;
  // Private fields: not shown by util.inspect / console.log of the client, not enumerable.
  readonly #apiKey: string;
  readonly #dispatcher: Dispatcher | undefined;
  readonly #limiter: RateLimiter | ((orgId: string) => RateLimiter);
  readonly #policy: RetryPolicy;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #onResponse: ((info: ResponseInfo) => void) | undefined;
  readonly #maxResponseBytes: number;
  readonly #beforeWrite: (() => void) | undefined;

  constructor(options: PlatformClientOptions) {
    const url = new URL(options.baseUrl);
    if (!/\/api\/v2\/?$/.test(url.pathname)) {
      throw new TypeError(`baseUrl must end in /api/v2 (docs/platform-api.md, Versioning), got ${url.origin}${url.pathname}`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(`baseUrl must be https (or http to loopback), got ${url.protocol}`);
    if (url.protocol === 'http:' && !isLoopbackHost(url.hostname) && options.allowInsecureHttp !== true) {
      throw new TypeError(
        `baseUrl ${url.origin} is plain http to a host that is not loopback: the API key would travel in clear text; use https, or allow it explicitly (allowInsecureHttp)`,
      );
    }
    if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey must be a non-empty string');
    if (!isApiKeyFormat(options.apiKey)) throw new TypeError(`apiKey must be at most ${MAX_API_KEY_LENGTH} visible ASCII characters`);
    this.#baseUrl = `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
    this.#apiKey = options.apiKey;
    this.#dispatcher = options.dispatcher;
    this.#limiter = options.orgKeyLimiter ?? defaultOrgKeyLimiter();
    this.#policy = resolveRetryPolicy(options.retry);
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.#timeoutMs > 0)) throw new RangeError('timeoutMs must be > 0');
    this.#userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.#onResponse = options.onResponse;
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#beforeWrite = options.beforeWrite;
  }

  async call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.output<S>> {
    for (let attempt = 1; ; attempt++) {
      let error: PlatformError;
      try {
        return await this.#attempt(spec, attempt);
      } catch (e) {
        if (!isPlatformError(e)) throw e;
        error = e;
      }
      const delay = nextRetryDelay({ disposition: error.disposition, attempt, retryAfterMs: error.retryAfterMs, policy: this.#policy });
      if (delay === undefined) throw error;
      try {
        await sleep(delay, spec.signal);
      } catch {
        throw abortedError(spec.method, spec.route, false);
      }
    }
  }

  async #attempt<S extends z.ZodType>(spec: CallSpec<S>, attempt: number): Promise<z.output<S>> {
    const { method, route } = spec;
    if (spec.signal?.aborted) throw abortedError(method, route, false);
    // A fresh id per attempt: each attempt is its own request in the platform's logs; the
    // platform echoes it as request_id (GeneralError: "You can set this value manually by including
    // an X-Request-ID header").
    const requestId = randomUUID();
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#apiKey}`,
      accept: 'application/json',
      'user-agent': this.#userAgent,
      'x-request-id': requestId,
    };
    let payload: string | undefined;
    if (spec.body !== undefined) {
      payload = JSON.stringify(spec.body);
      headers['content-type'] = 'application/json';
    }

    const write = method !== 'GET';
    if (write) this.#beforeWrite?.();
    let permit: Permit | undefined;
    if (spec.limited === true) {
      try {
        const limiter = typeof this.#limiter === 'function' ? this.#limiter(spec.orgId ?? '') : this.#limiter;
        permit = await limiter.take(spec.signal, spec.waiter);
      } catch {
        throw abortedError(method, route, false);
      }
    }
    if (write && permit !== undefined) {
      // Again after the limiter's wait, which may have outlasted the lease: as close to the wire as this client gets.
      try {
        this.#beforeWrite?.();
      } catch (e) {
        permit.done();
        throw e;
      }
    }
    const deadline = AbortSignal.timeout(this.#timeoutMs);
    const signal = spec.signal === undefined ? deadline : AbortSignal.any([spec.signal, deadline]);
    const started = performance.now();
    const context = { method, route, requestId, attempt };

    let statusCode: number;
    let responseHeaders: Record<string, string | string[] | undefined>;
    let text: string;
    // Set once the platform has answered, even if reading the body then fails: the limiter learns
    // the round trip and a 429 from it.
    let answer: Answer | undefined;
    try {
      const res = await request(this.#url(spec), {
        method,
        headers,
        body: payload,
        signal,
        dispatcher: this.#dispatcher ?? defaultDispatcher(),
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
      statusCode = res.statusCode;
      answer = { status: statusCode };
      responseHeaders = res.headers;
      text = await readBounded(res.body, this.#maxResponseBytes, res.statusCode);
    } catch (e) {
      this.#report(method, route, 'error', started);
      if (e instanceof ResponseTooLarge) throw invalidResponse(context, {}, `body larger than ${this.#maxResponseBytes} bytes`, e.status);
      throw this.#transportError(e, context, spec.signal, deadline);
    } finally {
      // The limiter counts this request's window from here, less the latency credit it may earn
      // from the answer's round trip, none for a failure or a 429 (sliding-window.ts).
      permit?.done(answer);
    }
    this.#report(method, route, statusCode, started);

    if (statusCode < 200 || statusCode >= 300) throw this.#statusError(statusCode, responseHeaders, text, context);

    return parseResponse(spec.schema, text, context, responseHeaders, statusCode);
  }

  #url(spec: CallSpec<z.ZodType>): string {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(spec.query ?? {})) if (v !== undefined) query.set(k, String(v));
    const qs = query.toString();
    return `${this.#baseUrl}${spec.path}${qs === '' ? '' : `?${qs}`}`;
  }

  #report(method: string, route: string, status: number | 'error', started: number): void {
    if (this.#onResponse === undefined) return;
    try {
      this.#onResponse({ method, route, status, durationMs: performance.now() - started });
    } catch {
      // A metrics hook must never change the outcome of a platform call.
    }
  }

  #transportError(e: unknown, ctx: AttemptContext, callerSignal: AbortSignal | undefined, deadline: AbortSignal): PlatformError {
    const code = errorCode(e);
    let failure: Failure;
    if (callerSignal?.aborted === true) failure = { kind: 'aborted', sent: true };
    else if (deadline.aborted || TIMEOUT_ERROR_CODES.has(code ?? '')) failure = { kind: 'timeout' };
    else if (code === 'UND_ERR_CONNECT_TIMEOUT') failure = { kind: 'connect', timedOut: true };
    else if (code !== undefined && CONNECT_ERROR_CODES.has(code)) failure = { kind: 'connect', timedOut: false };
    else failure = { kind: 'network' };
    const c = classify(ctx.method, failure);
    const detail = failure.kind === 'timeout' ? `no response within ${this.#timeoutMs} ms` : `${code ?? 'error'}: ${this.#redact(errorMessage(e))}`;
    return new PlatformError({
      ...c,
      method: ctx.method,
      route: ctx.route,
      requestId: ctx.requestId,
      message: `${ctx.method} ${ctx.route} failed (attempt ${ctx.attempt}, ${c.code}, ${c.disposition}): ${detail}`,
      cause: e,
    });
  }

  #statusError(status: number, headers: Record<string, string | string[] | undefined>, text: string, ctx: AttemptContext): PlatformError {
    const c = classify(ctx.method, { kind: 'status', status });
    let body: z.output<typeof GeneralErrorSchema> = {};
    try {
      const parsed = GeneralErrorSchema.safeParse(JSON.parse(text));
      if (parsed.success) body = parsed.data;
    } catch {
      // Not JSON (a proxy's HTML page, an empty body): the status alone classifies.
    }
    const retryAfterMs = parseRetryAfter(headers['retry-after']);
    const platformMessage = body.message === undefined ? '' : `: ${this.#redact(body.message).slice(0, 300)}`;
    return new PlatformError({
      ...c,
      method: ctx.method,
      route: ctx.route,
      status,
      requestId: body.request_id ?? headerValue(headers['x-request-id']) ?? ctx.requestId,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      ...(body.code === undefined ? {} : { platformCode: String(body.code) }),
      message: `${ctx.method} ${ctx.route} failed (attempt ${ctx.attempt}): HTTP ${status} ${c.code}, ${c.disposition}${platformMessage}`,
    });
  }

  /**
   * Text from the platform or the transport is put into messages only after the caller's key, and
   * anything shaped like a key (64 lower-case alphanumerics, docs/design.md section 6), is masked.
   */
  #redact(text: string): string {
    return text
      .split(this.#apiKey)
      .join('[REDACTED]')
      .replace(/\b[a-z0-9]{64}\b/g, '[REDACTED]');
  }
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
