// The reference tables of docs/reference/, made from the code so they cannot drift from it (as
// controller-gen makes CRD reference docs and helm-docs makes a chart's values table):
// - flags.md: the operator's flags (src/operator/flags.ts, the CLI's own definitions);
// - helm-values.md: the chart's values (values.yaml, its comments, and values.schema.json);
// - metrics.md: every metric of the registry (src/operator/keys/status/metrics.ts, runtime/metrics.ts, the inventory's and issuers' gauges);
// - conditions.md: condition types, reasons, the platform-failure table and the events
//   (src/operator/keys/status/catalog.ts, conditions.ts's closed Reason union, platform-reasons.ts),
//   and a ClusterKeyIssuer's reasons (src/operator/issuers/conditions.ts);
// - annotations.md: annotations, labels and the finalizer (catalog.ts, from the code's constants);
// - spec.md and status.md: the CRD fields (the zod schemas, through the CRDs they generate).
// Each page is prose written by hand around blocks this file fills in, between
// `<!-- BEGIN GENERATED: <name> -->` and `<!-- END GENERATED: <name> -->`. `npm run generate`
// writes them (scripts/generate-reference.ts); test/reference/reference.test.ts fails when a page
// differs from what this renders.
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { isMap, isScalar, isSeq, parseDocument, type Node, type Pair } from 'yaml';
import { FLAGS } from '../src/operator/flags.ts';
import { createMetrics } from '../src/operator/keys/status/metrics.ts';
import { registerInventoryGauge } from '../src/operator/inventory/metrics.ts';
import { ISSUER_REASONS } from '../src/operator/issuers/conditions.ts';
import { registerIssuerGauge } from '../src/operator/issuers/metrics.ts';
import { ANNOTATIONS, CONDITION_TYPES, EVENTS, FINALIZERS, LABELS, REASONS } from '../src/operator/keys/status/catalog.ts';
import { PLATFORM_FAILURE_REASONS } from '../src/operator/keys/status/platform-reasons.ts';
import { customResourceDefinition } from '../src/operator/resources/crd.ts';
import type { KindName } from '../src/operator/resources/schema.ts';

const root = new URL('../', import.meta.url);
export const CHART_DIR = new URL('deploy/helm/neon-key-operator/', root);

type Json = Record<string, unknown>;

/** A table cell: one line, pipes escaped. */
function cell(text: string): string {
  return text
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\|/g, '\\|')
    .trim();
}

function code(text: string): string {
  return text === '' ? '' : `\`${text.replace(/`/g, "'")}\``;
}

function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`)].join('\n');
}

export function flagsTable(): string {
  return table(
    ['flag', 'environment', 'default', 'meaning'],
    FLAGS.map((f) => [
      code(`--${f.name}${'value' in f ? ` ${f.value}` : ''}`),
      'env' in f ? code(`$${f.env}`) : '',
      f.default.includes(' ') ? f.default : code(f.default),
      f.help,
    ]),
  );
}

/** The schema of a values path (following $ref), or undefined. */
function schemaAt(schema: Json, path: string[]): Json | undefined {
  const resolve = (node: Json | undefined): Json | undefined => {
    const ref = node?.$ref;
    if (typeof ref !== 'string') return node;
    return resolve((schema.definitions as Record<string, Json>)[ref.replace('#/definitions/', '')]);
  };
  let node: Json | undefined = resolve(schema);
  for (const key of path) node = resolve((node?.properties as Record<string, Json> | undefined)?.[key]);
  return node;
}

function schemaSummary(node: Json | undefined): string {
  if (node === undefined) return '';
  const parts: string[] = [];
  const type = node.type ?? (node.oneOf !== undefined ? 'string' : undefined);
  if (type !== undefined) parts.push(Array.isArray(type) ? type.join(' or ') : String(type));
  if (Array.isArray(node.enum)) parts.push(`one of ${node.enum.map((v) => code(String(v))).join(', ')}`);
  if (typeof node.minimum === 'number') parts.push(`≥ ${node.minimum}`);
  if (typeof node.maximum === 'number') parts.push(`≤ ${node.maximum}`);
  if (typeof node.description === 'string' && node.description.startsWith('A Go duration')) parts.push('Go duration > 0');
  else if (typeof node.description === 'string' && node.description.startsWith('A Prometheus duration')) parts.push('Prometheus duration');
  else if (typeof node.pattern === 'string') parts.push(`pattern ${code(node.pattern)}`);
  if (node.not !== undefined && typeof (node.not as Json).pattern === 'string' && !parts.includes('Go duration > 0'))
    parts.push(`not ${code((node.not as Json).pattern as string)}`);
  return parts.join(', ');
}

/** The comment above a values.yaml key, without `#`. */
function comment(pair: Pair, map: { commentBefore?: string | null }, first: boolean): string {
  const key = pair.key as Node & { commentBefore?: string | null };
  const text = key.commentBefore ?? (first ? map.commentBefore : undefined) ?? '';
  // The paragraph right above the key (the file's header is another paragraph).
  const paragraphs = text.split(/\n\s*\n/);
  return (paragraphs[paragraphs.length - 1] ?? '')
    .split('\n')
    .map((l) => l.replace(/^\s?/, ''))
    .join(' ')
    .trim();
}

