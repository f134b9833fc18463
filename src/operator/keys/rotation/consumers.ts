// The consumers of a key's Secret during a rotation (spec.rotation.restart): the workloads of the
// resource's namespace whose pod templates reference the Secret (discover) and the ones listed by
// name; their restart (a pod template annotation, as kubectl rollout restart does); and whether
// their rollouts completed, by kubectl's rollout-status rules. Every call names the resource's own
// namespace: nothing a tenant writes can point a restart at another one.
//
// Consent (docs/security.md, "What a tenant can and cannot make the operator do to workloads"): a
// tenant writes ApiKeys, not workloads, so what a resource names is only a candidate. A workload is
// patched only when its own metadata carries keys.neon.dev/restart-on-rotation naming the Secret
// (as spec.secret.name names it), like Reloader's secret.reloader.stakater.com/reload; the patch
// tests that annotation, so consent withdrawn meanwhile makes it fail rather than land. The others
// are skipped, named in the ConsumersRestarted event, and never waited for.
import { createHash } from 'node:crypto';
import type { V1DaemonSet, V1Deployment, V1PodTemplateSpec, V1StatefulSet } from '@kubernetes/client-node';
import { ANNOTATION_ROTATED_PREFIX } from '../../resources/schema.ts';
import { ANNOTATION_RESTART_ON_ROTATION, type RotationSpec } from '../../resources/spec-parts.ts';
import { annotationOp, pointerSegment, repointOps } from '../secret/immutable-secret.ts';
import { statusCode, type JsonPatchOp, type KubeWrites, type Workload, type WorkloadKind } from '../kube-writes.ts';

export const WORKLOAD_KINDS: readonly WorkloadKind[] = ['Deployment', 'StatefulSet', 'DaemonSet'];

/** A restart made for a retiring key (status.retiringKeys[].restarts). */
export interface Restart {
  kind: WorkloadKind;
  name: string;
  generation: number;
}

/**
 * The pod template annotation a restart sets: one per Secret (a workload may consume several), its
 * value the new key's id. The same rotation patches the same value, which changes nothing: a patch
 * repeated after a crash neither bumps the generation nor rolls the pods twice.
 */
export function restartAnnotation(secretName: string): string {
  // The name part (after keys.neon.dev/) is at most 63 characters.
  if (`rotated.${secretName}`.length <= 63) return `${ANNOTATION_ROTATED_PREFIX}${secretName}`;
  return `${ANNOTATION_ROTATED_PREFIX}${secretName.slice(0, 40)}.${createHash('sha256').update(secretName).digest('hex').slice(0, 14)}`;
}

/** Whether a pod template reads the Secret: env, envFrom, secret and projected volumes, of containers and init containers. */
export function referencesSecret(template: V1PodTemplateSpec | undefined, secretName: string): boolean {
  const pod = template?.spec;
  if (pod === undefined) return false;
  const containers = [...pod.containers, ...(pod.initContainers ?? [])];
  const inContainers = containers.some(
    (c) => (c.env ?? []).some((e) => e.valueFrom?.secretKeyRef?.name === secretName) || (c.envFrom ?? []).some((e) => e.secretRef?.name === secretName),
  );
  const inVolumes = (pod.volumes ?? []).some(
    (v) => v.secret?.secretName === secretName || (v.projected?.sources ?? []).some((s) => s.secret?.name === secretName),
  );
  return inContainers || inVolumes;
}

/**
 * The Secrets a workload consents to be restarted for: its own metadata's
 * keys.neon.dev/restart-on-rotation, comma-separated names (spaces around them ignored).
 */
export function consentedSecrets(workload: Pick<Workload, 'metadata'> | undefined): string[] {
  const value = workload?.metadata?.annotations?.[ANNOTATION_RESTART_ON_ROTATION];
  if (value === undefined) return [];
  return value
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
}

/** Whether a workload consents to restarts for the Secret of this name (spec.secret.name, or the resource's name). */
export function consents(workload: Pick<Workload, 'metadata'> | undefined, secretName: string): boolean {
  return consentedSecrets(workload).includes(secretName);
}

/**
 * A workload a rotation may restart: it consented when it was listed or read. Only its name is
 * kept: it is read again right before its restart (restartConsumers), one at a time, so a
 * namespace's workloads, of any size a tenant gave them, are never held together.
 */
export interface Consumer {
  kind: WorkloadKind;
  name: string;
}

/** The candidates of spec.rotation.restart, sorted: those that consent, those that do not (skipped), listed ones that do not exist. */
export interface Consumers {
  consenting: Consumer[];
  skipped: string[];
  missing: string[];
}

interface Candidate extends Consumer {
  consenting: boolean;
}

const byId = (a: { kind: string; name: string }, b: { kind: string; name: string }): number => `${a.kind}/${a.name}`.localeCompare(`${b.kind}/${b.name}`);

/** What discovery keeps of a listed workload: a candidate (it consents, or its pod template reads one of `secretNames`), or nothing. */
function candidate(kind: WorkloadKind, workload: Workload, consentName: string, secretNames: readonly string[]): Candidate | undefined {
  const name = workload.metadata?.name;
  if (name === undefined) return undefined;
  const consenting = consents(workload, consentName);
  return consenting || secretNames.some((n) => referencesSecret(workload.spec?.template, n)) ? { kind, name, consenting } : undefined;
}

