// What the caches keep of a key resource and of a managed Secret (runtime/informer-cache.ts says
// why the caches hold a projection): its identity, plus spec.projectId (operations updates wake the
// ProjectApiKeys of a project), the type and status of each condition (the managed_keys metric),
// and a managed Secret's owner annotation (a Secret event wakes its owner). Never Secret data.
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import { identityMeta } from '../runtime/informer-cache.ts';
import { ANNOTATION_OWNER } from './secret-writer.ts';

/** An ApiKey or ProjectApiKey as the caches keep it. */
interface CachedKeyResource extends KubernetesObject {
  spec: { projectId?: string };
  status: { conditions: { type: string; status: string }[] };
}

export function trimKeyResource(obj: KubernetesObject): CachedKeyResource {
  const { spec, status } = obj as { spec?: { projectId?: unknown }; status?: { conditions?: unknown } };
  const conditions = Array.isArray(status?.conditions) ? status.conditions as { type?: unknown; status?: unknown }[] : [];
  return {
    ...(obj.apiVersion !== undefined ? { apiVersion: obj.apiVersion } : {}),
    ...(obj.kind !== undefined ? { kind: obj.kind } : {}),
    metadata: identityMeta(obj.metadata),
    spec: typeof spec?.projectId === 'string' ? { projectId: spec.projectId } : {},
    status: { conditions: conditions.map((c) => ({ type: String(c.type), status: String(c.status) })) },
  };
}

/** A managed Secret as the cache keeps it: who it is and whose it is; never its data. */
export function trimSecret(secret: V1Secret): V1Secret {
  const owner = secret.metadata?.annotations?.[ANNOTATION_OWNER];
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { ...identityMeta(secret.metadata), ...(owner !== undefined ? { annotations: { [ANNOTATION_OWNER]: owner } } : {}) },
  };
}
