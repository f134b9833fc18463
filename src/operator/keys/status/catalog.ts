// What users see of the key domain, described once, next to the code: the condition types, every
// reason (Reason is a closed union: a reason without a line here fails the typecheck), the events
// and the annotations. `npm run generate` writes docs/reference/conditions.md and annotations.md
// from these; test/reference/reference.test.ts fails when those pages are stale, when a reason or
// an event listed here is never emitted by the code, or when the code records an event not listed.
import {
  ANNOTATION_ABANDON_KEY,
  ANNOTATION_CREATE_PENDING,
  ANNOTATION_KEY_ID,
  ANNOTATION_KEY_NAME,
  ANNOTATION_PURPOSE,
  ANNOTATION_RELEASE_WITHOUT_REVOKE,
  ANNOTATION_RESTART_ON_ROTATION,
  ANNOTATION_RETAINED_FROM,
  ANNOTATION_ROTATE,
  ANNOTATION_ROTATED_PREFIX,
  ANNOTATION_SIGNATURE,
  FINALIZER,
  LABEL_MANAGED_BY,
  MANAGED_BY,
} from '../../resources/schema.ts';
import type { ConditionType, Reason } from './conditions.ts';
import { ANNOTATION_OWNER, ANNOTATION_REPLACES } from '../secret/secret-writer.ts';
import { ANNOTATION_TEMPLATED } from '../secret/secret-template.ts';

export const CONDITION_TYPES: Record<ConditionType, string> = {
  Ready: 'The key is live on the platform and its secret is in the Secret: what `kubectl wait --for=condition=Ready` waits for.',
  KeyIssued: 'A key was issued and is known to be live (False: why none could be; Unknown: a create under way, or the recorded key cannot be checked).',
  SecretSynced: 'The Secret holds the recorded key, as the operator wrote it.',
  Rotating: 'Present once a rotation started: True while a replaced key is still live, False once it was retired (or scheduled rotations are off).',
  OperationsSettled:
    'ProjectApiKey only: every recent operation of the project is terminal (the operations mirror); a pipeline waits on it before its next request.',
  InUse: 'Only with spec.usage.unusedAfter: whether the key was used within that long. Never affects Ready.',
};

export interface ReasonDoc {
  /** Where it appears: `Condition=Status`, and `event` (with its type). */
  on: string;
  meaning: string;
}

const FAILURE_ON = 'KeyIssued=False, Ready=False, OperationsSettled=Unknown; Warning event';

