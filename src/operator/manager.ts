// Wires the operator's rooms into the runtime: the key domain (keys/index.ts assembleKeys), the
// inventories and the ClusterKeyIssuers, each given what it uses, behind one controller whose
// requests go to the room of their kind. startOperator() runs it in-process (tests, main.ts).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { PlatformClient } from '../platform/index.ts';
import {
  assembleKeys,
  keyWatches,
  loadKeySigner,
  signingKeySecretOf,
  type AssembledKeys,
  type MembershipsKept,
  type OperatorMetrics,
  type PlatformFactory,
  type ReconcileRecord,
  type Signer,
} from './keys/index.ts';
import { Controller, type ControllerOptions, type StaleCache } from './runtime/controller.ts';
import type { Reconciler } from './runtime/workers.ts';
import type { WakeLimits } from './runtime/wake-limiter.ts';
import { OwnWrites } from './runtime/own-writes.ts';
import { createLogger } from './runtime/logger.ts';
import { fenceKubeWrites, soleLeadership, type Leadership } from './runtime/write-fence.ts';
import { coreClient, customObjectsClient, type CoreClient, type CustomObjectsClient } from './runtime/kube-client.ts';
import type { ReconcileOutcome } from './runtime/metrics.ts';
import type { KindName } from './resources/schema.ts';
import { INVENTORY_KIND } from './resources/inventory.ts';
import { ISSUER_KIND } from './resources/issuer.ts';
import {
  InventoryEventRecorder,
  InventoryReconciler,
  inventoryWatches,
  issuerInventories,
  registerInventoryGauge,
  type InventoryCounts,
} from './inventory/index.ts';
import { IssuerEventRecorder, IssuerReconciler, issuerWatches, registerIssuerGauge, type CachedIssuer, type IssuerReadiness } from './issuers/index.ts';

