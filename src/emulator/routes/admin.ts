// The admin API at /admin: no auth, loopback only, for tests, chaos and the demo. It plays the
// parts of the platform that the public API does not expose (the console's first key, membership
// changes, project transfers, control-plane failures) and the emulator's own instruments (request
// counters, fault rules). It never returns a secret except the first key of a user it creates.
import { z } from 'zod';
import { isoSeconds } from '../clock.ts';
import { issuePersonalKey } from '../bootstrap.ts';
import { FaultRules } from '../faults.ts';
import { notFound, parseInput } from '../http-io.ts';
import { newUuid } from '../identifiers.ts';
import type { Route } from '../router.ts';

const Role = z.enum(['admin', 'member']);
const NewUser = z.object({ name: z.string().min(1).max(200), email: z.string().max(256).optional(), orgRoles: z.record(z.string(), Role).optional() }).strict();
const Transfer = z.object({ organizationId: z.string().nullable() }).strict();
// outcome "failed" (default): each operation fails once, then is retried to finished; "error": each
// ends in the status `error` and stays there (operations-engine.ts).
const FailNext = z.object({ count: z.number().int().min(0).max(1_000_000), outcome: z.enum(['failed', 'error']).default('failed') }).strict();
const ControlPlane = z.object({ activity: z.boolean() }).strict();

const iso = (ms: number | null) => (ms === null ? null : isoSeconds(ms));

