// A create's turn, as the reconciler sees it: whether a new key waits for its turn unread
// (waitsUnread), and a create run in its turn (inTurn). Behind them: the membership check that lets
// a create into an organization's line, the admission (create-admission.ts) and its line
// (create-line.ts), the message of a key that waits, and the waiter the create's platform call
// hands the organization's fair limiter (fair-limiter.ts).
import type { KindName } from '../../resources/schema.ts';
import type { KeyPlatform } from '../adapter.ts';
import { blockedInputs, platformOf, type Context, type KeyDeps } from '../reconcile-context.ts';
import type { ReconcileResult } from '../../runtime/workers.ts';
import { startCreateChecks } from '../issuing/create-head-start.ts';
import { cachedCopy } from '../observing/cache-projection.ts';
import { blockedConditions, creatingConditions } from '../status/conditions.ts';
import { asPlatformFailure, reportPlatformFailure } from '../status/platform-failure.ts';
import { writeStatus } from '../status/resource-writes.ts';
import type { Priority } from './create-line.ts';
import { CreateWaiter } from './fair-limiter.ts';

/** How long an answer of GET /users/me/organizations is kept (organization-membership.ts). */
export const MEMBERSHIP_TTL_MS = 5 * 60_000;

/** A ClusterKeyIssuer at one generation, for one namespace's keys (organization-membership.ts knownIssuer). */
export function issuerVersion(namespace: string, issuer: string, uid: string, generation: number | undefined): string {
  return `${namespace}/${issuer}@${uid}@${generation ?? ''}`;
}

/**
 * What a create is for, in the order creates of one organization go (create-line.ts): a key whose
 * consumers are broken now (drift repair: Secret deleted or tampered, key revoked outside) first,
 * then a requested rotation, a first create, a scheduled rotation.
 */
export function createPriority(action: { replaces?: number; rotation?: { request?: string } }): Priority {
  if (action.rotation !== undefined) return action.rotation.request !== undefined ? 'requested-rotation' : 'scheduled-rotation';
  return action.replaces !== undefined ? 'repair' : 'create';
}

/**
 * A new key, unread, of an organization whose creates are all under way (its credentials already
 * known to belong to it): true when it joined the organization's line, and said where it stands if
 * it is told (tellPlace); it is woken at its turn.
 */
export async function waitsUnread(deps: KeyDeps, organization: string, key: string): Promise<boolean> {
  if (deps.turns?.waitsForTurn(organization, key) !== true) return false;
  await tellPlace(deps, organization, key, undefined);
  return true;
}

/**
 * A create of an organization's key runs when its organization's turn allows, with the worker
 * given back while it waits for the platform's rate limit; otherwise nothing is written and the key
 * is woken at its turn. The turn ends with the platform's answer to the create (the Secret and
 * status writes after it do not hold the organization's next key back). Personal keys are not
 * limited per organization.
 */
export async function inTurn(deps: KeyDeps, ctx: Context, priority: Priority, run: (paced: KeyDeps) => Promise<ReconcileResult>): Promise<ReconcileResult> {
  const { turns } = deps;
  const { adapter, worker, resource } = ctx;
  const organization = adapter?.listScope.startsWith('org:') === true ? adapter.listScope.slice('org:'.length) : undefined;
  if (organization === undefined) return run(deps);
  const issuer = ctx.source?.issuer;
  // The credentials' kind and the credentials Secret's finalizer, beside the membership check (issuing/create-head-start.ts).
  startCreateChecks(deps, ctx);
  // Credentials of the namespace: into the organization's line, and to its limiter, only once they
  // are known to belong to it, whatever the create is for. An issuer's create is of the issuer's
  // organization (credentials-source.ts refuses any other).
  if (issuer === undefined) {
    const refused = await notAMember(deps, ctx, organization);
    if (refused !== undefined) return refused;
  }
  if (turns === undefined || worker === undefined) return run(deps);
  const key = `${resource.kind}/${resource.metadata.namespace}/${resource.metadata.name}`;
  // A new key of this namespace through this issuer generation may wait for this organization unread from now on (waitsUnread).
  if (issuer?.uid !== undefined && issuer.organizationId === organization) {
    deps.memberships.learnIssuer(issuerVersion(resource.metadata.namespace, issuer.name, issuer.uid, issuer.generation), organization);
  }
  const slot = turns.admit(organization, key, priority);
  if (slot === undefined) {
    ctx.logger.debug({ organization }, 'create waits for its turn in the organization');
    if (ctx.record !== undefined) ctx.record.deferred = true;
    if (priority === 'create') await tellPlace(deps, organization, key, ctx);
    return { type: 'Done' };
  }
  const waiter = new CreateWaiter(key, priority);
  const answered = (): void => slot.done();
  const paced: KeyDeps = {
    ...deps,
    platformFor: (apiKey) => {
      const client = deps.platformFor(apiKey);
      return { ...client, platform: createsInTurn(client.platform, waiter, answered) };
    },
  };
  try {
    return await worker.release(run(paced));
  } finally {
    slot.done();
  }
}

