// What every step of a key reconcile shares: the dependencies (KeyDeps: the Kubernetes port, the
// platform, the drift cache, events, signing, clocks), what this reconcile read (Context), and what
// the at-rest check reads of the process (RestInputs: observing/at-rest.ts).
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { OwnWrites } from '../runtime/own-writes.ts';
import type { ApiKeySpec, KeyResource, ProjectApiKeySpec } from '../resources/schema.ts';
import type { KeyAdapter, KeyPlatform, ListedUse } from './adapter.ts';
import type { ReconcileResult, Worker } from '../runtime/workers.ts';
import type { CreateTurns } from './turns/create-admission.ts';
import type { BlockedInputs, InternalReason, Reason } from './status/conditions.ts';
import type { Credentials, Decision, Observation, PendingAttempt } from './decision-types.ts';
import type { DriftCache } from './observing/drift.ts';
import type { EventRecorder } from './status/events.ts';
import type { KubeWrites } from './kube-writes.ts';
import type { OperationsPollers } from './observing/operations-poller.ts';
import type { CredentialsKinds } from './issuing/credentials-kind.ts';
import type { OrganizationMemberships } from './issuing/organization-membership.ts';
import type { Signer } from './issuing/signing.ts';
import type { CredentialsSettings, CredentialsSource } from './issuing/credentials-source.ts';
import type { IssuerSlots } from './issuing/issuer-slots.ts';
import type { CredentialsUsers } from './issuing/credentials-in-use.ts';
import type { CredentialsReads } from './issuing/credentials-reads.ts';
import type { RotationContext } from './rotation-schedule.ts';

export interface KeyDeps {
  kube: KubeWrites;
  /** A platform client acting with the given API key (cached per key by the caller). */
  platformFor(apiKey: string): { platform: KeyPlatform; credentialsId: string };
  drift: DriftCache;
  events: Pick<EventRecorder, 'record'>;
  identity: string;
  pendingGraceMs: number;
  driftIntervalMs: number;
  /** Signs and verifies what the operator writes where tenants can write too (signing.ts). */
  signer: Signer;
  /** GET /auth answers per credentials (credentials-kind.ts). */
  credentialsKinds: CredentialsKinds;
  /** GET /users/me/organizations answers per credentials: a create enters only its credentials' organizations' lines (organization-membership.ts). */
  memberships: OrganizationMemberships;
  /** How long drift checks of a key may fail before its conditions say it is no longer known to be live. */
  unverifiedAfterMs: number;
  /** Counts drift checks by outcome (metrics). */
  onDriftCheck?: (outcome: 'live' | 'absent' | 'failed') => void;
  /** Counts replaced keys that left status.retiringKeys, by outcome (metrics: retired_keys_total). */
  onRetired?: (outcome: 'revoked' | 'revoked_in_use' | 'gone') => void;
  now: () => number;
  /** Where the versions this process writes are recorded, so their watch events do not wake the key again. */
  ownWrites?: OwnWrites;
  /** The platform API URL the operator uses (the PlatformUrl entry of spec.secret.template). */
  platformUrl?: string;
  /** How often a reconcile looks again while a replaced key retires (rollouts, last use); default 5 s. */
  rotationPollMs?: number;
  /** The shortest grace a replaced key gets (--min-rotation-grace; default 1m, the CRD's floor): a shorter spec.rotation.gracePeriod is raised to it. */
  minRotationGraceMs?: number;
  /** Operations mirroring for ProjectApiKeys (docs/design.md section 4). */
  operations?: {
    pollers: Pick<OperationsPollers, 'ensure' | 'release' | 'snapshot'>;
  };
  /** The informers' caches and the platform clients by id, for the at-rest check (at-rest.ts); without them every pass is a full one. */
  rest?: RestInputs;
  /** Told of every reconcile once it ended (ReconcileRecord). */
  onReconcile?: (record: ReconcileRecord) => void;
  /** Which creates of an organization go now and which wait for their turn (turns/create-admission.ts); without it every create goes at once. */
  turns?: CreateTurns;
  /** Where credentials may come from (issuing/credentials-source.ts); default: namespace credentials only, no issuers. */
  credentialsSettings?: CredentialsSettings;
  /** The resources naming each credentials Secret that hold the finalizer (issuing/credentials-in-use.ts); without it no credentials Secret is kept. */
  credentialsUsers?: CredentialsUsers;
  /** A resource naming a credentials Secret of its namespace released its keys (KeyReconciler: that Secret's own reconcile is woken). */
  onCredentialsReleased?: (key: string, namespace: string, secret: string) => void;
  /** The caps of issuers' rules (issuing/issuer-slots.ts); without it no cap is enforced. */
  slots?: IssuerSlots;
  /** The key resources of a namespace whose Secret name is `name` (watches.ts secretNameHolders); without it none is looked for. */
  secretNameHolders?: (namespace: string, name: string) => { key: string; immutable: boolean }[];
  /**
   * Whether the informers' cache, not stale, holds no Secret of that name and no write of ours to it
   * is on its way back: a new key's Secret is then not read (secret-locate.ts locateSecret).
   * Without it every Secret is read by name.
   */
  secretUncached?: (namespace: string, name: string) => boolean;
  /** The credentials Secrets as read at the version the cache holds (issuing/credentials-reads.ts); without it each pass reads them by name. */
  credentialsReads?: Pick<CredentialsReads, 'read'>;
  /** A key resource as the informers' cache holds it (cache-projection.ts), for a new key's turn without a read. */
  cachedKey?: (kind: string, namespace: string, name: string) => KubernetesObject | undefined;
}

