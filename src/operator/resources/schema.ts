// The custom resources, as zod schemas: the single source of truth for the TypeScript types, the
// runtime validation of every object read from the apiserver, and the CRD openAPIV3Schema
// (crd.ts turns these into crds/*.yaml; `npm run generate`). docs/design.md section 2.
import { z } from 'zod';
import { GO_DURATION_PATTERN } from '../go-duration.ts';

export const GROUP = 'keys.neon.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Held by every resource the operator has seen, until its key is revoked (or retained). */
export const FINALIZER = 'keys.neon.dev/finalizer';
/**
 * On a namespace's credentials Secret: held while a resource naming it may still need it to revoke a
 * key (keys/issuing/credentials-in-use.ts), so deleting the namespace revokes before it goes.
 */
export const CREDENTIALS_FINALIZER = 'keys.neon.dev/credentials-in-use';
/** The create intent (docs/design.md section 3.1, step 2); JSON, see PendingAttempt. */
export const ANNOTATION_CREATE_PENDING = 'keys.neon.dev/create-pending';
/** A person's way out when the credentials are gone for good: drop the finalizer without revoking. */
export const ANNOTATION_RELEASE_WITHOUT_REVOKE = 'keys.neon.dev/release-without-revoke';
/** On the Secret: the platform id of the key whose secret it holds. */
export const ANNOTATION_KEY_ID = 'keys.neon.dev/key-id';
/** On the Secret: the platform name of that key (the attempt name). */
export const ANNOTATION_KEY_NAME = 'keys.neon.dev/key-name';
/**
 * On the Secret: the operator's signature over (resource uid, key id, key name, the HMAC of the
 * secret value, the key it replaced), so a key id is believed only where the operator wrote it, on
 * the value it wrote (keys/secret/secret-writer.ts, docs/security.md).
 */
export const ANNOTATION_SIGNATURE = 'keys.neon.dev/signature';
/**
 * A person's acknowledgement that the recorded key (its id is the value) was issued with other
 * credentials and cannot be revoked with the current ones: the operator stops reporting it and
 * issues a new key (docs/security.md, credentials change).
 */
export const ANNOTATION_ABANDON_KEY = 'keys.neon.dev/abandon-key';
/**
 * A person's request to rotate the key now: any token; a rotation starts when it differs from
 * status.rotation.lastRequest (which records the token handled, so each request is done once).
 */
export const ANNOTATION_ROTATE = 'keys.neon.dev/rotate';
/**
 * On a Deployment, StatefulSet or DaemonSet (its own metadata, which only those with rights on the
 * workload write): the Secrets whose rotation may restart it (and, with spec.secret.immutable,
 * repoint it), comma-separated, each as spec.secret.name names it (default: the resource's name).
 * A workload without it is never patched by a rotation (consumers.ts, docs/security.md).
 */
export const ANNOTATION_RESTART_ON_ROTATION = 'keys.neon.dev/restart-on-rotation';
/** On a Secret kept by deletionPolicy Retain: the resource (kind/name) it was kept from, its owner reference gone. */
export const ANNOTATION_RETAINED_FROM = 'keys.neon.dev/retained-from';
/** On the signing key's Secret: what it is for. */
export const ANNOTATION_PURPOSE = 'keys.neon.dev/purpose';
/** On the pod template of a restarted workload: `<prefix><Secret name>` (consumers.ts restartAnnotation). */
export const ANNOTATION_ROTATED_PREFIX = 'keys.neon.dev/rotated.';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'neon-key-operator';
/** The operator appends "-" and 8 characters (the resource's tag and 3 random ones) to keyName; key names hold at most 64. */
export const KEY_NAME_MAX = 64 - 9;

const dnsSubdomain = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
const secretDataKey = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[-._a-zA-Z0-9]+$/);

