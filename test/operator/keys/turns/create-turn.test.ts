// keys/turns/create-turn.ts: a create in its organization's turn, through the reconciler with the
// fakes of fakes.ts (their platform records what each create was handed). The create's platform call
// carries the turn's waiter (whose create it is, for the organization's fair limiter), the worker
// is given back while it waits, and the turn ends with the platform's answer: the next key in line
// is woken before the create's Secret and status are written.
import { describe, expect, it } from '@jest/globals';
import pino from 'pino';
import type { Worker } from '../../../../src/operator/runtime/workers.ts';
import { CreateAdmission } from '../../../../src/operator/keys/turns/create-admission.ts';
import { CreateWaiter } from '../../../../src/operator/keys/turns/fair-limiter.ts';
import type { CreateCallOptions } from '../../../../src/platform/index.ts';
import { FakePlatform, keyResource, NAMESPACE, rig, type FakeKey } from '../fakes.ts';

/** The fake platform, recording the options each organization key's create was handed. */
class RecordingPlatform extends FakePlatform {
  readonly handed: (CreateCallOptions | undefined)[] = [];
  onCreate: (() => void) | undefined;
  override async createOrganizationKey(orgId: string, body: { keyName: string; projectId?: string }, opts?: CreateCallOptions): Promise<FakeKey> {
    this.handed.push(opts);
    this.onCreate?.();
    return super.createOrganizationKey(orgId, body);
  }
}

const logger = pino({ level: 'silent' });

describe("a create in its organization's turn", () => {
  it("hands the create's platform call the turn's waiter, gives the worker back, and ends the turn with the answer", async () => {
    const platform = new RecordingPlatform();
    const woken: { key: string; writesBefore: string[] }[] = [];
    let kubeWrites = (): string[] => [];
    const admission = new CreateAdmission({ perOrganization: 1, wake: (key) => woken.push({ key, writesBefore: kubeWrites() }) });
    const r = rig({ turns: admission, platformFor: (apiKey) => ({ platform, credentialsId: apiKey.slice(0, 8) }) });
    kubeWrites = () => r.kube.calls.filter((c) => !c.startsWith('get'));
    r.kube.putResource(keyResource('ApiKey', 'ci'));
    let turnTaken: boolean | undefined;
    platform.onCreate = () => {
      // The organization's one turn is this create's: another key waits in line meanwhile.
      turnTaken = admission.admit('org-1', `ApiKey/${NAMESPACE}/next`) === undefined;
    };
    const released: Promise<unknown>[] = [];
    const worker: Worker = {
      release: <T>(wait: Promise<T>): Promise<T> => {
        released.push(wait);
        return wait;
      },
    };
    const result = await r.reconciler.reconcile({ kind: 'ApiKey', namespace: NAMESPACE, name: 'ci' }, logger, worker);
    expect(result).toEqual({ type: 'Done', requeueAfterMs: 60_000 });
    expect(turnTaken).toBe(true);
    expect(released).toHaveLength(1);
    expect(platform.handed).toHaveLength(1);
    expect(platform.handed[0]?.waiter).toBeInstanceOf(CreateWaiter);
    expect(platform.handed[0]?.waiter).toEqual(new CreateWaiter(`ApiKey/${NAMESPACE}/ci`, 'create'));
    // The next key is woken once, at the answer: after the intent, before the Secret and the status.
    expect(woken.map((w) => w.key)).toEqual([`ApiKey/${NAMESPACE}/next`]);
    expect(woken[0]?.writesBefore).toEqual([`update ApiKey/${NAMESPACE}/ci`]);
    expect(kubeWrites()).toEqual([`update ApiKey/${NAMESPACE}/ci`, `create Secret ${NAMESPACE}/ci`, `put status ApiKey/${NAMESPACE}/ci`]);
  });

  it('gives a personal key no turn and its create no waiter', async () => {
    const platform = new RecordingPlatform();
    const admission = new CreateAdmission({ perOrganization: 1, wake: () => undefined });
    const r = rig({ turns: admission, platformFor: (apiKey) => ({ platform, credentialsId: apiKey.slice(0, 8) }) });
    r.kube.putResource(keyResource('ApiKey', 'mine', { spec: { scope: 'Personal', organizationId: undefined } }));
    const worker: Worker = { release: <T>(wait: Promise<T>): Promise<T> => wait };
    await r.reconciler.reconcile({ kind: 'ApiKey', namespace: NAMESPACE, name: 'mine' }, logger, worker);
    expect(platform.calls.filter((c) => c.startsWith('create'))).toEqual([expect.stringMatching(/^createPersonal /)]);
    expect(platform.handed).toEqual([]);
    expect(admission.size).toBe(0);
  });
});
