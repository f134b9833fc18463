// What the informers' caches keep of keys and Secrets (src/operator/keys/observing/cache-projection.ts): a
// projection of each resource, and of a managed Secret its identity and owner, never its data. The same
// projections through real informers against the apiserver: test/operator/informer-cache.test.ts.
import { describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { V1Secret } from '@kubernetes/client-node';
import {
  SEED_MAX_CHARS,
  SEEDS_MAX_CHARS,
  cachedCopy,
  seedCharsKept,
  credentialsSecretOf,
  newKeyOrganization,
  recordedKeyIds,
  trimKeyResource,
  trimSecret,
  cachedOwner,
} from '../../../../src/operator/keys/observing/cache-projection.ts';
describe('trimKeyResource and trimSecret', () => {
  it('keep of a resource only what the controller reads', () => {
    const obj = {
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ProjectApiKey',
      metadata: {
        name: 'a',
        namespace: 'n',
        uid: 'u',
        resourceVersion: '7',
        generation: 2,
        deletionTimestamp: new Date(0),
        labels: { team: 'x' },
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"spec":{}}', 'keys.neon.dev/create-pending': '{}' },
        managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
        finalizers: ['keys.neon.dev/revoke'],
      },
      spec: { organizationId: 'o', projectId: 'p', keyName: 'k', credentialsSecretRef: { name: 'c', key: 'apiKey' } },
      status: {
        keyId: 3,
        secretHash: 'h'.repeat(64),
        operations: [{ id: 'op', status: 'running' }],
        conditions: [
          { type: 'Ready', status: 'True', reason: 'Ready', message: 'key 3 is ready', lastTransitionTime: '2026-11-23T00:00:00Z', observedGeneration: 2 },
        ],
      },
    };
    expect(trimKeyResource(obj)).toEqual({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ProjectApiKey',
      metadata: { name: 'a', namespace: 'n', uid: 'u', resourceVersion: '7', generation: 2, deletionTimestamp: new Date(0) },
      spec: { projectId: 'p', organizationId: 'o', credentialsSecretRef: { name: 'c' } },
      status: { conditions: [{ type: 'Ready', status: 'True', reason: 'Ready' }] },
      // The id its status records (an inventory's managed keys: recordedKeyIds()).
      keyId: 3,
      // It carries an intent: under an issuer's cap it may hold a key (issuing/issuer-slots.ts).
      pending: true,
    });
    // Retiring keys too; ids that are not safe integers are not kept (a status restored from anywhere).
    const retiring = trimKeyResource({
      ...obj,
      status: { keyId: 3, retiringKeys: [{ keyId: 2 }, { keyId: 'x' }, { keyId: 2 ** 60 }, { keyId: -1 }] },
    } as never);
    expect([retiring.keyId, retiring.retiringKeyIds]).toEqual([3, [2]]);
    expect(
      recordedKeyIds(
        [retiring, trimKeyResource({ ...obj, status: { keyId: 7 } } as never), trimKeyResource({ ...obj, status: { keyId: '9' } } as never)],
        new Set(),
      ),
    ).toEqual(new Set([3, 2, 7]));
    // A new key (no status) is kept whole too, as JSON (cachedCopy(), below).
    expect(
      trimKeyResource({ apiVersion: 'keys.neon.dev/v1alpha1', kind: 'ApiKey', metadata: { name: 'b', namespace: 'n' }, spec: { scope: 'Personal' } } as never),
    ).toEqual({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: { name: 'b', namespace: 'n', uid: undefined, resourceVersion: undefined },
      spec: {},
      status: { conditions: [] },
      seed: '{"apiVersion":"keys.neon.dev/v1alpha1","kind":"ApiKey","metadata":{"name":"b","namespace":"n"},"spec":{"scope":"Personal"}}',
    });
  });

  it('keep a new key whole (no status, no intent, not being deleted, at most SEED_MAX_CHARS of JSON), for its create without a read, and nothing else whole', () => {
    const fresh = {
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: {
        name: 'k',
        namespace: 'n',
        uid: 'u',
        resourceVersion: '5',
        generation: 1,
        creationTimestamp: '2026-11-26T10:00:00Z',
        labels: { team: 'x' },
        annotations: { note: 'mine' },
        managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': {} } }],
      },
      spec: {
        scope: 'Organization',
        organizationId: 'o',
        credentialsSecretRef: { name: 'c', key: 'apiKey' },
        secret: { template: { annotations: { a: 'b' } } },
      },
    };
    const copy = cachedCopy(trimKeyResource(fresh as never), 'ApiKey', 'n', 'k');
    // Everything a GET answers but managedFields (an UPDATE without them keeps the apiserver's).
    const { managedFields: _dropped, ...metadata } = fresh.metadata;
    expect(copy).toEqual({ ...fresh, metadata });
    // A copy of its own each time: a reconcile may change it.
    expect(cachedCopy(trimKeyResource(fresh as never), 'ApiKey', 'n', 'k')).not.toBe(copy);
    // Not for another name, namespace or kind (the cache is looked up by them: never trusted blindly).
    expect(cachedCopy(trimKeyResource(fresh as never), 'ProjectApiKey', 'n', 'k')).toBeUndefined();
    expect(cachedCopy(trimKeyResource(fresh as never), 'ApiKey', 'n', 'other')).toBeUndefined();
    expect(cachedCopy(trimKeyResource({ ...fresh, metadata: { ...fresh.metadata, uid: undefined } } as never), 'ApiKey', 'n', 'k')).toBeUndefined();
    expect(cachedCopy(undefined, 'ApiKey', 'n', 'k')).toBeUndefined();
    // An empty status (no condition yet) is still new.
    expect(trimKeyResource({ ...fresh, status: { conditions: [] } } as never).seed).toBeDefined();
    // Anything the operator has been at, or that is going, is not new: read fresh as before.
    expect(trimKeyResource({ ...fresh, status: { conditions: [{ type: 'Ready', status: 'False', reason: 'Creating' }] } } as never).seed).toBeUndefined();
    expect(trimKeyResource({ ...fresh, status: { keyId: 3 } } as never).seed).toBeUndefined();
    expect(trimKeyResource({ ...fresh, metadata: { ...fresh.metadata, annotations: { 'keys.neon.dev/create-pending': '{}' } } } as never).seed).toBeUndefined();
    expect(trimKeyResource({ ...fresh, metadata: { ...fresh.metadata, deletionTimestamp: new Date(0) } } as never).seed).toBeUndefined();
    // A tenant's large annotations, labels or spec are never kept: at most SEED_MAX_CHARS a key.
    const big = 'x'.repeat(SEED_MAX_CHARS);
    expect(trimKeyResource({ ...fresh, metadata: { ...fresh.metadata, annotations: { big } } } as never).seed).toBeUndefined();
    expect(
      trimKeyResource({
        ...fresh,
        metadata: {
          ...fresh.metadata,
          labels: { [big.slice(0, 63)]: big.slice(0, 63) },
          annotations: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`a${i}`, big.slice(0, 60)])),
        },
      } as never).seed,
    ).toBeUndefined();
    expect(
      trimKeyResource({ ...fresh, spec: { ...fresh.spec, secret: { template: { annotations: { big: big.slice(0, SEED_MAX_CHARS - 100) } } } } } as never).seed,
    ).toBeUndefined();
    const kept = trimKeyResource({ ...fresh, metadata: { ...fresh.metadata, annotations: { fits: big.slice(0, SEED_MAX_CHARS - 600) } } } as never).seed;
    expect(kept?.length).toBeLessThanOrEqual(SEED_MAX_CHARS);
  });

  it('keep at most SEEDS_MAX_CHARS of new keys whole at once, each counted until the collector has taken its projection', async () => {
    // A tenant's flood of new keys, each near the longest kept whole, none reconciled yet.
    const pad = 'p'.repeat(SEED_MAX_CHARS - 400);
    const newKey = (i: number): object => ({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: { name: `flood-${i}`, namespace: 'n', uid: `u-${i}`, resourceVersion: String(i), annotations: { pad } },
      spec: { scope: 'Organization', organizationId: 'o', credentialsSecretRef: { name: 'c', key: 'apiKey' } },
    });
    const start = seedCharsKept();
    // In a function of its own: once it returns, nothing refers to the projections any more.
    const flood = (): { projected: number; copies: number; chars: number } => {
      const held = Array.from({ length: (2 * SEEDS_MAX_CHARS) / SEED_MAX_CHARS + 10 }, (_, i) => trimKeyResource(newKey(i) as never));
      const copies = held.filter((p) => p.seed !== undefined);
      return { projected: held.length, copies: copies.length, chars: copies.reduce((sum, p) => sum + (p.seed?.length ?? 0), 0) };
    };
    const { projected, copies, chars } = flood();
    // Kept up to the bound, and not one copy more: the rest are read at their turn.
    expect(seedCharsKept()).toBeLessThanOrEqual(SEEDS_MAX_CHARS);
    expect(chars).toBe(seedCharsKept() - start);
    expect(copies).toBeGreaterThan((SEEDS_MAX_CHARS - start) / SEED_MAX_CHARS - 1);
    expect(copies).toBeLessThan(projected);
    expect(trimKeyResource(newKey(-1) as never).seed).toBeUndefined();
    // Their projections replaced (the keys' first statuses, a relist, their deletion) and collected:
    // the count falls back, and a new key is kept whole again.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    for (let round = 0; round < 50 && seedCharsKept() > start; round++) {
      gc();
      await sleep(10);
    }
    expect(seedCharsKept()).toBeLessThanOrEqual(start);
    expect(trimKeyResource(newKey(-2) as never).seed).toBeDefined();
  });

  it('keep a condition reason only when it is one of the operator reasons, else Other (a bounded metric label)', () => {
    const withReasons = (...reasons: unknown[]): ReturnType<typeof trimKeyResource> =>
      trimKeyResource({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ApiKey',
        metadata: { name: 'r', namespace: 'n' },
        // As a status restored from a backup, or written by another tool, may say.
        status: { conditions: reasons.map((reason, i) => ({ type: `T${i}`, status: 'False', ...(reason !== undefined ? { reason } : {}) })) },
      } as never);
    const long = 'A'.repeat(5_000);
    expect(
      withReasons(
        'CredentialsRefused',
        'RolloutStalled',
        'AllTerminal',
        'SomethingNew',
        'credentialsrefused',
        long,
        7,
        undefined,
        'toString',
        '__proto__',
      ).status.conditions.map((c) => c.reason),
    ).toEqual(['CredentialsRefused', 'RolloutStalled', 'AllTerminal', 'Other', 'Other', 'Other', 'Other', 'Other', 'Other', 'Other']);
    // Two resources whose unknown reasons differ share one projection: the cache stays as small as it was.
    expect(withReasons('Made-up-1').status).toBe(withReasons('Made-up-2').status);
  });

  it('share one frozen spec and status projection among resources with the same ones, and keep their own identity', () => {
    const resource = (name: string, projectId: string, ready: string): ReturnType<typeof trimKeyResource> =>
      trimKeyResource({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ProjectApiKey',
        metadata: { name, namespace: 'n', uid: `uid-${name}`, resourceVersion: '1' },
        spec: { organizationId: 'o', projectId, credentialsSecretRef: { name: 'c', key: 'apiKey' } },
        // JSON.parse makes a copy of every value of every object: so do these.
        status: JSON.parse(
          JSON.stringify({
            conditions: [
              { type: 'Ready', status: ready, reason: 'Ready', message: `key of ${name}` },
              { type: 'OperationsSettled', status: 'True', reason: 'AllTerminal' },
            ],
          }),
        ) as unknown,
      } as never);
    const [a, b, c, d] = [resource('a', 'p1', 'True'), resource('b', 'p1', 'True'), resource('c', 'p2', 'True'), resource('d', 'p1', 'False')];
    expect(b.spec).toBe(a.spec);
    expect(b.status).toBe(a.status);
    expect(c.spec).not.toBe(a.spec);
    expect(c.spec).toEqual({ projectId: 'p2', organizationId: 'o', credentialsSecretRef: { name: 'c' } });
    expect(c.status).toBe(a.status);
    expect(d.spec).toBe(a.spec);
    expect(d.status).not.toBe(a.status);
    expect(d.status).toEqual({
      conditions: [
        { type: 'Ready', status: 'False', reason: 'Ready' },
        { type: 'OperationsSettled', status: 'True', reason: 'AllTerminal' },
      ],
    });
    expect(b.metadata).toEqual({ name: 'b', namespace: 'n', uid: 'uid-b', resourceVersion: '1' });
    // Shared, so read-only: a reader that changed one resource's projection would change all of them.
    expect(() => {
      (a.status.conditions[0] as { status: string }).status = 'False';
    }).toThrow(TypeError);
    expect(() => {
      a.status.conditions.push({ type: 'X', status: 'True', reason: 'Ready' });
    }).toThrow(TypeError);
    expect(() => {
      (a.spec.credentialsSecretRef as { name: string }).name = 'other';
    }).toThrow(TypeError);
    expect(b.status.conditions[0]).toEqual({ type: 'Ready', status: 'True', reason: 'Ready' });
  });

  it('name the organization of a new key only (no condition yet, not being deleted), for its create turn', () => {
    const key = (extra: { conditions?: { type: string; status: string }[]; deleting?: boolean; organizationId?: string }): ReturnType<typeof trimKeyResource> =>
      trimKeyResource({
        apiVersion: 'keys.neon.dev/v1alpha1',
        kind: 'ProjectApiKey',
        metadata: { name: 'a', namespace: 'n', ...(extra.deleting === true ? { deletionTimestamp: new Date(0) } : {}) },
        spec: { ...(extra.organizationId !== undefined ? { organizationId: extra.organizationId } : {}), projectId: 'p' },
        status: { conditions: extra.conditions ?? [] },
      } as never);
    expect(newKeyOrganization(key({ organizationId: 'org-1' }))).toBe('org-1');
    expect(newKeyOrganization(key({ organizationId: 'org-1', conditions: [{ type: 'Ready', status: 'False' }] }))).toBeUndefined();
    expect(newKeyOrganization(key({ organizationId: 'org-1', deleting: true }))).toBeUndefined();
    expect(newKeyOrganization(key({}))).toBeUndefined();
    expect(newKeyOrganization(undefined)).toBeUndefined();
  });

  it('keep of a Secret its identity and owner, and none of its data', () => {
    const secret: V1Secret = {
      metadata: {
        name: 's',
        namespace: 'n',
        uid: 'u',
        resourceVersion: '9',
        labels: { l: 'v', 'app.kubernetes.io/managed-by': 'neon-key-operator' },
        annotations: { 'keys.neon.dev/owner': 'ProjectApiKey/a', 'keys.neon.dev/key-id': '3' },
        ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'x', uid: 'ux' }],
        managedFields: [{ manager: 'm' }],
      },
      type: 'Opaque',
      data: { apiKey: Buffer.from('s3cr3t').toString('base64') },
      stringData: { other: 's3cr3t' },
    };
    const trimmed = trimSecret(secret);
    expect(trimmed).toEqual({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's', namespace: 'n', uid: 'u', resourceVersion: '9' },
      owner: 'ProjectApiKey/a',
    });
    expect(cachedOwner(trimmed)).toBe('ProjectApiKey/a');
    // The usual Secret, named after its owner: the owner's kind alone is kept, and its value given back whole.
    const own = trimSecret({ ...secret, metadata: { ...secret.metadata, name: 'a' } });
    expect(own).toEqual({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'a', namespace: 'n', uid: 'u', resourceVersion: '9' }, owner: 'ProjectApiKey' });
    expect(cachedOwner(own)).toBe('ProjectApiKey/a');
    // An owner that only ends with the Secret's name is another resource: kept whole.
    const longer = trimSecret({ ...secret, metadata: { ...secret.metadata, name: 'a', annotations: { 'keys.neon.dev/owner': 'ApiKey/xa' } } });
    expect(cachedOwner(longer)).toBe('ApiKey/xa');
    expect(JSON.stringify(trimmed)).not.toContain('s3cr3t');
    expect(JSON.stringify(trimmed)).not.toContain(Buffer.from('s3cr3t').toString('base64'));
    // A Secret that is not ours (no managed-by label): its identity only, even with an owner annotation.
    const foreign = trimSecret({ ...secret, metadata: { ...secret.metadata, labels: { l: 'v' } } });
    expect(foreign).toEqual({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'n', uid: 'u', resourceVersion: '9' } });
    expect(cachedOwner(foreign)).toBeUndefined();
  });
});

describe('the credentials index and the credentials Secret projection', () => {
  it('index a resource by the namespace and name of the Secret it names, and keep of any Secret its identity only', () => {
    const resource = trimKeyResource({
      apiVersion: 'keys.neon.dev/v1alpha1',
      kind: 'ApiKey',
      metadata: { name: 'a', namespace: 'n' },
      spec: { credentialsSecretRef: { name: 'creds', key: 'apiKey' } },
    } as never);
    expect(credentialsSecretOf(resource)).toEqual(['n/creds']);
    expect(credentialsSecretOf(trimKeyResource({ metadata: { name: 'b', namespace: 'n' }, spec: {} } as never))).toEqual([]);
    const secret = {
      apiVersion: 'meta.k8s.io/v1',
      kind: 'PartialObjectMetadata',
      metadata: {
        name: 'creds',
        namespace: 'n',
        uid: 'u',
        resourceVersion: '4',
        labels: { l: 'v' },
        annotations: { a: 'b' },
        managedFields: [{ manager: 'm' }],
      },
      data: { apiKey: 'czNjcjN0' },
    };
    expect(trimSecret(secret as never)).toEqual({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'creds', namespace: 'n', uid: 'u', resourceVersion: '4' },
    });
  });
});
