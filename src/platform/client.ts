// Typed client of the platform API (docs/platform-api.md): API keys, the caller and its organizations,
// organization members, projects, branches, operations.
// Every response is validated by its zod schema (schemas.ts); every failure is a PlatformError
// whose code and disposition come from classify() (errors.ts); retries follow retry.ts.
//
// Retries happen here, inside one call, only for failures classified 'retryable'. Ambiguous
// failures of a POST are thrown at once: the operator's recovery protocol (docs/design.md section 3.2) finds
// out whether the key was created; this client never guesses. A POST IS retried when the platform
// answered 429, 423 or 503 or the connection could not even be opened: in those cases nothing was
// created, so repeating it cannot mint a second key.

import { randomUUID } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import type { z } from 'zod';
import { classify, isPlatformError, PlatformError, type Failure } from './errors.ts';
import { nextRetryDelay, parseRetryAfter, resolveRetryPolicy, sleep, type RetryPolicy } from './retry.ts';
import {
  ApiKeyListSchema,
  AuthDetailsSchema,
  CreatedBranchSchema,
  CreatedKeySchema,
  CurrentUserSchema,
  GeneralErrorSchema,
  OperationResponseSchema,
  OperationsPageSchema,
  OrganizationMembersPageSchema,
  OrganizationsResponseSchema,
  ProjectResponseSchema,
  ProjectsPageSchema,
  RevokedKeySchema,
  type ApiKeyListItem,
  type AuthDetails,
  type Branch,
  type CreatedKey,
  type CurrentUser,
  type Operation,
  type OperationsPage,
  type Organization,
  type OrganizationMember,
  type Project,
  type RevokedKey,
} from './schemas.ts';
import { defaultOrgKeyLimiter, type Answer, type Permit, type RateLimiter } from './sliding-window.ts';
import { OPERATION_STATUS_CLASSES, isTerminalOperationStatus } from './operation-status.ts';

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

export interface CallOptions {
  signal?: AbortSignal;
}

/** A rate-limited create's options: `waiter` goes to the org key limiter's take() as it is (RateLimiter). */
export interface CreateCallOptions extends CallOptions {
  waiter?: unknown;
}

/**
 * docs/platform-api.md, States and transitions › Operation status: nothing changes after
 * finished, skipped, cancelled. Also `error`: the official OpenAPI document's OperationStatus
 * enumerates it beside `failed`, and no transition out of it is known. Read as
 * terminal, a wait ends and pollers slow down; read as pending, an operation that never moves again
 * would keep waitForOperation and every poller busy forever. (`failed` stays pending: the
 * platform retries it.) From the one table of operation-status.ts.
 */
export const TERMINAL_OPERATION_STATUSES: ReadonlySet<string> = new Set(Object.keys(OPERATION_STATUS_CLASSES).filter(isTerminalOperationStatus));

/** docs/platform-api.md, Endpoints › Polling: the platform suggests 5 seconds. */
const DEFAULT_POLL_INTERVAL_MS = 5_000;
const DEFAULT_OPERATIONS_PAGE = 100;
/** The platform's maximum page size for GET /projects. */
const PROJECTS_PAGE = 400;
/** The platform's maximum page size for GET /organizations/{org_id}/members. */
const MEMBERS_PAGE = 500;
/**
 * listOrganizationMembers reads at most this many pages (10,000 members), then fails rather than
 * answer with part of the list: a caller deciding from it whether a user is an administrator must
 * never decide on a list that stopped early, and a platform that keeps handing out new pages must
 * not keep the caller reading forever.
 */
const MAX_MEMBER_PAGES = 20;
const DEFAULT_TIMEOUT_MS = 30_000;
/** A list of 10,000 keys is about 2.5 MB; a platform (or something posing as it) gets no more than this. */
const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
const DEFAULT_USER_AGENT = 'neon-key-operator/platform-client';