/** spec.issuerRef: a ClusterKeyIssuer (issuer.ts), whose credentials tenants never hold. */
export const IssuerRef = z
  .object({
    name: dnsSubdomain.meta({ description: 'Name of a ClusterKeyIssuer.' }),
  })
  .meta({
    description:
      'The ClusterKeyIssuer whose credentials mint this key, if its policy allows this namespace, kind and project. ' +
      'Exactly one of issuerRef and credentialsSecretRef is set. organizationId then comes from the issuer (if given, it must match).',
  });

/** Exactly one source of credentials; an issuer mints no personal key. */
const oneCredentialsSource = {
  rule: 'has(self.issuerRef) != has(self.credentialsSecretRef)',
  message: 'exactly one of issuerRef and credentialsSecretRef must be set',
};

/** A key made with the platform team's credentials never outlives its resource (docs/issuers.md, "Deletion"). */
const issuedKeysRevoked = {
  rule: "!has(self.issuerRef) || self.deletionPolicy != 'Retain'",
  message: 'deletionPolicy Retain is not allowed with issuerRef: a key made through an issuer is revoked with its resource',
};

export const CredentialsSecretRef = z
  .object({
    name: dnsSubdomain.meta({ description: 'Name of a Secret in the same namespace as this resource.' }),
    key: secretDataKey.default('apiKey').meta({ description: 'Key in the Secret data that holds the platform API key.' }),
  })
  .meta({
    description:
      'The Secret, in the same namespace as this resource, holding the platform API key the operator acts with ' +
      '(a personal key; for scope Organization, one of an organization administrator). Secrets of other namespaces are never read.',
  });

/** What a data entry of spec.secret.template may hold (secret-template.ts computes each). */
export const TEMPLATE_FIELDS = ['Key', 'KeyId', 'KeyName', 'OrganizationId', 'ProjectId', 'PlatformUrl'] as const;
export type TemplateField = (typeof TEMPLATE_FIELDS)[number];
/** Label and annotation names the operator writes itself: a template never sets them. */
export const OPERATOR_METADATA_PREFIX = 'keys.neon.dev/';
const TEMPLATE_MAX_ENTRIES = 32;
// Label and annotation names: an optional DNS-subdomain prefix and '/', then a name of at most 63
// characters. A map's keys cannot be bounded by the structural schema (no propertyNames), so CEL
// checks them; zod checks them again for an object the CRD did not validate.
const QUALIFIED_NAME = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$';
const qualifiedName = z.string().max(316).regex(new RegExp(QUALIFIED_NAME));
const notOperatorOwn = (what: string) => ({
  rule: `self.all(k, !k.startsWith('${OPERATOR_METADATA_PREFIX}') && k != 'app.kubernetes.io/managed-by')`,
  message: `${what} may not set the operator's own (keys.neon.dev/*, app.kubernetes.io/managed-by)`,
});
const qualifiedNames = (what: string) => ({
  rule: `self.all(k, size(k) <= 316 && k.matches('${QUALIFIED_NAME}'))`,
  message: `${what} names must be [prefix/]name: a DNS subdomain prefix, a name of at most 63 characters`,
});

function secretTemplate(fields: readonly TemplateField[]) {
  return z
    .object({
      labels: z
        .record(
          qualifiedName,
          z
            .string()
            .max(63)
            .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/),
        )
        .optional()
        .meta({
          description: "Labels added to the Secret. Not the operator's own (keys.neon.dev/*, app.kubernetes.io/managed-by).",
          maxProperties: TEMPLATE_MAX_ENTRIES,
          'x-kubernetes-validations': [qualifiedNames('label'), notOperatorOwn('labels')],
        }),
      annotations: z
        .record(qualifiedName, z.string().max(4096))
        .optional()
        .meta({
          description: "Annotations added to the Secret (e.g. for a reloader). Not the operator's own (keys.neon.dev/*, app.kubernetes.io/managed-by).",
          maxProperties: TEMPLATE_MAX_ENTRIES,
          'x-kubernetes-validations': [qualifiedNames('annotation'), notOperatorOwn('annotations')],
        }),
      data: z
        .record(secretDataKey, z.enum(fields))
        .optional()
        .meta({
          description:
            `More data entries of the Secret, each named by its key and holding one of: ${fields.join(', ')} ` +
            '(PlatformUrl: the platform API URL the operator uses). Never spec.secret.key.',
          maxProperties: TEMPLATE_MAX_ENTRIES,
          'x-kubernetes-validations': [
            { rule: "self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$'))", message: 'data keys must be valid Secret keys ([-._a-zA-Z0-9]+)' },
          ],
        }),
    })
    .meta({
      description:
        'How the Secret looks to its consumers: labels, annotations and more data entries derived from ' +
        'the key. Kept in line by the operator; changing it rewrites the Secret without issuing a new key.',
    });
}

