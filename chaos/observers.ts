// What the campaign watches while it runs: every value any Secret of the namespace ever held (the
// leak check needs the secrets themselves, which the platform never shows again), and every create
// intent the operator writes (a kill timed on one lands between the POST and the Secret write).
import { Watch, type CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { NAMESPACE } from './environment.ts';

const PENDING = 'keys.neon.dev/create-pending';

/** A watch that starts again after the apiserver goes away (restarts are part of the campaign). */
function keepWatching(kubeConfig: KubeConfig, path: string, onObject: (type: string, obj: unknown) => void, stopped: () => boolean): () => void {
  const watch = new Watch(kubeConfig);
  let current: AbortController | undefined;
  let ended = false;
  const again = (): void => {
    if (!stopped() && !ended) setTimeout(begin, 500).unref();
  };
  const begin = (): void => {
    watch.watch(path, {}, onObject, again).then((controller) => {
      current = controller;
    }, again);
  };
  begin();
  return () => {
    ended = true;
    current?.abort();
  };
}

export class SecretCollector {
  readonly values = new Set<string>();
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #end: () => void;
  readonly #core: CoreV1Api;

  constructor(kubeConfig: KubeConfig, core: CoreV1Api) {
    this.#core = core;
    this.#end = keepWatching(
      kubeConfig,
      `/api/v1/namespaces/${NAMESPACE}/secrets`,
      (_type, obj) => this.#add(obj as V1Secret),
      () => this.#stopped,
    );
    // Belt and braces: a value written while the watch was down is caught by a list.
    this.#timer = setInterval(() => void this.sweep(), 2_000);
  }

  #add(secret: V1Secret): void {
    for (const encoded of Object.values(secret.data ?? {})) {
      const value = Buffer.from(encoded, 'base64').toString('utf8');
      // Only key-shaped values: hand edits ("tampered") are not secrets.
      if (/^[a-z0-9]{64}$/.test(value)) this.values.add(value);
    }
  }

  async sweep(): Promise<void> {
    try {
      for (const secret of (await this.#core.listNamespacedSecret({ namespace: NAMESPACE })).items) this.#add(secret);
    } catch {
      // the apiserver is restarting
    }
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#end();
  }
}

export class IntentWatcher {
  readonly #seen = new Set<string>();
  #stopped = false;
  readonly #ends: (() => void)[] = [];
  intents = 0;

  constructor(kubeConfig: KubeConfig, onIntent: (attempt: string) => void) {
    for (const plural of ['apikeys', 'projectapikeys']) {
      this.#ends.push(
        keepWatching(
          kubeConfig,
          `/apis/keys.neon.dev/v1alpha1/namespaces/${NAMESPACE}/${plural}`,
          (_type, obj) => {
            const value = (obj as { metadata?: { annotations?: Record<string, string> } }).metadata?.annotations?.[PENDING];
            if (value === undefined || this.#seen.has(value)) return;
            this.#seen.add(value);
            this.intents += 1;
            onIntent(value);
          },
          () => this.#stopped,
        ),
      );
    }
  }

  stop(): void {
    this.#stopped = true;
    for (const end of this.#ends) end();
  }
}
