// The resourceVersions this process wrote, so that the informers can tell the operator's own
// writes from everyone else's. Without it each write woke the key it was made for: the intent
// annotation, the Secret and the status come back as watch events, during the reconcile (and the
// queue runs a key added while in progress again at once, as client-go's does) or after it. A
// refused create was attempted twice per backoff step, and a new key was reconciled again after
// it became Ready.
//
// An event is skipped only when it carries exactly a version one of our writes produced, which is
// a state the writing reconcile already knew and planned for (its requeue is in the queue). Any
// other change, by a person, GitOps or the garbage collector, has another version and wakes the
// key. When an event outruns the response to the write that caused it, the version is not known
// yet and the key is woken: one reconcile too many, never one too few.

/**
 * How an object is named here: `kind/namespace/name`, the controller's queue key for a key resource.
 * One flat string: a template literal makes a rope of its parts (four small strings where one would
 * do), and these names are kept per resource (the rest records, 12,000 at rest).
 */
export function objectRef(kind: string, namespace: string, name: string): string {
  return [kind, namespace, name].join('/');
}

/** How many unconsumed versions are kept per object: a reconcile writes an object a few times. */
const KEEP = 8;

export class OwnWrites {
  readonly #versions = new Map<string, string[]>();
  /** The versions of quiet writes (recordQuiet), per object: at most KEEP each. */
  readonly #quiet = new Map<string, string[]>();

  /**
   * A write of ours took `ref` (objectRef) from version `before`
   * (undefined for a create) to `resourceVersion`. A write that changed nothing keeps the version
   * and makes no event: nothing to record.
   */
  record(ref: string, before: string | undefined, resourceVersion: string | undefined): void {
    if (resourceVersion === undefined || resourceVersion === '' || resourceVersion === before) return;
    const versions = this.#versions.get(ref) ?? [];
    versions.push(resourceVersion);
    if (versions.length > KEEP) versions.shift();
    this.#versions.set(ref, versions);
  }

  /** Whether the object as seen is one of our writes; each recorded version answers yes once. */
  consume(ref: string, resourceVersion: string | undefined): boolean {
    const versions = this.#versions.get(ref);
    if (versions === undefined || resourceVersion === undefined) return false;
    const i = versions.indexOf(resourceVersion);
    if (i < 0) return false;
    // Versions recorded before this one belong to states the watch has already moved past.
    versions.splice(0, i + 1);
    if (versions.length === 0) this.#versions.delete(ref);
    return true;
  }

  /**
   * A write of ours that changed nothing an object's readers read as an input (a finalizer put on a
   * credentials Secret): recorded as any write, and its event wakes no key that names the object.
   * Any other write of ours to an input (another key's Secret used as credentials) wakes them.
   */
  recordQuiet(ref: string, before: string | undefined, resourceVersion: string | undefined): void {
    this.record(ref, before, resourceVersion);
    if (resourceVersion === undefined || resourceVersion === '' || resourceVersion === before) return;
    const quiet = this.#quiet.get(ref) ?? [];
    quiet.push(resourceVersion);
    if (quiet.length > KEEP) quiet.shift();
    this.#quiet.set(ref, quiet);
  }

  /** Whether the object as seen is a quiet write of ours (recordQuiet), without consuming it. */
  quiet(ref: string, resourceVersion: string | undefined): boolean {
    return resourceVersion !== undefined && this.#quiet.get(ref)?.includes(resourceVersion) === true;
  }

  /** Whether the object as seen is one of our writes, without consuming it. */
  mine(ref: string, resourceVersion: string | undefined): boolean {
    return resourceVersion !== undefined && this.#versions.get(ref)?.includes(resourceVersion) === true;
  }

  /** Whether a write of ours to `ref` has not come back as an event yet: a cached copy of it is behind that write. */
  waiting(ref: string): boolean {
    return this.#versions.has(ref);
  }

  /** The object is gone. */
  forget(ref: string): void {
    this.#versions.delete(ref);
    this.#quiet.delete(ref);
  }

  /** Objects with versions waiting for their event (for tests and the memory benchmark). */
  get size(): number {
    return this.#versions.size;
  }
}
