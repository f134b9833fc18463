// The key lifecycle, written once for ApiKey and ProjectApiKey (crossplane's managed reconciler):
// observe (the resource, fresh from the apiserver; its Secret; the credentials; the platform's
// list), ask decide() what next, run that one action, write conditions. Level-triggered: the
// event that woke a reconcile is never trusted, only what is read here.
import {
  ApiException, PatchStrategy, setHeaderOptions, type CoreV1Api, type CustomObjectsApi, type V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { adapterFor, asPlatformFailure, failureReason, type KeyAdapter, type KeyPlatform, type ListedKey, type PlatformFailure } from './adapter.ts';
import { findCondition, setConditions, type ConditionUpdate } from './conditions.ts';
import { decide, recordedKeyId, type Action, type Credentials, type Decision, type Observation, type PendingAttempt } from './decision.ts';
import type { DriftCache } from './drift.ts';
import type { Reconciler, ReconcileResult, Request } from '../runtime/controller.ts';
import type { EventRecorder } from './events.ts';
import type { OperationsPollers } from './operations-poller.ts';
import { objectRef, type OwnWrites } from '../runtime/own-writes.ts';
import {
  ANNOTATION_ABANDON_KEY, ANNOTATION_CREATE_PENDING, ANNOTATION_RELEASE_WITHOUT_REVOKE, FINALIZER, GROUP, KEY_NAME_MAX, KINDS, VERSION, parseSpec,
  type ApiKeySpec, type KeyResource, type KindName, type ProjectApiKeySpec,
} from '../resources/schema.ts';
import { ANNOTATION_OWNER, buildSecret, observeSecret, ownedBy, secretHash } from './secret-writer.ts';
import type { Signer } from './signing.ts';
import { checkCreatedKey } from './created-key.ts';
import { attemptName, encodeIntent, parseIntent } from './create-intent.ts';

export interface LifecycleOptions {
  objects: CustomObjectsApi;
  core: CoreV1Api;
  /** A platform client acting with the given API key (cached per key by the caller). */
  platformFor(apiKey: string): { platform: KeyPlatform; credentialsId: string };
  drift: DriftCache;
  events: EventRecorder;
  identity: string;
  pendingGraceMs: number;
  driftIntervalMs: number;
  /** Signs and verifies what the operator writes where tenants can write too (signing.ts). */
  signer: Signer;
  /**
   * How long drift checks of a key may fail (credentials refused, platform unavailable) before
   * its conditions say it is no longer known to be live. Default: two drift intervals.
   */
  unverifiedAfterMs?: number;
  /** Counts drift checks by outcome (metrics). */
  onDriftCheck?: (outcome: 'live' | 'absent' | 'failed') => void;
  now?: () => number;
  /** Where the versions this process writes are recorded, so their watch events do not wake the key again. */
  ownWrites?: OwnWrites;
  /** Operations mirroring for ProjectApiKeys (DESIGN.md section 4). */
  operations?: {
    pollers: Pick<OperationsPollers, 'ensure' | 'release' | 'snapshot'>;
  };
}

function ownerOf(resource: KeyResource): string {
  return `${resource.metadata.namespace}/${resource.metadata.name}`;
}

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function statusCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

const RECOVERY_CLOCK_MARGIN_MS = 5 * 60_000;

function defaultKeyName(resource: KeyResource): string {
  return `${resource.metadata.namespace}-${resource.metadata.name}`.slice(0, KEY_NAME_MAX).replace(/[^-_.A-Za-z0-9]/g, '-').replace(/[-_.]+$/, '');
}

/** Everything the reconcile read, kept for the action it runs. */
interface Context {
  resource: KeyResource;
  spec: ApiKeySpec | ProjectApiKeySpec | undefined;
  adapter: KeyAdapter | undefined;
  secretName: string;
  secretKey: string;
  secret: V1Secret | undefined;
  apiKey: string | undefined;
  credentials: Credentials;
  /** signer.fingerprint of the credentials in use (status.credentialsFingerprint). */
  fingerprint: string | undefined;
  /** The recorded key as the drift check's list shows it. */
  listed: ListedKey | undefined;
  observation: Observation;
  logger: Logger;
}

export class KeyLifecycle implements Reconciler {
  readonly #o: LifecycleOptions;
  readonly #now: () => number;
  readonly #unverifiedAfterMs: number;
  /** Per resource (kind/namespace/name): since when its drift checks fail (cleared by a success, or when it is gone). */
  readonly #unverifiedSince = new Map<string, number>();

  constructor(options: LifecycleOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#unverifiedAfterMs = options.unverifiedAfterMs ?? 2 * options.driftIntervalMs;
  }


  async reconcile(request: Request, logger: Logger): Promise<ReconcileResult> {
    const { namespace, name } = request;
    const kind = request.kind as KindName;
    let resource: KeyResource;
    try {
      resource = await this.#o.objects.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: KINDS[kind].plural, name }) as KeyResource;
    } catch (error) {
      if (statusCode(error) === 404) {
        this.#unverifiedSince.delete(`${kind}/${namespace}/${name}`);
        return { type: 'Done' };
      }
      throw error;
    }
    try {
      return await this.#reconcileResource(resource, logger, true);
    } catch (error) {
      if (statusCode(error) === 409) {
        logger.debug('conflict; retrying with a fresh read');
        return { type: 'Retry' };
      }
      throw error;
    }
  }

  /** Observe, decide, act on the resource as read (or as just written by this reconcile). */
  async #reconcileResource(resource: KeyResource, logger: Logger, mayContinue: boolean): Promise<ReconcileResult> {
    const ctx = await this.#observe(resource, logger);
    const decision = decide(ctx.observation);
    logger.debug({ action: decision.action.type, reason: decision.reason }, 'decided');
    return await this.#act(ctx, decision, mayContinue);
  }

  async #observe(resource: KeyResource, logger: Logger): Promise<Context> {
    const meta = resource.metadata;
    const parsed = parseSpec(resource.kind, resource.spec);
    const spec = parsed.ok ? parsed.spec : undefined;
    const secretName = spec?.secret?.name ?? meta.name;
    const secretKey = spec?.secret?.key ?? 'apiKey';
    const secret = await this.#readSecret(meta.namespace, secretName);

    let apiKey: string | undefined;
    let credentials: Credentials = 'SecretNotFound';
    if (spec !== undefined) {
      const creds = await this.#readSecret(meta.namespace, spec.credentialsSecretRef.name);
      if (creds !== undefined) {
        const encoded = creds.data?.[spec.credentialsSecretRef.key];
        apiKey = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8').trim() : undefined;
        credentials = apiKey !== undefined && apiKey !== '' ? 'Present' : 'KeyNotFound';
      }
    }
    const adapter = spec !== undefined ? adapterFor(resource, spec) : undefined;
    const pending = parseIntent(meta.annotations?.[ANNOTATION_CREATE_PENDING], spec !== undefined ? spec.keyName ?? defaultKeyName(resource) : undefined, meta.uid, this.#o.signer);
    const status = resource.status ?? {};
    const secretObservation = observeSecret(resource, secret, secretKey, this.#o.signer);

    const platform: Observation['platform'] = { key: 'Unknown', project: 'Unknown' };
    const recorded = recordedKeyId({ status: { ...(status.keyId !== undefined ? { keyId: status.keyId } : {}) }, ...(secretObservation !== undefined ? { secret: secretObservation } : {}) });
    const fingerprint = apiKey !== undefined && credentials === 'Present' ? this.#o.signer.fingerprint(apiKey) : undefined;
    let listed: ListedKey | undefined;
    const trackingKey = `${resource.kind}/${meta.namespace}/${meta.name}`;
    if (meta.deletionTimestamp === undefined && pending === undefined && adapter !== undefined && recorded !== undefined) {
      try {
        if (apiKey === undefined || credentials !== 'Present') throw Object.assign(new Error('no credentials'), { code: 'CREDENTIALS_MISSING' });
        const { platform: client, credentialsId } = this.#o.platformFor(apiKey);
        const createdAt = status.createdAt !== undefined ? Date.parse(status.createdAt) : undefined;
        const state = await this.#o.drift.keyState(credentialsId, adapter, client, recorded, Number.isFinite(createdAt) ? createdAt : undefined);
        platform.key = state.state;
        listed = state.key;
        if (adapter.project !== undefined) {
          platform.project = await this.#o.drift.projectInOrganization(credentialsId, client, adapter.project.organizationId, adapter.project.projectId)
            ? 'InOrganization' : 'NotInOrganization';
        }
        this.#unverifiedSince.delete(trackingKey);
        this.#o.onDriftCheck?.(state.state === 'Live' ? 'live' : 'absent');
      } catch (error) {
        // A check that cannot ask the platform is an observation too: nothing is minted or revoked
        // on its strength, and once it has failed for unverifiedAfterMs the conditions say so.
        const failure = asPlatformFailure(error);
        const since = this.#unverifiedSince.get(trackingKey) ?? this.#now();
        this.#unverifiedSince.set(trackingKey, since);
        this.#o.onDriftCheck?.('failed');
        const { reason, message } = (error as { code?: unknown }).code === 'CREDENTIALS_MISSING'
          ? { reason: 'CredentialsMissing', message: 'the credentials Secret (spec.credentialsSecretRef) is missing or empty; put a platform API key there' }
          : unverifiableReason(failure);
        platform.key = 'Unverifiable';
        platform.check = { reason, message, failingForMs: this.#now() - since, reportAfterMs: this.#unverifiedAfterMs };
        logger.warn({ code: failure?.code ?? 'unknown' }, 'drift check failed');
      }
    }
    const abandon = meta.annotations?.[ANNOTATION_ABANDON_KEY];

    const observation: Observation = {
      now: this.#now(),
      identity: this.#o.identity,
      pendingGraceMs: this.#o.pendingGraceMs,
      deleting: meta.deletionTimestamp !== undefined,
      hasFinalizer: meta.finalizers?.includes(FINALIZER) === true,
      releaseWithoutRevoke: meta.annotations?.[ANNOTATION_RELEASE_WITHOUT_REVOKE] === 'true',
      ...(parsed.ok ? {} : { specError: parsed.message }),
      // An invalid spec still honours an explicit Retain: a deletion must never revoke what a person asked to keep.
      deletionPolicy: spec?.deletionPolicy ?? ((resource.spec as { deletionPolicy?: string } | undefined)?.deletionPolicy === 'Retain' ? 'Retain' : 'Revoke'),
      ...(pending !== undefined ? { pending } : {}),
      status: {
        ...(status.keyId !== undefined ? { keyId: status.keyId } : {}),
        ...(status.secretHash !== undefined ? { secretHash: status.secretHash } : {}),
      },
      ...(secretObservation !== undefined ? { secret: secretObservation } : {}),
      credentials,
      platform,
      // Only a personal list depends on whose credentials ask: an organization's list shows every
      // key of the organization to each of its administrators, so absence there is absence.
      credentialsChanged: adapter?.listScope === 'personal' && fingerprint !== undefined && status.credentialsFingerprint !== undefined && status.credentialsFingerprint !== fingerprint,
      ...(abandon !== undefined && /^\d{1,15}$/.test(abandon) ? { abandonKey: Number(abandon) } : {}),
      secretIsCredentials: spec !== undefined && secretName === spec.credentialsSecretRef.name,
    };
    return { resource, spec, adapter, secretName, secretKey, secret, apiKey, credentials, fingerprint, listed, observation, logger };
  }

  async #readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.#o.core.readNamespacedSecret({ namespace, name });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  /** `mayContinue`: after a metadata-only step, go on with the resource as written (once). */
  async #act(ctx: Context, decision: Decision, mayContinue: boolean): Promise<ReconcileResult> {
    const action: Action = decision.action;
    const { resource } = ctx;
    const deleting = ctx.observation.deleting;
    switch (action.type) {
      case 'Nothing':
        return { type: 'Done' };
      case 'AddFinalizer': {
        const updated = await this.#updateMetadata(resource, (m) => { m.finalizers = [...(m.finalizers ?? []), FINALIZER]; });
        // Go on with the resource as written, once: a requeue here went through the queue's global
        // rate limit (10/s, like client-go's), which every new key paid on its way to the create,
        // and which then paced a wave of new keys below the platform's own 10/s (bench, issue 7).
        return mayContinue ? this.#reconcileResource(updated, ctx.logger, false) : { type: 'Retry' };
      }
      case 'Blocked': {
        await this.#writeStatus(ctx, deleting ? deletingConditions(decision.reason, decision.message) : blockedConditions(ctx, decision.reason, decision.message));
        await this.#o.events.record(resource, 'Warning', decision.reason, decision.message);
        // Not retried against the platform; looked at again each drift interval (a foreign Secret
        // may go away without an event reaching this operator, which watches only its own Secrets).
        return action.retry ? { type: 'Backoff' } : { type: 'Done', requeueAfterMs: this.#o.driftIntervalMs };
      }
      case 'Wait':
        await this.#writeStatus(ctx, creatingConditions(decision.message));
        return { type: 'Done', requeueAfterMs: action.afterMs };
      case 'ClearPending':
        await this.#o.events.record(resource, 'Warning', decision.reason, decision.message);
        await this.#updateMetadata(resource, (m) => { delete m.annotations?.[ANNOTATION_CREATE_PENDING]; });
        return { type: 'Retry' };
      case 'Adopt':
        return this.#adopt(ctx, action.keyId, action.attempt);
      case 'Recover':
        return this.#recover(ctx, action.attempt);
      case 'Create':
        return this.#create(ctx, decision, action.replaces);
      case 'InSync':
        return this.#inSync(ctx, action.keyId);
      case 'Unverifiable':
        if (!action.report) return { type: 'Done', requeueAfterMs: Math.min(this.#o.driftIntervalMs, action.retryAfterMs) };
        await this.#writeStatus(ctx, unverifiableConditions(action.keyId, decision.reason, decision.message));
        if (findCondition(resource.status?.conditions, 'KeyIssued')?.status !== 'Unknown') {
          await this.#o.events.record(resource, 'Warning', decision.reason, decision.message);
        }
        return { type: 'Done', requeueAfterMs: this.#o.driftIntervalMs };
      case 'Revoke':
        return this.#revokeAndRelease(ctx, action.keyId);
      case 'Retain':
        return this.#retain(ctx, decision);
      case 'Release':
        if (decision.reason === 'ReleasedWithoutRevoke') await this.#o.events.record(resource, 'Warning', decision.reason, decision.message);
        await this.#removeFinalizer(resource);
        return { type: 'Done' };
    }
  }

  #platform(ctx: Context): { platform: KeyPlatform; credentialsId: string } {
    if (ctx.apiKey === undefined) throw new Error('no credentials');
    return this.#o.platformFor(ctx.apiKey);
  }

  /** Step 2 to 5 of DESIGN.md section 3. */
  async #create(ctx: Context, decision: Decision, replaces: number | undefined): Promise<ReconcileResult> {
    const { resource, adapter, logger } = ctx;
    if (adapter === undefined || ctx.spec === undefined) throw new Error('create without a spec');
    const { platform } = this.#platform(ctx);
    if (decision.reason !== 'Creating') {
      // Drift: say what was found before repairing it.
      await this.#o.events.record(resource, 'Warning', decision.reason, decision.message);
      logger.info({ reason: decision.reason, replaces }, 'repairing drift');
    }
    const pending: PendingAttempt = {
      attempt: attemptName(ctx.spec.keyName ?? defaultKeyName(resource)),
      startedAt: new Date(this.#now()).toISOString(),
      holder: this.#o.identity,
      ...(replaces !== undefined ? { replaces } : {}),
    };
    // The intent, with the resourceVersion we read: a conflict means someone else moved; never create then.
    let current = await this.#updateMetadata(resource, (m) => {
      m.annotations = { ...m.annotations, [ANNOTATION_CREATE_PENDING]: encodeIntent(this.#o.signer, resource.metadata.uid, pending) };
      // Given up for the key it named; a later key is not given up by it.
      delete m.annotations[ANNOTATION_ABANDON_KEY];
    });
    logger.info({ attempt: pending.attempt }, 'creating key');

    let created;
    try {
      created = await adapter.create(platform, pending.attempt);
    } catch (error) {
      const failure = asPlatformFailure(error);
      if (failure === undefined || failure.disposition === 'ambiguous') {
        // The key may exist: leave the intent for recovery (never a blind retry of the POST).
        logger.warn({ attempt: pending.attempt, code: failure?.code }, 'create outcome unknown; recovering');
        await this.#o.events.record(resource, 'Warning', 'CreateOutcomeUnknown',
          `creating key ${pending.attempt} failed ambiguously (${failure?.code ?? 'error'}); the operator will revoke any key of that name and try again`);
        return { type: 'Retry' };
      }
      // A definite refusal: no key was made. Clear the intent and report.
      current = await this.#updateMetadata(current, (m) => { delete m.annotations?.[ANNOTATION_CREATE_PENDING]; });
      return this.#platformFailure({ ...ctx, resource: current }, failure, 'issuing a key');
    }

    // The platform's answer is input too: a key that is not what was asked for (another name, scope
    // or project, or no key at all) is revoked at once and never written to the Secret.
    const mismatch = checkCreatedKey(created, { name: pending.attempt, ...(adapter.project !== undefined ? { projectId: adapter.project.projectId } : {}) });
    if (mismatch !== undefined) {
      logger.warn({ attempt: pending.attempt, keyId: created.id, mismatch }, 'created key does not match the request; revoking it');
      try {
        await adapter.revoke(platform, created.id);
      } catch (error) {
        // The intent stays: recovery revokes every key of the attempt's name.
        if (asPlatformFailure(error)?.code !== 'NOT_FOUND') throw error;
      }
      current = await this.#updateMetadata(current, (m) => { delete m.annotations?.[ANNOTATION_CREATE_PENDING]; });
      const message = `the platform answered the create of ${pending.attempt} with a key that does not match the request (${mismatch}); that key (${created.id}) was revoked`;
      await this.#writeStatus({ ...ctx, resource: current }, blockedConditions(ctx, 'PlatformResponseInvalid', message, 'KeyIssued'));
      await this.#o.events.record(resource, 'Warning', 'PlatformResponseInvalid', message);
      return { type: 'Backoff' };
    }

    // Step 4: the Secret at once; it is the durable record of the key (adoption reads it).
    await this.#writeSecret(ctx, { id: created.id, name: pending.attempt, secret: created.key });
    const hash = secretHash(resource, created.key);
    const createdAt = created.created_at ?? new Date(this.#now()).toISOString();
    // Step 5: status, then what it replaces, then clear the intent.
    current = await this.#writeStatus({ ...ctx, resource: current }, readyConditions(created.id, ctx.secretName), {
      keyId: created.id,
      keyName: pending.attempt,
      createdAt,
      ...(created.created_by !== undefined ? { createdBy: created.created_by } : {}),
      secretName: ctx.secretName,
      secretHash: hash,
      ...(ctx.fingerprint !== undefined ? { credentialsFingerprint: ctx.fingerprint } : {}),
    });
    if (replaces !== undefined) await this.#revokeReplaced(ctx, replaces);
    await this.#updateMetadata(current, (m) => { delete m.annotations?.[ANNOTATION_CREATE_PENDING]; });
    await this.#deleteStaleSecret(ctx);
    await this.#o.events.record(resource, 'Normal', 'KeyIssued', `issued key ${created.id} (${pending.attempt}) into Secret ${ctx.secretName}`
      + (replaces !== undefined ? `; revoked key ${replaces}` : ''));
    return { type: 'Done', requeueAfterMs: this.#o.driftIntervalMs };
  }

  async #adopt(ctx: Context, keyId: number, pending: PendingAttempt): Promise<ReconcileResult> {
    const { resource, secret, secretKey } = ctx;
    const encoded = secret?.data?.[secretKey];
    const value = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    const current = await this.#writeStatus(ctx, ctx.observation.deleting ? deletingConditions('Deleting', 'adopted the pending key before deleting') : readyConditions(keyId, ctx.secretName), {
      keyId,
      keyName: pending.attempt,
      createdAt: resource.status?.keyId === keyId && resource.status.createdAt !== undefined ? resource.status.createdAt : pending.startedAt,
      secretName: ctx.secretName,
      ...(value !== '' ? { secretHash: secretHash(resource, value) } : {}),
      ...(ctx.fingerprint !== undefined ? { credentialsFingerprint: ctx.fingerprint } : {}),
    });
    if (pending.replaces !== undefined && pending.replaces !== keyId) await this.#revokeReplaced(ctx, pending.replaces);
    await this.#updateMetadata(current, (m) => { delete m.annotations?.[ANNOTATION_CREATE_PENDING]; });
    await this.#o.events.record(resource, 'Normal', 'KeyAdopted', `recorded key ${keyId} (${pending.attempt}) found in Secret ${ctx.secretName} after an interrupted create`);
    return { type: 'Retry' };
  }

  async #recover(ctx: Context, pending: PendingAttempt): Promise<ReconcileResult> {
    const { resource, adapter, logger } = ctx;
    if (adapter === undefined) throw new Error('recover without a spec');
    const { platform } = this.#platform(ctx);
    let keys;
    try {
      keys = await adapter.list(platform);
    } catch (error) {
      return this.#platformFailure(ctx, asPlatformFailure(error), `recovering attempt ${pending.attempt}`, error);
    }
    // The attempt's name is random and signed for this resource: only its own keys carry it.
    // The attempt's name is random and signed for this resource, so only its own keys carry it;
    // and none made well before the intent (clocks differ: a margin of RECOVERY_CLOCK_MARGIN_MS).
    const notBefore = Date.parse(pending.startedAt) - RECOVERY_CLOCK_MARGIN_MS;
    const orphans: { id: number; name: string }[] = keys.filter((k) => k.name === pending.attempt
      && (k.created_at === undefined || !(Date.parse(k.created_at) < notBefore)));
    // The key this attempt was replacing: once status records another key (step 5 ran before the
    // interruption, then the Secret was lost), only this intent remembers it, and clearing the
    // intent would leave it live and unrecorded. It was being replaced anyway: revoke it too.
    const recorded = recordedKeyId(ctx.observation);
    if (pending.replaces !== undefined && pending.replaces !== recorded && !orphans.some((k) => k.id === pending.replaces)) {
      orphans.push({ id: pending.replaces, name: `(replaced key ${pending.replaces})` });
    }
    for (const orphan of orphans) {
      try {
        await adapter.revoke(platform, orphan.id);
      } catch (error) {
        const failure = asPlatformFailure(error);
        if (failure?.code !== 'NOT_FOUND') return this.#platformFailure(ctx, failure, `revoking orphaned key ${orphan.id}`, error);
      }
    }
    logger.info({ attempt: pending.attempt, revoked: orphans.map((k) => k.id) }, 'recovered interrupted create');
    await this.#updateMetadata(resource, (m) => { delete m.annotations?.[ANNOTATION_CREATE_PENDING]; });
    await this.#o.events.record(resource, 'Warning', 'CreateRecovered', orphans.length === 0
      ? `attempt ${pending.attempt} left no key on the platform; starting again`
      : `revoked ${orphans.length} key(s) of interrupted attempt ${pending.attempt} (ids ${orphans.map((k) => k.id).join(', ')}), whose secret was lost`
        + `${orphans.some((k) => k.id === pending.replaces) ? ` (with key ${pending.replaces}, which it was replacing)` : ''}; starting again`);
    return { type: 'Retry' };
  }

  async #inSync(ctx: Context, keyId: number): Promise<ReconcileResult> {
    const status = ctx.resource.status ?? {};
    const extra: Record<string, unknown> = { keyId, secretName: ctx.secretName };
    if (status.secretHash === undefined && ctx.observation.secret?.hash !== undefined) extra.secretHash = ctx.observation.secret.hash;
    if (status.keyName === undefined && ctx.observation.secret?.keyName !== undefined) extra.keyName = ctx.observation.secret.keyName;
    // Seen live with these credentials: they can see (and revoke) it, so they are its credentials now.
    // (Found in their list, not merely too young to be missed from it.)
    if (ctx.fingerprint !== undefined && ctx.listed !== undefined && status.credentialsFingerprint !== ctx.fingerprint) {
      extra.credentialsFingerprint = ctx.fingerprint;
    }
    const conditions = readyConditions(keyId, ctx.secretName);
    const project = ctx.adapter?.project;
    const issued = this.#secretValue(ctx);
    if (project !== undefined && issued !== '' && this.#o.operations !== undefined) {
      // ONE poller per project (operations-poller.ts), listing with the issued keys of the project:
      // least privilege, and proof each key works. A key that fails degrades only its own resource.
      const { projectId } = project;
      const owner = ownerOf(ctx.resource);
      this.#o.operations.pollers.ensure(projectId, owner, issued);
      const snapshot = this.#o.operations.pollers.snapshot(projectId, owner);
      if (snapshot !== undefined) {
        extra.operations = snapshot.operations;
        conditions.push({ type: 'OperationsSettled', ...snapshot.settled });
      }
    }
    await this.#writeStatus(ctx, conditions, extra);
    return { type: 'Done', requeueAfterMs: this.#o.driftIntervalMs };
  }

  #secretValue(ctx: Context): string {
    const encoded = ctx.secret?.data?.[ctx.secretKey];
    return encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8').trim() : '';
  }

  async #revokeAndRelease(ctx: Context, keyId: number): Promise<ReconcileResult> {
    const { resource, adapter } = ctx;
    if (adapter === undefined) throw new Error('revoke without a spec');
    const { platform } = this.#platform(ctx);
    try {
      await adapter.revoke(platform, keyId);
    } catch (error) {
      const failure = asPlatformFailure(error);
      if (failure?.code === 'NOT_FOUND' && ctx.observation.credentialsChanged === true && ctx.observation.abandonKey !== keyId) {
        // Not found by other credentials than the ones that issued it: it may well be live.
        const message = `key ${keyId} was issued with other credentials than the ones now in the credentials Secret, which cannot find it; `
          + `put the credentials that issued it back, or revoke it yourself and annotate keys.neon.dev/abandon-key="${keyId}"`;
        await this.#writeStatus(ctx, deletingConditions('CredentialsChanged', message));
        await this.#o.events.record(resource, 'Warning', 'CredentialsChanged', message);
        return { type: 'Done', requeueAfterMs: this.#o.driftIntervalMs };
      }
      if (failure?.code !== 'NOT_FOUND') {
        const { reason, message } = failureReason(failure, `revoking key ${keyId}`);
        await this.#writeStatus(ctx, deletingConditions(reason, `${message}; the resource stays until the key is revoked (or annotate it ${ANNOTATION_RELEASE_WITHOUT_REVOKE}="true")`));
        await this.#o.events.record(resource, 'Warning', reason, message);
        if (failure === undefined) throw error;
        return { type: 'Backoff', ...(failure.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
      }
    }
    if (ctx.secret !== undefined && ctx.observation.secret?.owned === true) {
      await this.#o.core.deleteNamespacedSecret({ namespace: resource.metadata.namespace, name: ctx.secretName }).catch((error: unknown) => {
        if (statusCode(error) !== 404) throw error;
      });
    }
    await this.#o.events.record(resource, 'Normal', 'KeyRevoked', `revoked key ${keyId} and deleted Secret ${ctx.secretName}`);
    await this.#removeFinalizer(resource);
    return { type: 'Done' };
  }

  async #retain(ctx: Context, decision: Decision): Promise<ReconcileResult> {
    const { resource, secret } = ctx;
    if (secret !== undefined && ctx.observation.secret?.owned === true) {
      // The Secret must outlive the resource: no owner reference for the garbage collector to follow.
      const annotations: Record<string, string> = { ...secret.metadata?.annotations, 'keys.neon.dev/retained-from': `${resource.kind}/${resource.metadata.name}` };
      delete annotations[ANNOTATION_OWNER];
      await this.#o.core.replaceNamespacedSecret({
        namespace: resource.metadata.namespace,
        name: ctx.secretName,
        body: { ...secret, metadata: { ...secret.metadata, annotations, ownerReferences: [] } },
      });
    }
    await this.#o.events.record(resource, 'Normal', 'KeyRetained', decision.message);
    await this.#removeFinalizer(resource);
    return { type: 'Done' };
  }

  async #revokeReplaced(ctx: Context, keyId: number): Promise<void> {
    const { adapter } = ctx;
    if (adapter === undefined) return;
    try {
      await adapter.revoke(this.#platform(ctx).platform, keyId);
    } catch (error) {
      // Leave the intent in place: adoption will revoke it again on the next reconcile.
      if (asPlatformFailure(error)?.code !== 'NOT_FOUND') throw error;
    }
  }

  async #platformFailure(ctx: Context, failure: PlatformFailure | undefined, doing: string, original?: unknown): Promise<ReconcileResult> {
    const { reason, message } = failureReason(failure, doing);
    ctx.logger.warn({ code: failure?.code, status: failure?.status, requestId: failure?.requestId }, `${doing} failed`);
    await this.#writeStatus(ctx, ctx.observation.deleting ? deletingConditions(reason, message) : blockedConditions(ctx, reason, message, 'KeyIssued'));
    await this.#o.events.record(ctx.resource, 'Warning', reason, message);
    if (failure === undefined && original !== undefined) throw original;
    return { type: 'Backoff', ...(failure?.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
  }

  async #writeSecret(ctx: Context, key: { id: number; name: string; secret: string }): Promise<void> {
    const { resource, secretName, secretKey } = ctx;
    const namespace = resource.metadata.namespace;
    const existing = ctx.observation.secret?.owned === true ? ctx.secret : undefined;
    const body = buildSecret(resource, secretName, secretKey, key, this.#o.signer, existing);
    const written = async (): Promise<V1Secret> => {
      if (existing !== undefined) return await this.#o.core.replaceNamespacedSecret({ namespace, name: secretName, body });
      try {
        return await this.#o.core.createNamespacedSecret({ namespace, body });
      } catch (error) {
        if (statusCode(error) !== 409) throw error;
        // Made between our read and now (by us, before a crash): it is ours only if it says so.
        const found = await this.#readSecret(namespace, secretName);
        if (found === undefined || !ownedBy(resource, found)) throw error;
        return await this.#o.core.replaceNamespacedSecret({ namespace, name: secretName, body: buildSecret(resource, secretName, secretKey, key, this.#o.signer, found) });
      }
    };
    const secret = await written();
    this.#o.ownWrites?.record(objectRef('Secret', namespace, secretName), existing?.metadata?.resourceVersion, secret.metadata?.resourceVersion);
  }

  async #deleteStaleSecret(ctx: Context): Promise<void> {
    const previous = ctx.resource.status?.secretName;
    if (previous === undefined || previous === ctx.secretName) return;
    const old = await this.#readSecret(ctx.resource.metadata.namespace, previous);
    if (old !== undefined && ownedBy(ctx.resource, old)) {
      await this.#o.core.deleteNamespacedSecret({ namespace: ctx.resource.metadata.namespace, name: previous }).catch(() => undefined);
    }
  }

  /** An UPDATE carrying the resourceVersion that was read (409 on any concurrent change). */
  async #updateMetadata(resource: KeyResource, change: (metadata: KeyResource['metadata']) => void): Promise<KeyResource> {
    const copy = structuredClone(resource);
    change(copy.metadata);
    const updated = await this.#o.objects.replaceNamespacedCustomObject({
      group: GROUP, version: VERSION, namespace: copy.metadata.namespace, plural: KINDS[copy.kind].plural, name: copy.metadata.name, body: copy,
    }) as KeyResource;
    this.#o.ownWrites?.record(objectRef(updated.kind, updated.metadata.namespace, updated.metadata.name), resource.metadata.resourceVersion, updated.metadata.resourceVersion);
    return updated;
  }

  async #removeFinalizer(resource: KeyResource): Promise<void> {
    const projectId = resource.kind === 'ProjectApiKey' ? resource.spec.projectId : undefined;
    if (projectId !== undefined) this.#o.operations?.pollers.release(projectId, ownerOf(resource));
    try {
      await this.#updateMetadata(resource, (m) => { m.finalizers = (m.finalizers ?? []).filter((f) => f !== FINALIZER); });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
    }
  }

  /** Merge-patches status when it changed; returns the resource as it now is. */
  async #writeStatus(ctx: Context, conditions: ConditionUpdate[], fields: Record<string, unknown> = {}): Promise<KeyResource> {
    const { resource } = ctx;
    const generation = resource.metadata.generation ?? 0;
    const status = resource.status ?? {};
    const next = {
      ...status,
      ...fields,
      observedGeneration: generation,
      conditions: setConditions(status.conditions, conditions, generation, new Date(this.#now())),
    };
    if (JSON.stringify(next) === JSON.stringify({ ...status, observedGeneration: status.observedGeneration, conditions: status.conditions })) return resource;
    // With the resourceVersion read, as every write here: the status describes that version, and a
    // write that cannot land on another one leaves exactly the version it reports (own-writes.ts).
    const patched = await this.#o.objects.patchNamespacedCustomObjectStatus({
      group: GROUP, version: VERSION, namespace: resource.metadata.namespace, plural: KINDS[resource.kind].plural, name: resource.metadata.name,
      body: { metadata: { resourceVersion: resource.metadata.resourceVersion }, status: next },
    }, merge) as KeyResource;
    this.#o.ownWrites?.record(objectRef(patched.kind, patched.metadata.namespace, patched.metadata.name), resource.metadata.resourceVersion, patched.metadata.resourceVersion);
    return patched;
  }
}