export const adminRoutes: Route[] = [
  {
    method: 'GET',
    template: '/admin/state',
    auth: false,
    handle(ctx) {
      const { store } = ctx.parts;
      const memberships = store.memberships();
      return {
        status: 200,
        body: {
          organizations: store.organizations().map((o) => ({ id: o.id, name: o.name })),
          users: store.users().map((u) => ({
            id: u.id,
            name: u.name,
            email: u.email,
            orgRoles: Object.fromEntries(memberships.filter((m) => m.user_id === u.id).map((m) => [m.org_id, m.role])),
          })),
          projects: store.projects().map((p) => ({
            id: p.id,
            name: p.name,
            organizationId: p.org_id,
            ownerUserId: p.owner_user_id,
            failNextOperations: p.fail_next,
            errorNextOperations: p.error_next,
          })),
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/admin/keys',
    auth: false,
    handle(ctx) {
      return {
        status: 200,
        body: ctx.parts.store.keys().map((k) => ({
          id: k.id,
          name: k.name,
          kind: k.kind,
          userId: k.user_id,
          organizationId: k.org_id,
          projectId: k.project_id,
          createdAt: iso(k.created_ms),
          revoked: k.revoked_ms !== null,
          revokedAt: iso(k.revoked_ms),
          lastUsedAt: iso(k.last_used_ms),
        })),
      };
    },
  },
  {
    method: 'POST',
    template: '/admin/users',
    auth: false,
    async handle(ctx) {
      const input = parseInput(NewUser, await ctx.body());
      const { store } = ctx.parts;
      for (const orgId of Object.keys(input.orgRoles ?? {})) if (store.organization(orgId) === undefined) throw notFound(`organization ${orgId} not found`);
      const id = newUuid();
      const key = store.transaction(() => {
        const now = Date.now();
        store.insertUser({ id, name: input.name, email: input.email ?? `${input.name}@example.com`, created_ms: now });
        for (const [orgId, role] of Object.entries(input.orgRoles ?? {})) store.setRole(orgId, id, role, now);
        return issuePersonalKey(store, id, 'console-bootstrap');
      });
      return { status: 201, body: { id, personalKey: key.secret } };
    },
  },
  {
    method: 'PUT',
    template: '/admin/organizations/:org_id/members/:user_id',
    auth: false,
    async handle(ctx) {
      const { role } = parseInput(z.object({ role: Role }).strict(), await ctx.body());
      const { store } = ctx.parts;
      const orgId = ctx.params.org_id ?? '';
      const userId = ctx.params.user_id ?? '';
      if (store.organization(orgId) === undefined) throw notFound(`organization ${orgId} not found`);
      if (store.user(userId) === undefined) throw notFound(`user ${userId} not found`);
      store.setRole(orgId, userId, role, Date.now());
      return { status: 200, body: { organizationId: orgId, userId, role } };
    },
  },
  {
    method: 'DELETE',
    template: '/admin/organizations/:org_id/members/:user_id',
    auth: false,
    handle(ctx) {
      const orgId = ctx.params.org_id ?? '';
      const userId = ctx.params.user_id ?? '';
      // The user's personal keys stay active but stop reaching this organization's projects
      // (docs/platform-api.md "API key lifecycle": user leaves the organization).
      if (!ctx.parts.store.removeMember(orgId, userId)) throw notFound(`user ${userId} is not a member of ${orgId}`);
      return { status: 200, body: { organizationId: orgId, userId, removed: true } };
    },
  },
  {
    method: 'POST',
    template: '/admin/projects/:project_id/transfer',
    auth: false,
    async handle(ctx) {
      const { organizationId } = parseInput(Transfer, await ctx.body());
      const { store } = ctx.parts;
      const project = store.project(ctx.params.project_id ?? '');
      if (project === undefined) throw notFound(`project ${ctx.params.project_id ?? ''} not found`);
      if (organizationId !== null && store.organization(organizationId) === undefined) throw notFound(`organization ${organizationId} not found`);
      // Project-scoped keys of the old organization stop working ("API key lifecycle").
      store.transferProject(project.id, organizationId, Date.now());
      return { status: 200, body: { projectId: project.id, organizationId } };
    },
  },
  {
    method: 'GET',
    template: '/admin/control-plane',
    auth: false,
    handle: (ctx) => ({ status: 200, body: { activity: ctx.parts.engine.controlPlaneActivity } }),
  },
  {
    // The control plane's own operations (suspend compute, check availability) on or off at run
    // time, as --no-control-plane at start: a benchmark measures "nothing changes" without them.
    method: 'PUT',
    template: '/admin/control-plane',
    auth: false,
    async handle(ctx) {
      const { activity } = parseInput(ControlPlane, await ctx.body());
      ctx.parts.engine.setControlPlaneActivity(activity);
      return { status: 200, body: { activity: ctx.parts.engine.controlPlaneActivity } };
    },
  },
  {
    method: 'POST',
    template: '/admin/projects/:project_id/fail-next-operations',
    auth: false,
    async handle(ctx) {
      const { count, outcome } = parseInput(FailNext, await ctx.body());
      const { store } = ctx.parts;
      const project = store.project(ctx.params.project_id ?? '');
      if (project === undefined) throw notFound(`project ${ctx.params.project_id ?? ''} not found`);
      store.addFailNext(project.id, count, outcome);
      return {
        status: 200,
        body: {
          projectId: project.id,
          failNextOperations: project.fail_next + (outcome === 'failed' ? count : 0),
          errorNextOperations: project.error_next + (outcome === 'error' ? count : 0),
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/admin/requests',
    auth: false,
    handle: (ctx) => ({ status: 200, body: ctx.parts.requests.list() }),
  },
  {
    method: 'DELETE',
    template: '/admin/requests',
    auth: false,
    handle(ctx) {
      ctx.parts.requests.reset();
      return { status: 200, body: [] };
    },
  },
  {
    method: 'GET',
    template: '/admin/faults',
    auth: false,
    handle: (ctx) => ({ status: 200, body: { rules: ctx.parts.faults.list() } }),
  },
  {
    method: 'PUT',
    template: '/admin/faults',
    auth: false,
    async handle(ctx) {
      const { rules } = parseInput(FaultRules, await ctx.body());
      ctx.parts.faults.set(rules);
      return { status: 200, body: { rules: ctx.parts.faults.list() } };
    },
  },
  {
    method: 'DELETE',
    template: '/admin/faults',
    auth: false,
    handle(ctx) {
      ctx.parts.faults.clear();
      return { status: 200, body: { rules: [] } };
    },
  },
];
