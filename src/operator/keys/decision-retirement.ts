// The retirement of a key a rotation replaced (docs/rotation.md): one step at a time, pure.

import type { Reason } from './status/conditions.ts';
import type { RetireStep, RetiringObservation } from './decision-types.ts';

/**
 * last_used_at comes in whole seconds, and the emulator (like any platform that does not write on
 * every request) updates it at most once a second: a key in steady use can look this much older.
 */
const LAST_USED_PRECISION_MS = 2_000;

const seconds = (ms: number): string => `${Math.max(0, Math.ceil(ms / 1000))}s`;

/**
 * The next step of a replaced key's retirement (docs/rotation.md). Never revoked
 * before every restarted rollout completed (maxGracePeriod does not override that); then not
 * before gracePeriod after the switch (and after the rollouts completed); then only once the key
 * went unused for gracePeriod, which maxGracePeriod after the switch cuts short.
 */
export function retirementStep(r: RetiringObservation, now: number): { step: RetireStep; reason: Reason; message: string } {
  const id = r.keyId;
  if (r.platform.state === 'Absent')
    return { step: { step: 'Drop' }, reason: 'KeyRetired', message: `replaced key ${id} is no longer on the platform; dropped from status.retiringKeys` };
  if (r.restart === 'Due')
    return {
      step: { step: 'RestartConsumers' },
      reason: 'RetiringKey',
      message: `restarting the consumers of the Secret; key ${id} stays live until they moved`,
    };
  const deadline = r.since + r.maxGraceMs;
  if (!r.rollouts.complete) {
    const stalled = r.rollouts.stalled.length > 0 || now >= deadline;
    const names = (stalled && r.rollouts.stalled.length > 0 ? r.rollouts.stalled : r.rollouts.waitingFor).join(', ');
    return stalled
      ? {
          step: { step: 'Wait', afterMs: 30_000, waitingFor: 'Rollouts', stalled: true },
          reason: 'RolloutStalled',
          message: `the rollout of ${names} is stalled; key ${id} stays live until it completes (maxGracePeriod does not cut a restart short)`,
        }
      : {
          step: { step: 'Wait', afterMs: 5_000, waitingFor: 'Rollouts' },
          reason: 'RetiringKey',
          message: `waiting for the rollout of ${names} to complete before retiring key ${id}`,
        };
  }
  const quietFrom = Math.max(r.since, r.rollouts.completedAt ?? r.since);
  if (now < quietFrom + r.graceMs && now < deadline) {
    return {
      step: { step: 'Wait', afterMs: Math.min(quietFrom + r.graceMs, deadline) - now, waitingFor: 'Grace' },
      reason: 'RetiringKey',
      message: `key ${id} stays live for its grace period (${seconds(quietFrom + r.graceMs - now)} left)`,
    };
  }
  if (r.platform.state === 'Unknown') {
    if (now >= deadline)
      return {
        step: { step: 'Revoke', stillInUse: false },
        reason: 'KeyRetired',
        message: `maxGracePeriod is over; revoking key ${id} (its last use could not be read: ${r.platform.message})`,
      };
    return {
      step: { step: 'Wait', afterMs: 5_000, waitingFor: 'Platform' },
      reason: 'RetiringKey',
      message: `the last use of key ${id} cannot be read (${r.platform.message}); it stays live`,
    };
  }
  // What a snapshot shows is what it showed when taken: unused for the grace period as of seenAt,
  // and seenAt after the grace period began, or it says nothing about the uses since.
  const { seenAt } = r.platform;
  if (seenAt < quietFrom + r.graceMs && now < deadline) {
    return {
      step: { step: 'Wait', afterMs: 1_000, waitingFor: 'Platform' },
      reason: 'RetiringKey',
      message: `waiting for a list of the platform's keys taken after the grace period of key ${id}`,
    };
  }
  const lastUsed = r.platform.lastUsedAt;
  if (lastUsed !== undefined && seenAt - lastUsed < r.graceMs + LAST_USED_PRECISION_MS) {
    const from = r.platform.lastUsedFromAddr !== undefined && r.platform.lastUsedFromAddr !== '' ? ` from ${r.platform.lastUsedFromAddr}` : '';
    const used = `key ${id} was used${from} at ${new Date(lastUsed).toISOString()}, after the Secret switched`;
    if (now >= deadline)
      return { step: { step: 'Revoke', stillInUse: true }, reason: 'OldKeyStillInUse', message: `${used}; maxGracePeriod is over: revoking it` };
    return {
      step: { step: 'Wait', afterMs: Math.min(5_000, deadline - now), waitingFor: 'Usage' },
      reason: 'OldKeyStillInUse',
      message: `${used}; it stays live until unused for the grace period, at most until ${new Date(deadline).toISOString()} (maxGracePeriod)`,
    };
  }
  return { step: { step: 'Revoke', stillInUse: false }, reason: 'KeyRetired', message: `key ${id} is no longer used; revoking it` };
}