function readyConditions(keyId: number, secretName: string): ConditionUpdate[] {
  return [
    { type: 'KeyIssued', status: 'True', reason: 'KeyLive', message: `key ${keyId} is live on the platform` },
    { type: 'SecretSynced', status: 'True', reason: 'SecretInSync', message: `Secret ${secretName} holds key ${keyId}` },
    { type: 'Ready', status: 'True', reason: 'Ready', message: `key ${keyId} is ready in Secret ${secretName}` },
  ];
}

/** The key cannot be checked: not known to be live any more (nor known to be gone). */
function unverifiableConditions(keyId: number, reason: string, message: string): ConditionUpdate[] {
  return [
    { type: 'KeyIssued', status: 'Unknown', reason, message },
    { type: 'Ready', status: 'Unknown', reason, message: `key ${keyId} is no longer known to be live: ${message}` },
  ];
}

/** Reason and message for a drift check the platform did not answer usefully. */
function unverifiableReason(failure: PlatformFailure | undefined): { reason: string; message: string } {
  const id = failure?.requestId !== undefined ? ` (request ${failure.requestId})` : '';
  if (failure?.code === 'UNAUTHORIZED' || failure?.code === 'FORBIDDEN') {
    return {
      reason: 'CredentialsRefused',
      message: `the platform refused the credentials (${failure.status ?? failure.code})${id}; put a valid, unrevoked API key with access to this key's list in the credentials Secret`,
    };
  }
  return {
    reason: 'PlatformUnavailable',
    message: `the platform did not answer the key list usefully (${failure?.code ?? 'error'}${failure?.status !== undefined ? ` ${failure.status}` : ''})${id}; checked again every drift interval`,
  };
}