export { orgKeyLimiters, operatorOrgKeyLimiters, type OrgKeyLimiters, type PlatformFactory } from './keys/index.ts';

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  platformBaseUrl: string;
  platformFactory?: PlatformFactory;
  workers?: number;
  /** Watch one namespace (the same as `namespaces: [namespace]`). */
  namespace?: string;
  /** Watch these namespaces; every namespace when neither this nor `namespace` is given. */
  namespaces?: readonly string[];
  driftIntervalMs?: number;
  /** How long an intent written by another process is presumed in flight (docs/design.md section 3.2). */
  pendingGraceMs?: number;
  logger?: Logger;
  /** Distinguishes this process in intents; a new one per start. */
  identity?: string;
  maxBackoffMs?: number;
  /** The first refusal's backoff, doubled per refusal up to maxBackoffMs (default 1 s). */
  minBackoffMs?: number;
  /** How often an input's changes may wake one key (runtime/wake-limiter.ts); default DEFAULT_WAKE_LIMITS. */
  inputWakes?: WakeLimits;
  /** A cache whose watch has failed this long is stale: not ready, not trusted at rest. Default 3 minutes (`--cache-stale-after`). */
  cacheStaleAfterMs?: number;
  /**
   * How the informers retry and time their watches (runtime/reflector.ts): the pause after a failed
   * LIST or WATCH (default 1 s doubling to 60 s), the server-side watch timeout (default 5 to 10 min).
   */
  informers?: ControllerOptions['reflector'];
  onReconciled?(kind: KindName, result: ReconcileOutcome, seconds: number): void;
  /** Every reconcile once it ended, per resource and in order (keys/reconcile-context.ts ReconcileRecord). */
  onReconcile?(record: ReconcileRecord): void;
  /** The operator's metrics (keys/status/metrics.ts): queue, reconcile and platform request instruments. */
  metrics?: OperatorMetrics;
  /**
   * The Secret holding the key that signs intents and Secret annotations (signing.ts); made when
   * missing. Default: neon-key-operator-signing-key in neon-key-operator-system.
   */
  signingKeySecret?: { namespace: string; name: string };
  /** Use this signing key instead of the Secret (tests of one process). */
  signingKey?: Buffer;
  /** Plain http to a platform that is not on loopback (src/platform refuses it otherwise). */
  allowInsecurePlatformUrl?: boolean;
  /** How long drift checks may fail before conditions say so; default two drift intervals. */
  unverifiedAfterMs?: number;
  /** How often a resource whose replaced key retires is looked at again (rollouts, last use); default 5 s. */
  rotationPollMs?: number;
  /** The shortest grace a replaced key gets, whatever spec.rotation.gracePeriod says (--min-rotation-grace); default 1m, the CRD's floor. */
  minRotationGraceMs?: number;
  /** Creates of one organization under way at once, the rest waiting for their turn (keys/turns/create-admission.ts); default 30. */
  createsPerOrganization?: number;
  /**
   * Whether this replica may still write (runtime/write-fence.ts): checked before every write to
   * the apiserver and the platform; its signal ends the pollers and in-flight reconciles. The
   * runtime's manager passes the leader election's; default: write until stop().
   */
  leadership?: Leadership;
  /**
   * Where the credentials Secrets of ClusterKeyIssuers live (`--issuer-secrets-namespace`, default the
   * operator's own namespace): the only namespace whose Secrets an issuer may name. Issuers are
   * watched only when every namespace is (a ClusterRole); in the namespaced mode a resource naming an
   * issuer gets IssuerNotFound.
   */
  issuerSecretsNamespace?: string;
  /**
   * Use only the ClusterKeyIssuers with these labels (`--issuer-label-selector`): two installs in one
   * cluster each with issuers of their own; and the test suites, which share one apiserver (without
   * it, each suite's operator would verify every suite's issuers).
   */
  issuerLabelSelector?: string;
  /** Whether resources may name credentials of their own namespace (spec.credentialsSecretRef); default true (`--namespace-credentials`). */
  allowNamespaceCredentials?: boolean;
  /** The organization id as a label of the inventory gauge (`--inventory-organization-label`); default off (docs/inventory.md, Metrics). */
  inventoryOrganizationLabel?: boolean;
  /** This cluster's name in the names of the keys it issues (`--cluster-name`, docs/clusters.md); default none. */
  clusterName?: string;
  /** This cluster's share of each organization's key creations (`--organization-rate-share`, docs/clusters.md); default 1. */
  organizationRateShare?: number;
  /**
   * Tests only: what the key reconciler is shown of a key resource in the informers' cache (given
   * what the cache holds), for a fake of the watch's delivery (a late watch, whose copy is behind
   * the apiserver). Default: the cache as it is.
   */
  cacheDelivery?: (kind: string, namespace: string, name: string, cached: KubernetesObject | undefined) => KubernetesObject | undefined;
}

export interface RunningOperator {
  identity: string;
  /** Informers listed and workers running. */
  ready(): boolean;
  /** The stale caches, one line each (runtime/controller.ts staleCaches()): /readyz names them. */
  staleCaches(): string[];
  /** Every object the informers' caches hold (tests and heap audits: what the process keeps of the cluster). */
  cacheContents(): readonly KubernetesObject[];
  /**
   * What is kept per organization (tests: bounded whatever organization ids the tenants name): org key
   * limiters (of the default platform clients), organizations with a create line, credentials values
   * with their organizations (GET /users/me/organizations), and the projects polled for operations.
   */
  perOrganization(): { limiters: number; lines: number; memberships: MembershipsKept; pollers: number };
  stop(): Promise<void>;
}

/** Where issuers' Secrets live, or undefined when this operator uses no issuers (OperatorOptions.issuerSecretsNamespace). */
function issuersNamespace(options: OperatorOptions, watched: readonly string[], own: string): string | undefined {
  return options.issuerSecretsNamespace ?? (watched.length === 0 ? own : undefined);
}

