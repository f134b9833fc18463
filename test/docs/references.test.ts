// The project's own documents are the only ones its code and docs may cite: docs/design.md (by
// section number) and docs/platform-api.md (by section name). This suite reads every text file of
// the repository and fails on a citation of a document outside it, on a section number or name
// that the cited page does not have, and on a link to an anchor that does not exist in
// docs/design.md, docs/platform-api.md or docs/emulator.md.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from '@jest/globals';

const ROOT = new URL('../..', import.meta.url).pathname;
const SKIP = new Set(['node_modules', '.cache', '.git', 'dist', 'coverage']);
const TEXT = /\.(ts|js|md|ya?ml|sh|json|txt)$|^Dockerfile$/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (SKIP.has(name)) return [];
    const path = join(dir, name);
    const stat = statSync(path, { throwIfNoEntry: false });
    if (stat === undefined) return [];
    if (stat.isDirectory()) return files(path);
    return TEXT.test(name) && name !== 'package-lock.json' ? [path] : [];
  });
}

/** Each file's text with comment continuations joined, so a citation split over two lines reads as one. */
const corpus = files(ROOT).map((path) => ({
  file: relative(ROOT, path),
  text: readFileSync(path, 'utf8').replace(/\s*\n\s*(?:\/\/|\*|#|--)?\s*/g, ' '),
}));

const doc = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const PAGES = ['docs/design.md', 'docs/platform-api.md', 'docs/emulator.md'];
const headings = (text: string) => [...text.matchAll(/^#{2,6} (.+)$/gm)].map((m) => (m[1] ?? '').trim());

/** GitHub's anchor of a heading. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

const designSections = new Set(
  headings(doc('docs/design.md'))
    .map((h) => /^(\d+(?:\.\d+)?)\.? /.exec(h)?.[1])
    .filter((n) => n !== undefined),
);
const platformSections = new Set(headings(doc('docs/platform-api.md')));

describe('references into docs/', () => {
  it('cite no document outside the repository', () => {
    // Spelled apart, so that this file does not cite them itself.
    const outside = [
      ['DESIGN', '.md'],
      ['STYLE', '.md'],
      ['..', '/shared'],
    ].map((parts) => parts.join(''));
    const found = corpus.flatMap(({ file, text }) => outside.filter((name) => text.includes(name)).map((name) => `${file}: ${name}`));
    expect(found).toEqual([]);
  });

  it('name only sections docs/design.md has', () => {
    const cited = corpus.flatMap(({ file, text }) =>
      [...text.matchAll(/design\.md(?:\]\([^)]*\))? sections? ((?:\d+(?:\.\d+)?(?:(?:,| to| and) )?)+)/g)].flatMap((m) =>
        [...(m[1] ?? '').matchAll(/\d+(?:\.\d+)?/g)].map((n) => ({ file, section: n[0] })),
      ),
    );
    expect(cited.length).toBeGreaterThan(40);
    expect(cited.filter((c) => !designSections.has(c.section)).map((c) => `${c.file}: section ${c.section}`)).toEqual([]);
  });

  it('name only sections docs/platform-api.md has', () => {
    const cited = corpus.flatMap(({ file, text }) => {
      const names: string[] = [];
      // The page's name, then quoted section names (in parentheses or not, a number of a list after one).
      for (const m of text.matchAll(/platform-api\.md \(?((?:"[^"]+"(?: \d)?(?:, |; )?)+)/g)) {
        for (const q of (m[1] ?? '').matchAll(/"([^"]+)"/g)) names.push(...(q[1] ?? '').split(' › '));
      }
      // The page's name, a comma, then a path of sections joined by ›; of a list joined by /, the first.
      for (const m of text.matchAll(/platform-api\.md, ([A-Z][\w -]*(?:\([\w ]+\))?(?: › [A-Z][\w -]*(?:\([\w ]+\))?)*)/g)) {
        for (const part of (m[1] ?? '').split(' › ')) names.push(part.split(' / ')[0]?.trim() ?? '');
      }
      return names.map((section) => ({ file, section }));
    });
    expect(cited.length).toBeGreaterThan(40);
    expect(cited.filter((c) => !platformSections.has(c.section)).map((c) => `${c.file}: "${c.section}"`)).toEqual([]);
  });

  it('link only to anchors that exist', () => {
    const anchors = new Map(PAGES.map((path) => [path.slice('docs/'.length), new Set(headings(doc(path)).map(slug))]));
    const broken = corpus.flatMap(({ file, text }) =>
      [...text.matchAll(/\]\((?:[./\w-]*\/)?(design|platform-api|emulator)\.md#([\w-]+)\)/g)]
        .filter((m) => anchors.get(`${m[1] ?? ''}.md`)?.has(m[2] ?? '') !== true)
        .map((m) => `${file}: ${m[0]}`),
    );
    const own = PAGES.flatMap((path) =>
      [...doc(path).matchAll(/\]\(#([\w-]+)\)/g)]
        .filter((m) => anchors.get(path.slice('docs/'.length))?.has(m[1] ?? '') !== true)
        .map((m) => `${path}: ${m[0]}`),
    );
    expect([...broken, ...own]).toEqual([]);
  });
});
