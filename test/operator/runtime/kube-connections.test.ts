// client-node 2.0 makes a new undici Agent (new TCP + TLS connection) for every API request;
// reuseKubeConnections() makes one KubeConfig reuse one dispatcher (bench/operator.ts, issue 7).
import { describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { reuseKubeConnections } from '../../../src/operator/runtime/kube-connections.ts';

function kubeConfig(user = 'sa', token = 't0'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server: 'https://127.0.0.1:6443',
        caData: Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64'),
        skipTLSVerify: false,
      },
    ],
    users: [{ name: user, token }],
    contexts: [{ name: 'ctx', cluster: 'c', user }],
    currentContext: 'ctx',
  });
  return kc;
}

async function dispatcherOf(kc: KubeConfig): Promise<unknown> {
  let dispatcher: unknown;
  const context = {
    setHeaderParam: () => undefined,
    setDispatcher: (d: unknown) => {
      dispatcher = d;
    },
  };
  await kc.applySecurityAuthentication(context as never);
  return dispatcher;
}

describe('reuseKubeConnections', () => {
  it('client-node alone builds a dispatcher per request (the behaviour worked around)', async () => {
    const kc = kubeConfig();
    const [a, b] = [await dispatcherOf(kc), await dispatcherOf(kc)];
    expect(a).toBeDefined();
    expect(a).not.toBe(b);
  });

  it('reuses one dispatcher for every request of the same cluster, user and TLS material', async () => {
    const kc = reuseKubeConnections(kubeConfig());
    const first = await dispatcherOf(kc);
    expect(first).toBeDefined();
    expect(await dispatcherOf(kc)).toBe(first);
    expect(await dispatcherOf(kc)).toBe(first);
  });

  it('keeps separate dispatchers for separate KubeConfigs', async () => {
    const a = await dispatcherOf(reuseKubeConnections(kubeConfig('a')));
    const b = await dispatcherOf(reuseKubeConnections(kubeConfig('b')));
    expect(a).not.toBe(b);
  });
});
