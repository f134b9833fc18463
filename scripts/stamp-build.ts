// `npm run build`'s last step: writes dist/operator/build.json, the version and revision the
// operator reports (build_info, --version; src/operator/build.ts). $VERSION and $REVISION win (the
// image's build arguments); else package.json's version and the git commit, when there is one.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const out = process.argv[2] ?? new URL('dist/operator/build.json', root).pathname;
const packageVersion = (JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version: string }).version;
const fromEnv = (name: string): string | undefined => (process.env[name] !== undefined && process.env[name] !== '' ? process.env[name] : undefined);
function gitRevision(): string {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}
const build = { version: fromEnv('VERSION') ?? packageVersion, revision: fromEnv('REVISION') ?? gitRevision() };
writeFileSync(out, `${JSON.stringify(build)}\n`);
