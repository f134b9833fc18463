// Projects and branches: what the key rules act on (docs/platform-api.md "List projects", "Key kinds")
// and the requests that start operations ("Operations returned by other requests": creating a
// branch initiates create_branch and start_compute).
//
// Shapes follow the official OpenAPI document (@neondatabase/api-client), each response its own
// schema (test/emulator/openapi-conformance.test.ts): a list item is ProjectListItem, GET/DELETE
// /projects/{id} answer ProjectResponse (the full Project schema). A field beyond the document's
// is one docs/platform-api.md documents (`locked` on a list item), never one of the emulator's own.
import { z } from 'zod';
import type { Principal } from '../auth.ts';
import { isoSeconds } from '../clock.ts';
import { badRequest, forbidden, notFound, parseInput, pathId } from '../http-io.ts';
import { newBranchId, newEndpointId, newProjectId } from '../identifiers.ts';
import { operationJson } from '../operations-engine.ts';
import { visibleProject } from '../permissions.ts';
import type { RequestContext, Route } from '../router.ts';
import type { BranchRow, EndpointRow, ProjectRow, Store } from '../store.ts';

const REGION = 'aws-us-east-2';
const PROXY_HOST = 'us-east-2.aws.neon.tech';

/** The fields ProjectListItem and Project share. */
function projectCommon(p: ProjectRow): Record<string, unknown> {
  return {
    id: p.id,
    platform_id: 'aws',
    region_id: p.region_id,
    name: p.name,
    provisioner: 'k8s-neonvm',
    pg_version: p.pg_version,
    proxy_host: PROXY_HOST,
    branch_logical_size_limit: 0,
    branch_logical_size_limit_bytes: 0,
    store_passwords: true,
    cpu_used_sec: 0,
    creation_source: 'console',
    history_retention_seconds: 86400,
    created_at: isoSeconds(p.created_ms),
    updated_at: isoSeconds(p.updated_ms),
    owner_id: p.owner_user_id,
    ...(p.org_id !== null ? { org_id: p.org_id } : {}),
  };
}

/**
 * An item of GET /projects: the document's ProjectListItem (active_time, org_name), and `locked`
 * (docs/platform-api.md, "Project (as returned by the project list)"). The document does not
 * declare `locked`, but its objects are open: a field it does not declare is allowed. No emulated
 * flow locks a project, so it is always false.
 */
export function projectListItem(store: Store, p: ProjectRow): Record<string, unknown> {
  const org = p.org_id === null ? undefined : store.organization(p.org_id);
  return {
    ...projectCommon(p),
    active_time: 0,
    locked: false,
    ...(p.org_id !== null ? { org_name: org?.name ?? '' } : {}),
  };
}

/** GET and DELETE /projects/{id}, POST /projects: the document's Project (consumption fields, owner; org_id, no org_name). */
function projectJson(store: Store, p: ProjectRow): Record<string, unknown> {
  const owner = store.user(p.owner_user_id);
  const period = new Date();
  const start = Date.UTC(period.getUTCFullYear(), period.getUTCMonth(), 1);
  const end = Date.UTC(period.getUTCFullYear(), period.getUTCMonth() + 1, 1);
  return {
    ...projectCommon(p),
    data_storage_bytes_hour: 0,
    data_transfer_bytes: 0,
    written_data_bytes: 0,
    compute_time_seconds: 0,
    active_time_seconds: 0,
    consumption_period_start: isoSeconds(start),
    consumption_period_end: isoSeconds(end),
    owner: { email: owner?.email ?? '', name: owner?.name ?? '', branches_limit: 5000, subscription_type: 'scale' },
  };
}

function branchJson(b: BranchRow): Record<string, unknown> {
  const at = isoSeconds(b.created_ms);
  return {
    id: b.id,
    project_id: b.project_id,
    ...(b.parent_id !== null ? { parent_id: b.parent_id } : {}),
    name: b.name,
    current_state: 'init',
    state_changed_at: at,
    creation_source: 'console',
    primary: b.is_default === 1,
    default: b.is_default === 1,
    protected: false,
    cpu_used_sec: 0,
    active_time_seconds: 0,
    compute_time_seconds: 0,
    written_data_bytes: 0,
    data_transfer_bytes: 0,
    created_at: at,
    updated_at: at,
  };
}

function endpointJson(e: EndpointRow): Record<string, unknown> {
  const at = isoSeconds(e.created_ms);
  return {
    host: `${e.id}.${PROXY_HOST}`,
    id: e.id,
    project_id: e.project_id,
    branch_id: e.branch_id,
    region_id: REGION,
    autoscaling_limit_min_cu: 0.25,
    autoscaling_limit_max_cu: 0.25,
    type: e.type,
    current_state: 'init',
    pending_state: 'active',
    pooler_enabled: false,
    pooler_mode: 'transaction',
    disabled: false,
    passwordless_access: true,
    creation_source: 'console',
    created_at: at,
    updated_at: at,
    settings: {},
    proxy_host: PROXY_HOST,
    suspend_timeout_seconds: 0,
    provisioner: 'k8s-neonvm',
  };
}

