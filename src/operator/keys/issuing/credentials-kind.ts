// Which kind of key the credentials Secret holds (GET /auth: the account the key belongs to and
// its auth method), checked before the first create: a project-scoped or organization key where a
// person's key is needed gets a clear condition at once, instead of a 403 from the create.
//
// Every key the operator creates is created by a user: a personal key (POST /api_keys), an
// organization key and a project-scoped key (POST /organizations/{org}/api_keys, docs/platform-api.md
// "Create organization key": organization administrators; "Create project-scoped key": members).
// So the credentials must be a personal key (auth_method api_key_user). An organization or
// project-scoped key (api_key_org) has no user behind it. /auth cannot tell whether a user is an
// administrator: a member's key asking for an organization key still meets the platform's 403.
import type { AuthDetails } from '../../../platform/index.ts';
import { MAX_CLIENTS } from '../platform-clients.ts';

export type KeyKind = 'Personal' | 'Organization' | 'Project';

const NEEDS: Record<KeyKind, string> = {
  Personal: 'a personal API key of the user the new key is for',
  Organization: 'a personal API key of an administrator of the organization',
  Project: 'a personal API key of a member (to revoke it later, an administrator) of the organization',
};

/** Why these credentials cannot create this kind of key, or undefined when they may. */
export function wrongCredentialsKind(kind: KeyKind, auth: AuthDetails): string | undefined {
  if (auth.auth_method === 'api_key_user') return undefined;
  const what =
    auth.auth_method === 'api_key_org'
      ? `an organization or project-scoped API key (of organization ${auth.account_id}), which acts for no user`
      : `a key whose auth method is ${auth.auth_method}`;
  return `the credentials Secret holds ${what}; a ${kind === 'Project' ? 'ProjectApiKey' : `${kind} ApiKey`} needs ${NEEDS[kind]}`;
}

/**
 * GET /auth answers per credentials, remembered for a while (the credentials' kind does not
 * change; new credentials are other credentials, asked at once). Keyed by the credentials' digest.
 */
export class CredentialsKinds {
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #known = new Map<string, { at: number; auth: AuthDetails }>();
  /** Questions under way: the first creates of a namespace at once (one per worker) share one GET /auth. */
  readonly #asking = new Map<string, Promise<AuthDetails>>();

  constructor(ttlMs: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  async of(credentialsId: string, ask: () => Promise<AuthDetails>): Promise<AuthDetails> {
    const known = this.#known.get(credentialsId);
    if (known !== undefined && this.#now() - known.at < this.#ttlMs) return known.auth;
    const asking = this.#asking.get(credentialsId);
    if (asking !== undefined) return await asking;
    // A failed question is shared by those who asked with it, and not remembered: the next asks again.
    const request = this.#ask(credentialsId, ask).finally(() => this.#asking.delete(credentialsId));
    this.#asking.set(credentialsId, request);
    return await request;
  }

  async #ask(credentialsId: string, ask: () => Promise<AuthDetails>): Promise<AuthDetails> {
    const auth = await ask();
    this.#known.set(credentialsId, { at: this.#now(), auth });
    for (const [id, entry] of this.#known) if (this.#now() - entry.at >= this.#ttlMs) this.#known.delete(id);
    // One per credentials value asked with: bounded as the clients are (platform-clients.ts), oldest first.
    for (const id of this.#known.keys()) {
      if (this.#known.size <= MAX_CLIENTS) break;
      this.#known.delete(id);
    }
    return auth;
  }
}
