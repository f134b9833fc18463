// In-memory stand-ins for the key reconciler's ports, for its fast tests: the Kubernetes writes
// (kube-writes.ts: resourceVersions, 404 and 409 as the apiserver answers them), the platform
// (adapter.ts's KeyPlatform, answering from a list of keys, failing on demand with src/platform's
// PlatformError), and the event sink. Every call is logged, so a test states the calls an action makes.
import { randomBytes } from 'node:crypto';
import { ApiException, type KubernetesObject, type V1Secret } from '@kubernetes/client-node';
import { pino } from 'pino';
import { PlatformError, type ApiKeyListItem, type Disposition, type PlatformErrorCode } from '../../../src/platform/index.ts';
import type { KeyPlatform } from '../../../src/operator/keys/adapter.ts';
import { DriftCache } from '../../../src/operator/keys/observing/drift.ts';
import {
  ownedSecretMetadata,
  type JsonPatchOp,
  type KubeWrites,
  type NamespaceInfo,
  type Workload,
  type WorkloadKind,
} from '../../../src/operator/keys/kube-writes.ts';
import { KeyReconciler, type KeyReconcilerOptions } from '../../../src/operator/keys/reconciler.ts';
import { Signer } from '../../../src/operator/keys/issuing/signing.ts';
import type { KeyResource, KindName } from '../../../src/operator/resources/schema.ts';
import type { ReconcileResult } from '../../../src/operator/runtime/workers.ts';
import { OwnWrites } from '../../../src/operator/runtime/own-writes.ts';

const clone = <T>(value: T): T => structuredClone(value);

function notFound(what: string): ApiException<unknown> {
  return new ApiException(404, `${what} not found`, {}, {});
}

function conflict(what: string): ApiException<unknown> {
  return new ApiException(409, `${what}: the object has been modified`, {}, {});
}

export class FakeKube implements KubeWrites {
  readonly calls: string[] = [];
  readonly resources = new Map<string, KeyResource>();
  readonly secrets = new Map<string, V1Secret>();
  #version = 100;
  /** Called before each write: a test makes the next write of a kind fail (e.g. a 409). */
  failNext: { call: string; error: Error } | undefined;

  #next(): string {
    this.#version += 1;
    return String(this.#version);
  }