function creatingConditions(message: string): ConditionUpdate[] {
  return [
    { type: 'Ready', status: 'False', reason: 'Creating', message },
    { type: 'KeyIssued', status: 'Unknown', reason: 'Creating', message },
  ];
}

function deletingConditions(reason: string, message: string): ConditionUpdate[] {
  return [{ type: 'Ready', status: 'False', reason: 'Deleting', message: reason === 'Deleting' ? message : `${reason}: ${message}` }];
}

const SECRET_REASONS = new Set(['SecretMissing', 'SecretTampered', 'SecretConflict']);

function blockedConditions(ctx: Context, reason: string, message: string, hint?: 'KeyIssued'): ConditionUpdate[] {
  const out: ConditionUpdate[] = [{ type: 'Ready', status: 'False', reason, message }];
  if (SECRET_REASONS.has(reason) && hint === undefined) out.push({ type: 'SecretSynced', status: 'False', reason, message });
  else out.push({ type: 'KeyIssued', status: 'False', reason, message });
  // What drift found stays visible while its repair is refused (e.g. SecretMissing, then Unauthorized).
  const previous = findCondition(ctx.resource.status?.conditions, 'SecretSynced');
  if (ctx.observation.secret === undefined && ctx.observation.status.keyId !== undefined && previous?.reason !== 'SecretMissing') {
    out.push({ type: 'SecretSynced', status: 'False', reason: 'SecretMissing', message: 'the Secret holding the key is gone' });
  }
  return out;
}
