// What the caches keep of a key resource and of a managed Secret (runtime/informer-cache.ts says
// why the caches hold a projection): its identity, plus spec.projectId (operations updates wake the
// ProjectApiKeys of a project), spec.credentialsSecretRef.name (a change of the credentials Secret
// wakes the resources that name it), spec.organizationId (a new key of an organization whose creates
// are all under way waits for its turn without a read: create-admission.ts), the type, status and
// reason of each condition, in order (the managed_keys metric; where OperationsSettled is and its
// status: keys/observing/operations-patch.ts), the reason bounded to the operator's own (conditions.ts
// knownReason, else `Other`: a restored backup may say anything), and a managed Secret's owner annotation (a Secret event wakes its
// owner). Never Secret data; of any other Secret, only its identity (every Secret's metadata is
// watched: keys/watches.ts). And of a new key (never reconciled: no status, no intent, not being
// deleted) its whole object as sent, managedFields aside, when that is at most SEED_MAX_CHARS of
// JSON: the copy its create starts from at its turn, without a read (cachedCopy(); docs/design.md
// section 5.3, "Create turns").
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { CachedConditions } from '../reconcile-context.ts';
import { knownReason } from '../status/conditions.ts';
import { identityMeta } from '../../runtime/informer-cache.ts';
import { intern, internShared } from '../../runtime/intern.ts';
import { ANNOTATION_CREATE_PENDING, CREDENTIALS_FINALIZER, LABEL_MANAGED_BY, MANAGED_BY, type KeyResource, type KindName } from '../../resources/schema.ts';
import { ANNOTATION_OWNER } from '../secret/secret-writer.ts';
import { unverifiedIssuer } from '../issuing/create-intent.ts';

/** An ApiKey or ProjectApiKey as the caches keep it. */
interface CachedKeyResource extends KubernetesObject {
  spec: { projectId?: string; organizationId?: string; credentialsSecretRef?: { name: string }; issuerRef?: { name: string } };
  /** reason: one of the operator's reasons or `Other`, never what the resource says verbatim. */
  status: { conditions: { type: string; status: string; reason: string }[] };
  /**
   * The platform ids of the keys its status records (status.keyId; status.retiringKeys and replacedKeys, rare): an
   * inventory marks a listed key managed by them (src/operator/inventory, recordedKeyIds()). Status
   * is written by the operator only (the status subresource), so a tenant cannot claim a key. A
   * number in the object (a small integer takes no allocation of its own), not an index: an index
   * entry per resource would cost memory at rest for a lookup an inventory makes once per interval.
   */
  keyId?: number;
  retiringKeyIds?: readonly number[];
  /**
   * A new key's object as sent (managedFields aside), as JSON: one string, about a byte a character,
   * dropped by the projection of the first status the operator writes (cachedCopy()).
   */
  seed?: string;
  /**
   * It carries a create intent (keys.neon.dev/create-pending, whatever its content): with an issuer's
   * cap, a resource with an intent may hold a key the platform made (issuing/issuer-slots.ts).
   */
  pending?: true;
  /**
   * The ClusterKeyIssuers whose cap counts it (issuing/issuer-slots.ts): the one that made its
   * recorded key (status.issuer) and the one its intent makes a key with (the intent's `issuer`,
   * else spec.issuerRef for a first key). Usually one, or none.
   */
  slotIssuers?: readonly string[];
  /**
   * spec.secret.name, when it is set (else the Secret's name is metadata.name): with `immutable`,
   * what finds the other resources of the namespace naming the same Secret name (secretNameHolders).
   */
  secretName?: string;
  /** spec.secret.immutable: each key in its own Secret, named after the Secret name. */
  immutable?: true;
}

/**
 * The longest new key kept whole (JSON characters): a key as a team applies it is 0.4–1 KiB (a
 * kubectl last-applied annotation doubles it); a larger one (a tenant's big annotations or
 * template) is read at its turn as before. So a key waiting for its first create costs at most
 * this much more in the cache, and only until its first status.
 */
export const SEED_MAX_CHARS = 2_048;

