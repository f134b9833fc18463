// The Secret that receives an issued key (docs/design.md section 3.1, step 4): data, the key id, attempt
// name and replaced key as annotations with the operator's signature over them and the value, a
// controller owner reference to the resource, the managed-by label (the operator's Secret informer
// selects on it).
// The secret value leaves this file only inside Secret.data. The writes (writeSecret,
// deleteStaleSecret) go through the Kubernetes port (kube-writes.ts).
//
// Ownership is the controller owner reference carrying the resource's uid, nothing else: a label
// or annotation anyone with write access to Secrets can set. The key id annotation is believed
// only with a valid signature (signing.ts): a Secret made by hand with another team's key id is
// never recorded, and that key is never revoked.
import { createHmac } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { SecretObservation } from '../decision-types.ts';
import {
  ANNOTATION_KEY_ID,
  ANNOTATION_KEY_NAME,
  ANNOTATION_SIGNATURE,
  API_VERSION,
  LABEL_MANAGED_BY,
  MANAGED_BY,
  type KeyResource,
} from '../../resources/schema.ts';
import { objectRef } from '../../runtime/own-writes.ts';
import { baseSecretName, immutableMode, immutableSecretName } from './immutable-secret.ts';
import { statusCode } from '../kube-writes.ts';
import type { Context, KeyDeps, ObjectVersion } from '../reconcile-context.ts';
import { recordedValues, rewrittenSecret, specIds, templateOf, templatedData, templatedMetadata, type SecretTemplate } from './secret-template.ts';
import type { Signer } from '../issuing/signing.ts';

/** On the Secret: which resource it belongs to (kind/name), so Secret events map to the owner. */
export const ANNOTATION_OWNER = 'keys.neon.dev/owner';

function ownerValue(resource: Pick<KeyResource, 'kind' | 'metadata'>): string {
  return `${resource.kind}/${resource.metadata.name}`;
}

/**
 * HMAC-SHA256 of a secret value, keyed by the resource's namespace and name: status may carry it to
 * detect edits of the Secret, and it reveals nothing (status.secretHash). Keyed by names rather
 * than the uid so a backup restored into a new uid still matches.
 */
export function secretHash(resource: Pick<KeyResource, 'metadata'>, value: string): string {
  return `hmac-sha256:${createHmac('sha256', `neon-key-operator/${resource.metadata.namespace}/${resource.metadata.name}`).update(value).digest('hex')}`;
}

/** Whether the Secret's controller owner reference is this resource (by uid: names are reused). */
export function ownedBy(resource: Pick<KeyResource, 'metadata'>, secret: V1Secret): boolean {
  return (secret.metadata?.ownerReferences ?? []).some((ref) => ref.controller === true && ref.uid === resource.metadata.uid);
}

/** On the Secret: the key the one it holds replaced (drift repair, rotation), under the signature. */
export const ANNOTATION_REPLACES = 'keys.neon.dev/replaces';

/** What a Secret's signature vouches for: the key it holds, as issued (docs/security.md "Where authority comes from"). */
interface SignedKey {
  id: number;
  name: string | undefined;
  /** secretHash of the value: annotations copied onto a Secret holding another value do not verify. */
  hash: string | undefined;
  /** The key it replaced, if any: a signed Secret names the step of the record it was written for. */
  replaces: number | undefined;
}

/**
 * The fields signed. 'v2' sets them apart from the format before (signatureFieldsV1):
 * the two never share an encoding (signing.ts).
 */
function signatureFields(resource: Pick<KeyResource, 'metadata'>, key: SignedKey): (string | number | undefined)[] {
  return [resource.metadata.uid, key.id, key.name, 'v2', key.hash, key.replaces];
}

/** The first format: uid, key id and name, nothing of the value. Read for the upgrade only, never written. */
function signatureFieldsV1(resource: Pick<KeyResource, 'metadata'>, keyId: number, keyName: string | undefined): (string | number | undefined)[] {
  return [resource.metadata.uid, keyId, keyName];
}

