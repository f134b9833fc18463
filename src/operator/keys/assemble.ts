// The key domain assembled from what the runtime gives it (the informers' caches and work queue,
// the fenced kube clients, the logger, the metrics, the signer): one platform client per
// credentials sharing one limiter per organization for org key creation (docs/design.md section
// 5.3), the drift cache, the operations pollers, the create turns, the issuers' slots and the
// KeyReconciler, with the sweeps of the resources at rest. manager.ts wires what it returns.
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { PlatformClient } from '../../platform/index.ts';
import type { Reconciler } from '../runtime/workers.ts';
import { objectRef, type OwnWrites } from '../runtime/own-writes.ts';
import { appsClient, type CoreClient, type CustomObjectsClient } from '../runtime/kube-client.ts';
import type { KeyPlatform } from './adapter.ts';
import { ApiServerWrites } from './kube-writes.ts';
import { PlatformClients } from './platform-clients.ts';
import type { ReconcileRecord } from './reconcile-context.ts';
import { KeyReconciler } from './reconciler.ts';
import { cachedKeyOf, countManagedKeys, issuerSlots, restInputs, type KeyCluster } from './cache-reads.ts';
import { credentialsUsers, issuerUsers, projectKeysIn, secretNameHolders, wakeProject } from './watches.ts';
import type { CredentialsSettings } from './issuing/credentials-source.ts';
import { parseLabelSelector, selectorMatches } from './issuing/issuer-policy.ts';
import type { MembershipsKept } from './issuing/organization-membership.ts';
import { organizationSlots } from './issuing/organization-share.ts';
import { DEFAULT_SIGNING_KEY_SECRET, Signer, loadSigningKey } from './issuing/signing.ts';
import { recordedKeyIds } from './observing/cache-projection.ts';
import { DriftCache, type DriftGone } from './observing/drift.ts';
import { OperationsPollers, type OperationsClient } from './observing/operations-poller.ts';
import { EventRecorder } from './status/events.ts';
import type { OperatorMetrics } from './status/metrics.ts';
import { CreateAdmission } from './turns/create-admission.ts';
import type { FairLimiter } from './turns/fair-limiter.ts';
import { operatorOrgKeyLimiters, type OrgKeyLimiters } from './turns/org-key-limiters.ts';
import { CredentialsReads } from './issuing/credentials-reads.ts';

export type { KeyCluster } from './cache-reads.ts';

/**
 * Makes a platform client acting with one API key (src/platform's PlatformClient in production).
 * `beforeWrite` is the write fence (runtime/write-fence.ts): called before each write attempt.
 */
export type PlatformFactory = (options: { baseUrl: string; apiKey: string; beforeWrite: () => void; userAgent: string }) => KeyPlatform & OperationsClient;

/** The options of the operator the key domain honours (manager.ts OperatorOptions says what each means). */
export interface KeyOptions {
  platformBaseUrl: string;
  platformFactory?: PlatformFactory;
  allowInsecurePlatformUrl?: boolean;
  metrics?: OperatorMetrics;
  driftIntervalMs?: number;
  pendingGraceMs?: number;
  unverifiedAfterMs?: number;
  rotationPollMs?: number;
  minRotationGraceMs?: number;
  createsPerOrganization?: number;
  organizationRateShare?: number;
  issuerLabelSelector?: string;
  allowNamespaceCredentials?: boolean;
  onReconcile?(record: ReconcileRecord): void;
  cacheDelivery?: (kind: string, namespace: string, name: string, cached: KubernetesObject | undefined) => KubernetesObject | undefined;
}

