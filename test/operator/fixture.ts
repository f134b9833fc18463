// One integration suite's world, set up and taken down the same way for every suite: the test
// control plane (test/harness, with the CRDs and deploy/base applied), an emulator over HTTP, the
// suite's namespaces each with a credentials Secret, and the operator in-process as deploy/base's
// ServiceAccount with the suite's options. Call it in a describe; its handles are set in beforeAll.
import { afterAll, beforeAll } from '@jest/globals';
import { Writable } from 'node:stream';
import { CoreV1Api, type CustomObjectsApi } from '@kubernetes/client-node';
import { startEmulator, type Emulator, type EmulatorOptions } from '../../src/emulator/server.ts';
import { startOperator, type OperatorOptions, type RunningOperator } from '../../src/operator/manager.ts';
import { createLogger } from '../../src/operator/runtime/logger.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { createNamespace, customObjects, eventually, installOperatorManifests, operatorKubeConfig } from './support.ts';

export const group = 'keys.neon.dev';
export const version = 'v1alpha1';

/** The plural of each kind, as its API path names it (`ClusterKeyIssuer` is cluster-scoped). */
export const PLURALS = {
  ApiKey: 'apikeys',
  ProjectApiKey: 'projectapikeys',
  ApiKeyInventory: 'apikeyinventories',
  ClusterKeyIssuer: 'clusterkeyissuers',
} as const;

/** A condition as the suites read it from a resource's status. */
export interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

/** The operator's options; its kube config (deploy/base's ServiceAccount) and platform URL (the emulator's) are the fixture's unless given. */
export type SuiteOperatorOptions = Omit<OperatorOptions, 'kubeConfig' | 'platformBaseUrl'> & Partial<Pick<OperatorOptions, 'kubeConfig' | 'platformBaseUrl'>>;

export interface SuiteOptions {
  /** A namespace for each prefix (`<prefix>-<6 hex>`), made in this order and deleted at the end. */
  namespaces: readonly string[];
  /** The Secret `neon-admin` holding alice's personal key, in every namespace (default), or none. */
  credentials?: boolean;
  /** Over `{ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false }`. */
  emulator?: EmulatorOptions;
  /** What must be in place before the operator starts (a proxy, Secrets, what a crash leaves behind). */
  before?: (suite: OperatorSuite) => Promise<void>;
  /** The options of the operator started for the suite, from what is set up; absent, none starts (the suite calls `startOperator`). */
  operator?: (suite: OperatorSuite) => SuiteOperatorOptions | Promise<SuiteOperatorOptions>;
  /** After the operators stop, before the namespaces are deleted and the emulator closed. */
  after?: (suite: OperatorSuite) => Promise<void>;
  /** beforeAll's timeout; jest's default (60 s) when absent. */
  timeoutMs?: number;
  /** afterAll's timeout (a long `after`); jest's default (60 s) when absent. */
  afterTimeoutMs?: number;
}

export interface OperatorSuite {
  cp: ControlPlane;
  emulator: Emulator;
  /** The cluster admin's clients. */
  objects: CustomObjectsApi;
  core: CoreV1Api;
  /** The namespaces made, in the order of their prefixes; `namespace` is the first. */
  namespaces: string[];
  namespace: string;
  /** The seed's first organization. */
  org: string;
  /** The personal key of the seed's user `alice` (an admin of the seed's organizations). */
  adminKey: string;
  /** The operator `operator` started (undefined when it is not given). */
  operator: RunningOperator;
  /** The personal key of a user of the seed. */
  userKey(name: string): string;
  /** An operator with the fixture's defaults, stopped at the end with the suite's. */
  startOperator(options: SuiteOperatorOptions): Promise<RunningOperator>;
  /** Creates a resource of this API group as the admin: a namespaced kind in `namespace` (default: the first), a `ClusterKeyIssuer` in the cluster. */
  apply<T = unknown>(kind: keyof typeof PLURALS, metadata: Record<string, unknown>, spec: Record<string, unknown>, namespace?: string): Promise<T>;
  /** A namespaced custom object of this API group, as the admin reads it. */
  get<T>(plural: string, name: string, namespace?: string): Promise<T>;
  /** That object, once `test` holds of it. */
  until<T>(plural: string, name: string, test: (object: T) => boolean, what: string, timeoutMs?: number, namespace?: string): Promise<T>;
}

