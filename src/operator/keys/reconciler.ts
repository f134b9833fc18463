// The key reconciler, written once for ApiKey and ProjectApiKey (crossplane's managed reconciler):
// a key at rest is checked from the caches (observing/resting.ts); otherwise read the resource fresh
// from the apiserver (a new key: from the cache, see #read), observe (observe.ts), ask decide() what
// next (decision.ts, pure), run that one action, each in the file that says what it does:
// create-protocol.ts, deletion.ts, in-sync.ts; conditions come from conditions.ts. Level-triggered:
// the event that woke a reconcile is never trusted, only what is read here.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Reconciler, ReconcileResult, Request, Worker } from '../runtime/workers.ts';
import { FINALIZER, type KeyResource, type KindName } from '../resources/schema.ts';
import { blockedConditions, creatingConditions, deletingConditions, findCondition, shownReason, unverifiableConditions } from './status/conditions.ts';
import { create } from './create-protocol.ts';
import { adopt, clearPending, recover, revokeOrphans, revokeReplacedKeys } from './create-recovery.ts';
import { decide } from './decision.ts';
import type { Decision } from './decision-types.ts';
import { release, retain, revokeAndRelease } from './deletion.ts';
import { retire } from './rotation/rotation.ts';
import { verifiedBefore } from './observing/at-rest.ts';
import type { DriftGone } from './observing/drift.ts';
import { Resting } from './observing/resting.ts';
import { inSync } from './observing/in-sync.ts';
import { immutableMode } from './secret/immutable-secret.ts';
import { rewriteSecret } from './secret/secret-writer.ts';
import { statusCode } from './kube-writes.ts';
import { observe } from './observe.ts';
import { cachedCopy, newKeyOrganization } from './observing/cache-projection.ts';
import { objectRef } from '../runtime/own-writes.ts';
import { createPriority, inTurn, issuerVersion, MEMBERSHIP_TTL_MS, waitsUnread } from './turns/create-turn.ts';
import { CredentialsKinds } from './issuing/credentials-kind.ts';
import { OrganizationMemberships, type MembershipsKept } from './issuing/organization-membership.ts';
import { ISSUER_KIND } from '../resources/issuer.ts';
import { CREDENTIALS_SECRET_KIND, keepCredentials, reconcileCredentialsSecret } from './issuing/credentials-in-use.ts';
import { blockedInputs, type Context, type KeyDeps, type ReconcileRecord } from './reconcile-context.ts';
import { updateMetadata, writeStatus } from './status/resource-writes.ts';

export type KeyReconcilerOptions = Omit<KeyDeps, 'now' | 'unverifiedAfterMs' | 'credentialsKinds' | 'memberships' | 'onCredentialsReleased'> & {
  now?: () => number;
  /** Queues a work-queue key: a credentials Secret's own reconcile (issuing/credentials-in-use.ts). */
  wake?: (key: string) => void;
  /**
   * How long drift checks of a key may fail (credentials refused, platform unavailable) before
   * its conditions say it is no longer known to be live. Default: two drift intervals.
   */
  unverifiedAfterMs?: number;
};

export class KeyReconciler implements Reconciler {
  readonly #deps: KeyDeps;
  /** The keys at rest, and their drift checks (observing/resting.ts). */
  readonly #resting: Resting;
  /** Resources whose last write got 409: their next pass reads fresh, never a cached copy (#read). */
  readonly #readFresh = new Set<string>();
  /** Credentials Secrets (uids) whose finalizer an at-rest pass made sure of, once per process (credentials-in-use.ts). */
  readonly #keptOnce = new Set<string>();
  /** Resources that released their keys, until the cache lets them go: they need no credentials Secret (credentials-in-use.ts). */
  readonly #released = new Set<string>();