/** What the runtime gives the key domain. */
export interface KeyRuntime {
  /** The informers' caches and the work queue; read and woken only once the controller started. */
  cluster: KeyCluster;
  /** The apiserver behind the write fence (runtime/write-fence.ts fenceKubeWrites), and its clients. */
  kubeConfig: KubeConfig;
  core: CoreClient;
  objects: CustomObjectsClient;
  logger: Logger;
  /** Distinguishes this process in intents. */
  identity: string;
  ownWrites: OwnWrites;
  signer: Signer;
  /** Asked before every platform write (the write fence). */
  beforeWrite: () => void;
  /** Names this process in the platform's logs. */
  userAgent: string;
  /** Where the issuers' Secrets live; undefined when this operator uses no issuers. */
  issuerSecretsNamespace: string | undefined;
}

/** The key domain, assembled: what manager.ts wires into the controller, and its handles. */
export interface AssembledKeys {
  /** Reconciles the key resources and the credentials Secrets they name. */
  reconciler: Reconciler;
  /** This cluster's creations a second per organization (issuing/organization-share.ts). */
  slots: number;
  /** How often the platform's lists are taken again (`--drift-interval`). */
  driftIntervalMs: number;
  /** The platform's key lists, shared with the inventory. */
  drift: DriftCache;
  /** The platform client of the credentials with this API key (one per credentials, shared with the inventory). */
  platformFor(apiKey: string): { platform: KeyPlatform; credentialsId: string };
  /** The key ids the key resources' status records (the inventory's managed ids; no LIST). */
  managedKeyIds(): ReadonlySet<number>;
  /** The key resources naming an issuer (the issuers' users). */
  issuerUsers(issuer: string): string[];
  /** Whether an issuer with these labels is this operator's (`--issuer-label-selector`). */
  issuerSelected(labels: Readonly<Record<string, string>>): boolean;
  /** What is kept per organization (RunningOperator.perOrganization). */
  perOrganization(): { limiters: number; lines: number; memberships: MembershipsKept; pollers: number };
  /** Once the controller started: managed_keys counted from the caches, and the sweeps of resources at rest. */
  start(): void;
  /** Leadership lost: the sweeps and the pollers end at once (their platform calls aborted). */
  ended(): void;
  /** Stopping: the counting and the timers end (before the controller stops). */
  halt(): void;
  /** Stopped: the pollers end (after the controller stopped). */
  stopPollers(): Promise<void>;
}

/** How often the resources at rest are looked at for a due drift check (KeyReconciler.sweep). */
const SWEEP_TICK_MS = 1_000;

/** The Secret holding the signing key (signing.ts); by default neon-key-operator-signing-key in neon-key-operator-system. */
export function signingKeySecretOf(options: { signingKeySecret?: { namespace: string; name: string } }): { namespace: string; name: string } {
  return options.signingKeySecret ?? { namespace: 'neon-key-operator-system', name: DEFAULT_SIGNING_KEY_SECRET };
}

/** The signer of intents and Secret annotations: the key given, or the one in its Secret (made when missing). */
export async function loadKeySigner(
  core: CoreClient,
  options: { signingKeySecret?: { namespace: string; name: string }; signingKey?: Buffer; clusterName?: string },
  logger: Logger,
): Promise<Signer> {
  const secret = signingKeySecretOf(options);
  return new Signer(options.signingKey ?? (await loadSigningKey(core, secret.namespace, secret.name, logger)), { cluster: options.clusterName ?? '' });
}

function defaultPlatformFactory(metrics: OperatorMetrics | undefined, allowInsecureHttp: boolean, orgKeyLimiter: OrgKeyLimiters<FairLimiter>): PlatformFactory {
  // ONE limiter per organization for org key creation, across every worker and credentials.
  return ({ baseUrl, apiKey, beforeWrite, userAgent }) =>
    new PlatformClient({
      baseUrl,
      apiKey,
      beforeWrite,
      userAgent,
      orgKeyLimiter,
      allowInsecureHttp,
      ...(metrics !== undefined ? { onResponse: (info) => metrics.observePlatformRequest(info.method, info.route, info.status, info.durationMs / 1000) } : {}),
    });
}

