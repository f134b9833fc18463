// No test puts an upper bound on elapsed wall-clock time (docs/testing.md, "Waiting on events, not on
// the clock"): eslint.config.js's rule testing/no-wall-clock-upper-bound refuses it everywhere but
// bench/, and `npm run lint` runs it. Here the rule runs through ESLint, with the repository's own
// configuration, on samples: the forms it must refuse, and what it must let through.
import { describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Linter } from 'eslint';

const root = fileURLToPath(new URL('../..', import.meta.url));
const RULE = 'testing/no-wall-clock-upper-bound';
const { default: config } = (await import(new URL('../../eslint.config.js', import.meta.url).href)) as { default: Linter.Config[] };
const linter = new Linter({ cwd: root });

/** The lines the rule refuses in `code`, linted as the file `path` of the repository; any parse error fails. */
function refused(code: string, path = 'test/operator/sample.test.ts'): number[] {
  const messages = linter.verify(code, config, join(root, path));
  const fatal = messages.filter((m) => m.fatal === true || m.ruleId === null);
  if (fatal.length > 0) throw new Error(`the sample does not parse: ${fatal.map((m) => m.message).join('; ')}`);
  return messages.filter((m) => m.ruleId === RULE).map((m) => m.line);
}

const header = "import { expect } from '@jest/globals';\ndeclare const t0: number;\ndeclare const LIMIT: number;\n";
/** One assertion per line after the header (line 4 on). */
const sample = (...lines: string[]): string => header + lines.join('\n') + '\n';

describe('the rule against upper bounds on elapsed wall-clock time', () => {
  it('refuses an upper bound on Date.now(), performance.now() or process.hrtime(), directly or through the variables computed from them', () => {
    const code = sample(
      'expect(Date.now() - t0).toBeLessThan(LIMIT);',
      'const started = performance.now();',
      'const elapsed = performance.now() - started;',
      'expect(elapsed).toBeLessThanOrEqual(LIMIT);',
      'const [s, n] = process.hrtime();',
      'const spent = s * 1e3 + n / 1e6;',
      'expect(spent).toBeLessThan(LIMIT);',
      'const at = process.hrtime.bigint();',
      'expect(Number(process.hrtime.bigint() - at) / 1e6).toBeLessThan(LIMIT);',
      'const back = Date.now();',
      'const repaired = Date.now();',
      'expect(repaired - back).toBeLessThanOrEqual(LIMIT);',
      'const times: number[] = [];',
      'times.push(performance.now());',
      'expect(times[1]! - times[0]!).toBeLessThan(LIMIT);',
      'expect(Math.round((Date.now() - t0) / 1000)).not.toBeGreaterThan(LIMIT);',
      'expect(new Date().getTime() - t0).not.toBeGreaterThanOrEqual(LIMIT);',
      'for (const t of times) expect(t - t0).toBeLessThan(LIMIT);',
    );
    expect(refused(code)).toEqual([4, 7, 10, 12, 15, 18, 19, 20, 21]);
  });

  it('refuses an upper bound on a parameter named as a duration, whose value it cannot follow', () => {
    const code = sample(
      'export function check(ms: number, tookMs: number, waitDuration: number): void {',
      '  expect(ms).toBeLessThan(LIMIT);',
      '  expect(tookMs).toBeLessThanOrEqual(LIMIT);',
      '  expect(waitDuration).toBeLessThan(LIMIT);',
      '}',
    );
    expect(refused(code)).toEqual([5, 6, 7]);
  });

  it('lets through lower bounds, counts, sizes and a manual clock', () => {
    const code = sample(
      'const started = performance.now();',
      'expect(performance.now() - started).toBeGreaterThanOrEqual(LIMIT);',
      'expect(Date.now() - t0).toBeGreaterThan(LIMIT);',
      'expect(Date.now() - t0).not.toBeLessThan(LIMIT);',
      'const times: number[] = [performance.now()];',
      'expect(times.length).toBeLessThanOrEqual(LIMIT);',
      'const requests = 3;',
      'expect(requests).toBeLessThanOrEqual(Math.ceil((Date.now() - t0) / LIMIT) + 1);',
      'const maxRss = 100;',
      'expect(maxRss).toBeLessThan(LIMIT);',
      'const clock = { t: 0, now: () => clock.t, advance: (ms: number) => void (clock.t += ms) };',
      'const from = clock.now();',
      'clock.advance(5);',
      'expect(clock.now() - from).toBeLessThan(LIMIT);',
      'expect(Date.now() - t0).toBe(0);',
      'const asked: number[] = [clock.now()];',
      'for (const ms of asked) expect(ms).toBeLessThanOrEqual(LIMIT);',
      'const grant = { at: clock.now() };',
      'expect(grant.at - from).toBeLessThanOrEqual(LIMIT);',
    );
    expect(refused(code)).toEqual([]);
  });

  it('applies to test/ and chaos/, and not to bench/, which measures speed', () => {
    const code = sample('expect(Date.now() - t0).toBeLessThan(LIMIT);');
    expect(refused(code, 'test/operator/runtime/sample.test.ts')).toEqual([4]);
    expect(refused(code, 'chaos/sample.ts')).toEqual([4]);
    expect(refused(code, 'bench/sample.ts')).toEqual([]);
  });
});
