// CustomResourceDefinitions built from the zod schemas (schema.ts). The output must be a structural
// schema (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
// every node typed, no anyOf/oneOf carrying types, no $schema, defaults only where they prune cleanly.
import { z } from 'zod';
import { GROUP, KINDS, VERSION, type KindName } from './schema.ts';
import { MIN_ROTATION_GRACE, rotationGraceRule } from './spec-parts.ts';
import { INVENTORY_KIND, INVENTORY_KIND_INFO } from './inventory.ts';
import { ISSUER_KIND, ISSUER_KIND_INFO } from './issuer.ts';
import { toYaml } from './yaml.ts';

type Json = { [key: string]: unknown };

function structural(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(structural);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json)) {
    if (key === '$schema') continue;
    // zod writes additionalProperties: false for strict objects; the apiserver prunes unknown fields anyway.
    if (key === 'additionalProperties' && value === false) continue;
    out[key] = structural(value);
  }
  // zod bounds z.int() by the safe-integer range; Kubernetes wants int64 without those bounds.
  if (out.type === 'integer') {
    if (out.minimum === Number.MIN_SAFE_INTEGER) delete out.minimum;
    if (out.maximum === Number.MAX_SAFE_INTEGER) delete out.maximum;
    out.format = 'int64';
  }
  return out;
}

function jsonSchema(schema: z.ZodType): Json {
  return structural(z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', reused: 'inline', unrepresentable: 'throw' })) as Json;
}

/** Every kind a CRD is generated for: the key kinds, and the inventory (inventory.ts). */
export type CrdKind = KindName | typeof INVENTORY_KIND | typeof ISSUER_KIND;
const CRD_KINDS: Record<
  CrdKind,
  { plural: string; singular: string; shortNames: readonly string[]; description: string; spec: z.ZodType; status: z.ZodType; clusterScoped?: boolean }
> = {
  ...KINDS,
  [INVENTORY_KIND]: INVENTORY_KIND_INFO,
  [ISSUER_KIND]: ISSUER_KIND_INFO,
};

const issuerColumns = [
  { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
  { name: 'Organization', type: 'string', jsonPath: '.spec.organizationId' },
  { name: 'User', type: 'string', jsonPath: '.status.user.email', priority: 1 },
  { name: 'Resources', type: 'integer', jsonPath: '.status.resources' },
  { name: 'Verified', type: 'date', jsonPath: '.status.verifiedAt', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

const inventoryColumns = [
  { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
  { name: 'Organization', type: 'string', jsonPath: '.spec.organizationId', priority: 1 },
  { name: 'Live', type: 'integer', jsonPath: '.status.live' },
  { name: 'Managed', type: 'integer', jsonPath: '.status.managed' },
  { name: 'Not Managed', type: 'integer', jsonPath: '.status.notManaged' },
  { name: 'Unused', type: 'integer', jsonPath: '.status.unused' },
  // -o wide: the keys not managed whose names are another cluster's format, and those in no operator's (docs/clusters.md).
  { name: 'Other Cluster', type: 'integer', jsonPath: '.status.notManagedByOrigin.otherCluster', priority: 1 },
  { name: 'By Hand', type: 'integer', jsonPath: '.status.notManagedByOrigin.byHand', priority: 1 },
  { name: 'Listed', type: 'date', jsonPath: '.status.listedAt', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
];

const printerColumns = (kind: CrdKind) =>
  kind === INVENTORY_KIND
    ? inventoryColumns
    : kind === ISSUER_KIND
      ? issuerColumns
      : [
          { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
          { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', priority: 1 },
          ...(kind === 'ProjectApiKey'
            ? [{ name: 'Project', type: 'string', jsonPath: '.spec.projectId', priority: 1 }]
            : [{ name: 'Scope', type: 'string', jsonPath: '.spec.scope', priority: 1 }]),
          { name: 'Key ID', type: 'integer', jsonPath: '.status.keyId' },
          { name: 'Secret', type: 'string', jsonPath: '.status.secretName' },
          // The key's last use as the platform reports it (status.lastUsedAt; drift checks record it).
          { name: 'Last Used', type: 'date', jsonPath: '.status.lastUsedAt' },
          // -o wide: a string, not a date (kubectl prints a future date as <invalid>).
          { name: 'Next Rotation', type: 'string', jsonPath: '.status.rotation.nextRotationAt', priority: 1 },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ];

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: Json;
}

/**
 * Options of a CRD rendered for a test or demo cluster: minRotationGrace lowers the floor of
 * spec.rotation.gracePeriod (the operator started with the same --min-rotation-grace), so a
 * rotation completes in seconds. crds/ and the chart hold the default (MIN_ROTATION_GRACE).
 */
export interface CrdOptions {
  minRotationGrace?: string;
}

/** The CEL rules of a schema with the gracePeriod floor replaced. */
function withGraceFloor(node: unknown, min: string): unknown {
  if (Array.isArray(node)) return node.map((n) => withGraceFloor(n, min));
  if (node === null || typeof node !== 'object') return node;
  const standard = rotationGraceRule(MIN_ROTATION_GRACE);
  if ((node as Json).rule === standard.rule && (node as Json).message === standard.message) return rotationGraceRule(min);
  return Object.fromEntries(Object.entries(node as Json).map(([k, v]) => [k, withGraceFloor(v, min)]));
}

export function customResourceDefinition(kind: CrdKind, options: CrdOptions = {}): CustomResourceDefinition {
  const info = CRD_KINDS[kind];
  const spec = jsonSchema(info.spec);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${info.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: info.clusterScoped === true ? 'Cluster' : 'Namespaced',
      names: {
        kind,
        listKind: `${kind}List`,
        plural: info.plural,
        singular: info.singular,
        shortNames: [...info.shortNames],
        // An issuer is no key: `kubectl get neon` lists the keys and inventories of a namespace.
        ...(info.clusterScoped === true ? {} : { categories: ['neon'] }),
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: printerColumns(kind),
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: info.description,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.' },
                kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.' },
                metadata: { type: 'object' },
                spec: options.minRotationGrace !== undefined ? withGraceFloor(spec, options.minRotationGrace) : spec,
                status: jsonSchema(info.status),
              },
            },
          },
        },
      ],
    },
  };
}

export const CRD_FILES: Record<CrdKind, string> = {
  ApiKey: `${GROUP}_${KINDS.ApiKey.plural}.yaml`,
  ProjectApiKey: `${GROUP}_${KINDS.ProjectApiKey.plural}.yaml`,
  [INVENTORY_KIND]: `${GROUP}_${INVENTORY_KIND_INFO.plural}.yaml`,
  [ISSUER_KIND]: `${GROUP}_${ISSUER_KIND_INFO.plural}.yaml`,
};

/** The text of crds/<file>: what `npm run generate` writes and the staleness test compares. */
export function renderCrdYaml(kind: CrdKind, options: CrdOptions = {}): string {
  return `# Generated by scripts/generate-crds.ts from src/operator/resources/schema.ts. Do not edit.\n---\n${toYaml(customResourceDefinition(kind, options) as unknown as Record<string, unknown>)}`;
}
