// The custom resources, as zod schemas: the single source of truth for the TypeScript types, the
// runtime validation of every object read from the apiserver, and the CRD openAPIV3Schema
// (crd.ts turns these into crds/*.yaml; `npm run generate`). docs/design.md section 2.
import { z } from 'zod';
import { ApiKeyStatus, ProjectApiKeyStatus } from './key-status.ts';
import { ApiKeySecretTarget, RotationSpec, SecretTarget, Usage, dnsSubdomain, secretDataKey } from './spec-parts.ts';

// The key kinds' specs are made of spec-parts.ts, their status is key-status.ts; the names other
// modules read of them here too.
export { Condition, MAX_LOST_ATTEMPTS, type LostAttempt, type ReplacedKey } from './key-status.ts';
export { ANNOTATION_RESTART_ON_ROTATION, OPERATOR_METADATA_PREFIX, type TemplateField } from './spec-parts.ts';

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