/**
 * The new keys' copies kept at once, in all (JSON characters, about a byte each): a tenant who
 * applies keys faster than their first statuses are written (a flood waiting for its turns) makes
 * the operator keep at most this much more; the keys beyond it are read at their turn, as before.
 * 4 MiB holds 2,048 copies of the longest and about 5,000 of a key as kubectl applies it.
 */
export const SEEDS_MAX_CHARS = 4 * 1024 * 1024;

/**
 * The copies' characters still counted. A copy is counted from the projection that keeps it until
 * the garbage collector has taken that projection (its replacement by the next event's, its key's
 * deletion, a relist): counted from the cache's own objects, so nothing done or missed by a watch
 * can leave a count behind. Counting may lag the collector (a copy freed but not yet finalized
 * still counts): then fewer keys get a copy for a while, never more memory.
 */
let seedChars = 0;
const seedsFreed = new FinalizationRegistry<number>((chars) => {
  seedChars -= chars;
});

/** The copies' characters counted now (tests: the bound above). */
export function seedCharsKept(): number {
  return seedChars;
}

/** A new key's object as JSON, when it is one and small enough to keep whole (see SEED_MAX_CHARS). */
function seedOf(obj: KubernetesObject): string | undefined {
  const { metadata, status } = obj as KubernetesObject & { status?: unknown };
  if (metadata === undefined || metadata.deletionTimestamp !== undefined || metadata.annotations?.[ANNOTATION_CREATE_PENDING] !== undefined) return undefined;
  const bare =
    status === undefined ||
    (typeof status === 'object' && status !== null && Object.entries(status).every(([k, v]) => k === 'conditions' && Array.isArray(v) && v.length === 0));
  if (!bare) return undefined;
  // Measured before it is copied: an object with large metadata is refused without a stringify.
  let size = 0;
  for (const values of [metadata.annotations, metadata.labels]) {
    for (const [k, v] of Object.entries(values ?? {})) size += k.length + (typeof v === 'string' ? v.length : 0);
  }
  if (size > SEED_MAX_CHARS || seedChars >= SEEDS_MAX_CHARS) return undefined;
  const text = JSON.stringify({ ...obj, metadata: { ...metadata, managedFields: undefined } });
  return text.length <= SEED_MAX_CHARS && seedChars + text.length <= SEEDS_MAX_CHARS ? text : undefined;
}

function safeId(value: unknown): number | undefined {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : undefined;
}

/**
 * The key ids a key resource's status records beside its key: retiring after a rotation
 * (status.retiringKeys, at most 4) and replaced by a repair, not revoked yet (status.replacedKeys, at most 8).
 */
function retiringKeyIds(status: { retiringKeys?: unknown; replacedKeys?: unknown } | undefined): number[] {
  const ids = (list: unknown): number[] =>
    Array.isArray(list)
      ? (list as { keyId?: unknown }[])
          .slice(0, 8)
          .map((r) => safeId(r?.keyId))
          .filter((id) => id !== undefined)
      : [];
  return [...ids(status?.retiringKeys), ...ids(status?.replacedKeys)];
}

