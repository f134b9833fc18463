// The CRDs are generated from the zod schemas (one source of truth) and checked in: this suite fails
// when crds/ is stale (run `npm run generate`), and checks the schema is structural.
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CRD_FILES, customResourceDefinition, renderCrdYaml, type CrdKind } from '../../../src/operator/resources/crd.ts';
import { ApiKeyInventorySpec } from '../../../src/operator/resources/inventory.ts';
import { parseSpec, type KindName } from '../../../src/operator/resources/schema.ts';

const crdsDir = fileURLToPath(new URL('../../../crds/', import.meta.url));
const kinds = Object.keys(CRD_FILES) as CrdKind[];
const keyKinds = kinds.filter((k): k is KindName => k !== 'ApiKeyInventory' && k !== 'ClusterKeyIssuer');

function walk(node: unknown, visit: (node: Record<string, unknown>, path: string) => void, path = ''): void {
  if (node === null || typeof node !== 'object') return;
  if (Array.isArray(node)) {
    node.forEach((n, i) => walk(n, visit, `${path}[${i}]`));
    return;
  }
  const record = node as Record<string, unknown>;
  visit(record, path);
  for (const [k, v] of Object.entries(record)) walk(v, visit, `${path}.${k}`);
}

describe('the generated CRDs', () => {
  it.each(kinds)('crds/ holds the current %s CRD (npm run generate)', (kind) => {
    expect(readFileSync(`${crdsDir}${CRD_FILES[kind]}`, 'utf8')).toBe(renderCrdYaml(kind));
  });

  it.each(kinds)('%s has a structural schema: every property typed, no anyOf/oneOf/$ref', (kind) => {
    const crd = customResourceDefinition(kind);
    const schema = (crd.spec.versions as { schema: { openAPIV3Schema: unknown } }[])[0]?.schema.openAPIV3Schema;
    walk(schema, (node, path) => {
      for (const banned of ['anyOf', 'oneOf', '$ref', '$schema', 'allOf']) expect([path, banned, node[banned]]).toEqual([path, banned, undefined]);
      const props = node.properties as Record<string, Record<string, unknown>> | undefined;
      for (const [name, prop] of Object.entries(props ?? {})) expect([`${path}.${name}`, typeof prop.type]).toEqual([`${path}.${name}`, 'string']);
    });
  });

  it.each(keyKinds)('%s admits a gracePeriod of at least 1m only, unless rendered for a test cluster with a lower floor', (kind) => {
    const rules = (options?: { minRotationGrace: string }): string[] => {
      const spec = customResourceDefinition(kind, options).spec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      return spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.rotation['x-kubernetes-validations'].map(
        (v: { rule: string; message: string }) => `${v.rule} => ${v.message}`,
      );
    };
    expect(rules()).toContain("!has(self.gracePeriod) || duration(self.gracePeriod) >= duration('1m') => gracePeriod must be at least 1m");
    const lowered = rules({ minRotationGrace: '1s' });
    expect(lowered).toContain("!has(self.gracePeriod) || duration(self.gracePeriod) >= duration('1s') => gracePeriod must be at least 1s");
    expect(lowered.filter((r) => r.includes("duration('1m') => gracePeriod"))).toEqual([]);
    // Only that rule moves: the interval's floor stays.
    expect(lowered).toContain("!has(self.interval) || duration(self.interval) >= duration('1m') => interval must be at least 1m");
    expect(renderCrdYaml(kind, { minRotationGrace: '1s' })).not.toBe(renderCrdYaml(kind));
  });

  it('keeps every status field of ProjectApiKey, operations items included', () => {
    const spec = customResourceDefinition('ProjectApiKey').spec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    const status = spec.versions[0].schema.openAPIV3Schema.properties.status;
    expect(Object.keys(status.properties.operations.items.properties)).toEqual(['id', 'action', 'status', 'failuresCount', 'updatedAt']);
    expect(status.properties.conditions['x-kubernetes-list-type']).toBe('map');
  });

  it('ApiKeyInventory: short name naki, category neon, status subresource, the columns Live, Managed, Not Managed, Unused, Age (and Other Cluster, By Hand with -o wide); tenants cannot set status', () => {
    const spec = customResourceDefinition('ApiKeyInventory').spec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(spec.names).toEqual(expect.objectContaining({ kind: 'ApiKeyInventory', plural: 'apikeyinventories', shortNames: ['naki'], categories: ['neon'] }));
    expect(spec.versions[0].subresources).toEqual({ status: {} });
    const columns = spec.versions[0].additionalPrinterColumns
      .filter((c: { priority?: number }) => c.priority === undefined)
      .map((c: { name: string }) => c.name);
    expect(columns).toEqual(['Ready', 'Live', 'Managed', 'Not Managed', 'Unused', 'Age']);
    // -o wide adds the not-managed keys by origin: another cluster's, and made by hand (docs/clusters.md).
    const wide = spec.versions[0].additionalPrinterColumns.filter((c: { priority?: number }) => c.priority === 1);
    expect(wide.map((c: { name: string }) => c.name)).toEqual(['Reason', 'Organization', 'Other Cluster', 'By Hand', 'Listed']);
    expect(wide.find((c: { name: string }) => c.name === 'Other Cluster')).toEqual({
      name: 'Other Cluster',
      type: 'integer',
      jsonPath: '.status.notManagedByOrigin.otherCluster',
      priority: 1,
    });
    expect(wide.find((c: { name: string }) => c.name === 'By Hand')).toEqual({
      name: 'By Hand',
      type: 'integer',
      jsonPath: '.status.notManagedByOrigin.byHand',
      priority: 1,
    });
    const status = spec.versions[0].schema.openAPIV3Schema.properties.status.properties;
    // Each column's path is a field of the status.
    expect(Object.keys(status.notManagedByOrigin.properties).sort()).toEqual(['byHand', 'otherCluster', 'thisCluster']);
    expect(status.notManagedKeys.maxItems).toBe(50);
    expect(status.unusedKeys.maxItems).toBe(50);
    expect(Object.keys(status.notManagedKeys.items.properties)).toEqual([
      'id',
      'name',
      'kind',
      'projectId',
      'createdAt',
      'createdBy',
      'lastUsedAt',
      'lastUsedFromAddr',
      'managed',
      'origin',
      'cluster',
    ]);
  });

  it("ClusterKeyIssuer: cluster-scoped, short name nki, no category (kubectl get neon lists a namespace's keys), status subresource, the columns Ready, Organization, Resources, Age", () => {
    const spec = customResourceDefinition('ClusterKeyIssuer').spec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(spec.scope).toBe('Cluster');
    expect(spec.names).toEqual({
      kind: 'ClusterKeyIssuer',
      listKind: 'ClusterKeyIssuerList',
      plural: 'clusterkeyissuers',
      singular: 'clusterkeyissuer',
      shortNames: ['nki'],
    });
    expect(spec.versions[0].subresources).toEqual({ status: {} });
    const columns = spec.versions[0].additionalPrinterColumns
      .filter((c: { priority?: number }) => c.priority === undefined)
      .map((c: { name: string }) => c.name);
    expect(columns).toEqual(['Ready', 'Organization', 'Resources', 'Age']);
    const rule = spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.allow.items;
    expect(Object.keys(rule.properties)).toEqual(['namespaces', 'kinds', 'projects', 'maxKeysPerNamespace']);
    expect(rule.properties.kinds.items.enum).toEqual(['Organization', 'Project']);
  });

  it('the key kinds: exactly one of issuerRef and credentialsSecretRef; an issuer mints no Personal key; organizationId from the issuer', () => {
    const rules = (kind: KindName): string[] =>
      (customResourceDefinition(kind).spec as Record<string, any>).versions[0].schema.openAPIV3Schema.properties.spec['x-kubernetes-validations'] // eslint-disable-line @typescript-eslint/no-explicit-any
        .map((v: { rule: string }) => v.rule);
    for (const kind of keyKinds) expect(rules(kind)).toContain('has(self.issuerRef) != has(self.credentialsSecretRef)');
    expect(rules('ApiKey')).toContain("self.scope != 'Personal' || !has(self.issuerRef)");
    expect(parseSpec('ProjectApiKey', { projectId: 'p-1', issuerRef: { name: 'team' } })).toMatchObject({ ok: true });
    expect(parseSpec('ApiKey', { scope: 'Organization', issuerRef: { name: 'team' } })).toMatchObject({ ok: true });
  });

  it('ApiKeyInventory spec: defaults (scope Organization, unusedAfter 2160h, key apiKey) and the organization rule', () => {
    expect(ApiKeyInventorySpec.parse({ organizationId: 'org-a-1', credentialsSecretRef: { name: 'c' } })).toEqual({
      scope: 'Organization',
      organizationId: 'org-a-1',
      credentialsSecretRef: { name: 'c', key: 'apiKey' },
      unusedAfter: '2160h',
    });
    expect(ApiKeyInventorySpec.safeParse({ organizationId: '../x', credentialsSecretRef: { name: 'c' } }).success).toBe(false);
    expect(ApiKeyInventorySpec.safeParse({ organizationId: 'org-a-1', credentialsSecretRef: { name: 'c' }, unusedAfter: '90 days' }).success).toBe(false);
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const rules = (customResourceDefinition('ApiKeyInventory').spec as Record<string, any>).versions[0].schema.openAPIV3Schema.properties.spec[
      'x-kubernetes-validations'
    ].map((v: { message: string }) => v.message);
    expect(rules).toEqual([
      'organizationId is required when scope is Organization (unless issuerRef names an issuer)',
      'organizationId is not allowed when scope is Personal',
      "a Personal inventory is never taken through an issuer (it would list the issuer's user's own keys): use credentialsSecretRef",
      'exactly one of issuerRef and credentialsSecretRef must be set',
    ]);
    expect(ApiKeyInventorySpec.parse({ issuerRef: { name: 'platform' } })).toEqual({
      scope: 'Organization',
      issuerRef: { name: 'platform' },
      unusedAfter: '2160h',
    });
  });

  it.each(keyKinds)('%s names, printer columns, status subresource and category', (kind) => {
    const spec = customResourceDefinition(kind).spec as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(spec.names.categories).toEqual(['neon']);
    expect(spec.names.shortNames).toEqual([kind === 'ApiKey' ? 'nak' : 'npak']);
    expect(spec.versions[0].subresources).toEqual({ status: {} });
    const columns = spec.versions[0].additionalPrinterColumns
      .filter((c: { priority?: number }) => c.priority === undefined)
      .map((c: { name: string }) => c.name);
    expect(columns).toEqual(['Ready', 'Key ID', 'Secret', 'Last Used', 'Age']);
    expect(spec.versions[0].additionalPrinterColumns.find((c: { name: string }) => c.name === 'Last Used')).toEqual({
      name: 'Last Used',
      type: 'date',
      jsonPath: '.status.lastUsedAt',
    });
  });
});

describe('spec validation in code', () => {
  it('applies the defaults', () => {
    const parsed = parseSpec('ApiKey', { scope: 'Personal', credentialsSecretRef: { name: 'creds' } });
    expect(parsed).toEqual({ ok: true, spec: { scope: 'Personal', credentialsSecretRef: { name: 'creds', key: 'apiKey' }, deletionPolicy: 'Revoke' } });
  });

  it('refuses a bad deletionPolicy with the field path', () => {
    const parsed = parseSpec('ProjectApiKey', { organizationId: 'o', projectId: 'p', credentialsSecretRef: { name: 'c' }, deletionPolicy: 'Keep' });
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toContain('spec.deletionPolicy');
  });

  it('refuses a keyName too long for the random suffix', () => {
    expect(parseSpec('ApiKey', { scope: 'Personal', keyName: 'k'.repeat(56), credentialsSecretRef: { name: 'c' } }).ok).toBe(false);
    expect(parseSpec('ApiKey', { scope: 'Personal', keyName: 'k'.repeat(55), credentialsSecretRef: { name: 'c' } }).ok).toBe(true);
  });
});