const ROUTES = {
  apiKeys: '/api_keys',
  apiKey: '/api_keys/:key_id',
  orgApiKeys: '/organizations/:org_id/api_keys',
  orgApiKey: '/organizations/:org_id/api_keys/:key_id',
  projects: '/projects',
  project: '/projects/:project_id',
  branches: '/projects/:project_id/branches',
  operations: '/projects/:project_id/operations',
  operation: '/projects/:project_id/operations/:operation_id',
  auth: '/auth',
  currentUser: '/users/me',
  myOrganizations: '/users/me/organizations',
  orgMembers: '/organizations/:org_id/members',
} as const;

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

interface CallSpec<S extends z.ZodType> {
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

export class PlatformClient {
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

  // ---- Credentials ----

  /**
   * GET /auth: who the key in use belongs to and what kind it is (the official OpenAPI document,
   * getAuthDetails). `auth_method` is 'api_key_user' for a personal key and 'api_key_org' for an
   * organization key AND for a project-scoped key (the document has no method of its own for
   * those); `account_id` is the user id, or the organization id. Lets a caller refuse a key of the
   * wrong kind before it sends a request that the platform would answer 403.
   */
  getAuth(opts?: CallOptions): Promise<AuthDetails> {
    return this.#call({ method: 'GET', route: ROUTES.auth, path: '/auth', schema: AuthDetailsSchema, signal: opts?.signal });
  }

  /** GET /users/me: the user the key belongs to. Needs a personal key (other kinds: FORBIDDEN). */
  getCurrentUser(opts?: CallOptions): Promise<CurrentUser> {
    return this.#call({ method: 'GET', route: ROUTES.currentUser, path: '/users/me', schema: CurrentUserSchema, signal: opts?.signal });
  }

