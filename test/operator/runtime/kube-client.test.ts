// The operator's API clients (src/operator/runtime/kube-client.ts): every call the operator makes,
// against the real apiserver (objects in and out as plain JSON, patches of both kinds, a Lease's
// MicroTime, 404/409/403/422 as client-node's ApiException with the code and the Status), what is
// sent on the wire (a loopback server: paths, content types, bodies, user agent, a token refreshed
// per request), and the write fence refusing a write before anything is sent.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { ApiException, AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, type RequestContext, type V1PodTemplateSpec } from '@kubernetes/client-node';
import { appsClient, coordinationClient, coreClient, customObjectsClient, JSON_PATCH, MERGE_PATCH } from '../../../src/operator/runtime/kube-client.ts';
import { reuseKubeConnections } from '../../../src/operator/runtime/kube-connections.ts';
import { fenceKubeWrites, NotLeadingError } from '../../../src/operator/runtime/write-fence.ts';
import { loopbackKubeConfig, startRecordingServer, type RecordingServer, type SeenRequest } from '../../harness/recording-server.ts';
import { controlPlane, type ControlPlane } from '../../harness/index.ts';
import { installOperatorManifests } from '../support.ts';

const GROUP = 'keys.neon.dev';
const VERSION = 'v1alpha1';

/** What an apiserver error carries: the code, and the Status it sent as the body. */
async function failure(promise: Promise<unknown>): Promise<{ code: number; body: { kind?: string; reason?: string; code?: number; message?: string } }> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiException);
  const { code, body } = error as ApiException<{ kind?: string; reason?: string; code?: number; message?: string }>;
  return { code, body };
}

