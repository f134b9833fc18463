// One reconcile of a ClusterKeyIssuer (docs/design.md section 1.5): read it fresh, hold its finalizer,
// verify its credentials (at most once per drift interval, or when its spec or its Secret changed),
// and write status only when it changed (issuer-status.ts). While it is being deleted, its finalizer
// stays as long as resources name it (key resources, and inventories of the operator's namespace;
// counted from the informers' caches, with no platform request); once none does, the finalizer goes.
// A policy edit (a new generation), or new credentials in its Secret, wakes every resource using the
// issuer, so the change applies at once.
import type { Logger } from 'pino';
import { MAX_API_KEY_LENGTH, isApiKeyFormat } from '../../platform/index.ts';
import type { ReconcileResult, Reconciler, Request, Worker } from '../runtime/workers.ts';
import { objectRef, type OwnWrites } from '../runtime/own-writes.ts';
import { MERGE_PATCH, type CoreClient, type CustomObjectsClient } from '../runtime/kube-client.ts';
import { GROUP, VERSION } from '../resources/schema.ts';
import { ClusterKeyIssuerSpec, ISSUER_FINALIZER, ISSUER_KIND, ISSUER_PLURAL, type ClusterKeyIssuer } from '../resources/issuer.ts';
import { credentialsProblem, deletionBlocked, invalidSpec, verified, type CredentialsProblem, type Readiness, type SecretRef } from './conditions.ts';
import { readyEvent, type IssuerEvents } from './events.ts';
import { nextStatus } from './issuer-status.ts';
import type { IssuerReadiness } from './metrics.ts';
import { verifyCredentials, type IssuerPlatform } from './verification.ts';
import type { CachedIssuer } from './watches.ts';

/** How often a deletion that waits for the issuer's users counts them again (from the caches). */
export const DELETION_POLL_MS = 5_000;

export interface IssuerDeps {
  objects: Pick<CustomObjectsClient, 'getClusterCustomObject' | 'replaceClusterCustomObject' | 'patchClusterCustomObjectStatus'>;
  core: Pick<CoreClient, 'readNamespacedSecret'>;
  /** A platform client acting with the key, for one verification (it alone holds the key). */
  platformFor(apiKey: string): IssuerPlatform;
  /** The work-queue keys (`kind/namespace/name`) of the key resources naming the issuer, from the caches. */
  usersOf(issuer: string): readonly string[];
  /** Wakes a key resource (in the queue's low lane). */
  wake(key: string): void;
  /** The issuer as the informer's cache holds it (watches.ts). */
  cached(name: string): CachedIssuer | undefined;
  events: IssuerEvents;
  /** Where the issuers' credentials Secrets live (--issuer-secrets-namespace). */
  secretsNamespace: string;
  /** Credentials are verified again once this old. */
  driftIntervalMs: number;
  deletionPollMs?: number;
  ownWrites?: OwnWrites;
  now?: () => number;
}

/** What this process knows of an issuer between reconciles. */
interface Known {
  uid: string;
  generation: number;
  /** The last verification: of which spec and Secret version, when, and what it found. */
  verification?: { generation: number; secretVersion: string | undefined; at: number; readiness: Readiness };
  /** Whether its Ready condition was True (the gauge). */
  ready: boolean;
  /** The DeletionBlocked message last written: a deletion pass that would write it again needs no read. */
  blocked?: string;
}

type Credentials = { apiKey: string; secretVersion: string | undefined } | { problem: CredentialsProblem };

function statusCode(error: unknown): number | undefined {
  const e = error as { code?: unknown; statusCode?: unknown };
  return typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : undefined;
}

export class IssuerReconciler implements Reconciler {
  readonly #d: IssuerDeps;
  readonly #now: () => number;
  /** By issuer name (cluster-scoped: the name is the identity; a new uid starts afresh). */
  readonly #known = new Map<string, Known>();

  constructor(deps: IssuerDeps) {
    this.#d = deps;
    this.#now = deps.now ?? Date.now;
  }

