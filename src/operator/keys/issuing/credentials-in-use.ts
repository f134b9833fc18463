// The credentials Secret of a namespace (spec.credentialsSecretRef) is kept while a resource still
// needs it to revoke a key: a finalizer on that Secret, put there before a key is minted with it,
// and lifted once no resource names it any more (Crossplane's
// ProviderConfig usages do the same for their credentials). Without it, `kubectl delete namespace`
// deletes the credentials with everything else, and the resources' finalizers can no longer revoke:
// keys stay live and the namespace stays Terminating. docs/security.md says what it does not
// guarantee: a tenant may lift the finalizer from its own Secret; only issuers guarantee revocation
// against the tenant itself.
//
// Lifted by a reconcile of its own, `CredentialsSecret/<namespace>/<name>` in the work queue: woken
// when a resource naming it is released, and by any event of a Secret carrying the finalizer (its
// deletion by the namespace controller). While it is being deleted and resources still need it, it is
// looked at again every few seconds, so a cache behind the releases never leaves it stuck.
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { ReconcileResult } from '../../runtime/workers.ts';
import { CREDENTIALS_FINALIZER } from '../../resources/schema.ts';
import type { KubeWrites } from '../kube-writes.ts';
import { objectRef, type OwnWrites } from '../../runtime/own-writes.ts';

/** An object's uid and resourceVersion (reconcile-context.ts ObjectVersion, not imported: the frame imports this room). */
type ObjectVersion = { uid: string | undefined; resourceVersion: string | undefined };

/** The work-queue kind of a credentials Secret's own reconcile. */
export const CREDENTIALS_SECRET_KIND = 'CredentialsSecret';

/** How soon a credentials Secret being deleted is looked at again while resources still need it. */
const DELETING_RECHECK_MS = 2_000;

/** Whether the Secret already carries the finalizer. */
export function keepsCredentials(secret: V1Secret | undefined): boolean {
  return secret?.metadata?.finalizers?.includes(CREDENTIALS_FINALIZER) === true;
}

/**
 * The writes of the finalizer under way, per Secret, with the version each was written over: the
 * first creates of a namespace at once share one.
 */
const keeping = new Map<string, { over: string; write: Promise<ObjectVersion | undefined> }>();

/**
 * `Secret/namespace/name@resourceVersion` of copies the finalizer was written over, newest last: a
 * create that read the Secret before that write and comes to keep it after (its check started
 * early, reconciler.ts) has nothing to write, instead of a 409 and a fresh read in its way to the
 * POST. With each, the version that write made when it was the only change since that copy.
 */
const keptOver = new Map<string, ObjectVersion | undefined>();
const MAX_KEPT_OVER = 1_000;

/**
 * Puts the finalizer on the credentials Secret as read (an update with its resourceVersion; on a
 * conflict, once more on a fresh read). Nothing when it is there already, or when the Secret is
 * being deleted (no finalizer can be added then; the namespace is going and nothing is minted).
 * Concurrent calls for one Secret (a namespace's first creates) share one write.
 *
 * Returns the Secret's version after the finalizer, when the only change since the copy read is that
 * finalizer (written over exactly that copy's version): what a key minted with the copy may rest on
 * (observing/at-rest.ts). undefined otherwise.
 */
export async function keepCredentials(
  kube: Pick<KubeWrites, 'readSecret' | 'replaceSecret'>,
  secret: V1Secret | undefined,
  logger: Logger,
  ownWrites?: OwnWrites,
): Promise<ObjectVersion | undefined> {
  const meta = secret?.metadata;
  if (secret === undefined || meta?.name === undefined || meta.namespace === undefined || keepsCredentials(secret) || meta.deletionTimestamp !== undefined)
    return undefined;
  const { namespace, name } = meta as { namespace: string; name: string };
  const ref = objectRef('Secret', namespace, name);
  const over = `${ref}@${meta.resourceVersion}`;
  const under = keeping.get(ref);
  if (under !== undefined) return under.write.then((after) => (under.over === over ? after : undefined));
  if (keptOver.has(over)) return keptOver.get(over);
  const put = async (current: V1Secret): Promise<ObjectVersion> => {
    const m = current.metadata ?? {};
    const written = await kube.replaceSecret(namespace, name, { ...current, metadata: { ...m, finalizers: [...(m.finalizers ?? []), CREDENTIALS_FINALIZER] } });
    const after = { uid: written.metadata?.uid, resourceVersion: written.metadata?.resourceVersion };
    keptOver.set(over, m.resourceVersion === meta.resourceVersion ? after : undefined);
    for (const oldest of keptOver.keys()) {
      if (keptOver.size <= MAX_KEPT_OVER) break;
      keptOver.delete(oldest);
    }
    // Its event wakes none of the resources naming the Secret: a finalizer is nothing they read.
    ownWrites?.recordQuiet(ref, m.resourceVersion, written.metadata?.resourceVersion);
    logger.info({ secret: name }, 'credentials Secret kept while keys issued with it are live');
    return after;
  };
  const write = (async (): Promise<ObjectVersion | undefined> => {
    try {
      return await put(secret);
    } catch (error) {
      if ((error as { code?: unknown }).code !== 409) throw error;
      const fresh = await kube.readSecret(namespace, name);
      if (fresh !== undefined && !keepsCredentials(fresh) && fresh.metadata?.deletionTimestamp === undefined) await put(fresh);
      // Written over another copy than the one read: not the only change since.
      return undefined;
    }
  })().finally(() => keeping.delete(ref));
  keeping.set(ref, { over, write });
  return write;
}

export interface CredentialsUsers {
  /**
   * The work-queue keys of the resources naming the Secret, as cached. Any of them may hold or be
   * about to mint a key with it (one whose intent is not in the cache yet): all count.
   */
  holders(namespace: string, name: string): readonly string[];
}

/**
 * The reconcile of one credentials Secret: lifts the finalizer once no resource needs it (those
 * `released` just now are not counted, whatever the cache still shows of them).
 */
export async function reconcileCredentialsSecret(
  kube: Pick<KubeWrites, 'readSecret' | 'replaceSecret'>,
  users: CredentialsUsers,
  released: ReadonlySet<string>,
  namespace: string,
  name: string,
  logger: Logger,
  ownWrites?: OwnWrites,
): Promise<ReconcileResult> {
  const holders = users.holders(namespace, name).filter((key) => !released.has(key));
  const secret = await kube.readSecret(namespace, name);
  if (secret === undefined || !keepsCredentials(secret)) return { type: 'Done' };
  const deleting = secret.metadata?.deletionTimestamp !== undefined;
  if (holders.length > 0) {
    logger.debug({ holders: holders.length, deleting }, 'credentials Secret still needed');
    return deleting ? { type: 'Done', requeueAfterMs: DELETING_RECHECK_MS } : { type: 'Done' };
  }
  const meta = secret.metadata ?? {};
  const written = await kube.replaceSecret(namespace, name, {
    ...secret,
    metadata: { ...meta, finalizers: (meta.finalizers ?? []).filter((f) => f !== CREDENTIALS_FINALIZER) },
  });
  ownWrites?.recordQuiet(objectRef('Secret', namespace, name), meta.resourceVersion, written.metadata?.resourceVersion);
  logger.info({ secret: name, deleting }, 'credentials Secret released: no key issued with it is live any more');
  return { type: 'Done' };
}