describe('kube-client on the wire', () => {
  let server: RecordingServer;
  let port = 0;
  const seen: SeenRequest[] = [];

  beforeAll(async () => {
    server = await startRecordingServer(seen, (request, res) => {
      if (request.method === 'DELETE') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Success' }));
        return;
      }
      if (request.url?.includes('/plain')) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('etcd is away');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        request.body === '' ? JSON.stringify({ metadata: { name: 'seen', creationTimestamp: '2024-05-01T10:00:00Z' }, data: { k: 'w7w=' } }) : request.body,
      );
    });
    port = server.port;
  });

  afterAll(async () => {
    await server.close();
  });

  it('sends each call to its path with its method, content type and JSON body, and hands back the JSON as sent', async () => {
    seen.length = 0;
    const kc = reuseKubeConnections(loopbackKubeConfig(port, 't0'), { userAgent: 'neon-key-operator/test' });
    const [core, objects, apps, leases] = [coreClient(kc), customObjectsClient(kc), appsClient(kc), coordinationClient(kc)];
    const read = await core.readNamespacedSecret({ namespace: 'ns', name: 'seen' });
    // Plain JSON: no model classes, a time stays the string the apiserver sent.
    expect(read).toEqual({ metadata: { name: 'seen', creationTimestamp: '2024-05-01T10:00:00Z' }, data: { k: 'w7w=' } });
    const secret = { metadata: { name: 's' }, stringData: { k: 'ü' } };
    expect(await core.createNamespacedSecret({ namespace: 'ns', body: secret })).toEqual(secret);
    await core.replaceNamespacedSecret({ namespace: 'ns', name: 's', body: secret });
    await core.deleteNamespacedSecret({ namespace: 'ns', name: 's' });
    await core.readNamespace({ name: 'ns' });
    await core.createNamespacedEvent({ namespace: 'ns', body: { metadata: { name: 'e' }, involvedObject: {} } });
    const at = { group: GROUP, version: VERSION, plural: 'apikeys', name: 'k' };
    await objects.getNamespacedCustomObject({ ...at, namespace: 'ns' });
    await objects.replaceNamespacedCustomObject({ ...at, namespace: 'ns', body: { spec: {} } });
    await objects.patchNamespacedCustomObjectStatus({ ...at, namespace: 'ns', body: { status: { keyId: 1 } } }, MERGE_PATCH);
    await objects.patchNamespacedCustomObjectStatus({ ...at, namespace: 'ns', body: [{ op: 'test', path: '/status/keyId', value: 1 }] }, JSON_PATCH);
    const issuer = { group: GROUP, version: VERSION, plural: 'clusterkeyissuers', name: 'i' };
    await objects.getClusterCustomObject(issuer);
    await objects.replaceClusterCustomObject({ ...issuer, body: { spec: {} } });
    await objects.patchClusterCustomObjectStatus({ ...issuer, body: { status: { resources: 2 } } }, MERGE_PATCH);
    const ops = [{ op: 'add', path: '/spec/template/metadata/annotations/x', value: 'y' }];
    for (const read of [apps.readNamespacedDeployment, apps.readNamespacedStatefulSet, apps.readNamespacedDaemonSet])
      await read({ namespace: 'ns', name: 'w' });
    for (const patch of [apps.patchNamespacedDeployment, apps.patchNamespacedStatefulSet, apps.patchNamespacedDaemonSet])
      await patch({ namespace: 'ns', name: 'w', body: ops }, JSON_PATCH);
    await leases.readNamespacedLease({ namespace: 'ns', name: 'l' });
    await leases.createNamespacedLease({ namespace: 'ns', body: { metadata: { name: 'l' } } });
    await leases.replaceNamespacedLease({ namespace: 'ns', name: 'l', body: { metadata: { name: 'l' } } });

    expect(seen.map((s) => `${s.method} ${s.url} ${s.headers['content-type'] ?? '-'}`)).toEqual([
      'GET /api/v1/namespaces/ns/secrets/seen -',
      'POST /api/v1/namespaces/ns/secrets application/json',
      'PUT /api/v1/namespaces/ns/secrets/s application/json',
      'DELETE /api/v1/namespaces/ns/secrets/s -',
      'GET /api/v1/namespaces/ns -',
      'POST /api/v1/namespaces/ns/events application/json',
      'GET /apis/keys.neon.dev/v1alpha1/namespaces/ns/apikeys/k -',
      'PUT /apis/keys.neon.dev/v1alpha1/namespaces/ns/apikeys/k application/json',
      'PATCH /apis/keys.neon.dev/v1alpha1/namespaces/ns/apikeys/k/status application/merge-patch+json',
      'PATCH /apis/keys.neon.dev/v1alpha1/namespaces/ns/apikeys/k/status application/json-patch+json',
      'GET /apis/keys.neon.dev/v1alpha1/clusterkeyissuers/i -',
      'PUT /apis/keys.neon.dev/v1alpha1/clusterkeyissuers/i application/json',
      'PATCH /apis/keys.neon.dev/v1alpha1/clusterkeyissuers/i/status application/merge-patch+json',
      'GET /apis/apps/v1/namespaces/ns/deployments/w -',
      'GET /apis/apps/v1/namespaces/ns/statefulsets/w -',
      'GET /apis/apps/v1/namespaces/ns/daemonsets/w -',
      'PATCH /apis/apps/v1/namespaces/ns/deployments/w application/json-patch+json',
      'PATCH /apis/apps/v1/namespaces/ns/statefulsets/w application/json-patch+json',
      'PATCH /apis/apps/v1/namespaces/ns/daemonsets/w application/json-patch+json',
      'GET /apis/coordination.k8s.io/v1/namespaces/ns/leases/l -',
      'POST /apis/coordination.k8s.io/v1/namespaces/ns/leases application/json',
      'PUT /apis/coordination.k8s.io/v1/namespaces/ns/leases/l application/json',
    ]);
    for (const request of seen) {
      expect(request.headers['user-agent']).toBe('neon-key-operator/test');
      expect(request.headers.authorization).toBe('Bearer t0');
      expect(request.headers.accept).toBe('application/json');
      if (request.method === 'GET' || request.method === 'DELETE') expect(request.body).toBe('');
    }
    expect(JSON.parse(seen[1]?.body ?? '')).toEqual(secret);
    expect(JSON.parse(seen[9]?.body ?? '')).toEqual([{ op: 'test', path: '/status/keyId', value: 1 }]);
    expect(JSON.parse(seen[12]?.body ?? '')).toEqual({ status: { resources: 2 } });
  });

  it('escapes the names in a path, and throws an error whose body is not JSON with its text', async () => {
    seen.length = 0;
    const core = coreClient(loopbackKubeConfig(port, 't0'));
    await core.readNamespacedSecret({ namespace: 'ns', name: 'a/b c' });
    expect(seen[0]?.url).toBe('/api/v1/namespaces/ns/secrets/a%2Fb%20c');
    const error = await core.readNamespacedSecret({ namespace: 'ns', name: 'plain' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiException);
    expect((error as ApiException<unknown>).code).toBe(500);
    expect((error as ApiException<unknown>).body).toBe('etcd is away');
  });

  it("asks the KubeConfig's authenticator for each request: a refreshed token is sent at once", async () => {
    seen.length = 0;
    const kc = reuseKubeConnections(loopbackKubeConfig(port, 't0'));
    const core = coreClient(kc);
    await core.readNamespace({ name: 'ns' });
    (kc.getCurrentUser() as { token: string }).token = 't1';
    await core.readNamespace({ name: 'ns' });
    expect(seen.map((s) => s.headers.authorization)).toEqual(['Bearer t0', 'Bearer t1']);
  });

  it('shows what signs a request (the write fence, a test counting requests) its method, URL and body, as client-node does', async () => {
    const kc = loopbackKubeConfig(port, 't0');
    const signed: { method: string; url: string; body: unknown }[] = [];
    const sign = kc.applySecurityAuthentication.bind(kc);
    kc.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
      signed.push({ method: context.getHttpMethod(), url: context.getUrl(), body: context.getBody() });
      await sign(context);
    };
    const ops = [{ op: 'replace', path: '/status/keyId', value: 2 }];
    await customObjectsClient(kc).patchNamespacedCustomObjectStatus(
      { group: GROUP, version: VERSION, plural: 'apikeys', namespace: 'ns', name: 'k', body: ops },
      JSON_PATCH,
    );
    await coreClient(kc).readNamespace({ name: 'ns' });
    expect(signed).toEqual([
      { method: 'PATCH', url: `http://127.0.0.1:${port}/apis/keys.neon.dev/v1alpha1/namespaces/ns/apikeys/k/status`, body: JSON.stringify(ops) },
      { method: 'GET', url: `http://127.0.0.1:${port}/api/v1/namespaces/ns`, body: undefined },
    ]);
  });

  it('a fenced KubeConfig refuses every write before it is sent, and lets reads through', async () => {
    seen.length = 0;
    let leading = true;
    const fenced = fenceKubeWrites(reuseKubeConnections(loopbackKubeConfig(port, 't0')), {
      check: () => {
        if (!leading) throw new NotLeadingError();
      },
    });
    const [core, objects, apps, leases] = [coreClient(fenced), customObjectsClient(fenced), appsClient(fenced), coordinationClient(fenced)];
    await core.createNamespacedSecret({ namespace: 'ns', body: { metadata: { name: 's' } } });
    leading = false;
    const at = { group: GROUP, version: VERSION, plural: 'apikeys', name: 'k', namespace: 'ns' };
    const writes: Promise<unknown>[] = [
      core.createNamespacedSecret({ namespace: 'ns', body: { metadata: { name: 's' } } }),
      core.replaceNamespacedSecret({ namespace: 'ns', name: 's', body: { metadata: { name: 's' } } }),
      core.deleteNamespacedSecret({ namespace: 'ns', name: 's' }),
      core.createNamespacedEvent({ namespace: 'ns', body: { metadata: { name: 'e' }, involvedObject: {} } }),
      objects.replaceNamespacedCustomObject({ ...at, body: {} }),
      objects.patchNamespacedCustomObjectStatus({ ...at, body: {} }, MERGE_PATCH),
      objects.patchClusterCustomObjectStatus({ ...at, body: [] }, JSON_PATCH),
      apps.patchNamespacedDeployment({ namespace: 'ns', name: 'w', body: [] }, JSON_PATCH),
      leases.replaceNamespacedLease({ namespace: 'ns', name: 'l', body: {} }),
    ];
    for (const write of writes) await expect(write).rejects.toBeInstanceOf(NotLeadingError);
    await core.readNamespacedSecret({ namespace: 'ns', name: 's' });
    await objects.getNamespacedCustomObject(at);
    expect(seen.map((s) => s.method)).toEqual(['POST', 'GET', 'GET']);
  });
});

