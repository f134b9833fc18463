// metav1.Condition bookkeeping (Kubernetes API conventions): one entry per type, each with the
// observedGeneration it was computed from; lastTransitionTime moves only when status changes.
import type { Condition } from '../../resources/schema.ts';

export type ConditionType = 'Ready' | 'KeyIssued' | 'SecretSynced' | 'OperationsSettled' | 'InUse' | 'Rotating';
export type ConditionStatus = Condition['status'];

/**
 * Every reason the key lifecycle and the operations mirror put in a condition or an event: a
 * closed set (catalog.ts describes each; docs/reference/conditions.md lists them for users). A failed platform call reads the same reason
 * everywhere (platform-failure.ts PLATFORM_FAILURE_REASONS).
 */
export type Reason =
  // progress
  | 'Creating'
  | 'Deleting'
  | 'Ready'
  | 'KeyLive'
  | 'SecretInSync'
  // what was done
  | 'KeyIssued'
  | 'KeyAdopted'
  | 'KeyRevoked'
  | 'KeyRetained'
  | 'ReleasedWithoutRevoke'
  | 'CreateRecovered'
  | 'CreateOutcomeUnknown'
  // drift found
  | 'RevokedExternally'
  | 'SecretMissing'
  | 'SecretTampered'
  | 'KeyAbandoned'
  | 'ProjectNotInOrganization'
  // what blocks progress
  | 'InvalidSpec'
  | 'InvalidAnnotation'
  | 'StaleIntent'
  | 'SecretConflict'
  | 'CredentialsMissing'
  | 'CredentialsChanged'
  | 'CredentialsRefused'
  | 'CredentialsWrongKind'
  | 'Unauthorized'
  | 'Forbidden'
  | 'NotFound'
  | 'RateLimited'
  | 'PlatformUnavailable'
  | 'PlatformResponseInvalid'
  | 'Error'
  // what a platform team's policy refuses (issuing/credentials-source.ts): an issuer's rules, its cap, a missing issuer; a namespace being deleted
  | 'NotAllowed'
  | 'IssuerNotFound'
  | 'KeyLimitReached'
  | 'NamespaceTerminating'
  // the key's use (usage.ts, spec.usage.unusedAfter); the Secret kept in line with spec.secret.template
  | 'UsedRecently'
  | 'NotUsedRecently'
  | 'SecretRewritten'
  // rotation (rotation.ts): the Rotating condition and its events
  | 'RotationStarted'
  | 'RetiringKey'
  | 'ConsumersRestarted'
  | 'ConsumerRestartFailed'
  | 'RolloutStalled'
  | 'OldKeyStillInUse'
  | 'KeyRetired'
  | 'RotationComplete'
  // the operations mirror (OperationsSettled, operations-poller.ts)
  | OperationsReason;

/**
 * Reasons of the lifecycle's decisions that no condition or event carries (decision.ts): they name
 * a step in the logs, and the step's effect reports its own reason (KeyAdopted, CreateRecovered,
 * KeyRetained, ...). Kept out of Reason, which holds only what users see (every one of them is
 * emitted: test/reference/reference.test.ts checks it, docs/reference/conditions.md lists them).
 */
export type InternalReason = 'Adopting' | 'Recovering' | 'Deleted' | 'Retained' | 'NoKey' | 'RevokingReplaced';

/** The reason users see for a decision's reason: an internal one reads as the progress it is part of. */
export function shownReason(reason: Reason | InternalReason): Reason {
  switch (reason) {
    case 'Adopting':
    case 'Recovering':
      return 'Creating';
    case 'Deleted':
    case 'Retained':
    case 'NoKey':
      return 'Deleting';
    case 'RevokingReplaced':
      return 'KeyRetired';
    default:
      return reason;
  }
}

/** OperationsSettled's own reasons (beside the platform failures'): the operations' state. */
export type OperationsReason = 'AllTerminal' | 'InProgress' | 'Failed' | 'OperationError' | 'UnknownOperationStatus' | 'NoCredentials';

/**
 * Every Reason at run time (a Record, so that the compiler fails when the union gains a reason this
 * misses): the `reason` label of the managed_keys metric is one of these or `Other`, whatever a
 * status restored from a backup says, so the metric's series stay bounded.
 */
const REASONS: Record<Reason, true> = {
  Creating: true,
  Deleting: true,
  Ready: true,
  KeyLive: true,
  SecretInSync: true,
  KeyIssued: true,
  KeyAdopted: true,
  KeyRevoked: true,
  KeyRetained: true,
  ReleasedWithoutRevoke: true,
  CreateRecovered: true,
  CreateOutcomeUnknown: true,
  RevokedExternally: true,
  SecretMissing: true,
  SecretTampered: true,
  KeyAbandoned: true,
  ProjectNotInOrganization: true,
  InvalidSpec: true,
  InvalidAnnotation: true,
  StaleIntent: true,
  SecretConflict: true,
  CredentialsMissing: true,
  CredentialsChanged: true,
  CredentialsRefused: true,
  CredentialsWrongKind: true,
  Unauthorized: true,
  Forbidden: true,
  NotFound: true,
  RateLimited: true,
  PlatformUnavailable: true,
  PlatformResponseInvalid: true,
  Error: true,
  NotAllowed: true,
  IssuerNotFound: true,
  KeyLimitReached: true,
  NamespaceTerminating: true,
  UsedRecently: true,
  NotUsedRecently: true,
  SecretRewritten: true,
  RotationStarted: true,
  RetiringKey: true,
  ConsumersRestarted: true,
  ConsumerRestartFailed: true,
  RolloutStalled: true,
  OldKeyStillInUse: true,
  KeyRetired: true,
  RotationComplete: true,
  AllTerminal: true,
  InProgress: true,
  Failed: true,
  OperationError: true,
  UnknownOperationStatus: true,
  NoCredentials: true,
};

