// Which creates of an organization go now, and which wait for their turn.
//
// The platform lets an organization create 10 keys per second (src/platform/sliding-window.ts is
// the client's limiter). If each create of a wave waited for the limiter inside its reconcile, it
// would hold a worker for the whole wave, and a key of another organization, a Secret repair or a
// deletion would queue behind it.
//
// So a create is admitted only while fewer than `perOrganization` creates of its organization are
// under way, from the key's turn to the platform's answer (a few times the limiter's capacity:
// enough to keep the limiter busy while the next admitted keys are read and their intents
// written). An admitted create waits for the limiter with its worker given back (runtime
// Worker.release). A create that is not admitted writes nothing and its reconcile ends; the key
// joins its organization's line (create-line.ts: fair turns between namespaces, a broken key
// first), and is woken (queued again) when a create of the organization ends and its turn has
// come: a slot is kept for it until its reconcile comes back. So each key of a wave is read at most
// twice, never once per retry, and the work queue holds no waiting wave.
//
// A new key of an organization whose slots are all taken joins the line before it is read at all
// (waitsForTurn, from the informers' cache): the first look at a wave costs no request.
//
// A slot kept for a key that does not come back for a create (deleted meanwhile, or created by an
// earlier pass) is given to the next in line when that key's reconcile ends, or after `keepMs`.

import { CreateLine, namespaceOf, type Place, type Priority } from './create-line.ts';

export interface Admitted {
  /** The create's platform call has ended (answered, failed or abandoned); once, later calls do nothing. */
  done(): void;
}

/** What a reconcile asks of the organizations' create turns (KeyDeps.turns; create-turn.ts). */
export type CreateTurns = Pick<CreateAdmission, 'admit' | 'ended' | 'waitsForTurn' | 'tell'>;

export interface CreateAdmissionOptions {
  /** Creates of one organization under way at once. */
  perOrganization: number;
  /** Queue a key again (its turn has come): `kind/namespace/name`. */
  wake(key: string): void;
  /** How long a slot is kept for a woken key before the next in line gets it. Default 10 s. */
  keepMs?: number;
  /** A waiting key is told where it stands (tell()) only with at least this many creates before it. Default 50 (5 s at the platform's 10/s). */
  tellAhead?: number;
  /** Keys of one namespace and organization told while that namespace has keys waiting, at most. Default 5. */
  tellPerNamespace?: number;
}

interface Organization {
  /** Creates under way. */
  running: number;
  /** Keys woken for their turn, with the slot kept for each (its expiry timer). */
  kept: Map<string, { at: number; timer: ReturnType<typeof setTimeout> }>;
  /** Keys waiting for their turn, in fair turns between namespaces (create-line.ts). */
  line: CreateLine;
  /** Waiting keys told where they stand (tell()), until their turn. */
  told: Set<string>;
  /** Keys told per namespace since it last had nothing waiting (its backlog). */
  toldIn: Map<string, number>;
}

export class CreateAdmission {
  readonly #o: CreateAdmissionOptions;
  readonly #keepMs: number;
  readonly #orgs = new Map<string, Organization>();

  constructor(options: CreateAdmissionOptions) {
    if (!Number.isInteger(options.perOrganization) || options.perOrganization < 1)
      throw new RangeError(`perOrganization must be a positive integer, got ${options.perOrganization}`);
    this.#o = options;
    this.#keepMs = options.keepMs ?? 10_000;
  }

  /**
   * A create of `key` for `organization` may go now (the Admitted is its slot until done()), or
   * undefined: the key is in the organization's line and will be woken at its turn.
   */
  admit(organization: string, key: string, priority: Priority = 'create'): Admitted | undefined {
    const org = this.#org(organization);
    const kept = org.kept.get(key);
    if (kept !== undefined) {
      clearTimeout(kept.timer);
      org.kept.delete(key);
      return this.#slot(organization, org);
    }
    if (org.line.size === 0 && org.running + org.kept.size < this.#o.perOrganization) {
      org.line.served(key); // a turn, as if it had waited
      return this.#slot(organization, org);
    }
    org.line.add(key, priority);
    return undefined;
  }

  /** Where a key waiting in its organization's line stands (create-line.ts), or undefined when it is not waiting. */
  place(organization: string, key: string): Place | undefined {
    return this.#orgs.get(organization)?.line.place(key);
  }

