// What the caches keep of a key resource and of a managed Secret (runtime/informer-cache.ts says
// why the caches hold a projection): its identity, plus spec.projectId (operations updates wake the
// ProjectApiKeys of a project), spec.credentialsSecretRef.name (a change of the credentials Secret
// wakes the resources that name it), spec.organizationId (a new key of an organization whose creates
// are all under way waits for its turn without a read: create-admission.ts), the type, status and
// reason of each condition, in order (the managed_keys metric; where OperationsSettled is and its
// status: keys/observing/operations-patch.ts), the reason bounded to the operator's own (conditions.ts
// knownReason, else `Other`: a restored backup may say anything), and a managed Secret's owner annotation (a Secret event wakes its
// owner). Never Secret data; of any other Secret, only its identity (every Secret's metadata is
// watched: keys/watches.ts).
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { CachedConditions } from '../reconcile-context.ts';
import { knownReason } from '../status/conditions.ts';
import { identityMeta } from '../../runtime/informer-cache.ts';
import { intern, internShared } from '../../runtime/intern.ts';
import { LABEL_MANAGED_BY, MANAGED_BY } from '../../resources/schema.ts';
import { ANNOTATION_OWNER } from '../secret/secret-writer.ts';

/** An ApiKey or ProjectApiKey as the caches keep it. */
interface CachedKeyResource extends KubernetesObject {
  spec: { projectId?: string; organizationId?: string; credentialsSecretRef?: { name: string } };
  /** reason: one of the operator's reasons or `Other`, never what the resource says verbatim. */
  status: { conditions: { type: string; status: string; reason: string }[] };
  /**
   * The platform ids of the keys its status records (status.keyId; status.retiringKeys, rare): an
   * inventory marks a listed key managed by them (src/operator/inventory, recordedKeyIds()). Status
   * is written by the operator only (the status subresource), so a tenant cannot claim a key. A
   * number in the object (a small integer takes no allocation of its own), not an index: an index
   * entry per resource was about 0.2 KiB at rest, for a lookup an inventory makes once per interval.
   */
  keyId?: number;
  retiringKeyIds?: readonly number[];
}

function safeId(value: unknown): number | undefined {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? value as number : undefined;
}

/** The retiring key ids a key resource's status records (status.retiringKeys is at most 4 long). */
function retiringKeyIds(status: { retiringKeys?: unknown } | undefined): number[] {
  if (!Array.isArray(status?.retiringKeys)) return [];
  return (status.retiringKeys as { keyId?: unknown }[]).slice(0, 8).map((r) => safeId(r?.keyId)).filter((id) => id !== undefined);
}

export function trimKeyResource(obj: KubernetesObject): CachedKeyResource {
  const { spec, status } = obj as { spec?: { projectId?: unknown; organizationId?: unknown; credentialsSecretRef?: { name?: unknown } }; status?: { conditions?: unknown; keyId?: unknown; retiringKeys?: unknown } };
  const keyId = safeId(status?.keyId);
  const retiring = retiringKeyIds(status);
  const credentials = spec?.credentialsSecretRef?.name;
  const projectId = typeof spec?.projectId === 'string' ? spec.projectId : undefined;
  const organizationId = typeof spec?.organizationId === 'string' ? spec.organizationId : undefined;
  const credentialsName = typeof credentials === 'string' ? credentials : undefined;
  const conditions = (Array.isArray(status?.conditions) ? status.conditions as { type?: unknown; status?: unknown; reason?: unknown }[] : []).map((c) => [String(c.type), String(c.status), knownReason(c.reason)] as const);
  // The spec and status projections are shared, frozen, by every resource that has the same
  // (runtime/intern.ts internShared): about 0.3 KiB a resource at 10,000 (issue 14).
  return {
    ...(obj.apiVersion !== undefined ? { apiVersion: intern(obj.apiVersion) } : {}),
    ...(obj.kind !== undefined ? { kind: intern(obj.kind) } : {}),
    metadata: identityMeta(obj.metadata),
    spec: internShared(`spec ${JSON.stringify([projectId ?? null, organizationId ?? null, credentialsName ?? null])}`, () => ({
      ...(projectId !== undefined ? { projectId: intern(projectId) } : {}),
      ...(organizationId !== undefined ? { organizationId: intern(organizationId) } : {}),
      ...(credentialsName !== undefined ? { credentialsSecretRef: { name: intern(credentialsName) } } : {}),
    })),
    status: internShared(`status ${JSON.stringify(conditions)}`, () => ({ conditions: conditions.map(([type, status, reason]) => ({ type: intern(type), status: intern(status), reason: intern(reason) })) })),
    ...(keyId !== undefined ? { keyId } : {}),
    ...(retiring.length > 0 ? { retiringKeyIds: retiring } : {}),
  };
}

