// The names of the keys the operator issues (docs/clusters.md). An attempt's name ends in the
// resource's tag (5 characters of an HMAC of its uid under the signing key: signing.ts attemptTag)
// and 3 random characters. Without a cluster name (--cluster-name) it is `<base>-<tag><rand>`, the
// format of every release before cluster names; with one, `<base>.<cluster>.<tag><rand>`. The two
// never overlap: the character before the last 8 is `-` in the one and `.` in the other, so a key
// named before cluster names is never read as a named cluster's, nor the reverse. The base is
// spec.keyName (or `<namespace>-<name>`), cut so that the name holds the platform's 64 characters.
//
// Anyone who can create keys can give a key any name: a name says only what the key looks like.
// It is never a reason to revoke a key of another format than this cluster's (orphans.ts), and
// the inventory reports what names say as such (inventory/origins.ts).
import { randomBytes } from 'node:crypto';

/** The platform's longest key name (docs/platform-api.md, create). */
export const KEY_NAME_LIMIT = 64;
/** The longest cluster name: it leaves a base of at least 34 characters. */
export const CLUSTER_NAME_MAX = 20;
/** A cluster name: lower-case letters, digits and `-` inside (a DNS label's characters; no `.`, which ends it in a key's name). */
export const CLUSTER_NAME_SOURCE = `[a-z0-9](?:[-a-z0-9]{0,${CLUSTER_NAME_MAX - 2}}[a-z0-9])?`;
const CLUSTER_NAME = new RegExp(`^${CLUSTER_NAME_SOURCE}$`);

/** The characters after the base: the tag, then the random ones. */
const SUFFIX = 8;
/** How many of them are the resource's tag (signing.ts attemptTag). */
export const ATTEMPT_TAG_LENGTH = 5;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
/** `<base>-<tag><rand>`: the format without a cluster name. */
const UNNAMED = /-([a-z0-9]{8})$/;
/** `<base>.<cluster>.<tag><rand>`: the cluster is the part between the last two dots (it holds none). */
const NAMED = new RegExp(`\\.(${CLUSTER_NAME_SOURCE})\\.([a-z0-9]{8})$`);

/** Why `name` cannot be a cluster name, or undefined when it can ('' is no cluster name: the format without one). */
export function clusterNameProblem(name: string): string | undefined {
  if (name === '' || CLUSTER_NAME.test(name)) return undefined;
  return `at most ${CLUSTER_NAME_MAX} lower-case letters, digits and '-', starting and ending with a letter or digit`;
}

/** What a key's name says of who made it: the cluster ('' for the format without a cluster name) and the resource's tag. */
export interface NameParts {
  cluster: string;
  tag: string;
}

/** The cluster and tag an operator's name carries, or undefined for a name in neither format. */
export function nameParts(name: string): NameParts | undefined {
  const named = NAMED.exec(name);
  if (named !== null) return { cluster: named[1] as string, tag: (named[2] as string).slice(0, ATTEMPT_TAG_LENGTH) };
  const unnamed = UNNAMED.exec(name);
  if (unnamed !== null) return { cluster: '', tag: (unnamed[1] as string).slice(0, ATTEMPT_TAG_LENGTH) };
  return undefined;
}

/**
 * The key under which the drift lists index a name (drift.ts taggedKeys): the tag, and the cluster
 * when the name has one, so that the keys of one resource's attempts by two clusters are apart.
 */
export function tagKey(tag: string, cluster: string): string {
  return cluster === '' ? tag : `${tag}.${cluster}`;
}

/**
 * The tag keys under which this cluster's attempts for a resource of tag `tag` are listed: its own
 * format, and, for a named cluster, the format without a name too (keys made before the name was
 * given, which an upgrade must not lose track of). Never another name's.
 */
export function ownTagKeys(tag: string, cluster: string): string[] {
  return cluster === '' ? [tag] : [tagKey(tag, cluster), tag];
}

/** The longest base a name of this cluster holds. */
export function baseMax(cluster: string): number {
  return cluster === '' ? KEY_NAME_LIMIT - 1 - SUFFIX : KEY_NAME_LIMIT - 2 - cluster.length - SUFFIX;
}

/** An attempt's name: the base (cut to baseMax), the cluster if any, the tag and 3 random characters. */
export function attemptName(base: string, tag: string, cluster = ''): string {
  let suffix = tag;
  for (const b of randomBytes(SUFFIX - tag.length)) suffix += ALPHABET[b % ALPHABET.length];
  const cut = base.slice(0, baseMax(cluster));
  return cluster === '' ? `${cut}-${suffix}` : `${cut}.${cluster}.${suffix}`;
}

/**
 * Who a key's name says made it, from this cluster's point of view (`cluster`: its name, '' when
 * it has none): ThisCluster (this cluster's format), OtherCluster (another cluster's, `cluster`
 * set when that format has one) or ByHand (no operator's format).
 */
export type NameOrigin = { origin: 'ThisCluster' } | { origin: 'OtherCluster'; cluster?: string } | { origin: 'ByHand' };

export function nameOrigin(name: string, cluster: string): NameOrigin {
  const parts = nameParts(name);
  if (parts === undefined) return { origin: 'ByHand' };
  if (parts.cluster === cluster) return { origin: 'ThisCluster' };
  return parts.cluster === '' ? { origin: 'OtherCluster' } : { origin: 'OtherCluster', cluster: parts.cluster };
}
