// What the inventory controller watches, as data for runtime/controller.ts: the ApiKeyInventories
// (each event wakes the inventory itself), indexed by the credentials Secret they name, so the key
// domain's Secret watch (keys/watches.ts, metadata only) wakes an inventory whose credentials change;
// and, for the inventories of the operator's own namespace (the only ones that may use one), by the
// ClusterKeyIssuer they name, so the issuer's reconcile counts them and wakes them when it changes.
// The cache keeps identity and the names of the Secret and issuer, never the status lists.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Controller } from '../runtime/controller.ts';
import type { Watch } from '../runtime/watches.ts';
import { identityMeta } from '../runtime/informer-cache.ts';
import { intern } from '../runtime/intern.ts';
import { GROUP, VERSION } from '../resources/schema.ts';
import { INVENTORY_KIND, INVENTORY_PLURAL } from '../resources/inventory.ts';
import { CREDENTIALS_INDEX, credentialsSecretOf } from '../keys/index.ts';

/** The index of the inventories of the operator's namespace by the issuer they name (its name). */
const ISSUER_INVENTORIES_INDEX = 'inventoryIssuer';

interface CachedInventory extends KubernetesObject {
  spec?: { credentialsSecretRef?: { name: string }; issuerRef?: { name: string } };
}

function nameOf(ref: { name?: unknown } | undefined): string | undefined {
  return typeof ref?.name === 'string' && ref.name.length <= 253 ? intern(ref.name) : undefined;
}

function trimInventory(obj: KubernetesObject): KubernetesObject {
  const spec = (obj as { spec?: { credentialsSecretRef?: { name?: unknown }; issuerRef?: { name?: unknown } } }).spec;
  const credentials = nameOf(spec?.credentialsSecretRef);
  const issuer = nameOf(spec?.issuerRef);
  const cached: CachedInventory = {
    apiVersion: obj.apiVersion,
    kind: INVENTORY_KIND,
    metadata: identityMeta(obj.metadata),
    ...(credentials !== undefined || issuer !== undefined
      ? {
          spec: {
            ...(credentials !== undefined ? { credentialsSecretRef: { name: credentials } } : {}),
            ...(issuer !== undefined ? { issuerRef: { name: issuer } } : {}),
          },
        }
      : {}),
  };
  return cached;
}

/**
 * The inventory watch of one namespace (or of every namespace when undefined); `ownNamespace`: the
 * operator's, whose inventories alone are indexed by the issuer they name.
 */
export function inventoryWatches(namespace: string | undefined, ownNamespace: string): Watch[] {
  return [
    {
      type: 'for',
      kind: INVENTORY_KIND,
      path: namespace === undefined ? `/apis/${GROUP}/${VERSION}/${INVENTORY_PLURAL}` : `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${INVENTORY_PLURAL}`,
      project: trimInventory,
      indexes: {
        [CREDENTIALS_INDEX]: credentialsSecretOf,
        [ISSUER_INVENTORIES_INDEX]: (obj) => {
          const issuer = (obj as CachedInventory).spec?.issuerRef?.name;
          return issuer === undefined || obj.metadata?.namespace !== ownNamespace ? [] : [issuer];
        },
      },
    },
  ];
}

/** The work-queue keys of the inventories of the operator's namespace naming the issuer. */
export function issuerInventories(controller: Pick<Controller, 'indexed'>, issuer: string): readonly string[] {
  return controller.indexed(ISSUER_INVENTORIES_INDEX, issuer);
}
