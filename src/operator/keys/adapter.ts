// The per-kind part of the key lifecycle (crossplane's ExternalClient): which endpoint creates,
// which list shows the key, which endpoint revokes it. Everything else is shared (reconciler.ts and the actions).
// The platform is reached only through src/platform's client; KeyPlatform is the slice of
// PlatformClient the key domain calls (docs/platform-api.md, Endpoints), typed from it.
import type { ApiKeyListItem, CreatedKey, PlatformClient } from '../../platform/index.ts';
import type { ApiKeySpec, KeyResource, ProjectApiKeySpec } from '../resources/schema.ts';

export type { CreatedKey };
/** A key as the platform's key lists show it. */
export type ListedKey = ApiKeyListItem;
/**
 * What a drift list keeps of each listed key (keys/observing/drift.ts): its last use, all that drift and usage
 * read of it. The rest of a listing (name, creator, dates) was about 0.15 KiB a key held for the interval.
 */
export type ListedUse = Pick<ListedKey, 'id' | 'last_used_at' | 'last_used_from_addr'>;

/** The methods of src/platform's PlatformClient the key domain calls. */
export type KeyPlatform = Pick<
  PlatformClient,
  | 'createPersonalKey'
  | 'createOrganizationKey'
  | 'listPersonalKeys'
  | 'listOrganizationKeys'
  | 'revokePersonalKey'
  | 'revokeOrganizationKey'
  | 'listProjects'
  | 'getAuth'
  | 'listMyOrganizations'
>;

export interface KeyAdapter {
  /** Groups resources whose keys one list call shows (drift: one list per credentials and scope). */
  listScope: string;
  create(platform: KeyPlatform, keyName: string): Promise<CreatedKey>;
  list(platform: KeyPlatform): Promise<ListedKey[]>;
  revoke(platform: KeyPlatform, keyId: number): Promise<void>;
  /** ProjectApiKey: the organization and project whose ownership drift checks. */
  project?: { organizationId: string; projectId: string };
}

/**
 * The adapter of each distinct scope, shared by every resource of it: an adapter is a pure function
 * of its kind, organization and project, and one per resource (an object and three closures) was
 * about 0.4 KiB each at rest. Bounded as runtime/intern.ts is: past it, a new one each.
 */
const adapters = new Map<string, KeyAdapter>();
const MAX_ADAPTERS = 4_096;

export function adapterFor(resource: KeyResource, spec: ApiKeySpec | ProjectApiKeySpec): KeyAdapter {
  const { organizationId, projectId, scope } = spec as Partial<ProjectApiKeySpec> & Partial<ApiKeySpec>;
  const id = JSON.stringify([resource.kind, scope, organizationId, projectId]);
  const known = adapters.get(id);
  if (known !== undefined) return known;
  const adapter = newAdapter(resource, spec);
  if (adapters.size < MAX_ADAPTERS) adapters.set(id, adapter);
  return adapter;
}

/**
 * The list that shows the keys of an organization (organization and project-scoped keys), or the
 * personal keys of the credentials' user: what drift takes (drift.ts) and an inventory reads
 * (src/operator/inventory). One listScope per list, so both share it.
 */
export function listFor(organizationId: string | undefined): Pick<KeyAdapter, 'listScope' | 'list'> {
  return organizationId === undefined
    ? { listScope: 'personal', list: (p) => p.listPersonalKeys() }
    : { listScope: `org:${organizationId}`, list: (p) => p.listOrganizationKeys(organizationId) };
}

function newAdapter(resource: KeyResource, spec: ApiKeySpec | ProjectApiKeySpec): KeyAdapter {
  if (resource.kind === 'ProjectApiKey') {
    const { organizationId, projectId } = spec as ProjectApiKeySpec;
    if (organizationId === undefined) throw new Error('a project key without an organization (its issuer supplies it: observe.ts)');
    return {
      listScope: `org:${organizationId}`,
      // Same path as an organization key; project_id makes it project-scoped (docs/platform-api.md, Create project-scoped key).
      create: (p, keyName) => p.createOrganizationKey(organizationId, { keyName, projectId }),
      list: (p) => p.listOrganizationKeys(organizationId),
      // Project-scoped keys are revoked by organization administrators (docs/platform-api.md, Revoke key).
      revoke: async (p, keyId) => {
        await p.revokeOrganizationKey(organizationId, keyId);
      },
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
      revoke: async (p, keyId) => {
        await p.revokeOrganizationKey(organizationId, keyId);
      },
    };
  }
  // Never a personal key for an Organization resource whose organization is not known.
  if (apiKeySpec.scope !== 'Personal') throw new Error('an organization key without an organization (its issuer supplies it: observe.ts)');
  return {
    listScope: 'personal',
    create: (p, keyName) => p.createPersonalKey(keyName),
    list: (p) => p.listPersonalKeys(),
    revoke: async (p, keyId) => {
      await p.revokePersonalKey(keyId);
    },
  };
}