/** The keys.neon.dev/signature value for a Secret holding `key`. */
export function secretSignature(resource: Pick<KeyResource, 'metadata'>, signer: Signer, key: SignedKey): string {
  return signer.sign('secret', signatureFields(resource, key));
}

export const KEY_ID = /^\d{1,15}$/;

/**
 * The Secret as the operator sees it: owned (controller owner reference with the uid), and verified
 * when its signature covers the key id, name, replaced key and the HMAC of the value it holds now.
 * A signature of the earlier format is `legacy`, not verified: observe.ts believes it only for the
 * key status records, and has it re-signed.
 */
export function observeSecret(
  resource: Pick<KeyResource, 'kind' | 'metadata'>,
  secret: V1Secret | undefined,
  dataKey: string,
  signer: Signer,
): SecretObservation | undefined {
  if (secret === undefined) return undefined;
  const annotations = secret.metadata?.annotations ?? {};
  const owned = ownedBy(resource, secret);
  const rawId = annotations[ANNOTATION_KEY_ID];
  const keyId = rawId !== undefined && KEY_ID.test(rawId) ? Number(rawId) : undefined;
  const keyName = annotations[ANNOTATION_KEY_NAME];
  const rawReplaces = annotations[ANNOTATION_REPLACES];
  const replaces = rawReplaces !== undefined && KEY_ID.test(rawReplaces) ? Number(rawReplaces) : undefined;
  const encoded = secret.data?.[dataKey];
  const value = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
  const hash = value !== '' ? secretHash(resource, value) : undefined;
  const signature = annotations[ANNOTATION_SIGNATURE];
  // A replaces annotation that is not an id is signed as given, and so never verifies.
  const verified =
    owned &&
    keyId !== undefined &&
    (rawReplaces === undefined || replaces !== undefined) &&
    signer.verify('secret', signatureFields(resource, { id: keyId, name: keyName, hash, replaces }), signature);
  const legacy =
    owned && !verified && keyId !== undefined && rawReplaces === undefined && signer.verify('secret', signatureFieldsV1(resource, keyId, keyName), signature);
  return {
    owned,
    verified,
    ...(legacy ? { legacy } : {}),
    ...(keyId !== undefined ? { keyId } : {}),
    ...(keyName !== undefined ? { keyName } : {}),
    ...(verified && replaces !== undefined ? { replaces } : {}),
    ...(hash !== undefined ? { hash } : {}),
  };
}

/** spec.secret.template and what its derived entries need that the key does not carry (secret-template.ts). */
export interface SecretShape {
  template: SecretTemplate | undefined;
  organizationId: string | undefined;
  projectId: string | undefined;
  platformUrl: string | undefined;
  /** spec.secret.immutable: the Secret is written once, marked immutable. */
  immutable?: boolean;
}

/** A key as written to its Secret; `replaces`: the key it replaced (signed with it). */
export interface IssuedKey {
  id: number;
  name: string;
  secret: string;
  replaces?: number;
}

export function buildSecret(
  resource: KeyResource,
  name: string,
  dataKey: string,
  key: IssuedKey,
  signer: Signer,
  existing?: V1Secret,
  shape?: SecretShape,
): V1Secret {
  const signature = secretSignature(resource, signer, { id: key.id, name: key.name, hash: secretHash(resource, key.secret), replaces: key.replaces });
  const templated = templatedMetadata(existing?.metadata, shape?.template, dataKey);
  // The replaced key of an earlier Secret under this name is not this key's.
  delete templated.annotations[ANNOTATION_REPLACES];
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    ...(shape?.immutable === true ? { immutable: true } : {}),
    metadata: {
      name,
      namespace: resource.metadata.namespace,
      ...(existing?.metadata?.resourceVersion !== undefined ? { resourceVersion: existing.metadata.resourceVersion } : {}),
      labels: { ...templated.labels, [LABEL_MANAGED_BY]: MANAGED_BY },
      annotations: {
        ...templated.annotations,
        [ANNOTATION_OWNER]: ownerValue(resource),
        [ANNOTATION_KEY_ID]: String(key.id),
        [ANNOTATION_KEY_NAME]: key.name,
        ...(key.replaces !== undefined ? { [ANNOTATION_REPLACES]: String(key.replaces) } : {}),
        [ANNOTATION_SIGNATURE]: signature,
      },
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: resource.kind,
          name: resource.metadata.name,
          uid: resource.metadata.uid,
          controller: true,
          blockOwnerDeletion: false,
        },
      ],
    },
    data: templatedData(dataKey, shape?.template, {
      key: key.secret,
      keyId: key.id,
      keyName: key.name,
      organizationId: shape?.organizationId,
      projectId: shape?.projectId,
      platformUrl: shape?.platformUrl,
    }),
  };
}

