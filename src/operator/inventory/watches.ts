// What the inventory controller watches, as data for runtime/controller.ts: the ApiKeyInventories
// (each event wakes the inventory itself), indexed by the credentials Secret they name, so the key
// domain's Secret watch (keys/watches.ts, metadata only) wakes an inventory whose credentials change.
// The cache keeps identity and spec.credentialsSecretRef.name, never the status lists.
import type { CustomObjectsApi, KubernetesObject, ListPromise } from '@kubernetes/client-node';
import type { Watch } from '../runtime/controller.ts';
import { identityMeta } from '../runtime/informer-cache.ts';
import { intern } from '../runtime/intern.ts';
import { GROUP, VERSION } from '../resources/schema.ts';
import { INVENTORY_KIND, INVENTORY_PLURAL } from '../resources/inventory.ts';
import { CREDENTIALS_INDEX, credentialsSecretOf } from '../keys/index.ts';

function trimInventory(obj: KubernetesObject): KubernetesObject {
  const name = (obj as { spec?: { credentialsSecretRef?: { name?: unknown } } }).spec?.credentialsSecretRef?.name;
  return {
    apiVersion: obj.apiVersion,
    kind: INVENTORY_KIND,
    metadata: identityMeta(obj.metadata),
    ...(typeof name === 'string' ? { spec: { credentialsSecretRef: { name: intern(name) } } } : {}),
  } as KubernetesObject;
}

/** The inventory watch of one namespace (or of every namespace when undefined). */
export function inventoryWatches(objects: CustomObjectsApi, namespace: string | undefined): Watch[] {
  return [{
    type: 'for',
    kind: INVENTORY_KIND,
    path: namespace === undefined ? `/apis/${GROUP}/${VERSION}/${INVENTORY_PLURAL}` : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${INVENTORY_PLURAL}`,
    list: (() => namespace === undefined
      ? objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: INVENTORY_PLURAL })
      : objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: INVENTORY_PLURAL })) as ListPromise<KubernetesObject>,
    project: trimInventory,
    indexes: { [CREDENTIALS_INDEX]: credentialsSecretOf },
  }];
}
