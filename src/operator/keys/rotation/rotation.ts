// Rotation without downtime (README "Rotation"; docs/design.md section 3.6): the switch and the
// retirement of the replaced key. The switch is the create protocol's (create-protocol.ts) with a
// rotation marker in the signed intent: its ONE status patch sets the new keyId and appends the old
// key to status.retiringKeys, so the old key is always in status, never live and forgotten. The
// retirement runs one step per reconcile (decision-retirement.ts, retirementStep): restart the consumers, wait
// for their rollouts, the grace period and the end of the key's use, then revoke it.
import type { ReconcileResult } from '../../runtime/workers.ts';
import type { RetiringKey } from '../../resources/key-status.ts';
import { ANNOTATION_RESTART_ON_ROTATION } from '../../resources/spec-parts.ts';
import { rotatingCondition, shownReason, type ConditionUpdate } from '../status/conditions.ts';
import { consumersOf, restartAnnotation, restartConsumers, type Consumers } from './consumers.ts';
import { baseSecretName, immutableMode } from '../secret/immutable-secret.ts';
import { deleteRetiredSecret } from '../secret/secret-writer.ts';
import type { Decision, PendingAttempt, RetireStep } from '../decision-types.ts';
import { inSync } from '../observing/in-sync.ts';
import { statusCode } from '../kube-writes.ts';
import { asPlatformFailure, failureReason } from '../status/platform-failure.ts';
import { platformOf, type Context, type KeyDeps } from '../reconcile-context.ts';
import { rotationFields } from '../rotation-schedule.ts';

const DEFAULT_POLL_MS = 5_000;
/** The rollouts one retiring key waits for at most (the bound of status.retiringKeys[].restarts). */
const MAX_TRACKED = 50;
const iso = (ms: number): string => new Date(ms).toISOString();
/** Workload names in a message: the first 20, and how many more. */
const listed = (names: readonly string[]): string => `${names.slice(0, 20).join(', ')}${names.length > 20 ? ` and ${names.length - 20} more` : ''}`;

/**
 * The status a rotation's switch writes (create or adoption of a rotation intent): the new key's
 * fields come from the caller; here the replaced key joins status.retiringKeys (once: an adoption
 * repeated after a crash appends nothing) and the rotation is recorded.
 */
export function switchFields(
  ctx: Pick<Context, 'resource' | 'rotation' | 'spec'>,
  pending: PendingAttempt,
  newKeyId: number,
  now: number,
): { fields: Record<string, unknown>; conditions: ConditionUpdate[] } {
  const status = ctx.resource.status ?? {};
  const old = pending.replaces;
  if (pending.rotation === undefined || old === undefined || old === newKeyId) return { fields: {}, conditions: [] };
  const retiring = [...(status.retiringKeys ?? [])];
  if (!retiring.some((k) => k.keyId === old)) {
    retiring.push({
      keyId: old,
      ...(status.keyId === old && status.keyName !== undefined ? { keyName: status.keyName } : {}),
      // spec.secret.immutable: its own Secret, which its consumers are repointed from and which goes once it is revoked.
      ...(immutableMode(ctx.spec) && status.keyId === old && status.secretName !== undefined ? { secretName: status.secretName } : {}),
      since: iso(now),
    });
  }
  const request = pending.rotation.request;
  return {
    fields: {
      retiringKeys: retiring,
      ...rotationFields(ctx, { lastRotatedAt: iso(now), ...(request !== undefined ? { lastRequest: request } : {}) }),
    },
    conditions: [rotatingCondition(true, 'RetiringKey', `the Secret holds key ${newKeyId}; key ${old} stays live until its consumers moved`)],
  };
}

