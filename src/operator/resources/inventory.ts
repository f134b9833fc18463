// The ApiKeyInventory resource (docs/inventory.md): a read-only report of every live key of an
// organization, or of the credentials' user, as the platform lists them, each marked managed (recorded
// by a key resource in this cluster) or not, and unused or not. The zod schema is the source of the
// type, of the validation of what is read, and of the CRD (crd.ts, `npm run generate`).
import { z } from 'zod';
import { GO_DURATION_PATTERN } from '../go-duration.ts';
import { Condition } from './key-status.ts';
import { CredentialsSecretRef, IssuerRef, ORGANIZATION_ID_PATTERN, type API_VERSION, type ObjectMeta } from './schema.ts';

export const INVENTORY_KIND = 'ApiKeyInventory';
export const INVENTORY_PLURAL = 'apikeyinventories';
/** The most keys each list of status holds, newest first; the count beside it is the total. */
export const INVENTORY_LIST_MAX = 50;
export const DEFAULT_UNUSED_AFTER = '2160h';

export const ApiKeyInventorySpec = z
  .object({
    scope: z.enum(['Organization', 'Personal']).default('Organization').meta({
      description:
        'Organization: the organization and project-scoped keys of organizationId. Personal: the personal keys of the user whose key is in credentialsSecretRef.',
    }),
    organizationId: z
      .string()
      .min(5)
      .max(64)
      .regex(ORGANIZATION_ID_PATTERN)
      .optional()
      .meta({
        description:
          'The platform organization id, e.g. org-cool-cherry-12345678; required for scope Organization with credentialsSecretRef, ' +
          "taken from the issuer with issuerRef (if given, it must be the issuer's); not allowed for Personal.",
      }),
    credentialsSecretRef: CredentialsSecretRef.optional().meta({
      description:
        'The Secret, in the same namespace as this resource, holding the platform API key the list is taken with: ' +
        'for scope Organization, a personal key of a member of the organization or an organization key; for Personal, a personal key. ' +
        'The inventory shows only what this key may list. Secrets of other namespaces are never read. Exactly one of credentialsSecretRef and issuerRef is set.',
    }),
    issuerRef: IssuerRef.optional().meta({
      description:
        'A ClusterKeyIssuer whose credentials take the list of its organization (scope Organization only). ' +
        "Used only by an inventory in the operator's own namespace, where the platform team works: anywhere else it is refused (NotAllowed) without any platform request. " +
        'Exactly one of credentialsSecretRef and issuerRef is set.',
    }),
    unusedAfter: z
      .string()
      .min(2)
      .max(64)
      .regex(GO_DURATION_PATTERN)
      .default(DEFAULT_UNUSED_AFTER)
      .meta({
        description: 'A key not used for this long (a Go duration, e.g. 2160h; at least 1s) is unused; a key never used counts from its creation.',
        'x-kubernetes-validations': [{ rule: "duration(self) >= duration('1s')", message: 'unusedAfter must be a duration of at least 1s' }],
      }),
  })
  .meta({
    description: 'ApiKeyInventorySpec names the keys to report and the credentials to list them with. Nothing is ever revoked.',
    'x-kubernetes-validations': [
      {
        rule: "self.scope != 'Organization' || has(self.organizationId) || has(self.issuerRef)",
        message: 'organizationId is required when scope is Organization (unless issuerRef names an issuer)',
      },
      { rule: "self.scope != 'Personal' || !has(self.organizationId)", message: 'organizationId is not allowed when scope is Personal' },
      {
        rule: "self.scope != 'Personal' || !has(self.issuerRef)",
        message: "a Personal inventory is never taken through an issuer (it would list the issuer's user's own keys): use credentialsSecretRef",
      },
      { rule: 'has(self.issuerRef) != has(self.credentialsSecretRef)', message: 'exactly one of issuerRef and credentialsSecretRef must be set' },
    ],
  });
export type ApiKeyInventorySpec = z.infer<typeof ApiKeyInventorySpec>;

const timestamp = (description: string) => z.string().max(64).meta({ format: 'date-time', description });

