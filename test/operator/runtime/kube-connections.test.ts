// The API clients' transport (src/operator/runtime/kube-connections.ts): one dispatcher per cluster,
// user and TLS material; the TLS material read again only after TLS_REREAD_MS (a manual clock); and
// the requests sent with undici's `request` (sendKubeRequest, under runtime/kube-client.ts's API
// clients), against the real apiserver (objects, a 404 and a 403 as client-node's ApiException, a
// patch) and against a loopback server that shows what is sent.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { appsClient, coreClient } from '../../../src/operator/runtime/kube-client.ts';
import { reuseKubeConnections, sendKubeRequest, TLS_REREAD_MS } from '../../../src/operator/runtime/kube-connections.ts';
import { startRecordingServer, type RecordingServer, type SeenRequest } from '../../harness/recording-server.ts';
import { controlPlane } from '../../harness/index.ts';

const CA_A = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
const CA_B = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n').toString('base64');

function kubeConfig(user = 'sa', token = 't0', server = 'https://127.0.0.1:6443'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node refuses a plain-HTTP server unless TLS verification is off (the loopback server).
    clusters: [{ name: 'c', server, caData: CA_A, skipTLSVerify: server.startsWith('http:') }],
    users: [{ name: user, token }],
    contexts: [{ name: 'ctx', cluster: 'c', user }],
    currentContext: 'ctx',
  });
  return kc;
}

async function signed(kc: KubeConfig): Promise<{ dispatcher: unknown; headers: Record<string, string> }> {
  let dispatcher: unknown;
  const headers: Record<string, string> = {};
  const context = {
    setHeaderParam: (name: string, value: string) => {
      headers[name] = value;
    },
    setDispatcher: (d: unknown) => {
      dispatcher = d;
    },
  };
  await kc.applySecurityAuthentication(context as never);
  return { dispatcher, headers };
}

describe('reuseKubeConnections: dispatcher and TLS material', () => {
  it('client-node alone builds a dispatcher per request (the behaviour worked around)', async () => {
    const kc = kubeConfig();
    const [a, b] = [(await signed(kc)).dispatcher, (await signed(kc)).dispatcher];
    expect(a).toBeDefined();
    expect(a).not.toBe(b);
  });

  it('reuses one dispatcher for every request of the same cluster, user and TLS material', async () => {
    const kc = reuseKubeConnections(kubeConfig());
    const first = await signed(kc);
    expect(first.dispatcher).toBeDefined();
    expect(first.headers.Authorization).toBe('Bearer t0');
    expect((await signed(kc)).dispatcher).toBe(first.dispatcher);
    expect((await signed(kc)).dispatcher).toBe(first.dispatcher);
  });

  it('keeps separate dispatchers for separate KubeConfigs', async () => {
    const a = (await signed(reuseKubeConnections(kubeConfig('a')))).dispatcher;
    const b = (await signed(reuseKubeConnections(kubeConfig('b')))).dispatcher;
    expect(a).not.toBe(b);
  });

  it('reads the TLS material again only after TLS_REREAD_MS, and then takes a rotated CA; the token is read per request', async () => {
    let clock = 0;
    const kc = reuseKubeConnections(kubeConfig(), { now: () => clock });
    const first = await signed(kc);
    // The CA and the token change (a rotation).
    (kc.getCurrentCluster() as { caData: string }).caData = CA_B;
    (kc.getCurrentUser() as { token: string }).token = 't1';
    clock = TLS_REREAD_MS - 1;
    const before = await signed(kc);
    expect(before.dispatcher).toBe(first.dispatcher);
    expect(before.headers.Authorization).toBe('Bearer t1');
    clock = TLS_REREAD_MS;
    const after = await signed(kc);
    expect(after.dispatcher).toBeDefined();
    expect(after.dispatcher).not.toBe(first.dispatcher);
    // The same material again later: the dispatcher made for it is kept.
    clock = 2 * TLS_REREAD_MS;
    expect((await signed(kc)).dispatcher).toBe(after.dispatcher);
  });
});

