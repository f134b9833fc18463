// Wires the operator together: kube clients, one platform client per credentials (sharing ONE
// limiter per organization for org key creation, docs/design.md section 5.3), the drift cache, the
// lifecycle and the controller. startOperator() runs it in-process (tests, main.ts).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { PlatformClient, SlidingWindowLimiter } from '../platform/index.ts';
import type { KeyPlatform } from './keys/adapter.ts';
import { Controller, type ControllerOptions } from './runtime/controller.ts';
import type { WakeLimits } from './runtime/wake-limiter.ts';
import { CreateAdmission } from './keys/turns/create-admission.ts';
import { FairLimiter } from './keys/turns/fair-limiter.ts';
import { organizationSlots } from './keys/issuing/organization-share.ts';
import { credentialsUsers, issuerUsers, keyWatches, projectKeysIn, secretNameHolders, slotHolders, wakeProject } from './keys/watches.ts';
import { cachedConditionsOf, recordedKeyIds, slotIssuersOfCached } from './keys/observing/cache-projection.ts';
import { IssuerSlots } from './keys/issuing/issuer-slots.ts';
import { parseLabelSelector, selectorMatches } from './keys/issuing/issuer-policy.ts';
import { DriftCache } from './keys/observing/drift.ts';
import { EventRecorder } from './keys/status/events.ts';
import { ApiServerWrites } from './keys/kube-writes.ts';
import { KeyReconciler } from './keys/reconciler.ts';
import type { MembershipsKept } from './keys/issuing/organization-membership.ts';
import { PlatformClients } from './keys/platform-clients.ts';
import { OperationsPollers, type OperationsClient } from './keys/observing/operations-poller.ts';
import { OwnWrites } from './runtime/own-writes.ts';
import { createLogger } from './runtime/logger.ts';
import { fenceKubeWrites, soleLeadership, type Leadership } from './runtime/write-fence.ts';
import { DEFAULT_SIGNING_KEY_SECRET, Signer, loadSigningKey } from './keys/issuing/signing.ts';
import type { ManagedKeysCount, OperatorMetrics } from './keys/status/metrics.ts';
import type { ReconcileOutcome } from './runtime/metrics.ts';
import type { ReconcileRecord } from './keys/reconcile-context.ts';
import type { KindName } from './resources/schema.ts';
import { INVENTORY_KIND } from './resources/inventory.ts';
import { InventoryEventRecorder } from './inventory/events.ts';
import { registerInventoryGauge } from './inventory/metrics.ts';
import { InventoryReconciler } from './inventory/reconciler.ts';
import { inventoryWatches, issuerInventories } from './inventory/watches.ts';
import { ISSUER_KIND } from './resources/issuer.ts';
import { IssuerEventRecorder } from './issuers/events.ts';
import { registerIssuerGauge, type IssuerReadiness } from './issuers/metrics.ts';
import { IssuerReconciler } from './issuers/reconciler.ts';
import { issuerWatches, type CachedIssuer } from './issuers/watches.ts';

/**
 * Makes a platform client acting with one API key (src/platform's PlatformClient in production).
 * `beforeWrite` is the write fence (runtime/write-fence.ts): called before each write attempt.
 */
export type PlatformFactory = (options: { baseUrl: string; apiKey: string; beforeWrite: () => void; userAgent: string }) => KeyPlatform & OperationsClient;

/** How often the resources at rest are looked at for a due drift check (KeyReconciler.sweep). */
const SWEEP_TICK_MS = 1_000;

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

/** The limiter of each organization, as PlatformClient asks for it, and how many are kept. */
export interface OrgKeyLimiters<B> {
  (orgId: string): B;
  /** Limiters kept now (tests: bounded). */
  readonly size: number;
}

/** How often, at most, the limiters are looked over for idle ones (at a look-up). */
const ORG_LIMITERS_PRUNE_MS = 1_000;

/**
 * One limiter per organization for org key creation, shared by every worker and credentials:
 * the platform limits key creation per organization (10/s each), so one process-wide bucket would
 * cap an operator serving many organizations at 10 keys/s in total.
 *
 * Kept only while it holds something: at a look-up at least a second after the last, every idle
 * limiter is dropped (its idle(): nobody waits, nothing in flight, nothing in its window, nothing
 * that would make a new one behave differently); one made again later is the same. A limiter that
 * cannot tell (no idle()) is kept. So the count is the organizations with a create waiting, in
 * flight or answered within the limiter's memory (10 s for the org key limiter: its round trips),
 * plus those with a 429 in their history (docs/security.md, Bounds), whatever ids were ever named.
 */
