// The platform's routes (docs/platform-api.md, Endpoints): the templates the client labels its
// requests and errors with (bounded label cardinality), and the check of each path parameter.
import { PlatformError } from './errors.ts';

export const ROUTES = {
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

/**
 * A path parameter: a platform id (letters, digits, '-', '_') or a key id (a non-negative integer),
 * nothing else. A '.', '/' or '%' could make another request of this one (an organization id ".."
 * turns POST /organizations/../api_keys into POST /api_keys), so such a value is refused before
 * anything is sent, whatever validated it upstream.
 */
export function seg(v: string | number): string {
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
