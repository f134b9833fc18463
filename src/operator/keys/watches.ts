// What the key controller watches, as data for runtime/controller.ts: each key kind (its events
// wake the resource itself), and every Secret's metadata, in one informer per namespace: a Secret
// the operator manages (the managed-by label) wakes the resource named by its owner annotation,
// and any Secret wakes the resources whose credentialsSecretRef names it (a credentials Secret
// carries no label of ours), at once, even out of a refusal backoff. Metadata-only
// (PartialObjectMetadata): no Secret's data ever reaches the operator through the watch; the
// reconcile reads the Secrets it needs by name. One informer for both: a managed Secret is cached
// once, and one watch per namespace reaches the apiserver.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Controller } from '../runtime/controller.ts';
import type { Watch } from '../runtime/watches.ts';
import { CREDENTIALS_FINALIZER, GROUP, KINDS, VERSION, type KindName } from '../resources/schema.ts';
import { CREDENTIALS_SECRET_KIND } from './issuing/credentials-in-use.ts';
import {
  cachedOwner,
  credentialsSecretOf,
  explicitSecretNameOf,
  issuerOf,
  secretNameOfCached,
  slotsOf,
  trimKeyResource,
  trimSecret,
} from './observing/cache-projection.ts';

/** The index of the key resources by the credentials Secret they name (`namespace/name`). */
export const CREDENTIALS_INDEX = 'credentialsSecret';
/** The index of the key resources by the issuer they name: `namespace/issuer` and `/issuer` (cache-projection.ts issuerOf). */
export const ISSUER_INDEX = 'issuer';
/** The index of the key resources by the issuers whose cap counts them: `namespace/issuer` (cache-projection.ts slotsOf). */
export const SLOT_INDEX = 'issuerSlot';
/** The index of the key resources by the Secret name they set in spec.secret.name (`namespace/name`); the default (metadata.name) is not indexed. */
export const SECRET_NAME_INDEX = 'secretName';
/** The index of the ProjectApiKeys by the project they name (spec.projectId). */
export const PROJECT_INDEX = 'project';

function projectOf(obj: KubernetesObject): readonly string[] {
  const projectId = (obj as { spec?: { projectId?: string } }).spec?.projectId;
  return projectId === undefined ? [] : [projectId];
}

