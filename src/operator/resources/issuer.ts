// The ClusterKeyIssuer resource (docs/issuers.md): a platform team's credentials, kept in a Secret of
// the operator's namespace that tenants never read, and a policy of which namespaces may have which
// keys minted with them. Cluster-scoped, so a tenant with the `edit` role can neither create nor edit
// one. The zod schema is the source of the type, of the validation of what is read, and of the CRD
// (crd.ts, `npm run generate`).
import { z } from 'zod';
import { Condition } from './key-status.ts';
import { ORGANIZATION_ID_PATTERN, PROJECT_ID_PATTERN, type API_VERSION } from './schema.ts';

export const ISSUER_KIND = 'ClusterKeyIssuer';
export const ISSUER_PLURAL = 'clusterkeyissuers';
/** Held by an issuer while key resources use it (issuers/reconciler.ts). */
export const ISSUER_FINALIZER = 'keys.neon.dev/issuer-in-use';
/** The kinds of key an issuer may mint; never a personal key (as strong as the issuer's user). */
export const ISSUED_KINDS = ['Organization', 'Project'] as const;
export type IssuedKind = (typeof ISSUED_KINDS)[number];
export const MAX_RULES = 32;

const dnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
const labelValue = z
  .string()
  .max(63)
  .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/);
const labelKey = z
  .string()
  .min(1)
  .max(316)
  .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/);

/** metav1.LabelSelector, as Kubernetes reads it: every term must match (an empty selector matches every namespace). */
export const LabelSelector = z
  .object({
    matchLabels: z.record(labelKey, labelValue).optional().meta({ description: 'Labels the namespace must carry, each with this value.', maxProperties: 32 }),
    matchExpressions: z
      .array(
        z
          .object({
            key: labelKey,
            operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
            values: z.array(labelValue).max(64).optional(),
          })
          .meta({
            'x-kubernetes-validations': [
              {
                rule: "(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
                message: 'values must be given (non-empty) for In and NotIn, and only for them',
              },
            ],
          }),
      )
      .max(32)
      .optional()
      .meta({ description: 'Label requirements the namespace must meet.' }),
  })
  .meta({ description: 'A label selector on the Namespace object (which tenants with the edit role cannot change).' });
export type LabelSelector = z.infer<typeof LabelSelector>;

export const IssuerRule = z
  .object({
    namespaces: z
      .object({
        names: z.array(dnsLabel).max(256).optional().meta({ description: 'Namespaces allowed by name.' }),
        selector: LabelSelector.optional(),
      })
      .meta({
        description:
          'Which namespaces the rule allows: those listed in names OR those whose labels match selector (either suffices). ' +
          'At least one of the two must be given; an empty selector ({}) allows every namespace.',
        'x-kubernetes-validations': [{ rule: 'has(self.names) || has(self.selector)', message: 'namespaces needs names or a selector' }],
      }),
    kinds: z.array(z.enum(ISSUED_KINDS)).min(1).max(2).meta({
      description:
        'The kinds of key the rule allows: Organization (an ApiKey of scope Organization) and/or Project (a ProjectApiKey). Personal keys are never issued through an issuer.',
    }),
    projects: z.array(z.string().min(1).max(64).regex(PROJECT_ID_PATTERN)).max(256).optional().meta({
      description: 'For Project keys: the projects allowed; absent means any project of the organization.',
    }),
    maxKeysPerNamespace: z
      .int()
      .min(0)
      .max(100_000)
      .optional()
      .meta({
        description:
          'The most key resources of one namespace that may hold a key through this issuer (keys of a rotation still retiring are not counted). ' +
          'When several rules allow a request, the most generous applies (a rule without it sets no cap).',
      }),
  })
  .meta({ description: 'One rule of the policy: a request is allowed when one rule matches its namespace, its kind and (for a Project key) its project.' });
export type IssuerRule = z.infer<typeof IssuerRule>;

