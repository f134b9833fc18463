// Timestamps on the wire. Keys and projects carry whole seconds like the real API's examples;
// operations carry microseconds, because the operations cursor is the creation time of the last
// operation of the page, with fractional seconds (docs/platform-api.md "Pagination object"),
// and a cursor that equals created_at exactly is what lets a client page without gaps.

/** Microseconds since the epoch (integer, exact in a double until the year 2255). */
export function nowMicros(): number {
  return Math.floor((performance.timeOrigin + performance.now()) * 1000);
}

export function isoSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export function isoMicros(us: number): string {
  const ms = Math.floor(us / 1000);
  const base = new Date(ms).toISOString().slice(0, 19);
  const frac = String(us % 1_000_000).padStart(6, '0');
  return `${base}.${frac}Z`;
}

const CURSOR = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/;

/** Parses an ISO 8601 UTC timestamp with up to 9 fractional digits to microseconds; undefined if malformed. */
export function parseIsoMicros(text: string): number | undefined {
  const m = CURSOR.exec(text);
  if (m === null) return undefined;
  const ms = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${m[8]}`);
  if (Number.isNaN(ms)) return undefined;
  const frac = (m[7] ?? '').padEnd(6, '0').slice(0, 6);
  return ms * 1000 + Number(frac);
}
