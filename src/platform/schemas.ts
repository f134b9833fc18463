// One zod schema per platform response: the single source of the TypeScript types the operator
// sees and the runtime check of every response body (the schema is the single source of truth, as
// with zod everywhere in this project). Field names stay the wire's snake_case.
//
// How strict: fields docs/platform-api.md marks as present are required with their documented type;
// fields it says are absent in some responses (or does not show) are optional. Unknown fields are
// dropped (zod's default), so additions on the platform side never break the client. Enumerations
// the platform grows over time (operation action and status) are plain strings, so a new action
// is data, not an INVALID_RESPONSE.

import { z } from 'zod';

/** ISO 8601 timestamp (the document's date-time; docs/platform-api.md, Resources). */
const timestamp = z.string().refine((s) => !Number.isNaN(Date.parse(s)), { message: 'not an ISO 8601 timestamp' });
const keyId = z.number().int().nonnegative();

/**
 * Create responses (docs/platform-api.md, Endpoints › Create personal key / organization key /
 * project-scoped key). A personal create is documented with only `id` and `key`; the organization
 * and project-scoped creates add name, created_at, created_by and project_id.
 */
export const CreatedKeySchema = z.object({
  id: keyId,
  key: z.string().min(1),
  name: z.string().optional(),
  created_at: timestamp.optional(),
  created_by: z.string().optional(),
  project_id: z.string().optional(),
});
export type CreatedKey = z.output<typeof CreatedKeySchema>;

/**
 * An item of GET /api_keys and GET /organizations/{org}/api_keys (docs/platform-api.md, Resources ›
 * API key): the platform's ApiKeysListResponseItem / OrgApiKeysListResponseItem.
 * `last_used_at` is nullable and may be omitted for a key never used: both read as null.
 */
export const ApiKeyListItemSchema = z.object({
  id: keyId,
  name: z.string(),
  created_at: timestamp,
  created_by: z.object({ id: z.string(), name: z.string(), image: z.string().optional() }).optional(),
  last_used_at: timestamp
    .nullable()
    .optional()
    .transform((v) => v ?? null),
  last_used_from_addr: z.string(),
  project_id: z.string().optional(),
});
export type ApiKeyListItem = z.output<typeof ApiKeyListItemSchema>;
export const ApiKeyListSchema = z.array(ApiKeyListItemSchema);

/** Revoke response (docs/platform-api.md, Endpoints › Revoke key). */
export const RevokedKeySchema = z.object({
  id: keyId,
  name: z.string(),
  revoked: z.boolean(),
  last_used_at: timestamp
    .nullable()
    .optional()
    .transform((v) => v ?? null),
  last_used_from_addr: z.string(),
});
export type RevokedKey = z.output<typeof RevokedKeySchema>;

/** docs/platform-api.md, Resources › Operation (required/optional as in its table). */
export const OperationSchema = z.object({
  id: z.string().min(1),
  project_id: z.string(),
  branch_id: z.string(),
  endpoint_id: z.string().optional(),
  action: z.string(),
  status: z.string(),
  failures_count: z.number().int().nonnegative(),
  created_at: timestamp,
  updated_at: timestamp,
  total_duration_ms: z.number().int().nonnegative().optional(),
  error: z.string().optional(),
});
export type Operation = z.output<typeof OperationSchema>;

/** docs/platform-api.md, Resources › Pagination object. */
export const PaginationSchema = z.object({ cursor: z.string().min(1) });

export const OperationsPageSchema = z.object({
  operations: z.array(OperationSchema),
  pagination: PaginationSchema.optional(),
});
export type OperationsPage = z.output<typeof OperationsPageSchema>;

export const OperationResponseSchema = z.object({ operation: OperationSchema });

/**
 * docs/platform-api.md, Resources › Project (as returned by the project list). Only id and name are
 * relied on; the rest is typed when present.
 */
export const ProjectSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
  platform_id: z.string().optional(),
  region_id: z.string().optional(),
  provisioner: z.string().optional(),
  pg_version: z.number().int().optional(),
  locked: z.boolean().optional(),
  cpu_used_sec: z.number().optional(),
  created_at: timestamp.optional(),
  updated_at: timestamp.optional(),
  proxy_host: z.string().optional(),
  branch_logical_size_limit: z.number().optional(),
  owner_id: z.string().optional(),
  org_id: z.string().optional(),
});
export type Project = z.output<typeof ProjectSchema>;

