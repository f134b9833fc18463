// What a rotation's next step reads of the key it retires (status.retiringKeys[0]): whether the
// platform still shows it and when it was last used, and whether the workloads restarted for it
// have rolled out. Read by observe.ts; decided on in decision-retirement.ts. Nothing is written here.
import type { KeyResource } from '../../resources/schema.ts';
import type { KeyAdapter } from '../adapter.ts';
import type { RetiringObservation } from '../decision-types.ts';
import type { KeyDeps } from '../reconcile-context.ts';
import type { RotationContext } from '../rotation-schedule.ts';
import { asPlatformFailure, unverifiableReason } from '../status/platform-failure.ts';
import { observeRollouts, type Restart } from './consumers.ts';

function parseTime(value: string | undefined): number | undefined {
  const t = value !== undefined ? Date.parse(value) : Number.NaN;
  return Number.isFinite(t) ? t : undefined;
}

/** How fresh the platform's list must be to read a retiring key's last use. */
const RETIRING_LIST_MAX_AGE_MS = 5_000;

/**
 * A retiring key (status.retiringKeys[0]): is it still on the platform and when was it last used
 * (a snapshot at most RETIRING_LIST_MAX_AGE_MS old), and have the restarted rollouts completed.
 */
export async function observeRetiring(
  deps: KeyDeps,
  input: {
    adapter: KeyAdapter;
    apiKey: string | undefined;
    namespace: string;
    rotation: RotationContext;
    /** The name workloads consent to restarts for (keys.neon.dev/restart-on-rotation): one that withdrew it is not waited for. */
    consentName: string;
    key: NonNullable<NonNullable<KeyResource['status']>['retiringKeys']>[number];
  },
): Promise<RetiringObservation> {
  const { adapter, apiKey, namespace, rotation, key } = input;
  const since = parseTime(key.since) ?? deps.now();
  const restartWanted = rotation.spec?.restart !== undefined && (rotation.spec.restart.discover === true || (rotation.spec.restart.workloads?.length ?? 0) > 0);
  const restart = key.restartedAt !== undefined ? 'Done' : restartWanted ? 'Due' : 'NotConfigured';
  let rollouts: RetiringObservation['rollouts'] = {
    complete: true,
    ...(parseTime(key.rolloutsCompletedAt) !== undefined ? { completedAt: parseTime(key.rolloutsCompletedAt) } : {}),
  };
  if (restart === 'Done' && key.rolloutsCompletedAt === undefined && (key.restarts?.length ?? 0) > 0) {
    const seen = await observeRollouts(deps.kube, namespace, input.consentName, (key.restarts ?? []) as Restart[]);
    // Complete just now (recorded by this step): the grace period counts from here.
    rollouts = seen.waitingFor.length > 0 ? { complete: false, ...seen } : { complete: true, completedAt: deps.now() };
  }
  let platform: RetiringObservation['platform'];
  try {
    if (apiKey === undefined) throw Object.assign(new Error('no credentials'), { code: 'CREDENTIALS_MISSING' });
    const { platform: client, credentialsId } = deps.platformFor(apiKey);
    // Made before it was replaced: its absence from a list taken after `since` is absence.
    const state = await deps.drift.keyState(credentialsId, adapter, client, key.keyId, since, RETIRING_LIST_MAX_AGE_MS);
    const lastUsedAt = parseTime(state.key?.last_used_at ?? undefined);
    const addr = state.key?.last_used_from_addr;
    platform =
      state.state === 'Absent'
        ? { state: 'Absent' }
        : {
            state: 'Live',
            seenAt: state.at,
            ...(lastUsedAt !== undefined ? { lastUsedAt } : {}),
            ...(addr !== undefined && addr !== '' ? { lastUsedFromAddr: addr.slice(0, 64) } : {}),
          };
  } catch (error) {
    platform = {
      state: 'Unknown',
      message:
        (error as { code?: unknown }).code === 'CREDENTIALS_MISSING'
          ? 'the credentials Secret is missing or empty'
          : unverifiableReason(asPlatformFailure(error)).message,
    };
  }
  return { keyId: key.keyId, since, graceMs: rotation.graceMs, maxGraceMs: rotation.maxGraceMs, restart, rollouts, platform };
}