  /** Each issuer reconciled, and whether it is Ready (the gauge, metrics.ts). */
  readiness(): Iterable<IssuerReadiness> {
    return [...this.#known].map(([issuer, known]) => ({ issuer, ready: known.ready }));
  }

  async reconcile(request: Request, logger: Logger, worker?: Worker): Promise<ReconcileResult> {
    try {
      return await this.#reconcile(request.name, logger, worker);
    } catch (error) {
      // A write with the resourceVersion read, refused because the issuer changed meanwhile: read again.
      if (statusCode(error) === 409) return { type: 'Retry' };
      throw error;
    }
  }

  async #reconcile(name: string, logger: Logger, worker: Worker | undefined): Promise<ReconcileResult> {
    const pollMs = this.#d.deletionPollMs ?? DELETION_POLL_MS;
    const known = this.#known.get(name);
    // A deletion that waits: counted again from the caches, with no request while its message stands.
    const cached = this.#d.cached(name);
    if (known?.blocked !== undefined && cached?.metadata.deletionTimestamp !== undefined && cached.metadata.uid === known.uid) {
      const users = this.#d.usersOf(name);
      if (users.length > 0 && deletionBlocked(users).ready.message === known.blocked) return { type: 'Done', requeueAfterMs: pollMs };
    }
    let issuer: ClusterKeyIssuer;
    try {
      issuer = (await this.#d.objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: ISSUER_PLURAL, name })) as ClusterKeyIssuer;
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      this.#known.delete(name);
      return { type: 'Done' };
    }
    const uid = issuer.metadata.uid;
    const generation = issuer.metadata.generation ?? 0;
    const state: Known = known?.uid === uid ? known : { uid, generation, ready: false };
    const users = this.#d.usersOf(name);
    const holds = issuer.metadata.finalizers?.includes(ISSUER_FINALIZER) === true;

    if (issuer.metadata.deletionTimestamp !== undefined) {
      if (!holds) {
        this.#known.delete(name);
        return { type: 'Done' };
      }
      if (users.length > 0) {
        const readiness = deletionBlocked(users);
        const previous = issuer.status?.conditions?.find((c) => c.type === 'Ready');
        await this.#writeStatus(issuer, readiness, users.length, undefined, logger);
        if (previous?.reason !== readiness.ready.reason) await this.#d.events.record(issuer, 'Warning', readiness.ready.reason, readiness.ready.message);
        this.#known.set(name, { ...state, ready: false, blocked: readiness.ready.message });
        return { type: 'Done', requeueAfterMs: pollMs };
      }
      await this.#replace(
        issuer,
        (issuer.metadata.finalizers ?? []).filter((f) => f !== ISSUER_FINALIZER),
      );
      this.#known.delete(name);
      logger.info('no resource uses the issuer any more; finalizer removed');
      return { type: 'Done' };
    }
    if (!holds) issuer = await this.#replace(issuer, [...(issuer.metadata.finalizers ?? []), ISSUER_FINALIZER]);
    // A policy edit applies at once: every resource using the issuer is looked at again.
    if (known?.uid === uid && known.generation !== generation) {
      logger.info({ generation, resources: users.length }, 'issuer changed; waking the resources that use it');
      for (const key of users) this.#d.wake(key);
    }
    state.generation = generation;
    delete state.blocked;

    const now = this.#now();
    let readiness: Readiness;
    let verifiedAt: number | undefined;
    let nextCheck = this.#d.driftIntervalMs;
    let credentialsChanged = false;
    const parsed = ClusterKeyIssuerSpec.safeParse(issuer.spec);
    if (!parsed.success) {
      readiness = invalidSpec(
        parsed.error.issues
          .map((i) => `spec.${i.path.join('.')}: ${i.message}`)
          .join('; ')
          .slice(0, 1024),
      );
      delete state.verification;
    } else {
      const spec = parsed.data;
      const ref: SecretRef = { namespace: this.#d.secretsNamespace, name: spec.credentialsSecretRef.name, key: spec.credentialsSecretRef.key };
      const credentials = await this.#credentials(ref);
      if ('problem' in credentials) {
        // The Secret's watch wakes the issuer when it changes (watches.ts).
        readiness = credentialsProblem(credentials.problem, ref, spec.organizationId);
        delete state.verification;
      } else {
        const last = state.verification;
        credentialsChanged = last !== undefined && last.secretVersion !== credentials.secretVersion;
        if (
          last !== undefined &&
          last.generation === generation &&
          last.secretVersion === credentials.secretVersion &&
          now - last.at < this.#d.driftIntervalMs
        ) {
          readiness = last.readiness;
          nextCheck = last.at + this.#d.driftIntervalMs - now;
        } else {
          const verification = await verifyCredentials(
            this.#d.platformFor(credentials.apiKey),
            spec.organizationId,
            worker?.signal !== undefined ? { signal: worker.signal } : undefined,
          );
          readiness = verified(verification, ref, spec.organizationId);
          // Unavailable verified nothing: verifiedAt stays what it was.
          if (verification.outcome !== 'Unavailable') verifiedAt = now;
          state.verification = { generation, secretVersion: credentials.secretVersion, at: now, readiness };
          if (verification.outcome === 'Unavailable')
            logger.warn(
              { code: verification.failure.code, status: verification.failure.status, requestId: verification.failure.requestId },
              'issuer verification failed',
            );
        }
      }
    }

    const previous = issuer.status?.conditions?.find((c) => c.type === 'Ready');
    await this.#writeStatus(issuer, readiness, users.length, verifiedAt, logger);
    state.ready = readiness.ready.status === 'True';
    this.#known.set(name, state);
    const event = readyEvent(previous, readiness.ready);
    if (event !== undefined) await this.#d.events.record(issuer, event.type, event.reason, event.message);
    if (previous?.status !== readiness.ready.status) {
      logger.info({ ready: readiness.ready.status, reason: readiness.ready.reason, resources: users.length }, 'issuer readiness changed');
      // Resources that waited for a usable issuer (or must learn it is no longer usable) look again.
      for (const key of users) this.#d.wake(key);
    } else if (credentialsChanged) {
      // New credentials in its Secret, verified: every resource using the issuer looks again, as at a
      // policy edit (an inventory of the operator's namespace lists with them at once).
      logger.info({ resources: users.length }, 'issuer credentials changed; waking the resources that use it');
      for (const key of users) this.#d.wake(key);
    }
    return { type: 'Done', requeueAfterMs: Math.max(1_000, nextCheck) };
  }

  /** The issuer with these finalizers (an update with the resourceVersion read; a 409 reads again). */
  async #replace(issuer: ClusterKeyIssuer, finalizers: string[]): Promise<ClusterKeyIssuer> {
    const body = { ...issuer, metadata: { ...issuer.metadata, finalizers } };
    const replaced = (await this.#d.objects.replaceClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: ISSUER_PLURAL,
      name: issuer.metadata.name,
      body,
    })) as ClusterKeyIssuer;
    this.#d.ownWrites?.record(objectRef(ISSUER_KIND, '', issuer.metadata.name), issuer.metadata.resourceVersion, replaced.metadata?.resourceVersion);
    return replaced;
  }

  /** Writes status when it changed (issuer-status.ts), with the resourceVersion read. */
  async #writeStatus(issuer: ClusterKeyIssuer, readiness: Readiness, resources: number, verifiedAt: number | undefined, logger: Logger): Promise<void> {
    const current = issuer.status;
    const next = nextStatus(current, { generation: issuer.metadata.generation ?? 0, readiness, resources, verifiedAt, now: this.#now() });
    if (next === undefined) return;
    // A merge patch removes a field only when it says null.
    const status = { ...next, ...(current?.user !== undefined && next.user === undefined ? { user: null } : {}) };
    const patched = (await this.#d.objects.patchClusterCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        plural: ISSUER_PLURAL,
        name: issuer.metadata.name,
        body: { metadata: { resourceVersion: issuer.metadata.resourceVersion }, status },
      },
      MERGE_PATCH,
    )) as ClusterKeyIssuer;
    this.#d.ownWrites?.record(objectRef(ISSUER_KIND, '', issuer.metadata.name), issuer.metadata.resourceVersion, patched.metadata?.resourceVersion);
    logger.debug({ reason: readiness.ready.reason, resources }, 'issuer status written');
  }

  /**
   * The API key in the issuer's credentials Secret, with the Secret's version; or why there is none.
   * Measured before it is decoded: an entry longer than any API key never reaches a platform client.
   */
  async #credentials(ref: SecretRef): Promise<Credentials> {
    try {
      const secret = await this.#d.core.readNamespacedSecret({ namespace: ref.namespace, name: ref.name });
      const encoded = secret.data?.[ref.key];
      if (encoded === undefined) return { problem: 'missing' };
      if (encoded.length > 4 * Math.ceil((MAX_API_KEY_LENGTH + 64) / 3)) return { problem: 'not-a-key' };
      const value = Buffer.from(encoded, 'base64').toString('utf8').trim();
      if (value === '') return { problem: 'missing' };
      return isApiKeyFormat(value) ? { apiKey: value, secretVersion: secret.metadata?.resourceVersion } : { problem: 'not-a-key' };
    } catch (error) {
      if (statusCode(error) === 404) return { problem: 'missing' };
      throw error;
    }
  }
}
