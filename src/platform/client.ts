// Typed client of the platform API (docs/platform-api.md): API keys, the caller and its organizations,
// organization members, projects, branches, operations.
// Every response is validated by its zod schema (schemas.ts); every failure is a PlatformError
// whose code and disposition come from classify() (errors.ts); retries follow retry.ts.
//
// Retries happen in transport.ts, inside one call, only for failures classified 'retryable'. Ambiguous
// failures of a POST are thrown at once: the operator's recovery protocol (docs/design.md section 3.2) finds
// out whether the key was created; this client never guesses. A POST IS retried when the platform
// answered 429, 423 or 503 or the connection could not even be opened: in those cases nothing was
// created, so repeating it cannot mint a second key.
// The requests themselves (transport, retries, errors) are transport.ts, the reading of an answer
// responses.ts, the routes and path parameters routes.ts; this file is the endpoints.

import type { z } from 'zod';
import { classify, PlatformError } from './errors.ts';
import { sleep } from './retry.ts';
import {
  ApiKeyListSchema,
  AuthDetailsSchema,
  CreatedBranchSchema,
  CreatedKeySchema,
  CurrentUserSchema,
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
import { OPERATION_STATUS_CLASSES, isTerminalOperationStatus } from './operation-status.ts';
import { abortedError } from './responses.ts';
import { ROUTES, seg } from './routes.ts';
import { PlatformTransport, type CallSpec, type PlatformClientOptions } from './transport.ts';

export { MAX_API_KEY_LENGTH, isApiKeyFormat, type PlatformClientOptions, type ResponseInfo } from './transport.ts';

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

export class PlatformClient {
  // Private: the transport holds the key, not shown by util.inspect / console.log of the client.
  readonly #transport: PlatformTransport;

  constructor(options: PlatformClientOptions) {
    this.#transport = new PlatformTransport(options);
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
  #call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.output<S>> {
    return this.#transport.call(spec);
  }
}