/** One step of a replaced key's retirement, with the current key kept in sync meanwhile. */
export async function retire(
  deps: KeyDeps,
  ctx: Context,
  decision: Decision,
  action: { keyId: number; retiring: number; step: RetireStep },
): Promise<ReconcileResult> {
  const { resource } = ctx;
  const pollMs = deps.rotationPollMs ?? DEFAULT_POLL_MS;
  const now = deps.now();
  const list = [...(resource.status?.retiringKeys ?? [])];
  const index = list.findIndex((k) => k.keyId === action.retiring);
  const entry = list[index];
  if (entry === undefined) return inSync(deps, ctx, action.keyId);
  const { step } = action;
  const update = (changed: RetiringKey): void => {
    list[index] = changed;
  };

  switch (step.step) {
    case 'RestartConsumers': {
      const restart = ctx.rotation.spec?.restart;
      const consentName = baseSecretName(resource, ctx.spec);
      let found: Consumers = { consenting: [], skipped: [], missing: [] };
      let result;
      try {
        // Each restart is an idempotent patch (consumers.ts): one repeated after a crash before the
        // status below changes nothing, so recording right after patching loses no rollout to wait for.
        // spec.secret.immutable: the consumers of any of this resource's Secrets, repointed to the current one.
        const retiredNames = immutableMode(ctx.spec)
          ? list.flatMap((k) => (k.secretName !== undefined && k.secretName !== ctx.secretName ? [k.secretName] : []))
          : [];
        if (restart !== undefined) found = await consumersOf(deps.kube, resource.metadata.namespace, consentName, [ctx.secretName, ...retiredNames], restart);
        result = await restartConsumers(
          deps.kube,
          resource.metadata.namespace,
          consentName,
          { from: new Set(retiredNames), to: ctx.secretName, annotation: restartAnnotation(consentName) },
          action.keyId,
          found.consenting,
        );
      } catch (error) {
        const message = `restarting the consumers of Secret ${ctx.secretName} failed (${statusCode(error) ?? 'error'}); key ${entry.keyId} stays live and the restart is tried again`;
        ctx.logger.warn({ status: statusCode(error), err: error instanceof Error ? error.message : String(error) }, 'consumer restart failed');
        await deps.events.record(resource, 'Warning', 'ConsumerRestartFailed', message);
        await inSync(deps, ctx, action.keyId, { conditions: [rotatingCondition(true, 'ConsumerRestartFailed', message)], fields: {}, requeueAfterMs: pollMs });
        return { type: 'Backoff' };
      }
      // status.retiringKeys[].restarts is bounded (MAX_TRACKED): beyond it, restarted but not waited for, and said so.
      update({ ...entry, restartedAt: iso(now), restarts: result.restarts.slice(0, MAX_TRACKED) });
      const names = result.restarts.map((r) => `${r.kind}/${r.name}`);
      const missing = [...found.missing, ...result.missing];
      const skipped = [...found.skipped, ...result.skipped];
      const message =
        (names.length > 0 ? `restarted ${listed(names)} for key ${action.keyId}` : `no workload to restart consents for Secret ${consentName}`) +
        (skipped.length > 0 ? `; not restarted, without ${ANNOTATION_RESTART_ON_ROTATION} naming ${consentName}: ${listed(skipped)}` : '') +
        (missing.length > 0 ? `; not found: ${listed(missing)}` : '') +
        (names.length > MAX_TRACKED ? `; only the first ${MAX_TRACKED} rollouts are waited for` : '');
      await deps.events.record(resource, skipped.length > 0 || missing.length > 0 ? 'Warning' : 'Normal', 'ConsumersRestarted', message);
      return await inSync(deps, ctx, action.keyId, {
        conditions: [
          rotatingCondition(
            true,
            'RetiringKey',
            `${message}; key ${entry.keyId} stays live until ${names.length > 0 ? 'their rollouts complete' : 'its grace period is over'}`,
          ),
        ],
        fields: { retiringKeys: list },
        requeueAfterMs: 1_000,
      });
    }
    case 'Wait': {
      const seen = ctx.observation.retiring;
      const changed: RetiringKey = { ...entry };
      // Rollouts complete: recorded once, the grace period counts from then.
      if (step.waitingFor !== 'Rollouts' && entry.restartedAt !== undefined && entry.rolloutsCompletedAt === undefined) changed.rolloutsCompletedAt = iso(now);
      if (seen?.platform.state === 'Live') {
        if (seen.platform.lastUsedAt !== undefined) changed.lastUsedAt = iso(seen.platform.lastUsedAt);
        if (seen.platform.lastUsedFromAddr !== undefined) changed.lastUsedFromAddr = seen.platform.lastUsedFromAddr;
      }
      update(changed);
      if (step.stalled === true) await deps.events.record(resource, 'Warning', 'RolloutStalled', decision.message);
      // Once when the wait on usage begins and once per new address (status keeps the last one seen), not once per use.
      const warned = resource.status?.conditions?.find((c) => c.type === 'Rotating')?.reason === 'OldKeyStillInUse';
      if (step.waitingFor === 'Usage' && (!warned || entry.lastUsedFromAddr !== changed.lastUsedFromAddr)) {
        await deps.events.record(resource, 'Warning', 'OldKeyStillInUse', decision.message);
      }
      const afterMs =
        step.stalled === true
          ? Math.max(pollMs, step.afterMs)
          : step.waitingFor === 'Grace'
            ? Math.max(1_000, step.afterMs)
            : Math.min(pollMs, Math.max(1_000, step.afterMs));
      return await inSync(deps, ctx, action.keyId, {
        conditions: [rotatingCondition(true, shownReason(decision.reason), decision.message)],
        fields: { retiringKeys: list },
        requeueAfterMs: afterMs,
      });
    }
    case 'Revoke': {
      try {
        await ctx.adapter?.revoke(platformOf(deps, ctx).platform, entry.keyId);
      } catch (error) {
        const failure = asPlatformFailure(error);
        if (failure?.code !== 'NOT_FOUND') {
          const { reason, message } = failureReason(failure, `revoking retiring key ${entry.keyId}`);
          await deps.events.record(resource, 'Warning', reason, message);
          await inSync(deps, ctx, action.keyId, { conditions: [rotatingCondition(true, 'RetiringKey', message)], fields: {}, requeueAfterMs: pollMs });
          if (failure === undefined) throw error;
          return { type: 'Backoff', ...(failure.retryAfterMs !== undefined ? { minDelayMs: failure.retryAfterMs } : {}) };
        }
      }
      list.splice(index, 1);
      deps.onRetired?.(step.stillInUse ? 'revoked_in_use' : 'revoked');
      await deleteRetiredSecret(deps, ctx, entry.secretName);
      await deps.events.record(
        resource,
        step.stillInUse ? 'Warning' : 'Normal',
        step.stillInUse ? 'OldKeyStillInUse' : 'KeyRetired',
        step.stillInUse ? decision.message : `revoked replaced key ${entry.keyId}; Secret ${ctx.secretName} holds key ${action.keyId}`,
      );
      return await dropped(deps, ctx, action.keyId, list, `replaced key ${entry.keyId} was revoked`);
    }
    case 'Drop': {
      list.splice(index, 1);
      deps.onRetired?.('gone');
      await deleteRetiredSecret(deps, ctx, entry.secretName);
      await deps.events.record(resource, 'Normal', 'KeyRetired', decision.message);
      return await dropped(deps, ctx, action.keyId, list, `replaced key ${entry.keyId} is gone from the platform`);
    }
  }
}