describe('kube-client against the apiserver', () => {
  let cp: ControlPlane;
  let namespace: string;
  const admin = {} as { core: CoreV1Api; apps: AppsV1Api; objects: CustomObjectsApi };
  const issuers: string[] = [];

  beforeAll(async () => {
    cp = await controlPlane();
    await installOperatorManifests(cp);
    admin.core = cp.kubeConfig.makeApiClient(CoreV1Api);
    admin.apps = cp.kubeConfig.makeApiClient(AppsV1Api);
    admin.objects = cp.kubeConfig.makeApiClient(CustomObjectsApi);
    namespace = `kube-client-${randomBytes(3).toString('hex')}`;
    await admin.core.createNamespace({ body: { metadata: { name: namespace } } });
  });

  afterAll(async () => {
    for (const name of issuers)
      await admin.objects.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: 'clusterkeyissuers', name }).catch(() => undefined);
    await admin.core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  /** The admin's kube config on the operator's transport. */
  const adminConfig = (): KubeConfig => {
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    return reuseKubeConnections(kc, { userAgent: 'neon-key-operator/test' });
  };

  it('reads a Namespace, and creates, reads, replaces and deletes a Secret; 404 and 409 are ApiExceptions with the Status', async () => {
    const core = coreClient(adminConfig());
    expect((await core.readNamespace({ name: namespace })).status?.phase).toBe('Active');
    const made = await core.createNamespacedSecret({ namespace, body: { metadata: { name: 's', labels: { a: '1' } }, stringData: { k: 'ü' } } });
    expect(made.metadata?.uid).toBeDefined();
    // Times come as the apiserver's strings, not Dates.
    expect(typeof made.metadata?.creationTimestamp).toBe('string');
    const read = await core.readNamespacedSecret({ namespace, name: 's' });
    expect(Buffer.from(read.data?.k ?? '', 'base64').toString('utf8')).toBe('ü');
    expect(read.metadata?.resourceVersion).toBe(made.metadata?.resourceVersion);

    const again = await failure(core.createNamespacedSecret({ namespace, body: { metadata: { name: 's' } } }));
    expect(again).toMatchObject({ code: 409, body: { kind: 'Status', reason: 'AlreadyExists', code: 409 } });
    const replaced = await core.replaceNamespacedSecret({ namespace, name: 's', body: { ...read, data: { k: Buffer.from('v2').toString('base64') } } });
    expect(replaced.metadata?.resourceVersion).not.toBe(read.metadata?.resourceVersion);
    // A replace carrying a version no longer current: 409 Conflict.
    const stale = await failure(core.replaceNamespacedSecret({ namespace, name: 's', body: read }));
    expect(stale).toMatchObject({ code: 409, body: { reason: 'Conflict' } });

    const deleted = await core.deleteNamespacedSecret({ namespace, name: 's' });
    expect(deleted).toMatchObject({ kind: 'Status', status: 'Success', details: { name: 's', kind: 'secrets' } });
    const gone = await failure(core.readNamespacedSecret({ namespace, name: 's' }));
    expect(gone).toMatchObject({ code: 404, body: { kind: 'Status', reason: 'NotFound', code: 404 } });
    expect(gone.body.message).toContain('"s" not found');
    expect((await failure(core.deleteNamespacedSecret({ namespace, name: 's' }))).code).toBe(404);
    expect((await failure(core.readNamespace({ name: `${namespace}-none` }))).code).toBe(404);
  });

  it('creates an Event with its times as the apiserver takes them', async () => {
    const core = coreClient(adminConfig());
    const now = new Date();
    const made = await core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { name: `e.${randomBytes(3).toString('hex')}` },
        involvedObject: { apiVersion: 'v1', kind: 'Secret', name: 's', namespace },
        type: 'Normal',
        reason: 'Tested',
        message: 'a test event',
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
    expect(made.metadata?.uid).toBeDefined();
    expect(Date.parse(made.firstTimestamp as unknown as string)).toBe(Math.floor(now.getTime() / 1000) * 1000);
  });

  it('refuses a ServiceAccount with no role: 403 as an ApiException with the Status', async () => {
    await admin.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'nobody' } } });
    const nobody = coreClient(reuseKubeConnections(cp.kubeConfigForToken(await cp.mintServiceAccountToken(namespace, 'nobody', 600))));
    const refused = await failure(nobody.readNamespacedSecret({ namespace, name: 'x' }));
    expect(refused).toMatchObject({ code: 403, body: { kind: 'Status', reason: 'Forbidden', code: 403 } });
  });

  it('gets, replaces and patches the status of a namespaced and a cluster-scoped custom resource, by merge and by JSON patch', async () => {
    const objects = customObjectsClient(adminConfig());
    const key = { group: GROUP, version: VERSION, namespace, plural: 'apikeys', name: 'k' };
    await admin.objects.createNamespacedCustomObject({
      ...key,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'k' },
        spec: { scope: 'Organization', organizationId: 'org-kube-client', keyName: 'k', credentialsSecretRef: { name: 'neon-admin' } },
      },
    });
    type Stored = { metadata: { resourceVersion: string; labels?: Record<string, string> }; status?: Record<string, unknown> };
    const read = (await objects.getNamespacedCustomObject(key)) as Stored;
    const replaced = (await objects.replaceNamespacedCustomObject({ ...key, body: { ...read, metadata: { ...read.metadata, labels: { x: 'y' } } } })) as Stored;
    expect(replaced.metadata.labels).toEqual({ x: 'y' });
    expect((await failure(objects.replaceNamespacedCustomObject({ ...key, body: read }))).code).toBe(409);

    const merged = (await objects.patchNamespacedCustomObjectStatus({ ...key, body: { status: { keyId: 7, observedGeneration: 1 } } }, MERGE_PATCH)) as Stored;
    expect(merged.status).toMatchObject({ keyId: 7, observedGeneration: 1 });
    // A merge patch carrying a resourceVersion lands on that version only.
    const staleMerge = await failure(
      objects.patchNamespacedCustomObjectStatus(
        { ...key, body: { metadata: { resourceVersion: replaced.metadata.resourceVersion }, status: { keyId: 8 } } },
        MERGE_PATCH,
      ),
    );
    expect(staleMerge).toMatchObject({ code: 409, body: { reason: 'Conflict' } });
    const patched = (await objects.patchNamespacedCustomObjectStatus(
      {
        ...key,
        body: [
          { op: 'test', path: '/status/keyId', value: 7 },
          { op: 'replace', path: '/status/keyId', value: 9 },
        ],
      },
      JSON_PATCH,
    )) as Stored;
    expect(patched.status).toMatchObject({ keyId: 9 });
    // A PUT of the status subresource: status whole, the rest of the object as stored (the label
    // the body leaves out stays), and only at the resourceVersion it carries.
    const put = (await objects.replaceNamespacedCustomObjectStatus({
      ...key,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'k', namespace, resourceVersion: (patched as Stored).metadata.resourceVersion },
        status: { keyId: 10 },
      },
    })) as Stored;
    expect(put.status).toEqual({ keyId: 10 });
    expect(put.metadata.labels).toEqual({ x: 'y' });
    const stalePut = await failure(
      objects.replaceNamespacedCustomObjectStatus({
        ...key,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'ApiKey',
          metadata: { name: 'k', namespace, resourceVersion: patched.metadata.resourceVersion },
          status: { keyId: 11 },
        },
      }),
    );
    expect(stalePut).toMatchObject({ code: 409, body: { reason: 'Conflict' } });
    // A failed `test` fails the whole patch: 422.
    const failedTest = await failure(
      objects.patchNamespacedCustomObjectStatus({ ...key, body: [{ op: 'test', path: '/status/keyId', value: 7 }] }, JSON_PATCH),
    );
    expect(failedTest.code).toBe(422);
    expect(failedTest.body.kind).toBe('Status');
    expect((await failure(objects.getNamespacedCustomObject({ ...key, name: 'none' }))).code).toBe(404);

    const name = `kube-client-${randomBytes(3).toString('hex')}`;
    const issuer = { group: GROUP, version: VERSION, plural: 'clusterkeyissuers', name };
    await admin.objects.createClusterCustomObject({
      ...issuer,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ClusterKeyIssuer',
        metadata: { name },
        spec: { organizationId: 'org-kube-client', credentialsSecretRef: { name: 'x' } },
      },
    });
    issuers.push(name);
    const cluster = (await objects.getClusterCustomObject(issuer)) as Stored;
    const withLabel = (await objects.replaceClusterCustomObject({
      ...issuer,
      body: { ...cluster, metadata: { ...cluster.metadata, labels: { x: 'y' } } },
    })) as Stored;
    expect(withLabel.metadata.labels).toEqual({ x: 'y' });
    const status = (await objects.patchClusterCustomObjectStatus({ ...issuer, body: { status: { resources: 3 } } }, MERGE_PATCH)) as Stored;
    expect(status.status).toMatchObject({ resources: 3 });
    // A merge patch removes a field that says null.
    const removed = (await objects.patchClusterCustomObjectStatus({ ...issuer, body: { status: { resources: null } } }, MERGE_PATCH)) as Stored;
    expect(removed.status?.resources).toBeUndefined();
    expect((await failure(objects.getClusterCustomObject({ ...issuer, name: `${name}-none` }))).code).toBe(404);
  });

  it('reads and JSON-patches a Deployment, a StatefulSet and a DaemonSet', async () => {
    const apps = appsClient(adminConfig());
    const labels = { app: 'w' };
    const template: V1PodTemplateSpec = { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'example.invalid/c:1' }] } };
    await admin.apps.createNamespacedDeployment({ namespace, body: { metadata: { name: 'w' }, spec: { selector: { matchLabels: labels }, template } } });
    await admin.apps.createNamespacedStatefulSet({
      namespace,
      body: { metadata: { name: 'w' }, spec: { serviceName: 'w', selector: { matchLabels: labels }, template } },
    });
    await admin.apps.createNamespacedDaemonSet({ namespace, body: { metadata: { name: 'w' }, spec: { selector: { matchLabels: labels }, template } } });
    const ops = (value: string) => [
      { op: 'test', path: '/metadata/name', value: 'w' },
      { op: 'add', path: '/spec/template/metadata/annotations', value: { restarted: value } },
    ];
    const deployment = await apps.patchNamespacedDeployment({ namespace, name: 'w', body: ops('d') }, JSON_PATCH);
    expect(deployment.spec?.template.metadata?.annotations).toEqual({ restarted: 'd' });
    expect((await apps.readNamespacedDeployment({ namespace, name: 'w' })).metadata?.generation).toBe(2);
    const statefulSet = await apps.patchNamespacedStatefulSet({ namespace, name: 'w', body: ops('s') }, JSON_PATCH);
    expect(statefulSet.spec?.template.metadata?.annotations).toEqual({ restarted: 's' });
    expect((await apps.readNamespacedStatefulSet({ namespace, name: 'w' })).spec?.template.metadata?.annotations).toEqual({ restarted: 's' });
    const daemonSet = await apps.patchNamespacedDaemonSet({ namespace, name: 'w', body: ops('x') }, JSON_PATCH);
    expect(daemonSet.spec?.template.metadata?.annotations).toEqual({ restarted: 'x' });
    expect((await apps.readNamespacedDaemonSet({ namespace, name: 'w' })).spec?.template.metadata?.annotations).toEqual({ restarted: 'x' });
    expect((await failure(apps.readNamespacedDeployment({ namespace, name: 'none' }))).code).toBe(404);
    const refused = await failure(
      apps.patchNamespacedStatefulSet({ namespace, name: 'w', body: [{ op: 'test', path: '/metadata/name', value: 'other' }] }, JSON_PATCH),
    );
    expect(refused.code).toBe(422);
  });

  it("creates, reads and replaces a Lease with MicroTime strings, the apiserver's own format kept", async () => {
    const leases = coordinationClient(adminConfig());
    const micro = '2024-05-01T10:00:00.123456Z';
    const made = await leases.createNamespacedLease({
      namespace,
      body: { metadata: { name: 'l' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: micro, renewTime: micro, leaseTransitions: 0 } },
    });
    expect(made.spec?.renewTime).toBe(micro);
    expect((await failure(leases.createNamespacedLease({ namespace, body: { metadata: { name: 'l' } } }))).code).toBe(409);
    const read = await leases.readNamespacedLease({ namespace, name: 'l' });
    const renewed = await leases.replaceNamespacedLease({
      namespace,
      name: 'l',
      body: { ...read, spec: { ...read.spec, renewTime: '2024-05-01T10:00:05.000000Z' } },
    });
    expect(renewed.spec?.renewTime).toBe('2024-05-01T10:00:05.000000Z');
    expect(renewed.spec?.acquireTime).toBe(micro);
    expect((await failure(leases.replaceNamespacedLease({ namespace, name: 'l', body: read }))).code).toBe(409);
    expect((await failure(leases.readNamespacedLease({ namespace, name: 'none' }))).code).toBe(404);
  });

  it('a fenced KubeConfig: a refused write leaves the object as it was', async () => {
    const core = coreClient(adminConfig());
    await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'fenced' }, stringData: { k: 'v1' } } });
    const fenced = coreClient(
      fenceKubeWrites(adminConfig(), {
        check: () => {
          throw new NotLeadingError();
        },
      }),
    );
    const read = await fenced.readNamespacedSecret({ namespace, name: 'fenced' });
    await expect(fenced.replaceNamespacedSecret({ namespace, name: 'fenced', body: { ...read, stringData: { k: 'v2' } } })).rejects.toBeInstanceOf(
      NotLeadingError,
    );
    await expect(fenced.deleteNamespacedSecret({ namespace, name: 'fenced' })).rejects.toBeInstanceOf(NotLeadingError);
    expect((await core.readNamespacedSecret({ namespace, name: 'fenced' })).metadata?.resourceVersion).toBe(read.metadata?.resourceVersion);
  });
});