/** Creates a project with its default branch and compute; used by the API and the seed. */
export function createProject(
  ctx: Pick<RequestContext['parts'], 'store' | 'engine'>,
  fields: { id?: string; name?: string; orgId: string | null; ownerUserId: string; pgVersion?: number },
) {
  const { store, engine } = ctx;
  const now = Date.now();
  const id = fields.id ?? newProjectId();
  const project: ProjectRow = {
    id,
    name: fields.name ?? id,
    org_id: fields.orgId,
    owner_user_id: fields.ownerUserId,
    region_id: REGION,
    pg_version: fields.pgVersion ?? 17,
    created_ms: now,
    updated_ms: now,
    deleted_ms: null,
    fail_next: 0,
    error_next: 0,
  };
  store.insertProject(project);
  const branch: BranchRow = { id: newBranchId(), project_id: id, name: 'main', parent_id: null, is_default: 1, created_ms: now };
  store.insertBranch(branch);
  const endpoint: EndpointRow = {
    id: newEndpointId(),
    project_id: id,
    branch_id: branch.id,
    type: 'read_write',
    state: 'idle',
    last_active_ms: now,
    last_check_ms: now,
    created_ms: now,
  };
  store.insertEndpoint(endpoint);
  const operations = engine.start(id, [
    { action: 'create_timeline', branchId: branch.id, status: 'running' },
    { action: 'start_compute', branchId: branch.id, endpointId: endpoint.id, status: 'scheduling' },
  ]);
  return { project, branch, endpoint, operations };
}

const ListQuery = z.object({
  limit: z.coerce
    .number({ error: 'limit must be an integer' })
    .int('limit must be an integer')
    .min(1, 'limit must be between 1 and 400')
    .max(400, 'limit must be between 1 and 400')
    .default(10),
  cursor: z.string().optional(),
  org_id: z
    .string()
    .regex(/^[a-z0-9-]{1,60}$/, 'org_id must match ^[a-z0-9-]{1,60}$')
    .optional(),
  search: z.string().optional(),
});

const ProjectCreate = z
  .object({
    project: z
      .object({
        name: z.string().min(1).max(256).optional(),
        org_id: z
          .string()
          .regex(/^[a-z0-9-]{1,60}$/, 'org_id must match ^[a-z0-9-]{1,60}$')
          .optional(),
        pg_version: z.number().int().min(14).max(18).optional(),
        region_id: z.string().optional(),
      })
      .loose(),
  })
  .loose();

const BranchCreate = z
  .object({
    branch: z
      .object({
        name: z.string().min(1).max(256).optional(),
        parent_id: z
          .string()
          .regex(/^[a-z0-9-]{1,60}$/)
          .optional(),
      })
      .loose()
      .optional(),
    endpoints: z
      .array(z.object({ type: z.enum(['read_write', 'read_only']) }).loose())
      .max(10)
      .optional(),
  })
  .loose();

function projectsFor(store: Store, p: Principal, orgId: string | undefined): ProjectRow[] {
  switch (p.kind) {
    case 'personal':
      if (orgId === undefined) return store.personalProjects(p.userId);
      if (store.role(orgId, p.userId) === undefined) throw forbidden(`not a member of organization ${orgId}`);
      return store.projectsOfOrg(orgId);
    case 'organization':
      // "If using an org API key, org_id is automatically inferred from the key."
      if (orgId !== undefined && orgId !== p.orgId) throw forbidden(`this organization API key belongs to ${p.orgId}, not ${orgId}`);
      return store.projectsOfOrg(p.orgId);
    case 'project': {
      if (orgId !== undefined && orgId !== p.orgId) throw forbidden('project-scoped API keys cannot perform organization actions');
      const project = store.project(p.projectId);
      return project === undefined ? [] : [project];
    }
  }
}