/** A retiring key left status: Rotating False when it was the last one. */
async function dropped(deps: KeyDeps, ctx: Context, keyId: number, list: RetiringKey[], what: string): Promise<ReconcileResult> {
  const done = list.length === 0;
  return await inSync(deps, ctx, keyId, {
    conditions: [
      done
        ? rotatingCondition(false, 'RotationComplete', `${what}; key ${keyId} in Secret ${ctx.secretName} is the only live key`)
        : rotatingCondition(true, 'RetiringKey', `${what}; ${list.length} more retiring`),
    ],
    fields: { retiringKeys: list },
    // A rotation asked for during the retirement waited for it (decision.ts): it starts now, not
    // at the next drift pass. (A scheduled one due is looked at by nextLook.)
    requeueAfterMs: done && ctx.observation.rotation?.request === undefined ? deps.driftIntervalMs : 1_000,
  });
}

/** Deletion: revokes the keys still retiring (in no Secret any more); one already gone is fine. */
export async function revokeRetiring(deps: KeyDeps, ctx: Context, keyIds: readonly number[]): Promise<void> {
  if (ctx.adapter === undefined) return;
  for (const keyId of keyIds) {
    try {
      await ctx.adapter.revoke(platformOf(deps, ctx).platform, keyId);
    } catch (error) {
      // NOT_FOUND means gone only to the credentials that issued it (status.credentialsFingerprint):
      // to others it says nothing, and the key stays recorded (the caller reports CredentialsChanged).
      if (asPlatformFailure(error)?.code !== 'NOT_FOUND' || ctx.observation.credentialsChanged === true) throw error;
    }
  }
}
