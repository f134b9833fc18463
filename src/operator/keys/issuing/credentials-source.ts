// Where a key resource's credentials come from (docs/issuers.md): a Secret of its own namespace
// (spec.credentialsSecretRef), or a ClusterKeyIssuer (spec.issuerRef) whose Secret lives in the
// operator's issuer namespace, which tenants cannot read. With an issuer, its policy decides first:
// a request it does not allow is refused here, before any platform request. A resource being
// deleted is never refused: its keys are revoked with the credentials that can revoke them, whatever
// the policy says now (a key the policy stopped allowing is never revoked because of it).
//
// Also read here: whether the resource's namespace is being deleted. Nothing new is minted there
// (no create, repair or rotation), since the namespace controller deletes Secrets first, and a key
// Secret deleted so would otherwise be "repaired" with a new key while the namespace goes.
import type { KeyResource, ApiKeySpec, ProjectApiKeySpec } from '../../resources/schema.ts';
import { ClusterKeyIssuerSpec, type IssuedKind } from '../../resources/issuer.ts';
import type { KubeWrites, NamespaceInfo } from '../kube-writes.ts';
import { evaluatePolicy, selectorMatches } from './issuer-policy.ts';
import type { LabelSelector } from '../../resources/issuer.ts';

/** What the operator's settings say of credentials (manager.ts, flags.ts). */
export interface CredentialsSettings {
  /** Where issuers' credentials Secrets live; undefined: issuers are not available (the namespaced mode). */
  issuerSecretsNamespace: string | undefined;
  /** Whether spec.credentialsSecretRef may be used (--namespace-credentials). */
  allowNamespaceCredentials: boolean;
  /** Only issuers with these labels are this operator's (--issuer-label-selector); undefined: every issuer. */
  issuerSelector?: LabelSelector;
}

/** Why nothing is minted for the resource now: the reason its conditions and event carry. */
export interface Refusal {
  reason: 'NotAllowed' | 'IssuerNotFound' | 'NamespaceTerminating' | 'KeyLimitReached';
  message: string;
}

export interface CredentialsSource {
  /** The Secret holding the API key to act with. */
  secret?: { namespace: string; name: string; key: string };
  /** Through an issuer: its name, and the cap its rules set for this namespace (undefined: none). */
  issuer?: { name: string; organizationId: string; cap: number | undefined; uid: string | undefined; generation: number | undefined };
  /** The spec with what the issuer supplies (organizationId) filled in. */
  spec: ApiKeySpec | ProjectApiKeySpec;
  /** Set when no key may be minted now (and nothing at all be asked of the platform, unless deleting). */
  refusal?: Refusal;
}

/** The kind of key an issuer would mint for the resource. */
function issuedKind(resource: KeyResource): IssuedKind {
  return resource.kind === 'ProjectApiKey' ? 'Project' : 'Organization';
}

