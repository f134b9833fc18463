// Keys an interrupted create of a resource left, found by their names. The create
// intent is on the resource, where whoever may edit it can strip or replace it; an attempt whose
// answer was lost (the operator restarted, the connection dropped) and whose intent is then gone
// would leave a live key recorded nowhere. Every attempt's name carries the resource's tag (five
// characters from its uid under the signing key: issuing/signing.ts attemptTag), so the drift list
// of its credentials and scope shows such keys; those made after the resource, recorded nowhere on
// it (its key, retiring and replaced keys) and old enough that no create is still on its way to
// record them (--pending-grace, the age past which another process's intent counts as
// interrupted: 2 minutes by default) are revoked (RevokeOrphans), on a drift pass or at its
// deletion (at any age: no create runs then). Only names in this cluster's format count, and the
// format without a cluster name (keys made before the name was given): a key named like another
// cluster's, whose tag may equal this resource's by chance (5 characters), is never revoked here.
// A create whose answer was lost is recorded by name in status.lostAttempts in the same pass
// (create-protocol.ts), which only the operator writes: a key of such a name is revoked at any age
// (lostAttemptKeys), the operator knowing that attempt ended, and before any grace has passed.
import type { KeyDeps } from '../reconcile-context.ts';
import { ownTagKeys } from '../issuing/key-names.ts';
import type { DriftCache } from './drift.ts';
import type { TaggedKey } from './drift-listing.ts';
import type { LostAttempt } from '../../resources/key-status.ts';

/** created_at has second precision and the platform's clock is not ours. */
const CLOCK_MARGIN_MS = 5_000;

/** A tagged key made after the resource (less the clocks' margin), and at least `minAgeMs` before the list was taken. */
export function isOrphanAge(key: TaggedKey, resourceCreatedMs: number, listedAt: number, minAgeMs: number): boolean {
  return key.createdAt !== undefined && key.createdAt >= resourceCreatedMs - CLOCK_MARGIN_MS && key.createdAt <= listedAt - minAgeMs;
}

/**
 * The keys of the list last taken (no request) whose names carry the resource's tag `tag` in this
 * cluster's format (`cluster`) or in the format without a cluster name (key-names.ts ownTagKeys).
 */
export function ownTagged(
  drift: Pick<DriftCache, 'tagged'>,
  credentialsId: string,
  listScope: string,
  tag: string,
  cluster: string,
): { at: number; keys: readonly TaggedKey[] } | undefined {
  let found: { at: number; keys: readonly TaggedKey[] } | undefined;
  for (const key of ownTagKeys(tag, cluster)) {
    const list = drift.tagged(credentialsId, listScope, key);
    if (list === undefined) continue;
    found = found === undefined ? list : { at: found.at, keys: [...found.keys, ...list.keys] };
  }
  return found;
}

/** The keys of a list carrying the resource's attempt tag and recorded nowhere on it (drift.ts tagged). */
export function orphanKeys(
  deps: Pick<KeyDeps, 'drift' | 'signer'>,
  o: { credentialsId: string; listScope: string; uid: string; createdAt: number | undefined; recorded: readonly (number | undefined)[]; minAgeMs: number },
): number[] {
  const list = ownTagged(deps.drift, o.credentialsId, o.listScope, deps.signer.attemptTag(o.uid), deps.signer.cluster);
  const created = o.createdAt;
  if (list === undefined || list.keys.length === 0 || created === undefined || !Number.isFinite(created)) return [];
  return list.keys.filter((k) => !o.recorded.includes(k.id) && isOrphanAge(k, created, list.at, o.minAgeMs)).map((k) => k.id);
}

/** What the list last taken shows of the attempts in status.lostAttempts (decision-types.ts Observation.lostAttempts). */
export interface LostAttemptsSeen {
  /** Every name listed. */
  names: string[];
  /** Live keys of a listed name, recorded nowhere else: revoked at any age (the operator knows the attempt ended). */
  keys: { keyId: number; keyName: string }[];
  /** Names a list of the credentials that made them, taken at least `graceMs` after the create, shows no key of: dropped. */
  gone: string[];
}

/**
 * The keys of the attempts status.lostAttempts names, in the list of the attempt tag last taken (no
 * request): a key's name is the attempt's when it carries the resource's tag and ends in the same
 * 3 random characters. `fingerprint`: the credentials and list of this pass (as the entries record
 * theirs); another list's silence says nothing of an attempt.
 */
export function lostAttemptKeys(
  deps: Pick<KeyDeps, 'drift' | 'signer'>,
  o: {
    credentialsId: string;
    listScope: string;
    uid: string;
    lost: readonly LostAttempt[];
    fingerprint: string | undefined;
    recorded: readonly (number | undefined)[];
    graceMs: number;
  },
): LostAttemptsSeen {
  const seen: LostAttemptsSeen = { names: o.lost.map((l) => l.keyName), keys: [], gone: [] };
  const list = ownTagged(deps.drift, o.credentialsId, o.listScope, deps.signer.attemptTag(o.uid), deps.signer.cluster);
  if (list === undefined) return seen;
  for (const lost of o.lost) {
    const matching = list.keys.filter((k) => k.rand === lost.keyName.slice(-3));
    const live = matching.filter((k) => !o.recorded.includes(k.id));
    seen.keys.push(...live.map((k) => ({ keyId: k.id, keyName: lost.keyName })));
    const since = Date.parse(lost.since);
    if (
      live.length === 0 &&
      lost.credentialsFingerprint !== undefined &&
      lost.credentialsFingerprint === o.fingerprint &&
      Number.isFinite(since) &&
      list.at >= since + o.graceMs
    ) {
      seen.gone.push(lost.keyName);
    }
  }
  return seen;
}

/** The fingerprint a lost attempt records: of the credentials (their fingerprint) and of the list (scope) that shows its keys. */
export function attemptListFingerprint(
  signer: Pick<KeyDeps['signer'], 'fingerprint'>,
  credentialsFingerprint: string | undefined,
  listScope: string,
): string | undefined {
  return credentialsFingerprint === undefined ? undefined : signer.fingerprint(`lost attempt\n${listScope}\n${credentialsFingerprint}`);
}