/** `reason` if it is one of the operator's reasons, else `Other` (a bounded label value). */
export function knownReason(reason: unknown): Reason | 'Other' {
  return typeof reason === 'string' && Object.hasOwn(REASONS, reason) ? (reason as Reason) : 'Other';
}

export interface ConditionUpdate {
  type: ConditionType;
  status: ConditionStatus;
  reason: Reason;
  message: string;
}

export function setConditions(existing: readonly Condition[] | undefined, updates: readonly ConditionUpdate[], generation: number, now: Date): Condition[] {
  const out = [...(existing ?? [])];
  for (const update of updates) {
    const index = out.findIndex((c) => c.type === update.type);
    const previous = index >= 0 ? out[index] : undefined;
    const next: Condition = {
      type: update.type,
      status: update.status,
      observedGeneration: generation,
      lastTransitionTime: previous !== undefined && previous.status === update.status ? previous.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z'),
      reason: update.reason,
      message: update.message,
    };
    if (index >= 0) out[index] = next;
    else out.push(next);
  }
  return out;
}

export function findCondition(conditions: readonly Condition[] | undefined, type: ConditionType): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

// The condition sets of each outcome. Pure: what was observed and what was done in, conditions out
// (test/operator/keys/status/conditions.test.ts has a row for each).

/** The key is live and its Secret holds it. */
export function readyConditions(keyId: number, secretName: string): ConditionUpdate[] {
  return [
    { type: 'KeyIssued', status: 'True', reason: 'KeyLive', message: `key ${keyId} is live on the platform` },
    { type: 'SecretSynced', status: 'True', reason: 'SecretInSync', message: `Secret ${secretName} holds key ${keyId}` },
    { type: 'Ready', status: 'True', reason: 'Ready', message: `key ${keyId} is ready in Secret ${secretName}` },
  ];
}

/** A key retires (Rotating True, with what it waits for), or none does any more (False). */
export function rotatingCondition(retiring: boolean, reason: Reason, message: string): ConditionUpdate {
  return { type: 'Rotating', status: retiring ? 'True' : 'False', reason, message };
}

/** The key cannot be checked: not known to be live any more (nor known to be gone). */
export function unverifiableConditions(keyId: number, reason: Reason, message: string): ConditionUpdate[] {
  return [
    { type: 'KeyIssued', status: 'Unknown', reason, message },
    { type: 'Ready', status: 'Unknown', reason, message: `key ${keyId} is no longer known to be live: ${message}` },
  ];
}

/** Another process's create is in flight. */
export function creatingConditions(message: string): ConditionUpdate[] {
  return [
    { type: 'Ready', status: 'False', reason: 'Creating', message },
    { type: 'KeyIssued', status: 'Unknown', reason: 'Creating', message },
  ];
}

/** The resource is being deleted; what stops it, if anything, is in the message. */
export function deletingConditions(reason: Reason, message: string): ConditionUpdate[] {
  return [{ type: 'Ready', status: 'False', reason: 'Deleting', message: reason === 'Deleting' ? message : `${reason}: ${message}` }];
}

/** Reasons about the Secret rather than the key: they set SecretSynced, the others KeyIssued. */
const SECRET_REASONS = new Set<Reason>(['SecretMissing', 'SecretTampered', 'SecretConflict']);

/** What a blocked reconcile saw: whether the Secret exists, whether status records a key, the conditions now. */
export interface BlockedInputs {
  secretExists: boolean;
  keyRecorded: boolean;
  current: readonly Condition[] | undefined;
}

/**
 * Progress is blocked (a refusal, a conflict, an invalid spec). `hint` 'KeyIssued': the reason is
 * about issuing the key whatever its name (a platform refusal while repairing a Secret).
 */
export function blockedConditions(inputs: BlockedInputs, reason: Reason, message: string, hint?: 'KeyIssued'): ConditionUpdate[] {
  const out: ConditionUpdate[] = [{ type: 'Ready', status: 'False', reason, message }];
  if (SECRET_REASONS.has(reason) && hint === undefined) out.push({ type: 'SecretSynced', status: 'False', reason, message });
  else out.push({ type: 'KeyIssued', status: 'False', reason, message });
  // What drift found stays visible while its repair is refused (e.g. SecretMissing, then Unauthorized).
  const previous = findCondition(inputs.current, 'SecretSynced');
  if (!inputs.secretExists && inputs.keyRecorded && previous?.reason !== 'SecretMissing') {
    out.push({ type: 'SecretSynced', status: 'False', reason: 'SecretMissing', message: 'the Secret holding the key is gone' });
  }
  return out;
}

/** A blocked outcome as a status write takes it: blockedConditions() is applied where the conditions are set. */
export interface Blocked {
  blocked: BlockedInputs;
  reason: Reason;
  message: string;
  hint?: 'KeyIssued';
}

/** The conditions a status write leaves: `updates` (or a blocked outcome's) set on `existing`. */
export function nextConditions(
  existing: readonly Condition[] | undefined,
  updates: readonly ConditionUpdate[] | Blocked,
  generation: number,
  now: Date,
): Condition[] {
  const list = 'blocked' in updates ? blockedConditions(updates.blocked, updates.reason, updates.message, updates.hint) : updates;
  return setConditions(existing, list, generation, now);
}
