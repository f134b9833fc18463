import { describe, expect, it } from '@jest/globals';
import { intern, internedCount } from '../../../src/operator/runtime/intern.ts';

describe('intern', () => {
  it('returns the value (interned or not), keeps one entry per distinct string, and stops growing at its bound', () => {
    const before = internedCount();
    expect(intern('ProjectApiKey')).toBe('ProjectApiKey');
    expect(intern(['Project', 'ApiKey'].join(''))).toBe('ProjectApiKey');
    expect(intern(undefined)).toBeUndefined();
    const long = 'x'.repeat(300);
    expect(intern(long)).toBe(long);
    expect(internedCount()).toBe(before + 1);
    // A tenant writing ever new values cannot grow the table without end.
    for (let i = 0; i < 10_000; i++) expect(intern(`project-${i}`)).toBe(`project-${i}`);
    expect(internedCount()).toBe(4_096);
    expect(intern('one more')).toBe('one more');
    expect(internedCount()).toBe(4_096);
  });
});
