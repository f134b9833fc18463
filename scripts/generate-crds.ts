// Writes crds/*.yaml from the zod schemas (src/operator/resources/schema.ts, inventory.ts), and the same files
// into the Helm chart's files/crds/ (templates/crds.yaml renders them, so upgrades carry them). `npm run generate`;
// test/operator/resources/crd.test.ts and the chart test fail when a checked-in copy is stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CRD_FILES, renderCrdYaml, type CrdKind } from '../src/operator/resources/crd.ts';

const dirs = ['../crds/', '../deploy/helm/neon-key-operator/files/crds/'].map((d) => fileURLToPath(new URL(d, import.meta.url)));
for (const kind of Object.keys(CRD_FILES) as CrdKind[]) {
  const yaml = renderCrdYaml(kind);
  for (const dir of dirs) {
    const file = `${dir}${CRD_FILES[kind]}`;
    writeFileSync(file, yaml);
    console.log(`wrote ${file}`);
  }
}