export const projectRoutes: Route[] = [
  {
    method: 'GET',
    template: '/api/v2/projects',
    auth: true,
    handle(ctx) {
      const q = parseInput(ListQuery, Object.fromEntries(ctx.query), 'query');
      let rows = projectsFor(ctx.parts.store, ctx.principal, q.org_id);
      if (q.search !== undefined) rows = rows.filter((r) => r.id.includes(q.search ?? '') || r.name.includes(q.search ?? ''));
      if (q.cursor !== undefined) {
        // The cursor is the id of the last project of the previous page (rows are in creation order).
        const at = rows.findIndex((r) => r.id === q.cursor);
        if (at < 0) throw badRequest('cursor is not valid for this listing');
        rows = rows.slice(at + 1);
      }
      const page = rows.slice(0, q.limit);
      const last = page.at(-1);
      return {
        status: 200,
        body: {
          projects: page.map((r) => projectListItem(ctx.parts.store, r)),
          ...(last !== undefined ? { pagination: { cursor: last.id } } : {}),
          applications: {},
          integrations: {},
        },
      };
    },
  },
  {
    // neonctl `projects list` also asks for projects shared with the user; the emulator has no sharing.
    method: 'GET',
    template: '/api/v2/projects/shared',
    auth: true,
    handle() {
      return { status: 200, body: { projects: [] } };
    },
  },
  {
    method: 'POST',
    template: '/api/v2/projects',
    auth: true,
    async handle(ctx) {
      const input = parseInput(ProjectCreate, (await ctx.body()) ?? {});
      const { store } = ctx.parts;
      const p = ctx.principal;
      let orgId: string | null;
      let owner: string;
      if (p.kind === 'project') throw forbidden('project-scoped API keys cannot create projects');
      if (p.kind === 'organization') {
        if (input.project.org_id !== undefined && input.project.org_id !== p.orgId)
          throw forbidden(`this organization API key belongs to ${p.orgId}, not ${input.project.org_id}`);
        orgId = p.orgId;
        owner = p.key.user_id;
      } else {
        orgId = input.project.org_id ?? null;
        owner = p.userId;
        if (orgId !== null && store.role(orgId, p.userId) === undefined) throw forbidden(`not a member of organization ${orgId}`);
      }
      const created = store.transaction(() =>
        createProject(ctx.parts, { name: input.project.name, orgId, ownerUserId: owner, pgVersion: input.project.pg_version }),
      );
      return {
        status: 201,
        body: {
          project: projectJson(store, created.project),
          connection_uris: [],
          roles: [],
          databases: [],
          operations: created.operations.map(operationJson),
          branch: branchJson(created.branch),
          endpoints: [endpointJson(created.endpoint)],
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/api/v2/projects/:project_id',
    auth: true,
    handle(ctx) {
      const project = visibleProject(ctx.parts.store, ctx.principal, pathId(ctx.params.project_id, 'project'));
      return { status: 200, body: { project: projectJson(ctx.parts.store, project) } };
    },
  },
  {
    method: 'DELETE',
    template: '/api/v2/projects/:project_id',
    auth: true,
    handle(ctx) {
      const { store } = ctx.parts;
      const project = visibleProject(store, ctx.principal, pathId(ctx.params.project_id, 'project'));
      // "they cannot delete the project they belong to" (Rules for project-scoped keys).
      if (ctx.principal.kind === 'project') throw forbidden('project-scoped API keys cannot delete their project');
      store.deleteProject(project.id, Date.now());
      ctx.parts.logger.info({ projectId: project.id }, 'project deleted');
      return { status: 200, body: { project: projectJson(store, { ...project, deleted_ms: Date.now() }) } };
    },
  },
  {
    method: 'POST',
    template: '/api/v2/projects/:project_id/branches',
    auth: true,
    async handle(ctx) {
      const { store, engine } = ctx.parts;
      const input = parseInput(BranchCreate, (await ctx.body()) ?? {});
      // A branch has at most one read-write compute (the platform's rule; read-only ones are replicas).
      if ((input.endpoints ?? []).filter((e) => e.type === 'read_write').length > 1)
        throw badRequest('endpoints: a branch can have only one read_write endpoint');
      const project = visibleProject(store, ctx.principal, pathId(ctx.params.project_id, 'project'));
      const result = store.transaction(() => {
        const parent = input.branch?.parent_id !== undefined ? store.branch(project.id, input.branch.parent_id) : store.defaultBranch(project.id);
        if (parent === undefined) throw notFound(`branch ${input.branch?.parent_id ?? '(default)'} not found in project ${project.id}`);
        const now = Date.now();
        const id = newBranchId();
        const branch: BranchRow = { id, project_id: project.id, name: input.branch?.name ?? id, parent_id: parent.id, is_default: 0, created_ms: now };
        store.insertBranch(branch);
        // The request body decides, as the document does ("An endpoint is only created if it was
        // specified in the request", CreatedBranch): each entry of `endpoints` gets a compute and a
        // start_compute operation. So a branch created with a compute yields the create_branch
        // running + start_compute scheduling pair of docs/platform-api.md ("Operation status"), and a
        // branch created without one yields create_branch alone.
        const endpoints: EndpointRow[] = (input.endpoints ?? []).map((e) => ({
          id: newEndpointId(),
          project_id: project.id,
          branch_id: id,
          type: e.type,
          state: 'idle',
          last_active_ms: now,
          last_check_ms: now,
          created_ms: now,
        }));
        for (const endpoint of endpoints) store.insertEndpoint(endpoint);
        const operations = engine.start(project.id, [
          { action: 'create_branch', branchId: id, status: 'running' },
          ...endpoints.map((e) => ({ action: 'start_compute', branchId: id, endpointId: e.id, status: 'scheduling' as const })),
        ]);
        return { branch, endpoints, operations };
      });
      return {
        status: 201,
        body: {
          branch: branchJson(result.branch),
          endpoints: result.endpoints.map(endpointJson),
          operations: result.operations.map(operationJson),
          roles: [],
          databases: [],
          connection_uris: [],
        },
      };
    },
  },
];
