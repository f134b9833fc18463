// What a create waits for before its POST, started while the organization membership of its
// credentials is checked (turns/create-turn.ts) instead of one after the other: the
// credentials' kind (GET /auth, credentials-kind.ts) and, once that kind may create the key, the
// credentials Secret's finalizer (credentials-in-use.ts). Nothing here decides anything: the create
// (create-protocol.ts) checks the kind and keeps the Secret itself, before its intent and its POST,
// and finds the answer remembered or the write under way or done. So a first create of a namespace
// pays the longest of these round trips instead of their sum, and no order between a check and
// what it guards changes: a Secret is kept only for credentials of the right kind, a key enters
// an organization's line only once its credentials belong to it. The one difference: credentials
// the membership check then refuses may have their Secret kept, as any Secret a resource names
// may be (lifted once none names it).
import type { Context, KeyDeps } from '../reconcile-context.ts';
import { platformOf } from '../reconcile-context.ts';
import { keepCredentials } from './credentials-in-use.ts';
import { wrongCredentialsKind, type KeyKind } from './credentials-kind.ts';

/** The kind of key a create makes, as the credentials check names it. */
export function createdKind(adapter: Context['adapter']): KeyKind {
  return adapter?.project !== undefined ? 'Project' : adapter?.listScope === 'personal' ? 'Personal' : 'Organization';
}

/**
 * Starts the credentials check and the credentials Secret's finalizer of a create, not waiting for
 * them. A failure is not reported here: the create asks or writes again and reports it as before.
 */
export function startCreateChecks(deps: KeyDeps, ctx: Context): void {
  if (ctx.apiKey === undefined) return;
  const { platform, credentialsId } = platformOf(deps, ctx);
  const kind = createdKind(ctx.adapter);
  void (async () => {
    const auth = await deps.credentialsKinds.of(credentialsId, () => platform.getAuth());
    if (wrongCredentialsKind(kind, auth) !== undefined || deps.credentialsUsers === undefined) return;
    await keepCredentials(deps.kube, ctx.credentialsSecret, ctx.logger, deps.ownWrites);
  })().catch(() => undefined);
}