function secretTarget(fields: readonly TemplateField[]) {
  return z
    .object({
      name: dnsSubdomain.optional().meta({ description: 'Name of the Secret; defaults to the name of this resource.' }),
      key: secretDataKey.default('apiKey').meta({ description: 'Key in the Secret data that receives the key.' }),
      template: secretTemplate(fields).optional(),
      immutable: z
        .boolean()
        .optional()
        .meta({
          description:
            'Write each issued key to its own immutable Secret, named <name>-<key id>; status.secretName names the current one, a rotation repoints ' +
            "the consumers (spec.rotation.restart, those that consent) to it and the replaced key's Secret is deleted once that key is revoked. Set at creation; cannot be changed.",
        }),
    })
    .meta({
      description: 'The Secret the issued key is written to. It is created and owned by the operator.',
      'x-kubernetes-validations': [
        {
          rule: '!has(self.template) || !has(self.template.data) || !(self.key in self.template.data)',
          message: 'template.data may not name secret.key (it holds the key itself)',
        },
      ],
    });
}

export const SecretTarget = secretTarget(TEMPLATE_FIELDS);
const ApiKeySecretTarget = secretTarget(TEMPLATE_FIELDS.filter((f) => f !== 'ProjectId'));

export const Usage = z
  .object({
    unusedAfter: z
      .string()
      .min(1)
      .max(64)
      .regex(GO_DURATION_PATTERN)
      .optional()
      .meta({
        description:
          'Set the InUse condition: False (NotUsedRecently) once the key has not been used for this long (a Go duration, e.g. 720h; at least 1s). ' +
          'A key never used counts from its creation. Never affects Ready.',
        'x-kubernetes-validations': [{ rule: "duration(self) >= duration('1s')", message: 'unusedAfter must be a duration of at least 1s' }],
      }),
  })
  .meta({ description: 'What the operator reports about the use of the key (status.lastUsedAt, the InUse condition).' });

export const DeletionPolicy = z.enum(['Revoke', 'Retain']).default('Revoke').meta({
  description: 'What happens to the platform key when this resource is deleted: Revoke it, or Retain it and keep its Secret.',
});

const keyName = z
  .string()
  .min(1)
  .max(KEY_NAME_MAX)
  .regex(/^[A-Za-z0-9][-_.A-Za-z0-9]*$/)
  .meta({
    description:
      `Name of the key in the platform console; the operator appends "-" and 8 characters (5 of the resource's own tag, 3 random). ` +
      `At most ${KEY_NAME_MAX} characters. Defaults to <namespace>-<name>.`,
  });

// The platform's id shapes (lower-case words and digits joined by '-', e.g. org-cool-cherry-12345678
// and cool-cherry-12345678). Ids become path segments of platform requests: a '.', '/' or '%' in
// one could rewrite the request's path (organizationId "..": POST /api_keys, a personal key).
// src/platform's client refuses such segments too, whatever reached it.
export const ORGANIZATION_ID_PATTERN = /^org-[a-z0-9]+(-[a-z0-9]+)*$/;
export const PROJECT_ID_PATTERN = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const ID_MAX = 64;

