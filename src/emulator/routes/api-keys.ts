// API keys (docs/platform-api.md "Create personal key", "List personal keys", "Create organization key",
// "Create project-scoped key", "List organization keys", "Revoke key"). The secret is generated
// here, returned once in the create response, and stored only as its digest.
import { z } from 'zod';
import { isoSeconds } from '../clock.ts';
import { ApiError, badRequest, forbidden, notFound, parseInput, pathId } from '../http-io.ts';
import { hashKeySecret, newKeySecret } from '../identifiers.ts';
import { assertMayReadOrganization, assertMayRevoke, standingIn } from '../permissions.ts';
import type { Route, RequestContext } from '../router.ts';
import type { KeyRow, Store } from '../store.ts';

const KeyName = z
  .string({ error: 'key_name is required and must be a string' })
  .min(1, 'key_name must not be empty')
  .max(64, 'key_name must be at most 64 characters');
const PersonalCreate = z.object({ key_name: KeyName });
const OrgCreate = z.object({
  key_name: KeyName,
  project_id: z
    .string({ error: 'project_id must be a string' })
    .regex(/^[a-z0-9-]{1,60}$/, 'project_id must match ^[a-z0-9-]{1,60}$')
    .optional(),
});

function creatorData(store: Store, userId: string) {
  const user = store.user(userId);
  return { id: userId, name: user?.name ?? '', image: '' };
}

function listItem(store: Store, k: KeyRow, withProject: boolean) {
  return {
    id: k.id,
    name: k.name,
    created_at: isoSeconds(k.created_ms),
    created_by: creatorData(store, k.user_id),
    last_used_at: k.last_used_ms === null ? null : isoSeconds(k.last_used_ms),
    last_used_from_addr: k.last_used_from_addr ?? '',
    ...(withProject && k.project_id !== null ? { project_id: k.project_id } : {}),
  };
}

/**
 * Which endpoint revokes which key, and what it answers. The platform's description puts every
 * kind under DELETE /api_keys/{key_id} (docs/platform-api.md "Revoke key": personal keys by their
 * owner, organization and project-scoped keys by the organization's administrators); the document answers that endpoint with
 * ApiKeyRevokeResponse, which has no project_id. The document's DELETE
 * /organizations/{org_id}/api_keys/{key_id} revokes the organization's keys (organization and
 * project-scoped, never personal ones) and answers OrgApiKeyRevokeResponse, which adds project_id.
 * So both endpoints revoke an organization's keys, each answering its own schema: project_id only
 * from the organization endpoint.
 */
function revokeResponse(k: KeyRow, endpoint: 'personal' | 'organization') {
  return {
    id: k.id,
    name: k.name,
    created_at: isoSeconds(k.created_ms),
    created_by: k.user_id,
    last_used_at: k.last_used_ms === null ? null : isoSeconds(k.last_used_ms),
    last_used_from_addr: k.last_used_from_addr ?? '',
    ...(endpoint === 'organization' && k.project_id !== null ? { project_id: k.project_id } : {}),
    revoked: true,
  };
}

function keyIdParam(raw: string | undefined): number {
  const id = Number(raw);
  if (raw === undefined || !/^\d{1,18}$/.test(raw) || !Number.isSafeInteger(id) || id <= 0) throw badRequest('key_id must be a positive integer');
  return id;
}

function createKey(ctx: RequestContext, fields: { name: string; kind: KeyRow['kind']; userId: string; orgId: string | null; projectId: string | null }) {
  const secret = newKeySecret();
  const created = Date.now();
  const id = ctx.parts.store.insertKey({
    hash: hashKeySecret(secret),
    name: fields.name,
    kind: fields.kind,
    user_id: fields.userId,
    org_id: fields.orgId,
    project_id: fields.projectId,
    created_ms: created,
  });
  ctx.parts.logger.info({ keyId: id, kind: fields.kind, orgId: fields.orgId, projectId: fields.projectId }, 'API key created');
  return {
    id,
    key: secret,
    name: fields.name,
    created_at: isoSeconds(created),
    created_by: fields.userId,
    ...(fields.projectId !== null ? { project_id: fields.projectId } : {}),
  };
}

function revoke(ctx: RequestContext, key: KeyRow, endpoint: 'personal' | 'organization') {
  assertMayRevoke(ctx.parts.store, ctx.principal, key);
  // Revocation is permanent and immediate; revoking a revoked key again reports the same outcome.
  ctx.parts.store.revokeKey(key.id, Date.now());
  ctx.parts.logger.info({ keyId: key.id, kind: key.kind }, 'API key revoked');
  return { status: 200, body: revokeResponse(ctx.parts.store.key(key.id) ?? key, endpoint) };
}

