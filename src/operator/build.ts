// The operator's version and revision, as `npm run build` stamped them into dist/operator/build.json
// (scripts/stamp-build.ts: $VERSION, else package.json's version; $REVISION, else the git commit).
// The image's build passes its VERSION and REVISION build arguments (Dockerfile). build_info carries
// them, and `--version` prints them. Run from src/ (npm run operator, the tests), nothing was
// stamped: version "dev".
import { readFileSync } from 'node:fs';

export interface BuildInfo {
  version: string;
  revision: string;
}

export const BUILD_FILE = 'build.json';

function read(): BuildInfo {
  try {
    const stamped = JSON.parse(readFileSync(new URL(`./${BUILD_FILE}`, import.meta.url), 'utf8')) as Partial<BuildInfo>;
    const text = (v: unknown): string | undefined => (typeof v === 'string' && /^[\w.+-]{1,64}$/.test(v) ? v : undefined);
    return { version: text(stamped.version) ?? 'unknown', revision: text(stamped.revision) ?? 'unknown' };
  } catch {
    return { version: 'dev', revision: 'unknown' };
  }
}

export const BUILD: BuildInfo = read();
