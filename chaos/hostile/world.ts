// What the campaign knows while it runs: every ApiKey and ProjectApiKey of the cluster as the
// administrator sees it (one watch per kind, listed again whenever a watch ends), and the journal of
// every action a tenant or a victim team took, numbered, so a violation names the actions on the
// resource it concerns and the ones just before it.
import { Watch, type CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { intentSettled } from '../../test/operator/support.ts';
import { GROUP, VERSION } from './cluster.ts';

export type Kind = 'ApiKey' | 'ProjectApiKey';
export const plural = (kind: Kind): string => (kind === 'ApiKey' ? 'apikeys' : 'projectapikeys');

interface RawResource {
  kind: Kind;
  metadata: { name: string; namespace: string; uid: string; generation?: number; deletionTimestamp?: string; annotations?: Record<string, string> };
  spec?: { keyName?: string; projectId?: string; issuerRef?: { name?: string } };
  status?: {
    keyId?: number;
    keyName?: string;
    secretName?: string;
    observedGeneration?: number;
    retiringKeys?: { keyId: number }[];
    replacedKeys?: { keyId: number }[];
    lostAttempts?: { keyName: string }[];
    conditions?: { type: string; status: string; reason: string; message: string }[];
  };
}

export interface Seen {
  kind: Kind;
  namespace: string;
  name: string;
  uid: string;
  keyName: string | undefined;
  /** The issuer it names (spec.issuerRef), if any. */
  issuer: string | undefined;
  projectId: string | undefined;
  keyId: number | undefined;
  retiring: number[];
  /** Names of creates whose answer was lost (status.lostAttempts): a key of such a name is recorded by it. */
  lostAttempts: string[];
  secretName: string | undefined;
  ready: boolean;
  reason: string;
  message: string;
  settled: boolean;
  deleting: boolean;
}

export const id = (namespace: string, kind: Kind, name: string): string => `${namespace}/${kind}/${name}`;

function project(r: RawResource, kind: Kind): Seen {
  const ready = r.status?.conditions?.find((c) => c.type === 'Ready');
  return {
    kind,
    namespace: r.metadata.namespace,
    name: r.metadata.name,
    uid: r.metadata.uid,
    keyName: r.spec?.keyName ?? `${r.metadata.namespace}-${r.metadata.name}`,
    issuer: r.spec?.issuerRef?.name,
    projectId: r.spec?.projectId,
    keyId: r.status?.keyId,
    // Retiring after a rotation, or replaced by a repair and not revoked yet: recorded beside the key.
    retiring: [...(r.status?.retiringKeys ?? []), ...(r.status?.replacedKeys ?? [])].map((k) => k.keyId),
    lostAttempts: (r.status?.lostAttempts ?? []).map((l) => l.keyName),
    secretName: r.status?.secretName,
    ready: ready?.status === 'True' && r.status?.observedGeneration === r.metadata.generation,
    reason: ready?.reason ?? '',
    message: (ready?.message ?? '').slice(0, 300),
    settled: intentSettled(r as never),
    deleting: r.metadata.deletionTimestamp !== undefined,
  };
}

export class ResourceWatch {
  readonly current = new Map<string, Seen>();
  /** Every keyName ever seen, with the resources that used it (for attribution of a key). */
  readonly keyNames = new Map<string, Set<string>>();
  /** Every key id a resource ever recorded (status.keyId, status.retiringKeys), with those resources. */
  readonly recordedBy = new Map<number, Set<string>>();
  /** Resources gone (their DELETED seen), with their last state and when (ms): what a violation about their keys shows. */
  readonly gone = new Map<string, { last: Seen; at: number }>();
  /** Every Ready reason seen, with the resources that had it. */
  readonly reasonsSeen = new Map<string, Set<string>>();
  /** Per resource (uid): the sources it named while it held a key (an issuer's name, or `credentials`). */
  readonly sourcesHolding = new Map<string, Set<string>>();
  readonly #listeners: ((before: Seen | undefined, after: Seen | undefined) => void)[] = [];
  readonly #objects: CustomObjectsApi;
  readonly #watch: Watch;
  #stopped = false;
  readonly #controllers: AbortController[] = [];

  constructor(kubeConfig: KubeConfig, objects: CustomObjectsApi) {
    this.#objects = objects;
    this.#watch = new Watch(kubeConfig);
  }

  onChange(listener: (before: Seen | undefined, after: Seen | undefined) => void): void {
    this.#listeners.push(listener);
  }

  #apply(kind: Kind, type: string, raw: RawResource): void {
    const key = id(raw.metadata.namespace, kind, raw.metadata.name);
    const before = this.current.get(key);
    const after = type === 'DELETED' ? undefined : project(raw, kind);
    if (after !== undefined) {
      this.current.set(key, after);
      if (after.keyName !== undefined) {
        const set = this.keyNames.get(after.keyName) ?? new Set<string>();
        set.add(key);
        this.keyNames.set(after.keyName, set);
      }
      if (after.keyId !== undefined) {
        const set = this.sourcesHolding.get(after.uid) ?? new Set<string>();
        set.add(after.issuer ?? 'credentials');
        this.sourcesHolding.set(after.uid, set);
      }
      if (after.reason !== '') {
        const set = this.reasonsSeen.get(after.reason) ?? new Set<string>();
        set.add(key);
        this.reasonsSeen.set(after.reason, set);
      }
      for (const keyId of [...(after.keyId !== undefined ? [after.keyId] : []), ...after.retiring]) {
        const set = this.recordedBy.get(keyId) ?? new Set<string>();
        set.add(key);
        this.recordedBy.set(keyId, set);
      }
    } else {
      if (before !== undefined) this.gone.set(key, { last: before, at: Date.now() });
      this.current.delete(key);
    }
    for (const listener of this.#listeners) listener(before, after);
  }

  async start(): Promise<void> {
    for (const kind of ['ApiKey', 'ProjectApiKey'] as const) await this.#follow(kind);
  }

  async #follow(kind: Kind): Promise<void> {
    if (this.#stopped) return;
    let listed: { items: RawResource[]; metadata: { resourceVersion: string } };
    try {
      listed = (await this.#objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: plural(kind) })) as typeof listed;
    } catch {
      setTimeout(() => void this.#follow(kind), 500).unref();
      return;
    }
    const names = new Set(listed.items.map((r) => id(r.metadata.namespace, kind, r.metadata.name)));
    for (const [key, seen] of this.current)
      if (seen.kind === kind && !names.has(key))
        this.#apply(kind, 'DELETED', { kind, metadata: { name: seen.name, namespace: seen.namespace, uid: seen.uid } });
    for (const item of listed.items) this.#apply(kind, 'MODIFIED', item);
    const again = (): void => {
      if (!this.#stopped) setTimeout(() => void this.#follow(kind), 200).unref();
    };
    try {
      this.#controllers.push(
        await this.#watch.watch(
          `/apis/${GROUP}/${VERSION}/${plural(kind)}`,
          { resourceVersion: listed.metadata.resourceVersion, allowWatchBookmarks: false },
          (type, obj: RawResource) => {
            if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') this.#apply(kind, type, obj);
          },
          again,
        ),
      );
    } catch {
      again();
    }
  }

  /** Key ids recorded by an existing resource (status.keyId, status.retiringKeys, status.replacedKeys). */
  recorded(): Map<number, string> {
    const out = new Map<number, string>();
    for (const [key, seen] of this.current) {
      if (seen.keyId !== undefined) out.set(seen.keyId, key);
      for (const k of seen.retiring) out.set(k, key);
    }
    return out;
  }

  /** Key names recorded by an existing resource (status.lostAttempts: creates whose answer was lost), as status, written by the operator only. */
  recordedNames(): Map<string, string> {
    const out = new Map<string, string>();
    for (const [key, seen] of this.current) for (const name of seen.lostAttempts) out.set(name, key);
    return out;
  }

  stop(): void {
    this.#stopped = true;
    for (const c of this.#controllers) c.abort();
  }
}

export interface Action {
  n: number;
  t: number;
  who: string;
  action: string;
  target: string;
  outcome: string;
}

export class Journal {
  readonly actions: Action[] = [];
  readonly #started: number;
  readonly counts = new Map<string, { done: number; refused: number }>();

  constructor(started: number) {
    this.#started = started;
  }

  /** Records an action; outcome 'ok', 'refused <code>' (the apiserver said no) or 'failed ...'. */
  add(who: string, action: string, target: string, outcome: string): Action {
    const a: Action = { n: this.actions.length + 1, t: Math.round((Date.now() - this.#started) / 100) / 10, who, action, target, outcome };
    this.actions.push(a);
    const c = this.counts.get(action) ?? { done: 0, refused: 0 };
    if (outcome === 'ok') c.done += 1;
    else c.refused += 1;
    this.counts.set(action, c);
    return a;
  }

  /** The actions on a target (namespace/Kind/name or namespace/Secret/name, or a prefix of one). */
  on(targetPrefix: string, limit = 12): string[] {
    return this.actions
      .filter((a) => a.target.startsWith(targetPrefix))
      .slice(-limit)
      .map(format);
  }

  /** The actions on a resource and on the Secret of its name (where the operator writes its key by default). */
  about(resource: string, limit = 12): string[] {
    const [namespace, , name] = resource.split('/');
    const secret = `${namespace}/Secret/${name}`;
    return this.actions
      .filter((a) => a.target === resource || a.target === secret)
      .slice(-limit)
      .map(format);
  }

  /** The last actions before now (optionally of one who). */
  recent(seconds: number, who?: string, limit = 12): string[] {
    const since = (Date.now() - this.#started) / 1000 - seconds;
    return this.actions
      .filter((a) => a.t >= since && (who === undefined || a.who === who))
      .slice(-limit)
      .map(format);
  }

  /** Seconds since the start of the run at a wall-clock time (ms). */
  at(ms: number): number {
    return Math.round((ms - this.#started) / 100) / 10;
  }

  /** The last actions before a moment (seconds since the start), not those of `but`. */
  before(tS: number, seconds: number, but: string, limit = 8): string[] {
    return this.actions
      .filter((a) => a.t <= tS && a.t >= tS - seconds && a.who !== but)
      .slice(-limit)
      .map(format);
  }

  /** Actions by kind over a window, e.g. { 'secret.big': 40, ... } (what was going on at a moment). */
  mix(fromS: number, toS: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const a of this.actions) if (a.t >= fromS && a.t <= toS && a.outcome === 'ok') out[a.action] = (out[a.action] ?? 0) + 1;
    return out;
  }
}

/** A resource's state as last seen, in a line: its recorded keys, whether it was being deleted, its Ready reason and message. */
export function describeSeen(s: Seen): string {
  const keys = [
    s.keyId !== undefined ? `keyId ${s.keyId}` : 'no keyId',
    ...(s.retiring.length > 0 ? [`retiring/replaced [${s.retiring.join(', ')}]`] : []),
    ...(s.lostAttempts.length > 0 ? [`lostAttempts [${s.lostAttempts.join(', ')}]`] : []),
  ];
  return `${keys.join(', ')}${s.deleting ? ', deleting' : ''}; Ready ${s.ready ? 'True' : 'not True'} (${s.reason}: ${s.message.slice(0, 160)})`;
}

export const format = (a: Action): string => `#${a.n} t=${a.t}s ${a.who} ${a.action} ${a.target}${a.outcome === 'ok' ? '' : ` (${a.outcome})`}`;
