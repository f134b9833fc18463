// Where an inventory's credentials come from (docs/issuers.md, Inventories): a Secret of its own
// namespace (spec.credentialsSecretRef), or a ClusterKeyIssuer (spec.issuerRef), whose Secret lives
// in the issuers' namespace. An issuer's credentials list the whole organization, so only an
// inventory of the operator's own namespace, where the platform team works, may use one. Anywhere
// else it is refused before the issuer is even read: the tenant learns nothing through it, not even
// whether the issuer exists, and no platform request is made.
import type { ApiKeyInventorySpec } from '../resources/inventory.ts';
import { ClusterKeyIssuerSpec } from '../resources/issuer.ts';

/** What the operator's settings say of issuers, for inventories (manager.ts). */
export interface InventoryIssuers {
  /** The operator's own namespace ($POD_NAMESPACE): the only one whose inventories may name an issuer. */
  ownNamespace: string;
  /** Where the issuers' credentials Secrets live (--issuer-secrets-namespace); undefined: this operator reads no issuers (the namespaced mode). */
  secretsNamespace: string | undefined;
  /** Whether an issuer with these labels is this operator's (--issuer-label-selector). */
  ours(labels: Readonly<Record<string, string>>): boolean;
}

/** A ClusterKeyIssuer as read from the apiserver (its spec not validated yet). */
export interface IssuerObject {
  metadata?: { labels?: Record<string, string> };
  spec?: unknown;
}

/** Why nothing is listed: the reason Ready carries (and, but for InvalidSpec, a Warning event). */
export interface Refusal {
  reason: 'InvalidSpec' | 'NotAllowed' | 'IssuerNotFound';
  message: string;
}

export type InventorySource =
  | {
      /** The Secret holding the API key the list is taken with. */
      secret: { namespace: string; name: string; key: string };
      /** The organization listed (the issuer's when spec.organizationId is absent); undefined: the credentials' user's personal keys. */
      organizationId: string | undefined;
      /** The issuer named, if any (for messages). */
      issuer?: string;
    }
  | { refusal: Refusal };

/**
 * The credentials of an inventory of `namespace`. `readIssuer` is asked only for an inventory of the
 * operator's namespace, of an operator that reads issuers.
 */
export async function inventorySource(
  namespace: string,
  spec: ApiKeyInventorySpec,
  issuers: InventoryIssuers,
  readIssuer: (name: string) => Promise<IssuerObject | undefined>,
): Promise<InventorySource> {
  const ref = spec.credentialsSecretRef;
  const issuerName = spec.issuerRef?.name;
  // The CRD refuses these; an object older than its rules may still hold them.
  if ((ref === undefined) === (issuerName === undefined))
    return { refusal: { reason: 'InvalidSpec', message: 'exactly one of spec.issuerRef and spec.credentialsSecretRef must be set' } };
  if (issuerName !== undefined && spec.scope === 'Personal')
    return { refusal: { reason: 'InvalidSpec', message: 'a Personal inventory is never taken through an issuer: use spec.credentialsSecretRef' } };
  if (issuerName === undefined) {
    if (spec.scope === 'Organization' && spec.organizationId === undefined)
      return { refusal: { reason: 'InvalidSpec', message: 'spec.organizationId is required when scope is Organization' } };
    return { secret: { namespace, name: ref!.name, key: ref!.key }, organizationId: spec.scope === 'Organization' ? spec.organizationId : undefined };
  }

  if (namespace !== issuers.ownNamespace) {
    return {
      refusal: {
        reason: 'NotAllowed',
        message:
          `ClusterKeyIssuer ${issuerName} is not used for this inventory: only an ApiKeyInventory in the operator's namespace (${issuers.ownNamespace}) may list through an issuer, ` +
          `whose credentials see the whole organization; nothing is listed here. Name a credentials Secret of namespace ${namespace} in spec.credentialsSecretRef instead`,
      },
    };
  }
  if (issuers.secretsNamespace === undefined) {
    return {
      refusal: {
        reason: 'IssuerNotFound',
        message: `ClusterKeyIssuer ${issuerName}: this operator watches a list of namespaces and reads no cluster-scoped issuers; use spec.credentialsSecretRef`,
      },
    };
  }
  const object = await readIssuer(issuerName);
  const ours = object !== undefined && issuers.ours(object.metadata?.labels ?? {});
  const parsed = object !== undefined && ours ? ClusterKeyIssuerSpec.safeParse(object.spec) : undefined;
  if (object === undefined || !ours || parsed?.success !== true) {
    const why = object === undefined ? 'does not exist' : !ours ? "is not one of this operator's (--issuer-label-selector)" : 'has an invalid spec';
    return { refusal: { reason: 'IssuerNotFound', message: `ClusterKeyIssuer ${issuerName} ${why}; nothing is listed until it does` } };
  }
  const issuer = parsed.data;
  if (spec.organizationId !== undefined && spec.organizationId !== issuer.organizationId) {
    return {
      refusal: {
        reason: 'NotAllowed',
        message: `ClusterKeyIssuer ${issuerName} holds credentials of organization ${issuer.organizationId}, not of spec.organizationId ${spec.organizationId}`,
      },
    };
  }
  return {
    secret: { namespace: issuers.secretsNamespace, name: issuer.credentialsSecretRef.name, key: issuer.credentialsSecretRef.key },
    organizationId: issuer.organizationId,
    issuer: issuerName,
  };
}
