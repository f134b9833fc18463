// The keys at rest: what each rests on (at-rest.ts Verified), when its next drift check is due, and
// the sweep that makes those checks without a pass through the work queue. A pass of the reconciler
// first asks `resume` whether the resource is still at rest; only when it is not does the full pass
// read and decide.
import type { Logger } from 'pino';
import { objectRef } from '../../runtime/own-writes.ts';
import type { ReconcileResult } from '../../runtime/workers.ts';
import type { KeyAdapter } from '../adapter.ts';
import type { KeyDeps, ObjectVersion, ReconcileRecord, RestBroken, Verified } from '../reconcile-context.ts';
import type { Reason } from '../status/conditions.ts';
import { nextLook } from '../rotation-schedule.ts';
import { changedSince } from './at-rest.ts';
import { checkSucceeded, type FailingSince } from './drift-check.ts';
import type { DriftGone } from './drift.ts';
import { patchOperations } from './operations-patch.ts';

type Request = { kind: string; namespace: string; name: string };

/** Credentials versions shared by the records of the resources that rest on one credentials Secret (a few hundred Secrets at most; cleared past it). */
const MAX_CREDENTIALS = 1_024;

/**
 * What a resource rests on, as kept while it rests (12,000 at rest: each byte is kept 12,000 times):
 * every field in the object itself, where a literal with optional parts spread in puts them in a
 * second array; the credentials' version the one object of all the resources of that Secret.
 */
/** Every field of Verified, the optional ones too: a field added there must be added to RestRecord, or it does not compile. */
type EveryField<T> = Record<keyof T, unknown>;

class RestRecord implements Verified, EveryField<Verified> {
  readonly resourceVersion: string;
  readonly writtenOver: string | undefined;
  readonly secretName: string;
  readonly secret: Readonly<ObjectVersion>;
  readonly credentialsNamespace: string;
  readonly credentialsName: string;
  readonly credentials: ObjectVersion;
  readonly issuer: Verified['issuer'];
  readonly credentialsId: string;
  readonly adapter: KeyAdapter;
  readonly keyId: number;
  readonly createdAt: string | undefined;
  readonly attemptTag: string;
  readonly resourceCreatedMs: number | undefined;
  readonly usage: Verified['usage'];
  readonly unusedAfter: string | undefined;
  readonly inUse: string;
  readonly operations: string | undefined;
  readonly nextRotationAt: number | undefined;
  readonly reason: Reason;

  /**
   * `cached`: the resource's and its Secret's identities as the caches hold them now; a version
   * equal to the cache's is kept as the cache's own (its string, the Secret's metadata object), not
   * as a second copy: ~120 bytes a key at rest. A record may then hold a Secret's metadata after the
   * cache replaced it, until its next check finds the new version and ends the rest.
   */
  constructor(v: Verified, credentials: ObjectVersion, cached: { resource?: Readonly<ObjectVersion>; secret?: Readonly<ObjectVersion> }) {
    this.resourceVersion = v.resourceVersion === cached.resource?.resourceVersion ? cached.resource.resourceVersion : v.resourceVersion;
    this.writtenOver = v.writtenOver;
    this.secretName = v.secretName;
    this.secret = cached.secret !== undefined && sameIdentity(cached.secret, v.secret) ? cached.secret : v.secret;
    this.credentialsNamespace = v.credentialsNamespace;
    this.credentialsName = v.credentialsName;
    this.credentials = credentials;
    this.issuer = v.issuer;
    this.credentialsId = v.credentialsId;
    this.adapter = v.adapter;
    this.keyId = v.keyId;
    this.createdAt = v.createdAt;
    this.attemptTag = v.attemptTag;
    this.resourceCreatedMs = v.resourceCreatedMs;
    this.usage = v.usage;
    this.unusedAfter = v.unusedAfter;
    this.inUse = v.inUse;
    this.operations = v.operations;
    this.nextRotationAt = v.nextRotationAt;
    this.reason = v.reason;
  }
}

function sameIdentity(a: Readonly<ObjectVersion>, b: ObjectVersion): boolean {
  return a.uid === b.uid && a.resourceVersion === b.resourceVersion;
}

