// The credentials Secrets kept by version (issuing/credentials-reads.ts): read by name once per
// version the informers' cache shows, never kept when fat or when the cache is stale, and never more
// than the bound. The apiserver is the in-memory fake (fakes.ts FakeKube), the cache a map the test
// moves: a lagging cache is a state a real informer is in for moments only, and cannot be held there.
import { describe, expect, it } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { CredentialsReads, MAX_KEPT_BYTES } from '../../../../src/operator/keys/issuing/credentials-reads.ts';
import type { ObjectVersion } from '../../../../src/operator/keys/reconcile-context.ts';
import { FakeKube, NAMESPACE } from '../fakes.ts';

const secret = (name: string, value: string, uid = `uid-${name}`): V1Secret => ({
  metadata: { name, namespace: NAMESPACE, uid },
  data: { apiKey: Buffer.from(value).toString('base64') },
});

/** A cache that shows what the fake apiserver holds, except where the test holds a version back. */
function cacheOf(kube: FakeKube): {
  held: Map<string, ObjectVersion | undefined>;
  stale: Set<string>;
  cache: ConstructorParameters<typeof CredentialsReads>[1];
} {
  const held = new Map<string, ObjectVersion | undefined>();
  const stale = new Set<string>();
  return {
    held,
    stale,
    cache: {
      version: (namespace, name) => {
        const ref = `${namespace}/${name}`;
        if (held.has(ref)) return held.get(ref);
        const s = kube.secret(namespace, name);
        return s === undefined ? undefined : { uid: s.metadata?.uid, resourceVersion: s.metadata?.resourceVersion };
      },
      stale: (namespace) => stale.has(namespace),
    },
  };
}

const reads = (kube: FakeKube, name: string): number => kube.calls.filter((c) => c === `get Secret ${NAMESPACE}/${name}`).length;
const value = (s: V1Secret | undefined): string => Buffer.from(s?.data?.apiKey ?? '', 'base64').toString('utf8');

describe('credentials Secrets kept by the version the cache holds', () => {
  it('reads a Secret once per version: a hundred passes at one version cost one GET, a new version one more', async () => {
    const kube = new FakeKube();
    kube.putSecret(secret('neon-admin', 'napi_first'));
    const reader = new CredentialsReads(kube, cacheOf(kube).cache);
    // A hundred at once (a wave's first passes) share the one read.
    const first = await Promise.all(Array.from({ length: 100 }, () => reader.read(NAMESPACE, 'neon-admin')));
    expect(first.every((s) => value(s) === 'napi_first')).toBe(true);
    expect(reads(kube, 'neon-admin')).toBe(1);
    for (let i = 0; i < 100; i++) expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_first');
    expect(reads(kube, 'neon-admin')).toBe(1);

    kube.putSecret(secret('neon-admin', 'napi_second'));
    expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_second');
    expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_second');
    expect(reads(kube, 'neon-admin')).toBe(2);
    expect(reader.stats).toEqual({ kept: 1, reads: 2 });
  });

  it('a Secret deleted and made again under its name (another uid) is read again, even at a resourceVersion seen before', async () => {
    const kube = new FakeKube();
    kube.putSecret(secret('neon-admin', 'napi_first', 'uid-a'));
    const { held, cache } = cacheOf(kube);
    const reader = new CredentialsReads(kube, cache);
    const first = await reader.read(NAMESPACE, 'neon-admin');
    kube.putSecret({ ...secret('neon-admin', 'napi_other', 'uid-b') });
    // The same resourceVersion as the first, another uid: not the Secret kept.
    held.set(`${NAMESPACE}/neon-admin`, { uid: 'uid-b', resourceVersion: first?.metadata?.resourceVersion });
    expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_other');
    expect(reads(kube, 'neon-admin')).toBe(2);
  });

  it('a cache behind the apiserver answers with the version it shows, as a GET a moment earlier would; the next version is read once the cache shows it', async () => {
    const kube = new FakeKube();
    kube.putSecret(secret('neon-admin', 'napi_first'));
    const { held, cache } = cacheOf(kube);
    const reader = new CredentialsReads(kube, cache);
    const first = await reader.read(NAMESPACE, 'neon-admin');
    held.set(`${NAMESPACE}/neon-admin`, { uid: first?.metadata?.uid, resourceVersion: first?.metadata?.resourceVersion });
    kube.putSecret(secret('neon-admin', 'napi_second'));
    expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_first');
    held.delete(`${NAMESPACE}/neon-admin`);
    expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_second');
  });

  it('with the cache stale, or the Secret not in it, every read goes to the apiserver', async () => {
    const kube = new FakeKube();
    kube.putSecret(secret('neon-admin', 'napi_first'));
    const { held, stale, cache } = cacheOf(kube);
    const reader = new CredentialsReads(kube, cache);
    await reader.read(NAMESPACE, 'neon-admin');
    stale.add(NAMESPACE);
    await reader.read(NAMESPACE, 'neon-admin');
    await reader.read(NAMESPACE, 'neon-admin');
    expect(reads(kube, 'neon-admin')).toBe(3);
    stale.clear();
    held.set(`${NAMESPACE}/neon-admin`, undefined);
    await reader.read(NAMESPACE, 'neon-admin');
    expect(reads(kube, 'neon-admin')).toBe(4);
    // A Secret that does not exist is never kept as absent.
    expect(await reader.read(NAMESPACE, 'missing')).toBeUndefined();
    expect(await reader.read(NAMESPACE, 'missing')).toBeUndefined();
    expect(reads(kube, 'missing')).toBe(2);
  });

  it("a tenant's fat Secret is never kept (read each time), and at most the bound of Secrets are kept", async () => {
    const kube = new FakeKube();
    kube.putSecret({ metadata: { name: 'fat', namespace: NAMESPACE, uid: 'uid-fat' }, data: { apiKey: 'QQ==', padding: 'x'.repeat(MAX_KEPT_BYTES) } });
    const reader = new CredentialsReads(kube, cacheOf(kube).cache, 8);
    await reader.read(NAMESPACE, 'fat');
    await reader.read(NAMESPACE, 'fat');
    expect(reads(kube, 'fat')).toBe(2);
    expect(reader.stats.kept).toBe(0);
    for (let i = 0; i < 20; i++) {
      kube.putSecret(secret(`creds-${i}`, `napi_${i}`));
      await reader.read(NAMESPACE, `creds-${i}`);
    }
    expect(reader.stats.kept).toBe(8);
    // The most recently used are the ones kept: the last eight, not the first.
    await reader.read(NAMESPACE, 'creds-19');
    await reader.read(NAMESPACE, 'creds-0');
    expect(reads(kube, 'creds-19')).toBe(1);
    expect(reads(kube, 'creds-0')).toBe(2);
  });

  it('what is kept is frozen: no pass can change what the next one reads', async () => {
    const kube = new FakeKube();
    kube.putSecret(secret('neon-admin', 'napi_first'));
    const reader = new CredentialsReads(kube, cacheOf(kube).cache);
    const kept = await reader.read(NAMESPACE, 'neon-admin');
    expect(() => {
      (kept!.data as Record<string, string>).apiKey = 'changed';
    }).toThrow(TypeError);
    expect(() => {
      kept!.metadata!.finalizers = ['x'];
    }).toThrow(TypeError);
    expect(value(await reader.read(NAMESPACE, 'neon-admin'))).toBe('napi_first');
  });
});