describe('reuseKubeConnections: API clients over undici request', () => {
  let server: RecordingServer;
  const seen: SeenRequest[] = [];

  beforeAll(async () => {
    server = await startRecordingServer(seen, (request, res) => {
      if (request.url?.endsWith('/missing')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'] });
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'seen', resourceVersion: '7' }, data: { k: 'ü' } }));
    });
  });

  afterAll(async () => {
    await server.close();
  });

  it('sends the method, headers, user agent and body, and hands back the status and the whole body', async () => {
    const port = server.port;
    const kc = reuseKubeConnections(kubeConfig('sa', 't0', `http://127.0.0.1:${port}`), { userAgent: 'neon-key-operator/test' });
    const answer = await sendKubeRequest(kc, { method: 'GET', path: '/api/v1/namespaces/ns/configmaps/seen' });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['set-cookie']).toBe('a=1, b=2');
    const read = JSON.parse(answer.body.toString('utf8')) as { metadata?: { resourceVersion?: string }; data?: Record<string, string> };
    expect(read.metadata?.resourceVersion).toBe('7');
    expect(read.data).toEqual({ k: 'ü' });
    await appsClient(kc).patchNamespacedDeployment(
      { name: 'seen', namespace: 'ns', body: [{ op: 'replace', path: '/data/k', value: 'v' }] },
      'application/json-patch+json',
    );
    const missing = await coreClient(kc)
      .readNamespacedSecret({ name: 'missing', namespace: 'ns' })
      .catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(ApiException);
    expect((missing as ApiException<unknown>).code).toBe(404);
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'GET /api/v1/namespaces/ns/configmaps/seen',
      'PATCH /apis/apps/v1/namespaces/ns/deployments/seen',
      'GET /api/v1/namespaces/ns/secrets/missing',
    ]);
    for (const request of seen) {
      expect(request.headers['user-agent']).toBe('neon-key-operator/test');
      expect(request.headers.authorization).toBe('Bearer t0');
    }
    expect(seen[1]?.headers['content-type']).toBe('application/json-patch+json');
    expect(JSON.parse(seen[1]?.body ?? '')).toEqual([{ op: 'replace', path: '/data/k', value: 'v' }]);
  });
});

describe('reuseKubeConnections against the apiserver', () => {
  it('creates, reads, patches and fails as client-node does', async () => {
    const cp = await controlPlane();
    const admin = cp.kubeConfig.makeApiClient(CoreV1Api);
    const namespace = `kube-connections-${randomBytes(3).toString('hex')}`;
    await admin.createNamespace({ body: { metadata: { name: namespace } } });
    try {
      // A ServiceAccount with no role may not read Secrets: the refusal is client-node's ApiException.
      await admin.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'nobody' } } });
      const nobody = coreClient(reuseKubeConnections(cp.kubeConfigForToken(await cp.mintServiceAccountToken(namespace, 'nobody', 600))));
      const refused = await nobody.readNamespacedSecret({ name: 'x', namespace }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(ApiException);
      expect((refused as ApiException<unknown>).code).toBe(403);
      // The admin's kube config on the same transport.
      const adminConfig = new KubeConfig();
      adminConfig.loadFromFile(cp.kubeconfigPath);
      const kc = reuseKubeConnections(adminConfig);
      const core = coreClient(kc);
      const made = await core.createNamespacedSecret({ namespace, body: { metadata: { name: 'x' }, stringData: { a: '1' } } });
      expect(made.metadata?.uid).toBeDefined();
      // A patch (the transport's; the API clients patch custom resources' status and workloads).
      const answer = await sendKubeRequest(kc, {
        method: 'PATCH',
        path: `/api/v1/namespaces/${namespace}/secrets/x`,
        contentType: 'application/merge-patch+json',
        body: JSON.stringify({ stringData: { a: '2' } }),
      });
      expect(answer.statusCode).toBe(200);
      const patched = JSON.parse(answer.body.toString('utf8')) as { data?: Record<string, string>; metadata?: { resourceVersion?: string } };
      expect(patched.data).toEqual({ a: Buffer.from('2').toString('base64') });
      expect((await core.readNamespacedSecret({ name: 'x', namespace })).metadata?.resourceVersion).toBe(patched.metadata?.resourceVersion);
      const gone = await core.readNamespacedSecret({ name: 'y', namespace }).catch((error: unknown) => error);
      expect((gone as ApiException<unknown>).code).toBe(404);
    } finally {
      await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
    }
  });
});