export const InventoryKey = z.object({
  id: z.int().min(0).meta({ description: 'The platform id of the key.' }),
  name: z.string().max(64).optional().meta({
    description: 'Its platform name (absent, with createdBy, projectId and lastUsedFromAddr, when the operator did not keep its details: see withoutDetails).',
  }),
  kind: z.enum(['Organization', 'Project', 'Personal']).meta({ description: 'Organization key, project-scoped key (projectId) or personal key.' }),
  projectId: z.string().max(64).optional().meta({ description: 'The project of a project-scoped key.' }),
  createdAt: timestamp('When the platform created the key.'),
  createdBy: z.string().max(128).optional().meta({ description: 'The platform user that created it: name (id).' }),
  lastUsedAt: timestamp('Its last use, as the platform reports it (absent: never used).').optional(),
  lastUsedFromAddr: z.string().max(64).optional().meta({ description: 'Where it was last used from.' }),
  managed: z.boolean().meta({ description: 'Recorded by an ApiKey or ProjectApiKey of this cluster (which one, and in which namespace, is never shown).' }),
  origin: z
    .enum(['ThisCluster', 'OtherCluster', 'ByHand'])
    .optional()
    .meta({
      description:
        'Of a key not managed: what its name says made it (docs/clusters.md). ThisCluster: named as this cluster names its keys, yet recorded by none of its resources; ' +
        "OtherCluster: named as another cluster names them (cluster); ByHand: in no operator's format (the console, a script, another tool). " +
        'Anyone who can create keys can choose any name: this is what the name says, never proof.',
    }),
  cluster: z.string().max(64).optional().meta({
    description:
      "With origin OtherCluster: the cluster name the key's name carries; absent for the format without a cluster name (a cluster without --cluster-name, or this one before it had its name).",
  }),
});
export type InventoryKey = z.infer<typeof InventoryKey>;

const count = (description: string) => z.int().min(0).optional().meta({ description });
const keyList = (description: string) => z.array(InventoryKey).max(INVENTORY_LIST_MAX).optional().meta({ description });

export const ApiKeyInventoryStatus = z
  .object({
    observedGeneration: z.int().min(0).optional().meta({ description: 'The metadata.generation last reconciled.' }),
    listedAt: timestamp('When the platform list shown here was taken (it is taken again once per drift interval).').optional(),
    live: count('Live keys in the list.'),
    managed: count('Live keys recorded by an ApiKey or ProjectApiKey of this cluster.'),
    notManaged: count('Live keys no resource of this cluster records: made by hand, by scripts, by other clusters, or by clusters gone.'),
    notManagedByOrigin: z
      .object({
        thisCluster: z.int().min(0).meta({
          description:
            'Named as this cluster names its keys (left by a cluster restored under this name, or by a create of this cluster that its resource never recorded).',
        }),
        otherCluster: z.int().min(0).meta({ description: 'Named as another cluster names its keys (another --cluster-name, or none).' }),
        byHand: z.int().min(0).meta({ description: "In no operator's format: made by hand, by scripts, by other tools." }),
      })
      .optional()
      .meta({
        description:
          'The keys not managed, by what their names say made them (they add up to notManaged); names can be forged, so this is a report, never a reason to revoke.',
      }),
    unused: count('Live keys, managed or not, not used within spec.unusedAfter (a key never used counts from its creation).'),
    neverUsed: count('Live keys the platform reports no use of, whatever their age (most of them are also unused once older than spec.unusedAfter).'),
    notManagedKeys: keyList(`The keys not managed, newest first; at most ${INVENTORY_LIST_MAX} (notManaged is the total).`),
    unusedKeys: keyList(`The unused keys, newest first; at most ${INVENTORY_LIST_MAX} (unused is the total).`),
    withoutDetails: count(
      'Entries of notManagedKeys and unusedKeys shown without name, creator, project and address: the operator keeps those details, as the list ' +
        'is taken, for the newest 200 keys not managed and the newest 200 unused of each unusedAfter read lately only (counts are always exact). ' +
        'Not 0 only when many keys changed between the list and this report, or spec.unusedAfter changed to a value the list was not taken for (its counts are exact); ' +
        'the next list (one drift interval) shows them.',
    ),
    conditions: z
      .array(Condition)
      .max(8)
      .optional()
      .meta({
        description:
          'Ready: True (Listed) once the list was taken; False with the platform reason the keys use ' +
          '(CredentialsMissing, CredentialsRefused, CredentialsWrongKind, NotFound, RateLimited, PlatformUnavailable, ...), ' +
          'or NotAllowed / IssuerNotFound when issuerRef may not be used here or names no usable issuer.',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['type'],
      }),
  })
  .meta({ description: 'What the platform listed, with what this cluster manages of it.' });
export type ApiKeyInventoryStatus = z.infer<typeof ApiKeyInventoryStatus>;

export interface ApiKeyInventory {
  apiVersion: typeof API_VERSION;
  kind: typeof INVENTORY_KIND;
  metadata: ObjectMeta;
  spec: ApiKeyInventorySpec;
  status?: ApiKeyInventoryStatus;
}

export const INVENTORY_KIND_INFO = {
  kind: INVENTORY_KIND,
  plural: INVENTORY_PLURAL,
  singular: 'apikeyinventory',
  shortNames: ['naki'],
  description: 'ApiKeyInventory reports every live key of an organization (or of a user): managed by this cluster or not, used or not. It revokes nothing.',
  spec: ApiKeyInventorySpec,
  status: ApiKeyInventoryStatus,
} as const;
