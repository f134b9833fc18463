// Writes crds/*.yaml from the zod schemas (src/operator/resources/schema.ts). `npm run generate`;
// test/operator/resources/crd.test.ts fails when the checked-in files are stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CRD_FILES, renderCrdYaml } from '../src/operator/resources/crd.ts';
import type { KindName } from '../src/operator/resources/schema.ts';

const crdsDir = fileURLToPath(new URL('../crds/', import.meta.url));
for (const kind of Object.keys(CRD_FILES) as KindName[]) {
  const file = `${crdsDir}${CRD_FILES[kind]}`;
  writeFileSync(file, renderCrdYaml(kind));
  console.log(`wrote ${file}`);
}