const organizationId = z
  .string()
  .min(5)
  .max(ID_MAX)
  .regex(ORGANIZATION_ID_PATTERN)
  .meta({ description: 'The platform organization id, e.g. org-cool-cherry-12345678.' });
const projectId = z
  .string()
  .min(1)
  .max(ID_MAX)
  .regex(PROJECT_ID_PATTERN)
  .meta({ description: 'The project the key is scoped to, e.g. cool-cherry-12345678. Immutable.' });

/** spec.secret.immutable is chosen at creation: the Secrets of one mode are not the other's. */
const immutableModeFixed = {
  rule: '(has(self.secret) && has(self.secret.immutable) && self.secret.immutable) == (has(oldSelf.secret) && has(oldSelf.secret.immutable) && oldSelf.secret.immutable)',
  message: 'secret.immutable cannot be changed after creation',
};

/** Not the credentials Secret: the operator would overwrite the key it acts with. */
const secretIsNotCredentials = {
  rule: '!has(self.credentialsSecretRef) || !has(self.secret) || !has(self.secret.name) || self.secret.name != self.credentialsSecretRef.name',
  message: 'secret.name must not name the credentials Secret',
};

// Go durations ("90s", "10m", "720h", "1h30m"), as CEL's duration() reads them (go-duration.ts).
const goDuration = (description: string) => z.string().min(1).max(32).regex(GO_DURATION_PATTERN).meta({ description });
const clock = (description: string) =>
  z
    .string()
    .regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/)
    .meta({ description });
export const WEEKDAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'] as const;

export const RotationWindow = z
  .object({
    daysOfWeek: z.array(z.enum(WEEKDAYS)).min(1).max(7).optional().meta({ description: 'Days a window may start on (in timeZone); default every day.' }),
    start: clock('Start of the window, HH:MM in timeZone.'),
    end: clock('End of the window, HH:MM in timeZone; before start, the window ends the next day.'),
    timeZone: z.string().min(1).max(64).optional().meta({
      description: 'IANA time zone name, e.g. Europe/Berlin; default UTC. An unknown zone stops scheduled rotations and is reported in the Rotating condition.',
    }),
  })
  .meta({ description: 'Scheduled rotations start only inside this window; requested ones (keys.neon.dev/rotate) at once.' });

export const RestartWorkload = z.object({
  kind: z.enum(['Deployment', 'StatefulSet', 'DaemonSet']).meta({ description: 'Kind of the workload (apps/v1).' }),
  name: dnsSubdomain.meta({ description: 'Name of the workload, in the namespace of this resource.' }),
});

/**
 * The shortest spec.rotation.gracePeriod the CRD admits and the operator honours (its
 * --min-rotation-grace, default this): a replaced key is never revoked sooner after the switch.
 */
export const MIN_ROTATION_GRACE = '1m';

/** The CRD's rule for it; crd.ts renders it with another floor for a test cluster (the operator's flag lowered to match). */
export function rotationGraceRule(min: string): { rule: string; message: string } {
  return { rule: `!has(self.gracePeriod) || duration(self.gracePeriod) >= duration('${min}')`, message: `gracePeriod must be at least ${min}` };
}