/**
 * What one reconcile did, per resource and in order: for tests and tools that need that (the
 * metrics count reconciles without naming resources, and logs are for people, not for parsing).
 * Never a secret: names, times, actions, reasons.
 */
export interface ReconcileRecord {
  kind: string;
  namespace: string;
  name: string;
  /** Wall clock (ms) when the reconcile started and ended. */
  startedAt: number;
  endedAt: number;
  /** What decide() chose, in order (two when a finalizer was added first and the reconcile went on). */
  actions: Decision['action']['type'][];
  reasons: (Reason | InternalReason)[];
  /** A create request was sent to the platform (the intent written first). */
  createSent: boolean;
  /**
   * Decided from the informers' caches and the drift list, with no apiserver request: nothing the
   * last full pass verified had changed (at-rest.ts).
   */
  atRest?: true;
  /** A resource that was at rest, no longer: what changed since its last full pass (at-rest.ts); read fresh again unless `operationsPatched`. */
  restBroken?: RestBroken;
  /** Only its project's operations had changed: written with one JSON patch, no read (operations-patch.ts). */
  operationsPatched?: true;
  /**
   * The create it decided waits for its organization's turn (turns/create-admission.ts): nothing was
   * written, and the key is queued again when its turn comes.
   */
  deferred?: true;
  /** Started from the informer's cached copy of a new key, not a GET (reconciler.ts #read). */
  cachedRead?: true;
  /** The result, or `error` for a reconcile that threw. */
  result: ReconcileResult['type'] | 'error';
}

/** Everything the reconcile read, kept for the action it runs. */
export interface Context {
  resource: KeyResource;
  spec: ApiKeySpec | ProjectApiKeySpec | undefined;
  adapter: KeyAdapter | undefined;
  secretName: string;
  secretKey: string;
  secret: V1Secret | undefined;
  apiKey: string | undefined;
  credentials: Credentials;
  /** Where the credentials came from: a Secret of the namespace or an issuer's (issuing/credentials-source.ts). */
  source?: CredentialsSource;
  /** The namespace's credentials Secret as read (spec.credentialsSecretRef): kept while keys issued with it live (issuing/credentials-in-use.ts). */
  credentialsSecret?: V1Secret;
  /** The credentials Secret's uid and resourceVersion as read (the at-rest check: at-rest.ts). */
  credentialsVersion?: { uid: string | undefined; resourceVersion: string | undefined };
  /** signer.fingerprint of the credentials in use (status.credentialsFingerprint). */
  fingerprint: string | undefined;
  /** The recorded key as the drift check's list shows it. */
  listed: ListedUse | undefined;
  observation: Observation;
  /** Rotation: the spec (or the defaults), the request token, the schedule (rotation-schedule.ts). */
  rotation: RotationContext;
  logger: Logger;
  /** The record of this reconcile (KeyDeps.onReconcile), filled as it goes. */
  record?: ReconcileRecord;
  /** The worker running this reconcile: a create gives it back while it waits for the platform's rate limit. */
  worker?: Worker;
  /**
   * The resourceVersion of this reconcile's last status write (resource-writes.ts): the read version
   * with that status only, since the patch lands on the read version or not at all.
   */
  statusWritten?: string | undefined;
  /** A new key's create recorded it: what the resource rests on from then on (observing/at-rest.ts verifiedAfterCreate), for the reconciler to keep. */
  restsAfterCreate?: Verified;
}

/** The platform client acting with the resource's credentials. */
export function platformOf(deps: KeyDeps, ctx: Context): { platform: KeyPlatform; credentialsId: string } {
  if (ctx.apiKey === undefined) throw new Error('no credentials');
  return deps.platformFor(ctx.apiKey);
}

/** status.organizationId of a key made for an organization (or a project of it): where the key lives, whoever names the credentials later. */
export function keyOrganization(ctx: Pick<Context, 'adapter'>): { organizationId?: string } {
  const scope = ctx.adapter?.listScope;
  return scope?.startsWith('org:') === true ? { organizationId: scope.slice('org:'.length) } : {};
}

