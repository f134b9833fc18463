// An in-memory informer for runtime/controller.ts (its `informerFor` port): the test plays the
// apiserver's watch by calling emit(), and the cache answers list()/get() as client-node's does.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { CachingInformer, Watch } from '../../../src/operator/runtime/watches.ts';

type Verb = 'add' | 'update' | 'delete' | 'error' | 'change' | 'connect';

export class FakeInformer implements CachingInformer {
  readonly watch: Watch;
  readonly #callbacks = new Map<Verb, ((obj: never) => void)[]>();
  readonly #objects = new Map<string, KubernetesObject>();
  started = 0;
  /** Its watch failing since then, as reflector.ts tells it (undefined: current). */
  failing: { since: number; error: string } | undefined;
  #resourceVersion = '';

  constructor(watch: Watch) {
    this.watch = watch;
  }

  on(verb: Verb, cb: (obj: never) => void): void {
    this.#callbacks.set(verb, [...(this.#callbacks.get(verb) ?? []), cb]);
  }

  off(verb: Verb, cb: (obj: never) => void): void {
    this.#callbacks.set(
      verb,
      (this.#callbacks.get(verb) ?? []).filter((c) => c !== cb),
    );
  }

  async start(): Promise<void> {
    this.started += 1;
    this.#resourceVersion = '1';
  }

  async stop(): Promise<void> {
    this.#resourceVersion = '';
  }

  list(namespace?: string): KubernetesObject[] {
    return [...this.#objects.values()].filter((o) => namespace === undefined || o.metadata?.namespace === namespace);
  }

  get(name: string, namespace?: string): KubernetesObject | undefined {
    return this.#objects.get(`${namespace ?? ''}/${name}`);
  }

  latestResourceVersion(): string {
    return this.#resourceVersion;
  }

  failingSince(): number | undefined {
    return this.failing?.since;
  }

  lastError(): string | undefined {
    return this.failing?.error;
  }

  /** One watch event; the cache keeps the projection the watch declares, as the real one does. */
  emit(verb: 'add' | 'update' | 'delete', obj: KubernetesObject): void {
    const projected = this.watch.project(obj);
    const id = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name}`;
    if (verb === 'delete') this.#objects.delete(id);
    else this.#objects.set(id, projected);
    for (const cb of this.#callbacks.get(verb) ?? []) cb(projected as never);
  }

  fail(error: Error): void {
    for (const cb of this.#callbacks.get('error') ?? []) cb(error as never);
  }
}
