// The consumers of a key's Secret during a rotation (spec.rotation.restart): the workloads of the
// resource's namespace whose pod templates reference the Secret (discover) and the ones listed by
// name; their restart (a pod template annotation, as kubectl rollout restart does); and whether
// their rollouts completed, by kubectl's rollout-status rules. Every call names the resource's own
// namespace: nothing a tenant writes can point a restart at another one.
import { createHash } from 'node:crypto';
import type { V1DaemonSet, V1Deployment, V1PodTemplateSpec, V1StatefulSet } from '@kubernetes/client-node';
import type { RotationSpec } from '../resources/schema.ts';
import { annotationOp, repointOps } from './immutable-secret.ts';
import { statusCode, type KubeWrites, type Workload, type WorkloadKind } from './kube-writes.ts';

export const WORKLOAD_KINDS: readonly WorkloadKind[] = ['Deployment', 'StatefulSet', 'DaemonSet'];

/** A restart made for a retiring key (status.retiringKeys[].restarts). */
export interface Restart { kind: WorkloadKind; name: string; generation: number }

/**
 * The pod template annotation a restart sets: one per Secret (a workload may consume several), its
 * value the new key's id. The same rotation patches the same value, which changes nothing: a patch
 * repeated after a crash neither bumps the generation nor rolls the pods twice.
 */
export function restartAnnotation(secretName: string): string {
  const name = `rotated.${secretName}`;
  if (name.length <= 63) return `keys.neon.dev/${name}`;
  return `keys.neon.dev/rotated.${secretName.slice(0, 40)}.${createHash('sha256').update(secretName).digest('hex').slice(0, 14)}`;
}

/** Whether a pod template reads the Secret: env, envFrom, secret and projected volumes, of containers and init containers. */
export function referencesSecret(template: V1PodTemplateSpec | undefined, secretName: string): boolean {
  const pod = template?.spec;
  if (pod === undefined) return false;
  const containers = [...pod.containers, ...pod.initContainers ?? []];
  const inContainers = containers.some((c) => (c.env ?? []).some((e) => e.valueFrom?.secretKeyRef?.name === secretName)
    || (c.envFrom ?? []).some((e) => e.secretRef?.name === secretName));
  const inVolumes = (pod.volumes ?? []).some((v) => v.secret?.secretName === secretName
    || (v.projected?.sources ?? []).some((s) => s.secret?.name === secretName));
  return inContainers || inVolumes;
}

/** The workloads to restart: discovered in the namespace (referencing any of `secretNames`) and/or listed (same namespace), deduplicated. */
export async function consumersOf(kube: KubeWrites, namespace: string, secretNames: string | readonly string[], restart: NonNullable<RotationSpec['restart']>): Promise<{ kind: WorkloadKind; name: string }[]> {
  const found = new Map<string, { kind: WorkloadKind; name: string }>();
  const names = typeof secretNames === 'string' ? [secretNames] : secretNames;
  if (restart.discover === true) {
    for (const kind of WORKLOAD_KINDS) {
      for (const w of await kube.listWorkloads(namespace, kind)) {
        const name = w.metadata?.name;
        if (name !== undefined && names.some((n) => referencesSecret(w.spec?.template, n))) found.set(`${kind}/${name}`, { kind, name });
      }
    }
  }
  for (const w of restart.workloads ?? []) found.set(`${w.kind}/${w.name}`, { kind: w.kind, name: w.name });
  return [...found.values()].sort((a, b) => `${a.kind}/${a.name}`.localeCompare(`${b.kind}/${b.name}`));
}

/**
 * Restarts each consumer (a merge patch of one pod template annotation, in `namespace` only) and
 * returns what to wait for: each patched workload with the generation its rollout must reach. A
 * listed workload that does not exist is skipped (and named in `missing`).
 */
export async function restartConsumers(kube: KubeWrites, namespace: string, secretName: string, newKeyId: number, consumers: readonly { kind: WorkloadKind; name: string }[]): Promise<{ restarts: Restart[]; missing: string[] }> {
  const restarts: Restart[] = [];
  const missing: string[] = [];
  for (const { kind, name } of consumers) {
    try {
      const patched = await kube.patchTemplateAnnotations(namespace, kind, name, { [restartAnnotation(secretName)]: String(newKeyId) });
      restarts.push({ kind, name, generation: patched.metadata?.generation ?? 0 });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      missing.push(`${kind}/${name}`);
    }
  }
  return { restarts, missing };
}

export type RolloutState = 'Complete' | 'Progressing' | 'Stalled';