export const REASONS: Record<Reason, ReasonDoc> = {
  Creating: {
    on: 'Ready=False, KeyIssued=Unknown',
    meaning: "issuing a key, or waiting for another process's attempt (its intent is presumed in flight for --pending-grace)",
  },
  Deleting: { on: 'Ready=False', meaning: 'the resource is being deleted; the message names what blocks it' },
  Ready: { on: 'Ready=True', meaning: 'the key is live and its secret is in the Secret' },
  KeyLive: { on: 'KeyIssued=True', meaning: 'the recorded key is live on the platform' },
  SecretInSync: { on: 'SecretSynced=True', meaning: 'the Secret holds the recorded key' },
  KeyIssued: { on: 'Normal event', meaning: 'a key was issued and written to the Secret' },
  KeyAdopted: { on: 'Normal event', meaning: "an interrupted create's key was found in the Secret and recorded (no second key)" },
  KeyRevoked: { on: 'Normal event', meaning: 'on delete (deletionPolicy Revoke): the key (and any retiring key) revoked, the Secret deleted' },
  KeyRetained: { on: 'Normal event', meaning: 'on delete (deletionPolicy Retain): the key and its Secret kept; retiring keys revoked' },
  ReleasedWithoutRevoke: { on: 'Warning event', meaning: 'the finalizer dropped on request (keys.neon.dev/release-without-revoke): no key revoked' },
  CreateRecovered: { on: 'Warning event', meaning: 'an interrupted create was recovered: any key of its attempt name revoked, a new attempt started' },
  CreateOutcomeUnknown: {
    on: 'Warning event',
    meaning: 'a create request ended without an answer: the key is looked for by its attempt name before any retry',
  },
  RevokedExternally: {
    on: 'Warning event',
    meaning: 'drift: the recorded key is gone from the platform (revoked outside the operator); a new key is issued at once (Ready again when it is written)',
  },
  SecretMissing: {
    on: 'SecretSynced=False; Warning event',
    meaning: 'drift: the Secret is gone; a new key is issued into a new Secret and the old key revoked',
  },
  SecretTampered: { on: 'SecretSynced=False; Warning event', meaning: "drift: the Secret's key entry was edited; a new key is issued and the old one revoked" },
  KeyAbandoned: {
    on: 'Warning event',
    meaning: 'the recorded key was given up (keys.neon.dev/abandon-key, with CredentialsChanged); a new key is issued, the old one is yours to revoke',
  },
  ProjectNotInOrganization: {
    on: 'KeyIssued=False, Ready=False; Warning event',
    meaning: 'ProjectApiKey: the project is not (or no longer) in spec.organizationId',
  },
  InvalidSpec: {
    on: 'KeyIssued=False, Ready=False, Rotating=False; Warning event',
    meaning:
      'the spec cannot be acted on (the message says why), or the platform refused the request (400, 409, 422); on ' +
      'Rotating: scheduled rotations are off (an unknown window.timeZone) or a gracePeriod below --min-rotation-grace was raised',
  },
  InvalidAnnotation: {
    on: 'Warning event',
    meaning: 'a create intent that is unreadable, edited, forged or copied from another resource was cleared; nothing revoked',
  },
  StaleIntent: {
    on: 'Warning event',
    meaning: 'an old intent put back, which neither issued nor replaces the recorded key, was cleared; nothing adopted or revoked',
  },
  SecretConflict: {
    on: 'SecretSynced=False, KeyIssued=False, Ready=False, Rotating=False; Warning event',
    meaning:
      'a Secret of that name exists without a controller owner reference to this resource: it is never written; with ' +
      'spec.secret.immutable the key just made for it is revoked (on Rotating: a rotation stopped by it, the current key stays Ready)',
  },
  CredentialsMissing: {
    on: 'KeyIssued=False, Ready=False, Rotating=True; Warning event',
    meaning:
      'the credentials Secret or its data key is absent, or its value is not a platform API key (over 256 characters or not visible ASCII); on Rotating: a replaced key due for revocation stays live',
  },
  NotAllowed: {
    on: 'KeyIssued=False, Ready=False; Warning event',
    meaning:
      'the policy of the ClusterKeyIssuer in spec.issuerRef allows no such key for this namespace (its namespace, ' +
      'kind or project matches no rule), or --namespace-credentials forbid forbids spec.credentialsSecretRef: ' +
      'no platform request is made. A key issued before stays live until the resource is deleted, but is no longer checked, repaired or rotated',
  },
  IssuerNotFound: {
    on: 'KeyIssued=False, Ready=False; Warning event',
    meaning:
      'spec.issuerRef names no ClusterKeyIssuer (or its organization is not spec.organizationId, or the operator cannot read issuers in this install mode): no platform request is made',
  },
  KeyLimitReached: {
    on: 'KeyIssued=False, Ready=False; Warning event',
    meaning:
      "the namespace already holds as many keys through the issuer as its rule's maxKeysPerNamespace allows: no platform request is made; the first waiting resource gets the slot a deleted one frees",
  },
  NamespaceTerminating: {
    on: 'Ready=False; Warning event',
    meaning: "the namespace is being deleted: nothing new is minted (no create, repair or rotation); each resource's keys are revoked as it is deleted",
  },
  CredentialsChanged: {
    on: 'KeyIssued=False, Ready=False, Rotating=True; Warning event',
    meaning:
      'a personal key issued with other credentials, which the current ones cannot see or revoke: neither taken for revoked nor replaced (see ' +
      'keys.neon.dev/abandon-key); also holds repairs, rotations, revocations and an interrupted repair or rotation (neither adopted nor recovered with them), ' +
      'and a new key while keys an interrupted create left, found with other credentials, wait in status.replacedKeys',
  },
  CredentialsRefused: {
    on: 'Ready=Unknown, KeyIssued=Unknown; Warning event',
    meaning:
      'the drift checks of a recorded key have been refused (401/403) for --unverified-after: it is no ' +
      'longer known to be live; nothing is minted or revoked, and it returns to Ready once a check succeeds',
  },
  CredentialsWrongKind: {
    on: 'KeyIssued=False, Ready=False; Warning event',
    meaning: "the credentials hold an organization or project-scoped key: every kind needs a person's key (from GET /auth, before any create)",
  },
  Unauthorized: { on: FAILURE_ON, meaning: 'the platform answered 401: the credentials are invalid or revoked' },
  Forbidden: { on: FAILURE_ON, meaning: "the platform answered 403: the credentials may not do this (e.g. a member's key for an organization key)" },
  NotFound: { on: FAILURE_ON, meaning: 'the platform answered 404: the organization or project is not visible to the credentials' },
  RateLimited: { on: `${FAILURE_ON}; also Ready/KeyIssued=Unknown`, meaning: 'the platform answered 429; retried after its Retry-After' },
  PlatformUnavailable: {
    on: `${FAILURE_ON}; also Ready/KeyIssued=Unknown`,
    meaning: 'any other platform failure (423, 5xx, timeouts, connection errors, unreadable answers); retried with backoff',
  },
  PlatformResponseInvalid: {
    on: 'KeyIssued=False, Ready=False; Warning event',
    meaning: 'the platform answered a create with another key than asked for: that key was revoked',
  },
  Error: { on: FAILURE_ON, meaning: 'anything that is not a platform answer (a bug): the message and the log say what' },
  UsedRecently: { on: 'InUse=True', meaning: 'used within spec.usage.unusedAfter (or not used yet, and issued less than that ago)' },
  NotUsedRecently: { on: 'InUse=False', meaning: 'not used for spec.usage.unusedAfter (a key never used counts from its creation)' },
  SecretRewritten: { on: 'Normal event', meaning: 'the Secret was rewritten from its key entry to match spec.secret (template, derived entries): no new key' },
  RotationStarted: { on: 'Normal event', meaning: 'a rotation started (spec.rotation.interval due, or keys.neon.dev/rotate)' },
  RetiringKey: {
    on: 'Rotating=True',
    meaning: 'a replaced key is still live: consumers restarting, rollouts, the grace period or a fresh key list (the message says which)',
  },
  ConsumersRestarted: {
    on: 'Normal or Warning event',
    meaning: 'the consenting consumers were restarted; Warning when a named or discovered workload was skipped (no consent, or not found)',
  },
  ConsumerRestartFailed: { on: 'Rotating=True; Warning event', meaning: "a consumer's restart patch failed; tried again" },
  RolloutStalled: {
    on: 'Rotating=True; Warning event',
    meaning: 'a restarted rollout is paused, past its progress deadline, or not complete by maxGracePeriod: the replaced key stays live until it completes',
  },
  OldKeyStillInUse: {
    on: 'Rotating=True; Warning event',
    meaning:
      'the platform shows the replaced key used after the switch (the message names the address and time); once per address, and when maxGracePeriod revokes it still in use',
  },
  KeyRetired: { on: 'Normal event', meaning: 'a replaced key was revoked (or found gone) and dropped from status.retiringKeys' },
  RotationComplete: { on: 'Rotating=False', meaning: 'the replaced key was retired: one live key' },
  AllTerminal: { on: 'OperationsSettled=True', meaning: 'every recent operation is finished, skipped or cancelled' },
  InProgress: { on: 'OperationsSettled=False', meaning: 'an operation is scheduling, running or cancelling' },
  Failed: { on: 'OperationsSettled=False', meaning: 'an operation failed; the platform retries it' },
  OperationError: {
    on: 'OperationsSettled=False',
    meaning:
      'an operation ended in error: the platform gave up, and what depended on it did not happen (named in the message); stays until it leaves the 10 most recent operations',
  },
  UnknownOperationStatus: {
    on: 'OperationsSettled=Unknown',
    meaning: 'an operation has a status this operator does not know (named in the message); polled at the slow cadence',
  },
  NoCredentials: { on: 'OperationsSettled=Unknown', meaning: 'no issued key to list the operations with yet' },
};

