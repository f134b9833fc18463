// --watch-namespace / WATCH_NAMESPACE: every namespace (empty), or a comma-separated list. A list
// is how an operator runs with Roles in those namespaces only (deploy/overlays/namespaced, the
// chart's watchNamespaces): an informer per namespace and kind needs list/watch there and nowhere
// else, where one cluster-wide informer would need it in every namespace.

/** A namespace name is a DNS label (RFC 1123): anything else cannot exist, so it is a typo. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The namespaces to watch, sorted and without repeats; undefined: every namespace. */
export function parseWatchNamespaces(text: string | undefined): string[] | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const names = text.split(',').map((n) => n.trim());
  for (const name of names) {
    if (!DNS_LABEL.test(name))
      throw new Error(`--watch-namespace: ${JSON.stringify(name)} is not a namespace name (comma-separated DNS labels, e.g. team-a,team-b)`);
  }
  return [...new Set(names)].sort();
}
