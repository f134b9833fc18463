// At rest: a drift pass that finds nothing changed makes no apiserver request. A full
// reconcile reads the resource and two Secrets fresh from the apiserver; at 10,000 Ready keys that
// was 30,000 GETs per drift interval, and most of the operator's CPU at rest, to learn nothing.
//
// After a full reconcile that ended in InSync with nothing pending, the reconciler remembers what it
// verified (`Verified`): the resourceVersion of the resource and the uid + resourceVersion of its
// Secret and of its credentials Secret as it read them, which credentials those were (the id of
// their platform client, never the key), and what the status was computed from. A first key's create
// is such a pass too: it read the credentials and found no Secret, then wrote the Secret and the
// status itself, so it rests on the versions its writes returned (verifiedAfterCreate) and its first
// drift check reads nothing either. The next pass of
// that resource compares those versions with the informers' caches (identity metadata only, no
// Secret data: runtime/informer-cache.ts) and asks the platform, through the drift cache (one list
// per credentials and scope per interval, as before), whether the key is still listed and its
// project still the organization's. Only when all of it holds does the pass end there, with what a
// full pass would have concluded (the same status, so no write). Anything else runs the full
// reconcile with fresh reads, as before: a version that moved, an object missing from a cache, a
// key absent from the list, a project gone, a check that failed, a scheduled rotation due, a change
// of the key's use that status shows, a client dropped for idleness. New operations of the project
// alone (every other check held) are written with one JSON patch and no read (operations-patch.ts);
// the full pass runs only when that patch does not apply.
//
// What a stale cache can do: send a pass the full way (harmless), or hold a change back until the
// watch event that carries it arrives; that event wakes the resource (keys/watches.ts: the
// resource itself, its managed Secret by owner, its credentials Secret by the credentials index),
// and the pass it wakes sees the new version. Writes keep optimistic concurrency either way. A
// cache whose watch has failed for longer than the bound (`--cache-stale-after`) may
// miss that event for good: a Secret deleted meanwhile would pass for in sync. Its resources are not
// trusted at rest ('cache stale'): each drift check is a full pass with fresh reads until the watch
// is back.
import type { KeyAdapter, ListedUse } from '../adapter.ts';
import type { KeyResource } from '../../resources/schema.ts';
import type { Reason } from '../status/conditions.ts';
import { checkSucceeded, lookUpRecordedKey, type FailingSince } from './drift-check.ts';
import { ownerOf, type Context, type KeyDeps, type ObjectVersion, type RestBroken, type RestInputs, type Verified } from '../reconcile-context.ts';
import { statusTimestamp, usageConditions, usageFields } from './usage.ts';
import { intern } from '../../runtime/intern.ts';
import { isOrphanAge, ownTagged } from './orphans.ts';

function sameVersion(a: ObjectVersion | undefined, b: ObjectVersion): boolean {
  return a !== undefined && a.uid === b.uid && a.resourceVersion !== undefined && a.resourceVersion === b.resourceVersion;
}

/**
 * A project's operations snapshot as JSON, one string per snapshot object: every key of the project
 * rests on the same instance (a snapshot holds up to ten operations; a copy per key would grow with
 * the keys, not the projects). The poller keeps a snapshot object until it changes.
 */
const snapshotJson = new WeakMap<object, string>();

export function operationsJson(snapshot: object): string {
  let json = snapshotJson.get(snapshot);
  if (json === undefined) {
    json = JSON.stringify(snapshot);
    snapshotJson.set(snapshot, json);
  }
  return json;
}

function operationsOf(deps: KeyDeps, adapter: KeyAdapter, owner: string): string | undefined {
  const project = adapter.project;
  if (project === undefined || deps.operations === undefined) return undefined;
  const snapshot = deps.operations.pollers.snapshot(project.projectId, owner);
  return snapshot === undefined ? undefined : operationsJson(snapshot);
}

const NO_IN_USE = '[]';
/** Most keys were never used: one empty usage for all of them, not an object each. */
const NO_USAGE: Verified['usage'] = Object.freeze({});

function inUseOf(unusedAfter: string | undefined, listed: ListedUse | undefined, usage: Verified['usage'], createdAt: string | undefined, now: number): string {
  const json = JSON.stringify(
    usageConditions(
      unusedAfter !== undefined ? { usage: { unusedAfter } } : undefined,
      statusTimestamp(listed?.last_used_at) ?? usage.lastUsedAt,
      createdAt,
      now,
    ),
  );
  // Most keys have no InUse condition: one '[]' for all of them, not a copy each.
  return json === NO_IN_USE ? NO_IN_USE : json;
}

/**
 * A retirement in progress, lost attempts, a schedule or grace error (reported on each pass): the
 * next pass has something to do, so nothing rests.
 */
