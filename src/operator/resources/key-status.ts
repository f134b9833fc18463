// The status of the key kinds (ApiKey, ProjectApiKey), as zod schemas (schema.ts): conditions, the
// recorded key, keys retiring or replaced, lost create attempts, the rotation and the project's
// operations. Bounded like every field the apiserver stores.
import { z } from 'zod';

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
