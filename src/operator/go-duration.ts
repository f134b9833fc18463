// Go durations (`90s`, `10m`, `1h30m`, `1.5h`), the one grammar of every duration the operator
// reads: its flags, the CRDs' fields (spec.rotation.*, spec.usage.unusedAfter, whose CEL rules read
// them with duration()) and the Helm chart's values (values.schema.json, test/deploy/chart.test.ts
// holds it to this). It is Go's time.ParseDuration, as Kubernetes reads a metav1.Duration, without
// the sign: a sequence of decimal numbers (`1`, `1.5`, `1.`, `.5`), each with a unit (ns, us, µs,
// μs, ms, s, m, h), or `0` alone. Like Go, a duration past 2^63-1 nanoseconds (about 292 years)
// is refused.
//
// The patterns are built from strings with the non-ASCII units escaped: esbuild keeps non-ASCII
// characters of regular expression literals, and one non-ASCII character in the operator's bundle
// makes V8 hold the bundle's whole source at two bytes per character, 4 MiB more heap (Dockerfile,
// test/deploy/image.test.ts).

/** The units, longest first where one is a prefix of another (ms before m). */
export const GO_DURATION_UNITS = 'ns|us|\u00b5s|\u03bcs|ms|s|m|h';

/** The grammar as a regular expression source without anchors (for JSON schema and CRD patterns). */
export const GO_DURATION_SOURCE = `0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(${GO_DURATION_UNITS}))+`;

/** A whole string in the grammar. */
export const GO_DURATION_PATTERN = new RegExp(`^(${GO_DURATION_SOURCE})$`);

/** Durations of the grammar that are zero (`0`, `0s`, `0.0h`, `0m0s`): refused where a positive one is needed. */
export const GO_ZERO_DURATION_SOURCE = `0|((0+(\\.0*)?|\\.0+)(${GO_DURATION_UNITS}))+`;

const PART = new RegExp(`([0-9]*(?:\\.[0-9]*)?)(${GO_DURATION_UNITS})`, 'g');
const UNIT_NS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  '\u00b5s': 1_000n,
  '\u03bcs': 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};
const MAX_NS = (1n << 63n) - 1n;

/** A Go duration in nanoseconds (exact, as Go computes it); undefined when it is not one. */
export function parseGoDurationNs(text: string): bigint | undefined {
  if (!GO_DURATION_PATTERN.test(text)) return undefined;
  if (text === '0') return 0n;
  let total = 0n;
  for (const [, amount = '', unit = ''] of text.matchAll(PART)) {
    const [whole = '', fraction = ''] = amount.split('.');
    const scale = UNIT_NS[unit] ?? 0n;
    // Go: the whole part times the unit must not overflow; the fraction is scaled and truncated.
    let ns = BigInt(whole === '' ? '0' : whole) * scale;
    if (fraction !== '') ns += (BigInt(fraction) * scale) / 10n ** BigInt(fraction.length);
    total += ns;
    if (total > MAX_NS) return undefined;
  }
  return total;
}

/** A Go duration in milliseconds (fractions of a millisecond kept); undefined when it is not one. */
export function parseGoDuration(text: string): number | undefined {
  const ns = parseGoDurationNs(text);
  return ns === undefined ? undefined : Number(ns) / 1e6;
}
