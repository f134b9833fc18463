// Keep-alive connections to the Kubernetes API server. @kubernetes/client-node 2.0 builds a NEW undici
// Agent for every API request (KubeConfig.applySecurityAuthentication → createDispatcher; its
// https.Agent for watches is cached, the undici dispatcher is not), so every GET / PATCH of a
// reconcile would open a TCP connection, do a full TLS handshake with a fresh secure context (the CA
// parsed again) and leave the agent and its idle socket behind: CPU per reconcile and memory that
// grow with every request (docs/benchmarks.md).
// reuseKubeConnections() caches the dispatcher per cluster, user and TLS material, as client-node
// already does for its https.Agent (createAgent / agentCache).
import { createHash } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';

interface ClusterLike {
  name?: string;
  server?: string;
}
type CreateDispatcher = (cluster: ClusterLike | null, agentOptions: Record<string, unknown>) => unknown;

export function reuseKubeConnections(kubeConfig: KubeConfig): KubeConfig {
  const target = kubeConfig as unknown as { createDispatcher?: CreateDispatcher };
  const create = target.createDispatcher;
  // Another client-node version without this private method: nothing to patch.
  if (typeof create !== 'function') return kubeConfig;
  const cache = new Map<string, unknown>();
  target.createDispatcher = function cachedDispatcher(this: unknown, cluster, agentOptions) {
    const tls = createHash('sha256');
    for (const field of ['ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized'])
      tls.update(`${field}=${String(agentOptions[field] ?? '')};`);
    const key = JSON.stringify([cluster?.name ?? '', cluster?.server ?? '', kubeConfig.getCurrentUser()?.name ?? '', tls.digest('hex')]);
    if (cache.has(key)) return cache.get(key);
    const dispatcher = create.call(this, cluster, agentOptions);
    if (dispatcher !== undefined) cache.set(key, dispatcher);
    return dispatcher;
  };
  return kubeConfig;
}