/**
 * The platform client of a create in its turn: its create call hands the client the turn's waiter
 * (for the organization's fair limiter: fair-limiter.ts) and ends the turn with the platform's
 * answer, or its failure.
 */
function createsInTurn(platform: KeyPlatform, waiter: CreateWaiter, answered: () => void): KeyPlatform {
  return {
    createOrganizationKey: (orgId, body, opts) => platform.createOrganizationKey(orgId, body, { ...opts, waiter }).finally(answered),
    createPersonalKey: platform.createPersonalKey.bind(platform),
    listPersonalKeys: platform.listPersonalKeys.bind(platform),
    listOrganizationKeys: platform.listOrganizationKeys.bind(platform),
    revokePersonalKey: platform.revokePersonalKey.bind(platform),
    revokeOrganizationKey: platform.revokeOrganizationKey.bind(platform),
    listProjects: platform.listProjects.bind(platform),
    getAuth: platform.getAuth.bind(platform),
    listMyOrganizations: platform.listMyOrganizations.bind(platform),
  };
}

/**
 * Refuses a create whose credentials of the namespace do not belong to the organization it names
 * (GET /users/me/organizations, organization-membership.ts): NotAllowed, a Warning, no platform
 * create and no place in that organization's line. Undefined when they belong to it.
 */
async function notAMember(deps: KeyDeps, ctx: Context, organization: string): Promise<ReconcileResult | undefined> {
  const { platform, credentialsId } = platformOf(deps, ctx);
  const { namespace } = ctx.resource.metadata;
  const secretName = ctx.spec?.credentialsSecretRef?.name;
  if (secretName !== undefined && ctx.credentialsVersion?.resourceVersion !== undefined)
    deps.memberships.learn(`${namespace}/${secretName}@${ctx.credentialsVersion.resourceVersion}`, credentialsId);
  let member: boolean;
  try {
    member = await deps.memberships.isMember(credentialsId, organization, () => platform.listMyOrganizations());
  } catch (error) {
    return reportPlatformFailure(deps, ctx, asPlatformFailure(error), `checking that the credentials belong to organization ${organization}`, error);
  }
  if (member) return undefined;
  const message = `the credentials in Secret ${secretName ?? '?'} do not belong to organization ${organization} (GET /users/me/organizations does not list it): no key is created for it`;
  await writeStatus(deps, ctx, blockedConditions(blockedInputs(ctx), 'NotAllowed', message, 'KeyIssued'));
  await deps.events.record(ctx.resource, 'Warning', 'NotAllowed', message);
  return { type: 'Done', requeueAfterMs: deps.driftIntervalMs };
}

/**
 * A new key waiting in its organization's line long enough to be seen says where it stands, in its
 * Ready=False message (CreateAdmission.tell decides which keys, once per wait): how many creates of
 * the organization go before it, and how many of them are its own namespace's, so a team can tell
 * its own backlog from a fair wait. `ctx`: the resource as read by this reconcile; without it (a key
 * sent to the line unread) it is taken from the cache or read now. Best effort: a write that fails is not retried.
 */
async function tellPlace(deps: KeyDeps, organization: string, key: string, ctx: Context | undefined): Promise<void> {
  const place = deps.turns?.tell(organization, key);
  if (place === undefined) return;
  try {
    const [kind, namespace, name] = key.split('/') as [KindName, string, string];
    // A key sent to the line unread: its cached copy when the cache keeps it whole (the status
    // patch carries its resourceVersion: a stale copy's gets 409, and nothing is said).
    const resource =
      ctx?.resource ?? cachedCopy(deps.cachedKey?.(kind, namespace, name), kind, namespace, name) ?? (await deps.kube.readResource(kind, namespace, name));
    if (resource === undefined || resource.status?.keyId !== undefined) return;
    const message =
      `waiting for its turn to create a key in organization ${organization}: ${place.ahead} ` +
      `creates of the organization go before it, ${place.aheadInNamespace} of them of namespace ${namespace} (turns ` +
      `go in fair turns between the namespaces with creates waiting, at the platform's 10 creates per second)`;
    await writeStatus(deps, ctx ?? { resource }, creatingConditions(message));
  } catch (error) {
    const logger = ctx?.logger;
    logger?.debug({ err: error }, 'could not write where the key waits');
  }
}