export function helmValuesTable(): string {
  const valuesText = readFileSync(new URL('values.yaml', CHART_DIR), 'utf8');
  const schema = JSON.parse(readFileSync(new URL('values.schema.json', CHART_DIR), 'utf8')) as Json;
  const document = parseDocument(valuesText);
  const rows: string[][] = [];
  const walk = (node: unknown, path: string[], inherited: string): void => {
    if (!isMap(node)) return;
    node.items.forEach((pair, index) => {
      const key = String((pair.key as { value: unknown }).value);
      const here = [...path, key];
      const own = comment(pair, node as { commentBefore?: string | null }, index === 0);
      const value = pair.value;
      const s = schemaAt(schema, here);
      const leaf = !isMap(value) || value.items.length === 0 || s?.type !== 'object' || s?.properties === undefined;
      if (!leaf) {
        walk(value, here, own !== '' ? own : inherited);
        return;
      }
      const text = isScalar(value) ? JSON.stringify(value.value) : isSeq(value) || isMap(value) ? JSON.stringify(value.toJSON()) : '';
      rows.push([code(here.join('.')), code(text), schemaSummary(s), own !== '' ? own : inherited !== '' ? `(${inherited})` : '']);
    });
  };
  walk(document.contents, [], '');
  return table(['value', 'default', 'schema', 'meaning'], rows);
}

export function metricsTable(): string {
  const registry = new Registry();
  // With leader election (leader_election_master_status), and the deprecated names of before controller-runtime's.
  createMetrics(registry, { defaultMetrics: false, leaseName: 'neon-key-operator' });
  // The inventory's gauge as --inventory-organization-label shows it (without it, no organization label).
  registerInventoryGauge(registry, () => [], true);
  registerIssuerGauge(registry, () => []);
  const metrics = registry.getMetricsAsArray() as unknown as { name: string; help: string; type: string; labelNames?: readonly string[] }[];
  return table(
    ['metric', 'type', 'labels', 'meaning'],
    metrics.map((m) => [code(m.name), m.type, (m.labelNames ?? []).map(code).join(', '), m.help]),
  );
}

export function conditionTypesTable(): string {
  return table(
    ['condition', 'meaning'],
    Object.entries(CONDITION_TYPES).map(([type, meaning]) => [code(type), meaning]),
  );
}

export function reasonsTable(): string {
  return table(
    ['reason', 'where', 'meaning'],
    Object.entries(REASONS).map(([reason, doc]) => [code(reason), doc.on, doc.meaning]),
  );
}

/** The reasons of a ClusterKeyIssuer's Ready condition (src/operator/issuers/conditions.ts). */
export function issuerReasonsTable(): string {
  return table(
    ['reason', 'meaning'],
    Object.entries(ISSUER_REASONS).map(([reason, meaning]) => [code(reason), meaning]),
  );
}

export function platformFailuresTable(): string {
  const byReason = new Map<string, string[]>();
  for (const [codeName, reason] of Object.entries(PLATFORM_FAILURE_REASONS)) byReason.set(reason, [...(byReason.get(reason) ?? []), codeName]);
  return table(
    ['platform answer (src/platform `code`)', 'reason'],
    [...[...byReason].map(([reason, codes]) => [codes.map(code).join(', '), code(reason)]), ['anything that is not a platform answer (a bug)', code('Error')]],
  );
}

export function eventsTable(): string {
  return table(
    ['event', 'type', 'meaning'],
    Object.entries(EVENTS).map(([reason, type]) => [code(reason), type, REASONS[reason as keyof typeof REASONS].meaning]),
  );
}

export function annotationsTable(): string {
  const rows = (list: typeof ANNOTATIONS) => list.map((a) => [code(a.name), a.on, a.by, a.meaning]);
  return table(['name', 'on', 'written by', 'meaning'], rows(ANNOTATIONS));
}

export function labelsAndFinalizersTable(): string {
  return table(
    ['name', 'kind', 'on', 'meaning'],
    [...LABELS.map((l) => [code(l.name), 'label', l.on, l.meaning]), ...FINALIZERS.map((f) => [code(f.name), 'finalizer', f.on, f.meaning])],
  );
}

function validation(node: Json): string {
  const parts: string[] = [];
  if (Array.isArray(node.enum)) parts.push(`one of ${node.enum.map((v) => code(String(v))).join(', ')}`);
  if (typeof node.minLength === 'number' || typeof node.maxLength === 'number') parts.push(`length ${node.minLength ?? 0}-${node.maxLength ?? '∞'}`);
  if (typeof node.maxItems === 'number') parts.push(`at most ${node.maxItems} items`);
  if (typeof node.maxProperties === 'number') parts.push(`at most ${node.maxProperties} entries`);
  if (typeof node.minimum === 'number') parts.push(`≥ ${node.minimum}`);
  if (typeof node.format === 'string') parts.push(node.format);
  if (typeof node.pattern === 'string') parts.push(node.pattern.includes('(ns|us|') ? 'Go duration' : `pattern ${code(node.pattern)}`);
  for (const rule of (node['x-kubernetes-validations'] as { message?: string }[] | undefined) ?? [])
    if (rule.message !== undefined) parts.push(`rule: ${rule.message}`);
  return parts.join('; ');
}

