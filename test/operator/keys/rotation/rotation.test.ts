// Rotation (src/operator/keys/rotation/rotation.ts, consumers.ts) against the in-memory Kubernetes and
// platform of fakes.ts, on a clock the test moves: the switch keeps the replaced key recorded, the
// retirement restarts consumers once, waits for rollouts, the grace period and the end of use, and
// revokes only what status recorded.
import { describe, expect, it } from '@jest/globals';
import type { V1Deployment } from '@kubernetes/client-node';
import { encodeIntent } from '../../../../src/operator/keys/issuing/create-intent.ts';
import { restartAnnotation } from '../../../../src/operator/keys/rotation/consumers.ts';
import { DriftCache } from '../../../../src/operator/keys/observing/drift.ts';
import { buildSecret } from '../../../../src/operator/keys/secret/secret-writer.ts';
import { ANNOTATION_CREATE_PENDING, ANNOTATION_ROTATE, type KeyResource } from '../../../../src/operator/resources/schema.ts';
import { ANNOTATION_RESTART_ON_ROTATION } from '../../../../src/operator/resources/spec-parts.ts';
import { NAMESPACE, keyResource, rig, type Rig } from '../fakes.ts';

const T0 = Date.parse('2026-11-23T10:00:00Z');

function clocked(spec: Record<string, unknown> = {}): Rig & { clock: { now: number }; resource(): KeyResource } {
  const clock = { now: T0 };
  const r = rig({ now: () => clock.now, drift: new DriftCache(60_000, () => clock.now), rotationPollMs: 1_000, minRotationGraceMs: 1_000 });
  // The platform dates its keys by the same clock: a schedule computed from created_at must not
  // depend on the day the test runs (it did, and failed from the day after T0 on).
  r.platform.now = () => clock.now;
  r.kube.putResource(keyResource('ApiKey', 'ci', { spec }));
  return Object.assign(r, { clock, resource: () => r.kube.resource('ApiKey', NAMESPACE, 'ci')! });
}

const condition = (resource: KeyResource, type: string): string | undefined => {
  const c = resource.status?.conditions?.find((x) => x.type === type);
  return c === undefined ? undefined : `${c.status} ${c.reason}`;
};

function annotate(r: Rig, annotations: Record<string, string>): void {
  const current = r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
  current.metadata.annotations = { ...current.metadata.annotations, ...annotations };
  r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, current);
}

const secretKeyId = (r: Rig): string | undefined => r.kube.secret(NAMESPACE, 'ci')?.metadata?.annotations?.['keys.neon.dev/key-id'];

/** A Deployment reading `secret` (envFrom); `consent`: its keys.neon.dev/restart-on-rotation annotation. */
function deployment(name: string, secret: string | undefined, namespace = NAMESPACE, consent?: string): V1Deployment {
  return {
    metadata: { name, namespace, generation: 1, ...(consent !== undefined ? { annotations: { [ANNOTATION_RESTART_ON_ROTATION]: consent } } : {}) },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'c', image: 'x', ...(secret !== undefined ? { envFrom: [{ secretRef: { name: secret } }] } : {}) }] },
      },
    },
    status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
  };
}