function somethingPending(status: NonNullable<KeyResource['status']>, ctx: Context): boolean {
  return (
    (status.retiringKeys ?? []).length > 0 ||
    (status.replacedKeys ?? []).length > 0 ||
    (status.lostAttempts ?? []).length > 0 ||
    ctx.rotation.schedule.error !== undefined ||
    ctx.rotation.graceError !== undefined
  );
}

/** What a rest records of where the credentials came from and of the resource itself, whoever verified the rest. */
function restSource(
  deps: KeyDeps,
  ctx: Context,
  source: { namespace: string; name: string },
  credentials: ObjectVersion,
  apiKey: string,
  resource: KeyResource,
): Pick<Verified, 'credentialsNamespace' | 'credentialsName' | 'credentials' | 'issuer' | 'credentialsId' | 'attemptTag' | 'resourceCreatedMs'> {
  const issuer = ctx.source?.issuer;
  return {
    credentialsNamespace: intern(source.namespace),
    credentialsName: intern(source.name),
    credentials,
    ...(issuer !== undefined ? { issuer: { name: intern(issuer.name), uid: issuer.uid, generation: issuer.generation } } : {}),
    credentialsId: deps.platformFor(apiKey).credentialsId,
    attemptTag: deps.signer.attemptTag(resource.metadata.uid),
    resourceCreatedMs: resource.metadata.creationTimestamp !== undefined ? Date.parse(resource.metadata.creationTimestamp as unknown as string) : undefined,
  };
}

/**
 * What a full InSync pass verified, taken BEFORE it runs (the operations snapshot must not be newer
 * than the one it writes); undefined when the next pass must be a full one anyway.
 */
export function verifiedBefore(deps: KeyDeps, ctx: Context, keyId: number, reason: Reason, credentials: ObjectVersion | undefined): Verified | undefined {
  const { resource, spec, adapter, secret } = ctx;
  const status = resource.status ?? {};
  const resourceVersion = resource.metadata.resourceVersion;
  const source = ctx.source?.secret;
  if (
    resourceVersion === undefined ||
    spec === undefined ||
    adapter === undefined ||
    ctx.apiKey === undefined ||
    credentials === undefined ||
    secret === undefined ||
    source === undefined
  )
    return undefined;
  // Something pending, or credentials not yet recorded as the key's: the next pass has something to do.
  if (somethingPending(status, ctx)) return undefined;
  if (ctx.listed === undefined && status.credentialsFingerprint !== ctx.fingerprint) return undefined;
  const used = {
    ...(status.lastUsedAt !== undefined ? { lastUsedAt: status.lastUsedAt } : {}),
    ...(status.lastUsedFromAddr !== undefined ? { lastUsedFromAddr: status.lastUsedFromAddr } : {}),
    ...usageFields(ctx.listed, status),
  };
  const usage = used.lastUsedAt === undefined && used.lastUsedFromAddr === undefined ? NO_USAGE : used;
  const unusedAfter = spec.usage?.unusedAfter;
  return {
    resourceVersion,
    secretName: ctx.secretName,
    secret: { uid: secret.metadata?.uid, resourceVersion: secret.metadata?.resourceVersion },
    ...restSource(deps, ctx, source, credentials, ctx.apiKey, resource),
    adapter,
    keyId,
    createdAt: status.createdAt,
    usage,
    unusedAfter,
    inUse: inUseOf(unusedAfter, ctx.listed, usage, status.createdAt, deps.now()),
    operations: operationsOf(deps, adapter, ownerOf(resource)),
    nextRotationAt: ctx.rotation.schedule.nextAt,
    reason,
  };
}

/** A new key just recorded (create-record.ts): what its create wrote, read back from nothing. */
export interface RecordedCreate {
  /** The resource as the record's status write returned it, and the version that write replaced. */
  recorded: KeyResource;
  writtenOver: string | undefined;
  keyId: number;
  createdAt: string;
  /** The key's Secret as the create wrote it: its name, and its uid and resourceVersion as the write returned them. */
  secretName: string;
  secret: ObjectVersion;
  /** The operations snapshot the record's status mirrored, if any (in-sync.ts mirrorOperationsOfNewKey). */
  operations: object | undefined;
}

/**
 * What a new key's create verified (it read the resource, its credentials and its Secret's absence,
 * and wrote the key's Secret and status itself): what a full pass right after it would rest on,
 * without that pass's reads. undefined when a next pass has something to do, as verifiedBefore.
 */