export function trimKeyResource(obj: KubernetesObject): CachedKeyResource {
  const { spec, status } = obj as {
    spec?: {
      projectId?: unknown;
      organizationId?: unknown;
      credentialsSecretRef?: { name?: unknown };
      issuerRef?: { name?: unknown };
      secret?: { name?: unknown; immutable?: unknown };
    };
    status?: { conditions?: unknown; keyId?: unknown; retiringKeys?: unknown; replacedKeys?: unknown; issuer?: unknown };
  };
  const keyId = safeId(status?.keyId);
  const retiring = retiringKeyIds(status);
  const credentials = spec?.credentialsSecretRef?.name;
  const projectId = typeof spec?.projectId === 'string' ? spec.projectId : undefined;
  const organizationId = typeof spec?.organizationId === 'string' ? spec.organizationId : undefined;
  const credentialsName = typeof credentials === 'string' ? credentials : undefined;
  const issuer = spec?.issuerRef?.name;
  const issuerName = typeof issuer === 'string' && issuer.length <= 253 ? issuer : undefined;
  const intent = obj.metadata?.annotations?.[ANNOTATION_CREATE_PENDING];
  const pending = intent !== undefined;
  const slotIssuers = slotIssuersOf(keyId, status?.issuer, intent, issuerName);
  const conditions = (Array.isArray(status?.conditions) ? (status.conditions as { type?: unknown; status?: unknown; reason?: unknown }[]) : []).map(
    (c) => [String(c.type), String(c.status), knownReason(c.reason)] as const,
  );
  const seed = seedOf(obj);
  const secretName = typeof spec?.secret?.name === 'string' && spec.secret.name.length <= 253 ? spec.secret.name : undefined;
  // The spec and status projections are shared, frozen, by every resource that has the same
  // (runtime/intern.ts internShared): about 0.3 KiB a resource at 10,000. The fields every resource
  // has are in one literal (in the object itself); the rare ones are added after it, so only a
  // resource that has one gets the second array they go to.
  const projected: CachedKeyResource = {
    apiVersion: intern(obj.apiVersion),
    kind: intern(obj.kind),
    metadata: identityMeta(obj.metadata),
    spec: internShared(`spec ${JSON.stringify([projectId ?? null, organizationId ?? null, credentialsName ?? null, issuerName ?? null])}`, () => ({
      ...(projectId !== undefined ? { projectId: intern(projectId) } : {}),
      ...(organizationId !== undefined ? { organizationId: intern(organizationId) } : {}),
      ...(credentialsName !== undefined ? { credentialsSecretRef: { name: intern(credentialsName) } } : {}),
      ...(issuerName !== undefined ? { issuerRef: { name: intern(issuerName) } } : {}),
    })),
    status: internShared(`status ${JSON.stringify(conditions)}`, () => ({
      conditions: conditions.map(([type, status, reason]) => ({ type: intern(type), status: intern(status), reason: intern(reason) })),
    })),
    keyId,
  };
  if (retiring.length > 0) projected.retiringKeyIds = retiring;
  if (seed !== undefined) projected.seed = seed;
  if (pending) projected.pending = true;
  if (slotIssuers.length > 0) projected.slotIssuers = slotIssuers;
  if (secretName !== undefined) projected.secretName = intern(secretName);
  if (spec?.secret?.immutable === true) projected.immutable = true;
  if (seed !== undefined) {
    seedChars += seed.length;
    seedsFreed.register(projected, seed.length);
  }
  return projected;
}

/**
 * A new key as the cache last saw it whole (seedOf()), or undefined. The copy may be behind the
 * apiserver (a watch is late): it is acted on only because the first write of every decision a
 * new key can come to carries its resourceVersion (the finalizer with the intent, a status patch),
 * so a stale copy's write gets 409 and writes nothing, creates nothing; the reconciler then reads
 * fresh (reconciler.ts). A fresh copy, parsed anew each time: the reconcile may change it.
 */
export function cachedCopy(obj: KubernetesObject | undefined, kind: KindName, namespace: string, name: string): KeyResource | undefined {
  const seed = (obj as CachedKeyResource | undefined)?.seed;
  if (seed === undefined) return undefined;
  const copy = JSON.parse(seed) as KeyResource;
  const meta = copy.metadata as Partial<KeyResource['metadata']> | undefined;
  // As a GET answers it, or not at all.
  if (copy.kind !== kind || meta?.namespace !== namespace || meta.name !== name || typeof meta.uid !== 'string' || typeof meta.resourceVersion !== 'string')
    return undefined;
  return copy;
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

/** What the Secret cache holds of a Secret (trimSecret()). */
interface CachedSecret extends V1Secret {
  /**
   * Its owner annotation (`<Kind>/<name>`), or the owner's kind alone when the owner has the
   * Secret's own name, as nearly every key's Secret does: that string is shared, where an annotation
   * object with the whole value cost ~90 bytes a Secret (cachedOwner() gives the value back).
   */
  owner?: string;
}

/**
 * A Secret as the cache keeps it: who it is, and for a Secret of ours (the managed-by label) whose
 * it is (its owner annotation: cachedOwner()); never its data, labels or other annotations.
 */
export function trimSecret(secret: V1Secret): V1Secret {
  const managed = secret.metadata?.labels?.[LABEL_MANAGED_BY] === MANAGED_BY;
  const annotated = managed ? secret.metadata?.annotations?.[ANNOTATION_OWNER] : undefined;
  // Tested on at most the longest valid value: a longer one is refused without scanning it.
  const owner = annotated !== undefined && annotated.length <= 'ProjectApiKey/'.length + 253 && OWNER_VALUE.test(annotated) ? annotated : undefined;
  // A credentials Secret the operator keeps (issuing/credentials-in-use.ts): its events wake the Secret's own reconcile.
  const kept = secret.metadata?.finalizers?.includes(CREDENTIALS_FINALIZER) === true;
  const identity = identityMeta(secret.metadata);
  const kind = owner?.slice(0, owner.indexOf('/'));
  // One literal, owner in it even when undefined: a property added later goes to a second array (~50 bytes).
  const projected: CachedSecret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: kept ? { ...identity, finalizers: [CREDENTIALS_FINALIZER] } : identity,
    owner: kind !== undefined && owner === `${kind}/${identity.name}` ? intern(kind) : owner,
  };
  return projected;
}

