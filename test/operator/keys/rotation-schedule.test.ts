// When a key rotates (src/operator/keys/rotation-schedule.ts): the interval, the window
// in a time zone (wrapping midnight, days of the week, DST), the request token.
import { describe, expect, it } from '@jest/globals';
import { gracePeriods, nextInWindow, requestToken, schedule } from '../../../src/operator/keys/rotation-schedule.ts';

const utc = (s: string): number => Date.parse(s);

describe('rotation schedule', () => {
  it('grace periods default to 10m and 24h, and max is never below grace', () => {
    expect(gracePeriods(undefined)).toEqual({ graceMs: 600_000, maxGraceMs: 86_400_000 });
    expect(gracePeriods({ gracePeriod: '2h', maxGracePeriod: '1h' })).toEqual({ graceMs: 7_200_000, maxGraceMs: 7_200_000 });
  });

  it("a gracePeriod under the operator's floor (1m unless --min-rotation-grace) is raised to it, and said so", () => {
    expect(gracePeriods({ gracePeriod: '1m' })).toEqual({ graceMs: 60_000, maxGraceMs: 86_400_000 });
    const raised = gracePeriods({ gracePeriod: '0s', maxGracePeriod: '30s' });
    expect(raised).toMatchObject({ graceMs: 60_000, maxGraceMs: 60_000 });
    expect(raised.graceError).toBe(
      "spec.rotation.gracePeriod 0s is under the operator's minimum of 60s (--min-rotation-grace): a replaced key is kept for the minimum; set gracePeriod to at least that",
    );
    expect(gracePeriods({ gracePeriod: '5s' }, 1_000)).toEqual({ graceMs: 5_000, maxGraceMs: 86_400_000 });
    expect(gracePeriods({ gracePeriod: '500ms' }, 1_000).graceMs).toBe(1_000);
  });

  it('is due one interval after the key was born; without interval, never', () => {
    expect(schedule({ interval: '720h' }, utc('2026-01-01T00:00:00Z'), 0).nextAt).toBe(utc('2026-01-31T00:00:00Z'));
    expect(schedule({ gracePeriod: '1m' }, utc('2026-01-01T00:00:00Z'), 0)).toEqual({});
    expect(schedule(undefined, 0, 0)).toEqual({});
  });

  it('waits for the window: same day, next day, or now when inside', () => {
    const window = { start: '02:00', end: '05:00' };
    expect(nextInWindow(window, utc('2026-11-23T01:00:00Z'))).toBe(utc('2026-11-23T02:00:00Z'));
    expect(nextInWindow(window, utc('2026-11-23T03:17:42Z'))).toBe(utc('2026-11-23T03:17:42Z'));
    expect(nextInWindow(window, utc('2026-11-23T05:00:00Z'))).toBe(utc('2026-11-24T02:00:00Z'));
  });

  it('a window wrapping midnight belongs to the day it starts', () => {
    // Friday 22:00 to Saturday 02:00, only windows starting on a Friday.
    const window = { start: '22:00', end: '02:00', daysOfWeek: ['Fri' as const] };
    expect(nextInWindow(window, utc('2026-11-23T12:00:00Z'))).toBe(utc('2026-11-27T22:00:00Z')); // Mon -> Fri 22:00
    expect(nextInWindow(window, utc('2026-11-28T01:30:00Z'))).toBe(utc('2026-11-28T01:30:00Z')); // Sat 01:30: Friday's window
    expect(nextInWindow(window, utc('2026-11-29T01:30:00Z'))).toBe(utc('2026-12-04T22:00:00Z')); // Sun 01:30: Saturday's, not allowed
  });

  it('reads the window in its time zone, across a DST change', () => {
    const window = { start: '02:30', end: '04:00', timeZone: 'Europe/Berlin' };
    // 2026-03-29: Berlin jumps from 02:00 to 03:00, so 02:30 does not exist. The step of 3h30 from
    // 23:00 local lands on 03:30 local (01:30Z): inside the window that day, as it must be.
    expect(nextInWindow(window, utc('2026-03-28T22:00:00Z'))).toBe(utc('2026-03-29T01:30:00Z'));
    // 2026-10-25: 02:30 happens twice; the first one (00:30Z) is taken.
    expect(nextInWindow(window, utc('2026-10-24T22:00:00Z'))).toBe(utc('2026-10-25T00:30:00Z'));
    // Winter: 02:30 Berlin is 01:30Z.
    expect(nextInWindow(window, utc('2026-11-23T00:00:00Z'))).toBe(utc('2026-11-23T01:30:00Z'));
  });

  it('an unknown time zone is an error value, not an exception', () => {
    const result = schedule({ interval: '1h', window: { start: '02:00', end: '03:00', timeZone: 'Mars/Olympus' } }, 0, 0);
    expect(result.nextAt).toBeUndefined();
    expect(result.error).toContain('Mars/Olympus');
  });

  it('keeps short request tokens and digests long ones', () => {
    expect(requestToken('1700000000')).toBe('1700000000');
    expect(requestToken(undefined)).toBeUndefined();
    expect(requestToken('')).toBeUndefined();
    expect(requestToken('x'.repeat(100))).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});
