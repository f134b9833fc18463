// The key's use, as the platform's key list reports it (drift.ts lists it anyway, so this costs no
// call): status.lastUsedAt and status.lastUsedFromAddr, and with spec.usage.unusedAfter the InUse
// condition. A platform answer is input: what goes into status is checked and bounded here, and a
// value that is not a timestamp or an IP address is dropped (a status the apiserver refuses would
// stop every other status write of the resource).
import { isIP } from 'node:net';
import type { ListedUse } from '../adapter.ts';
import type { ConditionUpdate } from '../status/conditions.ts';
import { parseGoDuration } from '../../go-duration.ts';

/**
 * status.lastUsedAt moves only when the last use moved by this much (or was never recorded), as
 * Kubernetes records a legacy token's last use by the day: a key in constant use (the key a
 * project's operations poller lists with is used on every poll) would otherwise cost one status
 * write per drift check. InUse is evaluated on the fresh value, so it is exact whatever this is.
 */
export const LAST_USED_GRANULARITY_MS = 3_600_000;

/** RFC 3339 with second precision, as metav1.Time writes it; undefined for anything else. */
export function statusTimestamp(value: string | null | undefined): string | undefined {
  if (value === null || value === undefined || value.length > 64) return undefined;
  const ms = Date.parse(value);
  // Years 0000-9999 only: RFC 3339 (and the CRD's date-time format) has four digits.
  if (!Number.isFinite(ms) || ms < Date.UTC(1970, 0, 1) || ms >= Date.UTC(10000, 0, 1)) return undefined;
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}

/**
 * The usage fields of status from the listed key: only valid values, and only when the last use
 * moved by LAST_USED_GRANULARITY_MS or more since the recorded one (the address goes with it).
 */
export function usageFields(
  listed: ListedUse | undefined,
  status: { lastUsedAt?: string; lastUsedFromAddr?: string },
  granularityMs = LAST_USED_GRANULARITY_MS,
): { lastUsedAt?: string; lastUsedFromAddr?: string } {
  const at = statusTimestamp(listed?.last_used_at);
  if (listed === undefined || at === undefined) return {};
  const recorded = status.lastUsedAt !== undefined ? Date.parse(status.lastUsedAt) : Number.NaN;
  if (Number.isFinite(recorded) && Date.parse(at) - recorded < granularityMs) return {};
  const out: { lastUsedAt?: string; lastUsedFromAddr?: string } = { lastUsedAt: at };
  // '' is the platform's "never used"; anything that is not an address is dropped.
  const addr = listed.last_used_from_addr;
  if (typeof addr === 'string' && addr.length <= 64 && isIP(addr) !== 0 && addr !== status.lastUsedFromAddr) out.lastUsedFromAddr = addr;
  return out;
}

/**
 * InUse (spec.usage.unusedAfter): True while the key was used within that long, False once it was
 * not; a key never used counts from when it was issued. Not one of Ready's inputs.
 */
export function inUseCondition(unusedAfter: string, lastUsedAt: string | undefined, createdAt: string | undefined, now: number): ConditionUpdate | undefined {
  const windowMs = parseGoDuration(unusedAfter);
  const since = lastUsedAt ?? createdAt;
  const sinceMs = since !== undefined ? Date.parse(since) : Number.NaN;
  if (windowMs === undefined || !Number.isFinite(sinceMs)) return undefined;
  if (now - sinceMs <= windowMs) {
    // Without the time of the use: a key in use would rewrite the message (and status) on every check.
    return {
      type: 'InUse',
      status: 'True',
      reason: 'UsedRecently',
      message: lastUsedAt !== undefined ? `used within the last ${unusedAfter}` : `not used yet; issued at ${since}, less than ${unusedAfter} ago`,
    };
  }
  return {
    type: 'InUse',
    status: 'False',
    reason: 'NotUsedRecently',
    message:
      lastUsedAt !== undefined ? `not used since ${lastUsedAt} (more than ${unusedAfter})` : `never used since issued at ${since} (more than ${unusedAfter})`,
  };
}

/** The InUse condition of a spec (none without spec.usage.unusedAfter), as a list to append. */
export function usageConditions(
  spec: { usage?: { unusedAfter?: string | undefined } | undefined } | undefined,
  lastUsedAt: string | undefined,
  createdAt: string | undefined,
  now: number,
): ConditionUpdate[] {
  const unusedAfter = spec?.usage?.unusedAfter;
  const condition = unusedAfter !== undefined ? inUseCondition(unusedAfter, lastUsedAt, createdAt, now) : undefined;
  return condition !== undefined ? [condition] : [];
}