export function verifiedAfterCreate(deps: KeyDeps, ctx: Context, create: RecordedCreate): Verified | undefined {
  const { spec, adapter } = ctx;
  const { recorded, secret } = create;
  const status = recorded.status ?? {};
  const resourceVersion = recorded.metadata.resourceVersion;
  const source = ctx.source?.secret;
  const credentials = ctx.credentialsVersion;
  if (
    resourceVersion === undefined ||
    spec === undefined ||
    adapter === undefined ||
    ctx.apiKey === undefined ||
    credentials === undefined ||
    source === undefined ||
    secret.uid === undefined ||
    secret.resourceVersion === undefined ||
    status.keyId !== create.keyId ||
    somethingPending(status, ctx) ||
    status.credentialsFingerprint !== ctx.fingerprint
  )
    return undefined;
  const unusedAfter = spec.usage?.unusedAfter;
  const nextRotationAt = status.rotation?.nextRotationAt ?? undefined;
  return {
    resourceVersion,
    ...(create.writtenOver !== undefined ? { writtenOver: create.writtenOver } : {}),
    secretName: create.secretName,
    secret,
    ...restSource(deps, ctx, source, credentials, ctx.apiKey, recorded),
    adapter,
    keyId: create.keyId,
    createdAt: create.createdAt,
    usage: NO_USAGE,
    unusedAfter,
    inUse: inUseOf(unusedAfter, undefined, NO_USAGE, create.createdAt, deps.now()),
    operations: create.operations !== undefined ? operationsJson(create.operations) : undefined,
    nextRotationAt: nextRotationAt !== undefined ? Date.parse(nextRotationAt) : undefined,
    reason: 'Ready',
  };
}

/** A key of this resource's attempts that nothing records, in the list just checked (no request). */
function hasOrphans(deps: KeyDeps, verified: Verified): boolean {
  const list = ownTagged(deps.drift, verified.credentialsId, verified.adapter.listScope, verified.attemptTag, deps.signer.cluster);
  const created = verified.resourceCreatedMs;
  if (list === undefined || created === undefined || !Number.isFinite(created)) return false;
  return list.keys.some((k) => k.id !== verified.keyId && isOrphanAge(k, created, list.at, deps.pendingGraceMs));
}

/**
 * The at-rest check of a resource this process verified: undefined when nothing that pass relied on
 * changed (nothing read from the apiserver), else what changed (a full reconcile must look).
 */
export async function changedSince(
  deps: KeyDeps,
  inputs: RestInputs,
  failingSince: FailingSince,
  request: { kind: string; namespace: string; name: string },
  verified: Verified,
): Promise<RestBroken | undefined> {
  const { kind, namespace, name } = request;
  const now = deps.now();
  if (verified.nextRotationAt !== undefined && now >= verified.nextRotationAt) return 'rotation due';
  if (inputs.cacheStale?.(kind, namespace) === true || inputs.cacheStale?.('Secret', namespace) === true) return 'cache stale';
  const resource = inputs.cachedVersion(kind, namespace, name);
  // A pass right after our own write (a drift requeue that came due while the write was made) would
  // otherwise read everything fresh again only because the watch had not delivered it yet. A change
  // by anyone else after our write has another version, and its event wakes the resource again.
  const cached = resource?.resourceVersion;
  if (cached === undefined || (cached !== verified.resourceVersion && cached !== verified.writtenOver)) return 'resource';
  if (!sameVersion(inputs.cachedVersion('Secret', namespace, verified.secretName), verified.secret)) return 'secret';
  if (verified.credentialsNamespace !== namespace && inputs.cacheStale?.('Secret', verified.credentialsNamespace) === true) return 'cache stale';
  if (!sameVersion(inputs.cachedVersion('Secret', verified.credentialsNamespace, verified.credentialsName), verified.credentials)) return 'credentials';
  if (verified.issuer !== undefined) {
    const cached = inputs.cachedGeneration?.('ClusterKeyIssuer', verified.issuer.name);
    if (cached === undefined || cached.uid !== verified.issuer.uid || cached.generation === undefined || cached.generation !== verified.issuer.generation)
      return 'credentials';
  }
  // Operations are told last: a change of them alone may be written without a full pass
  // (operations-patch.ts), so everything else must have been checked first.
  const operationsChanged = operationsOf(deps, verified.adapter, `${namespace}/${name}`) !== verified.operations;
  const client = inputs.platformById(verified.credentialsId);
  if (client === undefined) return 'client dropped';
  let found;
  try {
    found = await lookUpRecordedKey(deps, client, verified.adapter, verified.keyId, verified.createdAt);
  } catch {
    // The full pass asks the same cache (a failed list is remembered for the interval) and reports.
    return 'check failed';
  }
  if (found.key !== 'Live') return 'key absent';
  if (hasOrphans(deps, verified)) return 'orphan';
  if (found.project === 'NotInOrganization') return 'project gone';
  // The key's use as status shows it: the same, or the full pass writes it.
  if (Object.keys(usageFields(found.listed, verified.usage)).length > 0) return 'usage';
  if (inUseOf(verified.unusedAfter, found.listed, verified.usage, verified.createdAt, now) !== verified.inUse) return 'usage';
  // The check succeeded; the pass that writes the operations counts it (as a full pass would).
  if (operationsChanged) return 'operations';
  checkSucceeded(deps, failingSince, `${kind}/${namespace}/${name}`, 'Live');
  return undefined;
}
