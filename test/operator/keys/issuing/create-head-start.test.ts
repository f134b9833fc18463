// What a first create waits for before its POST (issuing/create-head-start.ts, create-protocol.ts):
// the credentials Secret's finalizer is written beside the intent, and both before the POST; a
// write of the finalizer that fails takes the intent back and sends nothing. The failing write is
// a fault of the fake apiserver (fakes.ts FakeKube.failNext): a real one cannot be made to refuse
// one update of one Secret it otherwise accepts.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { pino } from 'pino';
import { keepCredentials } from '../../../../src/operator/keys/issuing/credentials-in-use.ts';
import { ANNOTATION_CREATE_PENDING, CREDENTIALS_FINALIZER, FINALIZER } from '../../../../src/operator/resources/schema.ts';
import { FakeKube, NAMESPACE, keyResource, rig } from '../fakes.ts';

const logger = pino({ level: 'silent' });

describe('the credentials Secret kept beside the intent', () => {
  it('a failed write of the finalizer sends no create and leaves no intent; the next pass creates with the Secret kept', async () => {
    const r = rig({ credentialsUsers: { holders: () => [] } });
    r.kube.putResource(keyResource('ApiKey', 'ci'));
    r.kube.failNext = { call: 'update Secret', error: new ApiException(500, 'etcd timeout', {}, {}) };
    const failed = await r.reconcile().then(
      (result) => result,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(ApiException);
    expect(r.platform.calls.filter((c) => c.startsWith('createOrg'))).toEqual([]);
    // The intent (with the finalizer) was written beside the failing write, then taken back.
    expect(r.kube.calls.filter((c) => c === `update ApiKey/${NAMESPACE}/ci`)).toHaveLength(2);
    const after = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    expect(after.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    // The finalizer came with the intent and stays: the resource is as after a first pass that added it alone.
    expect(after.metadata.finalizers).toEqual([FINALIZER]);
    expect(r.kube.secret(NAMESPACE, 'neon-admin')?.metadata?.finalizers ?? []).toEqual([]);

    await r.settle('ApiKey');
    expect(r.platform.calls.filter((c) => c.startsWith('createOrg'))).toHaveLength(1);
    expect(r.kube.secret(NAMESPACE, 'neon-admin')?.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True' });
  });

  it('a finalizer write that fails while the intent is still being written is no unhandled rejection (the process would end)', () => {
    // In a Node process of its own, as the operator runs: Node ends a process on an unhandled
    // rejection (exit 1), which jest's environment does not show. The intent's write answers a
    // macrotask after the refused Secret write: Node judges a rejection unhandled once the
    // microtasks in between have run.
    const fakes = new URL('../fakes.ts', import.meta.url).href;
    const schema = new URL('../../../../src/operator/resources/schema.ts', import.meta.url).href;
    const script = `
      import { ApiException } from '@kubernetes/client-node';
      import { keyResource, rig } from ${JSON.stringify(fakes)};
      import { ANNOTATION_CREATE_PENDING } from ${JSON.stringify(schema)};
      const r = rig({ credentialsUsers: { holders: () => [] } });
      r.kube.putResource(keyResource('ApiKey', 'ci'));
      r.kube.failNext = { call: 'update Secret', error: new ApiException(500, 'etcd timeout', {}, {}) };
      const replace = r.kube.replaceResource.bind(r.kube);
      r.kube.replaceResource = async (resource) => {
        if (resource.metadata.annotations?.[ANNOTATION_CREATE_PENDING] !== undefined) await new Promise((resolve) => setImmediate(resolve));
        return replace(resource);
      };
      const outcome = await r.reconcile().then(() => 'resolved', (error) => error?.constructor?.name ?? String(error));
      console.log(JSON.stringify({ outcome, creates: r.platform.calls.filter((c) => c.startsWith('createOrg')).length }));
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: process.cwd(),
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    expect({ status: run.status, stderr: run.status === 0 ? '' : run.stderr.slice(0, 2_000) }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}')).toEqual({ outcome: 'ApiException', creates: 0 });
  });

  it('a copy of the Secret read before the finalizer was written is not written again (no 409, no fresh read)', async () => {
    const kube = new FakeKube();
    kube.putSecret({ metadata: { name: 'stale-creds', namespace: NAMESPACE }, data: { apiKey: Buffer.from('k').toString('base64') } });
    const stale = kube.secret(NAMESPACE, 'stale-creds');
    await keepCredentials(kube, stale, logger);
    await keepCredentials(kube, stale, logger);
    expect(kube.calls).toEqual([`update Secret ${NAMESPACE}/stale-creds`]);
    expect(kube.secret(NAMESPACE, 'stale-creds')?.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
    // Lifted since (a fresh copy without it, at a newer version): written again.
    const kept = kube.secret(NAMESPACE, 'stale-creds')!;
    kube.putSecret({ ...kept, metadata: { ...kept.metadata, finalizers: [] } });
    await keepCredentials(kube, kube.secret(NAMESPACE, 'stale-creds'), logger);
    expect(kube.calls.filter((c) => c.startsWith('update Secret'))).toHaveLength(2);
    expect(kube.secret(NAMESPACE, 'stale-creds')?.metadata?.finalizers).toEqual([CREDENTIALS_FINALIZER]);
  });
});
