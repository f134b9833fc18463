// The Kubernetes calls of the key lifecycle, as a narrow port: each one is a grant in
// test/deploy/rbac-contract.ts, so a new call here is a new RBAC need. ApiServerWrites is the real
// one (runtime/kube-client.ts); the fast tests of each action use an in-memory one (test/operator/keys/fakes.ts).
// Errors are the apiserver's (ApiException with the HTTP code): callers branch on 404 and 409.
import {
  ApiException,
  type KubeConfig,
  type KubernetesObject,
  type V1DaemonSet,
  type V1Deployment,
  type V1Secret,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { listMetadata, listProjected } from '../runtime/paged-list.ts';
import { JSON_PATCH, MERGE_PATCH, type AppsClient, type CoreClient, type CustomObjectsClient } from '../runtime/kube-client.ts';
import { API_VERSION, GROUP, KINDS, VERSION, type KeyResource, type KindName } from '../resources/schema.ts';
import { ISSUER_PLURAL } from '../resources/issuer.ts';

/** One RFC 6902 operation, as the apiserver's JSON patch takes it. */
export type JsonPatchOp =
  { op: 'test'; path: string; value: unknown } | { op: 'replace'; path: string; value: unknown } | { op: 'add'; path: string; value: unknown };

/** The workloads a rotation may restart (spec.rotation.restart), always in the resource's own namespace. */
export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet';
export type Workload = V1Deployment | V1StatefulSet | V1DaemonSet;

/** What a key's reconcile reads of its Namespace: the labels an issuer's selector matches, and whether it is being deleted. */
export interface NamespaceInfo {
  labels: Readonly<Record<string, string>>;
  terminating: boolean;
}

export interface KubeWrites {
  /** GET of a ClusterKeyIssuer; undefined when it does not exist. */
  readIssuer(name: string): Promise<(KubernetesObject & { spec?: unknown }) | undefined>;
  /**
   * GET of a Namespace; undefined when it does not exist or may not be read (the namespaced mode's
   * Roles may not grant it): its labels then match no selector, and it is taken as not being deleted.
   */
  readNamespace(name: string): Promise<NamespaceInfo | undefined>;
  /** GET of a key resource, fresh from the apiserver; undefined when it is gone. */
  readResource(kind: KindName, namespace: string, name: string): Promise<KeyResource | undefined>;
  /** UPDATE carrying the resource's resourceVersion (409 on any concurrent change). */
  replaceResource(resource: KeyResource): Promise<KeyResource>;
  /** Merge patch of the status subresource with no version: it lands over any edit (writeKeyRecord's retry). */
  patchStatus(resource: KeyResource, status: Record<string, unknown>): Promise<KeyResource>;
  /**
   * PUT of the status subresource: `status` whole, at the resource's uid and resourceVersion (409 on
   * any change since). The apiserver keeps everything but status as stored, and skips the work of
   * applying a patch (5 % of its CPU in the ten-organization wave: docs/benchmarks.md).
   */
  replaceStatus(resource: KeyResource, status: Record<string, unknown>): Promise<KeyResource>;
  /** JSON patch of the status subresource (its `test` ops make it land on what they test only: 422 otherwise). */
  patchStatusOps(kind: KindName, namespace: string, name: string, ops: readonly JsonPatchOp[]): Promise<KeyResource>;
  /** GET of a Secret; undefined when it does not exist. */
  readSecret(namespace: string, name: string): Promise<V1Secret | undefined>;
  createSecret(namespace: string, body: V1Secret): Promise<V1Secret>;
  replaceSecret(namespace: string, name: string, body: V1Secret): Promise<V1Secret>;
  deleteSecret(namespace: string, name: string): Promise<void>;
  /**
   * LIST of the Secrets of a namespace matching a label selector, metadata only (never a Secret's
   * data): of those whose controller owner reference has `controllerUid`, the name, uid,
   * resourceVersion, that owner reference and the annotations named (values of at most
   * MAX_LISTED_ANNOTATION characters); the others are dropped as each page arrives.
   * spec.secret.immutable: the candidates for an interrupted create's Secret, read by name after.
   */
  listOwnedSecretMetadata(namespace: string, labelSelector: string, controllerUid: string, annotations: readonly string[]): Promise<V1Secret[]>;
  /** GET of a Deployment, StatefulSet or DaemonSet (rollout status); undefined when it does not exist. */
  readWorkload(namespace: string, kind: WorkloadKind, name: string): Promise<Workload | undefined>;
  /**
   * LIST of one kind of workload in a namespace (spec.rotation.restart.discover), in pages, each
   * workload handed to `pick` as it arrives and only what `pick` returns kept: a namespace's
   * workloads are the tenant's to size (a pod template may be a MiB), so none is held as sent.
   */
  listWorkloads<T>(namespace: string, kind: WorkloadKind, pick: (workload: Workload) => T | undefined): Promise<T[]>;
  /**
   * JSON patch of a workload: a restart (one pod template annotation, guarded by a test of the workload's consent; with spec.secret.immutable,
   * its Secret references repointed too); the workload as patched.
   */
  patchWorkload(namespace: string, kind: WorkloadKind, name: string, ops: readonly JsonPatchOp[]): Promise<Workload>;
}

const WORKLOAD_PLURALS: Readonly<Record<WorkloadKind, string>> = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets' };
/** Workloads per page of a discover LIST: a page is at most 50 × the largest object as sent, never held whole. */
const WORKLOAD_PAGE = 50;

/** The longest annotation value listOwnedSecretMetadata keeps (the operator's own are far shorter: an id, a key name, a signature). */
export const MAX_LISTED_ANNOTATION = 512;

/** listOwnedSecretMetadata's projection of one listed object, or undefined when it is not controlled by `controllerUid`. */
export function ownedSecretMetadata(obj: KubernetesObject, controllerUid: string, annotations: readonly string[]): V1Secret | undefined {
  const meta = obj.metadata;
  const controller = meta?.ownerReferences?.find((ref) => ref.controller === true);
  if (meta?.name === undefined || controller?.uid !== controllerUid) return undefined;
  const kept: Record<string, string> = {};
  for (const name of annotations) {
    const value = meta.annotations?.[name];
    if (typeof value === 'string' && value.length <= MAX_LISTED_ANNOTATION) kept[name] = value;
  }
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: meta.name,
      namespace: meta.namespace,
      uid: meta.uid,
      resourceVersion: meta.resourceVersion,
      ownerReferences: [{ apiVersion: controller.apiVersion, kind: controller.kind, name: controller.name, uid: controller.uid, controller: true }],
      annotations: kept,
    },
  };
}