export const ClusterKeyIssuerSpec = z
  .object({
    organizationId: z.string().min(5).max(64).regex(ORGANIZATION_ID_PATTERN).meta({
      description: 'The organization whose keys this issuer mints, e.g. org-cool-cherry-12345678. Immutable.',
    }),
    credentialsSecretRef: z
      .object({
        name: z
          .string()
          .min(1)
          .max(253)
          .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/)
          .meta({ description: "Name of a Secret in the operator's issuer namespace (--issuer-secrets-namespace, default the operator's own)." }),
        key: z
          .string()
          .min(1)
          .max(253)
          .regex(/^[-._a-zA-Z0-9]+$/)
          .default('apiKey')
          .meta({ description: 'Key in the Secret data that holds the platform API key.' }),
      })
      .meta({
        description:
          "The Secret holding a personal API key of an administrator of the organization. It lives in the operator's namespace (or the one named " +
          "by --issuer-secrets-namespace), never in a tenant's: tenants use the issuer without being able to read its key.",
      }),
    allow: z.array(IssuerRule).max(MAX_RULES).default([]).meta({
      description:
        'The policy: which namespaces may have which keys minted. A request no rule allows is refused (NotAllowed) without any platform request. Empty: nothing is allowed.',
    }),
  })
  .meta({
    description: 'ClusterKeyIssuerSpec names the organization, the credentials kept by the platform team, and who may use them.',
    'x-kubernetes-validations': [{ rule: 'self.organizationId == oldSelf.organizationId', message: 'organizationId is immutable' }],
  });
export type ClusterKeyIssuerSpec = z.infer<typeof ClusterKeyIssuerSpec>;

const timestamp = (description: string) => z.string().max(64).meta({ format: 'date-time', description });

export const ClusterKeyIssuerStatus = z
  .object({
    observedGeneration: z.int().min(0).optional().meta({ description: 'The metadata.generation last reconciled.' }),
    user: z
      .object({
        id: z.string().max(128).optional().meta({ description: 'The platform user id of the credentials.' }),
        email: z.string().max(256).optional().meta({ description: "Their email, as the organization's member list shows it." }),
        role: z.string().max(32).optional().meta({ description: 'Their role in the organization (admin is required).' }),
      })
      .optional()
      .meta({ description: 'Whose credentials the issuer holds, as last verified.' }),
    verifiedAt: timestamp('When the credentials were last verified (written when the result changes, and at most once an hour otherwise).').optional(),
    resources: z.int().min(0).optional().meta({
      description:
        "How many ApiKeys and ProjectApiKeys name this issuer (spec.issuerRef), and ApiKeyInventories of the operator's namespace (the only ones that may use it).",
    }),
    conditions: z
      .array(Condition)
      .max(8)
      .optional()
      .meta({
        description: 'Ready: True (Verified) when the credentials are a personal key of an administrator of the organization; False with the reason otherwise.',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['type'],
      }),
  })
  .meta({ description: "Whether the issuer's credentials work, whose they are, and how many resources use it." });
export type ClusterKeyIssuerStatus = z.infer<typeof ClusterKeyIssuerStatus>;

export interface ClusterKeyIssuer {
  apiVersion: typeof API_VERSION;
  kind: typeof ISSUER_KIND;
  metadata: {
    name: string;
    uid: string;
    generation?: number;
    resourceVersion?: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: ClusterKeyIssuerSpec;
  status?: ClusterKeyIssuerStatus;
}

export const ISSUER_KIND_INFO = {
  kind: ISSUER_KIND,
  plural: ISSUER_PLURAL,
  singular: 'clusterkeyissuer',
  shortNames: ['nki'],
  description:
    "ClusterKeyIssuer holds a platform team's credentials for an organization and the policy of which namespaces may have keys minted with them. Cluster-scoped.",
  spec: ClusterKeyIssuerSpec,
  status: ClusterKeyIssuerStatus,
  clusterScoped: true,
} as const;