export interface EventDoc {
  type: 'Normal' | 'Warning' | 'Normal or Warning';
  meaning: string;
}

/**
 * Every event the key domain records (EventRecorder.record). Its reason is one of Reason; the
 * meaning is REASONS'. The blocking reasons a reconcile reports (InvalidSpec, the platform
 * failures, ...) are recorded as Warning events as well.
 */
export const EVENTS = {
  KeyIssued: 'Normal',
  KeyAdopted: 'Normal',
  KeyRevoked: 'Normal',
  KeyRetained: 'Normal',
  SecretRewritten: 'Normal',
  RotationStarted: 'Normal',
  KeyRetired: 'Normal',
  ConsumersRestarted: 'Normal or Warning',
  ReleasedWithoutRevoke: 'Warning',
  CreateRecovered: 'Warning',
  CreateOutcomeUnknown: 'Warning',
  RevokedExternally: 'Warning',
  SecretMissing: 'Warning',
  SecretTampered: 'Warning',
  KeyAbandoned: 'Warning',
  ProjectNotInOrganization: 'Warning',
  InvalidSpec: 'Warning',
  InvalidAnnotation: 'Warning',
  StaleIntent: 'Warning',
  SecretConflict: 'Warning',
  CredentialsMissing: 'Warning',
  CredentialsChanged: 'Warning',
  CredentialsRefused: 'Warning',
  CredentialsWrongKind: 'Warning',
  NotAllowed: 'Warning',
  IssuerNotFound: 'Warning',
  KeyLimitReached: 'Warning',
  NamespaceTerminating: 'Warning',
  Unauthorized: 'Warning',
  Forbidden: 'Warning',
  NotFound: 'Warning',
  RateLimited: 'Warning',
  PlatformUnavailable: 'Warning',
  PlatformResponseInvalid: 'Warning',
  Error: 'Warning',
  ConsumerRestartFailed: 'Warning',
  RolloutStalled: 'Warning',
  OldKeyStillInUse: 'Warning',
} as const satisfies Partial<Record<Reason, EventDoc['type']>>;

