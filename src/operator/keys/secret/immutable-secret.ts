// spec.secret.immutable (docs/rotation.md, "Immutable Secrets"): each issued key in its own Secret
// marked immutable, named <spec.secret.name or metadata.name>-<key id>. The name is a function of
// the key alone, so a create repeated after a crash writes the same name, and status.secretName
// names the current one. A rotation repoints the consumers' pod templates from the replaced key's
// Secret to the new one (a JSON patch of exactly those references, each guarded by a test of its
// old value and the whole by the workload's resourceVersion); once the replaced key is revoked its
// Secret is deleted, only when this resource owns it by uid.
import type { V1PodTemplateSpec } from '@kubernetes/client-node';
import type { ApiKeySpec, KeyResource, ProjectApiKeySpec } from '../../resources/schema.ts';
import type { JsonPatchOp } from '../kube-writes.ts';

/** Whether the resource writes one immutable Secret per key. */
export function immutableMode(spec: ApiKeySpec | ProjectApiKeySpec | undefined): boolean {
  return spec?.secret?.immutable === true;
}

/** The name every Secret of the resource starts with (and the mutable mode's one Secret). */
export function baseSecretName(resource: Pick<KeyResource, 'metadata'>, spec: ApiKeySpec | ProjectApiKeySpec | undefined): string {
  return spec?.secret?.name ?? resource.metadata.name;
}

const DNS_SUBDOMAIN_MAX = 253;

/**
 * `<base>-<keyId>`, a DNS subdomain of at most 253 characters: a base too long for the suffix is
 * cut, and what the cut leaves at its end that a name may not end with ('-', '.') is dropped.
 */
export function immutableSecretName(base: string, keyId: number): string {
  const suffix = `-${keyId}`;
  const room = DNS_SUBDOMAIN_MAX - suffix.length;
  const head = base.length <= room ? base : base.slice(0, room).replace(/[-.]+$/, '');
  return `${head}${suffix}`;
}

/** A JSON pointer segment (RFC 6901): '~' and '/' escaped. */
export function pointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * The operations that move every reference of the pod template (env secretKeyRef, envFrom
 * secretRef, secret volumes, projected secret sources; containers and init containers) from a
 * Secret in `from` to `to`: a test of the old name, then its replacement, for each. Empty when
 * nothing points at `from` (a repeat after the patch landed).
 */
export function repointOps(template: V1PodTemplateSpec | undefined, from: ReadonlySet<string>, to: string): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  const pod = template?.spec;
  if (pod === undefined) return ops;
  const move = (path: string, name: string | undefined): void => {
    if (name === undefined || name === to || !from.has(name)) return;
    ops.push({ op: 'test', path, value: name }, { op: 'replace', path, value: to });
  };
  const base = '/spec/template/spec';
  for (const list of ['containers', 'initContainers'] as const) {
    (pod[list] ?? []).forEach((c, i) => {
      (c.env ?? []).forEach((e, j) => move(`${base}/${list}/${i}/env/${j}/valueFrom/secretKeyRef/name`, e.valueFrom?.secretKeyRef?.name));
      (c.envFrom ?? []).forEach((e, j) => move(`${base}/${list}/${i}/envFrom/${j}/secretRef/name`, e.secretRef?.name));
    });
  }
  (pod.volumes ?? []).forEach((v, i) => {
    move(`${base}/volumes/${i}/secret/secretName`, v.secret?.secretName);
    (v.projected?.sources ?? []).forEach((s, j) => move(`${base}/volumes/${i}/projected/sources/${j}/secret/name`, s.secret?.name));
  });
  return ops;
}

/** The operation setting one pod template annotation (the map added when the template has none). */
export function annotationOp(template: V1PodTemplateSpec | undefined, name: string, value: string): JsonPatchOp[] {
  if (template?.metadata?.annotations?.[name] === value) return [];
  if (template?.metadata === undefined) return [{ op: 'add', path: '/spec/template/metadata', value: { annotations: { [name]: value } } }];
  if (template.metadata.annotations === undefined) return [{ op: 'add', path: '/spec/template/metadata/annotations', value: { [name]: value } }];
  return [{ op: 'add', path: `/spec/template/metadata/annotations/${pointerSegment(name)}`, value }];
}