/** Adds the key ids cached key resources record (their key and retiring keys) to `into`: what an inventory counts as managed. */
export function recordedKeyIds(cached: Iterable<KubernetesObject>, into: Set<number>): Set<number> {
  for (const obj of cached) {
    const { keyId, retiringKeyIds } = obj as Partial<CachedKeyResource>;
    if (keyId !== undefined) into.add(keyId);
    for (const id of retiringKeyIds ?? []) into.add(id);
  }
  return into;
}

/** What the at-rest operations patch reads of a cached key resource (operations-patch.ts). */
export function cachedConditionsOf(obj: KubernetesObject): CachedConditions {
  const cached = obj as Partial<CachedKeyResource>;
  return { resourceVersion: obj.metadata?.resourceVersion, generation: obj.metadata?.generation, conditions: cached.status?.conditions ?? [] };
}

/**
 * What an owner annotation the operator writes can be: `ApiKey/<name>` or `ProjectApiKey/<name>`,
 * a resource name being a DNS subdomain (at most 253 characters). Anything else, of any length a
 * tenant chose, names no resource and is not cached (docs/security.md, Bounds).
 */
const OWNER_VALUE = /^(?:ApiKey|ProjectApiKey)\/[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;

/**
 * A Secret as the cache keeps it: who it is, and for a Secret of ours (the managed-by label) whose
 * it is; never its data, labels or other annotations.
 */
export function trimSecret(secret: V1Secret): V1Secret {
  const managed = secret.metadata?.labels?.[LABEL_MANAGED_BY] === MANAGED_BY;
  const annotated = managed ? secret.metadata?.annotations?.[ANNOTATION_OWNER] : undefined;
  // Tested on at most the longest valid value: a longer one is refused without scanning it.
  const owner = annotated !== undefined && annotated.length <= 'ProjectApiKey/'.length + 253 && OWNER_VALUE.test(annotated) ? annotated : undefined;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { ...identityMeta(secret.metadata), ...(owner !== undefined ? { annotations: { [ANNOTATION_OWNER]: owner } } : {}) },
  };
}

/**
 * The organization of a cached key resource that was never reconciled to any condition and is not
 * being deleted (a new key), or undefined: such a key may wait for its organization's turn to
 * create without being read (create-admission.ts).
 */
export function newKeyOrganization(obj: KubernetesObject | undefined): string | undefined {
  const cached = obj as CachedKeyResource | undefined;
  if (cached === undefined || cached.metadata?.deletionTimestamp !== undefined || (cached.status?.conditions.length ?? 0) > 0) return undefined;
  return cached.spec?.organizationId;
}

/** The credentials Secret a cached key resource names, as `namespace/name` (the credentials index). */
export function credentialsSecretOf(obj: KubernetesObject): readonly string[] {
  const name = (obj as CachedKeyResource).spec?.credentialsSecretRef?.name;
  const ns = obj.metadata?.namespace;
  return name === undefined || ns === undefined ? [] : [intern(`${ns}/${name}`)];
}
