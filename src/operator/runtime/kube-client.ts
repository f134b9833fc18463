// The operator's API clients: the few apiserver calls it makes, as plain JSON over the transport of
// kube-connections.ts. client-node's generated API classes run every object through their
// ObjectSerializer (a walk of each field against its model, both ways) and bring every model of
// every API group into the process; the apiserver's JSON already is the object, so these send it
// and hand it back as parsed. The call shapes are client-node's (an object of parameters; a patch's
// content type where it took a middleware option), so its API classes still fit where only reads and
// creates are asked for (the tests hand loadSigningKey a CoreV1Api).
//
// - An answer outside 2xx throws client-node's ApiException: its HTTP code, the body (the apiserver's
//   Status, parsed), the headers. Callers branch on `code` as they did.
// - The model types are client-node's, for their shape only: a time in them (a Date in the typings)
//   arrives as the RFC 3339 string the apiserver sent.
// - Each request is signed by the KubeConfig it is made with (sendKubeRequest): one fenced by
//   write-fence.ts refuses writes once this replica no longer leads.
import { ApiException } from '@kubernetes/client-node';
import type {
  CoreV1Event,
  HttpMethod,
  KubeConfig,
  V1DaemonSet,
  V1Deployment,
  V1Lease,
  V1LeaseSpec,
  V1Namespace,
  V1Secret,
  V1StatefulSet,
  V1Status,
} from '@kubernetes/client-node';
import { sendKubeRequest, type KubeAnswer } from './kube-connections.ts';

/** RFC 7386: the fields given replace those of the object; null removes one. */
export const MERGE_PATCH = 'application/merge-patch+json';
/** RFC 6902: a list of operations (a failed `test` fails the whole patch, 422). */
export const JSON_PATCH = 'application/json-patch+json';
export type PatchType = typeof MERGE_PATCH | typeof JSON_PATCH;

interface Named {
  namespace: string;
  name: string;
}

export interface CoreClient {
  readNamespace(params: { name: string }): Promise<V1Namespace>;
  readNamespacedSecret(params: Named): Promise<V1Secret>;
  createNamespacedSecret(params: { namespace: string; body: V1Secret }): Promise<V1Secret>;
  replaceNamespacedSecret(params: Named & { body: V1Secret }): Promise<V1Secret>;
  deleteNamespacedSecret(params: Named): Promise<V1Status>;
  createNamespacedEvent(params: { namespace: string; body: CoreV1Event }): Promise<CoreV1Event>;
}

/** A custom resource's kind in the apiserver's paths. */
interface CustomKind {
  group: string;
  version: string;
  plural: string;
  name: string;
}

/** Custom resources: the objects are the caller's to type (the resources' schemas). */
export interface CustomObjectsClient {
  getNamespacedCustomObject(params: CustomKind & { namespace: string }): Promise<unknown>;
  getClusterCustomObject(params: CustomKind): Promise<unknown>;
  replaceNamespacedCustomObject(params: CustomKind & { namespace: string; body: object }): Promise<unknown>;
  replaceClusterCustomObject(params: CustomKind & { body: object }): Promise<unknown>;
  replaceNamespacedCustomObjectStatus(params: CustomKind & { namespace: string; body: object }): Promise<unknown>;
  patchNamespacedCustomObjectStatus(params: CustomKind & { namespace: string; body: object }, patch: PatchType): Promise<unknown>;
  patchClusterCustomObjectStatus(params: CustomKind & { body: object }, patch: PatchType): Promise<unknown>;
}

export interface AppsClient {
  readNamespacedDeployment(params: Named): Promise<V1Deployment>;
  readNamespacedStatefulSet(params: Named): Promise<V1StatefulSet>;
  readNamespacedDaemonSet(params: Named): Promise<V1DaemonSet>;
  patchNamespacedDeployment(params: Named & { body: object }, patch: PatchType): Promise<V1Deployment>;
  patchNamespacedStatefulSet(params: Named & { body: object }, patch: PatchType): Promise<V1StatefulSet>;
  patchNamespacedDaemonSet(params: Named & { body: object }, patch: PatchType): Promise<V1DaemonSet>;
}

/** A Lease as the apiserver sends it: its times are MicroTime strings (microseconds, RFC 3339). */
export type Lease = Omit<V1Lease, 'spec'> & { spec?: LeaseSpec };
export type LeaseSpec = Omit<V1LeaseSpec, 'acquireTime' | 'renewTime'> & { acquireTime?: string; renewTime?: string };

export interface CoordinationClient {
  readNamespacedLease(params: Named): Promise<Lease>;
  createNamespacedLease(params: { namespace: string; body: Lease }): Promise<Lease>;
  replaceNamespacedLease(params: Named & { body: Lease }): Promise<Lease>;
}