/** kubectl rollout status, for the generation a restart produced (kubectl/pkg/polymorphichelpers/rollout_status.go's rules). */
export function rolloutState(kind: WorkloadKind, workload: Workload, generation: number): RolloutState {
  const observed = workload.status?.observedGeneration ?? 0;
  if (observed < generation) return 'Progressing';
  if (kind === 'Deployment') {
    const d = workload as V1Deployment;
    const status = d.status ?? {};
    if (status.conditions?.some((c) => c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded') === true) return 'Stalled';
    const desired = d.spec?.replicas ?? 1;
    const updated = status.updatedReplicas ?? 0;
    if (updated < desired) return 'Progressing';
    if ((status.replicas ?? 0) > updated) return 'Progressing'; // old replicas still terminating
    if ((status.availableReplicas ?? 0) < updated) return 'Progressing';
    return 'Complete';
  }
  if (kind === 'StatefulSet') {
    const s = workload as V1StatefulSet;
    const status = s.status ?? { replicas: 0 };
    // OnDelete: pods change only when someone deletes them; kubectl cannot tell either. Nothing to wait for.
    if (s.spec?.updateStrategy?.type === 'OnDelete') return 'Complete';
    const desired = s.spec?.replicas ?? 1;
    if ((status.readyReplicas ?? 0) < desired) return 'Progressing';
    const partition = s.spec?.updateStrategy?.rollingUpdate?.partition;
    if (partition !== undefined && partition > 0) return (status.updatedReplicas ?? 0) >= desired - partition ? 'Complete' : 'Progressing';
    return status.updateRevision !== undefined && status.updateRevision === status.currentRevision ? 'Complete' : 'Progressing';
  }
  const ds = workload as V1DaemonSet;
  if (ds.spec?.updateStrategy?.type === 'OnDelete') return 'Complete';
  const status = ds.status;
  if (status === undefined) return 'Progressing';
  if ((status.updatedNumberScheduled ?? 0) < status.desiredNumberScheduled) return 'Progressing';
  if ((status.numberAvailable ?? 0) < status.desiredNumberScheduled) return 'Progressing';
  return 'Complete';
}

/** The rollouts of recorded restarts: which are not complete, and which of those are stalled. A workload gone is done. */
export async function observeRollouts(kube: KubeWrites, namespace: string, restarts: readonly Restart[]): Promise<{ waitingFor: string[]; stalled: string[] }> {
  const waitingFor: string[] = [];
  const stalled: string[] = [];
  for (const r of restarts) {
    const workload = await kube.readWorkload(namespace, r.kind, r.name);
    if (workload === undefined) continue;
    const state = rolloutState(r.kind, workload, r.generation);
    if (state !== 'Complete') waitingFor.push(`${r.kind}/${r.name}`);
    if (state === 'Stalled') stalled.push(`${r.kind}/${r.name}`);
  }
  return { waitingFor, stalled };
}

/**
 * spec.secret.immutable: each consumer's pod template repointed from the retired Secrets (`from`)
 * to the current one (`to`) and restarted, in one JSON patch (immutable-secret.ts): every
 * reference moved is tested for its old name, the whole for the resourceVersion read, so a
 * concurrent edit fails the patch (tried again) rather than being overwritten. A repeat after a
 * crash finds nothing to move and the annotation set: no patch, the generation it made is waited for.
 */
export async function repointConsumers(kube: KubeWrites, namespace: string, move: { from: ReadonlySet<string>; to: string; annotation: string }, newKeyId: number, consumers: readonly { kind: WorkloadKind; name: string }[]): Promise<{ restarts: Restart[]; missing: string[] }> {
  const restarts: Restart[] = [];
  const missing: string[] = [];
  for (const { kind, name } of consumers) {
    const workload = await kube.readWorkload(namespace, kind, name);
    if (workload === undefined) {
      missing.push(`${kind}/${name}`);
      continue;
    }
    const template = workload.spec?.template;
    const ops = [...repointOps(template, move.from, move.to), ...annotationOp(template, move.annotation, String(newKeyId))];
    if (ops.length === 0) {
      restarts.push({ kind, name, generation: workload.metadata?.generation ?? 0 });
      continue;
    }
    try {
      const patched = await kube.patchWorkload(namespace, kind, name, [{ op: 'test', path: '/metadata/resourceVersion', value: workload.metadata?.resourceVersion }, ...ops]);
      restarts.push({ kind, name, generation: patched.metadata?.generation ?? 0 });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      missing.push(`${kind}/${name}`);
    }
  }
  return { restarts, missing };
}