/** The platform clients of the key domain, each acting with one API key, fenced and named by this process. */
function keyPlatforms(runtime: KeyRuntime, options: KeyOptions, slots: number) {
  const orgLimiters = operatorOrgKeyLimiters(slots);
  const makePlatform = options.platformFactory ?? defaultPlatformFactory(options.metrics, options.allowInsecurePlatformUrl === true, orgLimiters);
  const factory = (apiKey: string): KeyPlatform & OperationsClient =>
    makePlatform({ baseUrl: options.platformBaseUrl, apiKey, beforeWrite: runtime.beforeWrite, userAgent: runtime.userAgent });
  // One client per credentials in use, bounded in count and idle time (platform-clients.ts).
  const clients = new PlatformClients(factory);
  const evictIdleClients = setInterval(() => clients.evictIdle(), 60_000);
  evictIdleClients.unref();
  return { orgLimiters, factory, clients, evictIdleClients };
}

/**
 * A refreshed list that no longer shows a key (or a project) wakes the resources resting on it:
 * drift is caught when the list is taken, within one interval (drift.ts, DriftGone). A project
 * gone wakes every ProjectApiKey naming it, at rest or not (the resting ones among them): one
 * between passes would otherwise learn it only at its own next pass, up to one more interval
 * later. The lists are taken again each interval by the sweep (refreshDue).
 * A key gone is a key whose consumers are broken now: its resource goes in the normal lane (in
 * turns between namespaces: runtime/queue.ts), with the keys issued lately that no list showed
 * (drift.ts, issued()), at rest or not.
 */
function wakeOnGone(cluster: KeyCluster, logger: Logger, restingOn: (gone: DriftGone) => string[]): (gone: DriftGone) => void {
  return (gone) => {
    const woken = gone.what === 'projects' ? projectKeysIn(cluster, gone.ids, gone.organizationId) : [...new Set([...restingOn(gone), ...gone.resources])];
    if (woken.length > 0)
      logger.info(
        { what: gone.what, ids: gone.ids.slice(0, 20), resources: woken.length },
        "gone from the platform's list; waking the resources that rest on it",
      );
    for (const key of woken) {
      if (gone.what === 'keys') cluster.enqueue(key);
      else cluster.enqueueLow(key);
    }
  };
}

/**
 * Three times this cluster's creations per second per organization under way at once (from a
 * key's turn to the platform's answer to its create): the limiter's slots each have the next
 * create waiting, and 10 more keys are read and their intents written meanwhile, which on a
 * loaded machine takes about a second. The rest of a wave waits in its organization's line,
 * holding no worker (turns/create-admission.ts).
 */
function createTurns(cluster: KeyCluster, logger: Logger, perOrganization: number): CreateAdmission {
  return new CreateAdmission({
    perOrganization,
    wake: (key) => {
      // When a waiting key's turn came, apart from when a worker took it up (bench/fairness.ts --fair-stages).
      const [kind, namespace, name] = key.split('/');
      logger.debug({ kind, namespace, name }, 'turn');
      cluster.enqueue(key);
    },
  });
}

/** The issuer selector of `--issuer-label-selector`; one that does not parse matches no issuer. */
function issuerSelectorOf(text: string | undefined): CredentialsSettings['issuerSelector'] {
  if (text === undefined) return undefined;
  return parseLabelSelector(text) ?? { matchExpressions: [{ key: 'keys.neon.dev/unparsable-selector', operator: 'Exists' as const }] };
}

/**
 * Where credentials may come from. Issuers are cluster-scoped: read with every namespace watched (a
 * ClusterRole), or with a list of namespaces when the issuers' namespace is named (the platform team
 * granted issuers apart).
 */
function credentialsSettings(runtime: KeyRuntime, options: KeyOptions, issuerSelector: CredentialsSettings['issuerSelector']): CredentialsSettings {
  return {
    issuerSecretsNamespace: runtime.issuerSecretsNamespace,
    allowNamespaceCredentials: options.allowNamespaceCredentials ?? true,
    ...(issuerSelector !== undefined ? { issuerSelector } : {}),
  };
}

