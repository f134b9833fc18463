// An issuer's policy (ClusterKeyIssuer spec.allow, docs/issuers.md), as a pure function: does one of
// its rules allow this namespace, this kind of key, this project, and under which cap. The namespace
// is matched by name or by the labels of the Namespace object, which a tenant with the `edit` role
// cannot change (names OR selector: either suffices). Table-tested (test/operator/keys/issuing/issuer-policy.test.ts).
import type { IssuedKind, IssuerRule, LabelSelector } from '../../resources/issuer.ts';

export interface PolicyRequest {
  namespace: string;
  /** The Namespace object's labels; undefined when they could not be read (a selector then matches nothing). */
  namespaceLabels: Readonly<Record<string, string>> | undefined;
  kind: IssuedKind;
  /** The project of a Project key. */
  projectId?: string;
}

export type PolicyVerdict =
  | { allowed: true; /** The most keys the namespace may hold through the issuer; undefined: no cap. */ cap: number | undefined }
  | { allowed: false; message: string };

/** Whether a label selector matches these labels, as Kubernetes reads it: every term must hold; `{}` matches everything. */
export function selectorMatches(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) if (labels[key] !== value) return false;
  for (const term of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, term.key);
    const value = labels[term.key];
    switch (term.operator) {
      case 'In':
        if (!has || !(term.values ?? []).includes(value ?? '')) return false;
        break;
      case 'NotIn':
        if (has && (term.values ?? []).includes(value ?? '')) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
    }
  }
  return true;
}

function namespaceMatches(rule: IssuerRule, request: PolicyRequest): boolean {
  if (rule.namespaces.names?.includes(request.namespace) === true) return true;
  return rule.namespaces.selector !== undefined && request.namespaceLabels !== undefined && selectorMatches(rule.namespaces.selector, request.namespaceLabels);
}

/**
 * The verdict of an issuer's rules on a request. Allowed when one rule matches its namespace, its
 * kind and (a Project key) its project. The cap of several matching rules is the most generous one
 * (a matching rule without maxKeysPerNamespace: no cap): rules only ever add what is allowed.
 * Refused, the message says which of the three matched no rule, closest first.
 */
export function evaluatePolicy(issuer: string, rules: readonly IssuerRule[], request: PolicyRequest): PolicyVerdict {
  const what = request.kind === 'Project' ? `Project keys of project ${request.projectId ?? '?'}` : 'Organization keys';
  const byNamespace = rules.filter((r) => namespaceMatches(r, request));
  if (byNamespace.length === 0) {
    const unread = request.namespaceLabels === undefined && rules.some((r) => r.namespaces.selector !== undefined) ? ' (its labels could not be read)' : '';
    return {
      allowed: false,
      message: `ClusterKeyIssuer ${issuer} does not allow namespace ${request.namespace}${unread}: no rule of spec.allow names it or selects its labels`,
    };
  }
  const byKind = byNamespace.filter((r) => r.kinds.includes(request.kind));
  if (byKind.length === 0) {
    return {
      allowed: false,
      message:
        `ClusterKeyIssuer ${issuer} does not allow ${request.kind} keys in namespace ${request.namespace}: ` +
        `its rules for this namespace allow only ${[...new Set(byNamespace.flatMap((r) => r.kinds))].join(', ')} keys`,
    };
  }
  const matching =
    request.kind === 'Project'
      ? byKind.filter((r) => r.projects === undefined || (request.projectId !== undefined && r.projects.includes(request.projectId)))
      : byKind;
  if (matching.length === 0)
    return {
      allowed: false,
      message: `ClusterKeyIssuer ${issuer} does not allow ${what} in namespace ${request.namespace}: its rules for this namespace name other projects`,
    };
  const caps = matching.map((r) => r.maxKeysPerNamespace);
  const cap = caps.includes(undefined) ? undefined : Math.max(...(caps as number[]));
  return { allowed: true, cap };
}

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/**
 * An equality-based label selector as kubectl takes it (`a=b,c!=d,e,!f`; `==` for `=`) as a
 * LabelSelector; undefined when it is not one (set-based terms are not taken here).
 */
export function parseLabelSelector(text: string): LabelSelector | undefined {
  const expressions: NonNullable<LabelSelector['matchExpressions']> = [];
  const matchLabels: Record<string, string> = {};
  if (text.length > 1024) return undefined;
  for (const raw of text.split(',')) {
    const term = raw.trim();
    const equality = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (equality !== null) {
      const [, key = '', op, value = ''] = equality;
      if (!LABEL_KEY.test(key) || !LABEL_VALUE.test(value)) return undefined;
      if (op === '!=') expressions.push({ key, operator: 'NotIn', values: [value] });
      else matchLabels[key] = value;
    } else if (term.startsWith('!') && LABEL_KEY.test(term.slice(1).trim())) {
      expressions.push({ key: term.slice(1).trim(), operator: 'DoesNotExist' });
    } else if (LABEL_KEY.test(term)) {
      expressions.push({ key: term, operator: 'Exists' });
    } else {
      return undefined;
    }
  }
  return { ...(Object.keys(matchLabels).length > 0 ? { matchLabels } : {}), ...(expressions.length > 0 ? { matchExpressions: expressions } : {}) };
}
