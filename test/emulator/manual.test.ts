// The emulator's manual (docs/emulator.md) against the emulator itself: every route it serves (the
// public API, each /admin endpoint with an example, the console), every CLI flag, every field of the
// seed file and of a fault rule, and every fault kind is in the manual; nothing the manual names as
// a route is missing from the emulator; and every curl example of the admin API, run in the
// manual's order against a fresh emulator, is accepted and answers the fields its comment shows.
// A route, flag or field added without its documentation, or an example gone stale, fails here.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SeedSchema } from '../../src/emulator/bootstrap.ts';
import { FaultRules } from '../../src/emulator/faults.ts';
import { EMULATOR_ROUTES, type Emulator } from '../../src/emulator/server.ts';
import { keyOf, start, userId } from './harness.ts';

const manual = readFileSync(new URL('../../docs/emulator.md', import.meta.url), 'utf8');

/** `POST /api/v2/projects/:project_id/branches` as the manual writes it: `POST /projects/{project_id}/branches`. */
const documented = (method: string, template: string) => `${method} ${template.replace(/^\/api\/v2(?=\/)/, '').replace(/:(\w+)/g, '{$1}')}`;

const served = EMULATOR_ROUTES.map((r) => ({ route: documented(r.method, r.template), admin: r.template.startsWith('/admin') }));

/** The text under a `### \`METHOD /admin/...\`` heading, up to the next heading. */
function adminSection(route: string): string | undefined {
  const start = manual.indexOf(`\n### \`${route}\`\n`);
  if (start < 0) return undefined;
  const end = manual.indexOf('\n#', start + 1);
  return manual.slice(start, end < 0 ? undefined : end);
}

describe('the emulator manual (docs/emulator.md)', () => {
  it('documents every /admin endpoint under its own heading, each with a curl example of that method and path', () => {
    const admin = served.filter((s) => s.admin).map((s) => s.route);
    expect(admin.length).toBeGreaterThanOrEqual(14);
    const problems: string[] = [];
    for (const route of admin) {
      const section = adminSection(route);
      if (section === undefined) {
        problems.push(`${route}: no "### \`${route}\`" section`);
        continue;
      }
      const [method, path] = route.split(' ') as [string, string];
      // The example's URL: $A plus the path after /admin, parameters filled in (any value).
      const url = new RegExp(
        `curl [^\\n]*\\$A${path
          .slice('/admin'.length)
          .replace(/\{\w+\}/g, '[^/\\s]+')
          .replace(/[/-]/g, '\\$&')}(?=[\\s'"]|$)`,
        'm',
      );
      if (!/```sh\n/.test(section) || !url.test(section)) problems.push(`${route}: no curl example of its path`);
      else if (method !== 'GET' && !section.includes(`-X ${method}`)) problems.push(`${route}: the example does not use ${method}`);
    }
    expect(problems).toEqual([]);
  });

  it('documents every public route and the console', () => {
    const missing = served
      .filter((s) => !s.admin)
      .map((s) => s.route)
      .filter((route) => !manual.includes(`\`${route}\``));
    expect(missing).toEqual([]);
  });

  it('names no route the emulator does not serve', () => {
    const routes = new Set(served.map((s) => s.route));
    const named = [...manual.matchAll(/`(GET|POST|PUT|DELETE|PATCH) (\/[^`\s?]*)`/g)].map((m) => `${m[1]} ${m[2]}`);
    expect(named.length).toBeGreaterThan(30);
    expect(named.filter((r) => !routes.has(r))).toEqual([]);
  });

  it('documents every CLI flag of src/emulator/main.ts', () => {
    const main = readFileSync(new URL('../../src/emulator/main.ts', import.meta.url), 'utf8');
    const flags = [...main.matchAll(/^ {4}'?([a-z][a-z-]*)'?: \{ type: '(?:string|boolean)'/gm)].map((m) => m[1] ?? '');
    expect(flags).toEqual(expect.arrayContaining(['port', 'db', 'seed', 'time-scale']));
    expect(flags.filter((f) => !new RegExp(`^\\| \`--${f}[\\s\`]`, 'm').test(manual))).toEqual([]);
  });

  it('documents every field of the seed file, every field of a fault rule and every fault kind', () => {
    const seedFields = Object.entries(SeedSchema.shape).flatMap(([list, schema]) =>
      Object.keys(schema.unwrap().element.shape).map((field) => `${list}[].${field}`),
    );
    expect(seedFields.filter((f) => !manual.includes(`| \`${f}\` |`))).toEqual([]);
    const rule = FaultRules.shape.rules.element.shape;
    expect(Object.keys(rule).filter((f) => !manual.includes(`| \`${f}\` |`))).toEqual([]);
    expect(rule.kind.options.filter((k) => !manual.includes(`| \`${k}\` |`))).toEqual([]);
  });
});