/** What the runtime gives the rooms: the fenced apiserver, the logger, this process's names, the namespaces watched. */
interface OperatorRuntime {
  logger: Logger;
  identity: string;
  /** Aborted once the operator stopped: the end of the sole leadership when none is given. */
  stopped: AbortController;
  leadership: Leadership;
  /** Names this process in the platform's logs. */
  userAgent: string;
  /** Every apiserver write of the rooms asks the fence first (informers read with options.kubeConfig). */
  kubeConfig: KubeConfig;
  core: CoreClient;
  objects: CustomObjectsClient;
  ownWrites: OwnWrites;
  /** The namespaces watched, sorted; none: every namespace. */
  watched: string[];
  /**
   * The operator's own namespace ($POD_NAMESPACE, where its signing key and Lease live): the only one
   * whose inventories may list through an issuer (inventory/credentials-source.ts).
   */
  ownNamespace: string;
  /** Where issuers' Secrets live, or undefined when this operator uses no issuers (issuersNamespace). */
  issuerSecretsNamespace: string | undefined;
}

function operatorRuntime(options: OperatorOptions): OperatorRuntime {
  const logger = options.logger ?? createLogger();
  const identity = options.identity ?? `${hostname()}-${randomBytes(4).toString('hex')}`;
  const stopped = new AbortController();
  const leadership = options.leadership ?? soleLeadership(stopped.signal);
  const kubeConfig = fenceKubeWrites(options.kubeConfig, leadership);
  const watched = [...new Set([...(options.namespaces ?? []), ...(options.namespace !== undefined ? [options.namespace] : [])])].sort();
  const ownNamespace = signingKeySecretOf(options).namespace;
  return {
    logger,
    identity,
    stopped,
    leadership,
    // Every platform write asks the fence first; the user agent names this process in the platform's logs.
    userAgent: `neon-key-operator (${identity})`,
    kubeConfig,
    core: coreClient(kubeConfig),
    objects: customObjectsClient(kubeConfig),
    ownWrites: new OwnWrites(),
    watched,
    ownNamespace,
    issuerSecretsNamespace: issuersNamespace(options, watched, ownNamespace),
  };
}

/** The rooms the controller's requests go to. */
interface Rooms {
  keys: Reconciler;
  inventory: Reconciler;
  issuers: Reconciler;
}

/**
 * The controller's reconciler: each request to the room of its kind (an inventory's, an issuer's,
 * the key domain's otherwise). The controller is made before the rooms, which read its caches and
 * wake its queue; it hands out no request before start(), by when route() has named them.
 */
function roomsByKind(): { reconciler: Reconciler; route(rooms: Rooms): void } {
  let rooms: Rooms | undefined;
  const reconcile: Reconciler['reconcile'] = (request, log, worker) => {
    if (rooms === undefined) return Promise.reject(new Error('a request before the rooms were assembled'));
    const room = request.kind === INVENTORY_KIND ? rooms.inventory : request.kind === ISSUER_KIND ? rooms.issuers : rooms.keys;
    return room.reconcile(request, log, worker);
  };
  return {
    reconciler: { reconcile },
    route: (assembled) => {
      rooms = assembled;
    },
  };
}

/** The controller: the informers of every room's watches, the work queue and its workers. */
function operatorController(options: OperatorOptions, runtime: OperatorRuntime, reconciler: Reconciler): Controller {
  const { issuerSecretsNamespace, ownNamespace, watched } = runtime;
  return new Controller({
    kubeConfig: options.kubeConfig,
    reconciler,
    watches: (namespace) => [...keyWatches(namespace), ...inventoryWatches(namespace, ownNamespace)],
    // Issuers (cluster-scoped) once, whenever this operator uses them (issuersNamespace).
    ...(issuerSecretsNamespace !== undefined ? { clusterWatches: issuerWatches(issuerSecretsNamespace, options.issuerLabelSelector) } : {}),
    logger: runtime.logger,
    workers: options.workers ?? 16,
    ownWrites: runtime.ownWrites,
    ...(watched.length > 0 ? { namespaces: watched } : {}),
    ...(options.maxBackoffMs !== undefined ? { maxBackoffMs: options.maxBackoffMs } : {}),
    ...(options.minBackoffMs !== undefined ? { minBackoffMs: options.minBackoffMs } : {}),
    ...(options.inputWakes !== undefined ? { inputWakes: options.inputWakes } : {}),
    ...(options.cacheStaleAfterMs !== undefined ? { cacheStaleAfterMs: options.cacheStaleAfterMs } : {}),
    ...(options.informers !== undefined ? { reflector: options.informers } : {}),
    onWatchRestart: (kind, restart) => options.metrics?.watchRestarts.inc({ resource: kind, reason: restart.reason }),
    onList: (kind) => options.metrics?.informerLists.inc({ resource: kind }),
    ...(options.onReconciled !== undefined ? { onReconciled: (kind, result, seconds) => options.onReconciled?.(kind as KindName, result, seconds) } : {}),
    ...(options.metrics !== undefined ? { metrics: options.metrics.controller, queueMetrics: options.metrics.workQueue('keys') } : {}),
    signal: runtime.leadership.signal,
  });
}