export const RotationSpec = z
  .object({
    interval: goDuration(
      'Rotate when the current key is this old (Go duration, at least 1m, e.g. 720h). Without it, keys rotate only on request (keys.neon.dev/rotate).',
    ).optional(),
    window: RotationWindow.optional(),
    gracePeriod: goDuration(
      `The replaced key stays live at least this long after the Secret switched, and until it was unused this long (default 10m; at least ${MIN_ROTATION_GRACE}).`,
    ).optional(),
    maxGracePeriod: goDuration(
      'The longest the replaced key is kept while it is still used (default 24h; at least gracePeriod). Never cuts short the rollout of a workload that consented to the restart.',
    ).optional(),
    restart: z
      .object({
        discover: z
          .boolean()
          .optional()
          .meta({
            description:
              'Restart the Deployments, StatefulSets and DaemonSets of this namespace whose pod templates reference the Secret, or that name it in their ' +
              `${ANNOTATION_RESTART_ON_ROTATION} annotation; only those whose annotation names it are restarted.`,
          }),
        workloads: z
          .array(RestartWorkload)
          .max(20)
          .optional()
          .meta({
            description: `Workloads of this namespace to restart, by kind and name; only those whose ${ANNOTATION_RESTART_ON_ROTATION} annotation names the Secret are restarted.`,
          }),
      })
      .optional()
      .meta({
        description:
          'Consumers restarted (like kubectl rollout restart) after the Secret switched, each only if its own metadata consents: the annotation ' +
          `${ANNOTATION_RESTART_ON_ROTATION} names the Secret (spec.secret.name, default the resource's name; comma-separated). The replaced key is revoked ` +
          'only once the rollouts of those restarted completed; a workload without consent is skipped, said so in the ConsumersRestarted event, and never waited for.',
      }),
  })
  .meta({
    description: 'Key rotation without downtime: a new key in the Secret, the replaced one kept live until its consumers moved, then revoked.',
    'x-kubernetes-validations': [
      { rule: "!has(self.interval) || duration(self.interval) >= duration('1m')", message: 'interval must be at least 1m' },
      rotationGraceRule(MIN_ROTATION_GRACE),
      {
        rule: "!has(self.maxGracePeriod) || duration(self.maxGracePeriod) >= duration(has(self.gracePeriod) ? self.gracePeriod : '10m')",
        message: 'maxGracePeriod must be at least gracePeriod (default 10m)',
      },
    ],
  });
export type RotationSpec = z.infer<typeof RotationSpec>;

export const ApiKeySpec = z
  .object({
    scope: z
      .enum(['Personal', 'Organization'])
      .meta({ description: 'Personal: a personal key of the user whose key is in credentialsSecretRef. Organization: an organization key. Immutable.' }),
    organizationId: organizationId
      .optional()
      .meta({ description: 'The organization of an Organization key; required for scope Organization, not allowed for Personal. Immutable.' }),
    keyName: keyName.optional(),
    credentialsSecretRef: CredentialsSecretRef.optional(),
    issuerRef: IssuerRef.optional(),
    secret: ApiKeySecretTarget.optional(),
    deletionPolicy: DeletionPolicy,
    usage: Usage.optional(),
    rotation: RotationSpec.optional(),
  })
  .meta({
    description: 'ApiKeySpec is the desired personal or organization API key.',
    'x-kubernetes-validations': [
      {
        rule: "self.scope != 'Organization' || has(self.organizationId) || has(self.issuerRef)",
        message: 'organizationId is required when scope is Organization (unless issuerRef names an issuer)',
      },
      { rule: "self.scope != 'Personal' || !has(self.organizationId)", message: 'organizationId is not allowed when scope is Personal' },
      {
        rule: "self.scope != 'Personal' || !has(self.issuerRef)",
        message: "a Personal key is never issued through an issuer (it would be as strong as the issuer's user): use credentialsSecretRef",
      },
      oneCredentialsSource,
      issuedKeysRevoked,
      { rule: 'self.scope == oldSelf.scope', message: 'scope is immutable' },
      {
        rule: '!has(oldSelf.organizationId) || (has(self.organizationId) && self.organizationId == oldSelf.organizationId)',
        message: 'organizationId is immutable',
      },
      secretIsNotCredentials,
      immutableModeFixed,
      {
        rule:
          "self.scope != 'Personal' || !has(self.secret) || !has(self.secret.template) || " +
          "!has(self.secret.template.data) || self.secret.template.data.all(k, self.secret.template.data[k] != 'OrganizationId')",
        message: 'secret.template.data: a Personal key has no OrganizationId',
      },
    ],
  });

