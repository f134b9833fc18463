// Whether the credentials of a namespace belong to the organization a resource names.
//
// spec.organizationId is the tenant's to write. Without this check a create for any organization
// id entered that organization's line and fair limiter, and held a slot there until the platform
// refused it (403/404): a tenant naming another team's organization took a share of that
// organization's creates, and random ids grew the per-organization structures without bound. So a
// create with credentials of the namespace is admitted to an organization's line only once GET
// /users/me/organizations, asked with those credentials, lists it (an organization or
// project-scoped key lists the one organization that owns it). An issuer's organization is its own
// and verified by the issuer (src/operator/issuers): its creates are not asked again.
//
// Answers are remembered per credentials value for `ttlMs` (a membership rarely changes; new
// credentials are other credentials, asked at once), at most MAX_CLIENTS of them, each at most
// MAX_ORGANIZATIONS ids: bounded in bytes whatever the tenants name (256 × 100 ids of at most 64
// characters: under 3 MiB however used, about 20 KiB for a few credentials). A new key waits in its
// organization's line before it is read only when its credentials Secret, at the version the cache
// holds, was found a member (knownMember): a Secret edited since is asked again first. A new key
// through a ClusterKeyIssuer waits there unread only when a create of its namespace through that
// issuer, at the generation the cache holds, was let into that very organization's line
// (knownIssuer): an issuerRef alone says nothing of the organization a tenant writes beside it.
import { MAX_CLIENTS } from '../platform-clients.ts';

/** The organizations of one credentials value kept at most: for a user in more, one not kept is asked about again each time. */
export const MAX_ORGANIZATIONS = 100;

interface Known {
  at: number;
  organizations: ReadonlySet<string>;
  /** The answer listed more than MAX_ORGANIZATIONS: absence from the set says nothing. */
  truncated: boolean;
}

/** What OrganizationMemberships keeps: credentials values, organization ids of their answers, credentials Secrets' versions, issuers' generations. */
export interface MembershipsKept {
  credentials: number;
  organizations: number;
  secrets: number;
  issuers: number;
}

export class OrganizationMemberships {
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #known = new Map<string, Known>();
  readonly #asking = new Map<string, Promise<Known>>();
  /** `namespace/name@resourceVersion` of a credentials Secret to the credentials value it held (its digest). */
  readonly #secrets = new Map<string, string>();
  /** `namespace/issuer@uid@generation` to the organization a create of that namespace through that issuer was admitted to. */
  readonly #issuers = new Map<string, string>();

  constructor(ttlMs: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  /** Whether the credentials belong to the organization: asked once per `ttlMs` (concurrent askers share one request). */
  async isMember(credentialsId: string, organizationId: string, ask: () => Promise<readonly { id: string }[]>): Promise<boolean> {
    const known = this.#fresh(credentialsId) ?? (await this.#ask(credentialsId, ask));
    if (known.organizations.has(organizationId) || !known.truncated) return known.organizations.has(organizationId);
    return (await ask()).some((o) => o.id === organizationId);
  }

  /** The credentials Secret at this version holds these credentials (learnt when a reconcile read it). */
  learn(secretVersion: string, credentialsId: string): void {
    this.#secrets.delete(secretVersion);
    this.#secrets.set(secretVersion, credentialsId);
    for (const key of this.#secrets.keys()) {
      if (this.#secrets.size <= MAX_CLIENTS) break;
      this.#secrets.delete(key);
    }
  }

  /** A create of the namespace through the issuer at this generation (`namespace/issuer@uid@generation`) went to the organization's line. */
  learnIssuer(issuerVersion: string, organizationId: string): void {
    this.#issuers.delete(issuerVersion);
    this.#issuers.set(issuerVersion, organizationId);
    for (const key of this.#issuers.keys()) {
      if (this.#issuers.size <= MAX_CLIENTS) break;
      this.#issuers.delete(key);
    }
  }

  /** Whether a create of the namespace through the issuer at this generation went to this organization's line. */
  knownIssuer(issuerVersion: string, organizationId: string): boolean {
    return this.#issuers.get(issuerVersion) === organizationId;
  }

  /** Whether the credentials Secret at this version is known, now, to belong to the organization. */
  knownMember(secretVersion: string, organizationId: string): boolean {
    const credentialsId = this.#secrets.get(secretVersion);
    return credentialsId !== undefined && this.#fresh(credentialsId)?.organizations.has(organizationId) === true;
  }

  /** What is kept (tests: bounded whatever the tenants name). */
  get size(): MembershipsKept {
    let organizations = 0;
    for (const known of this.#known.values()) organizations += known.organizations.size;
    return { credentials: this.#known.size, organizations, secrets: this.#secrets.size, issuers: this.#issuers.size };
  }

  #fresh(credentialsId: string): Known | undefined {
    const known = this.#known.get(credentialsId);
    return known !== undefined && this.#now() - known.at < this.#ttlMs ? known : undefined;
  }

  async #ask(credentialsId: string, ask: () => Promise<readonly { id: string }[]>): Promise<Known> {
    const asking = this.#asking.get(credentialsId);
    if (asking !== undefined) return await asking;
    const request = (async () => {
      const answer = await ask();
      const organizations = new Set(answer.slice(0, MAX_ORGANIZATIONS).map((o) => o.id));
      const known = { at: this.#now(), organizations, truncated: answer.length > MAX_ORGANIZATIONS };
      this.#known.delete(credentialsId);
      this.#known.set(credentialsId, known);
      for (const [id, entry] of this.#known) {
        if (this.#known.size <= MAX_CLIENTS && this.#now() - entry.at < this.#ttlMs) break;
        this.#known.delete(id);
      }
      return known;
    })();
    this.#asking.set(credentialsId, request);
    try {
      return await request;
    } finally {
      this.#asking.delete(credentialsId);
    }
  }
}
