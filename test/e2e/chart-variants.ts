// What the e2e scenarios need from the chart beyond installing it as it is. Prints names and
// counts, never a value of the cluster.
//
//   node chart-variants.ts older-crds <copy dir>
//     a copy of the chart whose CRDs lack spec.rotation, spec.usage and spec.secret.template, as the
//     first chart's did (those fields came later): the release it installs is what `helm upgrade`
//     meets in a cluster that started on an older chart. The CEL rules that name a removed field go
//     with it (the apiserver refuses a rule about a field the schema does not have).
//   node chart-variants.ts rules <PrometheusRule yaml> <rules file out>
//     the groups of the chart's rendered PrometheusRule as a plain Prometheus rules file; fails
//     unless they are the shipped files/prometheus-rules.yaml but for the `for` that
//     metrics.prometheusRule.for set (printed), so the e2e evaluates the shipped expressions.
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments, parseDocument, stringify } from 'yaml';

const chartDir = fileURLToPath(new URL('../../deploy/helm/neon-key-operator', import.meta.url));
const [mode, ...args] = process.argv.slice(2);

function fail(message: string): never {
  console.error(`chart-variants: ${message}`);
  process.exit(1);
}

/** Schema paths under spec.versions[*].schema.openAPIV3Schema.properties.spec.properties. */
const REMOVED: readonly (readonly string[])[] = [['rotation'], ['usage'], ['secret', 'properties', 'template']];

interface Schema {
  properties?: Record<string, Schema>;
  items?: Schema;
  'x-kubernetes-validations'?: { rule: string }[];
}

/** Drops every CEL rule that names one of `fields` (self.template, self.secret.template, ...). */
function dropRules(schema: Schema, fields: readonly string[]): number {
  let dropped = 0;
  const rules = schema['x-kubernetes-validations'];
  if (rules !== undefined) {
    const kept = rules.filter((r) => !fields.some((f) => new RegExp(`\\.${f}\\b`).test(r.rule)));
    dropped += rules.length - kept.length;
    if (kept.length === 0) delete schema['x-kubernetes-validations'];
    else schema['x-kubernetes-validations'] = kept;
  }
  for (const child of [...Object.values(schema.properties ?? {}), ...(schema.items !== undefined ? [schema.items] : [])]) {
    dropped += dropRules(child, fields);
  }
  return dropped;
}

/** JSON with sorted keys: helm's toYaml reorders them. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v)
            .filter(([, x]) => x !== undefined)
            .sort(([a], [b]) => a.localeCompare(b)),
        )
      : v,
  );
}

if (mode === 'older-crds') {
  const [out] = args;
  if (out === undefined) fail('usage: older-crds <copy dir>');
  cpSync(chartDir, out, { recursive: true });
  const crdDir = join(out, 'files', 'crds');
  for (const file of readdirSync(crdDir)) {
    const path = join(crdDir, file);
    const doc = parseDocument(readFileSync(path, 'utf8'));
    // The keys' CRDs go back to the older schema; the inventory's and the issuers' (no such fields)
    // stay as they are: this operator's informers need them, and the scenario is about the keys'.
    const kind = doc.getIn(['spec', 'names', 'kind']);
    if (kind !== 'ApiKey' && kind !== 'ProjectApiKey') {
      console.log(`${file}: unchanged (the operator's ${String(kind)} informer needs it)`);
      continue;
    }
    const versions = doc.getIn(['spec', 'versions']) as { items: unknown[] };
    for (let v = 0; v < versions.items.length; v += 1) {
      const specPath = ['spec', 'versions', v, 'schema', 'openAPIV3Schema', 'properties', 'spec'];
      for (const removed of REMOVED) {
        const at = [...specPath, 'properties', ...removed];
        if (!doc.hasIn(at)) fail(`${file}: no spec.${removed.filter((p) => p !== 'properties').join('.')} to remove`);
        doc.deleteIn(at);
      }
      const spec = (doc.getIn(specPath) as { toJSON(): Schema }).toJSON();
      const dropped = dropRules(
        spec,
        REMOVED.map((r) => r[r.length - 1] ?? ''),
      );
      doc.setIn(specPath, doc.createNode(spec));
      console.log(
        `${file} ${String(doc.getIn(['spec', 'versions', v, 'name']))}: without spec.rotation, spec.usage, spec.secret.template (and ${dropped} CEL rule(s) naming them)`,
      );
    }
    writeFileSync(path, doc.toString());
  }
} else if (mode === 'rules') {
  const [rendered, out] = args;
  if (rendered === undefined || out === undefined) fail('usage: rules <PrometheusRule yaml> <rules file out>');
  interface Rule {
    alert: string;
    for?: string;
    [field: string]: unknown;
  }
  const rule = parseAllDocuments(readFileSync(rendered, 'utf8'))
    .map((d) => d.toJS() as { kind?: string; spec?: { groups: { name: string; rules: Rule[] }[] } } | null)
    .find((d) => d?.kind === 'PrometheusRule');
  if (rule?.spec === undefined) fail(`${rendered} holds no PrometheusRule`);
  const shipped = parse(readFileSync(join(chartDir, 'files', 'prometheus-rules.yaml'), 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
  const byName = new Map(shipped.groups.flatMap((g) => g.rules.map((r) => [r.alert, r] as const)));
  const changed: string[] = [];
  for (const r of rule.spec.groups.flatMap((g) => g.rules)) {
    const original = byName.get(r.alert);
    if (original === undefined) fail(`${r.alert} is not a shipped alert`);
    byName.delete(r.alert);
    if (canonical({ ...r, for: undefined }) !== canonical({ ...original, for: undefined })) fail(`${r.alert} differs from the shipped rule beyond its for`);
    if (r.for !== original.for) changed.push(`${r.alert} for ${original.for ?? 'none'} -> ${r.for ?? 'none'}`);
  }
  if (byName.size > 0) fail(`not rendered: ${[...byName.keys()].join(', ')}`);
  writeFileSync(out, stringify({ groups: rule.spec.groups }));
  console.log(`${rule.spec.groups.flatMap((g) => g.rules).length} alerts as shipped${changed.length > 0 ? `, but ${changed.join('; ')}` : ''}`);
} else {
  fail('usage: chart-variants.ts older-crds|rules ...');
}