export const ProjectApiKeySpec = z
  .object({
    organizationId: organizationId.optional().meta({
      description:
        'The organization that owns the project; required with credentialsSecretRef, taken from the issuer with issuerRef (if given, it must match). Immutable once set.',
    }),
    projectId,
    keyName: keyName.optional(),
    credentialsSecretRef: CredentialsSecretRef.optional(),
    issuerRef: IssuerRef.optional(),
    secret: SecretTarget.optional(),
    deletionPolicy: DeletionPolicy,
    usage: Usage.optional(),
    rotation: RotationSpec.optional(),
  })
  .meta({
    description: 'ProjectApiKeySpec is the desired project-scoped API key.',
    'x-kubernetes-validations': [
      { rule: 'has(self.organizationId) || has(self.issuerRef)', message: 'organizationId is required (unless issuerRef names an issuer)' },
      oneCredentialsSource,
      issuedKeysRevoked,
      {
        rule: '!has(oldSelf.organizationId) || (has(self.organizationId) && self.organizationId == oldSelf.organizationId)',
        message: 'organizationId is immutable',
      },
      { rule: 'self.projectId == oldSelf.projectId', message: 'projectId is immutable' },
      secretIsNotCredentials,
      immutableModeFixed,
    ],
  });

export const ConditionStatus = z.enum(['True', 'False', 'Unknown']);

/** metav1.Condition */
export const Condition = z.object({
  type: z.string().min(1).max(316).meta({ description: 'Type of condition in CamelCase.' }),
  status: ConditionStatus.meta({ description: 'True, False or Unknown.' }),
  observedGeneration: z.int().min(0).optional().meta({ description: 'The metadata.generation this condition was set from.' }),
  lastTransitionTime: z.string().meta({ format: 'date-time', description: 'Last time the condition changed status.' }),
  reason: z.string().min(1).max(1024).meta({ description: 'Machine-readable CamelCase reason of the last transition.' }),
  message: z.string().max(32768).meta({ description: 'Human-readable message; says what to do.' }),
});
export type Condition = z.infer<typeof Condition>;

// Status is bounded like every field the apiserver stores: what a bug or a hostile platform answer
// could put there cannot grow an object without limit.
const timestamp = (description: string) => z.string().max(64).meta({ format: 'date-time', description });

export const RetiringKey = z.object({
  keyId: z.int().min(0).meta({ description: 'Platform id of the replaced key, live until it is revoked.' }),
  keyName: z.string().max(64).optional().meta({ description: 'Its platform name.' }),
  secretName: z.string().max(253).optional().meta({ description: 'spec.secret.immutable: the Secret holding it, deleted once it is revoked.' }),
  since: timestamp('When the Secret switched to the new key.'),
  restartedAt: timestamp('When its consumers were restarted (absent: not yet, or no restart configured).').optional(),
  restarts: z
    .array(
      z.object({
        kind: z.enum(['Deployment', 'StatefulSet', 'DaemonSet']),
        name: z.string().max(253),
        generation: z.int().min(0).meta({ description: 'The generation whose rollout is waited for.' }),
      }),
    )
    .max(50)
    .optional()
    .meta({ description: 'The workloads restarted, each with the generation whose rollout must complete.' }),
  rolloutsCompletedAt: timestamp('When every restarted rollout had completed.').optional(),
  lastUsedAt: timestamp('Last use of the replaced key, as last seen on the platform.').optional(),
  lastUsedFromAddr: z.string().max(64).optional().meta({ description: 'Address the replaced key was last used from.' }),
});
export type RetiringKey = z.infer<typeof RetiringKey>;

export const ReplacedKey = z.object({
  keyId: z.int().min(0).meta({ description: 'Platform id of the replaced key, live until it is revoked.' }),
  keyName: z.string().max(64).optional().meta({ description: 'Its platform name.' }),
  since: timestamp('When the new key replaced it.'),
});
export type ReplacedKey = z.infer<typeof ReplacedKey>;