export class Resting {
  readonly #deps: KeyDeps;
  /** Per resource (kind/namespace/name): since when its drift checks fail (drift-check.ts). */
  readonly failingSince: FailingSince = new Map();
  /** Per resource: what its last full pass verified, when it ended at rest. */
  readonly #verified = new Map<string, Verified>();
  /** Per resource at rest: when its next drift check is due (sweep). */
  readonly #checkAt = new Map<string, number>();
  /**
   * The same due times by the second they fall in, so that a sweep looks only at the seconds that
   * passed since the last one, not at every resource at rest (12,000 at rest: 12,000 entries a
   * second, each an allocation). An entry whose resource was rescheduled or taken out meanwhile no
   * longer matches #checkAt and is dropped when its second comes.
   */
  readonly #bySecond = new Map<number, { trackings: string[]; at: number[] }>();
  /** Credentials Secret uid -> the version the records share. */
  readonly #credentials = new Map<string | undefined, ObjectVersion>();
  /** Every second up to this one was taken from #bySecond (the one before the last sweep's). */
  #sweptTo: number;
  /** Something was put in a second at or before #sweptTo since the last sweep. */
  #late = false;

  constructor(deps: KeyDeps) {
    this.#deps = deps;
    this.#sweptTo = Math.floor(deps.now() / 1000) - 1;
  }

  #schedule(tracking: string, at: number): void {
    this.#checkAt.set(tracking, at);
    const second = Math.floor(at / 1000);
    // A second the sweeps already passed (a check due at once, or a clock set back): the next sweep looks at every second held.
    if (second <= this.#sweptTo) this.#late = true;
    const entries = this.#bySecond.get(second);
    if (entries === undefined) this.#bySecond.set(second, { trackings: [tracking], at: [at] });
    else {
      entries.trackings.push(tracking);
      entries.at.push(at);
    }
  }

