// Which Secret "the Secret" of a key resource is, and as read (locateSecret): its one Secret by
// name, or with spec.secret.immutable the one a pending attempt's or the recorded key is in, found
// among the managed Secrets it controls (metadata listed, then each read by name and verified by
// its signature: secret-writer.ts observeSecret). Nothing is written here.
import type { V1Secret } from '@kubernetes/client-node';
import { ANNOTATION_KEY_ID, ANNOTATION_KEY_NAME, FINALIZER, LABEL_MANAGED_BY, MANAGED_BY, type KeyResource } from '../../resources/schema.ts';
import type { Context, KeyDeps } from '../reconcile-context.ts';
import { baseSecretName, immutableMode, immutableSecretName } from './immutable-secret.ts';
import { KEY_ID, observeSecret, ownedBy } from './secret-writer.ts';

/**
 * The most Secrets one locateSecret reads by name (each up to ~1 MiB, one at a time): the
 * candidates a tenant can add (a Secret with this resource's uid in a controller owner reference
 * and the operator's annotations copied) cost a read each, never more than this per pass
 * (docs/security.md, Bounds).
 */
export const MAX_LOCATE_READS = 16;

/**
 * spec.secret.immutable: the Secrets a pending attempt's (or the newest) key may be in, from a LIST
 * of metadata only: the managed Secrets whose controller owner reference is this resource's uid and
 * whose key id annotation is a key id (with `attempt`: whose key name annotation is it), newest
 * claimed key first. Nothing here is believed: each is read by name and verified (observeSecret).
 */
async function candidateSecrets(deps: Pick<KeyDeps, 'kube'>, resource: KeyResource, attempt: string | undefined): Promise<string[]> {
  const listed = await deps.kube.listOwnedSecretMetadata(resource.metadata.namespace, `${LABEL_MANAGED_BY}=${MANAGED_BY}`, resource.metadata.uid, [
    ANNOTATION_KEY_ID,
    ANNOTATION_KEY_NAME,
  ]);
  const claimed: { name: string; keyId: number }[] = [];
  for (const s of listed) {
    const annotations = s.metadata?.annotations ?? {};
    const rawId = annotations[ANNOTATION_KEY_ID];
    if (s.metadata?.name === undefined || rawId === undefined || !KEY_ID.test(rawId) || !ownedBy(resource, s)) continue;
    if (attempt !== undefined && annotations[ANNOTATION_KEY_NAME] !== attempt) continue;
    claimed.push({ name: s.metadata.name, keyId: Number(rawId) });
  }
  return claimed
    .sort((a, b) => b.keyId - a.keyId)
    .slice(0, MAX_LOCATE_READS)
    .map((c) => c.name);
}

/**
 * The first of the candidates (newest claimed key first) that, read by name, this resource owns
 * under the signature (with `attempt`: holding that attempt's key name): the newest verified key.
 */
async function firstVerified(
  deps: Pick<KeyDeps, 'kube' | 'signer'>,
  resource: KeyResource,
  secretKey: string,
  attempt: string | undefined,
): Promise<V1Secret | undefined> {
  for (const name of await candidateSecrets(deps, resource, attempt)) {
    const secret = await deps.kube.readSecret(resource.metadata.namespace, name);
    const seen = observeSecret(resource, secret, secretKey, deps.signer);
    if (seen?.verified === true && seen.keyId !== undefined && (attempt === undefined || seen.keyName === attempt)) return secret;
  }
  return undefined;
}

/**
 * Which Secret "the Secret" is, and as read. One Secret per resource: spec.secret.name (default
 * metadata.name). spec.secret.immutable: the Secret of a pending attempt (found by its signed key
 * name among the managed Secrets this resource owns, so a crash between the Secret and the status
 * write is adopted), else the one status.secretName names (only the operator writes status).
 * Only metadata is listed; only the Secrets this resource controls are read, by name.
 */
export async function locateSecret(
  deps: Pick<KeyDeps, 'kube' | 'signer' | 'secretUncached'>,
  resource: KeyResource,
  spec: Context['spec'],
  secretKey: string,
  attempt: string | undefined,
  newKey = false,
): Promise<{ secretName: string; secret: V1Secret | undefined }> {
  const namespace = resource.metadata.namespace;
  const base = baseSecretName(resource, spec);
  // A new key's Secret that the cache does not hold is not asked for: it is not there, or it was
  // made a moment ago and its create (POST) comes back 409, read then (writeSecret).
  if (!immutableMode(spec))
    return { secretName: base, secret: newKey && deps.secretUncached?.(namespace, base) === true ? undefined : await deps.kube.readSecret(namespace, base) };
  if (attempt !== undefined) {
    const found = await firstVerified(deps, resource, secretKey, attempt);
    if (found?.metadata?.name !== undefined) return { secretName: found.metadata.name, secret: found };
  }
  const status = resource.status;
  if (status?.keyId === undefined) {
    // No key in status, yet the finalizer: a status lost (a restore without it), or a first create
    // (one list per new resource). The Secrets are the record then, as the one Secret is in the
    // mutable mode: the newest key among those this resource owns under the signature.
    if (!resource.metadata.finalizers?.includes(FINALIZER)) return { secretName: base, secret: undefined };
    const newest = await firstVerified(deps, resource, secretKey, undefined);
    const name = newest?.metadata?.name;
    return name !== undefined ? { secretName: name, secret: newest } : { secretName: base, secret: undefined };
  }
  const name = status.secretName ?? immutableSecretName(base, status.keyId);
  return { secretName: name, secret: await deps.kube.readSecret(namespace, name) };
}
