// The consumers of a rotated key's Secret (src/operator/keys/rotation/consumers.ts): which pod templates read
// it, which workloads consent to a restart, the restart annotation, and kubectl rollout status's
// rules for each kind.
import { describe, expect, it } from '@jest/globals';
import type { V1DaemonSet, V1Deployment, V1PodTemplateSpec, V1StatefulSet } from '@kubernetes/client-node';
import {
  consentedSecrets,
  consents,
  consumersOf,
  observeRollouts,
  referencesSecret,
  restartAnnotation,
  restartConsumers,
  rolloutState,
} from '../../../../src/operator/keys/rotation/consumers.ts';
import { statusCode } from '../../../../src/operator/keys/kube-writes.ts';
import { ANNOTATION_RESTART_ON_ROTATION } from '../../../../src/operator/resources/spec-parts.ts';
import { FakeKube, NAMESPACE } from '../fakes.ts';

const template = (spec: Partial<NonNullable<V1PodTemplateSpec['spec']>>): V1PodTemplateSpec => ({ spec: { containers: [{ name: 'c' }], ...spec } });

describe('consumers', () => {
  it.each<[string, V1PodTemplateSpec, boolean]>([
    [
      'env secretKeyRef',
      template({ containers: [{ name: 'c', env: [{ name: 'K', valueFrom: { secretKeyRef: { name: 'app-key', key: 'apiKey' } } }] }] }),
      true,
    ],
    ['envFrom secretRef', template({ containers: [{ name: 'c', envFrom: [{ secretRef: { name: 'app-key' } }] }] }), true],
    ['an init container', template({ initContainers: [{ name: 'i', envFrom: [{ secretRef: { name: 'app-key' } }] }] }), true],
    ['a secret volume', template({ volumes: [{ name: 'v', secret: { secretName: 'app-key' } }] }), true],
    ['a projected volume', template({ volumes: [{ name: 'v', projected: { sources: [{ secret: { name: 'app-key' } }] } }] }), true],
    [
      'another Secret',
      template({ containers: [{ name: 'c', envFrom: [{ secretRef: { name: 'other' } }] }], volumes: [{ name: 'v', secret: { secretName: 'other' } }] }),
      false,
    ],
    ['a ConfigMap of that name', template({ containers: [{ name: 'c', envFrom: [{ configMapRef: { name: 'app-key' } }] }] }), false],
  ])('%s', (_name, t, expected) => expect(referencesSecret(t, 'app-key')).toBe(expected));

  it('names its annotation after the Secret, within the 63 characters of an annotation name', () => {
    expect(restartAnnotation('app-key')).toBe('keys.neon.dev/rotated.app-key');
    const long = restartAnnotation('a'.repeat(200));
    expect(long.split('/')[1]!.length).toBeLessThanOrEqual(63);
    expect(long).not.toBe(restartAnnotation(`${'a'.repeat(199)}b`));
  });

  it('a Deployment is complete once observed, updated, old replicas gone and available', () => {
    const d = (status: V1Deployment['status'], replicas = 2): V1Deployment => ({ spec: { replicas, selector: {}, template: {} }, status });
    expect(rolloutState('Deployment', d({ observedGeneration: 1, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }), 2)).toBe('Progressing');
    expect(rolloutState('Deployment', d({ observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 1 }), 2)).toBe('Progressing');
    expect(rolloutState('Deployment', d({ observedGeneration: 2, replicas: 3, updatedReplicas: 2, availableReplicas: 2 }), 2)).toBe('Progressing');
    expect(rolloutState('Deployment', d({ observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 1 }), 2)).toBe('Progressing');
    expect(rolloutState('Deployment', d({ observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2 }), 2)).toBe('Complete');
    expect(rolloutState('Deployment', d({ observedGeneration: 2 }, 0), 2)).toBe('Complete');
    expect(
      rolloutState('Deployment', d({ observedGeneration: 2, conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded' }] }), 2),
    ).toBe('Stalled');
  });

  it('a StatefulSet is complete when ready and on its update revision (or past its partition); OnDelete has nothing to wait for', () => {
    const s = (spec: Partial<NonNullable<V1StatefulSet['spec']>>, status: Partial<NonNullable<V1StatefulSet['status']>>): V1StatefulSet => ({
      spec: { replicas: 2, selector: {}, serviceName: 's', template: {}, ...spec },
      status: { replicas: 2, observedGeneration: 2, ...status },
    });
    expect(rolloutState('StatefulSet', s({}, { readyReplicas: 2, currentRevision: 'a', updateRevision: 'b' }), 2)).toBe('Progressing');
    expect(rolloutState('StatefulSet', s({}, { readyReplicas: 1, currentRevision: 'b', updateRevision: 'b' }), 2)).toBe('Progressing');
    expect(rolloutState('StatefulSet', s({}, { readyReplicas: 2, currentRevision: 'b', updateRevision: 'b' }), 2)).toBe('Complete');
    expect(
      rolloutState(
        'StatefulSet',
        s({ updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 1 } } }, { readyReplicas: 2, updatedReplicas: 1 }),
        2,
      ),
    ).toBe('Complete');
    expect(rolloutState('StatefulSet', s({ updateStrategy: { type: 'OnDelete' } }, {}), 2)).toBe('Complete');
  });

  it('a DaemonSet is complete when every scheduled pod is updated and available', () => {
    const ds = (status: Partial<NonNullable<V1DaemonSet['status']>>): V1DaemonSet => ({
      spec: { selector: {}, template: {} },
      status: { currentNumberScheduled: 3, desiredNumberScheduled: 3, numberMisscheduled: 0, numberReady: 3, observedGeneration: 2, ...status },
    });
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 2, numberAvailable: 3 }), 2)).toBe('Progressing');
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 3, numberAvailable: 2 }), 2)).toBe('Progressing');
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 3, numberAvailable: 3 }), 2)).toBe('Complete');
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 3, numberAvailable: 3, observedGeneration: 1 }), 2)).toBe('Progressing');
  });

  describe("consent (keys.neon.dev/restart-on-rotation on the workload's own metadata)", () => {
    const annotated = (value: string | undefined, where: 'metadata' | 'template' = 'metadata'): V1Deployment => ({
      metadata: {
        name: 'w',
        namespace: NAMESPACE,
        generation: 1,
        ...(where === 'metadata' && value !== undefined ? { annotations: { [ANNOTATION_RESTART_ON_ROTATION]: value } } : {}),
      },
      spec: {
        selector: {},
        template: {
          metadata: where === 'template' && value !== undefined ? { annotations: { [ANNOTATION_RESTART_ON_ROTATION]: value } } : {},
          spec: { containers: [{ name: 'c', envFrom: [{ secretRef: { name: 'app-key' } }] }] },
        },
      },
    });

    it.each<[string, string | undefined, 'metadata' | 'template', boolean]>([
      ['the Secret named', 'app-key', 'metadata', true],
      ['one of several, spaces ignored', ' db-key , app-key ', 'metadata', true],
      ['no annotation (reading the Secret is not consent)', undefined, 'metadata', false],
      ['another Secret', 'app-key-2', 'metadata', false],
      ['a prefix of the name is not the name', 'app', 'metadata', false],
      ['no wildcard', '*', 'metadata', false],
      ['empty', '', 'metadata', false],
      ['on the pod template instead of the workload', 'app-key', 'template', false],
    ])('%s', (_name, value, where, expected) => expect(consents(annotated(value, where), 'app-key')).toBe(expected));

    it('reads the names comma-separated, dropping empty ones', () => {
      expect(consentedSecrets(annotated('a,, b ,c'))).toEqual(['a', 'b', 'c']);
      expect(consentedSecrets(undefined)).toEqual([]);
    });

    it('candidates: discovered by reference or by consent, listed by name; only those consenting are kept, the rest named', async () => {
      const kube = new FakeKube();
      const put = (name: string, secret: string | undefined, consent: string | undefined, namespace = NAMESPACE): void =>
        kube.putWorkload('Deployment', {
          metadata: { name, namespace, ...(consent !== undefined ? { annotations: { [ANNOTATION_RESTART_ON_ROTATION]: consent } } : {}) },
          spec: {
            selector: {},
            template: { spec: { containers: [{ name: 'c', ...(secret !== undefined ? { envFrom: [{ secretRef: { name: secret } }] } : {}) }] } },
          },
        });
      put('reads-consents', 'app-key', 'app-key');
      put('reads-only', 'app-key', undefined);
      put('consents-only', undefined, 'app-key');
      put('neither', undefined, undefined);
      put('listed-unwilling', undefined, 'other');
      put('other-namespace', 'app-key', 'app-key', 'team-b');
      const found = await consumersOf(kube, NAMESPACE, 'app-key', ['app-key'], {
        discover: true,
        workloads: [
          { kind: 'Deployment', name: 'listed-unwilling' },
          { kind: 'StatefulSet', name: 'gone' },
        ],
      });
      expect(found.consenting.map((c) => c.name)).toEqual(['consents-only', 'reads-consents']);
      expect(found.skipped).toEqual(['Deployment/listed-unwilling', 'Deployment/reads-only']);
      expect(found.missing).toEqual(['StatefulSet/gone']);
      const listedOnly = await consumersOf(kube, NAMESPACE, 'app-key', ['app-key'], {
        workloads: [
          { kind: 'Deployment', name: 'reads-only' },
          { kind: 'Deployment', name: 'consents-only' },
        ],
      });
      expect(listedOnly.consenting.map((c) => c.name)).toEqual(['consents-only']);
      expect(listedOnly.skipped).toEqual(['Deployment/reads-only']);
    });

    it('discovery keeps names only: each consumer is read again before its restart, and its patch tests the consent read', async () => {
      const kube = new FakeKube();
      kube.putWorkload('Deployment', annotated('app-key'));
      const found = await consumersOf(kube, NAMESPACE, 'app-key', ['app-key'], { discover: true });
      expect(found.consenting).toEqual([{ kind: 'Deployment', name: 'w' }]);
      const move = { from: new Set<string>(), to: 'app-key', annotation: restartAnnotation('app-key') };
      // Its owner takes consent back after discovery: the fresh read sees it, nothing is patched.
      delete kube.workloads.get(`Deployment/${NAMESPACE}/w`)!.metadata!.annotations;
      expect(await restartConsumers(kube, NAMESPACE, 'app-key', move, 7, found.consenting)).toEqual({ restarts: [], missing: [], skipped: ['Deployment/w'] });
      expect(kube.workloads.get(`Deployment/${NAMESPACE}/w`)!.metadata?.generation).toBe(1);
      // Taken back between that read and the patch: the patch's test fails, and changes nothing.
      kube.putWorkload('Deployment', annotated('app-key'));
      const read = kube.readWorkload.bind(kube);
      kube.readWorkload = async (...args) => {
        const workload = await read(...args);
        delete kube.workloads.get(`Deployment/${NAMESPACE}/w`)!.metadata!.annotations;
        return workload;
      };
      const error = await restartConsumers(kube, NAMESPACE, 'app-key', move, 7, found.consenting).catch((e: unknown) => e);
      expect(statusCode(error)).toBe(422);
      expect(kube.workloads.get(`Deployment/${NAMESPACE}/w`)!.metadata?.generation).toBe(1);
      // With consent in place, the same call restarts it; one gone is missing.
      kube.readWorkload = read;
      kube.putWorkload('Deployment', annotated('app-key'));
      const { restarts, missing } = await restartConsumers(kube, NAMESPACE, 'app-key', move, 7, [...found.consenting, { kind: 'StatefulSet', name: 'gone' }]);
      expect(restarts).toEqual([{ kind: 'Deployment', name: 'w', generation: 2 }]);
      expect(missing).toEqual(['StatefulSet/gone']);
      expect(kube.workloads.get(`Deployment/${NAMESPACE}/w`)!.spec?.template.metadata?.annotations?.[restartAnnotation('app-key')]).toBe('7');
    });

    it('rollouts: waited for while the workload consents; a paused Deployment is stalled; consent withdrawn or the workload gone, done', async () => {
      const kube = new FakeKube();
      const paused = annotated('app-key');
      paused.spec!.paused = true;
      paused.status = { observedGeneration: 2 };
      kube.putWorkload('Deployment', paused);
      const restarts = [
        { kind: 'Deployment' as const, name: 'w', generation: 2 },
        { kind: 'Deployment' as const, name: 'gone', generation: 2 },
      ];
      expect(await observeRollouts(kube, NAMESPACE, 'app-key', restarts)).toEqual({ waitingFor: ['Deployment/w'], stalled: ['Deployment/w (paused)'] });
      expect(await observeRollouts(kube, NAMESPACE, 'other-key', restarts)).toEqual({ waitingFor: [], stalled: [] });
    });
  });
});