  #maybeFail(call: string): void {
    if (this.failNext?.call === call) {
      const { error } = this.failNext;
      this.failNext = undefined;
      throw error;
    }
  }

  /** ClusterKeyIssuers by name, and Namespaces (labels, being deleted) by name: absent ones are not found. */
  readonly issuers = new Map<string, KubernetesObject & { spec?: unknown }>();
  readonly namespaces = new Map<string, NamespaceInfo>();

  async readIssuer(name: string): Promise<(KubernetesObject & { spec?: unknown }) | undefined> {
    this.calls.push(`readIssuer ${name}`);
    const issuer = this.issuers.get(name);
    return issuer === undefined ? undefined : clone(issuer);
  }

  async readNamespace(name: string): Promise<NamespaceInfo | undefined> {
    return this.namespaces.get(name) ?? { labels: {}, terminating: false };
  }

  putResource(resource: KeyResource): KeyResource {
    const stored = clone(resource);
    stored.metadata.resourceVersion = this.#next();
    stored.metadata.generation ??= 1;
    this.resources.set(`${stored.kind}/${stored.metadata.namespace}/${stored.metadata.name}`, stored);
    return clone(stored);
  }

  putSecret(secret: V1Secret): void {
    const stored = clone(secret);
    stored.metadata = { ...stored.metadata, resourceVersion: this.#next() };
    this.secrets.set(`${stored.metadata.namespace}/${stored.metadata.name}`, stored);
  }

  resource(kind: KindName, namespace: string, name: string): KeyResource | undefined {
    const found = this.resources.get(`${kind}/${namespace}/${name}`);
    return found === undefined ? undefined : clone(found);
  }

  secret(namespace: string, name: string): V1Secret | undefined {
    const found = this.secrets.get(`${namespace}/${name}`);
    return found === undefined ? undefined : clone(found);
  }

  async readResource(kind: KindName, namespace: string, name: string): Promise<KeyResource | undefined> {
    this.calls.push(`get ${kind} ${namespace}/${name}`);
    return this.resource(kind, namespace, name);
  }

  /** A write's start: recorded as `<verb> <kind>/<namespace>/<name>`, failed on demand, 404 when the resource is gone. */
  #write(verb: string, resource: KeyResource): { id: string; current: KeyResource } {
    const id = `${resource.kind}/${resource.metadata.namespace}/${resource.metadata.name}`;
    this.calls.push(`${verb} ${id}`);
    this.#maybeFail(verb);
    const current = this.resources.get(id);
    if (current === undefined) throw notFound(id);
    return { id, current };
  }

  async replaceResource(resource: KeyResource): Promise<KeyResource> {
    const { id, current } = this.#write('update', resource);
    if (current.metadata.resourceVersion !== resource.metadata.resourceVersion) throw conflict(id);
    const stored = clone(resource);
    stored.status = current.status;
    stored.metadata.resourceVersion = this.#next();
    // The apiserver deletes an object being deleted once its last finalizer goes.
    if (stored.metadata.deletionTimestamp !== undefined && (stored.metadata.finalizers ?? []).length === 0) this.resources.delete(id);
    else this.resources.set(id, stored);
    return clone(stored);
  }

  async patchStatus(resource: KeyResource, status: Record<string, unknown>): Promise<KeyResource> {
    const { id, current } = this.#write('patch status', resource);
    const stored = clone(current);
    // As the apiserver stores a custom resource (unstructured JSON re-encoded from Go maps): every
    // object's keys sorted. A status compared by its text would differ from what was written.
    // The operator sends its whole status as a merge patch: a member set to null is removed.
    stored.status = sortedKeys(clone(Object.fromEntries(Object.entries(status).filter(([, v]) => v !== null)))) as KeyResource['status'];
    stored.metadata.resourceVersion = this.#next();
    this.resources.set(id, stored);
    return clone(stored);
  }

  /** A PUT of the status subresource: status whole, at the uid and resourceVersion given (409 otherwise). */
  async replaceStatus(resource: KeyResource, status: Record<string, unknown>): Promise<KeyResource> {
    const { id, current } = this.#write('put status', resource);
    if (
      current.metadata.resourceVersion !== resource.metadata.resourceVersion ||
      (resource.metadata.uid !== undefined && current.metadata.uid !== resource.metadata.uid)
    )
      throw conflict(id);
    const stored = clone(current);
    stored.status = sortedKeys(clone(status)) as KeyResource['status'];
    stored.metadata.resourceVersion = this.#next();
    this.resources.set(id, stored);
    return clone(stored);
  }

  /** A JSON patch of status as the apiserver applies one: in order, all or nothing, 422 when a `test` fails. */
  async patchStatusOps(kind: KindName, namespace: string, name: string, ops: readonly JsonPatchOp[]): Promise<KeyResource> {
    const id = `${kind}/${namespace}/${name}`;
    this.calls.push(`json-patch status ${id}`);
    this.#maybeFail('json-patch status');
    const current = this.resources.get(id);
    if (current === undefined) throw notFound(id);
    const doc = clone(current) as unknown as Record<string, unknown>;
    for (const op of ops) {
      const segments = op.path
        .split('/')
        .slice(1)
        .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
      const last = segments.pop() ?? '';
      let parent: unknown = doc;
      for (const segment of segments) parent = (parent as Record<string, unknown> | undefined)?.[segment];
      if (parent === null || typeof parent !== 'object') throw new ApiException(422, `${op.path}: no such path`, {}, {});
      const target = parent as Record<string, unknown> & unknown[];
      if (op.op === 'test') {
        if (JSON.stringify(target[last]) !== JSON.stringify(op.value)) throw new ApiException(422, `testing value ${op.path} failed`, {}, {});
      } else if (op.op === 'replace') {
        if (!(last in target)) throw new ApiException(422, `${op.path}: no such path`, {}, {});
        target[last] = clone(op.value);
      } else if (Array.isArray(target) && last === '-') {
        target.push(clone(op.value));
      } else {
        target[last] = clone(op.value);
      }
    }
    const stored = clone(current);
    stored.status = sortedKeys((doc as unknown as KeyResource).status) as KeyResource['status'];
    stored.metadata.resourceVersion = this.#next();
    this.resources.set(id, stored);
    return clone(stored);
  }

  async readSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    this.calls.push(`get Secret ${namespace}/${name}`);
    return this.secret(namespace, name);
  }

  async createSecret(namespace: string, body: V1Secret): Promise<V1Secret> {
    const id = `${namespace}/${body.metadata?.name}`;
    this.calls.push(`create Secret ${id}`);
    this.#maybeFail('create Secret');
    if (this.secrets.has(id)) throw new ApiException(409, `${id} already exists`, {}, {});
    const stored = clone(body);
    stored.metadata = { ...stored.metadata, resourceVersion: this.#next() };
    this.secrets.set(id, stored);
    return clone(stored);
  }

  async replaceSecret(namespace: string, name: string, body: V1Secret): Promise<V1Secret> {
    const id = `${namespace}/${name}`;
    this.calls.push(`update Secret ${id}`);
    this.#maybeFail('update Secret');
    const current = this.secrets.get(id);
    if (current === undefined) throw notFound(id);
    if (body.metadata?.resourceVersion !== undefined && body.metadata.resourceVersion !== current.metadata?.resourceVersion) throw conflict(id);
    // As the apiserver: an immutable Secret's data (and the flag itself) never change.
    if (current.immutable === true && (body.immutable !== true || JSON.stringify(body.data ?? {}) !== JSON.stringify(current.data ?? {}))) {
      throw new ApiException(422, `${id} is immutable`, {}, {});
    }
    const stored = clone(body);
    stored.metadata = { ...stored.metadata, resourceVersion: this.#next() };
    this.secrets.set(id, stored);
    return clone(stored);
  }

  async deleteSecret(namespace: string, name: string): Promise<void> {
    const id = `${namespace}/${name}`;
    this.calls.push(`delete Secret ${id}`);
    if (!this.secrets.delete(id)) throw notFound(id);
  }

  async listOwnedSecretMetadata(namespace: string, labelSelector: string, controllerUid: string, annotations: readonly string[]): Promise<V1Secret[]> {
    this.calls.push(`list Secret ${namespace} ${labelSelector}`);
    const [label, value] = labelSelector.split('=');
    // As the apiserver answers a metadata LIST (no data), with the real port's projection.
    return [...this.secrets.entries()]
      .filter(([id, secret]) => id.startsWith(`${namespace}/`) && label !== undefined && secret.metadata?.labels?.[label] === value)
      .map(([, secret]) =>
        ownedSecretMetadata({ apiVersion: 'meta.k8s.io/v1', kind: 'PartialObjectMetadata', metadata: clone(secret).metadata }, controllerUid, annotations),
      )
      .filter((s): s is V1Secret => s !== undefined);
  }

  /** Deployments, StatefulSets and DaemonSets by `kind/namespace/name`. */
  readonly workloads = new Map<string, Workload>();

  putWorkload(kind: WorkloadKind, workload: Workload): void {
    const stored = clone(workload);
    stored.metadata = { ...stored.metadata, generation: stored.metadata?.generation ?? 1, resourceVersion: this.#next() };
    this.workloads.set(`${kind}/${stored.metadata.namespace}/${stored.metadata.name}`, stored);
  }

  async readWorkload(namespace: string, kind: WorkloadKind, name: string): Promise<Workload | undefined> {
    this.calls.push(`get ${kind} ${namespace}/${name}`);
    const found = this.workloads.get(`${kind}/${namespace}/${name}`);
    return found === undefined ? undefined : clone(found);
  }

  async listWorkloads<T>(namespace: string, kind: WorkloadKind, pick: (workload: Workload) => T | undefined): Promise<T[]> {
    this.calls.push(`list ${kind} ${namespace}`);
    return [...this.workloads.entries()]
      .filter(([id]) => id.startsWith(`${kind}/${namespace}/`))
      .map(([, w]) => pick(clone(w)))
      .filter((kept) => kept !== undefined);
  }

  /** RFC 6902 as far as the operator uses it (test, replace, add); the generation moves when the template changed. */
  async patchWorkload(namespace: string, kind: WorkloadKind, name: string, ops: readonly JsonPatchOp[]): Promise<Workload> {
    const id = `${kind}/${namespace}/${name}`;
    this.calls.push(`json-patch ${id} ${JSON.stringify(ops)}`);
    this.#maybeFail(`patch ${kind}`);
    const current = this.workloads.get(id);
    if (current === undefined) throw notFound(id);
    const stored = clone(current) as unknown as Record<string, unknown>;
    for (const op of ops) {
      const segments = op.path
        .split('/')
        .slice(1)
        .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
      const last = segments.pop() as string;
      let parent: unknown = stored;
      for (const segment of segments) parent = (parent as Record<string, unknown> | undefined)?.[segment];
      if (parent === undefined || parent === null) throw new ApiException(422, `${op.path}: no such path`, {}, {});
      const holder = parent as Record<string, unknown>;
      if (op.op === 'test') {
        if (JSON.stringify(holder[last]) !== JSON.stringify(op.value)) throw new ApiException(422, `${op.path}: test failed`, {}, {});
      } else {
        if (op.op === 'replace' && !(last in holder)) throw new ApiException(422, `${op.path}: nothing to replace`, {}, {});
        holder[last] = clone(op.value);
      }
    }
    const patched = stored as unknown as Workload;
    if (JSON.stringify(patched.spec?.template) !== JSON.stringify(current.spec?.template)) {
      patched.metadata = { ...patched.metadata, generation: (patched.metadata?.generation ?? 1) + 1, resourceVersion: this.#next() };
    }
    this.workloads.set(id, patched);
    return clone(patched);
  }
}

export interface FakeKey {
  id: number;
  name: string;
  key: string;
  created_at: string;
  project_id?: string;
  last_used_at?: string;
  last_used_from_addr?: string;
}

/** A platform holding one list of keys (personal and organization alike). */
export class FakePlatform implements KeyPlatform {
  readonly calls: string[] = [];
  readonly keys: FakeKey[] = [];
  projects = ['p-1'];
  /** The organizations the credentials belong to (GET /users/me/organizations): every one a test names, unless set. */
  organizations: string[] | undefined;
  #id = 1000;
  /** The id the next key gets (ids are sequential, as the emulator's). */
  get nextId(): number {
    return this.#id + 1;
  }
  /** The next call of this method fails with this error (once). */
  failNext: { method: string; error: Error } | undefined;
  /** Rewrites the create answer (a hostile or broken platform). */
  answerCreate: ((key: FakeKey) => FakeKey) | undefined;
  /** The platform's clock (created_at of the keys it makes): a test's own clock, or the real one. */
  now: () => number = Date.now;

  #maybeFail(method: string): void {
    if (this.failNext?.method === method) {
      const { error } = this.failNext;
      this.failNext = undefined;
      throw error;
    }
  }

  #create(name: string, projectId?: string): FakeKey {
    const key: FakeKey = {
      id: ++this.#id,
      name,
      key: randomBytes(32).toString('hex'),
      created_at: new Date(this.now()).toISOString(),
      ...(projectId !== undefined ? { project_id: projectId } : {}),
    };
    this.keys.push(key);
    return this.answerCreate?.(key) ?? key;
  }

  #list(): ApiKeyListItem[] {
    return this.keys.map((k) => ({
      id: k.id,
      name: k.name,
      created_at: k.created_at,
      last_used_at: k.last_used_at ?? null,
      last_used_from_addr: k.last_used_from_addr ?? '',
      ...(k.project_id !== undefined ? { project_id: k.project_id } : {}),
    }));
  }

  #revoke(keyId: number): { id: number; name: string; revoked: boolean; last_used_at: null; last_used_from_addr: string } {
    const index = this.keys.findIndex((k) => k.id === keyId);
    if (index < 0) throw platformError('NOT_FOUND', 404);
    const [key] = this.keys.splice(index, 1);
    return { id: keyId, name: key!.name, revoked: true, last_used_at: null, last_used_from_addr: '' };
  }

  async createPersonalKey(keyName: string): Promise<FakeKey> {
    this.calls.push(`createPersonal ${keyName}`);
    this.#maybeFail('create');
    return this.#create(keyName);
  }

  async createOrganizationKey(orgId: string, body: { keyName: string; projectId?: string }): Promise<FakeKey> {
    this.calls.push(`createOrg ${orgId} ${body.keyName}${body.projectId !== undefined ? ` ${body.projectId}` : ''}`);
    this.#maybeFail('create');
    return this.#create(body.keyName, body.projectId);
  }

  async listPersonalKeys(): Promise<ApiKeyListItem[]> {
    this.calls.push('listPersonal');
    this.#maybeFail('list');
    return this.#list();
  }

  async listOrganizationKeys(orgId: string): Promise<ApiKeyListItem[]> {
    this.calls.push(`listOrg ${orgId}`);
    this.#maybeFail('list');
    return this.#list();
  }

  async revokePersonalKey(keyId: number): Promise<ReturnType<FakePlatform['revokeOrganizationKey']> extends Promise<infer T> ? T : never> {
    this.calls.push(`revokePersonal ${keyId}`);
    this.#maybeFail('revoke');
    return this.#revoke(keyId);
  }

  async revokeOrganizationKey(
    orgId: string,
    keyId: number,
  ): Promise<{ id: number; name: string; revoked: boolean; last_used_at: null; last_used_from_addr: string }> {
    this.calls.push(`revokeOrg ${orgId} ${keyId}`);
    this.#maybeFail('revoke');
    return this.#revoke(keyId);
  }

  async listMyOrganizations(): Promise<{ id: string; name: string }[]> {
    this.calls.push('listMyOrganizations');
    this.#maybeFail('listMyOrganizations');
    return (this.organizations ?? ['org-1', 'org-2', 'org-a', 'org-b']).map((id) => ({ id, name: id }));
  }

  async listProjects(): Promise<{ id: string; name: string; created_at: string; updated_at: string }[]> {
    this.calls.push('listProjects');
    this.#maybeFail('listProjects');
    return this.projects.map((id) => ({ id, name: id, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z' })) as never;
  }

  /** Whose key the credentials are: a person's unless told otherwise. */
  auth: { account_id: string; auth_method: string; auth_data?: string } = { account_id: 'user-1', auth_method: 'api_key_user' };

  async getAuth(): Promise<{ account_id: string; auth_method: string; auth_data?: string }> {
    this.calls.push('getAuth');
    this.#maybeFail('getAuth');
    return this.auth;
  }
}

export function platformError(code: PlatformErrorCode, status?: number, disposition: Disposition = 'terminal', retryAfterMs?: number): PlatformError {
  return new PlatformError({
    code,
    disposition,
    message: code,
    method: 'POST',
    route: '/api_keys',
    requestId: 'req-1',
    ...(status !== undefined ? { status } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  });
}

export class FakeEvents {
  readonly events: string[] = [];

  async record(_resource: unknown, type: string, reason: string, message: string): Promise<void> {
    this.events.push(`${type} ${reason}: ${message}`);
  }

  reasons(): string[] {
    return this.events.map((e) => e.slice(0, e.indexOf(':')));
  }
}

export const NAMESPACE = 'team-a';
export const CREDENTIALS = 'neon-admin';
export const ADMIN_KEY = 'admin-key-0123456789';

export interface Rig {
  kube: FakeKube;
  platform: FakePlatform;
  events: FakeEvents;
  ownWrites: OwnWrites;
  signer: Signer;
  reconciler: KeyReconciler;
  /** One reconcile of the resource, as a worker runs it. */
  reconcile(kind?: KindName, name?: string): Promise<ReconcileResult>;
  /** Reconciles until Done (at most `max` times); the results in order. */
  settle(kind?: KindName, name?: string, max?: number): Promise<ReconcileResult[]>;
}

export function rig(options: Partial<KeyReconcilerOptions> & { credentials?: boolean } = {}): Rig {
  const kube = new FakeKube();
  const platform = new FakePlatform();
  const events = new FakeEvents();
  const ownWrites = new OwnWrites();
  const signer = new Signer(Buffer.alloc(32, 7));
  if (options.credentials !== false) {
    kube.putSecret({ metadata: { name: CREDENTIALS, namespace: NAMESPACE }, data: { apiKey: Buffer.from(ADMIN_KEY).toString('base64') } });
  }
  const reconciler = new KeyReconciler({
    kube,
    platformFor: (apiKey) => ({ platform, credentialsId: apiKey.slice(0, 8) }),
    drift: new DriftCache(60_000),
    events,
    identity: 'operator-a',
    pendingGraceMs: 120_000,
    driftIntervalMs: 60_000,
    signer,
    ownWrites,
    ...options,
  });
  const logger = pino({ level: 'silent' });
  const reconcile = (kind: KindName = 'ApiKey', name = 'ci'): Promise<ReconcileResult> => reconciler.reconcile({ kind, namespace: NAMESPACE, name }, logger);
  return {
    kube,
    platform,
    events,
    ownWrites,
    signer,
    reconciler,
    reconcile,
    async settle(kind: KindName = 'ApiKey', name = 'ci', max = 6) {
      const results: ReconcileResult[] = [];
      for (let i = 0; i < max; i++) {
        const result = await reconcile(kind, name);
        results.push(result);
        if (result.type === 'Done') break;
      }
      return results;
    },
  };
}

let uid = 0;

/** An organization ApiKey (or a ProjectApiKey) in NAMESPACE. */
export function keyResource(kind: KindName = 'ApiKey', name = 'ci', over: { spec?: Record<string, unknown>; finalizers?: string[] } = {}): KeyResource {
  const spec =
    kind === 'ApiKey'
      ? {
          scope: 'Organization',
          organizationId: 'org-1',
          keyName: 'ci-deployer',
          credentialsSecretRef: { name: CREDENTIALS, key: 'apiKey' },
          deletionPolicy: 'Revoke',
          ...over.spec,
        }
      : {
          organizationId: 'org-1',
          projectId: 'p-1',
          keyName: 'ci-deployer',
          credentialsSecretRef: { name: CREDENTIALS, key: 'apiKey' },
          deletionPolicy: 'Revoke',
          ...over.spec,
        };
  return {
    apiVersion: 'keys.neon.dev/v1alpha1',
    kind,
    metadata: { name, namespace: NAMESPACE, uid: `uid-${++uid}`, generation: 1, ...(over.finalizers !== undefined ? { finalizers: over.finalizers } : {}) },
    spec,
  } as KeyResource;
}

/** A JSON value with every object's keys in sorted order, as Go's encoding/json writes a map. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sortedKeys((value as Record<string, unknown>)[k])]),
  );
}
