// The consumers of a rotated key's Secret (src/operator/keys/consumers.ts): which pod templates read
// it, the restart annotation, and kubectl rollout status's rules for each kind.
import { describe, expect, it } from '@jest/globals';
import type { V1DaemonSet, V1Deployment, V1PodTemplateSpec, V1StatefulSet } from '@kubernetes/client-node';
import { referencesSecret, restartAnnotation, rolloutState } from '../../../src/operator/keys/consumers.ts';

const template = (spec: Partial<NonNullable<V1PodTemplateSpec['spec']>>): V1PodTemplateSpec => ({ spec: { containers: [{ name: 'c' }], ...spec } });

describe('consumers', () => {
  it.each<[string, V1PodTemplateSpec, boolean]>([
    ['env secretKeyRef', template({ containers: [{ name: 'c', env: [{ name: 'K', valueFrom: { secretKeyRef: { name: 'app-key', key: 'apiKey' } } }] }] }), true],
    ['envFrom secretRef', template({ containers: [{ name: 'c', envFrom: [{ secretRef: { name: 'app-key' } }] }] }), true],
    ['an init container', template({ initContainers: [{ name: 'i', envFrom: [{ secretRef: { name: 'app-key' } }] }] }), true],
    ['a secret volume', template({ volumes: [{ name: 'v', secret: { secretName: 'app-key' } }] }), true],
    ['a projected volume', template({ volumes: [{ name: 'v', projected: { sources: [{ secret: { name: 'app-key' } }] } }] }), true],
    ['another Secret', template({ containers: [{ name: 'c', envFrom: [{ secretRef: { name: 'other' } }] }], volumes: [{ name: 'v', secret: { secretName: 'other' } }] }), false],
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
    expect(rolloutState('Deployment', d({ observedGeneration: 2, conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded' }] }), 2)).toBe('Stalled');
  });

  it('a StatefulSet is complete when ready and on its update revision (or past its partition); OnDelete has nothing to wait for', () => {
    const s = (spec: Partial<NonNullable<V1StatefulSet['spec']>>, status: Partial<NonNullable<V1StatefulSet['status']>>): V1StatefulSet =>
      ({ spec: { replicas: 2, selector: {}, serviceName: 's', template: {}, ...spec }, status: { replicas: 2, observedGeneration: 2, ...status } });
    expect(rolloutState('StatefulSet', s({}, { readyReplicas: 2, currentRevision: 'a', updateRevision: 'b' }), 2)).toBe('Progressing');
    expect(rolloutState('StatefulSet', s({}, { readyReplicas: 1, currentRevision: 'b', updateRevision: 'b' }), 2)).toBe('Progressing');
    expect(rolloutState('StatefulSet', s({}, { readyReplicas: 2, currentRevision: 'b', updateRevision: 'b' }), 2)).toBe('Complete');
    expect(rolloutState('StatefulSet', s({ updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 1 } } }, { readyReplicas: 2, updatedReplicas: 1 }), 2)).toBe('Complete');
    expect(rolloutState('StatefulSet', s({ updateStrategy: { type: 'OnDelete' } }, {}), 2)).toBe('Complete');
  });

  it('a DaemonSet is complete when every scheduled pod is updated and available', () => {
    const ds = (status: Partial<NonNullable<V1DaemonSet['status']>>): V1DaemonSet =>
      ({ spec: { selector: {}, template: {} }, status: { currentNumberScheduled: 3, desiredNumberScheduled: 3, numberMisscheduled: 0, numberReady: 3, observedGeneration: 2, ...status } });
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 2, numberAvailable: 3 }), 2)).toBe('Progressing');
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 3, numberAvailable: 2 }), 2)).toBe('Progressing');
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 3, numberAvailable: 3 }), 2)).toBe('Complete');
    expect(rolloutState('DaemonSet', ds({ updatedNumberScheduled: 3, numberAvailable: 3, observedGeneration: 1 }), 2)).toBe('Progressing');
  });
});