/** The key domain, given what it uses of the runtime and the controller (keys/assemble.ts). */
function keysOf(options: OperatorOptions, runtime: OperatorRuntime, controller: Controller, signer: Signer): AssembledKeys {
  const { core, identity, issuerSecretsNamespace, kubeConfig, leadership, logger, objects, ownWrites, userAgent } = runtime;
  const beforeWrite = (): void => leadership.check();
  return assembleKeys(
    { cluster: controller, kubeConfig, core, objects, logger, identity, ownWrites, signer, beforeWrite, userAgent, issuerSecretsNamespace },
    options,
  );
}

/**
 * The inventories (docs/inventory.md): their lists through the key domain's drift cache and platform
 * clients, managed ids from the key resources' caches (the ids their status records; no LIST), their
 * own events; report only.
 */
function inventoryOf(runtime: OperatorRuntime, keys: AssembledKeys, clusterName: string): InventoryReconciler {
  return new InventoryReconciler({
    objects: runtime.objects,
    core: runtime.core,
    drift: keys.drift,
    platformFor: keys.platformFor,
    managedKeyIds: () => keys.managedKeyIds(),
    events: new InventoryEventRecorder(runtime.core, 'neon-key-operator', runtime.logger),
    issuers: { ownNamespace: runtime.ownNamespace, secretsNamespace: runtime.issuerSecretsNamespace, ours: (labels) => keys.issuerSelected(labels) },
    driftIntervalMs: keys.driftIntervalMs,
    clusterName,
    ownWrites: runtime.ownWrites,
  });
}

/**
 * The ClusterKeyIssuers (cluster-scoped): reconciled only when every namespace is watched (a
 * ClusterRole); their credentials verified with a platform client of their own per verification.
 */
function issuersOf(options: OperatorOptions, runtime: OperatorRuntime, keys: AssembledKeys, controller: Controller): IssuerReconciler {
  const metrics = options.metrics;
  return new IssuerReconciler({
    objects: runtime.objects,
    core: runtime.core,
    platformFor: (apiKey) =>
      new PlatformClient({
        baseUrl: options.platformBaseUrl,
        apiKey,
        beforeWrite: () => runtime.leadership.check(),
        userAgent: runtime.userAgent,
        allowInsecureHttp: options.allowInsecurePlatformUrl === true,
        ...(metrics !== undefined
          ? { onResponse: (info) => metrics.observePlatformRequest(info.method, info.route, info.status, info.durationMs / 1000) }
          : {}),
      }),
    // Key resources naming it, and the inventories of the operator's namespace naming it.
    usersOf: (name) => [...keys.issuerUsers(name), ...issuerInventories(controller, name)],
    wake: (key) => controller.enqueueLow(key),
    cached: (name) => controller.cachedObject(ISSUER_KIND, '', name) as CachedIssuer | undefined,
    events: new IssuerEventRecorder(runtime.core, 'neon-key-operator', runtime.logger),
    secretsNamespace: runtime.issuerSecretsNamespace ?? runtime.ownNamespace,
    driftIntervalMs: keys.driftIntervalMs,
    ownWrites: runtime.ownWrites,
  });
}

