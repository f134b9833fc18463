// spec.secret.template: the Secret as its consumers want it. Labels and annotations added to it, and
// more data entries each derived from the key (Key, KeyId, KeyName, OrganizationId, ProjectId,
// PlatformUrl). The operator keeps them in line: a changed template, or a tenant's edit of a
// derived entry or of a templated label, is repaired by rewriting the Secret from its primary
// entry (the key, which decide() has checked against status.secretHash) without issuing a new key.
//
// The operator's own names (keys.neon.dev/*, app.kubernetes.io/managed-by) are never taken from a
// template, whatever the CRD let through. Which label and annotation names a template set is
// remembered on the Secret (ANNOTATION_TEMPLATED), so those a template no longer sets are removed
// while names others put there stay. Derived values (one may be the key) are compared here and
// never logged.
import type { V1Secret } from '@kubernetes/client-node';
import type { SecretObservation } from '../decision-types.ts';
import { LABEL_MANAGED_BY, MANAGED_BY, OPERATOR_METADATA_PREFIX, type ApiKeySpec, type ProjectApiKeySpec, type TemplateField } from '../../resources/schema.ts';

/** On the Secret: the label and annotation names the template set, as JSON {"labels":[],"annotations":[]}. */
export const ANNOTATION_TEMPLATED = 'keys.neon.dev/templated';

/** Bounds a (tenant-editable) ANNOTATION_TEMPLATED is read within. */
const TEMPLATED_MAX_NAMES = 64;

export interface SecretTemplate {
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
  data?: Record<string, TemplateField> | undefined;
}

/** What the derived entries are made of. */
export interface TemplateValues {
  key: string;
  keyId: number | undefined;
  keyName: string | undefined;
  organizationId: string | undefined;
  projectId: string | undefined;
  platformUrl: string | undefined;
}

export function isOperatorOwn(name: string): boolean {
  return name.startsWith(OPERATOR_METADATA_PREFIX) || name === LABEL_MANAGED_BY;
}

export function templateOf(spec: ApiKeySpec | ProjectApiKeySpec | undefined): SecretTemplate | undefined {
  return spec?.secret?.template;
}

/** The organization and project a spec names (the values of OrganizationId and ProjectId). */
export function specIds(spec: ApiKeySpec | ProjectApiKeySpec | undefined): { organizationId: string | undefined; projectId: string | undefined } {
  return {
    organizationId: spec?.organizationId,
    projectId: spec !== undefined && 'projectId' in spec ? spec.projectId : undefined,
  };
}

/**
 * The values of a Secret that holds the recorded key: its id and name from status (only the
 * operator writes it), or from the Secret's annotations under the operator's signature.
 */
export function recordedValues(
  key: string,
  status: { keyId?: number | undefined; keyName?: string | undefined } | undefined,
  secret: SecretObservation | undefined,
  spec: ApiKeySpec | ProjectApiKeySpec | undefined,
  platformUrl: string | undefined,
): TemplateValues {
  return {
    key,
    keyId: status?.keyId ?? (secret?.verified === true ? secret.keyId : undefined),
    keyName: status?.keyName ?? (secret?.verified === true ? secret.keyName : undefined),
    ...specIds(spec),
    platformUrl,
  };
}

function fieldValue(field: TemplateField, values: TemplateValues): string | undefined {
  switch (field) {
    case 'Key':
      return values.key;
    case 'KeyId':
      return values.keyId !== undefined ? String(values.keyId) : undefined;
    case 'KeyName':
      return values.keyName;
    case 'OrganizationId':
      return values.organizationId;
    case 'ProjectId':
      return values.projectId;
    case 'PlatformUrl':
      return values.platformUrl;
  }
}

/** The Secret's data: the key under `dataKey`, then each derived entry (base64, as Secret.data holds it). */
export function templatedData(dataKey: string, template: SecretTemplate | undefined, values: TemplateValues): Record<string, string> {
  const data: Record<string, string> = { [dataKey]: Buffer.from(values.key, 'utf8').toString('base64') };
  for (const [name, field] of Object.entries(template?.data ?? {})) {
    // The CRD refuses a template entry named like the key's own; should one get through, the key wins.
    if (name === dataKey) continue;
    const value = fieldValue(field, values);
    // A value the operator does not know (a KeyName before status has one) is left out, never guessed.
    if (value !== undefined && value !== '') data[name] = Buffer.from(value, 'utf8').toString('base64');
  }
  return data;
}

interface Templated {
  labels: string[];
  annotations: string[];
  data: string[];
}