/** A Secret of the name a key is to be written to exists and this resource does not own it: never adopted, never overwritten. */
export class SecretConflictError extends Error {
  readonly secretName: string;
  constructor(secretName: string) {
    super(`Secret ${secretName} exists and is not controlled by this resource`);
    this.secretName = secretName;
  }
}

/** What a new key's Secret is written from, as this pass read it. */
export interface SecretWrite {
  /** The resource: the Secret's namespace, its owner reference, the uid its signature covers. */
  resource: KeyResource;
  spec: Context['spec'];
  /** The one Secret's name (not spec.secret.immutable, where each key has its own). */
  secretName: string;
  dataKey: string;
  /** The Secret read under `secretName` when this resource controls it: replaced at the version read. */
  existing: V1Secret | undefined;
}

/** A key's Secret as written: its name, secretHash of the value, whether it is immutable (spec.secret.immutable). */
export interface WrittenSecret {
  name: string;
  hash: string;
  immutable: boolean;
  /** The Secret's uid and resourceVersion as the apiserver answered the write (or as read, an immutable one found written): what a rest after the create compares the cache with (at-rest.ts). */
  version: ObjectVersion;
}

function versionOf(secret: V1Secret | undefined): ObjectVersion {
  return { uid: secret?.metadata?.uid, resourceVersion: secret?.metadata?.resourceVersion };
}

/**
 * Step 4 of docs/design.md section 3.1: the Secret, created or replaced (only when this resource
 * controls it). spec.secret.immutable: the key's own Secret, created once; one
 * found there already is ours only when this resource owns it and it holds this very key under the
 * signature (a create repeated after a crash); anything else is a SecretConflictError.
 */
export async function writeSecret(deps: KeyDeps, to: SecretWrite, key: IssuedKey): Promise<WrittenSecret> {
  const { resource, spec, dataKey } = to;
  const namespace = resource.metadata.namespace;
  const immutable = immutableMode(spec);
  const name = immutable ? immutableSecretName(baseSecretName(resource, spec), key.id) : to.secretName;
  const shape: SecretShape = { template: templateOf(spec), ...specIds(spec), platformUrl: deps.platformUrl, immutable };
  const written = { name, hash: secretHash(resource, key.secret), immutable };
  const existing = immutable ? undefined : to.existing;
  const body = buildSecret(resource, name, dataKey, key, deps.signer, existing, shape);
  if (existing !== undefined) {
    const replaced = await deps.kube.replaceSecret(namespace, name, body);
    deps.ownWrites?.record(objectRef('Secret', namespace, name), existing.metadata?.resourceVersion, replaced.metadata?.resourceVersion);
    return { ...written, version: versionOf(replaced) };
  }
  let replaced: V1Secret;
  try {
    const created = await deps.kube.createSecret(namespace, body);
    deps.ownWrites?.record(objectRef('Secret', namespace, name), undefined, created.metadata?.resourceVersion);
    return { ...written, version: versionOf(created) };
  } catch (error) {
    if (statusCode(error) !== 409) throw error;
    // Made between our read and now (by us, before a crash): it is ours only if it says so.
    const found = await deps.kube.readSecret(namespace, name);
    if (immutable) {
      const seen = observeSecret(resource, found, dataKey, deps.signer);
      if (seen?.verified !== true || seen.keyId !== key.id || seen.hash !== written.hash) throw new SecretConflictError(name);
      return { ...written, version: versionOf(found) };
    }
    // Gone again meanwhile: the pass is retried. Another's (made after the cache showed none, or
    // after our read): its name is taken, as for an immutable Secret.
    if (found === undefined) throw error;
    if (!ownedBy(resource, found)) throw new SecretConflictError(name);
    replaced = await deps.kube.replaceSecret(namespace, name, buildSecret(resource, name, dataKey, key, deps.signer, found, shape));
  }
  deps.ownWrites?.record(objectRef('Secret', namespace, name), undefined, replaced.metadata?.resourceVersion);
  return { ...written, version: versionOf(replaced) };
}