  constructor(options: KeyReconcilerOptions) {
    const { wake } = options;
    this.#deps = {
      ...options,
      onCredentialsReleased: (key, namespace, secret) => {
        this.#released.add(key);
        wake?.(`${CREDENTIALS_SECRET_KIND}/${namespace}/${secret}`);
      },
      now: options.now ?? Date.now,
      unverifiedAfterMs: options.unverifiedAfterMs ?? 2 * options.driftIntervalMs,
      credentialsKinds: new CredentialsKinds(options.driftIntervalMs),
      // A membership changes rarely: asked again every 5 minutes (or drift interval, if longer), and at once for other credentials.
      memberships: new OrganizationMemberships(Math.max(options.driftIntervalMs, MEMBERSHIP_TTL_MS), options.now ?? Date.now),
    };
    this.#resting = new Resting(this.#deps);
  }

  /** The answers of GET /users/me/organizations kept (tests: bounded, organization-membership.ts). */
  get memberships(): MembershipsKept {
    return this.#deps.memberships.size;
  }

  /** The work-queue keys of the resources at rest on what a refreshed drift list no longer shows (observing/resting.ts). */
  restingOn(gone: DriftGone): string[] {
    return this.#resting.restingOn(gone);
  }

  /** The drift checks due of the resources at rest; the keys of those no longer at rest, to wake (observing/resting.ts). */
  async sweep(): Promise<string[]> {
    return this.#resting.sweep();
  }

  async reconcile(request: Request, logger: Logger, worker?: Worker): Promise<ReconcileResult> {
    if (request.kind === CREDENTIALS_SECRET_KIND) return this.#credentialsSecret(request, logger);
    const startedAt = this.#deps.now();
    const onReconcile = this.#deps.onReconcile;
    const record: ReconcileRecord | undefined =
      onReconcile === undefined
        ? undefined
        : {
            ...request,
            startedAt,
            endedAt: 0,
            actions: [],
            reasons: [],
            createSent: false,
            result: 'error',
          };
    try {
      const result = await this.#reconcile(request, logger, record, worker);
      if (record !== undefined) record.result = result.type;
      return result;
    } finally {
      // A create turn kept for this key and not taken goes to the next in line (turns/create-admission.ts).
      this.#deps.turns?.ended(`${request.kind}/${request.namespace}/${request.name}`, startedAt);
      if (record !== undefined) {
        record.endedAt = this.#deps.now();
        onReconcile?.(record);
      }
    }
  }

  /** A credentials Secret of a namespace: its finalizer lifted once no resource needs it (credentials-in-use.ts). */
  async #credentialsSecret(request: Request, logger: Logger): Promise<ReconcileResult> {
    const users = this.#deps.credentialsUsers;
    if (users === undefined) return { type: 'Done' };
    // The released resources the cache no longer holds need no entry.
    for (const key of this.#released) {
      const [kind = '', namespace = '', name = ''] = key.split('/');
      if (this.#deps.cachedKey?.(kind, namespace, name) === undefined) this.#released.delete(key);
    }
    try {
      return await reconcileCredentialsSecret(this.#deps.kube, users, this.#released, request.namespace, request.name, logger, this.#deps.ownWrites);
    } catch (error) {
      if (statusCode(error) === 409) return { type: 'Retry' };
      throw error;
    }
  }

  async #reconcile(request: Request, logger: Logger, record: ReconcileRecord | undefined, worker: Worker | undefined): Promise<ReconcileResult> {
    // A replica that no longer leads does not start (its writes would be refused: runtime/write-fence.ts).
    worker?.signal?.throwIfAborted();
    const { namespace, name } = request;
    const kind = request.kind as KindName;
    const tracking = objectRef(kind, namespace, name);
    const { result, resting } = await this.#resting.resume(request, logger, record);
    if (result !== undefined) return result;
    // A new key of an organization whose creates are all under way: in line for its turn, unread.
    const cachedKey = !resting && this.#deps.turns !== undefined ? this.#deps.cachedKey?.(kind, namespace, name) : undefined;
    const organization = newKeyOrganization(cachedKey);
    if (organization !== undefined && this.#knownMember(cachedKey, organization) && (await waitsUnread(this.#deps, organization, tracking))) {
      logger.debug({ organization }, 'new key waits for its turn in the organization');
      if (record !== undefined) record.deferred = true;
      return { type: 'Done' };
    }
    const { resource, cached } = await this.#read(kind, namespace, name, record, logger);
    if (resource === undefined) {
      this.#resting.failingSince.delete(tracking);
      return { type: 'Done' };
    }
    try {
      return await this.#reconcileResource(resource, logger, true, record, worker);
    } catch (error) {
      const conflict = statusCode(error) === 409;
      // The next pass reads fresh after a conflict, and after any failure of a pass from the cache.
      if (conflict || cached) this.#readFresh.add(tracking);
      if (conflict) {
        logger.debug('conflict; retrying with a fresh read');
        return { type: 'Retry' };
      }
      throw error;
    }
  }

  /**
   * The resource as this pass starts from. A new key (never reconciled, no intent: cache-projection.ts
   * cachedCopy) from the informer's cache, without a GET: at its turn in a flood that read would wait
   * behind the flood's writes, and every create of a wave would pay it. Safe on a copy behind the apiserver: every decision a new key can
   * come to writes first with the copy's resourceVersion (the finalizer with the intent, or a status
   * patch), which gets 409 on a stale copy before anything is created or said; the pass after a 409
   * (or after any failure of a pass from the cache) reads fresh, and so does a pass while a write of
   * ours has not come back to the cache yet.
   */
  async #read(
    kind: KindName,
    namespace: string,
    name: string,
    record: ReconcileRecord | undefined,
    logger: Logger,
  ): Promise<{ resource: KeyResource | undefined; cached: boolean }> {
    const ref = objectRef(kind, namespace, name);
    // Not from a cache whose watch has failed for long (runtime/controller.ts cacheStale): its copy may be of a resource deleted and made again.
    if (!this.#readFresh.has(ref) && this.#deps.ownWrites?.waiting(ref) !== true && this.#deps.rest?.cacheStale?.(kind, namespace) !== true) {
      const copy = cachedCopy(this.#deps.cachedKey?.(kind, namespace, name), kind, namespace, name);
      if (copy !== undefined) {
        if (record !== undefined) record.cachedRead = true;
        logger.debug({ cached: true }, 'read');
        return { resource: copy, cached: true };
      }
    }
    this.#readFresh.delete(ref);
    const resource = await this.#deps.kube.readResource(kind, namespace, name);
    logger.debug({ cached: false }, 'read');
    return { resource, cached: false };
  }

  /** Observe, decide, act on the resource as read (or as just written by this reconcile). */
  async #reconcileResource(
    resource: KeyResource,
    logger: Logger,
    mayContinue: boolean,
    record: ReconcileRecord | undefined,
    worker: Worker | undefined,
  ): Promise<ReconcileResult> {
    // Nor goes on to a next pass.
    worker?.signal?.throwIfAborted();
    const ctx = await observe(this.#deps, this.#resting.failingSince, resource, logger);
    if (worker !== undefined) ctx.worker = worker;
    const decision = decide(ctx.observation);
    logger.debug({ action: decision.action.type, reason: decision.reason }, 'decided');
    if (record !== undefined) {
      ctx.record = record;
      record.actions.push(decision.action.type);
      record.reasons.push(decision.reason);
    }
    return await this.#act(ctx, decision, mayContinue);
  }

  /**
   * Whether a new key, unread, may wait in the line of the organization it names: through an issuer
   * whose generation in the cache had a create of this namespace let into that organization's line,
   * or with a credentials Secret whose version in the cache was found a member
   * (organization-membership.ts). Otherwise it is read, and its issuer or membership checked before
   * any turn: the organization is the tenant's to write, beside an issuerRef too.
   */
  #knownMember(cachedKey: KubernetesObject | undefined, organization: string): boolean {
    const spec = (cachedKey as { spec?: { issuerRef?: { name?: string }; credentialsSecretRef?: { name?: string } } } | undefined)?.spec;
    const namespace = cachedKey?.metadata?.namespace;
    if (namespace === undefined) return false;
    if (spec?.issuerRef !== undefined) {
      const issuer = spec.issuerRef.name === undefined ? undefined : this.#deps.cachedKey?.(ISSUER_KIND, '', spec.issuerRef.name)?.metadata;
      return (
        issuer?.uid !== undefined &&
        this.#deps.memberships.knownIssuer(issuerVersion(namespace, spec.issuerRef.name ?? '', issuer.uid, issuer.generation), organization)
      );
    }
    const name = spec?.credentialsSecretRef?.name;
    if (name === undefined) return false;
    const version = this.#deps.cachedKey?.('Secret', namespace, name)?.metadata?.resourceVersion;
    return version !== undefined && this.#deps.memberships.knownMember(`${namespace}/${name}@${version}`, organization);
  }

  /**
   * A first key just recorded rests on what its create wrote (at-rest.ts verifiedAfterCreate): its
   * first drift check is the sweep's, from the caches and the drift list, not a full pass that reads
   * the resource and both Secrets again to find what this pass wrote.
   */
  #restsAfterCreate(ctx: Context, result: ReconcileResult): ReconcileResult {
    const verified = ctx.restsAfterCreate;
    if (verified === undefined || result.type !== 'Done') return result;
    const { resource } = ctx;
    return this.#resting.rests(objectRef(resource.kind, resource.metadata.namespace, resource.metadata.name), verified);
  }

  /** `mayContinue`: after a metadata-only step, go on with the resource as written (once). */
  async #act(ctx: Context, decision: Decision, mayContinue: boolean): Promise<ReconcileResult> {
    const deps = this.#deps;
    const { action } = decision;
    const { resource } = ctx;
    switch (action.type) {
      case 'Nothing':
        return { type: 'Done' };
      case 'AddFinalizer': {
        // A new key: the finalizer goes in the intent's metadata update (one write instead of two),
        // with the resourceVersion read, as each did alone. What comes next is decided on
        // this same observation as it would be with the finalizer on: only a Create of a first key
        // joins them (not spec.secret.immutable, whose Secrets are looked up only once the finalizer
        // is on: secret-locate.ts locateSecret); anything else adds the finalizer alone, as before.
        const next = decide({ ...ctx.observation, hasFinalizer: true });
        if (
          mayContinue &&
          next.action.type === 'Create' &&
          next.action.replaces === undefined &&
          next.action.rotation === undefined &&
          !immutableMode(ctx.spec)
        ) {
          if (ctx.record !== undefined) {
            ctx.record.actions.push(next.action.type);
            ctx.record.reasons.push(next.reason);
          }
          // Through the organization's create turns like any create (turns/create-turn.ts).
          return this.#restsAfterCreate(ctx, await inTurn(deps, ctx, 'create', (paced) => create(paced, ctx, next, undefined, undefined, true)));
        }
        const updated = await updateMetadata(deps, resource, (m) => {
          m.finalizers = [...(m.finalizers ?? []), FINALIZER];
        });
        // Go on with the resource as written, once: a requeue here would go through the queue's
        // global rate limit (10/s, like client-go's), which every new key would pay on its way to
        // the create, pacing a wave of new keys below the platform's own 10/s.
        return mayContinue ? this.#reconcileResource(updated, ctx.logger, false, ctx.record, ctx.worker) : { type: 'Continue' };
      }
      case 'Blocked':
        return blocked(deps, ctx, decision, action.retry);
      case 'Wait':
        await writeStatus(deps, ctx, creatingConditions(decision.message));
        return { type: 'Done', requeueAfterMs: action.afterMs };
      case 'ClearPending':
        return clearPending(deps, ctx, decision);
      case 'Adopt':
        return adopt(deps, ctx, action.keyId, action.attempt);
      case 'Recover':
        return recover(deps, ctx, action.attempt);
      case 'Create':
        return this.#restsAfterCreate(
          ctx,
          await inTurn(deps, ctx, createPriority(action), (paced) => create(paced, ctx, decision, action.replaces, action.rotation)),
        );
      case 'Retire':
        return retire(deps, ctx, decision, action);
      case 'InSync': {
        // A key issued before the credentials Secret was kept (an older operator): kept from now on,
        // once per Secret and process (a person or a tool replacing the Secret whole drops the
        // finalizer; it is put back by the next key minted with it, not by every check).
        const credentials = ctx.credentialsSecret?.metadata?.uid;
        if (deps.credentialsUsers !== undefined && credentials !== undefined && !this.#keptOnce.has(credentials)) {
          if (this.#keptOnce.size >= 10_000) this.#keptOnce.clear();
          this.#keptOnce.add(credentials);
          await keepCredentials(deps.kube, ctx.credentialsSecret, ctx.logger, deps.ownWrites);
        }
        // What this pass relies on, taken before it runs; kept once it succeeded (at-rest.ts).
        const verified = deps.rest !== undefined ? verifiedBefore(deps, ctx, action.keyId, shownReason(decision.reason), ctx.credentialsVersion) : undefined;
        const result = await inSync(deps, ctx, action.keyId);
        if (verified === undefined) return result;
        // A status written here is the read version with that status (the patch carries the read
        // resourceVersion): the next pass may rest on the written version.
        return this.#resting.rests(
          objectRef(resource.kind, resource.metadata.namespace, resource.metadata.name),
          ctx.statusWritten !== undefined ? { ...verified, resourceVersion: ctx.statusWritten, writtenOver: verified.resourceVersion } : verified,
        );
      }
      case 'RewriteSecret': {
        const written = await rewriteSecret(deps, ctx);
        await deps.events.record(
          resource,
          'Normal',
          'SecretRewritten',
          `rewrote Secret ${ctx.secretName} to match spec.secret; it still holds key ${action.keyId} (no new key)`,
        );
        // Go on with the Secret as written, taken as in line: one that does not stay so (a webhook
        // rewriting it) is looked at again on the next drift pass, never in a loop here.
        const { secret } = ctx.observation;
        const observation = secret !== undefined ? { ...ctx.observation, secret: { ...secret, inLine: true } } : ctx.observation;
        const next = { ...ctx, secret: written, observation };
        return this.#act(next, decide(observation), mayContinue);
      }
      case 'Unverifiable':
        return unverifiable(deps, ctx, decision, action);
      case 'RevokeReplaced':
        return revokeReplacedKeys(deps, ctx, action.keyIds);
      case 'RevokeOrphans':
        return revokeOrphans(deps, ctx, action.keyIds, action.lost, action.gone);
      case 'Revoke':
        return revokeAndRelease(deps, ctx, action.keyId, action.retiring);
      case 'Retain':
        return retain(deps, ctx, decision, action.retiring);
      case 'Release':
        return release(deps, ctx, decision);
    }
  }
}

