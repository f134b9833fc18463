// The inventory's Ready condition, computed from what was observed (docs/inventory.md, Conditions):
// the reasons are the key domain's for the same failures (keys/status/platform-reasons.ts), so a refused
// key or an unavailable platform reads the same on an inventory as on a key.
import type { AuthDetails, PlatformError } from '../../platform/index.ts';
import type { Condition } from '../resources/key-status.ts';
import { platformFailureReason, type Reason } from '../keys/index.ts';

export type InventoryReason =
  | 'Listed'
  | Extract<
      Reason,
      | 'InvalidSpec'
      | 'CredentialsMissing'
      | 'CredentialsRefused'
      | 'CredentialsWrongKind'
      | 'NotFound'
      | 'RateLimited'
      | 'PlatformUnavailable'
      | 'Error'
      | 'NotAllowed'
      | 'IssuerNotFound'
    >;

export interface ReadyUpdate {
  status: 'True' | 'False';
  reason: InventoryReason;
  message: string;
}

/**
 * Why a list failed. `auth`: what GET /auth said of the credentials, asked only after a 403: an
 * organization or project-scoped key (api_key_org) where it cannot list is the wrong kind of key.
 */
export function listFailed(failure: PlatformError | undefined, scope: 'Personal' | 'Organization', auth?: AuthDetails): ReadyUpdate {
  const id = failure?.requestId !== undefined ? ` (request ${failure.requestId})` : '';
  if (failure?.code === 'FORBIDDEN' && auth?.auth_method === 'api_key_org') {
    const needs =
      scope === 'Personal'
        ? "a personal API key (the personal keys listed are its user's)"
        : "a personal API key of a member of the organization, or an organization key of it (a project-scoped key cannot list the organization's keys)";
    return {
      status: 'False',
      reason: 'CredentialsWrongKind',
      message: `the credentials Secret holds an organization or project-scoped API key (of organization ${auth.account_id}), which may not take this list${id}; the inventory needs ${needs}`,
    };
  }
  if (failure?.code === 'UNAUTHORIZED' || failure?.code === 'FORBIDDEN') {
    return {
      status: 'False',
      reason: 'CredentialsRefused',
      message: `the platform refused the credentials (${failure.status ?? failure.code})${id}; put a valid, unrevoked API key that may list these keys in the credentials Secret`,
    };
  }
  const reason = failure === undefined ? 'PlatformUnavailable' : platformFailureReason(failure);
  const known: InventoryReason = reason === 'NotFound' || reason === 'RateLimited' || reason === 'InvalidSpec' ? reason : 'PlatformUnavailable';
  return {
    status: 'False',
    reason: known,
    message: `the platform did not answer the key list usefully (${failure?.code ?? 'error'}${failure?.status !== undefined ? ` ${failure.status}` : ''})${id}; asked again every drift interval`,
  };
}

/** `withoutDetails`: entries of the status lists shown without their details (status.withoutDetails). */
export function listed(live: number, managed: number, notManaged: number, unused: number, withoutDetails = 0): ReadyUpdate {
  const cut =
    withoutDetails > 0
      ? `; ${withoutDetails} of the keys listed are shown without name, creator, project and address (not kept: docs/inventory.md, Cost; the next list shows them)`
      : '';
  return {
    status: 'True',
    reason: 'Listed',
    message: `${live} live keys: ${managed} managed in this cluster, ${notManaged} not managed, ${unused} unused${cut}`,
  };
}

/** The conditions with Ready set (its lastTransitionTime kept while its status does not change). */
export function withReady(existing: readonly Condition[] | undefined, update: ReadyUpdate, generation: number, now: Date): Condition[] {
  const previous = existing?.find((c) => c.type === 'Ready');
  const ready: Condition = {
    type: 'Ready',
    status: update.status,
    observedGeneration: generation,
    lastTransitionTime: previous !== undefined && previous.status === update.status ? previous.lastTransitionTime : now.toISOString().replace(/\.\d+Z$/, 'Z'),
    reason: update.reason,
    message: update.message,
  };
  return [ready];
}