/** stale_caches{resource}: the caches whose watch has failed too long, per kind. */
function countStaleCaches(controller: Controller): { resource: string; value: number }[] {
  const counts = new Map<string, number>();
  for (const c of controller.staleCaches()) counts.set(c.kind, (counts.get(c.kind) ?? 0) + 1);
  return [...counts].map(([resource, value]) => ({ resource, value }));
}

function describeStaleCache(c: StaleCache): string {
  return (
    `${c.kind} cache of ${c.namespace === undefined ? 'every namespace' : `namespace ${c.namespace}`} is stale: ` +
    `its watch has failed for ${Math.round(c.failingForMs / 1000)} s${c.error !== undefined ? ` (${c.error})` : ''}`
  );
}

/**
 * The operator as it runs. Stopping: the counting and timers end, then the controller (its
 * in-flight reconciles drained), then the pollers.
 */
function runningOperator(runtime: OperatorRuntime, controller: Controller, keys: AssembledKeys, unregister: () => void): RunningOperator {
  const { leadership, logger, stopped } = runtime;
  // Leadership lost: the pollers and the sweeps end at once (their platform calls aborted), the
  // reconciles in flight at their next step; the manager then stops the rest.
  const ended = (): void => keys.ended();
  if (leadership.signal.aborted) ended();
  else leadership.signal.addEventListener('abort', ended, { once: true });
  let stopping: Promise<void> | undefined;
  return {
    identity: runtime.identity,
    ready: () => controller.synced,
    staleCaches: () => controller.staleCaches().map(describeStaleCache),
    cacheContents: () => controller.cacheContents(),
    perOrganization: () => keys.perOrganization(),
    stop: () => {
      keys.halt();
      unregister();
      leadership.signal.removeEventListener('abort', ended);
      stopping ??= controller
        .stop()
        .then(() => keys.stopPollers())
        .then(() => {
          stopped.abort();
          logger.info('operator stopped');
        });
      return stopping;
    },
  };
}

export async function startOperator(options: OperatorOptions): Promise<RunningOperator> {
  // The gauges are registered before the first await: the leader metric turns 1 right before this
  // call, and a scrape from then on finds every gauge the alerts and the dashboard read (no series
  // until an issuer is reconciled or an inventory reported).
  let issuerReadiness: () => Iterable<IssuerReadiness> = () => [];
  let inventoryCounts: () => Iterable<InventoryCounts> = () => [];
  const metrics = options.metrics;
  const unregisterIssuerGauge = metrics !== undefined ? registerIssuerGauge(metrics.registry, () => issuerReadiness()) : undefined;
  const unregisterInventoryGauge =
    metrics !== undefined ? registerInventoryGauge(metrics.registry, () => inventoryCounts(), options.inventoryOrganizationLabel === true) : undefined;
  const runtime = operatorRuntime(options);
  const signer = await loadKeySigner(runtime.core, options, runtime.logger);
  const rooms = roomsByKind();
  const controller = operatorController(options, runtime, rooms.reconciler);
  const keys = keysOf(options, runtime, controller, signer);
  const inventory = inventoryOf(runtime, keys, signer.cluster);
  const issuers = issuersOf(options, runtime, keys, controller);
  rooms.route({ keys: keys.reconciler, inventory, issuers });
  await controller.start();
  inventoryCounts = () => inventory.counts();
  issuerReadiness = () => issuers.readiness();
  metrics?.countStaleCachesWith(() => countStaleCaches(controller));
  keys.start();
  const { identity, watched } = runtime;
  const cluster = signer.cluster;
  const namespaces = watched.length > 0 ? watched : '(all)';
  runtime.logger.info({ identity, namespaces, workers: options.workers ?? 16, cluster, createsPerSecondPerOrganization: keys.slots }, 'operator started');
  return runningOperator(runtime, controller, keys, () => {
    metrics?.countStaleCachesWith(undefined);
    unregisterInventoryGauge?.();
    unregisterIssuerGauge?.();
  });
}