/** No platform action can help: report, and look again with backoff (retry) or each drift interval. */
async function blocked(deps: KeyDeps, ctx: Context, decision: Decision, retry: boolean): Promise<ReconcileResult> {
  await writeStatus(
    deps,
    ctx,
    ctx.observation.deleting
      ? deletingConditions(shownReason(decision.reason), decision.message)
      : blockedConditions(blockedInputs(ctx), shownReason(decision.reason), decision.message),
  );
  await deps.events.record(ctx.resource, 'Warning', shownReason(decision.reason), decision.message);
  // Not retried against the platform; looked at again each drift interval (a foreign Secret
  // may go away without waking the resource: the operator's Secret watches map its own Secrets
  // and the credentials Secrets to resources, not the target name of a Secret it does not own).
  return retry ? { type: 'Backoff' } : { type: 'Done', requeueAfterMs: deps.driftIntervalMs };
}

/** The recorded key cannot be checked: once that has lasted long enough, conditions say so. */
async function unverifiable(
  deps: KeyDeps,
  ctx: Context,
  decision: Decision,
  action: { keyId: number; report: boolean; retryAfterMs: number },
): Promise<ReconcileResult> {
  if (!action.report) return { type: 'Done', requeueAfterMs: Math.min(deps.driftIntervalMs, action.retryAfterMs) };
  await writeStatus(deps, ctx, unverifiableConditions(action.keyId, shownReason(decision.reason), decision.message));
  if (findCondition(ctx.resource.status?.conditions, 'KeyIssued')?.status !== 'Unknown') {
    await deps.events.record(ctx.resource, 'Warning', shownReason(decision.reason), decision.message);
  }
  return { type: 'Done', requeueAfterMs: deps.driftIntervalMs };
}
