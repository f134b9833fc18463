// Jest transformer that runs our TypeScript the way Node runs it: Node's own type stripping
// (module.stripTypeScriptTypes), which blanks the types in place, so line and column numbers in
// stack traces stay exact without a source map. Type checking is `npm run typecheck` (tsc).
import { stripTypeScriptTypes } from 'node:module';

function process(sourceText, sourcePath) {
  return { code: stripTypeScriptTypes(sourceText, { mode: 'strip', sourceUrl: sourcePath }) };
}

export default { process, processAsync: async (...args) => process(...args) };
