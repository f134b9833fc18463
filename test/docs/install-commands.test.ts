// One CRD install command everywhere a person reads one: the README, docs/, the manifests'
// comments, examples/ and the chart's NOTES all print `kubectl apply --server-side -f crds/`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from '@jest/globals';

const ROOT = new URL('../..', import.meta.url).pathname;
const COMMAND = 'kubectl apply --server-side -f crds/';

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(md|ya?ml|txt)$/.test(name) ? [path] : [];
  });
}

describe('the CRD install command', () => {
  it('is the same in every document and manifest comment', () => {
    const read = ['README.md', 'docs', 'deploy', 'examples'].flatMap((p) => (statSync(join(ROOT, p)).isDirectory() ? files(join(ROOT, p)) : [join(ROOT, p)]));
    const lines = read.flatMap((path) =>
      readFileSync(path, 'utf8')
        .split('\n')
        .filter((line) => /kubectl apply\b[^`]*\bcrds\/?(?:\s|`|$)/.test(line))
        .map((line) => ({ file: relative(ROOT, path), line: line.trim() })),
    );
    // Found where the install is documented at least.
    expect(lines.map((l) => l.file)).toEqual(expect.arrayContaining(['README.md', 'docs/install.md']));
    expect(lines.filter((l) => !l.line.includes(COMMAND))).toEqual([]);
  });
});