/**
 * The workloads to restart for the Secret `consentName` (spec.secret.name, or the resource's
 * name): discovered in the namespace (their pod templates reference any of `secretNames`, or they
 * consent for it) and/or listed (same namespace), deduplicated; each kept only if it consents.
 */
export async function consumersOf(
  kube: KubeWrites,
  namespace: string,
  consentName: string,
  secretNames: readonly string[],
  restart: NonNullable<RotationSpec['restart']>,
): Promise<Consumers> {
  const found = new Map<string, Candidate>();
  const missing: string[] = [];
  if (restart.discover === true) {
    for (const kind of WORKLOAD_KINDS) {
      for (const c of await kube.listWorkloads(namespace, kind, (workload) => candidate(kind, workload, consentName, secretNames)))
        found.set(`${kind}/${c.name}`, c);
    }
  }
  for (const { kind, name } of restart.workloads ?? []) {
    if (found.has(`${kind}/${name}`)) continue;
    const workload = await kube.readWorkload(namespace, kind, name);
    if (workload === undefined) missing.push(`${kind}/${name}`);
    else found.set(`${kind}/${name}`, { kind, name, consenting: consents(workload, consentName) });
  }
  const all = [...found.values()].sort(byId);
  return {
    consenting: all.filter((c) => c.consenting).map(({ kind, name }) => ({ kind, name })),
    skipped: all.filter((c) => !c.consenting).map((c) => `${c.kind}/${c.name}`),
    missing: missing.sort(),
  };
}

/** The `test` of a workload's consent as it was read: a patch lands only while the workload still says it. */
function consentTest(workload: Workload): JsonPatchOp {
  return {
    op: 'test',
    path: `/metadata/annotations/${pointerSegment(ANNOTATION_RESTART_ON_ROTATION)}`,
    value: workload.metadata?.annotations?.[ANNOTATION_RESTART_ON_ROTATION],
  };
}

/**
 * Restarts each consenting consumer, in `namespace` only, and returns what to wait for: each
 * workload with the generation its rollout must reach. Each is read fresh first, one at a time: one
 * gone meanwhile is missing, one that no longer consents for `consentName` is skipped. One JSON patch each: the test of its consent,
 * the restart annotation (`move.annotation`, the new key's id), and with spec.secret.immutable
 * (`move.from` not empty) its pod template repointed from the retired Secrets to `move.to`, each
 * reference tested for its old name and the whole for the resourceVersion read, so a concurrent
 * edit fails the patch (tried again) rather than being overwritten. The same rotation patches the
 * same value: a repeat after a crash finds nothing to change, makes no patch, and the generation
 * it made is waited for (a template unchanged neither bumps the generation nor rolls the pods).
 */
export async function restartConsumers(
  kube: KubeWrites,
  namespace: string,
  consentName: string,
  move: { from: ReadonlySet<string>; to: string; annotation: string },
  newKeyId: number,
  consumers: readonly Consumer[],
): Promise<{ restarts: Restart[]; missing: string[]; skipped: string[] }> {
  const restarts: Restart[] = [];
  const missing: string[] = [];
  const skipped: string[] = [];
  for (const { kind, name } of consumers) {
    const workload = await kube.readWorkload(namespace, kind, name);
    if (workload === undefined) {
      missing.push(`${kind}/${name}`);
      continue;
    }
    if (!consents(workload, consentName)) {
      skipped.push(`${kind}/${name}`);
      continue;
    }
    const template = workload.spec?.template;
    const repoint = repointOps(template, move.from, move.to);
    const ops = [...repoint, ...annotationOp(template, move.annotation, String(newKeyId))];
    if (ops.length === 0) {
      restarts.push({ kind, name, generation: workload.metadata?.generation ?? 0 });
      continue;
    }
    const guard: JsonPatchOp[] = [
      consentTest(workload),
      ...(repoint.length > 0 ? [{ op: 'test' as const, path: '/metadata/resourceVersion', value: workload.metadata?.resourceVersion }] : []),
    ];
    try {
      const patched = await kube.patchWorkload(namespace, kind, name, [...guard, ...ops]);
      restarts.push({ kind, name, generation: patched.metadata?.generation ?? 0 });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
      missing.push(`${kind}/${name}`);
    }
  }
  return { restarts, missing, skipped };
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

/**
 * The rollouts of recorded restarts: which are not complete, and which of those are stalled (a
 * paused Deployment among them). A workload gone, or that no longer consents for `consentName`
 * (its owner's way to release the old key), is not waited for.
 */
export async function observeRollouts(
  kube: KubeWrites,
  namespace: string,
  consentName: string,
  restarts: readonly Restart[],
): Promise<{ waitingFor: string[]; stalled: string[] }> {
  const waitingFor: string[] = [];
  const stalled: string[] = [];
  for (const r of restarts) {
    const workload = await kube.readWorkload(namespace, r.kind, r.name);
    if (workload === undefined || !consents(workload, consentName)) continue;
    const state = rolloutState(r.kind, workload, r.generation);
    if (state !== 'Complete') waitingFor.push(`${r.kind}/${r.name}`);
    if (r.kind === 'Deployment' && (workload as V1Deployment).spec?.paused === true && state !== 'Complete') stalled.push(`${r.kind}/${r.name} (paused)`);
    else if (state === 'Stalled') stalled.push(`${r.kind}/${r.name}`);
  }
  return { waitingFor, stalled };
}