  /**
   * A new key (never issued, as the informers' cache shows it) whose organization has no slot for
   * it joins the line at once, before anything is read: true. False when it may go on (a slot is
   * kept for it or free); admit() decides once the reconcile comes to its create.
   */
  waitsForTurn(organization: string, key: string): boolean {
    const org = this.#orgs.get(organization);
    if (org === undefined || org.kept.has(key)) return false;
    if (org.line.size === 0 && org.running + org.kept.size < this.#o.perOrganization) return false;
    org.line.add(key, 'create');
    return true;
  }

  /**
   * A reconcile of `key` that started at `startedAt` (Date.now()) has ended: a slot kept for the key
   * before it started and not taken goes to the next in line (the key did not need it).
   */
  ended(key: string, startedAt: number): void {
    for (const [name, org] of this.#orgs) {
      const kept = org.kept.get(key);
      if (kept === undefined || kept.at > startedAt) continue;
      clearTimeout(kept.timer);
      org.kept.delete(key);
      this.#next(name, org);
    }
  }

  /**
   * Where a waiting key stands, when its status should say so: once per wait, for a key with at
   * least `tellAhead` creates before it (a shorter wait ends before anyone reads it), and for at
   * most `tellPerNamespace` keys of a namespace while it has keys waiting: the count starts again
   * only once its backlog is gone. Each told key costs a status write (and a read, for a key sent
   * to the line unread), so in a wave of 1,000 new keys of one namespace a handful are told, not
   * all 1,000, however slowly the wave is applied: a new key's writes stay at four
   * (finalizer and intent, Secret, status, event) plus a few per wave. Never rewritten while the
   * key waits.
   */
  tell(organization: string, key: string): Place | undefined {
    const org = this.#orgs.get(organization);
    if (org === undefined || org.told.has(key)) return undefined;
    // Before place(), which walks the namespace's line up to the key: in a wave, every key after the first few stops here.
    const namespace = namespaceOf(key);
    const told = org.toldIn.get(namespace) ?? 0;
    if (told >= (this.#o.tellPerNamespace ?? 5)) return undefined;
    const place = org.line.place(key);
    if (place === undefined || place.ahead < (this.#o.tellAhead ?? 50)) return undefined;
    org.told.add(key);
    org.toldIn.set(namespace, told + 1);
    return place;
  }

  /** `key` has had its turn: it is no longer told, and its namespace's count starts again once nothing of it waits. */
  #untold(org: Organization, key: string): void {
    org.told.delete(key);
    const namespace = namespaceOf(key);
    if (org.line.waitingIn(namespace) === 0) org.toldIn.delete(namespace);
  }

  /**
   * Organizations kept (tests: bounded). One is kept only while a create of it is under way, a slot
   * is kept for a woken key (at most `keepMs`) or a key waits in its line: the organizations with
   * creates in progress, never every id ever named. Only an organization the credentials belong to
   * gets here (create-turn.ts, organization-membership.ts).
   */
  get size(): number {
    return this.#orgs.size;
  }

  /** Keys waiting in line, over every organization (metrics, tests). */
  waiting(): number {
    let n = 0;
    for (const org of this.#orgs.values()) n += org.line.size;
    return n;
  }

  #org(name: string): Organization {
    let org = this.#orgs.get(name);
    if (org === undefined) {
      org = { running: 0, kept: new Map(), line: new CreateLine(), told: new Set(), toldIn: new Map() };
      this.#orgs.set(name, org);
    }
    return org;
  }

  #slot(name: string, org: Organization): Admitted {
    org.running++;
    let open = true;
    return {
      done: () => {
        if (!open) return;
        open = false;
        org.running--;
        this.#next(name, org);
      },
    };
  }

  /** Slots free: the next keys in line are woken, a slot kept for each. */
  #next(name: string, org: Organization): void {
    while (org.line.size > 0 && org.running + org.kept.size < this.#o.perOrganization) {
      const key = org.line.next() as string;
      this.#untold(org, key);
      const timer = setTimeout(() => {
        if (org.kept.get(key)?.timer !== timer) return;
        org.kept.delete(key);
        this.#next(name, org);
      }, this.#keepMs);
      timer.unref();
      org.kept.set(key, { at: Date.now(), timer });
      this.#o.wake(key);
    }
    if (org.running === 0 && org.kept.size === 0 && org.line.size === 0) this.#orgs.delete(name);
  }
}
