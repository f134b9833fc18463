// Go durations (src/operator/go-duration.ts): the one grammar of the operator's flags, the CRDs'
// duration fields and the chart's values. Cases from Go's own time.ParseDuration tests
// (src/time/time_test.go), without the signed ones.
import { describe, expect, it } from '@jest/globals';
import { GO_DURATION_PATTERN, GO_ZERO_DURATION_SOURCE, parseGoDuration, parseGoDurationNs } from '../../../src/operator/go-duration.ts';

describe('Go durations', () => {
  it.each([
    ['0', 0],
    ['5s', 5_000],
    ['30s', 30_000],
    ['1478s', 1_478_000],
    ['5.0s', 5_000],
    ['5.6s', 5_600],
    ['5.s', 5_000],
    ['.5s', 500],
    ['1.0s', 1_000],
    ['1.00s', 1_000],
    ['1.004s', 1_004],
    ['1.0040s', 1_004],
    ['100.00100s', 100_001],
    ['10ns', 0.00001],
    ['11us', 0.011],
    ['12\u00b5s', 0.012],
    ['12\u03bcs', 0.012],
    ['13ms', 13],
    ['14s', 14_000],
    ['15m', 900_000],
    ['16h', 57_600_000],
    ['3h30m', 12_600_000],
    ['10.5s4m', 250_500],
    ['1h30m', 5_400_000],
    ['720h', 2_592_000_000],
    ['2h45m30s', 9_930_000],
    ['1m0s', 60_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseGoDuration(text)).toBeCloseTo(ms, 9);
  });

  it.each([
    '',
    '3',
    '-',
    's',
    '.',
    '-.',
    '.s',
    '+.s',
    '-1s',
    '+1s',
    '1d',
    '1 h',
    'h',
    '1H',
    '1e3s',
    'P1D',
    '1h-5m',
    ' 1s',
    '1s ',
    '0s0',
    '00',
    // Go refuses what overflows an int64 of nanoseconds (about 292 years).
    '9223372036854775808ns',
    '2562048h',
    '9223372036s855ms',
  ])('%j is not one', (text) => {
    expect(parseGoDuration(text)).toBeUndefined();
  });

  it('is exact in nanoseconds up to the int64 bound, as Go', () => {
    expect(parseGoDurationNs('9223372036854775807ns')).toBe(9_223_372_036_854_775_807n);
    expect(parseGoDurationNs('2562047h')).toBe(2_562_047n * 3_600_000_000_000n);
    expect(parseGoDurationNs('1.000000001s')).toBe(1_000_000_001n);
  });

  it('names the zero durations: what a positive duration refuses', () => {
    const zero = new RegExp(`^(${GO_ZERO_DURATION_SOURCE})$`);
    for (const text of ['0', '0s', '0.0h', '.0m', '0m0s', '00ms']) {
      expect([text, GO_DURATION_PATTERN.test(text), zero.test(text), parseGoDuration(text)]).toEqual([text, true, true, 0]);
    }
    for (const text of ['1s', '0.1s', '0m1s', '.001ms', '1ns']) {
      expect([text, zero.test(text), (parseGoDuration(text) ?? 0) > 0]).toEqual([text, false, true]);
    }
  });
});