/**
 * The drift checks of resources at rest (KeyReconciler.sweep): those that are due, about every
 * second (a tenth of the interval when that is shorter); one sweep at a time.
 */
function startSweeps(cluster: KeyCluster, logger: Logger, drift: DriftCache, reconciler: KeyReconciler, driftIntervalMs: number): NodeJS.Timeout {
  let sweeping = false;
  const sweeper = setInterval(
    () => {
      // The drift lists first: one an interval old is taken again now, whatever the checks (drift.ts).
      drift.refreshDue();
      if (sweeping) return;
      sweeping = true;
      reconciler
        .sweep()
        .then(
          (woken) => {
            for (const key of woken) cluster.enqueueLow(key);
          },
          (error: unknown) => logger.error({ err: error instanceof Error ? error.message : String(error) }, 'drift sweep failed'),
        )
        .finally(() => {
          sweeping = false;
        });
    },
    Math.max(10, Math.min(SWEEP_TICK_MS, driftIntervalMs / 10)),
  );
  sweeper.unref();
  return sweeper;
}

/** The key domain's metrics hooks of the reconciler (drift checks and retired keys by outcome). */
function reconcilerMetrics(metrics: OperatorMetrics | undefined): Pick<ConstructorParameters<typeof KeyReconciler>[0], 'onDriftCheck' | 'onRetired'> {
  if (metrics === undefined) return {};
  return { onDriftCheck: (outcome) => metrics.driftChecks.inc({ outcome }), onRetired: (outcome) => metrics.retiredKeys.inc({ outcome }) };
}

/** The parts of the key domain the reconciler is made of (assembleKeys). */
interface ReconcilerParts {
  clients: PlatformClients;
  drift: DriftCache;
  pollers: OperationsPollers;
  admission: CreateAdmission;
  driftIntervalMs: number;
  issuerSelector: CredentialsSettings['issuerSelector'];
}

/** The KeyReconciler: the apiserver's and the platform's ports, the caches it reads, the turns, slots and metrics it uses. */
function keyReconciler(runtime: KeyRuntime, options: KeyOptions, parts: ReconcilerParts): KeyReconciler {
  const { cluster, logger } = runtime;
  const { clients, drift, pollers, admission, driftIntervalMs, issuerSelector } = parts;
  const kube = new ApiServerWrites(runtime.objects, runtime.core, appsClient(runtime.kubeConfig), runtime.kubeConfig);
  return new KeyReconciler({
    kube,
    secretUncached: (namespace, name) =>
      !cluster.cacheStale('Secret', namespace) &&
      cluster.cachedMeta('Secret', namespace, name) === undefined &&
      !runtime.ownWrites.waiting(objectRef('Secret', namespace, name)),
    credentialsReads: new CredentialsReads(kube, {
      version: (namespace, name) => {
        const meta = cluster.cachedMeta('Secret', namespace, name);
        return meta === undefined ? undefined : { uid: meta.uid, resourceVersion: meta.resourceVersion };
      },
      stale: (namespace) => cluster.cacheStale('Secret', namespace),
    }),
    platformFor: (apiKey) => clients.for(apiKey),
    drift,
    events: new EventRecorder(runtime.core, 'neon-key-operator', logger),
    identity: runtime.identity,
    pendingGraceMs: options.pendingGraceMs ?? 120_000,
    driftIntervalMs,
    signer: runtime.signer,
    ...(options.unverifiedAfterMs !== undefined ? { unverifiedAfterMs: options.unverifiedAfterMs } : {}),
    ...(options.rotationPollMs !== undefined ? { rotationPollMs: options.rotationPollMs } : {}),
    ...(options.minRotationGraceMs !== undefined ? { minRotationGraceMs: options.minRotationGraceMs } : {}),
    ...reconcilerMetrics(options.metrics),
    operations: { pollers },
    ownWrites: runtime.ownWrites,
    platformUrl: options.platformBaseUrl,
    rest: restInputs(cluster, clients),
    ...(options.onReconcile !== undefined ? { onReconcile: options.onReconcile } : {}),
    turns: admission,
    credentialsSettings: credentialsSettings(runtime, options, issuerSelector),
    credentialsUsers: { holders: (namespace, name) => credentialsUsers(cluster, namespace, name) },
    wake: (key) => cluster.enqueue(key),
    slots: issuerSlots(cluster),
    secretNameHolders: (namespace, name) => secretNameHolders(cluster, namespace, name),
    cachedKey: cachedKeyOf(cluster, options.cacheDelivery),
  });
}