  /**
   * GET /users/me/organizations: the organizations the key's user belongs to; for an organization or
   * a project-scoped key, the one organization that owns the key.
   */
  async listMyOrganizations(opts?: CallOptions): Promise<Organization[]> {
    const res = await this.#call({
      method: 'GET',
      route: ROUTES.myOrganizations,
      path: '/users/me/organizations',
      schema: OrganizationsResponseSchema,
      signal: opts?.signal,
    });
    return res.organizations;
  }

  /**
   * GET /organizations/{org_id}/members, every page (in the platform's default order), each member
   * once. Ends when a page has no `next` cursor, the cursor does not move, or a page brings no member
   * not seen before (a platform that ignores the cursor). Beyond MAX_MEMBER_PAGES pages it fails with
   * INVALID_RESPONSE (terminal) instead of returning a list that may lack someone.
   */
  async listOrganizationMembers(orgId: string, opts?: CallOptions): Promise<OrganizationMember[]> {
    const path = `/organizations/${seg(orgId)}/members`;
    const byId = new Map<string, OrganizationMember>();
    let cursor: string | undefined;
    for (let pages = 1; ; pages++) {
      const page = await this.#call({
        method: 'GET',
        route: ROUTES.orgMembers,
        path,
        query: { limit: MEMBERS_PAGE, cursor },
        schema: OrganizationMembersPageSchema,
        signal: opts?.signal,
      });
      let fresh = 0;
      for (const m of page.members) {
        if (!byId.has(m.id)) fresh++;
        byId.set(m.id, m);
      }
      const next = page.pagination?.next;
      if (next === undefined || next === cursor || fresh === 0) break;
      if (pages >= MAX_MEMBER_PAGES) {
        throw new PlatformError({
          ...classify('GET', { kind: 'invalid-response' }),
          method: 'GET',
          route: ROUTES.orgMembers,
          message: `GET ${ROUTES.orgMembers} still had more members after ${MAX_MEMBER_PAGES} pages of ${MEMBERS_PAGE}: stopped reading, the list is incomplete`,
        });
      }
      cursor = next;
    }
    return [...byId.values()];
  }

  // ---- API keys (docs/platform-api.md, Endpoints) ----

  /** POST /api_keys: a personal key of the caller. Not retried on an ambiguous failure. */
  createPersonalKey(keyName: string, opts?: CallOptions): Promise<CreatedKey> {
    return this.#call({
      method: 'POST',
      route: ROUTES.apiKeys,
      path: '/api_keys',
      body: { key_name: keyName },
      schema: CreatedKeySchema,
      signal: opts?.signal,
    });
  }

  /** GET /api_keys */
  listPersonalKeys(opts?: CallOptions): Promise<ApiKeyListItem[]> {
    return this.#call({ method: 'GET', route: ROUTES.apiKeys, path: '/api_keys', schema: ApiKeyListSchema, signal: opts?.signal });
  }

  /**
   * POST /organizations/{org}/api_keys: an organization key, or a project-scoped key when
   * `projectId` is given ("including project_id in the body makes the key project-scoped").
   * Waits for the org key limiter before every attempt.
   */
  createOrganizationKey(orgId: string, body: { keyName: string; projectId?: string }, opts?: CreateCallOptions): Promise<CreatedKey> {
    const wire: { key_name: string; project_id?: string } = { key_name: body.keyName };
    if (body.projectId !== undefined) wire.project_id = body.projectId;
    return this.#call({
      method: 'POST',
      route: ROUTES.orgApiKeys,
      path: `/organizations/${seg(orgId)}/api_keys`,
      body: wire,
      schema: CreatedKeySchema,
      signal: opts?.signal,
      limited: true,
      orgId,
      waiter: opts?.waiter,
    });
  }

  /** GET /organizations/{org}/api_keys (organization and project-scoped keys of the organization). */
  listOrganizationKeys(orgId: string, opts?: CallOptions): Promise<ApiKeyListItem[]> {
    return this.#call({
      method: 'GET',
      route: ROUTES.orgApiKeys,
      path: `/organizations/${seg(orgId)}/api_keys`,
      schema: ApiKeyListSchema,
      signal: opts?.signal,
    });
  }

  /**
   * DELETE /api_keys/{id}. Revocation is permanent, so it is retried like a read. A retry after a
   * lost response may answer 404 or an already-revoked key: callers treat NOT_FOUND on revoke as
   * "already gone".
   */
  revokePersonalKey(keyId: number, opts?: CallOptions): Promise<RevokedKey> {
    return this.#call({ method: 'DELETE', route: ROUTES.apiKey, path: `/api_keys/${seg(keyId)}`, schema: RevokedKeySchema, signal: opts?.signal });
  }

  /** DELETE /organizations/{org}/api_keys/{id} (organization and project-scoped keys). */
  revokeOrganizationKey(orgId: string, keyId: number, opts?: CallOptions): Promise<RevokedKey> {
    return this.#call({
      method: 'DELETE',
      route: ROUTES.orgApiKey,
      path: `/organizations/${seg(orgId)}/api_keys/${seg(keyId)}`,
      schema: RevokedKeySchema,
      signal: opts?.signal,
    });
  }

  // ---- Projects and branches ----

  /**
   * GET /projects (with org_id when given), following the cursor until a short page, so callers
   * get every project whatever the platform's default page size.
   */
  async listProjects(opts?: { orgId?: string; signal?: AbortSignal }): Promise<Project[]> {
    const byId = new Map<string, Project>();
    let cursor: string | undefined;
    for (;;) {
      const page = await this.#call({
        method: 'GET',
        route: ROUTES.projects,
        path: '/projects',
        query: { org_id: opts?.orgId, limit: PROJECTS_PAGE, cursor },
        schema: ProjectsPageSchema,
        signal: opts?.signal,
      });
      let fresh = 0;
      for (const p of page.projects) {
        if (!byId.has(p.id)) fresh++;
        byId.set(p.id, p);
      }
      const next = page.pagination?.cursor;
      // Stop on a short page, no cursor, a cursor that does not move, or a page with nothing new
      // (a server that ignores the cursor must not loop us forever).
      if (page.projects.length < PROJECTS_PAGE || next === undefined || next === cursor || fresh === 0) break;
      cursor = next;
    }
    return [...byId.values()];
  }

  /** GET /projects/{id} */
  async getProject(projectId: string, opts?: CallOptions): Promise<Project> {
    const res = await this.#call({
      method: 'GET',
      route: ROUTES.project,
      path: `/projects/${seg(projectId)}`,
      schema: ProjectResponseSchema,
      signal: opts?.signal,
    });
    return res.project;
  }

  /**
   * POST /projects/{id}/branches, with a read-write compute. Returns the branch and the operations it
   * started (create_branch, start_compute: docs/platform-api.md, Endpoints › Operations returned by other
   * requests). The compute is asked for explicitly: the OpenAPI document creates one "only if it was
   * specified in the request", and without it the branch starts no start_compute.
   */
  async createBranch(
    projectId: string,
    body?: { name?: string; parent_id?: string },
    opts?: CallOptions,
  ): Promise<{ branch: Branch; operations: Operation[] }> {
    const branch: { name?: string; parent_id?: string } = {};
    if (body?.name !== undefined) branch.name = body.name;
    if (body?.parent_id !== undefined) branch.parent_id = body.parent_id;
    return this.#call({
      method: 'POST',
      route: ROUTES.branches,
      path: `/projects/${seg(projectId)}/branches`,
      body: { branch, endpoints: [{ type: 'read_write' }] },
      schema: CreatedBranchSchema,
      signal: opts?.signal,
    });
  }

  // ---- Operations (docs/platform-api.md, Endpoints › List operations of a project / Get one operation / Polling) ----

  /** One page, newest first. Pass the returned `pagination.cursor` (with the same limit) for the next. */
  listOperations(projectId: string, opts?: { limit?: number; cursor?: string; signal?: AbortSignal }): Promise<OperationsPage> {
    return this.#call({
      method: 'GET',
      route: ROUTES.operations,
      path: `/projects/${seg(projectId)}/operations`,
      query: { limit: opts?.limit, cursor: opts?.cursor },
      schema: OperationsPageSchema,
      signal: opts?.signal,
    });
  }

  /**
   * Walks every page of a project's operations, newest first, following the creation-time cursor
   * until an empty or short page. Operations created during the walk are newer than the cursor and
   * so are not seen; an operation already yielded is never yielded again (ties on the cursor
   * timestamp could otherwise repeat one across a page boundary).
   */
  async *operationPages(projectId: string, opts?: { limit?: number; signal?: AbortSignal }): AsyncGenerator<Operation[], void, undefined> {
    const limit = opts?.limit ?? DEFAULT_OPERATIONS_PAGE;
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listOperations(projectId, { limit, cursor, signal: opts?.signal });
      const fresh = page.operations.filter((op) => !seen.has(op.id));
      for (const op of fresh) seen.add(op.id);
      if (fresh.length > 0) yield fresh;
      const next = page.pagination?.cursor;
      if (page.operations.length < limit || next === undefined || next === cursor || fresh.length === 0) return;
      cursor = next;
    }
  }

  /** GET /projects/{id}/operations/{operation_id} */
  async getOperation(projectId: string, operationId: string, opts?: CallOptions): Promise<Operation> {
    const res = await this.#call({
      method: 'GET',
      route: ROUTES.operation,
      path: `/projects/${seg(projectId)}/operations/${seg(operationId)}`,
      schema: OperationResponseSchema,
      signal: opts?.signal,
    });
    return res.operation;
  }

  /**
   * Polls an operation (docs/platform-api.md, Polling) until its status is terminal ('terminal', the
   * default: finished, skipped or cancelled) or until it is `finished` ('finished'). `failed` is
   * not terminal ("the operation can still be retried"), so both keep polling through it. With
   * 'finished', an operation that ends skipped or cancelled can never finish: that rejects with a
   * terminal PlatformError code CONFLICT. Stop early with the signal (rejects with code ABORTED).
   */
  async waitForOperation(
    projectId: string,
    operationId: string,
    opts?: { intervalMs?: number; signal?: AbortSignal; until?: 'terminal' | 'finished' },
  ): Promise<Operation> {
    const interval = opts?.intervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    const until = opts?.until ?? 'terminal';
    for (;;) {
      const op = await this.getOperation(projectId, operationId, { signal: opts?.signal });
      if (until === 'terminal' && TERMINAL_OPERATION_STATUSES.has(op.status)) return op;
      if (until === 'finished') {
        if (op.status === 'finished') return op;
        if (TERMINAL_OPERATION_STATUSES.has(op.status)) {
          throw new PlatformError({
            code: 'CONFLICT',
            disposition: 'terminal',
            method: 'GET',
            route: ROUTES.operation,
            message: `operation ${op.action} ${op.id} ended ${op.status}, it will never be finished`,
          });
        }
      }
      try {
        await sleep(interval, opts?.signal);
      } catch {
        throw abortedError('GET', ROUTES.operation, false);
      }
    }
  }

  // ---- transport ----

  async #call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.output<S>> {
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

    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw invalidResponse(context, responseHeaders, 'body is not JSON', statusCode);
    }
    const parsed = spec.schema.safeParse(json);
    if (!parsed.success) {
      // Issue paths and codes only, never the received values: a create response holds a secret.
      const where = parsed.error.issues
        .slice(0, 5)
        .map((i) => `${i.path.join('.') || '(root)'}: ${i.code}`)
        .join('; ');
      throw invalidResponse(context, responseHeaders, `body does not match the schema (${where})`, statusCode);
    }
    return parsed.data;
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

