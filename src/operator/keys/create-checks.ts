// What a create says before anything is created: the issuer's cap reached while the key waited for its
// turn, or credentials of the wrong kind (issuing/credentials-kind.ts). Either is reported as a
// blocked outcome, in one status write; nothing is created then.
import type { ReconcileResult } from '../runtime/workers.ts';
import { FINALIZER } from '../resources/schema.ts';
import type { BlockedInputs, Reason } from './status/conditions.ts';
import type { KeyPlatform } from './adapter.ts';
import { capRefusal } from './issuing/credentials-source.ts';
import { wrongCredentialsKind, type KeyKind } from './issuing/credentials-kind.ts';
import { asPlatformFailure, reportPlatformFailure } from './status/platform-failure.ts';
import { blockedInputs, platformOf, type Context, type KeyDeps } from './reconcile-context.ts';
import { updateMetadata, writeStatus } from './status/resource-writes.ts';

/** A create may go on: what its refusals keep of this pass, and the credentials' platform client. */
export interface Checked {
  blocked: BlockedInputs;
  platform: KeyPlatform;
  credentialsId: string;
}

type PlatformFailure = NonNullable<ReturnType<typeof asPlatformFailure>>;

/**
 * `capReached`: the namespace's slots were all taken while this key waited for its turn, said as
 * observe() would have. Else the credentials' kind (credentials-kind.ts): refused when they do not fit
 * the key, or when the platform refuses to say (Unauthorized, Forbidden); not known, the create
 * itself says what is wrong, if anything. `addFinalizer`: a new resource's finalizer, to come with
 * the intent, comes before a refusal of its credentials instead.
 */
export async function checkBeforeCreate(
  deps: KeyDeps,
  ctx: Context,
  capReached: boolean,
  addFinalizer: boolean,
): Promise<{ refused: ReconcileResult } | Checked> {
  const blocked = blockedInputs(ctx);
  const credentials = capReached ? undefined : platformOf(deps, ctx);
  let refusal: { reason: Reason; message: string; hint?: 'KeyIssued'; result: ReconcileResult } | { failure: PlatformFailure };
  if (credentials === undefined) {
    const issuer = ctx.source?.issuer;
    const { reason, message } = capRefusal(issuer?.name ?? '', ctx.resource.metadata.namespace, issuer?.cap ?? 0);
    refusal = { reason, message, result: { type: 'Done', requeueAfterMs: deps.driftIntervalMs } };
  } else {
    const { platform, credentialsId } = credentials;
    const auth = await deps.credentialsKinds
      .of(credentialsId, () => platform.getAuth())
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ failure: asPlatformFailure(error) }),
      );
    if ('failure' in auth) {
      const { failure } = auth;
      if (failure?.code !== 'UNAUTHORIZED' && failure?.code !== 'FORBIDDEN') {
        ctx.logger.debug({ code: failure?.code }, 'GET /auth failed; creating without the credentials check');
        return { blocked, platform, credentialsId };
      }
      refusal = { failure };
    } else {
      const { adapter } = ctx;
      const kind: KeyKind = adapter?.project !== undefined ? 'Project' : adapter?.listScope === 'personal' ? 'Personal' : 'Organization';
      const message = wrongCredentialsKind(kind, auth.value);
      if (message === undefined) return { blocked, platform, credentialsId };
      // The credentials Secret is not watched: looked at again with backoff, as other refusals are.
      refusal = { reason: 'CredentialsWrongKind', message, hint: 'KeyIssued', result: { type: 'Backoff' } };
    }
  }
  // The finalizer that was to come with the intent comes first: the resource is then as it was when
  // the finalizer came on its own.
  const reported =
    addFinalizer && !capReached
      ? {
          ...ctx,
          resource: await updateMetadata(deps, ctx.resource, (m) => {
            m.finalizers = [...(m.finalizers ?? []), FINALIZER];
          }),
        }
      : ctx;
  if ('failure' in refusal) return { refused: await reportPlatformFailure(deps, reported, refusal.failure, 'checking the credentials') };
  const { reason, message, hint, result } = refusal;
  await writeStatus(deps, reported, { blocked, reason, message, ...(hint !== undefined ? { hint } : {}) });
  await deps.events.record(reported.resource, 'Warning', reason, message);
  return { refused: result };
}
