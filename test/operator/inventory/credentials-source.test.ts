// Where an inventory's credentials come from, as a table (inventory/credentials-source.ts): its own
// namespace's Secret, or an issuer's, and the issuer only for an inventory of the operator's
// namespace; a tenant's inventory naming one is refused without the issuer being read.
import { describe, expect, it } from '@jest/globals';
import { inventorySource, type InventoryIssuers, type IssuerObject } from '../../../src/operator/inventory/credentials-source.ts';
import { ApiKeyInventorySpec } from '../../../src/operator/resources/inventory.ts';

const OWN = 'neon-key-operator-system';
const ISSUERS = 'issuer-secrets';
const ORG = 'org-team-00000001';
const issuer = (
  labels: Record<string, string> = {},
  spec: unknown = { organizationId: ORG, credentialsSecretRef: { name: 'org-admin' }, allow: [] },
): IssuerObject => ({ metadata: { labels }, spec });
const settings: InventoryIssuers = { ownNamespace: OWN, secretsNamespace: ISSUERS, ours: (labels) => labels.mine === 'yes' };

interface Row {
  what: string;
  namespace: string;
  spec: Record<string, unknown>;
  issuers?: Partial<InventoryIssuers>;
  /** The issuers that exist, by name. */
  exists?: Record<string, IssuerObject>;
  want: { secret: string; organizationId: string | undefined } | { refusal: string; says?: string };
  /** Whether the issuer is read. */
  reads: boolean;
}

const rows: Row[] = [
  {
    what: 'credentials of its namespace',
    namespace: 'team-a',
    spec: { organizationId: ORG, credentialsSecretRef: { name: 'neon-admin' } },
    want: { secret: 'team-a/neon-admin/apiKey', organizationId: ORG },
    reads: false,
  },
  {
    what: 'personal keys with credentials of its namespace',
    namespace: 'team-a',
    spec: { scope: 'Personal', credentialsSecretRef: { name: 'me', key: 'k' } },
    want: { secret: 'team-a/me/k', organizationId: undefined },
    reads: false,
  },
  {
    what: "an issuer, in the operator's namespace: its Secret, its organization",
    namespace: OWN,
    spec: { issuerRef: { name: 'org' } },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { secret: `${ISSUERS}/org-admin/apiKey`, organizationId: ORG },
    reads: true,
  },
  {
    what: 'an issuer and its own organization given',
    namespace: OWN,
    spec: { issuerRef: { name: 'org' }, organizationId: ORG },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { secret: `${ISSUERS}/org-admin/apiKey`, organizationId: ORG },
    reads: true,
  },
  {
    what: 'an issuer and another organization',
    namespace: OWN,
    spec: { issuerRef: { name: 'org' }, organizationId: 'org-other-00000002' },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { refusal: 'NotAllowed', says: 'not of spec.organizationId org-other-00000002' },
    reads: true,
  },
  {
    what: "an issuer, in a tenant's namespace: refused, the issuer never read",
    namespace: 'team-a',
    spec: { issuerRef: { name: 'org' } },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { refusal: 'NotAllowed', says: `only an ApiKeyInventory in the operator's namespace (${OWN})` },
    reads: false,
  },
  {
    what: "an issuer that does not exist, in a tenant's namespace: the same refusal (existence not told)",
    namespace: 'team-a',
    spec: { issuerRef: { name: 'nope' } },
    want: { refusal: 'NotAllowed', says: 'ClusterKeyIssuer nope is not used for this inventory' },
    reads: false,
  },
  {
    what: "an issuer, in the issuers' Secrets namespace that is not the operator's",
    namespace: ISSUERS,
    spec: { issuerRef: { name: 'org' } },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { refusal: 'NotAllowed' },
    reads: false,
  },
  {
    what: 'an issuer that does not exist',
    namespace: OWN,
    spec: { issuerRef: { name: 'nope' } },
    want: { refusal: 'IssuerNotFound', says: 'does not exist' },
    reads: true,
  },
  {
    what: "another operator's issuer (label selector)",
    namespace: OWN,
    spec: { issuerRef: { name: 'org' } },
    exists: { org: issuer({ mine: 'no' }) },
    want: { refusal: 'IssuerNotFound', says: "is not one of this operator's" },
    reads: true,
  },
  {
    what: 'an issuer with an invalid spec',
    namespace: OWN,
    spec: { issuerRef: { name: 'org' } },
    exists: { org: issuer({ mine: 'yes' }, { organizationId: 'x' }) },
    want: { refusal: 'IssuerNotFound', says: 'has an invalid spec' },
    reads: true,
  },
  {
    what: 'an operator that reads no issuers (namespaced mode)',
    namespace: OWN,
    spec: { issuerRef: { name: 'org' } },
    issuers: { secretsNamespace: undefined },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { refusal: 'IssuerNotFound', says: 'reads no cluster-scoped issuers' },
    reads: false,
  },
  {
    what: "both sources (older than the CRD's rules)",
    namespace: OWN,
    spec: { issuerRef: { name: 'org' }, credentialsSecretRef: { name: 'c' }, organizationId: ORG },
    want: { refusal: 'InvalidSpec', says: 'exactly one' },
    reads: false,
  },
  { what: 'neither source', namespace: OWN, spec: { organizationId: ORG }, want: { refusal: 'InvalidSpec', says: 'exactly one' }, reads: false },
  {
    what: 'a Personal inventory through an issuer',
    namespace: OWN,
    spec: { scope: 'Personal', issuerRef: { name: 'org' } },
    exists: { org: issuer({ mine: 'yes' }) },
    want: { refusal: 'InvalidSpec', says: 'never taken through an issuer' },
    reads: false,
  },
  {
    what: 'an Organization inventory with credentials and no organization',
    namespace: 'team-a',
    spec: { credentialsSecretRef: { name: 'c' } },
    want: { refusal: 'InvalidSpec', says: 'organizationId is required' },
    reads: false,
  },
];

describe('inventorySource()', () => {
  it.each(rows)('$what', async (row) => {
    const read: string[] = [];
    const spec = ApiKeyInventorySpec.parse(row.spec);
    const source = await inventorySource(row.namespace, spec, { ...settings, ...row.issuers }, async (name) => {
      read.push(name);
      return row.exists?.[name];
    });
    if ('refusal' in row.want) {
      expect(source).toEqual({ refusal: { reason: row.want.refusal, message: expect.stringContaining(row.want.says ?? '') } });
    } else {
      if ('refusal' in source) throw new Error(`refused: ${source.refusal.message}`);
      expect(`${source.secret.namespace}/${source.secret.name}/${source.secret.key}`).toBe(row.want.secret);
      expect(source.organizationId).toBe(row.want.organizationId);
    }
    expect(read.length > 0).toBe(row.reads);
  });

  it("never names the issuer's Secret to an inventory outside the operator's namespace", async () => {
    const source = await inventorySource('team-a', ApiKeyInventorySpec.parse({ issuerRef: { name: 'org' } }), settings, async () => issuer({ mine: 'yes' }));
    expect(JSON.stringify(source)).not.toContain('org-admin');
    expect(JSON.stringify(source)).not.toContain(ISSUERS);
  });
});