export function orgKeyLimiters<B extends object>(make: () => B, now: () => number = () => performance.now()): OrgKeyLimiters<B> {
  const buckets = new Map<string, B>();
  let prunedAt = Number.NEGATIVE_INFINITY;
  const limiterFor = (orgId: string): B => {
    const at = now();
    if (at - prunedAt >= ORG_LIMITERS_PRUNE_MS) {
      prunedAt = at;
      for (const [id, bucket] of buckets) if ((bucket as { idle?: () => boolean }).idle?.() === true) buckets.delete(id);
    }
    let bucket = buckets.get(orgId);
    if (bucket === undefined) {
      bucket = make();
      buckets.set(orgId, bucket);
    }
    return bucket;
  };
  return Object.defineProperty(limiterFor, 'size', { get: () => buckets.size }) as OrgKeyLimiters<B>;
}

/**
 * The org key limiters every platform client of the operator shares (docs/design.md section 5.3): at
 * most `slots` creations in any second as the platform counts them (10, or this cluster's share of
 * them: keys/issuing/organization-share.ts), each counted from its answer
 * (src/platform/sliding-window.ts). Their waiters go in fair turns between namespaces, a broken key
 * first, and their permits are spread while several namespaces create (keys/turns/fair-limiter.ts):
 * 0.9 of the even spacing apart at least (90 ms at 10 a second), so that a round trip's jitter does
 * not hold back a slot free on time.
 */
