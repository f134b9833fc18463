// The per-kind part of the key lifecycle (crossplane's ExternalClient): which endpoint creates,
// which list shows the key, which endpoint revokes it. Everything else is shared (lifecycle.ts).
// The platform is reached only through src/platform's client; KeyPlatform is the slice of
// PlatformClient this file uses, so the lifecycle can be driven by any implementation of it.
import type { ApiKeySpec, KeyResource, ProjectApiKeySpec } from '../resources/schema.ts';

export interface CreatedKey { id: number; key: string; name?: string; created_at?: string; created_by?: string; project_id?: string }
export interface ListedKey { id: number; name: string; created_at?: string; created_by?: { id: string; name: string } | string; last_used_at?: string | null; last_used_from_addr?: string | null; project_id?: string | null }

/** The methods of src/platform's PlatformClient the operator calls (platform-api.md, Endpoints). */
export interface KeyPlatform {
  createPersonalKey(keyName: string): Promise<CreatedKey>;
  createOrganizationKey(orgId: string, options: { keyName: string; projectId?: string }): Promise<CreatedKey>;
  listPersonalKeys(): Promise<ListedKey[]>;
  listOrganizationKeys(orgId: string): Promise<ListedKey[]>;
  revokePersonalKey(keyId: number): Promise<unknown>;
  revokeOrganizationKey(orgId: string, keyId: number): Promise<unknown>;
  listProjects(options?: { orgId?: string }): Promise<{ id: string }[] | { projects: { id: string }[] }>;
}

export interface KeyAdapter {
  /** Groups resources whose keys one list call shows (drift: one list per credentials and scope). */
  listScope: string;
  create(platform: KeyPlatform, keyName: string): Promise<CreatedKey>;
  list(platform: KeyPlatform): Promise<ListedKey[]>;
  revoke(platform: KeyPlatform, keyId: number): Promise<void>;
  /** ProjectApiKey: the organization and project whose ownership drift checks. */
  project?: { organizationId: string; projectId: string };
}

export function adapterFor(resource: KeyResource, spec: ApiKeySpec | ProjectApiKeySpec): KeyAdapter {
  if (resource.kind === 'ProjectApiKey') {
    const { organizationId, projectId } = spec as ProjectApiKeySpec;
    return {
      listScope: `org:${organizationId}`,
      // Same path as an organization key; project_id makes it project-scoped (platform-api.md, Create project-scoped key).
      create: (p, keyName) => p.createOrganizationKey(organizationId, { keyName, projectId }),
      list: (p) => p.listOrganizationKeys(organizationId),
      // Project-scoped keys are revoked by organization administrators (platform-api.md, Revoke key).
      revoke: async (p, keyId) => { await p.revokeOrganizationKey(organizationId, keyId); },
      project: { organizationId, projectId },
    };
  }
  const apiKeySpec = spec as ApiKeySpec;
  if (apiKeySpec.scope === 'Organization' && apiKeySpec.organizationId !== undefined) {
    const organizationId = apiKeySpec.organizationId;
    return {
      listScope: `org:${organizationId}`,
      create: (p, keyName) => p.createOrganizationKey(organizationId, { keyName }),
      list: (p) => p.listOrganizationKeys(organizationId),
      revoke: async (p, keyId) => { await p.revokeOrganizationKey(organizationId, keyId); },
    };
  }
  return {
    listScope: 'personal',
    create: (p, keyName) => p.createPersonalKey(keyName),
    list: (p) => p.listPersonalKeys(),
    revoke: async (p, keyId) => { await p.revokePersonalKey(keyId); },
  };
}

/** The shape of src/platform's PlatformError that the lifecycle branches on (codes, never messages). */
export interface PlatformFailure {
  code: string;
  status?: number;
  requestId?: string;
  retryAfterMs?: number;
  disposition: 'retryable' | 'ambiguous' | 'terminal';
}

export function asPlatformFailure(error: unknown): PlatformFailure | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as Record<string, unknown>;
  if (typeof e.code !== 'string' || (e.disposition !== 'retryable' && e.disposition !== 'ambiguous' && e.disposition !== 'terminal')) return undefined;
  return e as unknown as PlatformFailure;
}

/** Condition reason and an actionable message for a failed platform call. */
export function failureReason(failure: PlatformFailure | undefined, doing: string): { reason: string; message: string } {
  const id = failure?.requestId !== undefined ? ` (request ${failure.requestId})` : '';
  switch (failure?.code) {
    case 'UNAUTHORIZED':
      return { reason: 'Unauthorized', message: `${doing}: the platform rejected the credentials (401)${id}; put a valid, unrevoked API key in the credentials Secret` };
    case 'FORBIDDEN':
      return { reason: 'Forbidden', message: `${doing}: the credentials may not do this (403)${id}; organization keys need an administrator's personal key, project keys a member's` };
    case 'NOT_FOUND':
      return { reason: 'NotFound', message: `${doing}: the organization or project does not exist or is not visible to the credentials (404)${id}` };
    case 'INVALID_REQUEST':
    case 'CONFLICT':
      return { reason: 'InvalidSpec', message: `${doing}: the platform refused the request (${failure.status ?? failure.code})${id}; check organizationId, projectId and keyName` };
    case 'RATE_LIMITED':
      return { reason: 'RateLimited', message: `${doing}: rate limited by the platform (429)${id}; retrying after the delay it asked for` };
    default:
      if (failure === undefined) return { reason: 'Error', message: `${doing}: unexpected error` };
      return { reason: 'PlatformUnavailable', message: `${doing}: the platform did not answer usefully (${failure.code}${failure.status !== undefined ? ` ${failure.status}` : ''})${id}; retrying with backoff` };
  }
}