function typeOf(node: Json): string {
  if (node.type === 'array') return `[]${typeOf((node.items ?? {}) as Json)}`;
  if (node.type === 'object' && node.additionalProperties !== undefined && node.properties === undefined) return 'map';
  if (node['x-kubernetes-int-or-string'] === true) return 'int or string';
  return String(node.type ?? 'any');
}

interface FieldRow {
  path: string;
  kind: KindName;
  cells: string[];
}

function fieldRows(kind: KindName, part: 'spec' | 'status'): FieldRow[] {
  const version = (customResourceDefinition(kind).spec as { versions: unknown[] }).versions[0] as {
    schema: { openAPIV3Schema: { properties: Record<string, Json> } };
  };
  const rows: FieldRow[] = [];
  const walk = (node: Json, path: string, required: boolean): void => {
    if (path !== '') {
      rows.push({
        path,
        kind,
        cells: [
          typeOf(node),
          required ? 'yes' : '',
          node.default !== undefined ? code(JSON.stringify(node.default)) : '',
          validation(node),
          String(node.description ?? ''),
        ],
      });
    }
    const object = node.type === 'array' ? ((node.items ?? {}) as Json) : node;
    const properties = object.properties as Record<string, Json> | undefined;
    const requiredList = (object.required as string[] | undefined) ?? [];
    for (const [name, child] of Object.entries(properties ?? {}))
      walk(child, `${path}${path === '' ? '' : node.type === 'array' ? '[].' : '.'}${name}`, requiredList.includes(name));
  };
  walk(version.schema.openAPIV3Schema.properties[part] as Json, '', false);
  return rows;
}

/** One table for both kinds: a field the two kinds share with the same definition is one row. */
export function fieldsTable(part: 'spec' | 'status'): string {
  const apiKey = fieldRows('ApiKey', part);
  const project = fieldRows('ProjectApiKey', part);
  const rows: string[][] = [];
  const seen = new Set<string>();
  const all = [...apiKey, ...project];
  for (const row of all) {
    const key = `${row.path}|${row.cells.join('|')}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const twin = all.find((r) => r !== row && r.kind !== row.kind && r.path === row.path && r.cells.join('|') === row.cells.join('|'));
    rows.push([code(row.path), twin !== undefined ? 'both' : row.kind, ...row.cells]);
  }
  // The kinds' order kept, a field of one kind right after the other kind's same path.
  const order = new Map<string, number>();
  for (const row of all) if (!order.has(row.path)) order.set(row.path, order.size);
  rows.sort((a, b) => (order.get(a[0]!.slice(1, -1)) ?? 0) - (order.get(b[0]!.slice(1, -1)) ?? 0));
  return table(['field', 'kinds', 'type', 'required', 'default', 'validation', 'description'], rows);
}

/** Every page of docs/reference/ and its generated blocks, by name. */
export function referenceBlocks(): Record<string, Record<string, string>> {
  return {
    'docs/reference/flags.md': { flags: flagsTable() },
    'docs/reference/helm-values.md': { 'helm-values': helmValuesTable() },
    'docs/reference/metrics.md': { metrics: metricsTable() },
    'docs/reference/conditions.md': {
      'condition-types': conditionTypesTable(),
      reasons: reasonsTable(),
      'platform-failures': platformFailuresTable(),
      events: eventsTable(),
      'issuer-reasons': issuerReasonsTable(),
    },
    'docs/reference/annotations.md': { annotations: annotationsTable(), 'labels-and-finalizers': labelsAndFinalizersTable() },
    'docs/reference/spec.md': { spec: fieldsTable('spec') },
    'docs/reference/status.md': { status: fieldsTable('status') },
  };
}

const begin = (name: string): string => `<!-- BEGIN GENERATED: ${name} (npm run generate, from the code; do not edit) -->`;
const end = (name: string): string => `<!-- END GENERATED: ${name} -->`;

/** The page with each block's text between its markers; throws when a marker is missing. */
export function fillPage(text: string, blocks: Record<string, string>, file = 'page'): string {
  let out = text;
  for (const [name, body] of Object.entries(blocks)) {
    const start = out.indexOf(begin(name));
    const stop = out.indexOf(end(name));
    if (start < 0 || stop < start) throw new Error(`${file}: no ${begin(name)} ... ${end(name)} markers`);
    out = `${out.slice(0, start)}${begin(name)}\n${body}\n${out.slice(stop)}`;
  }
  return out;
}

export function referenceFile(path: string): URL {
  return new URL(path, root);
}