/** The HTTP status of an apiserver error, or undefined for anything else. */
export function statusCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

export class ApiServerWrites implements KubeWrites {
  readonly #objects: CustomObjectsClient;
  readonly #core: CoreClient;
  readonly #apps: AppsClient;
  readonly #kubeConfig: KubeConfig;

  constructor(objects: CustomObjectsClient, core: CoreClient, apps: AppsClient, kubeConfig: KubeConfig) {
    this.#objects = objects;
    this.#core = core;
    this.#apps = apps;
    this.#kubeConfig = kubeConfig;
  }

  async readIssuer(name: string): Promise<(KubernetesObject & { spec?: unknown }) | undefined> {
    try {
      return (await this.#objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: ISSUER_PLURAL, name })) as KubernetesObject & {
        spec?: unknown;
      };
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async readNamespace(name: string): Promise<NamespaceInfo | undefined> {
    try {
      const ns = await this.#core.readNamespace({ name });
      return { labels: ns.metadata?.labels ?? {}, terminating: ns.metadata?.deletionTimestamp !== undefined || ns.status?.phase === 'Terminating' };
    } catch (error) {
      const code = statusCode(error);
      if (code === 404 || code === 403) return undefined;
      throw error;
    }
  }

  async readResource(kind: KindName, namespace: string, name: string): Promise<KeyResource | undefined> {
    try {
      return (await this.#objects.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: KINDS[kind].plural, name })) as KeyResource;
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async replaceResource(resource: KeyResource): Promise<KeyResource> {
    return (await this.#objects.replaceNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: resource.metadata.namespace,
      plural: KINDS[resource.kind].plural,
      name: resource.metadata.name,
      body: resource,
    })) as KeyResource;
  }

  async patchStatus(resource: KeyResource, status: Record<string, unknown>): Promise<KeyResource> {
    return (await this.#objects.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        namespace: resource.metadata.namespace,
        plural: KINDS[resource.kind].plural,
        name: resource.metadata.name,
        body: { status },
      },
      MERGE_PATCH,
    )) as KeyResource;
  }

  async replaceStatus(resource: KeyResource, status: Record<string, unknown>): Promise<KeyResource> {
    const { name, namespace, uid, resourceVersion } = resource.metadata;
    return (await this.#objects.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: KINDS[resource.kind].plural,
      name,
      // No spec: the apiserver keeps the stored one, and would only decode a tenant's spec to drop it.
      body: { apiVersion: API_VERSION, kind: resource.kind, metadata: { name, namespace, uid, resourceVersion }, status },
    })) as KeyResource;
  }

  async patchStatusOps(kind: KindName, namespace: string, name: string, ops: readonly JsonPatchOp[]): Promise<KeyResource> {
    return (await this.#objects.patchNamespacedCustomObjectStatus(
      {
        group: GROUP,
        version: VERSION,
        namespace,
        plural: KINDS[kind].plural,
        name,
        body: [...ops],
      },
      JSON_PATCH,
    )) as KeyResource;
  }

  async readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.#core.readNamespacedSecret({ namespace, name });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async createSecret(namespace: string, body: V1Secret): Promise<V1Secret> {
    return await this.#core.createNamespacedSecret({ namespace, body });
  }

  async replaceSecret(namespace: string, name: string, body: V1Secret): Promise<V1Secret> {
    return await this.#core.replaceNamespacedSecret({ namespace, name, body });
  }

  async deleteSecret(namespace: string, name: string): Promise<void> {
    await this.#core.deleteNamespacedSecret({ namespace, name });
  }

  async readWorkload(namespace: string, kind: WorkloadKind, name: string): Promise<Workload | undefined> {
    try {
      if (kind === 'Deployment') return await this.#apps.readNamespacedDeployment({ namespace, name });
      if (kind === 'StatefulSet') return await this.#apps.readNamespacedStatefulSet({ namespace, name });
      return await this.#apps.readNamespacedDaemonSet({ namespace, name });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async listWorkloads<T>(namespace: string, kind: WorkloadKind, pick: (workload: Workload) => T | undefined): Promise<T[]> {
    // runtime/paged-list.ts: at most WORKLOAD_PAGE workloads a request, one held at a time.
    const { items } = await listProjected(this.#kubeConfig, `/apis/apps/v1/namespaces/${namespace}/${WORKLOAD_PLURALS[kind]}`, {
      pageSize: WORKLOAD_PAGE,
      project: (obj) => pick(obj as Workload),
    });
    return items;
  }

  async listOwnedSecretMetadata(namespace: string, labelSelector: string, controllerUid: string, annotations: readonly string[]): Promise<V1Secret[]> {
    // PartialObjectMetadata (runtime/paged-list.ts): no Secret's data is sent; in pages, each object
    // projected as it arrives, so at most one object's tenant-sized metadata is held.
    const list = listMetadata(this.#kubeConfig, `/api/v1/namespaces/${namespace}/secrets`, labelSelector, undefined, (obj) =>
      ownedSecretMetadata(obj, controllerUid, annotations),
    );
    return (await list()).items;
  }

  async patchWorkload(namespace: string, kind: WorkloadKind, name: string, ops: readonly JsonPatchOp[]): Promise<Workload> {
    const body = [...ops];
    if (kind === 'Deployment') return await this.#apps.patchNamespacedDeployment({ namespace, name, body }, JSON_PATCH);
    if (kind === 'StatefulSet') return await this.#apps.patchNamespacedStatefulSet({ namespace, name, body }, JSON_PATCH);
    return await this.#apps.patchNamespacedDaemonSet({ namespace, name, body }, JSON_PATCH);
  }
}
