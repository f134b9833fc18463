import { describe, expect, it } from '@jest/globals';
import { intern, internedCount, internShared, sharedCount } from '../../../src/operator/runtime/intern.ts';

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

  it('shares one frozen object per signature, and stops keeping new ones at its bound', () => {
    const before = sharedCount();
    let made = 0;
    const make = (): { list: { n: number }[] } => {
      made++;
      return { list: [{ n: 1 }] };
    };
    const a = internShared('test a', make);
    expect(internShared('test a', make)).toBe(a);
    expect(made).toBe(1);
    expect(Object.isFrozen(a) && Object.isFrozen(a.list) && Object.isFrozen(a.list[0])).toBe(true);
    expect(sharedCount()).toBe(before + 1);
    // A signature too long to be worth keeping: made (and frozen) every time, never kept.
    const long = `test ${'x'.repeat(2_000)}`;
    expect(internShared(long, make)).not.toBe(internShared(long, make));
    expect(sharedCount()).toBe(before + 1);
    for (let i = 0; sharedCount() < 4_096; i++) internShared(`test fill ${i}`, () => ({ i }));
    const x = internShared('test one more', () => ({ i: -1 }));
    expect(internShared('test one more', () => ({ i: -1 }))).not.toBe(x);
    expect(Object.isFrozen(x)).toBe(true);
    expect(sharedCount()).toBe(4_096);
  });
});