export function coreClient(kubeConfig: KubeConfig): CoreClient {
  const send = sender(kubeConfig);
  const secrets = (namespace: string): string => `/api/v1/namespaces/${segment(namespace)}/secrets`;
  const secret = ({ namespace, name }: Named): string => `${secrets(namespace)}/${segment(name)}`;
  return {
    readNamespace: ({ name }) => send('GET', `/api/v1/namespaces/${segment(name)}`),
    readNamespacedSecret: (params) => send('GET', secret(params)),
    createNamespacedSecret: ({ namespace, body }) => send('POST', secrets(namespace), body),
    replaceNamespacedSecret: (params) => send('PUT', secret(params), params.body),
    deleteNamespacedSecret: (params) => send('DELETE', secret(params)),
    createNamespacedEvent: ({ namespace, body }) => send('POST', `/api/v1/namespaces/${segment(namespace)}/events`, body),
  };
}

export function customObjectsClient(kubeConfig: KubeConfig): CustomObjectsClient {
  const send = sender(kubeConfig);
  const cluster = ({ group, version, plural, name }: CustomKind): string => `/apis/${segment(group)}/${segment(version)}/${segment(plural)}/${segment(name)}`;
  const namespaced = (params: CustomKind & { namespace: string }): string =>
    `/apis/${segment(params.group)}/${segment(params.version)}/namespaces/${segment(params.namespace)}/${segment(params.plural)}/${segment(params.name)}`;
  return {
    getNamespacedCustomObject: (params) => send('GET', namespaced(params)),
    getClusterCustomObject: (params) => send('GET', cluster(params)),
    replaceNamespacedCustomObject: (params) => send('PUT', namespaced(params), params.body),
    replaceClusterCustomObject: (params) => send('PUT', cluster(params), params.body),
    replaceNamespacedCustomObjectStatus: (params) => send('PUT', `${namespaced(params)}/status`, params.body),
    patchNamespacedCustomObjectStatus: (params, patch) => send('PATCH', `${namespaced(params)}/status`, params.body, patch),
    patchClusterCustomObjectStatus: (params, patch) => send('PATCH', `${cluster(params)}/status`, params.body, patch),
  };
}

export function appsClient(kubeConfig: KubeConfig): AppsClient {
  const send = sender(kubeConfig);
  const workload =
    (plural: string) =>
    ({ namespace, name }: Named): string =>
      `/apis/apps/v1/namespaces/${segment(namespace)}/${plural}/${segment(name)}`;
  const [deployment, statefulSet, daemonSet] = [workload('deployments'), workload('statefulsets'), workload('daemonsets')];
  return {
    readNamespacedDeployment: (params) => send('GET', deployment(params)),
    readNamespacedStatefulSet: (params) => send('GET', statefulSet(params)),
    readNamespacedDaemonSet: (params) => send('GET', daemonSet(params)),
    patchNamespacedDeployment: (params, patch) => send('PATCH', deployment(params), params.body, patch),
    patchNamespacedStatefulSet: (params, patch) => send('PATCH', statefulSet(params), params.body, patch),
    patchNamespacedDaemonSet: (params, patch) => send('PATCH', daemonSet(params), params.body, patch),
  };
}

export function coordinationClient(kubeConfig: KubeConfig): CoordinationClient {
  const send = sender(kubeConfig);
  const leases = (namespace: string): string => `/apis/coordination.k8s.io/v1/namespaces/${segment(namespace)}/leases`;
  return {
    readNamespacedLease: ({ namespace, name }) => send('GET', `${leases(namespace)}/${segment(name)}`),
    createNamespacedLease: ({ namespace, body }) => send('POST', leases(namespace), body),
    replaceNamespacedLease: ({ namespace, name, body }) => send('PUT', `${leases(namespace)}/${segment(name)}`, body),
  };
}

/** One path segment, escaped as client-node escapes its path parameters. */
function segment(value: string): string {
  return encodeURIComponent(value);
}

/** A request's sender: JSON in (application/json, or the patch's type), the parsed answer out. */
type Send = <T>(method: HttpMethod, path: string, body?: unknown, contentType?: PatchType) => Promise<T>;

function sender(kubeConfig: KubeConfig): Send {
  return async <T>(method: HttpMethod, path: string, body?: unknown, contentType?: PatchType): Promise<T> => {
    const written = body === undefined ? {} : { body: JSON.stringify(body), contentType: contentType ?? 'application/json' };
    const answer = await sendKubeRequest(kubeConfig, { method, path, ...written });
    const parsed = parsedBody(answer);
    if (answer.statusCode < 200 || answer.statusCode > 299)
      throw new ApiException(answer.statusCode, errorMessage(parsed, answer.statusCode), parsed, answer.headers);
    return parsed as T;
  };
}

/** The answer's body: parsed when it is JSON, its text otherwise, undefined when empty. */
function parsedBody(answer: KubeAnswer): unknown {
  if (answer.body.length === 0) return undefined;
  const text = answer.body.toString('utf8');
  if (!/\bjson\b/i.test(answer.headers['content-type'] ?? '')) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    // A success must be what it says it is; an error's body is only its detail.
    if (answer.statusCode >= 200 && answer.statusCode <= 299) throw error;
    return text;
  }
}

/** What the apiserver said of an error: its Status's message, else the HTTP code. */
function errorMessage(body: unknown, statusCode: number): string {
  const message = (body as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' && message !== '' ? message : `HTTP ${statusCode}`;
}