export function operatorOrgKeyLimiters(slots = organizationSlots()): OrgKeyLimiters<FairLimiter> {
  return orgKeyLimiters(() => new FairLimiter(new SlidingWindowLimiter({ limit: slots }), { spacingMs: 900 / slots }));
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

/** Where issuers' Secrets live, or undefined when this operator uses no issuers (OperatorOptions.issuerSecretsNamespace). */
function issuersNamespace(options: OperatorOptions, watched: readonly string[], own: string): string | undefined {
  return options.issuerSecretsNamespace ?? (watched.length === 0 ? own : undefined);
}

export async function startOperator(options: OperatorOptions): Promise<RunningOperator> {
  // The issuer gauge is registered before the first await: the leader metric turns 1 right before
  // this call, and a scrape from then on finds the gauge the alert reads (no series until an issuer
  // is reconciled).
  let issuerReadiness: () => Iterable<IssuerReadiness> = () => [];
  const unregisterIssuerGauge = options.metrics !== undefined ? registerIssuerGauge(options.metrics.registry, () => issuerReadiness()) : undefined;
  const logger = options.logger ?? createLogger();
  const identity = options.identity ?? `${hostname()}-${randomBytes(4).toString('hex')}`;
  // This cluster's creations a second per organization: its share of the platform's 10 (organization-share.ts).
  const slots = organizationSlots(options.organizationRateShare);
  const orgLimiters = operatorOrgKeyLimiters(slots);
  const makePlatform = options.platformFactory ?? defaultPlatformFactory(options.metrics, options.allowInsecurePlatformUrl === true, orgLimiters);
  const stopped = new AbortController();
  const leadership = options.leadership ?? soleLeadership(stopped.signal);
  // Every platform write asks the fence first; the user agent names this process in the platform's logs.
  const userAgent = `neon-key-operator (${identity})`;
  const factory = ({ baseUrl, apiKey }: { baseUrl: string; apiKey: string }): KeyPlatform & OperationsClient =>
    makePlatform({ baseUrl, apiKey, beforeWrite: () => leadership.check(), userAgent });
  // Every apiserver write of the domain asks the fence first (informers read with options.kubeConfig).
  const kubeConfig = fenceKubeWrites(options.kubeConfig, leadership);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const signingKeySecret = options.signingKeySecret ?? { namespace: 'neon-key-operator-system', name: DEFAULT_SIGNING_KEY_SECRET };
  const signer = new Signer(options.signingKey ?? (await loadSigningKey(core, signingKeySecret.namespace, signingKeySecret.name, logger)), {
    cluster: options.clusterName ?? '',
  });
  // One client per credentials in use, bounded in count and idle time (keys/platform-clients.ts).
  const clients = new PlatformClients((apiKey) => factory({ baseUrl: options.platformBaseUrl, apiKey }));
  const platformFor = (apiKey: string): { platform: KeyPlatform; credentialsId: string } => clients.for(apiKey);
  const evictIdleClients = setInterval(() => clients.evictIdle(), 60_000);
  evictIdleClients.unref();
  const driftIntervalMs = options.driftIntervalMs ?? 300_000;
  const watched = [...new Set([...(options.namespaces ?? []), ...(options.namespace !== undefined ? [options.namespace] : [])])].sort();
  // Created before the controller it wakes; onUpdate runs only once polls start (after start()).
  // The operations poller of a project lists with the issued keys of its ProjectApiKeys: one client
  // per owner, replaced when its key changes and dropped with its owner.
  const pollers: OperationsPollers = new OperationsPollers({
    clientForKey: (apiKey) => factory({ baseUrl: options.platformBaseUrl, apiKey }),
    onUpdate: (projectId): void => wakeProject(controller, projectId),
    slowIntervalMs: Math.max(driftIntervalMs, 5_000),
    logger,
    ...(options.metrics !== undefined ? { onPoll: (outcome) => options.metrics?.operationsPolls.inc({ outcome }) } : {}),
  });
  const ownWrites = new OwnWrites();
  const objects = kubeConfig.makeApiClient(CustomObjectsApi);
  // The operator's own namespace ($POD_NAMESPACE, where its signing key and Lease live): the only one
  // whose inventories may list through an issuer (inventory/credentials-source.ts).
  const ownNamespace = signingKeySecret.namespace;
  const issuerSelector =
    options.issuerLabelSelector === undefined
      ? undefined
      : (parseLabelSelector(options.issuerLabelSelector) ?? { matchExpressions: [{ key: 'keys.neon.dev/unparsable-selector', operator: 'Exists' as const }] });
  // A refreshed list that no longer shows a key (or a project) wakes the resources resting on it:
  // drift is caught when the list is taken, within one interval (drift.ts, DriftGone). A project
  // gone wakes every ProjectApiKey naming it, at rest or not (the resting ones among them): one
  // between passes would otherwise learn it only at its own next pass, up to one more interval
  // later. The lists are taken again each interval by the sweep (refreshDue).
  // A key gone is a key whose consumers are broken now: its resource goes in the normal lane (in
  // turns between namespaces: runtime/queue.ts), with the keys issued lately that no list showed
  // (drift.ts, issued()), at rest or not.
  const drift = new DriftCache(driftIntervalMs, Date.now, (gone) => {
    const woken =
      gone.what === 'projects' ? projectKeysIn(controller, gone.ids, gone.organizationId) : [...new Set([...reconciler.restingOn(gone), ...gone.resources])];
    if (woken.length > 0)
      logger.info(
        { what: gone.what, ids: gone.ids.slice(0, 20), resources: woken.length },
        "gone from the platform's list; waking the resources that rest on it",
      );
    for (const key of woken) {
      if (gone.what === 'keys') controller.enqueue(key);
      else controller.enqueueLow(key);
    }
  });
  // Three times this cluster's creations per second per organization under way at once (from a
  // key's turn to the platform's answer to its create): the limiter's slots each have the next
  // create waiting, and 10 more keys are read and their intents written meanwhile, which on a
  // loaded machine takes about a second. The rest of a wave waits in its organization's line,
  // holding no worker (keys/turns/create-admission.ts).
  const admission = new CreateAdmission({
    perOrganization: options.createsPerOrganization ?? 3 * slots,
    wake: (key) => {
      // When a waiting key's turn came, apart from when a worker took it up (bench/fairness.ts --fair-stages).
      const [kind, namespace, name] = key.split('/');
      logger.debug({ kind, namespace, name }, 'turn');
      controller.enqueue(key);
    },
  });
  const reconciler = new KeyReconciler({
    kube: new ApiServerWrites(objects, core, kubeConfig.makeApiClient(AppsV1Api), kubeConfig),
    platformFor,
    drift,
    events: new EventRecorder(core, 'neon-key-operator', logger),
    identity,
    pendingGraceMs: options.pendingGraceMs ?? 120_000,
    driftIntervalMs,
    signer,
    ...(options.unverifiedAfterMs !== undefined ? { unverifiedAfterMs: options.unverifiedAfterMs } : {}),
    ...(options.rotationPollMs !== undefined ? { rotationPollMs: options.rotationPollMs } : {}),
    ...(options.minRotationGraceMs !== undefined ? { minRotationGraceMs: options.minRotationGraceMs } : {}),
    ...(options.metrics !== undefined ? { onDriftCheck: (outcome) => options.metrics?.driftChecks.inc({ outcome }) } : {}),
    ...(options.metrics !== undefined ? { onRetired: (outcome) => options.metrics?.retiredKeys.inc({ outcome }) } : {}),
    operations: { pollers },
    ownWrites,
    platformUrl: options.platformBaseUrl,
    // The at-rest check (keys/observing/at-rest.ts): versions from the informers' caches, and the client of
    // credentials already read (by the id of their key: the key itself is held by that client only).
    rest: {
      cacheStale: (kind, namespace) => controller.cacheStale(kind, namespace),
      cachedGeneration: (kind, name) => {
        const meta = controller.cachedMeta(kind, '', name);
        return meta === undefined ? undefined : { uid: meta.uid, generation: meta.generation };
      },
      cachedVersion: (kind, namespace, name) => {
        const meta = controller.cachedMeta(kind, namespace, name);
        return meta === undefined ? undefined : { uid: meta.uid, resourceVersion: meta.resourceVersion };
      },
      cachedConditions: (kind, namespace, name) => {
        const obj = controller.cachedObject(kind, namespace, name);
        return obj === undefined ? undefined : cachedConditionsOf(obj);
      },
      platformById: (credentialsId) => clients.byId(credentialsId),
    },
    ...(options.onReconcile !== undefined ? { onReconcile: options.onReconcile } : {}),
    turns: admission,
    credentialsSettings: {
      // Issuers are cluster-scoped: read with every namespace watched (a ClusterRole), or with a list
      // of namespaces when the issuers' namespace is named (the platform team granted issuers apart).
      issuerSecretsNamespace: issuersNamespace(options, watched, signingKeySecret.namespace),
      allowNamespaceCredentials: options.allowNamespaceCredentials ?? true,
      ...(issuerSelector !== undefined ? { issuerSelector } : {}),
    },
    credentialsUsers: { holders: (namespace, name) => credentialsUsers(controller, namespace, name) },
    wake: (key) => controller.enqueue(key),
    slots: new IssuerSlots(
      {
        users: (issuer, namespace) => [...new Set([...issuerUsers(controller, issuer, namespace), ...slotHolders(controller, issuer, namespace)])],
        holders: (key) => {
          const [kind = '', namespace = '', name = ''] = key.split('/');
          return slotIssuersOfCached(controller.cachedObject(kind, namespace, name));
        },
      },
      (key) => controller.enqueue(key),
    ),
    secretNameHolders: (namespace, name) => secretNameHolders(controller, namespace, name),
    cachedKey:
      options.cacheDelivery === undefined
        ? (kind, namespace, name) => controller.cachedObject(kind, namespace, name)
        : (kind, namespace, name) => options.cacheDelivery?.(kind, namespace, name, controller.cachedObject(kind, namespace, name)),
  });
  // The inventories (docs/inventory.md): their lists through the drift cache, managed ids from the
  // key resources' caches (the ids their status records; no LIST), their own events; report only.
  const inventory = new InventoryReconciler({
    objects,
    core,
    drift,
    platformFor,
    managedKeyIds: () =>
      recordedKeyIds(
        ['ApiKey', 'ProjectApiKey'].flatMap((kind) => controller.cached(kind)),
        new Set(),
      ),
    events: new InventoryEventRecorder(core, 'neon-key-operator', logger),
    issuers: {
      ownNamespace,
      secretsNamespace: issuersNamespace(options, watched, ownNamespace),
      ours: (labels) => issuerSelector === undefined || selectorMatches(issuerSelector, labels),
    },
    driftIntervalMs,
    clusterName: signer.cluster,
    ownWrites,
  });
  // The ClusterKeyIssuers (cluster-scoped): reconciled only when every namespace is watched (a
  // ClusterRole); their credentials verified with a platform client of their own per verification.
  const issuerSecretsNamespace = options.issuerSecretsNamespace ?? signingKeySecret.namespace;
  const usesIssuers = issuersNamespace(options, watched, signingKeySecret.namespace) !== undefined;
  const issuers = new IssuerReconciler({
    objects,
    core,
    platformFor: (apiKey) =>
      new PlatformClient({
        baseUrl: options.platformBaseUrl,
        apiKey,
        beforeWrite: () => leadership.check(),
        userAgent,
        allowInsecureHttp: options.allowInsecurePlatformUrl === true,
        ...(options.metrics !== undefined
          ? { onResponse: (info) => options.metrics?.observePlatformRequest(info.method, info.route, info.status, info.durationMs / 1000) }
          : {}),
      }),
    // Key resources naming it, and the inventories of the operator's namespace naming it.
    usersOf: (name) => [...issuerUsers(controller, name), ...issuerInventories(controller, name)],
    wake: (key) => controller.enqueueLow(key),
    cached: (name) => controller.cachedObject(ISSUER_KIND, '', name) as CachedIssuer | undefined,
    events: new IssuerEventRecorder(core, 'neon-key-operator', logger),
    secretsNamespace: issuerSecretsNamespace,
    driftIntervalMs,
    ownWrites,
  });
  const controller: Controller = new Controller({
    kubeConfig: options.kubeConfig,
    reconciler: {
      reconcile: (request, log, worker) =>
        request.kind === INVENTORY_KIND
          ? inventory.reconcile(request, log)
          : request.kind === ISSUER_KIND
            ? issuers.reconcile(request, log, worker)
            : reconciler.reconcile(request, log, worker),
    },
    watches: (namespace) => [...keyWatches(namespace), ...inventoryWatches(namespace, ownNamespace)],
    // Issuers (cluster-scoped) once, whenever this operator uses them (issuersNamespace).
    ...(usesIssuers ? { clusterWatches: issuerWatches(issuerSecretsNamespace, options.issuerLabelSelector) } : {}),
    logger,
    workers: options.workers ?? 16,
    ownWrites,
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
    signal: leadership.signal,
  });
  const running = controller;
  await running.start();
  const metrics = options.metrics;
  const unregisterInventoryGauge =
    metrics !== undefined ? registerInventoryGauge(metrics.registry, () => inventory.counts(), options.inventoryOrganizationLabel === true) : undefined;
  issuerReadiness = () => issuers.readiness();
  metrics?.countStaleCachesWith(() => {
    const counts = new Map<string, number>();
    for (const c of running.staleCaches()) counts.set(c.kind, (counts.get(c.kind) ?? 0) + 1);
    return [...counts].map(([resource, value]) => ({ resource, value }));
  });
  // managed_keys{namespace,kind,condition,status,reason}: counted from the informer caches when scraped, never from the platform.
  metrics?.countManagedKeysWith(() => {
    const counts = new Map<string, ManagedKeysCount>();
    for (const kind of ['ApiKey', 'ProjectApiKey'] as const) {
      for (const obj of running.cached(kind)) {
        const namespace = obj.metadata?.namespace ?? '';
        for (const c of (obj as { status?: { conditions?: { type: string; status: string; reason: string }[] } }).status?.conditions ?? []) {
          const series = `${namespace}\0${kind}\0${c.type}\0${c.status}\0${c.reason}`;
          const count = counts.get(series);
          if (count !== undefined) count.value++;
          else counts.set(series, { labels: { namespace, kind, condition: c.type, status: c.status, reason: c.reason }, value: 1 });
        }
      }
    }
    return counts.values();
  });
  // The drift checks of resources at rest (KeyReconciler.sweep): those that are due, about every
  // second (a tenth of the interval when that is shorter); one sweep at a time.
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
            for (const key of woken) controller.enqueueLow(key);
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
  logger.info(
    {
      identity,
      namespaces: watched.length > 0 ? watched : '(all)',
      workers: options.workers ?? 16,
      cluster: signer.cluster,
      createsPerSecondPerOrganization: slots,
    },
    'operator started',
  );
  // Leadership lost: the pollers and the sweeps end at once (their platform calls aborted), the
  // reconciles in flight at their next step; the manager then stops the rest.
  const ended = (): void => {
    clearInterval(sweeper);
    void pollers.stop();
  };
  if (leadership.signal.aborted) ended();
  else leadership.signal.addEventListener('abort', ended, { once: true });
  let stopping: Promise<void> | undefined;
  return {
    identity,
    ready: () => running.synced,
    staleCaches: () =>
      running
        .staleCaches()
        .map(
          (c) =>
            `${c.kind} cache of ${c.namespace === undefined ? 'every namespace' : `namespace ${c.namespace}`} is stale: ` +
            `its watch has failed for ${Math.round(c.failingForMs / 1000)} s${c.error !== undefined ? ` (${c.error})` : ''}`,
        ),
    cacheContents: () => running.cacheContents(),
    perOrganization: () => ({ limiters: orgLimiters.size, lines: admission.size, memberships: reconciler.memberships, pollers: pollers.projects().length }),
    stop: () => {
      metrics?.countManagedKeysWith(undefined);
      metrics?.countStaleCachesWith(undefined);
      unregisterInventoryGauge?.();
      unregisterIssuerGauge?.();
      clearInterval(sweeper);
      clearInterval(evictIdleClients);
      leadership.signal.removeEventListener('abort', ended);
      stopping ??= running
        .stop()
        .then(() => pollers.stop())
        .then(() => {
          stopped.abort();
          logger.info('operator stopped');
        });
      return stopping;
    },
  };
}