/** The watches of one namespace (or of every namespace when undefined). */
export function keyWatches(namespace: string | undefined): Watch[] {
  const watches: Watch[] = (Object.keys(KINDS) as KindName[]).map((kind) => {
    const plural = KINDS[kind].plural;
    return {
      type: 'for',
      kind,
      path: namespace === undefined ? `/apis/${GROUP}/${VERSION}/${plural}` : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`,
      project: trimKeyResource,
      indexes: {
        [CREDENTIALS_INDEX]: credentialsSecretOf,
        [ISSUER_INDEX]: issuerOf,
        [SLOT_INDEX]: slotsOf,
        [SECRET_NAME_INDEX]: explicitSecretNameOf,
        ...(kind === 'ProjectApiKey' ? { [PROJECT_INDEX]: projectOf } : {}),
      } as Record<string, (obj: KubernetesObject) => readonly string[]>,
    };
  });
  const secrets = namespace === undefined ? '/api/v1/secrets' : `/api/v1/namespaces/${namespace}/secrets`;
  watches.push({
    type: 'owns',
    kind: 'Secret',
    path: secrets,
    metadataOnly: true,
    project: trimSecret,
    ownerOf: secretOwner,
    referencedBy: {
      index: CREDENTIALS_INDEX,
      valueOf: (secret) =>
        secret.metadata?.namespace !== undefined && secret.metadata.name !== undefined ? `${secret.metadata.namespace}/${secret.metadata.name}` : undefined,
    },
  });
  return watches;
}

/** The key (kind/namespace/name) of the resource a managed Secret belongs to, by its owner annotation. */
function secretOwner(secret: KubernetesObject): string | undefined {
  const owner = cachedOwner(secret);
  const ns = secret.metadata?.namespace;
  if (ns === undefined) return undefined;
  // A credentials Secret kept for its keys, being deleted: its own reconcile lifts the finalizer once
  // no resource needs it (issuing/credentials-in-use.ts). Its other changes are the keys' to see.
  if (owner === undefined && secret.metadata?.deletionTimestamp !== undefined && secret.metadata.finalizers?.includes(CREDENTIALS_FINALIZER) === true) {
    return `${CREDENTIALS_SECRET_KIND}/${ns}/${secret.metadata.name ?? ''}`;
  }
  if (owner === undefined) return undefined;
  const [kind, name] = owner.split('/');
  if ((kind !== 'ApiKey' && kind !== 'ProjectApiKey') || name === undefined) return undefined;
  return `${kind}/${ns}/${name}`;
}

/**
 * The work-queue keys of the cached ProjectApiKeys naming one of these projects (of this
 * organization, when one is given), from the project index: O(keys of those projects), where a
 * scan of every cached ProjectApiKey per changed project would be O(projects × keys).
 */
export function projectKeysIn(controller: Pick<Controller, 'indexed' | 'cachedObject'>, projectIds: readonly string[], organizationId?: string): string[] {
  const keys: string[] = [];
  for (const projectId of new Set(projectIds)) {
    for (const key of controller.indexed(PROJECT_INDEX, projectId)) {
      if (organizationId !== undefined) {
        const [, namespace = '', name = ''] = key.split('/');
        const spec = (controller.cachedObject('ProjectApiKey', namespace, name) as { spec?: { organizationId?: string } } | undefined)?.spec;
        if (spec?.organizationId !== organizationId) continue;
      }
      keys.push(key);
    }
  }
  return keys;
}

/**
 * Wakes every ProjectApiKey of a project (its operations changed), in the low lane: one poll
 * wakes every key of the project (possibly hundreds), and a new or changed resource must
 * not wait behind that wave.
 */
export function wakeProject(controller: Pick<Controller, 'indexed' | 'cachedObject' | 'enqueueLow'>, projectId: string): void {
  for (const key of projectKeysIn(controller, [projectId])) controller.enqueueLow(key);
}

/** The work-queue keys of the key resources naming the issuer: of one namespace, or of all when `namespace` is undefined. */
export function issuerUsers(controller: Pick<Controller, 'indexed'>, issuer: string, namespace?: string): string[] {
  return [...controller.indexed(ISSUER_INDEX, `${namespace ?? ''}/${issuer}`)];
}

/** The work-queue keys of the key resources of `namespace` whose keys the issuer's cap counts there (issuing/issuer-slots.ts). */
export function slotHolders(controller: Pick<Controller, 'indexed'>, issuer: string, namespace: string): string[] {
  return [...controller.indexed(SLOT_INDEX, `${namespace}/${issuer}`)];
}

/** The work-queue keys of the key resources naming a credentials Secret of their namespace (the credentials index). */
export function credentialsUsers(controller: Pick<Controller, 'indexed'>, namespace: string, name: string): string[] {
  return [...controller.indexed(CREDENTIALS_INDEX, `${namespace}/${name}`)];
}

/**
 * The key resources of `namespace` whose Secret name (spec.secret.name, else their own name) is
 * `name`, with whether each writes immutable Secrets: the ones that set it (the Secret name index)
 * and the ApiKey and ProjectApiKey named `name` that leave it to its default.
 */
export function secretNameHolders(
  controller: Pick<Controller, 'indexed' | 'cachedObject'>,
  namespace: string,
  name: string,
): { key: string; immutable: boolean }[] {
  const holders = [...controller.indexed(SECRET_NAME_INDEX, `${namespace}/${name}`)].map((key) => {
    const [kind = '', , resource = ''] = key.split('/');
    return { key, immutable: secretNameOfCached(controller.cachedObject(kind, namespace, resource)).immutable };
  });
  for (const kind of Object.keys(KINDS) as KindName[]) {
    const cached = controller.cachedObject(kind, namespace, name);
    if (cached === undefined || (cached as { secretName?: string }).secretName !== undefined) continue;
    holders.push({ key: `${kind}/${namespace}/${name}`, immutable: secretNameOfCached(cached).immutable });
  }
  return holders;
}
