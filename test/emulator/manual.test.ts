// The emulator's manual (docs/emulator.md) against the emulator itself: every route it serves (the
// public API, each /admin endpoint with an example, the console), every CLI flag, every field of the
// seed file and of a fault rule, and every fault kind is in the manual; and nothing the manual names
// as a route is missing from the emulator. A route, flag or field added without its documentation
// fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { SeedSchema } from '../../src/emulator/bootstrap.ts';
import { FaultRules } from '../../src/emulator/faults.ts';
import { EMULATOR_ROUTES } from '../../src/emulator/server.ts';

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
      const url = new RegExp(`curl [^\\n]*\\$A${path.slice('/admin'.length).replace(/\{\w+\}/g, '[^/\\s]+').replace(/[/-]/g, '\\$&')}(?=[\\s'"]|$)`, 'm');
      if (!/```sh\n/.test(section) || !url.test(section)) problems.push(`${route}: no curl example of its path`);
      else if (method !== 'GET' && !section.includes(`-X ${method}`)) problems.push(`${route}: the example does not use ${method}`);
    }
    expect(problems).toEqual([]);
  });

  it('documents every public route and the console', () => {
    const missing = served.filter((s) => !s.admin).map((s) => s.route).filter((route) => !manual.includes(`\`${route}\``));
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
    const seedFields = Object.entries(SeedSchema.shape).flatMap(([list, schema]) => Object.keys(schema.unwrap().element.shape).map((field) => `${list}[].${field}`));
    expect(seedFields.filter((f) => !manual.includes(`| \`${f}\` |`))).toEqual([]);
    const rule = FaultRules.shape.rules.element.shape;
    expect(Object.keys(rule).filter((f) => !manual.includes(`| \`${f}\` |`))).toEqual([]);
    expect(rule.kind.options.filter((k) => !manual.includes(`| \`${k}\` |`))).toEqual([]);
  });
});