export const ProjectsPageSchema = z.object({
  projects: z.array(ProjectSchema),
  pagination: PaginationSchema.optional(),
});

export const ProjectResponseSchema = z.object({ project: ProjectSchema });

/** The platform's Branch object (not described by docs/platform-api.md beyond its id). */
export const BranchSchema = z.object({
  id: z.string().min(1),
  project_id: z.string(),
  name: z.string(),
  parent_id: z.string().optional(),
  current_state: z.string().optional(),
  default: z.boolean().optional(),
  protected: z.boolean().optional(),
  created_at: timestamp.optional(),
  updated_at: timestamp.optional(),
});
export type Branch = z.output<typeof BranchSchema>;

/**
 * POST /projects/{id}/branches: the response of a request that starts work carries an
 * `operations` array (docs/platform-api.md, Endpoints › Operations returned by other requests).
 */
export const CreatedBranchSchema = z.object({
  branch: BranchSchema,
  operations: z.array(OperationSchema),
});

/**
 * GET /auth (the official OpenAPI document's AuthDetailsResponse; docs/platform-api.md, Who am I).
 * `auth_method` is a plain string like the other enumerations here: 'api_key_user' (a personal key),
 * 'api_key_org' (an organization or project-scoped key), or a method of a session (keycloak,
 * session_cookie, oauth). `account_id`: the user's id for a personal key, the organization's id for
 * an organization or project-scoped key. `auth_data`: for a project-scoped key, the emulator puts
 * the project's id there; the document only types it as a string, so callers must not rely on it.
 */
export const AuthDetailsSchema = z.object({
  account_id: z.string().min(1),
  auth_method: z.string().min(1),
  auth_data: z.string().optional(),
});
export type AuthDetails = z.output<typeof AuthDetailsSchema>;

/**
 * GET /users/me (docs/platform-api.md, Current user): the user a personal key belongs to. Only `id`
 * is relied on; `email` and `name` are typed when present.
 */
export const CurrentUserSchema = z.object({
  id: z.string().min(1),
  email: z.string().optional(),
  name: z.string().optional(),
});
export type CurrentUser = z.output<typeof CurrentUserSchema>;

/** An organization of GET /users/me/organizations (docs/platform-api.md, Organizations of the current user). */
export const OrganizationSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
});
export type Organization = z.output<typeof OrganizationSchema>;

export const OrganizationsResponseSchema = z.object({ organizations: z.array(OrganizationSchema) });

/**
 * An item of GET /organizations/{org_id}/members (docs/platform-api.md, List organization members):
 * the wire's `{member, user}` pair, read as one flat object. `id`, `user_id` and `role` are relied
 * on; `role` is a plain string (the platform has more roles than admin and member, and may add
 * others), so a caller compares it with 'admin' and reads anything else as "not an administrator".
 */
export const OrganizationMemberSchema = z
  .object({
    member: z.object({
      id: z.string().min(1),
      user_id: z.string().min(1),
      org_id: z.string().optional(),
      role: z.string().min(1),
      joined_at: timestamp.optional(),
    }),
    user: z.object({ email: z.string().optional() }).optional(),
  })
  .transform(({ member, user }) => ({
    id: member.id,
    userId: member.user_id,
    role: member.role,
    ...(member.org_id !== undefined ? { orgId: member.org_id } : {}),
    ...(member.joined_at !== undefined ? { joinedAt: member.joined_at } : {}),
    ...(user?.email !== undefined ? { email: user.email } : {}),
  }));
export type OrganizationMember = z.output<typeof OrganizationMemberSchema>;

/**
 * One page of members. `pagination.next` is the cursor of the next page, absent on the last one
 * (docs/platform-api.md, List organization members).
 */
export const OrganizationMembersPageSchema = z.object({
  members: z.array(OrganizationMemberSchema),
  pagination: z.object({ next: z.string().min(1).optional(), sort_by: z.string().optional(), sort_order: z.string().optional() }).optional(),
});

/**
 * Error body {"code","message","request_id"} (docs/platform-api.md, Errors; the platform's GeneralError). Read
 * leniently: a proxy in between may answer with HTML, and the status code alone still classifies.
 */
export const GeneralErrorSchema = z.object({
  code: z.union([z.string(), z.number()]).optional(),
  message: z.string().optional(),
  request_id: z.string().optional(),
});