interface AttemptContext {
  method: string;
  route: string;
  requestId: string;
  attempt: number;
}

function invalidResponse(ctx: AttemptContext, headers: Record<string, string | string[] | undefined>, why: string, status: number): PlatformError {
  const c = classify(ctx.method, { kind: 'invalid-response' });
  return new PlatformError({
    ...c,
    method: ctx.method,
    route: ctx.route,
    status,
    requestId: headerValue(headers['x-request-id']) ?? ctx.requestId,
    message: `${ctx.method} ${ctx.route} returned HTTP ${status} with an invalid response (${c.disposition}): ${why}`,
  });
}

function abortedError(method: string, route: string, sent: boolean): PlatformError {
  const c = classify(method, { kind: 'aborted', sent });
  return new PlatformError({
    ...c,
    method,
    route,
    message: `${method} ${route} aborted by the caller${c.disposition === 'ambiguous' ? ' after the request was sent' : ''}`,
  });
}

/**
 * A path parameter: a platform id (letters, digits, '-', '_') or a key id (a non-negative integer),
 * nothing else. A '.', '/' or '%' could make another request of this one (an organization id ".."
 * turns POST /organizations/../api_keys into POST /api_keys), so such a value is refused before
 * anything is sent, whatever validated it upstream.
 */
function seg(v: string | number): string {
  const valid = typeof v === 'number' ? Number.isSafeInteger(v) && v >= 0 : /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/.test(v);
  if (!valid) {
    throw new PlatformError({
      code: 'INVALID_REQUEST',
      disposition: 'terminal',
      method: '',
      route: '',
      message: `not a platform id: ${JSON.stringify(String(v).slice(0, 64))}; ids are letters, digits, '-' and '_' (key ids: integers)`,
    });
  }
  return String(v);
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

class ResponseTooLarge extends Error {
  readonly status: number;
  constructor(status: number) {
    super('response too large');
    this.status = status;
  }
}

/** The body as text, or ResponseTooLarge past `max` bytes (the rest is not read). */
async function readBounded(body: Dispatcher.ResponseData['body'], max: number, status = 0): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > max) {
      body.destroy();
      throw new ResponseTooLarge(status);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** The code of an undici or socket error, looking through AggregateError (happy eyeballs) and cause. */
function errorCode(e: unknown): string | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const o = e as { code?: unknown; errors?: unknown; cause?: unknown };
  if (typeof o.code === 'string') return o.code;
  if (Array.isArray(o.errors) && o.errors.length > 0) return errorCode(o.errors[0]);
  if (o.cause !== undefined && o.cause !== e) return errorCode(o.cause);
  return undefined;
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
