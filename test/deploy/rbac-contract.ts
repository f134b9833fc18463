// The most the operator may be granted (DESIGN.md section 5, the RBAC contract of deploy/): every
// (apiGroup, resource, verb) a rendered rule may name. A manifest granting anything else, or a
// wildcard, fails the deploy suites.
const crud = (group: string, resources: string[], verbs: string[]): string[] =>
  resources.flatMap((resource) => verbs.map((verb) => `${group}|${resource}|${verb}`));

/** The operator's rights over what it reconciles: a ClusterRole, or a Role per watched namespace. */
export const reconcileCeiling = new Set([
  ...crud('keys.neon.dev', ['apikeys', 'projectapikeys'], ['get', 'list', 'watch', 'update', 'patch']),
  // get on status: a read of what it writes, no wider than get on the resource.
  ...crud('keys.neon.dev', ['apikeys/status', 'projectapikeys/status'], ['get', 'update', 'patch']),
  ...crud('keys.neon.dev', ['apikeys/finalizers', 'projectapikeys/finalizers'], ['update']),
  // The key Secrets it writes and the credentials Secrets it reads; RBAC cannot select by label.
  ...crud('', ['secrets'], ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']),
  ...crud('', ['events'], ['create', 'patch']),
  ...crud('events.k8s.io', ['events'], ['create', 'patch']),
]);

/** Leader election: the Lease in the operator's own namespace, and the events of a leader change. */
export const leaderElectionCeiling = new Set([
  ...crud('coordination.k8s.io', ['leases'], ['get', 'create', 'update']),
  ...crud('', ['events'], ['create', 'patch']),
  ...crud('events.k8s.io', ['events'], ['create', 'patch']),
]);

/** What the operator needs at the least: any manifest missing one of these cannot run it. */
export const reconcileFloor = [
  ...crud('keys.neon.dev', ['apikeys', 'projectapikeys'], ['get', 'list', 'watch', 'update', 'patch']),
  ...crud('keys.neon.dev', ['apikeys/status', 'projectapikeys/status'], ['update', 'patch']),
  ...crud('keys.neon.dev', ['apikeys/finalizers', 'projectapikeys/finalizers'], ['update']),
  ...crud('', ['secrets'], ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']),
  ...crud('', ['events'], ['create', 'patch']),
];

export const leaderElectionFloor = crud('coordination.k8s.io', ['leases'], ['get', 'create', 'update']);
