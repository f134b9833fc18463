import { describe, expect, it } from '@jest/globals';
import { adapterFor, type KeyPlatform } from '../../../src/operator/keys/adapter.ts';
import type { ApiKey, ProjectApiKey } from '../../../src/operator/resources/schema.ts';

const meta = { name: 'n', namespace: 'ns', uid: 'u' };
const creds = { name: 'c', key: 'apiKey' };

function recorder(): { calls: string[]; platform: KeyPlatform } {
  const calls: string[] = [];
  const created = { id: 1, key: 'k', name: 'name-12345678' };
  const revoked = (id: number): { id: number; name: string; revoked: boolean; last_used_at: null; last_used_from_addr: string } => ({
    id,
    name: 'n',
    revoked: true,
    last_used_at: null,
    last_used_from_addr: '',
  });
  const platform: KeyPlatform = {
    createPersonalKey: async (name) => {
      calls.push(`createPersonal ${name}`);
      return created;
    },
    createOrganizationKey: async (org, o) => {
      calls.push(`createOrg ${org} ${o.keyName} ${o.projectId ?? '-'}`);
      return created;
    },
    listPersonalKeys: async () => {
      calls.push('listPersonal');
      return [];
    },
    listOrganizationKeys: async (org) => {
      calls.push(`listOrg ${org}`);
      return [];
    },
    revokePersonalKey: async (id) => {
      calls.push(`revokePersonal ${id}`);
      return revoked(id);
    },
    revokeOrganizationKey: async (org, id) => {
      calls.push(`revokeOrg ${org} ${id}`);
      return revoked(id);
    },
    listProjects: async () => [],
    getAuth: async () => {
      calls.push('getAuth');
      return { account_id: 'u', auth_method: 'api_key_user' };
    },
    listMyOrganizations: async () => [],
  };
  return { calls, platform };
}

async function exercise(resource: ApiKey | ProjectApiKey): Promise<{ scope: string; calls: string[] }> {
  const adapter = adapterFor(resource, resource.spec);
  const { calls, platform } = recorder();
  await adapter.create(platform, 'name-12345678');
  await adapter.list(platform);
  await adapter.revoke(platform, 7);
  return { scope: adapter.listScope, calls };
}

describe('the per-kind adapters', () => {
  it('personal keys use the personal endpoints', async () => {
    expect(
      await exercise({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ApiKey',
        metadata: meta,
        spec: { scope: 'Personal', credentialsSecretRef: creds, deletionPolicy: 'Revoke' },
      }),
    ).toEqual({ scope: 'personal', calls: ['createPersonal name-12345678', 'listPersonal', 'revokePersonal 7'] });
  });

  it('organization keys use the organization endpoints', async () => {
    expect(
      await exercise({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ApiKey',
        metadata: meta,
        spec: { scope: 'Organization', organizationId: 'org-1', credentialsSecretRef: creds, deletionPolicy: 'Revoke' },
      }),
    ).toEqual({ scope: 'org:org-1', calls: ['createOrg org-1 name-12345678 -', 'listOrg org-1', 'revokeOrg org-1 7'] });
  });

  it('project keys add project_id and share the organization list', async () => {
    expect(
      await exercise({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ProjectApiKey',
        metadata: meta,
        spec: { organizationId: 'org-1', projectId: 'p-1', credentialsSecretRef: creds, deletionPolicy: 'Revoke' },
      }),
    ).toEqual({ scope: 'org:org-1', calls: ['createOrg org-1 name-12345678 p-1', 'listOrg org-1', 'revokeOrg org-1 7'] });
  });

  it('is one adapter per scope, shared by the resources of it; another organization or project has its own', async () => {
    const project = (name: string, organizationId: string, projectId: string): ProjectApiKey =>
      ({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ProjectApiKey',
        metadata: { ...meta, name },
        spec: { organizationId, projectId, credentialsSecretRef: creds, deletionPolicy: 'Revoke' },
      }) as ProjectApiKey;
    const a = project('a', 'org-1', 'p-1');
    const b = project('b', 'org-1', 'p-1');
    expect(adapterFor(a, a.spec)).toBe(adapterFor(b, b.spec));
    const other = project('c', 'org-1', 'p-2');
    expect(adapterFor(other, other.spec)).not.toBe(adapterFor(a, a.spec));
    expect((await exercise(other)).calls).toEqual(['createOrg org-1 name-12345678 p-2', 'listOrg org-1', 'revokeOrg org-1 7']);
    const elsewhere = project('d', 'org-2', 'p-1');
    expect((await exercise(elsewhere)).calls).toEqual(['createOrg org-2 name-12345678 p-1', 'listOrg org-2', 'revokeOrg org-2 7']);
  });
});
