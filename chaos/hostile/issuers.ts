// The platform team's ClusterKeyIssuers in a hostile-tenant campaign (docs/issuers.md): one
// administrator of the organization per issuer, whose personal key sits in a Secret of the
// operator's namespace (the default --issuer-secrets-namespace), where no tenant has any right; so
// every key the platform shows made by that user was minted through that issuer. Their policies:
//
// - tenant-keys: Project keys of the first project for the Namespaces labelled for it (the issuer
//   tenants), at most 4 per namespace; Organization keys for the first issuer tenant only, at most 2;
// - tenant-extra: either kind, any project, for the issuer tenants by name, at most 3;
// - victim-keys: the victims' issuer, either kind, their namespaces by name or a label no tenant
//   namespace carries (and none can write).
//
// And the policy as the audit reads it: written here from docs/issuers.md, not taken from the
// operator's code, so that a defect there is not shared by the judge.

export const ISSUER_LABEL = 'keys.neon.dev/issuer';
/** Where the issuers' Secrets live: the operator's namespace (deploy/base), --issuer-secrets-namespace's default. */
export const ISSUERS_NAMESPACE = 'neon-key-operator-system';
/** An issuer no one made: a reference to it is refused (IssuerNotFound). */
export const MISSING_ISSUER = 'no-such-issuer';

export type IssuedKind = 'Organization' | 'Project';

export interface Rule {
  namespaces: { names?: string[]; selector?: { matchLabels: Record<string, string> } };
  kinds: IssuedKind[];
  projects?: string[];
  maxKeysPerNamespace?: number;
}

export interface IssuerPlan {
  name: string;
  /** The platform user whose personal key its Secret holds. */
  userId: string;
  userKey: string;
  /** Its Secret in ISSUERS_NAMESPACE. */
  secretName: string;
  allow: Rule[];
}

/** The issuers' names and rules for these namespaces and projects (the users are made by cluster.ts). */
export function issuerPolicies(
  issuerTenants: readonly string[],
  victimNamespaces: readonly string[],
  projectIds: readonly string[],
): { name: string; allow: Rule[] }[] {
  const first = projectIds[0] ?? '';
  return [
    {
      name: 'tenant-keys',
      allow: [
        { namespaces: { selector: { matchLabels: { [ISSUER_LABEL]: 'tenant-keys' } } }, kinds: ['Project'], projects: [first], maxKeysPerNamespace: 4 },
        ...(issuerTenants.length > 0 ? [{ namespaces: { names: [issuerTenants[0]!] }, kinds: ['Organization' as const], maxKeysPerNamespace: 2 }] : []),
      ],
    },
    {
      name: 'tenant-extra',
      allow: issuerTenants.length > 0 ? [{ namespaces: { names: [...issuerTenants] }, kinds: ['Organization', 'Project'], maxKeysPerNamespace: 3 }] : [],
    },
    {
      name: 'victim-keys',
      allow: [
        { namespaces: { names: [...victimNamespaces], selector: { matchLabels: { [ISSUER_LABEL]: 'victim-keys' } } }, kinds: ['Organization', 'Project'] },
      ],
    },
  ];
}

function namespaceMatches(rule: Rule, namespace: string, labels: Readonly<Record<string, string>>): boolean {
  if (rule.namespaces.names?.includes(namespace) === true) return true;
  const wanted = rule.namespaces.selector?.matchLabels;
  return wanted !== undefined && Object.entries(wanted).every(([k, v]) => labels[k] === v);
}

/** Whether the issuer may mint a key of this kind (and project) for the namespace. */
export function policyAllows(
  issuer: Pick<IssuerPlan, 'allow'>,
  namespace: string,
  labels: Readonly<Record<string, string>>,
  kind: IssuedKind,
  projectId: string | undefined,
): boolean {
  return issuer.allow.some(
    (r) =>
      namespaceMatches(r, namespace, labels) &&
      r.kinds.includes(kind) &&
      (kind !== 'Project' || r.projects === undefined || (projectId !== undefined && r.projects.includes(projectId))),
  );
}

/**
 * The most resources of the namespace that may hold a key minted through the issuer: the most
 * generous cap of the rules matching the namespace (a matching rule without one: no cap), 0 when
 * none matches.
 */
export function capFor(issuer: Pick<IssuerPlan, 'allow'>, namespace: string, labels: Readonly<Record<string, string>>): number {
  const caps = issuer.allow.filter((r) => namespaceMatches(r, namespace, labels)).map((r) => r.maxKeysPerNamespace ?? Number.POSITIVE_INFINITY);
  return Math.max(0, ...caps);
}
