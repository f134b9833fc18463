// The RBAC contract of deploy/ (docs/design.md section 5.6): exactly the API calls the operator's code
// makes, each grant next to the call it comes from. Every install mode (deploy/base,
// deploy/overlays/namespaced, the chart cluster-wide and namespaced) must grant exactly these: a
// verb the code never calls is a grant too many, and a missing one stops the operator.
// When the code starts making a new call, add it here with its caller, then to the manifests.
const grants = (group: string, resources: string[], verbs: string[], resourceName?: string): string[] =>
  resources.flatMap((resource) => verbs.map((verb) => `${group}|${resource}|${verb}${resourceName !== undefined ? `@${resourceName}` : ''}`));

/** The operator's rights over what it reconciles in a namespace: in the ClusterRole, or a Role per watched namespace. */
export const reconcileGrants: readonly string[] = [
  // list + watch: the informers (keys/watches.ts, listClusterCustomObject / listNamespacedCustomObject);
  // get: keys/kube-writes.ts getNamespacedCustomObject; update: keys/kube-writes.ts replaceNamespacedCustomObject
  // (finalizer and create intent, with the resourceVersion read). Never patched, created or deleted.
  ...grants('keys.neon.dev', ['apikeys', 'projectapikeys'], ['get', 'list', 'watch', 'update']),
  // update: keys/kube-writes.ts replaceNamespacedCustomObjectStatus (status whole, with the
  // resourceVersion read); patch: keys/kube-writes.ts patchNamespacedCustomObjectStatus (a merge patch
  // of a new key's record over an edit; a JSON patch of the operations mirror at rest:
  // keys/observing/operations-patch.ts). The status is never read apart.
  ...grants('keys.neon.dev', ['apikeys/status', 'projectapikeys/status'], ['update', 'patch']),
  // Inventories (inventory/): list + watch their informer (inventory/watches.ts), get
  // inventory/reconciler.ts getNamespacedCustomObject, patch inventory/reconciler.ts
  // patchNamespacedCustomObjectStatus. No finalizer, never updated, created or deleted.
  ...grants('keys.neon.dev', ['apikeyinventories'], ['get', 'list', 'watch']),
  ...grants('keys.neon.dev', ['apikeyinventories/status'], ['patch']),
  // The Secrets' owner references set blockOwnerDeletion (keys/secret/secret-writer.ts), which the apiserver
  // allows only to whoever may update the owner's finalizers.
  ...grants('keys.neon.dev', ['apikeys/finalizers', 'projectapikeys/finalizers'], ['update']),
  // list + watch: the Secret informer (keys/watches.ts: every Secret's metadata, for the managed
  // Secrets and the credentials); get: keys/kube-writes.ts readNamespacedSecret
  // (credentials and key Secrets; an issuer's in --issuer-secrets-namespace, as issuers/reconciler.ts
  // reads it), listOwnedSecretMetadata (spec.secret.immutable: the managed Secrets' metadata, for an
  // interrupted create's); create / update / delete: createNamespacedSecret,
  // replaceNamespacedSecret, deleteNamespacedSecret. Never patched.
  ...grants('', ['secrets'], ['get', 'list', 'watch', 'create', 'update', 'delete']),
  // keys/status/events.ts and issuers/events.ts (an issuer's, in `default`) createNamespacedEvent
  // (core/v1); never patched, never events.k8s.io.
  ...grants('', ['events'], ['create']),
  // Rotation (spec.rotation.restart), keys/kube-writes.ts: readNamespaced{Deployment,StatefulSet,DaemonSet}
  // (rollout status, consent), listNamespaced* (discover), patchNamespaced* (JSON patch of one pod template
  // annotation: the restart; with spec.secret.immutable, a JSON patch repointing its Secret references too). Always in the resource's own namespace; never watched, created or deleted.
  ...grants('apps', ['deployments', 'statefulsets', 'daemonsets'], ['get', 'list', 'patch']),
  // keys/kube-writes.ts readNamespace (keys/issuing/credentials-source.ts): the labels an issuer's
  // selector matches, and whether the namespace is being deleted. The resource's own namespace only,
  // so a Role of a watched namespace can grant it (GET /api/v1/namespaces/X is a request in namespace
  // X); a 403 is taken as "no labels, not terminating". Never listed, watched or written.
  ...grants('', ['namespaces'], ['get']),
].sort();

/**
 * The ClusterKeyIssuers (cluster-scoped): added to the ClusterRole of the cluster-wide mode, where an
 * issuer's credentials Secret (in --issuer-secrets-namespace) and its events (in `default`) are
 * covered by the `secrets` get and `events` create above. With a list of watched namespaces the
 * operator reads no issuer (a resource naming one gets IssuerNotFound) and holds no cluster-wide
 * right, unless issuers are asked for (below).
 */
export const issuerGrants: readonly string[] = [
  // list + watch: the issuer informer (issuers/watches.ts listClusterCustomObject); get:
  // issuers/reconciler.ts getClusterCustomObject, keys/kube-writes.ts readIssuer (the policy,
  // fresh per key reconcile) and inventory/reconciler.ts (an inventory of the operator's namespace
  // listing through an issuer); update: issuers/reconciler.ts replaceClusterCustomObject (the finalizer
  // keys.neon.dev/issuer-in-use, with the resourceVersion read). Never created, patched or deleted.
  ...grants('keys.neon.dev', ['clusterkeyissuers'], ['get', 'list', 'watch', 'update']),
  // issuers/reconciler.ts patchClusterCustomObjectStatus (merge patch). No clusterkeyissuers/finalizers:
  // nothing carries an owner reference to an issuer, so no blockOwnerDeletion needs it.
  ...grants('keys.neon.dev', ['clusterkeyissuers/status'], ['patch']),
].sort();

/** The ClusterRole of the cluster-wide mode: the reconcile rules and the issuers'. */
export const clusterWideGrants: readonly string[] = [...reconcileGrants, ...issuerGrants].sort();

/**
 * Issuers with a list of watched namespaces (manager.ts: --issuer-secrets-namespace given, naming one
 * of them; the chart's issuerSecretsNamespace): issuerGrants in a ClusterRole of their own, the
 * credentials Secret read with that namespace's Role, and an issuer's events
 * (issuers/events.ts createNamespacedEvent) in `default`, unless it is watched: these.
 */
export const ISSUER_EVENTS_NAMESPACE = 'default';
export const issuerEventsGrants: readonly string[] = grants('', ['events'], ['create']);

export const LEASE_NAME = 'neon-key-operator';
export const SIGNING_KEY_SECRET = 'neon-key-operator-signing-key';

/** The operator's own namespace: its Lease (runtime/leader.ts, runtime/manager.ts's readyz) and its intent-signing key. */
export function ownNamespaceGrants(leaderElection = true): string[] {
  return [
    // runtime/leader.ts readNamespacedLease / replaceNamespacedLease, runtime/manager.ts readyz readNamespacedLease: by name.
    ...(leaderElection ? grants('coordination.k8s.io', ['leases'], ['get', 'update'], LEASE_NAME) : []),
    // runtime/leader.ts createNamespacedLease: create cannot be limited by name (the name is in the body).
    ...(leaderElection ? grants('coordination.k8s.io', ['leases'], ['create']) : []),
    // The intent-signing key: read by name, created on first start (create cannot be limited by name).
    ...grants('', ['secrets'], ['get'], SIGNING_KEY_SECRET),
    ...grants('', ['secrets'], ['create']),
  ].sort();
}