/** At most this many lost attempts recorded (the CRD's bound); a full list stops new creates until one is resolved. */
export const MAX_LOST_ATTEMPTS = 4;

export const LostAttempt = z.object({
  keyName: z.string().max(64).meta({ description: "The attempt's key name: any platform key of this name is this resource's, and is revoked." }),
  since: timestamp('When the create was sent.'),
  credentialsFingerprint: z
    .string()
    .max(64)
    .optional()
    .meta({
      description:
        'Which credentials and list made the attempt: an HMAC (keyed by a key only the operator holds), never the key. ' +
        'Only their list showing no key of the name drops the entry.',
    }),
});
export type LostAttempt = z.infer<typeof LostAttempt>;

export const RotationStatus = z.object({
  lastRotatedAt: timestamp('When the Secret last switched to a new key by rotation.').optional(),
  nextRotationAt: timestamp('When the next scheduled rotation is due (from spec.rotation.interval and window).').optional(),
  lastRequest: z
    .string()
    .max(128)
    .optional()
    .meta({ description: 'The last keys.neon.dev/rotate token handled (sha256: of it when longer than 64 characters).' }),
});
export type RotationStatus = z.infer<typeof RotationStatus>;

const statusFields = {
  observedGeneration: z.int().min(0).optional().meta({ description: 'The metadata.generation last reconciled.' }),
  keyId: z.int().min(0).optional().meta({ description: 'Platform id of the live key.' }),
  keyName: z.string().max(64).optional().meta({ description: 'Platform name of the live key.' }),
  createdAt: timestamp('When the platform created the key.').optional(),
  createdBy: z.string().max(256).optional().meta({ description: 'The platform user that created the key.' }),
  lastUsedAt: timestamp('Last use of the key, as the platform reports it; updated when it moves by an hour or more.').optional(),
  lastUsedFromAddr: z.string().max(64).optional().meta({ description: 'Address the key was last used from.' }),
  secretName: z.string().max(253).optional().meta({ description: 'The Secret holding the key.' }),
  secretHash: z
    .string()
    .max(128)
    .optional()
    .meta({ description: 'HMAC-SHA256 (keyed by the namespace and name of the resource) of the secret in the Secret, to detect edits. Never the secret.' }),
  organizationId: z
    .string()
    .max(64)
    .optional()
    .meta({
      description:
        'The organization of the recorded key (the one spec.organizationId or the issuer named when it was issued): ' +
        'credentials of another organization (an issuerRef moved to an issuer of another one) never take it for revoked.',
    }),
  issuer: z
    .string()
    .max(253)
    .optional()
    .meta({
      description:
        'The ClusterKeyIssuer whose credentials made the recorded key (absent: credentials of the namespace). ' +
        'Its cap counts the key until the resource is deleted, whatever spec.issuerRef names later.',
    }),
  credentialsFingerprint: z
    .string()
    .max(64)
    .optional()
    .meta({
      description:
        'Which credentials issued the key: an HMAC (keyed by a key only the operator holds) of the API key in the credentials Secret, never the key. ' +
        'A key issued with other credentials than the current ones is not mistaken for a revoked one.',
    }),
  rotation: RotationStatus.optional().meta({ description: 'Rotation bookkeeping (spec.rotation, keys.neon.dev/rotate).' }),
  retiringKeys: z
    .array(RetiringKey)
    .max(4)
    .optional()
    .meta({ description: 'Keys replaced by a rotation, still live until their consumers moved; normally none or one.' }),
  replacedKeys: z
    .array(ReplacedKey)
    .max(8)
    .optional()
    .meta({
      description:
        'Keys a repair replaced whose revocation failed (the platform did not answer): revoked on a later pass or with the resource; ' +
        'recorded here, where only the operator writes, so that no key is live and recorded nowhere. Normally absent.',
    }),
  lostAttempts: z
    .array(LostAttempt)
    .max(MAX_LOST_ATTEMPTS)
    .optional()
    .meta({
      description:
        'Creates whose answer was lost (the platform may have made the key): a key of such a name is revoked when a list shows it, ' +
        'and the entry dropped then, or once a list taken --pending-grace after it shows none. Recorded here, where only the operator writes, ' +
        'so that the key is found again whatever becomes of the create-pending annotation. Normally absent.',
    }),
  conditions: z
    .array(Condition)
    .max(16)
    .optional()
    .meta({
      description:
        'Ready, KeyIssued, SecretSynced (and OperationsSettled for ProjectApiKey; InUse with spec.usage.unusedAfter; Rotating once a rotation started).',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    }),
};