function previouslyTemplated(annotations: Record<string, string> | undefined): Templated {
  const names = (value: unknown): string[] =>
    Array.isArray(value) ? value.filter((n): n is string => typeof n === 'string').slice(0, TEMPLATED_MAX_NAMES) : [];
  try {
    const parsed = JSON.parse(annotations?.[ANNOTATION_TEMPLATED] ?? '{}') as { labels?: unknown; annotations?: unknown; data?: unknown };
    return { labels: names(parsed?.labels), annotations: names(parsed?.annotations), data: names(parsed?.data) };
  } catch {
    return { labels: [], annotations: [], data: [] };
  }
}

/** The data entries a template derives (never the key's own entry). */
function derivedNames(template: SecretTemplate | undefined, dataKey: string): string[] {
  return Object.keys(template?.data ?? {})
    .filter((name) => name !== dataKey)
    .sort();
}

function merged(
  existing: Record<string, string> | undefined,
  previous: readonly string[],
  wanted: Record<string, string> | undefined,
): { out: Record<string, string>; applied: string[] } {
  const out = { ...existing };
  const applied = Object.keys(wanted ?? {})
    .filter((name) => !isOperatorOwn(name))
    .sort();
  for (const name of previous) if (!isOperatorOwn(name) && !applied.includes(name)) delete out[name];
  for (const name of applied) out[name] = (wanted as Record<string, string>)[name] as string;
  return { out, applied };
}

/**
 * The labels and annotations of the Secret under `template`, from those it has: what the template
 * set before and no longer does is removed, what it sets is set, what others set stays. The
 * operator's own names are left to the caller, who sets them after.
 */
export function templatedMetadata(
  existing: Pick<NonNullable<V1Secret['metadata']>, 'labels' | 'annotations'> | undefined,
  template: SecretTemplate | undefined,
  dataKey: string,
): { labels: Record<string, string>; annotations: Record<string, string> } {
  const previous = previouslyTemplated(existing?.annotations);
  const labels = merged(existing?.labels, previous.labels, template?.labels);
  const annotations = merged(existing?.annotations, previous.annotations, template?.annotations);
  const data = derivedNames(template, dataKey);
  delete annotations.out[ANNOTATION_TEMPLATED];
  if (labels.applied.length > 0 || annotations.applied.length > 0 || data.length > 0) {
    annotations.out[ANNOTATION_TEMPLATED] = JSON.stringify({ labels: labels.applied, annotations: annotations.applied, data });
  }
  return { labels: { ...labels.out, [LABEL_MANAGED_BY]: MANAGED_BY }, annotations: annotations.out };
}

/**
 * The Secret rewritten to the template: its derived entries rebuilt from its primary entry
 * (`values.key`, which must be what it holds), those a template set before and no longer does
 * removed, labels and annotations merged; the primary entry's bytes, entries others put there, the
 * operator's signed annotations and owner reference kept as they are.
 */
export function rewrittenSecret(existing: V1Secret, dataKey: string, template: SecretTemplate | undefined, values: TemplateValues): V1Secret {
  const metadata = templatedMetadata(existing.metadata, template, dataKey);
  const wanted = derivedNames(template, dataKey);
  const data = { ...existing.data };
  for (const name of previouslyTemplated(existing.metadata?.annotations).data) if (name !== dataKey && !wanted.includes(name)) delete data[name];
  // A derived value the operator does not know now is not left stale.
  for (const name of wanted) delete data[name];
  const { [dataKey]: fresh, ...derived } = templatedData(dataKey, template, values);
  return {
    ...existing,
    metadata: { ...existing.metadata, labels: metadata.labels, annotations: metadata.annotations },
    // The primary entry as it is: decide() checked it against status.secretHash.
    data: { ...data, ...derived, [dataKey]: existing.data?.[dataKey] ?? fresh ?? '' },
  };
}

function sameEntries(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  const left = a ?? {};
  const keys = Object.keys(left);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && b[k] === left[k]);
}

/**
 * Whether the Secret already is what rewrittenSecret() would make of it. `metadataOnly`: an
 * immutable Secret, whose data is what it was written with (a template's data applies from the next key).
 */
export function secretInLine(existing: V1Secret, dataKey: string, template: SecretTemplate | undefined, values: TemplateValues, metadataOnly = false): boolean {
  const wanted = rewrittenSecret(existing, dataKey, template, values);
  return (
    sameEntries(existing.metadata?.labels, wanted.metadata?.labels ?? {}) &&
    sameEntries(existing.metadata?.annotations, wanted.metadata?.annotations ?? {}) &&
    (metadataOnly || sameEntries(existing.data, wanted.data ?? {}))
  );
}