export const apiKeyRoutes: Route[] = [
  {
    method: 'GET',
    template: '/api/v2/api_keys',
    auth: true,
    handle(ctx) {
      const p = ctx.principal;
      if (p.kind !== 'personal') throw forbidden('personal API keys can be listed only with a personal API key');
      return { status: 200, body: ctx.parts.store.livePersonalKeys(p.userId).map((k) => listItem(ctx.parts.store, k, false)) };
    },
  },
  {
    method: 'POST',
    template: '/api/v2/api_keys',
    auth: true,
    async handle(ctx) {
      const input = parseInput(PersonalCreate, await ctx.body());
      const p = ctx.principal;
      if (p.kind !== 'personal') throw forbidden('personal API keys can be created only with a personal API key');
      return { status: 200, body: createKey(ctx, { name: input.key_name, kind: 'personal', userId: p.userId, orgId: null, projectId: null }) };
    },
  },
  {
    method: 'DELETE',
    template: '/api/v2/api_keys/:key_id',
    auth: true,
    handle(ctx) {
      const id = keyIdParam(ctx.params.key_id);
      const key = ctx.parts.store.key(id);
      if (key === undefined) throw notFound(`API key ${id} not found`);
      return revoke(ctx, key, 'personal');
    },
  },
  {
    method: 'GET',
    template: '/api/v2/organizations/:org_id/api_keys',
    auth: true,
    handle(ctx) {
      const orgId = pathId(ctx.params.org_id, 'organization');
      assertMayReadOrganization(ctx.parts.store, ctx.principal, orgId);
      return { status: 200, body: ctx.parts.store.liveOrganizationKeys(orgId).map((k) => listItem(ctx.parts.store, k, true)) };
    },
  },
  {
    method: 'POST',
    template: '/api/v2/organizations/:org_id/api_keys',
    auth: true,
    async handle(ctx) {
      const orgId = pathId(ctx.params.org_id, 'organization');
      // docs/platform-api.md "Limits": 10 requests per second on this endpoint. Counted only for
      // authenticated callers (dispatch authenticates before any handler runs, so a 401 never
      // reaches here and cannot spend an organization's budget), before the permission checks.
      const wait = ctx.parts.orgKeyLimiter.take(orgId);
      if (wait !== undefined) {
        throw new ApiError(429, 'TOO_MANY_REQUESTS', 'rate limit exceeded: at most 10 organization API key creations per second; retry later', {
          'retry-after': String(wait),
        });
      }
      const input = parseInput(OrgCreate, await ctx.body());
      const { store } = ctx.parts;
      const p = ctx.principal;
      if (p.kind !== 'personal') {
        throw forbidden(
          p.kind === 'project'
            ? 'project-scoped API keys cannot perform organization actions'
            : 'organization API keys cannot create API keys: use a personal API key of an administrator',
        );
      }
      const role = standingIn(store, p, orgId);
      if (role === undefined) throw forbidden(`not a member of organization ${orgId}`);
      if (input.project_id === undefined) {
        // "administrator status is verified before creation" (Create organization key).
        if (role !== 'admin') throw forbidden(`organization API keys can be created only by an administrator of ${orgId}`);
        return { status: 200, body: createKey(ctx, { name: input.key_name, kind: 'organization', userId: p.userId, orgId, projectId: null }) };
      }
      // Any member, for a project owned by the organization (Create project-scoped key).
      const project = store.project(input.project_id);
      if (project === undefined || project.org_id !== orgId) throw notFound(`project ${input.project_id} not found in organization ${orgId}`);
      return { status: 200, body: createKey(ctx, { name: input.key_name, kind: 'project', userId: p.userId, orgId, projectId: project.id }) };
    },
  },
  {
    method: 'DELETE',
    template: '/api/v2/organizations/:org_id/api_keys/:key_id',
    auth: true,
    handle(ctx) {
      const orgId = pathId(ctx.params.org_id, 'organization');
      const id = keyIdParam(ctx.params.key_id);
      const key = ctx.parts.store.key(id);
      const standing = standingIn(ctx.parts.store, ctx.principal, orgId);
      if (standing === 'project-key') throw forbidden('project-scoped API keys cannot perform organization actions');
      if (standing === undefined) throw forbidden(`not a member of organization ${orgId}`);
      if (key === undefined || key.org_id !== orgId || key.kind === 'personal') throw notFound(`API key ${id} not found in organization ${orgId}`);
      return revoke(ctx, key, 'organization');
    },
  },
];
