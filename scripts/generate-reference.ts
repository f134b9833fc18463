// Fills the generated tables of docs/reference/ from the code (scripts/reference.ts says which
// table comes from where). `npm run generate`; test/reference/reference.test.ts fails when a page is stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { fillPage, referenceBlocks, referenceFile } from './reference.ts';

for (const [path, blocks] of Object.entries(referenceBlocks())) {
  const file = referenceFile(path);
  const before = readFileSync(file, 'utf8');
  const after = fillPage(before, blocks, path);
  if (after !== before) writeFileSync(file, after);
  console.log(`${after !== before ? 'wrote' : 'unchanged'} ${path}`);
}
