// The caller's identity, as the real clients ask for it: `GET /users/me` (neonctl `me`, analytics),
// `GET /users/me/organizations` (neonctl picks the organization) and `GET /auth` (auth details).
import { isoSeconds } from '../clock.ts';
import { forbidden } from '../http-io.ts';
import type { Route } from '../router.ts';
import type { OrganizationRow } from '../store.ts';

function organizationJson(o: OrganizationRow) {
  const at = isoSeconds(o.created_ms);
  return { id: o.id, name: o.name, handle: o.id, plan: 'scale', created_at: at, updated_at: at, managed_by: 'console' };
}

export const userRoutes: Route[] = [
  {
    method: 'GET',
    template: '/api/v2/users/me',
    auth: true,
    handle(ctx) {
      const p = ctx.principal;
      if (p.kind !== 'personal') throw forbidden('this request needs a personal API key: organization and project-scoped keys are not tied to a user');
      const user = ctx.parts.store.user(p.userId);
      const name = user?.name ?? '';
      const email = user?.email ?? '';
      return {
        status: 200,
        body: {
          id: p.userId,
          email,
          login: name,
          name,
          last_name: '',
          image: '',
          active_seconds_limit: 0,
          projects_limit: 100,
          branches_limit: 5000,
          max_autoscaling_limit: 8,
          plan: 'scale',
          auth_accounts: [{ provider: 'keycloak', email, name, login: name, image: '' }],
        },
      };
    },
  },
  {
    method: 'GET',
    template: '/api/v2/users/me/organizations',
    auth: true,
    handle(ctx) {
      const p = ctx.principal;
      const { store } = ctx.parts;
      // With an organization or project-scoped key: "the single organization that owns the key".
      const orgs = p.kind === 'personal' ? store.organizationsOf(p.userId) : [store.organization(p.orgId)].filter((o) => o !== undefined);
      return { status: 200, body: { organizations: orgs.map(organizationJson) } };
    },
  },
  {
    // The document's AuthDetailsResponse (getAuthDetails). A project-scoped key has no auth method of
    // its own there: it reads api_key_org with its organization, and auth_data carries the project
    // (docs/emulator.md, "The public API"), so a client can tell a key of the wrong kind before it is refused.
    method: 'GET',
    template: '/api/v2/auth',
    auth: true,
    handle(ctx) {
      const p = ctx.principal;
      return {
        status: 200,
        body:
          p.kind === 'personal'
            ? { account_id: p.userId, auth_method: 'api_key_user' }
            : { account_id: p.orgId, auth_method: 'api_key_org', ...(p.kind === 'project' ? { auth_data: p.projectId } : {}) },
      };
    },
  },
];
