// What the issuer controller watches, as data for runtime/controller.ts: the ClusterKeyIssuers
// (cluster-scoped; watched only when the operator watches every namespace), each event waking the
// issuer itself. Indexed by its credentials Secret (`<issuer namespace>/<name>`), so the key
// domain's Secret watch (keys/watches.ts, metadata only) wakes an issuer whose credentials change.
// The cache keeps identity, whether the finalizer is held, and the Secret's name: never the policy.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Watch } from '../runtime/watches.ts';
import { identityMeta } from '../runtime/informer-cache.ts';
import { intern } from '../runtime/intern.ts';
import { GROUP, VERSION } from '../resources/schema.ts';
import { ISSUER_FINALIZER, ISSUER_KIND, ISSUER_PLURAL } from '../resources/issuer.ts';
import { CREDENTIALS_INDEX } from '../keys/index.ts';

/** What the cache keeps of an issuer. */
export interface CachedIssuer extends KubernetesObject {
  metadata: NonNullable<KubernetesObject['metadata']>;
  spec?: { credentialsSecretRef: { name: string } };
}

function trimIssuer(obj: KubernetesObject): KubernetesObject {
  const name = (obj as { spec?: { credentialsSecretRef?: { name?: unknown } } }).spec?.credentialsSecretRef?.name;
  const cached: CachedIssuer = {
    apiVersion: obj.apiVersion,
    kind: ISSUER_KIND,
    metadata: {
      ...identityMeta(obj.metadata),
      ...(obj.metadata?.finalizers?.includes(ISSUER_FINALIZER) === true ? { finalizers: [ISSUER_FINALIZER] } : {}),
    },
    ...(typeof name === 'string' ? { spec: { credentialsSecretRef: { name: intern(name) } } } : {}),
  };
  return cached;
}

/**
 * The issuer watch: every ClusterKeyIssuer (or those `labelSelector` selects); `secretsNamespace` is
 * where their credentials Secrets live.
 */
export function issuerWatches(secretsNamespace: string, labelSelector?: string): Watch[] {
  return [
    {
      type: 'for',
      kind: ISSUER_KIND,
      path: `/apis/${GROUP}/${VERSION}/${ISSUER_PLURAL}`,
      ...(labelSelector !== undefined ? { labelSelector } : {}),
      project: trimIssuer,
      indexes: {
        [CREDENTIALS_INDEX]: (obj) => {
          const name = (obj as CachedIssuer).spec?.credentialsSecretRef.name;
          return name === undefined ? [] : [intern(`${secretsNamespace}/${name}`)];
        },
      },
    },
  ];
}
