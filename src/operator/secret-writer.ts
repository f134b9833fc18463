// The Secret that receives an issued key (DESIGN.md section 3, step 4): data, the key id and
// attempt name as annotations, an owner reference to the resource, the managed-by label (the
// operator's Secret informer selects on it). The secret value leaves this file only inside
// Secret.data.
import { createHmac } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import type { SecretObservation } from './decision.ts';
import {
  ANNOTATION_KEY_ID, ANNOTATION_KEY_NAME, API_VERSION, LABEL_MANAGED_BY, MANAGED_BY, type KeyResource,
} from './resources/schema.ts';

/** On the Secret: which resource it belongs to (kind/name), so Secret events map to the owner. */
export const ANNOTATION_OWNER = 'keys.neon.dev/owner';

export function ownerValue(resource: Pick<KeyResource, 'kind' | 'metadata'>): string {
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

export function observeSecret(resource: Pick<KeyResource, 'kind' | 'metadata'>, secret: V1Secret | undefined, dataKey: string): SecretObservation | undefined {
  if (secret === undefined) return undefined;
  const annotations = secret.metadata?.annotations ?? {};
  const owned = secret.metadata?.labels?.[LABEL_MANAGED_BY] === MANAGED_BY && annotations[ANNOTATION_OWNER] === ownerValue(resource);
  const rawId = annotations[ANNOTATION_KEY_ID];
  const keyId = rawId !== undefined && /^\d+$/.test(rawId) ? Number(rawId) : undefined;
  const encoded = secret.data?.[dataKey];
  const value = encoded !== undefined ? Buffer.from(encoded, 'base64').toString('utf8') : '';
  return {
    owned,
    ...(keyId !== undefined ? { keyId } : {}),
    ...(annotations[ANNOTATION_KEY_NAME] !== undefined ? { keyName: annotations[ANNOTATION_KEY_NAME] } : {}),
    ...(value !== '' ? { hash: secretHash(resource, value) } : {}),
  };
}

export function buildSecret(resource: KeyResource, name: string, dataKey: string, key: { id: number; name: string; secret: string }, existing?: V1Secret): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name,
      namespace: resource.metadata.namespace,
      ...(existing?.metadata?.resourceVersion !== undefined ? { resourceVersion: existing.metadata.resourceVersion } : {}),
      labels: { ...existing?.metadata?.labels, [LABEL_MANAGED_BY]: MANAGED_BY },
      annotations: {
        ...existing?.metadata?.annotations,
        [ANNOTATION_OWNER]: ownerValue(resource),
        [ANNOTATION_KEY_ID]: String(key.id),
        [ANNOTATION_KEY_NAME]: key.name,
      },
      ownerReferences: [{
        apiVersion: API_VERSION,
        kind: resource.kind,
        name: resource.metadata.name,
        uid: resource.metadata.uid,
        controller: true,
        blockOwnerDeletion: false,
      }],
    },
    data: { [dataKey]: Buffer.from(key.secret, 'utf8').toString('base64') },
  };
}
