// The reference in docs/ is made from the code (scripts/reference.ts): this suite fails when a
// generated table differs from what the code says (run `npm run generate`), when a reason or an
// event the catalog lists is never emitted by the code, when the code records an event the catalog
// does not list, and when the README (the front page) outgrows its shape or links nowhere.
import { describe, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fillPage, referenceBlocks } from '../../scripts/reference.ts';
import { EVENTS, REASONS } from '../../src/operator/keys/status/catalog.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const keysDir = join(root, 'src/operator/keys');
/**
 * The key domain's source, without what only lists reasons: the catalog, and in conditions.ts the
 * union, its run-time copy and shownReason (the rest of conditions.ts writes conditions).
 */
const emitting = readdirSync(keysDir, { recursive: true, encoding: 'utf8' })
  .filter((f) => f.endsWith('.ts') && f.split('/').pop() !== 'catalog.ts')
  .map((f) => {
    let text = readFileSync(join(keysDir, f), 'utf8');
    if (f.split('/').pop() === 'conditions.ts') {
      const cut = (from: string, to: string): void => {
        const start = text.indexOf(from);
        const end = text.indexOf(to, start);
        expect([from, start >= 0 && end > start]).toEqual([from, true]);
        text = text.slice(0, start) + text.slice(end + to.length);
      };
      cut('export type Reason =', ';\n');
      cut('export type InternalReason', ';\n');
      cut('export function shownReason', '\n}\n');
      cut('const REASONS: Record<Reason, true> = {', '\n};\n');
    }
    return { file: f, text };
  });

describe('the generated reference (docs/reference/)', () => {
  it.each(Object.entries(referenceBlocks()))('%s holds the tables the code makes (npm run generate)', (path, blocks) => {
    const text = readFileSync(join(root, path), 'utf8');
    expect(fillPage(text, blocks, path)).toBe(text);
  });

  it("lists only reasons the code emits: each is written as a condition's or an event's reason somewhere", () => {
    const neverWritten = Object.keys(REASONS).filter((reason) => !emitting.some(({ text }) => text.includes(`'${reason}'`)));
    expect(neverWritten).toEqual([]);
    // The reasons of decisions that reach no user are not in the union (InternalReason).
    for (const internal of ['Adopting', 'Recovering', 'Deleted', 'Retained', 'NoKey']) expect(Object.keys(REASONS)).not.toContain(internal);
  });

  it('lists every event the code records, and each it lists is recorded', () => {
    const recorded = new Set<string>();
    for (const { text } of emitting) {
      for (const call of text.matchAll(/events\.record\(([^;]*?)\);/gs)) {
        // The reason is the third argument; a literal one, or each literal of a ternary.
        const args = (call[1] ?? '').split(/,(?![^(]*\))/).map((a) => a.trim());
        for (const literal of (args[2] ?? '').matchAll(/'(\w+)'/g)) recorded.add(literal[1] as string);
      }
    }
    expect(recorded.size).toBeGreaterThan(10);
    expect([...recorded].filter((reason) => !Object.hasOwn(EVENTS, reason)).sort()).toEqual([]);
    const neverRecorded = Object.keys(EVENTS).filter((reason) => !emitting.some(({ text }) => text.includes(`'${reason}'`)));
    expect(neverRecorded).toEqual([]);
  });
});

describe('the README, a front page', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');

  it('is under 200 lines, with the two commands near the top, and CI runs its test command', () => {
    expect(readme.split('\n').length).toBeLessThan(200);
    const block = /## Two commands[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    const commands = block
      .split('\n')
      .map((l) => l.replace(/\s+#.*$/, '').trim())
      .filter((l) => l !== '');
    expect(commands).toEqual(['npm ci && npm run demo', 'npm ci && npm test']);
    expect(readme.indexOf('## Two commands')).toBeLessThan(readme.split('\n').slice(0, 15).join('\n').length);
    expect(readFileSync(join(root, '.ci/run'), 'utf8').split('\n')).toContain(commands[1]);
  });

  it('links every reference page, and every page of the reference is there', () => {
    const pages = readdirSync(join(root, 'docs/reference'))
      .filter((f) => f.endsWith('.md'))
      .sort();
    expect(pages).toEqual([
      'annotations.md',
      'conditions.md',
      'flags.md',
      'helm-values.md',
      'metrics.md',
      'probes-and-failover.md',
      'spec.md',
      'status.md',
      'troubleshooting.md',
    ]);
    for (const page of pages) expect(readme).toContain(`](docs/reference/${page})`);
  });

  it('links only files that exist, as do the pages of docs/', () => {
    const files = [
      'README.md',
      ...readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const broken: string[] = [];
    for (const file of files) {
      // Links outside code blocks and code spans.
      const text = readFileSync(join(root, file), 'utf8')
        .replace(/```[\s\S]*?```/g, '')
        .replace(/`[^`\n]*`/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (target === undefined || /^(https?:|mailto:|#)/.test(target)) continue;
        const path = resolve(join(root, dirname(file)), target.replace(/#.*$/, ''));
        if (!existsSync(path)) broken.push(`${file}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