/**
 * The key domain, from what the runtime gives it. Nothing runs before start(): the pollers poll and
 * the caches are read only once the controller started.
 */
export function assembleKeys(runtime: KeyRuntime, options: KeyOptions): AssembledKeys {
  const { cluster, logger } = runtime;
  // This cluster's creations a second per organization: its share of the platform's 10 (organization-share.ts).
  const slots = organizationSlots(options.organizationRateShare);
  const { orgLimiters, factory, clients, evictIdleClients } = keyPlatforms(runtime, options, slots);
  const driftIntervalMs = options.driftIntervalMs ?? 300_000;
  // The operations poller of a project lists with the issued keys of its ProjectApiKeys: one client
  // per owner, replaced when its key changes and dropped with its owner. onUpdate runs only once
  // polls start (after the controller started).
  const pollers = new OperationsPollers({
    clientForKey: factory,
    onUpdate: (projectId): void => wakeProject(cluster, projectId),
    slowIntervalMs: Math.max(driftIntervalMs, 5_000),
    logger,
    ...(options.metrics !== undefined ? { onPoll: (outcome) => options.metrics?.operationsPolls.inc({ outcome }) } : {}),
  });
  // The drift cache wakes the resources resting on what left a list; which rest is the reconciler's, made after it.
  let restingOn: (gone: DriftGone) => string[] = () => [];
  const drift = new DriftCache(
    driftIntervalMs,
    Date.now,
    wakeOnGone(cluster, logger, (gone) => restingOn(gone)),
  );
  const admission = createTurns(cluster, logger, options.createsPerOrganization ?? 3 * slots);
  const issuerSelector = issuerSelectorOf(options.issuerLabelSelector);
  const reconciler = keyReconciler(runtime, options, { clients, drift, pollers, admission, driftIntervalMs, issuerSelector });
  restingOn = (gone) => reconciler.restingOn(gone);
  let sweeper: NodeJS.Timeout | undefined;
  return {
    reconciler,
    slots,
    driftIntervalMs,
    drift,
    platformFor: (apiKey) => clients.for(apiKey),
    managedKeyIds: () =>
      recordedKeyIds(
        ['ApiKey', 'ProjectApiKey'].flatMap((kind) => cluster.cached(kind)),
        new Set(),
      ),
    issuerUsers: (issuer) => issuerUsers(cluster, issuer),
    issuerSelected: (labels) => issuerSelector === undefined || selectorMatches(issuerSelector, labels),
    perOrganization: () => ({ limiters: orgLimiters.size, lines: admission.size, memberships: reconciler.memberships, pollers: pollers.projects().length }),
    start: () => {
      options.metrics?.countManagedKeysWith(() => countManagedKeys(cluster));
      sweeper = startSweeps(cluster, logger, drift, reconciler, driftIntervalMs);
    },
    ended: () => {
      clearInterval(sweeper);
      void pollers.stop();
    },
    halt: () => {
      options.metrics?.countManagedKeysWith(undefined);
      clearInterval(sweeper);
      clearInterval(evictIdleClients);
    },
    stopPollers: () => pollers.stop(),
  };
}