/**
 * status.issuer of a key recorded from an intent: the ClusterKeyIssuer that made it, whose cap
 * counts it until its resource is deleted (issuing/issuer-slots.ts); null (a merge patch removing
 * it) for a key made with credentials of the namespace.
 */
export function keyIssuer(pending: Pick<PendingAttempt, 'issuer'>, recorded: KeyResource['status']): { issuer?: string | null } {
  return pending.issuer !== undefined ? { issuer: pending.issuer } : typeof recorded?.issuer === 'string' ? { issuer: null } : {};
}

/** `namespace/name`: how the operations pollers name the owners of a project. */
export function ownerOf(resource: KeyResource): string {
  return `${resource.metadata.namespace}/${resource.metadata.name}`;
}

/** What blockedConditions() needs of what the reconcile read. */
export function blockedInputs(ctx: Pick<Context, 'observation' | 'resource'>): BlockedInputs {
  return {
    secretExists: ctx.observation.secret !== undefined,
    keyRecorded: ctx.observation.status.keyId !== undefined,
    current: ctx.resource.status?.conditions,
  };
}

/** An object as the caches identify it. */
export interface ObjectVersion {
  uid: string | undefined;
  resourceVersion: string | undefined;
}

/** What a full reconcile ending in InSync verified, kept per resource (no secret in it): observing/at-rest.ts. */
export interface Verified {
  resourceVersion: string;
  /**
   * The version a write of this process replaced with `resourceVersion` (a status written), which
   * the cache shows until that write's watch event arrives: nobody else's change either way.
   */
  writtenOver?: string;
  secretName: string;
  secret: ObjectVersion;
  /** Where the credentials Secret is: the resource's namespace, or the issuers' (spec.issuerRef). */
  credentialsNamespace: string;
  credentialsName: string;
  credentials: ObjectVersion;
  /**
   * With spec.issuerRef: the ClusterKeyIssuer as read, by generation: a change of its spec (its
   * policy, its credentials Secret) ends the rest; its status writes (its verification) do not.
   */
  issuer?: { name: string; uid: string | undefined; generation: number | undefined };
  /** The id of the platform client of those credentials (a digest of the key: manager.ts). */
  credentialsId: string;
  adapter: KeyAdapter;
  keyId: number;
  createdAt: string | undefined;
  /** The resource's attempt tag and creation time: a key an interrupted create left ends the rest (observe.ts orphanKeys). */
  attemptTag: string;
  resourceCreatedMs: number | undefined;
  /** status.lastUsedAt / lastUsedFromAddr once that pass's status was written. */
  usage: { lastUsedAt?: string; lastUsedFromAddr?: string };
  unusedAfter: string | undefined;
  /** The InUse condition that pass wrote (JSON). */
  inUse: string;
  /** The operations snapshot that pass mirrored (JSON), taken before it read it: never newer than what was written. */
  operations: string | undefined;
  nextRotationAt: number | undefined;
  reason: Reason;
}

/** What ended a rest: which input changed since the last full pass (ReconcileRecord.restBroken). */
export type RestBroken =
  | 'rotation due'
  | 'cache stale'
  | 'resource'
  | 'secret'
  | 'credentials'
  | 'operations'
  | 'client dropped'
  | 'key absent'
  | 'project gone'
  | 'check failed'
  | 'usage'
  | 'orphan';

/** What the at-rest check reads of the process: its caches, and its platform clients by id. */
export interface RestInputs {
  /**
   * The identity of an object as the informers' caches hold it (their own metadata object, to be
   * read and never changed); undefined when not cached.
   */
  cachedVersion(kind: string, namespace: string, name: string): Readonly<ObjectVersion> | undefined;
  /**
   * The uid and metadata.generation of a cluster-scoped object as cached (a ClusterKeyIssuer): its
   * spec's version, which its status writes do not move. undefined when not cached.
   */
  cachedGeneration?(kind: string, name: string): { uid: string | undefined; generation: number | undefined } | undefined;
  /** Whether the cache of `kind` in `namespace` is stale (its watch failing too long); undefined: never. */
  cacheStale?(kind: string, namespace: string): boolean;
  /** The platform client of credentials in use, by id; undefined once dropped. */
  platformById(credentialsId: string): ReturnType<KeyDeps['platformFor']> | undefined;
  /**
   * A key resource's version, generation and conditions (type and status, in order) as the cache
   * holds them (keys/observing/cache-projection.ts); undefined when not cached. The operations patch at rest
   * (observing/operations-patch.ts) needs no more.
   */
  cachedConditions(kind: string, namespace: string, name: string): CachedConditions | undefined;
}

/** What the cache keeps of a key resource's conditions, at the version it names. */
export interface CachedConditions {
  resourceVersion: string | undefined;
  generation: number | undefined;
  conditions: readonly { type: string; status: string }[];
}