/** The owner annotation of a cached Secret of ours (`<Kind>/<name>`), as trimSecret() kept it; undefined for any other. */
export function cachedOwner(secret: KubernetesObject): string | undefined {
  const owner = (secret as CachedSecret).owner;
  if (owner === undefined || owner.includes('/')) return owner;
  return `${owner}/${secret.metadata?.name ?? ''}`;
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

/**
 * The issuer a cached key resource names, twice: as `namespace/issuer` (a namespace's keys through
 * the issuer: its cap, issuing/issuer-slots.ts) and as `/issuer` (every resource using it: the
 * issuer's status and its deletion, src/operator/issuers).
 */
export function issuerOf(obj: KubernetesObject): readonly string[] {
  const name = (obj as CachedKeyResource).spec?.issuerRef?.name;
  const ns = obj.metadata?.namespace;
  return name === undefined || ns === undefined ? [] : [intern(`${ns}/${name}`), intern(`/${name}`)];
}

/**
 * The issuers whose cap counts a key resource: the one status records as having made its key, and
 * the one a create under way makes a key with (its intent's, or for a first key the one it names).
 * Status is the operator's alone; an intent a tenant forged counts in its own namespace only.
 */
function slotIssuersOf(keyId: number | undefined, recorded: unknown, intent: string | undefined, named: string | undefined): readonly string[] {
  const issuers: string[] = [];
  if (keyId !== undefined && typeof recorded === 'string' && recorded.length <= 253) issuers.push(intern(recorded));
  if (intent !== undefined) {
    const making = unverifiedIssuer(intent) ?? (keyId === undefined ? named : undefined);
    if (making !== undefined && !issuers.includes(making)) issuers.push(intern(making));
  }
  return issuers;
}

/** What the cap counts of a cached key resource: the issuers it holds a key through (recorded, or an intent that may have made one). */
export function slotIssuersOfCached(obj: KubernetesObject | undefined): readonly string[] {
  return (obj as CachedKeyResource | undefined)?.slotIssuers ?? [];
}

/** The Secret name a cached key resource names in spec.secret.name, as `namespace/name` (the Secret name index); none for the default. */
export function explicitSecretNameOf(obj: KubernetesObject): readonly string[] {
  const name = (obj as CachedKeyResource).secretName;
  const ns = obj.metadata?.namespace;
  return name === undefined || ns === undefined ? [] : [intern(`${ns}/${name}`)];
}

/** The Secret name of a cached key resource (spec.secret.name, else its own name) and whether it is immutable. */
export function secretNameOfCached(obj: KubernetesObject | undefined): { name: string | undefined; immutable: boolean } {
  const cached = obj as CachedKeyResource | undefined;
  return { name: cached?.secretName ?? cached?.metadata?.name, immutable: cached?.immutable === true };
}

/** The cached key resource by the issuers whose cap counts it, as `namespace/issuer` (the slot index). */
export function slotsOf(obj: KubernetesObject): readonly string[] {
  const ns = obj.metadata?.namespace;
  return ns === undefined ? [] : slotIssuersOfCached(obj).map((issuer) => intern(`${ns}/${issuer}`));
}