describe('rotation', () => {
  it('a request rotates once: the new key in the Secret, the old one retiring and live until the grace is over, then revoked', async () => {
    const r = clocked({ rotation: { gracePeriod: '30s' } });
    await r.settle();
    const old = r.resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'req-1' });
    r.clock.now += 1_000;
    await r.settle();
    const rotated = r.resource();
    const fresh = rotated.status!.keyId!;
    expect(fresh).not.toBe(old);
    expect(secretKeyId(r)).toBe(String(fresh));
    expect(rotated.metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(rotated.status?.retiringKeys).toEqual([expect.objectContaining({ keyId: old, since: new Date(T0 + 1_000).toISOString() })]);
    expect(rotated.status?.rotation).toMatchObject({ lastRequest: 'req-1', lastRotatedAt: new Date(T0 + 1_000).toISOString() });
    expect(condition(rotated, 'Ready')).toBe('True Ready');
    expect(condition(rotated, 'Rotating')).toBe('True RetiringKey');
    expect(r.platform.keys.map((k) => k.id).sort()).toEqual([old, fresh].sort());
    expect(r.events.reasons()).toEqual(expect.arrayContaining(['Normal RotationStarted', 'Normal KeyIssued']));

    // Inside the grace period: both live.
    r.clock.now += 20_000;
    expect(await r.reconcile()).toEqual({ type: 'Done', requeueAfterMs: expect.any(Number) });
    expect(r.platform.keys.map((k) => k.id)).toContain(old);

    // After it: revoked, dropped from status, Rotating False.
    r.clock.now += 15_000;
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toEqual([fresh]);
    const done = r.resource();
    expect(done.status?.retiringKeys).toEqual([]);
    expect(condition(done, 'Rotating')).toBe('False RotationComplete');
    expect(r.events.reasons()).toContain('Normal KeyRetired');

    // The same token again is done already.
    r.clock.now += 60_000;
    await r.settle();
    expect(r.resource().status?.keyId).toBe(fresh);
    expect(r.platform.keys.map((k) => k.id)).toEqual([fresh]);
  });

  it('a key still used is held and its address named once per address, until maxGracePeriod; then revoked', async () => {
    const r = clocked({ rotation: { gracePeriod: '10s', maxGracePeriod: '2m' } });
    await r.settle();
    const old = r.resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'now' });
    await r.settle();
    const oldKey = r.platform.keys.find((k) => k.id === old)!;
    for (let i = 0; i < 5; i++) {
      r.clock.now += 15_000;
      oldKey.last_used_at = new Date(r.clock.now - 1_000).toISOString();
      oldKey.last_used_from_addr = '10.1.2.3';
      await r.reconcile();
      expect(r.platform.keys.map((k) => k.id)).toContain(old);
    }
    expect(r.events.events.filter((e) => e.startsWith('Warning OldKeyStillInUse'))).toHaveLength(1);
    expect(r.events.events.find((e) => e.startsWith('Warning OldKeyStillInUse'))).toContain('10.1.2.3');
    expect(r.resource().status?.retiringKeys?.[0]).toMatchObject({ keyId: old, lastUsedFromAddr: '10.1.2.3' });
    oldKey.last_used_from_addr = '10.9.9.9';
    r.clock.now += 5_000;
    oldKey.last_used_at = new Date(r.clock.now - 1_000).toISOString();
    await r.reconcile();
    expect(r.events.events.filter((e) => e.startsWith('Warning OldKeyStillInUse'))).toHaveLength(2);
    // Past maxGracePeriod (2m after the switch): revoked though still used, and said so.
    r.clock.now += 60_000;
    oldKey.last_used_at = new Date(r.clock.now - 1_000).toISOString();
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).not.toContain(old);
    expect(r.resource().status?.retiringKeys).toEqual([]);
  });

  it('a rollout that completes inside maxGracePeriod starts the grace period from then', async () => {
    const r = clocked({ rotation: { gracePeriod: '10s', maxGracePeriod: '1h', restart: { discover: true } } });
    r.kube.putWorkload('Deployment', deployment('api', 'ci', NAMESPACE, 'ci'));
    await r.settle();
    const old = r.resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.settle();
    r.clock.now += 60_000;
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    r.kube.workloads.get(`Deployment/${NAMESPACE}/api`)!.status = { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 };
    await r.reconcile();
    expect(r.resource().status?.retiringKeys?.[0]?.rolloutsCompletedAt).toBe(new Date(r.clock.now).toISOString());
    r.clock.now += 5_000;
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    r.clock.now += 6_000;
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).not.toContain(old);
  });

  it('restarts the consumers that consent once, with a patch a crash can repeat without a second rollout, and never revokes before the rollout completed', async () => {
    const r = clocked({
      rotation: {
        gracePeriod: '10s',
        maxGracePeriod: '1m',
        restart: {
          discover: true,
          workloads: [
            { kind: 'Deployment', name: 'listed' },
            { kind: 'Deployment', name: 'platform-team' },
          ],
        },
      },
    });
    r.kube.putWorkload('Deployment', deployment('api', 'ci', NAMESPACE, 'other-secret, ci'));
    r.kube.putWorkload('Deployment', deployment('unrelated', 'other-secret', NAMESPACE, 'other-secret'));
    r.kube.putWorkload('Deployment', deployment('listed', undefined, NAMESPACE, 'ci'));
    r.kube.putWorkload('Deployment', deployment('api', 'ci', 'team-b', 'ci'));
    // Without consent: one reading the Secret (discovered), one a tenant names, one consenting for another Secret.
    r.kube.putWorkload('Deployment', deployment('reader', 'ci'));
    r.kube.putWorkload('Deployment', deployment('platform-team', undefined));
    r.kube.putWorkload('Deployment', deployment('elsewhere', 'ci', NAMESPACE, 'ci-other'));
    await r.settle();
    const old = r.resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.settle();
    const fresh = r.resource().status!.keyId!;
    const api = r.kube.workloads.get(`Deployment/${NAMESPACE}/api`)!;
    expect(api.spec?.template.metadata?.annotations?.[restartAnnotation('ci')]).toBe(String(fresh));
    expect(api.metadata?.generation).toBe(2);
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/listed`)!.metadata?.generation).toBe(2);
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/unrelated`)!.metadata?.generation).toBe(1);
    // Another namespace's workload of the same name is never touched.
    expect(r.kube.workloads.get('Deployment/team-b/api')!.metadata?.generation).toBe(1);
    expect(r.kube.calls.filter((c) => c.includes('patch Deployment/') || c.startsWith('list ')).every((c) => c.includes(NAMESPACE))).toBe(true);
    // No consent, no patch: their pod templates are as they were, and they are named.
    for (const name of ['reader', 'platform-team', 'elsewhere']) {
      expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/${name}`)!.metadata?.generation).toBe(1);
      expect(r.kube.calls.some((c) => c.includes(`patch Deployment/${NAMESPACE}/${name} `))).toBe(false);
    }
    expect(r.resource().status?.retiringKeys?.[0]?.restarts).toEqual([
      { kind: 'Deployment', name: 'api', generation: 2 },
      { kind: 'Deployment', name: 'listed', generation: 2 },
    ]);
    const restarted = r.events.events.find((e) => e.includes('ConsumersRestarted'));
    expect(restarted).toBe(
      `Warning ConsumersRestarted: restarted Deployment/api, Deployment/listed for key ${fresh}; ` +
        `not restarted, without ${ANNOTATION_RESTART_ON_ROTATION} naming ci: Deployment/elsewhere, Deployment/platform-team, Deployment/reader`,
    );

    // A crash between the patches and their record: the restart is made again, and changes nothing.
    const status = structuredClone(r.resource().status!);
    status.retiringKeys = status.retiringKeys!.map(({ restartedAt: _r, restarts: _s, ...rest }) => rest);
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, { ...r.resource(), status });
    await r.reconcile();
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/api`)!.metadata?.generation).toBe(2);
    expect(r.resource().status?.retiringKeys?.[0]?.restarts).toEqual(expect.arrayContaining([{ kind: 'Deployment', name: 'api', generation: 2 }]));

    // The rollout has not completed (observedGeneration 1): held, past maxGracePeriod too.
    for (const step of [20_000, 60_000, 600_000]) {
      r.clock.now += step;
      await r.reconcile();
      expect(r.platform.keys.map((k) => k.id)).toContain(old);
    }
    expect(condition(r.resource(), 'Rotating')).toBe('True RolloutStalled');
    expect(r.events.reasons()).toContain('Warning RolloutStalled');

    // One rollout completes: still held for the other.
    const complete = (name: string): void => {
      r.kube.workloads.get(`Deployment/${NAMESPACE}/${name}`)!.status = { observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 };
    };
    complete('api');
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    // Both complete, long past maxGracePeriod: nothing left to wait for, the key goes.
    complete('listed');
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toEqual([fresh]);
    expect(condition(r.resource(), 'Rotating')).toBe('False RotationComplete');
  });

  it('without any consenting workload nothing is restarted or waited for: the key retires after its grace', async () => {
    const r = clocked({
      rotation: { gracePeriod: '10s', maxGracePeriod: '1h', restart: { discover: true, workloads: [{ kind: 'Deployment', name: 'paused' }] } },
    });
    // A paused Deployment a tenant names would never complete a rollout: without consent it is not touched.
    const paused = deployment('paused', undefined);
    paused.spec!.paused = true;
    r.kube.putWorkload('Deployment', paused);
    r.kube.putWorkload('Deployment', deployment('api', 'ci'));
    await r.settle();
    const old = r.resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.settle();
    expect(r.resource().status?.retiringKeys?.[0]?.restarts).toEqual([]);
    expect(r.kube.calls.filter((c) => c.includes('patch Deployment/'))).toEqual([]);
    expect(condition(r.resource(), 'Rotating')).toBe('True RetiringKey');
    expect(r.resource().status?.conditions?.find((c) => c.type === 'Rotating')?.message).toContain(
      'not restarted, without keys.neon.dev/restart-on-rotation naming ci: Deployment/api, Deployment/paused',
    );
    r.clock.now += 11_000;
    await r.settle();
    expect(r.platform.keys.map((k) => k.id)).not.toContain(old);
    expect(condition(r.resource(), 'Rotating')).toBe('False RotationComplete');
  });

  it('a paused Deployment that consented holds the key as RolloutStalled, past maxGracePeriod, until its owner withdraws consent', async () => {
    const r = clocked({ rotation: { gracePeriod: '10s', maxGracePeriod: '1m', restart: { workloads: [{ kind: 'Deployment', name: 'paused' }] } } });
    const paused = deployment('paused', 'ci', NAMESPACE, 'ci');
    paused.spec!.paused = true;
    r.kube.putWorkload('Deployment', paused);
    await r.settle();
    const old = r.resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.settle();
    expect(r.kube.workloads.get(`Deployment/${NAMESPACE}/paused`)!.metadata?.generation).toBe(2);
    await r.reconcile();
    expect(condition(r.resource(), 'Rotating')).toBe('True RolloutStalled');
    expect(r.resource().status?.conditions?.find((c) => c.type === 'Rotating')?.message).toContain('Deployment/paused (paused)');
    r.clock.now += 3_600_000;
    await r.reconcile();
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    // Its owner takes the annotation off: no longer waited for, the key goes (maxGracePeriod is long over).
    delete r.kube.workloads.get(`Deployment/${NAMESPACE}/paused`)!.metadata!.annotations;
    await r.settle();
    expect(r.platform.keys.map((k) => k.id)).not.toContain(old);
    expect(condition(r.resource(), 'Rotating')).toBe('False RotationComplete');
  });

  it('adopts an interrupted rotation: the new key recorded, the old one retiring, not revoked, idempotently', async () => {
    const r = clocked();
    await r.settle();
    const before = r.resource();
    const old = before.status!.keyId!;
    // What a crash after the Secret and before the status leaves: the rotation's intent, the new key in the Secret.
    const fresh = await r.platform.createOrganizationKey('org-1', { keyName: 'ci-deployer-newnew00' });
    const intent = encodeIntent(r.signer, before.metadata.uid, {
      attempt: 'ci-deployer-newnew00',
      startedAt: new Date(T0).toISOString(),
      holder: 'killed',
      replaces: old,
      rotation: { request: 'tok' },
    });
    annotate(r, { [ANNOTATION_CREATE_PENDING]: intent, [ANNOTATION_ROTATE]: 'tok' });
    r.kube.putSecret(
      buildSecret(r.resource(), 'ci', 'apiKey', { id: fresh.id, name: fresh.name, secret: fresh.key, replaces: old }, r.signer, r.kube.secret(NAMESPACE, 'ci')),
    );
    await r.reconcile();
    const adopted = r.resource();
    expect(adopted.status?.keyId).toBe(fresh.id);
    expect(adopted.status?.retiringKeys?.map((k) => k.keyId)).toEqual([old]);
    expect(adopted.status?.rotation?.lastRequest).toBe('tok');
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    // The intent again (a crash before it was cleared): nothing appended twice, nothing revoked.
    annotate(r, { [ANNOTATION_CREATE_PENDING]: intent });
    await r.reconcile();
    expect(r.resource().status?.retiringKeys?.map((k) => k.keyId)).toEqual([old]);
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
  });

  it('a rotation marker a tenant adds to an intent breaks its signature: cleared, nothing revoked, nothing kept', async () => {
    const r = clocked();
    await r.settle();
    const resource = r.resource();
    const old = resource.status!.keyId!;
    const signed = JSON.parse(
      encodeIntent(r.signer, resource.metadata.uid, { attempt: 'ci-deployer-zzzzzzzz', startedAt: new Date(T0).toISOString(), holder: 'x', replaces: old }),
    ) as Record<string, unknown>;
    annotate(r, { [ANNOTATION_CREATE_PENDING]: JSON.stringify({ ...signed, rotation: { request: 'forged' } }) });
    await r.reconcile();
    expect(r.events.reasons()).toContain('Warning InvalidAnnotation');
    expect(r.resource().metadata.annotations?.[ANNOTATION_CREATE_PENDING]).toBeUndefined();
    expect(r.platform.keys.map((k) => k.id)).toEqual([old]);
    expect(r.resource().status?.retiringKeys).toBeUndefined();
  });

  it('deleting while a key retires revokes both', async () => {
    const r = clocked();
    await r.settle();
    annotate(r, { [ANNOTATION_ROTATE]: 'x' });
    await r.settle();
    expect(r.platform.keys).toHaveLength(2);
    const current = r.resource();
    current.metadata.deletionTimestamp = new Date(T0).toISOString();
    r.kube.resources.set(`ApiKey/${NAMESPACE}/ci`, current);
    await r.settle();
    expect(r.platform.keys).toEqual([]);
    expect(r.kube.resource('ApiKey', NAMESPACE, 'ci')).toBeUndefined();
  });

  it('a scheduled rotation is due at the interval, inside the window, and shown in nextRotationAt', async () => {
    // 10:00 UTC on a Monday; window 02:00-05:00 UTC on weekdays.
    const r = clocked({ rotation: { interval: '1h', window: { start: '02:00', end: '05:00', daysOfWeek: ['Mon', 'Tue', 'Wed', 'Thu', 'Fri'] } } });
    await r.settle();
    const first = r.resource().status!.keyId!;
    const created = Date.parse(r.resource().status!.createdAt!);
    expect(r.resource().status?.rotation?.nextRotationAt).toBe(new Date(Date.UTC(2026, 10, 24, 2, 0, 0)).toISOString());
    expect(created).toBe(T0);
    r.clock.now = Date.UTC(2026, 10, 24, 1, 59, 0);
    await r.settle();
    expect(r.resource().status?.keyId).toBe(first);
    r.clock.now = Date.UTC(2026, 10, 24, 2, 0, 30);
    await r.settle();
    expect(r.resource().status?.keyId).not.toBe(first);
    expect(r.resource().status?.rotation?.nextRotationAt).toBe(new Date(Date.UTC(2026, 10, 24, 3, 0, 30)).toISOString());
  });

  it("a gracePeriod under the operator's floor keeps the replaced key for the floor, and the Rotating condition says so", async () => {
    const clock = { now: T0 };
    const r = rig({ now: () => clock.now, drift: new DriftCache(60_000, () => clock.now), rotationPollMs: 1_000 });
    r.platform.now = () => clock.now;
    r.kube.putResource(keyResource('ApiKey', 'ci', { spec: { rotation: { gracePeriod: '5s' } } }));
    const resource = (): KeyResource => r.kube.resource('ApiKey', NAMESPACE, 'ci')!;
    await r.settle();
    await r.reconcile();
    expect(condition(resource(), 'Rotating')).toBe('False InvalidSpec');
    expect(resource().status?.conditions?.find((c) => c.type === 'Rotating')?.message).toContain("under the operator's minimum of 60s");
    const old = resource().status!.keyId!;
    annotate(r, { [ANNOTATION_ROTATE]: 'go' });
    await r.settle();
    clock.now += 30_000;
    await r.settle();
    expect(r.platform.keys.map((k) => k.id)).toContain(old);
    clock.now += 31_000;
    await r.settle();
    expect(r.platform.keys.map((k) => k.id)).not.toContain(old);
  });

  it('an unknown time zone stops scheduled rotations and says so in the Rotating condition', async () => {
    const r = clocked({ rotation: { interval: '1h', window: { start: '02:00', end: '05:00', timeZone: 'Mars/Olympus' } } });
    await r.settle();
    await r.reconcile(); // the drift check after the create
    expect(condition(r.resource(), 'Ready')).toBe('True Ready');
    expect(condition(r.resource(), 'Rotating')).toBe('False InvalidSpec');
    expect(r.events.reasons()).toContain('Warning InvalidSpec');
  });

  it('counts each retired key once by outcome (retired_keys_total): revoked unused, revoked still in use, gone', async () => {
    const retired: string[] = [];
    const clock = { now: T0 };
    const r = rig({
      now: () => clock.now,
      drift: new DriftCache(60_000, () => clock.now),
      rotationPollMs: 1_000,
      onRetired: (outcome) => retired.push(outcome),
    });
    r.platform.now = () => clock.now;
    r.kube.putResource(keyResource('ApiKey', 'ci', { spec: { rotation: { gracePeriod: '10s', maxGracePeriod: '2m' } } }));
    const keyId = (): number => r.kube.resource('ApiKey', NAMESPACE, 'ci')!.status!.keyId!;
    const rotate = async (token: string): Promise<number> => {
      await r.settle();
      const old = keyId();
      annotate(r, { [ANNOTATION_ROTATE]: token });
      clock.now += 1_000;
      await r.settle();
      expect(keyId()).not.toBe(old);
      return old;
    };
    // Unused after the grace: revoked.
    await rotate('unused');
    clock.now += 60_000;
    for (let i = 0; i < 3; i++) await r.reconcile();
    expect(retired).toEqual(['revoked']);
    // Used until maxGracePeriod: revoked all the same, counted apart.
    const used = r.platform.keys.find((k) => k.id === keyId())!;
    await rotate('used');
    for (let i = 0; i < 10; i++) {
      clock.now += 15_000;
      used.last_used_at = new Date(clock.now - 1_000).toISOString();
      await r.reconcile();
    }
    expect(r.platform.keys.map((k) => k.id)).not.toContain(used.id);
    expect(retired).toEqual(['revoked', 'revoked_in_use']);
    // Revoked by someone else meanwhile: gone, not revoked.
    const gone = await rotate('gone');
    r.platform.keys.splice(
      r.platform.keys.findIndex((k) => k.id === gone),
      1,
    );
    clock.now += 60_000;
    for (let i = 0; i < 3; i++) await r.reconcile();
    expect(retired).toEqual(['revoked', 'revoked_in_use', 'gone']);
  });
});
