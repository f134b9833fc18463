// Who may do what (docs/platform-api.md "Key kinds", "Rules for project-scoped keys", "Revoke key").
// 404 hides what the caller may not see (another user's project, another user's key); 403 says
// the caller sees the thing but may not do this to it (a member creating an organization key, a
// project-scoped key deleting its project, a non-member acting on an organization).
import type { Principal } from './auth.ts';
import { forbidden, notFound } from './http-io.ts';
import type { KeyRow, OrgRole, ProjectRow, Store } from './store.ts';

/** The project, if the principal may see it; otherwise 404. */
export function visibleProject(store: Store, p: Principal, projectId: string): ProjectRow {
  const project = store.project(projectId);
  if (project === undefined || !canSeeProject(store, p, project)) throw notFound(`project ${projectId} not found`);
  return project;
}

export function canSeeProject(store: Store, p: Principal, project: ProjectRow): boolean {
  switch (p.kind) {
    case 'personal':
      // Personal keys reach the projects of every organization the user is a member of (and stop
      // reaching an organization the user left), plus the user's own personal projects.
      return project.org_id === null ? project.owner_user_id === p.userId : store.role(project.org_id, p.userId) !== undefined;
    case 'organization':
      return project.org_id === p.orgId;
    case 'project':
      return project.id === p.projectId && project.org_id === p.orgId;
  }
}

/** The principal's standing in an organization, for organization-level actions. */
export function standingIn(store: Store, p: Principal, orgId: string): OrgRole | 'organization-key' | 'project-key' | undefined {
  switch (p.kind) {
    case 'personal':
      return store.role(orgId, p.userId);
    case 'organization':
      return p.orgId === orgId ? 'organization-key' : undefined;
    case 'project':
      return p.orgId === orgId ? 'project-key' : undefined;
  }
}

/**
 * Reading an organization (listing its keys, listing its members): its members, admins or not, and
 * its organization keys; not project-scoped keys, which act on their project only.
 */
export function assertMayReadOrganization(store: Store, p: Principal, orgId: string): void {
  const standing = standingIn(store, p, orgId);
  if (standing === 'project-key') throw forbidden('project-scoped API keys cannot perform organization actions');
  if (standing === undefined) throw forbidden(`not a member of organization ${orgId}`);
}

/**
 * Revocation: personal keys only by their owner; organization and project-scoped keys by the
 * organization's administrators (a personal key of an admin, or an organization key of that
 * organization, which acts with administrator rights over the organization).
 */
export function assertMayRevoke(store: Store, p: Principal, key: KeyRow): void {
  if (key.kind === 'personal') {
    if (p.kind !== 'personal' || p.userId !== key.user_id) throw notFound(`API key ${key.id} not found`);
    return;
  }
  const orgId = key.org_id ?? '';
  const standing = standingIn(store, p, orgId);
  if (standing === 'admin' || standing === 'organization-key') return;
  if (standing === 'member') throw forbidden(`organization and project-scoped API keys can be revoked only by an administrator of ${orgId}`);
  if (standing === 'project-key') throw forbidden('project-scoped API keys cannot perform organization actions');
  throw notFound(`API key ${key.id} not found`);
}
