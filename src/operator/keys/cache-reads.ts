// What the key domain reads of the informers' caches (the runtime's controller), each as the room
// that uses it wants it: the at-rest check's versions and conditions, the issuers' slot holders, a
// new key's cached copy, and the managed_keys gauge's counts. assemble.ts hands them out.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Controller } from '../runtime/controller.ts';
import type { PlatformClients } from './platform-clients.ts';
import type { ObjectVersion, RestInputs } from './reconcile-context.ts';
import { issuerUsers, slotHolders } from './watches.ts';
import { IssuerSlots } from './issuing/issuer-slots.ts';
import { cachedConditionsOf, slotIssuersOfCached } from './observing/cache-projection.ts';
import type { ManagedKeysCount } from './status/metrics.ts';

/** What the key domain reads of the informers' caches and the work queue (the runtime's controller). */
export type KeyCluster = Pick<Controller, 'indexed' | 'cached' | 'cachedObject' | 'cachedMeta' | 'cacheStale' | 'enqueue' | 'enqueueLow'>;

/**
 * The at-rest check (observing/at-rest.ts): versions from the informers' caches, and the client of
 * credentials already read (by the id of their key: the key itself is held by that client only).
 */
export function restInputs(cluster: KeyCluster, clients: PlatformClients): RestInputs {
  return {
    cacheStale: (kind, namespace) => cluster.cacheStale(kind, namespace),
    cachedGeneration: (kind, name) => {
      const meta = cluster.cachedMeta(kind, '', name);
      return meta === undefined ? undefined : { uid: meta.uid, generation: meta.generation };
    },
    // The cache's own metadata, not a copy: a record at rest may keep it (observing/resting.ts).
    cachedVersion: (kind, namespace, name) => cluster.cachedMeta(kind, namespace, name) as ObjectVersion | undefined,
    cachedConditions: (kind, namespace, name) => {
      const obj = cluster.cachedObject(kind, namespace, name);
      return obj === undefined ? undefined : cachedConditionsOf(obj);
    },
    platformById: (credentialsId) => clients.byId(credentialsId),
  };
}

/** The caps of issuers' rules: the resources counted against an issuer, from the caches. */
export function issuerSlots(cluster: KeyCluster): IssuerSlots {
  return new IssuerSlots(
    {
      users: (issuer, namespace) => [...new Set([...issuerUsers(cluster, issuer, namespace), ...slotHolders(cluster, issuer, namespace)])],
      holders: (key) => {
        const [kind = '', namespace = '', name = ''] = key.split('/');
        return slotIssuersOfCached(cluster.cachedObject(kind, namespace, name));
      },
    },
    (key) => cluster.enqueue(key),
  );
}

/** What a key resource the reconciler starts from is, as the informers' cache holds it (or as a test delivers it). */
export function cachedKeyOf(
  cluster: KeyCluster,
  delivery: ((kind: string, namespace: string, name: string, cached: KubernetesObject | undefined) => KubernetesObject | undefined) | undefined,
): (kind: string, namespace: string, name: string) => KubernetesObject | undefined {
  return delivery === undefined
    ? (kind, namespace, name) => cluster.cachedObject(kind, namespace, name)
    : (kind, namespace, name) => delivery(kind, namespace, name, cluster.cachedObject(kind, namespace, name));
}

/** managed_keys{namespace,kind,condition,status,reason}: counted from the informer caches when scraped, never from the platform. */
export function countManagedKeys(cluster: KeyCluster): Iterable<ManagedKeysCount> {
  const counts = new Map<string, ManagedKeysCount>();
  for (const kind of ['ApiKey', 'ProjectApiKey'] as const) {
    for (const obj of cluster.cached(kind)) {
      const namespace = obj.metadata?.namespace ?? '';
      for (const c of (obj as { status?: { conditions?: { type: string; status: string; reason: string }[] } }).status?.conditions ?? []) {
        const series = `${namespace}\0${kind}\0${c.type}\0${c.status}\0${c.reason}`;
        const count = counts.get(series);
        if (count !== undefined) count.value++;
        else counts.set(series, { labels: { namespace, kind, condition: c.type, status: c.status, reason: c.reason }, value: 1 });
      }
    }
  }
  return counts.values();
}