export interface AnnotationDoc {
  name: string;
  /** On what object it is. */
  on: string;
  /** Who writes it: `you`, the operator, a workload's owner. */
  by: string;
  meaning: string;
}

export const ANNOTATIONS: readonly AnnotationDoc[] = [
  {
    name: `${ANNOTATION_RELEASE_WITHOUT_REVOKE}: "true"`,
    on: 'ApiKey, ProjectApiKey',
    by: 'you',
    meaning:
      'on a resource being deleted: drop the finalizer without revoking the key (when its credentials are gone for good); revoke the key in the console yourself',
  },
  {
    name: `${ANNOTATION_ROTATE}: "<token>"`,
    on: 'ApiKey, ProjectApiKey',
    by: 'you',
    meaning: 'rotate the key now, once per token: a rotation starts when the value differs from status.rotation.lastRequest',
  },
  {
    name: `${ANNOTATION_ABANDON_KEY}: "<key id>"`,
    on: 'ApiKey, ProjectApiKey',
    by: 'you',
    meaning: 'with CredentialsChanged: give up the recorded key (revoke it yourself first); the operator issues a new key. The value must be the recorded id',
  },
  {
    name: ANNOTATION_CREATE_PENDING,
    on: 'ApiKey, ProjectApiKey',
    by: 'the operator',
    meaning:
      'the crash-safe create intent, signed for this resource: written before a key is created, fulfilled once status records the key. An unreadable, ' +
      'edited, forged or copied one is cleared without revoking anything (InvalidAnnotation); one that does not fit the recorded key likewise (StaleIntent)',
  },
  {
    name: `${ANNOTATION_RESTART_ON_ROTATION}: "<Secret>[,<Secret>...]"`,
    on: 'Deployment, StatefulSet, DaemonSet (its own metadata)',
    by: "the workload's owner",
    meaning:
      "consent: a rotation of a key whose Secret is named (spec.secret.name, default the resource's name) may " +
      'restart this workload (and with spec.secret.immutable repoint it); without it, no rotation patches the workload',
  },
  {
    name: `${ANNOTATION_ROTATED_PREFIX}<Secret name>: "<key id>"`,
    on: 'the pod template of a restarted workload',
    by: 'the operator',
    meaning:
      'the restart of a rotation (like kubectl rollout restart); names longer than 63 characters after keys.neon.dev/ are cut and suffixed with a digest',
  },
  {
    name: ANNOTATION_KEY_ID,
    on: "the key's Secret",
    by: 'the operator',
    meaning: 'the platform id of the key the Secret holds (changes with each key: a diff in GitOps tools, a trigger for reloaders)',
  },
  { name: ANNOTATION_KEY_NAME, on: "the key's Secret", by: 'the operator', meaning: 'the platform name of that key (the attempt name)' },
  {
    name: ANNOTATION_REPLACES,
    on: "the key's Secret",
    by: 'the operator',
    meaning: "for a key that replaced another (drift repair, rotation): the replaced key's id",
  },
  {
    name: ANNOTATION_SIGNATURE,
    on: "the key's Secret",
    by: 'the operator',
    meaning:
      "the operator's signature over the resource's uid, the key id and name, the HMAC of the secret value and the replaced key: a key id is believed only where the operator wrote it",
  },
  {
    name: ANNOTATION_OWNER,
    on: "the key's Secret",
    by: 'the operator',
    meaning: "the resource (kind/name) the Secret belongs to, so a Secret's events wake it; cached only when it can name a resource",
  },
  {
    name: ANNOTATION_TEMPLATED,
    on: "the key's Secret",
    by: 'the operator',
    meaning: 'the label, annotation and data entry names spec.secret.template set, so those a changed template no longer sets are removed while others stay',
  },
  {
    name: ANNOTATION_RETAINED_FROM,
    on: 'a Secret kept by deletionPolicy Retain',
    by: 'the operator',
    meaning: 'the resource (kind/name) it was kept from; its owner reference and keys.neon.dev/owner are removed so it outlives the resource',
  },
  {
    name: ANNOTATION_PURPOSE,
    on: "the signing key's Secret (--signing-key-secret)",
    by: 'the operator',
    meaning: 'what the Secret is for: deleting it voids pending intents',
  },
];

export const LABELS: readonly AnnotationDoc[] = [
  {
    name: `${LABEL_MANAGED_BY}=${MANAGED_BY}`,
    on: "the key's Secret",
    by: 'the operator',
    meaning:
      "a Secret the operator manages; authority comes from the controller owner reference (with the resource's uid) and the signature, never from this label",
  },
];

export const FINALIZERS: readonly AnnotationDoc[] = [
  {
    name: FINALIZER,
    on: 'ApiKey, ProjectApiKey',
    by: 'the operator',
    meaning: 'held until the key is revoked (or retained) on delete; see keys.neon.dev/release-without-revoke',
  },
];