export const ApiKeyStatus = z.object(statusFields).meta({ description: 'Observed state of the key.' });
export type ApiKeyStatus = z.infer<typeof ApiKeyStatus>;

export const OperationSummary = z.object({
  id: z.string().max(64),
  action: z.string().max(64),
  status: z.string().max(32),
  failuresCount: z.int().min(0).optional(),
  updatedAt: timestamp('Last update of the operation.').optional(),
});
export type OperationSummary = z.infer<typeof OperationSummary>;

export const ProjectApiKeyStatus = z
  .object({
    ...statusFields,
    operations: z.array(OperationSummary).max(20).optional().meta({ description: 'The latest operations of the project, mirrored by polling.' }),
  })
  .meta({ description: 'Observed state of the key and of the project operations.' });
export type ProjectApiKeyStatus = z.infer<typeof ProjectApiKeyStatus>;

export type ApiKeySpec = z.infer<typeof ApiKeySpec>;
export type ProjectApiKeySpec = z.infer<typeof ProjectApiKeySpec>;

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}

export interface ApiKey {
  apiVersion: typeof API_VERSION;
  kind: 'ApiKey';
  metadata: ObjectMeta;
  spec: ApiKeySpec;
  status?: ApiKeyStatus;
}

export interface ProjectApiKey {
  apiVersion: typeof API_VERSION;
  kind: 'ProjectApiKey';
  metadata: ObjectMeta;
  spec: ProjectApiKeySpec;
  status?: ProjectApiKeyStatus;
}

export type KeyResource = ApiKey | ProjectApiKey;
export type KindName = KeyResource['kind'];

export interface KindInfo {
  kind: KindName;
  plural: string;
  singular: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
}

export const KINDS: Record<KindName, KindInfo> = {
  ApiKey: {
    kind: 'ApiKey',
    plural: 'apikeys',
    singular: 'apikey',
    shortNames: ['nak'],
    description: 'ApiKey is a personal or organization API key of the platform, issued by the operator and written to a Secret.',
    spec: ApiKeySpec,
    status: ApiKeyStatus,
  },
  ProjectApiKey: {
    kind: 'ProjectApiKey',
    plural: 'projectapikeys',
    singular: 'projectapikey',
    shortNames: ['npak'],
    description: 'ProjectApiKey is a project-scoped API key of the platform, issued by the operator and written to a Secret.',
    spec: ProjectApiKeySpec,
    status: ProjectApiKeyStatus,
  },
};

export type SpecParse = { ok: true; spec: ApiKeySpec | ProjectApiKeySpec } | { ok: false; message: string };

/** Validates a spec read from the apiserver (the CRD validated it already, unless it is older). */
export function parseSpec(kind: KindName, spec: unknown): SpecParse {
  const result = KINDS[kind].spec.safeParse(spec);
  if (result.success) return { ok: true, spec: result.data as ApiKeySpec | ProjectApiKeySpec };
  const message = result.error.issues.map((i) => `spec.${i.path.join('.')}: ${i.message}`).join('; ');
  return { ok: false, message };
}
