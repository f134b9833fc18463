// The drift check of one recorded key (docs/design.md section 3.5), through the shared lists of
// drift.ts: is it in the platform's list, and for a ProjectApiKey, is its project still the
// organization's. A check that cannot ask the platform is an observation too (Unverifiable).
import type { Logger } from 'pino';
import type { KeyAdapter, KeyPlatform, ListedUse } from '../adapter.ts';
import type { Reason } from '../status/conditions.ts';
import type { Observation } from '../decision-types.ts';
import { asPlatformFailure, unverifiableReason } from '../status/platform-failure.ts';
import type { KeyDeps } from '../reconcile-context.ts';

/**
 * The drift lookups of one recorded key with one credentials' client, through the cache: is it in
 * the platform's list, and for a ProjectApiKey, is its project still the organization's.
 */
export async function lookUpRecordedKey(
  deps: KeyDeps,
  client: { credentialsId: string; platform: KeyPlatform },
  adapter: KeyAdapter,
  keyId: number,
  createdAt: string | undefined,
): Promise<{
  key: 'Live' | 'Absent';
  listed: ListedUse | undefined;
  project: Observation['platform']['project'];
}> {
  const created = createdAt !== undefined ? Date.parse(createdAt) : undefined;
  const state = await deps.drift.keyState(client.credentialsId, adapter, client.platform, keyId, Number.isFinite(created) ? created : undefined);
  const { project } = adapter;
  const inOrganization =
    project === undefined
      ? undefined
      : await deps.drift.projectInOrganization(client.credentialsId, client.platform, project.organizationId, project.projectId);
  return { key: state.state, listed: state.key, project: inOrganization === undefined ? 'Unknown' : inOrganization ? 'InOrganization' : 'NotInOrganization' };
}

/** A drift check of a resource succeeded: it is no longer failing, and it is counted. */
export function checkSucceeded(deps: KeyDeps, failingSince: FailingSince, trackingKey: string, key: 'Live' | 'Absent'): void {
  failingSince.delete(trackingKey);
  deps.onDriftCheck?.(key === 'Live' ? 'live' : 'absent');
}

/** Per resource (kind/namespace/name): since when its drift checks fail (cleared by a success, or when it is gone). */
export type FailingSince = Map<string, number>;

/**
 * The drift check of a recorded key: is it in the platform's list (one list per credentials and
 * scope, through the cache), and for a ProjectApiKey, is its project still the organization's.
 * A check that cannot ask the platform is an observation too (Unverifiable, with why and since
 * when): nothing is minted or revoked on its strength.
 */
export async function checkRecordedKey(
  deps: KeyDeps,
  failingSince: FailingSince,
  check: {
    trackingKey: string;
    adapter: KeyAdapter;
    /** The credentials, when present. */
    apiKey: string | undefined;
    keyId: number;
    /** status.createdAt of the key. */
    createdAt: string | undefined;
    logger: Logger;
  },
): Promise<{ platform: Observation['platform']; listed: ListedUse | undefined }> {
  const { trackingKey, adapter, apiKey, keyId, logger } = check;
  const platform: Observation['platform'] = { key: 'Unknown', project: 'Unknown' };
  let listed: ListedUse | undefined;
  try {
    if (apiKey === undefined) throw Object.assign(new Error('no credentials'), { code: 'CREDENTIALS_MISSING' });
    const found = await lookUpRecordedKey(deps, deps.platformFor(apiKey), adapter, keyId, check.createdAt);
    platform.key = found.key;
    platform.project = found.project;
    listed = found.listed;
    checkSucceeded(deps, failingSince, trackingKey, found.key);
  } catch (error) {
    // Once it has failed for unverifiedAfterMs the conditions say so (decision.ts, Unverifiable).
    const failure = asPlatformFailure(error);
    const since = failingSince.get(trackingKey) ?? deps.now();
    failingSince.set(trackingKey, since);
    deps.onDriftCheck?.('failed');
    const { reason, message }: { reason: Reason; message: string } =
      (error as { code?: unknown }).code === 'CREDENTIALS_MISSING'
        ? { reason: 'CredentialsMissing', message: 'the credentials Secret (spec.credentialsSecretRef) is missing or empty; put a platform API key there' }
        : unverifiableReason(failure);
    platform.key = 'Unverifiable';
    platform.check = { reason, message, failingForMs: deps.now() - since, reportAfterMs: deps.unverifiedAfterMs };
    logger.warn({ code: failure?.code ?? 'unknown' }, 'drift check failed');
  }
  return { platform, listed };
}