export async function credentialsSource(
  kube: Pick<KubeWrites, 'readIssuer' | 'readNamespace'>,
  settings: CredentialsSettings,
  resource: KeyResource,
  spec: ApiKeySpec | ProjectApiKeySpec,
): Promise<CredentialsSource> {
  const namespace = resource.metadata.namespace;
  const deleting = resource.metadata.deletionTimestamp !== undefined;
  const issuerName = spec.issuerRef?.name;
  const [issuerObject, ns] = await Promise.all([
    issuerName !== undefined && settings.issuerSecretsNamespace !== undefined ? kube.readIssuer(issuerName) : undefined,
    deleting ? undefined : kube.readNamespace(namespace),
  ]);
  const terminating: Refusal | undefined =
    ns?.terminating === true
      ? {
          reason: 'NamespaceTerminating',
          message: `namespace ${namespace} is being deleted: no key is created, repaired or rotated; the keys are revoked as the resources are deleted`,
        }
      : undefined;

  if (issuerName === undefined) {
    const ref = spec.credentialsSecretRef;
    const source: CredentialsSource = { spec, ...(ref !== undefined ? { secret: { namespace, name: ref.name, key: ref.key } } : {}) };
    if (deleting) return source;
    if (!settings.allowNamespaceCredentials) {
      return {
        ...source,
        refusal: {
          reason: 'NotAllowed',
          message:
            'credentials of the namespace (spec.credentialsSecretRef) are not allowed by the operator (--namespace-credentials forbid): name a ClusterKeyIssuer in spec.issuerRef; ' +
            'a key issued before stays until the resource is deleted',
        },
      };
    }
    return terminating !== undefined ? { ...source, refusal: terminating } : source;
  }

  if (settings.issuerSecretsNamespace === undefined) {
    return {
      spec,
      refusal: {
        reason: 'IssuerNotFound',
        message: `ClusterKeyIssuer ${issuerName}: this operator watches a list of namespaces and cannot read cluster-scoped issuers; use spec.credentialsSecretRef, or install it for every namespace`,
      },
    };
  }
  const ours =
    issuerObject !== undefined && (settings.issuerSelector === undefined || selectorMatches(settings.issuerSelector, issuerObject.metadata?.labels ?? {}));
  const parsed = issuerObject !== undefined && ours ? ClusterKeyIssuerSpec.safeParse(issuerObject.spec) : undefined;
  if (issuerObject === undefined || !ours || parsed?.success !== true) {
    const why = issuerObject === undefined ? 'does not exist' : !ours ? "is not one of this operator's (--issuer-label-selector)" : 'has an invalid spec';
    return {
      spec,
      refusal: { reason: 'IssuerNotFound', message: `ClusterKeyIssuer ${issuerName} ${why}; no key is issued until it does (ask your platform team)` },
    };
  }
  const issuerSpec = parsed.data;
  const organizationId = issuerSpec.organizationId;
  const source: CredentialsSource = {
    spec: { ...spec, organizationId: spec.organizationId ?? organizationId },
    secret: { namespace: settings.issuerSecretsNamespace, name: issuerSpec.credentialsSecretRef.name, key: issuerSpec.credentialsSecretRef.key },
    issuer: { name: issuerName, organizationId, cap: undefined, uid: issuerObject.metadata?.uid, generation: issuerObject.metadata?.generation },
  };
  if (spec.organizationId !== undefined && spec.organizationId !== organizationId) {
    // Never acted on, not even to revoke: the issuer's credentials are of another organization.
    return {
      ...source,
      secret: undefined,
      refusal: {
        reason: 'NotAllowed',
        message: `ClusterKeyIssuer ${issuerName} issues keys of organization ${organizationId}, not of spec.organizationId ${spec.organizationId}`,
      },
    } as CredentialsSource;
  }
  const recorded = resource.status?.organizationId;
  if (recorded !== undefined && recorded !== organizationId && spec.organizationId === undefined && !deleting) {
    // The key it holds is of another organization (an issuerRef moved): nothing is checked, repaired
    // or made with these credentials, which can neither see nor revoke it (observe.ts organizationMoved).
    return {
      ...source,
      refusal: {
        reason: 'NotAllowed',
        message:
          `key ${resource.status?.keyId ?? '?'} was issued in organization ${recorded}, and ClusterKeyIssuer ` +
          `${issuerName} issues keys of organization ${organizationId}: name an issuer of ${recorded} again`,
      },
    };
  }
  if (deleting) return source;
  if (terminating !== undefined) return { ...source, refusal: terminating };
  const verdict = evaluatePolicy(issuerName, issuerSpec.allow, {
    namespace,
    namespaceLabels: ns?.labels,
    kind: issuedKind(resource),
    ...(resource.kind === 'ProjectApiKey' ? { projectId: (spec as ProjectApiKeySpec).projectId } : {}),
  });
  if (!verdict.allowed) return { ...source, refusal: { reason: 'NotAllowed', message: verdict.message } };
  return { ...source, issuer: { ...source.issuer!, cap: verdict.cap } };
}

export type { NamespaceInfo };

/** The refusal of a first key when the namespace holds as many keys through the issuer as its rule allows (issuer-slots.ts). */
export function capRefusal(issuer: string, namespace: string, cap: number): Refusal {
  return {
    reason: 'KeyLimitReached',
    message:
      `namespace ${namespace} holds ${cap} key${cap === 1 ? '' : 's'} through ClusterKeyIssuer ${issuer}, as many as its rule allows (maxKeysPerNamespace); ` +
      'this resource gets one when another resource of the namespace using the issuer is deleted',
  };
}