/**
 * spec.secret.name changed, or (spec.secret.immutable) a key replaced outside a rotation: the
 * Secret status named before goes, if this resource controls it.
 */
export async function deleteStaleSecret(deps: KeyDeps, ctx: Context, current = ctx.secretName): Promise<void> {
  const previous = ctx.resource.status?.secretName;
  if (previous === undefined || previous === current) return;
  const old = await deps.kube.readSecret(ctx.resource.metadata.namespace, previous);
  if (old !== undefined && ownedBy(ctx.resource, old)) {
    await deps.kube.deleteSecret(ctx.resource.metadata.namespace, previous).catch(() => undefined);
  }
}

/** spec.secret.immutable: a revoked key's Secret goes, only when this resource owns it by uid (never the current one). */
export async function deleteRetiredSecret(deps: KeyDeps, ctx: Context, name: string | undefined): Promise<void> {
  if (name === undefined || name === ctx.secretName) return;
  const namespace = ctx.resource.metadata.namespace;
  const found = await deps.kube.readSecret(namespace, name);
  if (found === undefined || !ownedBy(ctx.resource, found)) return;
  await deps.kube.deleteSecret(namespace, name).catch((error: unknown) => {
    if (statusCode(error) !== 404) throw error;
  });
}

/** The secret value the Secret holds ('' when none): the issued key, for the operations poller. */
export function secretValue(ctx: Pick<Context, 'secret' | 'secretKey'>): string {
  const encoded = ctx.secret?.data?.[ctx.secretKey];
  return encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8').trim() : '';
}

/**
 * The Secret brought in line with spec.secret.template (decide(): RewriteSecret): rebuilt from the
 * key it holds, with the resourceVersion read (a concurrent edit is a 409 and a fresh look).
 */
export async function rewriteSecret(deps: KeyDeps, ctx: Context): Promise<V1Secret> {
  const { resource, secret, secretName, secretKey } = ctx;
  if (secret === undefined) throw new Error('rewrite without a Secret');
  const namespace = resource.metadata.namespace;
  const encoded = secret.data?.[secretKey];
  const key = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
  const seen = ctx.observation.secret;
  const rewritten = rewrittenSecret(secret, secretKey, templateOf(ctx.spec), recordedValues(key, resource.status, seen, ctx.spec, deps.platformUrl));
  if (seen?.resign === true && seen.keyId !== undefined && key !== '') {
    // A signature of the earlier format, believed for the recorded key (observe.ts): now one that covers the value.
    rewritten.metadata = {
      ...rewritten.metadata,
      annotations: {
        ...rewritten.metadata?.annotations,
        [ANNOTATION_SIGNATURE]: secretSignature(resource, deps.signer, {
          id: seen.keyId,
          name: seen.keyName,
          hash: secretHash(resource, key),
          replaces: undefined,
        }),
      },
    };
  }
  // An immutable Secret's data never changes: its labels and annotations follow the template, its
  // derived entries are those of the template when the key was issued (the next key's Secret has the new ones).
  const body = secret.immutable === true ? { ...rewritten, data: secret.data } : rewritten;
  const written = await deps.kube.replaceSecret(namespace, secretName, body);
  deps.ownWrites?.record(objectRef('Secret', namespace, secretName), secret.metadata?.resourceVersion, written.metadata?.resourceVersion);
  return written;
}