  /** The resources whose check is due: taken from the seconds passed; those of the current second not yet due stay for the next sweep. */
  #takeDue(now: number): Map<string, Verified> {
    const due = new Map<string, Verified>();
    const last = Math.floor(now / 1000);
    // Every second held up to now after a long pause (or a clock moved far ahead, or a check put in a
    // second already passed); otherwise only the seconds since the last sweep.
    const seconds =
      this.#late || last - this.#sweptTo > this.#bySecond.size
        ? [...this.#bySecond.keys()].filter((s) => s <= last).sort((a, b) => a - b)
        : Array.from({ length: Math.max(0, last - this.#sweptTo) }, (_, i) => this.#sweptTo + 1 + i);
    this.#late = false;
    const later: { trackings: string[]; at: number[] } = { trackings: [], at: [] };
    for (const second of seconds) {
      const entries = this.#bySecond.get(second);
      if (entries === undefined) continue;
      this.#bySecond.delete(second);
      entries.trackings.forEach((tracking, i) => {
        const at = entries.at[i]!;
        if (this.#checkAt.get(tracking) !== at) return;
        if (at > now) {
          later.trackings.push(tracking);
          later.at.push(at);
          return;
        }
        const verified = this.#verified.get(tracking);
        if (verified === undefined) this.#checkAt.delete(tracking);
        else due.set(tracking, verified);
      });
    }
    // The current second is taken again by the next sweep, with what it holds not yet due.
    this.#sweptTo = last - 1;
    if (later.trackings.length > 0) {
      const current = this.#bySecond.get(last);
      if (current === undefined) this.#bySecond.set(last, later);
      else {
        current.trackings.push(...later.trackings);
        current.at.push(...later.at);
      }
    }
    return due;
  }

  /**
   * The resource rests on what was verified: its drift checks are the sweep's from now on, not
   * passes of the work queue. Only a scheduled rotation keeps a requeue, at its time.
   */
  rests(tracking: string, verified: Verified): ReconcileResult {
    this.#verified.set(tracking, verified instanceof RestRecord ? verified : this.#record(tracking, verified));
    this.#schedule(tracking, this.#nextCheck());
    return verified.nextRotationAt === undefined ? { type: 'Done' } : { type: 'Done', requeueAfterMs: nextLook(this.#deps, verified.nextRotationAt) };
  }

  /**
   * A pass of the resource: still at rest if nothing it rested on changed, or again at rest once
   * only its project's operations changed and one JSON patch wrote them (operations-patch.ts).
   * Undefined: the full pass runs. `resting` tells whether it rested before this pass; what it rested
   * on is taken out first either way: only a pass that ends in sync puts it back.
   */
  async resume(request: Request, logger: Logger, record: ReconcileRecord | undefined): Promise<{ result?: ReconcileResult; resting: boolean }> {
    const tracking = objectRef(request.kind, request.namespace, request.name);
    const verified = this.#verified.get(tracking);
    this.#verified.delete(tracking);
    this.#checkAt.delete(tracking);
    const rest = this.#deps.rest;
    if (verified === undefined || rest === undefined) return { resting: verified !== undefined };
    const broken = await changedSince(this.#deps, rest, this.failingSince, request, verified);
    if (broken === undefined) {
      logger.debug('at rest');
      if (record !== undefined) {
        record.atRest = true;
        record.actions.push('InSync');
        record.reasons.push(verified.reason);
      }
      return { result: this.rests(tracking, verified), resting: true };
    }
    logger.debug({ changed: broken }, 'no longer at rest');
    if (record !== undefined) record.restBroken = broken;
    const patched = broken === 'operations' ? await patchOperations(this.#deps, rest, request, verified, logger) : undefined;
    if (patched === undefined) return { resting: true };
    checkSucceeded(this.#deps, this.failingSince, tracking, 'Live');
    if (record !== undefined) {
      record.operationsPatched = true;
      record.actions.push('InSync');
      record.reasons.push(patched.reason);
    }
    return { result: this.rests(tracking, patched), resting: true };
  }

  /**
   * The resources at rest on what a refreshed drift list no longer shows (drift.ts, DriftGone): their
   * work-queue keys, for the manager to wake them now rather than at their next pass.
   */
  restingOn(gone: DriftGone): string[] {
    const woken: string[] = [];
    for (const [tracking, v] of this.#verified) {
      if (v.credentialsId !== gone.credentialsId) continue;
      const hit =
        gone.what === 'keys'
          ? v.adapter.listScope === gone.listScope && gone.ids.includes(v.keyId)
          : v.adapter.project?.organizationId === gone.organizationId && gone.ids.includes(v.adapter.project.projectId);
      if (hit) woken.push(tracking);
    }
    return woken;
  }

  /**
   * The drift check of every resource at rest whose check is due (changedSince: the caches and the
   * drift list, no apiserver request), made here and not as a pass through the work queue: a pass
   * (a worker, a logger, metrics, a timer, the queue's bookkeeping) costs more than the check itself.
   * Returns the work-queue keys of the resources no longer at rest, for the manager to wake: their
   * pass sees what changed (the same check again, then the operations patch or a full pass). The
   * manager calls this about every second.
   */
  async sweep(): Promise<string[]> {
    const rest = this.#deps.rest;
    if (rest === undefined) return [];
    const due = this.#takeDue(this.#deps.now());
    const woken: string[] = [];
    await Promise.all(
      [...due].map(async ([tracking, verified]) => {
        const [kind, namespace, name] = tracking.split('/') as [string, string, string];
        const startedAt = this.#deps.now();
        // A check that throws is a change too: the pass it wakes looks.
        const broken = await changedSince(this.#deps, rest, this.failingSince, { kind, namespace, name }, verified).catch((): RestBroken => 'check failed');
        // A pass of the resource meanwhile took what it rested on (and left its own, or none).
        if (this.#verified.get(tracking) !== verified) return;
        if (broken !== undefined) {
          // Kept for the pass that is woken (it checks again, and may patch the operations alone).
          this.#checkAt.delete(tracking);
          woken.push(tracking);
          return;
        }
        this.#schedule(tracking, this.#nextCheck());
        this.#deps.onReconcile?.({
          kind,
          namespace,
          name,
          startedAt,
          endedAt: this.#deps.now(),
          actions: ['InSync'],
          reasons: [verified.reason],
          createSent: false,
          atRest: true,
          result: 'Done',
        });
      }),
    );
    return woken;
  }

  #record(tracking: string, verified: Verified): RestRecord {
    const [kind = '', namespace = '', name = ''] = tracking.split('/');
    const rest = this.#deps.rest;
    return new RestRecord(verified, this.#sharedCredentials(verified.credentials), {
      resource: rest?.cachedVersion(kind, namespace, name),
      secret: rest?.cachedVersion('Secret', namespace, verified.secretName),
    });
  }

  #sharedCredentials(version: ObjectVersion): ObjectVersion {
    const known = this.#credentials.get(version.uid);
    if (known !== undefined && known.resourceVersion === version.resourceVersion) return known;
    if (this.#credentials.size >= MAX_CREDENTIALS) this.#credentials.clear();
    const shared = Object.freeze({ uid: version.uid, resourceVersion: version.resourceVersion });
    this.#credentials.set(version.uid, shared);
    return shared;
  }

  /** One drift interval from now, jittered as the work queue's requeues are (runtime/controller.ts): checks spread over the interval. */
  #nextCheck(): number {
    return this.#deps.now() + Math.round(this.#deps.driftIntervalMs * (0.9 + Math.random() * 0.2));
  }
}
