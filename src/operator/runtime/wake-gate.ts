// Which informer events wake a key (controller.ts): held while the key is being reconciled, and
// judged once its writes are recorded; never for a version this process wrote (own-writes.ts);
// during a refusal's backoff, only for a change of spec, of an input, or a deletion.
import type { OwnWrites } from './own-writes.ts';

export interface WakeEvent {
  /** The object the event is about: the reconciled object itself (`ref` is the key) or one it owns. */
  ref: string;
  resourceVersion: string | undefined;
  deleted: boolean;
  /** The reconciled object's, for the backoff hold. */
  generation?: number | undefined;
  deleting?: boolean;
  /** About an object the key refers to (an input): never one of our writes, and it ends a backoff hold. */
  input?: boolean;
}

/** A key backing off from a refusal: until when, and what its object was then. */
interface Hold {
  until: number;
  generation: number | undefined;
  deleting: boolean;
}

export class WakeGate {
  readonly #ownWrites: OwnWrites | undefined;
  readonly #holds = new Map<string, Hold>();
  /** Keys being reconciled, with the informer events about them that arrived meanwhile. */
  readonly #working = new Map<string, WakeEvent[]>();

  constructor(ownWrites: OwnWrites | undefined) {
    this.#ownWrites = ownWrites;
  }

  /**
   * An informer event about a reconciled object or one it owns. Events that arrive while the key
   * is being reconciled are judged when that reconcile ends, once the versions it wrote are
   * recorded: the watch may deliver a write's event before its response. A version this process
   * wrote does not wake the key (own-writes.ts); neither does anything but a change of spec, of an
   * input (a `referenced` object: what was refused may be fixed) or a deletion while the key backs
   * off from a refusal. true: the key is woken (queued).
   */
  admit(key: string, event: WakeEvent): boolean {
    const working = this.#working.get(key);
    if (working !== undefined && !event.deleted) {
      working.push(event);
      return false;
    }
    // An input is never this key's own write (even one this process wrote for another key: that
    // record is the owner's to consume).
    if (!event.deleted && event.input !== true && this.#ownWrites?.consume(event.ref, event.resourceVersion) === true) return false;
    // An input changed by a quiet write of ours (judged here too for an event held while the key was
    // being reconciled: that reconcile's write is recorded by now).
    if (!event.deleted && event.input === true && this.#ownWrites?.quiet(event.ref, event.resourceVersion) === true) return false;
    const hold = this.#holds.get(key);
    if (
      hold !== undefined &&
      !event.deleted &&
      event.input !== true &&
      Date.now() < hold.until &&
      (event.ref !== key || (hold.generation === event.generation && hold.deleting === event.deleting))
    )
      return false;
    this.#holds.delete(key);
    return true;
  }

  /** The key's reconcile starts: its events wait for its end. */
  begin(key: string): void {
    this.#working.set(key, []);
  }

  /** The key's reconcile ended: the events that arrived meanwhile, to judge now. */
  end(key: string): WakeEvent[] {
    const seen = this.#working.get(key) ?? [];
    this.#working.delete(key);
    return seen;
  }

  /** The key backs off from a refusal until `hold.until`. */
  hold(key: string, hold: Hold): void {
    this.#holds.set(key, hold);
  }

  unhold(key: string): void {
    this.#holds.delete(key);
  }
}