/** The operator's logger at `level`, each line it writes kept in `lines` (to be searched: a secret, a message). */
export function capturedLog(level: string): { logger: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { logger: createLogger({ level, destination }), lines };
}

/** What `read` returns, once `test` holds of it (a failed read is tried again, as `eventually` does). */
export function readUntil<T>(read: () => Promise<T>, test: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  return eventually(
    async () => {
      const value = await read();
      return test(value) ? value : undefined;
    },
    timeoutMs,
    what,
  );
}

export function operatorSuite(options: SuiteOptions): OperatorSuite {
  const suite = {} as OperatorSuite;
  const operators: RunningOperator[] = [];

  beforeAll(async () => {
    const cp = await controlPlane();
    await installOperatorManifests(cp);
    const emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false, ...options.emulator });
    const userKey = (name: string): string => emulator.bootstrap.users.find((u) => u.name === name)?.personalKey ?? '';
    const objects = customObjects(cp.kubeConfig);
    Object.assign(suite, {
      cp,
      emulator,
      objects,
      core: cp.kubeConfig.makeApiClient(CoreV1Api),
      namespaces: [],
      org: emulator.bootstrap.organizations[0]?.id ?? '',
      adminKey: userKey('alice'),
      userKey,
      startOperator: async (operatorOptions: SuiteOperatorOptions): Promise<RunningOperator> => {
        const operator = await startOperator({
          ...operatorOptions,
          kubeConfig: operatorOptions.kubeConfig ?? (await operatorKubeConfig(cp)),
          platformBaseUrl: operatorOptions.platformBaseUrl ?? emulator.baseUrl,
        });
        operators.push(operator);
        return operator;
      },
      apply: async <T>(
        kind: keyof typeof PLURALS,
        metadata: Record<string, unknown>,
        spec: Record<string, unknown>,
        namespace = suite.namespace,
      ): Promise<T> => {
        const at = { group, version, plural: PLURALS[kind], body: { apiVersion: `${group}/${version}`, kind, metadata, spec } };
        return (await (kind === 'ClusterKeyIssuer' ? objects.createClusterCustomObject(at) : objects.createNamespacedCustomObject({ ...at, namespace }))) as T;
      },
      get: async <T>(plural: string, name: string, namespace = suite.namespace): Promise<T> =>
        (await objects.getNamespacedCustomObject({ group, version, namespace, plural, name })) as T,
      until: <T>(plural: string, name: string, test: (object: T) => boolean, what: string, timeoutMs = 30_000, namespace = suite.namespace): Promise<T> =>
        readUntil(() => suite.get<T>(plural, name, namespace), test, timeoutMs, `${name}: ${what}`),
    } satisfies Partial<OperatorSuite>);
    for (const prefix of options.namespaces) suite.namespaces.push(await createNamespace(cp, prefix));
    suite.namespace = suite.namespaces[0] ?? '';
    if (options.credentials !== false) {
      for (const namespace of suite.namespaces) {
        await suite.core.createNamespacedSecret({ namespace, body: { metadata: { name: 'neon-admin' }, stringData: { apiKey: suite.adminKey } } });
      }
    }
    await options.before?.(suite);
    if (options.operator !== undefined) suite.operator = await suite.startOperator(await options.operator(suite));
  }, options.timeoutMs);

  afterAll(async () => {
    for (const operator of operators) await operator.stop();
    if (suite.cp !== undefined) await options.after?.(suite);
    for (const name of suite.namespaces ?? []) await suite.core.deleteNamespace({ name }).catch(() => undefined);
    await suite.emulator?.close();
  }, options.afterTimeoutMs);

  return suite;
}