/** A curl command of the manual as a request: method, URL (after $A and $BOB), JSON body. */
interface Example {
  command: string;
  method: string;
  url: string;
  body?: string;
  shown: string[];
}

/** The curl commands of the admin examples, with the field names of the answer each comment shows. */
function examples(vars: Record<string, string>): Example[] {
  const admin = manual.slice(manual.indexOf('\n## The admin API\n'), manual.indexOf('\n## Fault rules\n'));
  return [...admin.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((block) => {
    const text = block[1] ?? '';
    const shown = [...text.matchAll(/^# .*$/gm)].flatMap((line) => [...line[0].matchAll(/"(\w+)":/g)].map((m) => m[1] ?? ''));
    const command = text
      .replace(/^#.*$/gm, '')
      .replace(/\\\n\s*/g, ' ')
      .trim();
    // Words of a shell command line: single-quoted strings kept whole (they may span lines), a pipe ends it.
    const words: string[] = [];
    for (const m of command.matchAll(/'([^']*)'|(\|)|(\S+)/g)) {
      if (m[2] !== undefined) break;
      words.push(m[1] ?? (m[3] ?? '').replace(/\$(\w+)/g, (_, name: string) => vars[name] ?? `$${name}`));
    }
    if (words[0] !== 'curl') return [];
    const at = (flag: string) => words[words.indexOf(flag) + 1];
    const url = words.find((w) => w.startsWith('http'));
    if (url === undefined) throw new Error(`no URL in ${command}`);
    return [{ command, method: words.includes('-X') ? (at('-X') ?? 'GET') : 'GET', url, ...(words.includes('-d') ? { body: at('-d') ?? '' } : {}), shown }];
  });
}

describe('the examples of the admin API in the manual', () => {
  let emu: Emulator;

  beforeAll(async () => {
    emu = await start();
  });

  afterAll(async () => {
    await emu.close();
  });

  it('each run in order against a fresh emulator: accepted, and answering the fields its comment shows', async () => {
    // One request of the public API first, for the request counts to show.
    expect((await fetch(`${emu.baseUrl}/auth`, { headers: { authorization: `Bearer ${keyOf(emu, 'alice')}` } })).status).toBe(200);
    const runs = examples({ A: emu.adminUrl, BOB: userId(emu, 'bob') });
    expect(runs.length).toBeGreaterThanOrEqual(14);
    const problems: string[] = [];
    for (const run of runs) {
      const res = await fetch(run.url, {
        method: run.method,
        headers: run.body !== undefined ? { 'content-type': 'application/json' } : {},
        ...(run.body !== undefined ? { body: run.body } : {}),
      });
      const text = await res.text();
      if (res.status !== 200 && res.status !== 201) problems.push(`${run.command}: HTTP ${res.status} ${text.slice(0, 200)}`);
      const missing = run.shown.filter((field) => !text.includes(`"${field}":`));
      if (missing.length > 0) problems.push(`${run.command}: the answer has no ${missing.join(', ')}`);
    }
    expect(problems).toEqual([]);
  });
});
