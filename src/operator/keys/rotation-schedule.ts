// When a key rotates (spec.rotation): its age against the interval, the window a scheduled rotation
// may start in, and the rotation request annotation; what status.rotation says of it, and when an
// in-sync key is looked at again. Pure: clock and spec in, instants out
// (test/operator/keys/rotation-schedule.test.ts). Time zones come from Intl, so an unknown zone is a
// value here (reported in the Rotating condition), never an exception out of a reconcile.
import { createHash } from 'node:crypto';
import type { KeyResource } from '../resources/schema.ts';
import { WEEKDAYS, type RotationSpec } from '../resources/spec-parts.ts';
import { parseGoDuration } from '../go-duration.ts';

export const DEFAULT_GRACE_MS = 10 * 60_000;
export const DEFAULT_MAX_GRACE_MS = 24 * 3_600_000;

/** The operator's floor of spec.rotation.gracePeriod unless --min-rotation-grace says otherwise (the CRD's, MIN_ROTATION_GRACE). */
export const DEFAULT_MIN_GRACE_MS = 60_000;

/**
 * The grace periods of a spec (or the defaults, for a requested rotation without spec.rotation).
 * A gracePeriod under the operator's floor (an object stored before the CRD had the rule, or a CRD
 * rendered with a lower one than the operator's flag) is raised to it, and `graceError` says so: a
 * replaced key is never revoked sooner after the switch than `minGraceMs`.
 */
export function gracePeriods(
  rotation: RotationSpec | undefined,
  minGraceMs = DEFAULT_MIN_GRACE_MS,
): { graceMs: number; maxGraceMs: number; graceError?: string } {
  const asked = rotation?.gracePeriod !== undefined ? (parseGoDuration(rotation.gracePeriod) ?? DEFAULT_GRACE_MS) : DEFAULT_GRACE_MS;
  const graceMs = Math.max(asked, minGraceMs);
  const maxGraceMs = rotation?.maxGracePeriod !== undefined ? (parseGoDuration(rotation.maxGracePeriod) ?? DEFAULT_MAX_GRACE_MS) : DEFAULT_MAX_GRACE_MS;
  const periods = { graceMs, maxGraceMs: Math.max(graceMs, maxGraceMs) };
  if (asked >= minGraceMs) return periods;
  return {
    ...periods,
    graceError:
      `spec.rotation.gracePeriod ${rotation?.gracePeriod ?? ''} is under the operator's minimum of ` +
      `${minGraceMs / 1000}s (--min-rotation-grace): a replaced key is kept for the minimum; set gracePeriod to at least that`,
  };
}

/**
 * The token of a rotation request as status records it: itself when short, else a digest (status
 * fields are bounded; the annotation is not).
 */
export function requestToken(annotation: string | undefined): string | undefined {
  if (annotation === undefined || annotation === '') return undefined;
  return annotation.length <= 64 ? annotation : `sha256:${createHash('sha256').update(annotation).digest('hex')}`;
}

type Window = NonNullable<RotationSpec['window']>;

interface LocalTime {
  weekday: number;
  minute: number;
  second: number;
}

/** The wall clock in a zone (weekday 0 = Mon); throws RangeError for an unknown zone. */
function localClock(zone: string): (at: number) => LocalTime {
  const format = new Intl.DateTimeFormat('en-GB', {
    timeZone: zone,
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
  });
  return (at) => {
    const parts = Object.fromEntries(format.formatToParts(new Date(at)).map((p) => [p.type, p.value]));
    return {
      weekday: WEEKDAYS.indexOf(parts.weekday as (typeof WEEKDAYS)[number]),
      minute: Number(parts.hour) * 60 + Number(parts.minute),
      second: Number(parts.second),
    };
  };
}

const toMinute = (hhmm: string): number => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));

/** Whether `t` is inside the window; a window that wraps midnight belongs to the day it starts. */
function inside(window: Window, t: LocalTime): boolean {
  const start = toMinute(window.start);
  const end = toMinute(window.end);
  const days = window.daysOfWeek?.map((d) => WEEKDAYS.indexOf(d));
  const dayOk = (weekday: number): boolean => days === undefined || days.includes(weekday);
  if (start === end) return dayOk(t.weekday); // the whole day
  if (start < end) return t.minute >= start && t.minute < end && dayOk(t.weekday);
  if (t.minute >= start) return dayOk(t.weekday);
  return t.minute < end && dayOk((t.weekday + 6) % 7);
}

/** The first instant at or after `from` inside the window (minute precision, DST-safe by re-checking). */
export function nextInWindow(window: Window, from: number): number | { error: string } {
  let clock: (at: number) => LocalTime;
  try {
    clock = localClock(window.timeZone ?? 'UTC');
  } catch {
    return { error: `spec.rotation.window.timeZone: unknown time zone "${window.timeZone ?? ''}"; scheduled rotations are off until it names an IANA zone` };
  }
  const start = toMinute(window.start);
  let t = from;
  // Each step lands on the window's start of the next day at most; 8 days cover every weekday
  // (and a step more for the hours a DST change moves).
  for (let i = 0; i < 20; i += 1) {
    const local = clock(t);
    if (inside(window, local)) return t;
    const minutesToStart = (start - local.minute + 1440) % 1440 || 1440;
    t = t - local.second * 1_000 - (t % 1_000) + minutesToStart * 60_000;
  }
  return { error: 'spec.rotation.window: no instant found inside the window' };
}

export interface Schedule {
  /** When the next scheduled rotation is due; undefined without spec.rotation.interval. */
  nextAt?: number;
  /** Why scheduled rotations are off (an unknown time zone). */
  error?: string;
}

/**
 * The next scheduled rotation: the key's age reaches the interval (counted from the last rotation,
 * else from when the key was created), then the first instant inside the window.
 */
export function schedule(rotation: RotationSpec | undefined, keyBornAt: number | undefined, now: number): Schedule {
  if (rotation?.interval === undefined) return {};
  const interval = parseGoDuration(rotation.interval);
  if (interval === undefined) return { error: `spec.rotation.interval: "${rotation.interval}" is not a duration` };
  const due = (keyBornAt !== undefined && Number.isFinite(keyBornAt) ? keyBornAt : now) + interval;
  if (rotation.window === undefined) return { nextAt: due };
  const next = nextInWindow(rotation.window, due);
  return typeof next === 'number' ? { nextAt: next } : { error: next.error };
}

/** Rotation as one reconcile reads it (Context.rotation): the spec or the defaults, the request, the schedule. */
export interface RotationContext {
  spec: RotationSpec | undefined;
  graceMs: number;
  maxGraceMs: number;
  /** spec.rotation.gracePeriod is under the operator's floor (raised to it): what the Rotating condition says. */
  graceError?: string;
  /** The keys.neon.dev/rotate token, as status records it (handled or not). */
  request: string | undefined;
  /** The next scheduled rotation, or why scheduled rotations are off. */
  schedule: Schedule;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * status.rotation as it should read: nextRotationAt from the spec (and the key's birth, or the
 * rotation just made), with what a step changes. Empty when rotation was never used.
 */
export function rotationFields(
  ctx: { resource: KeyResource; rotation: RotationContext },
  change: { lastRotatedAt?: string; lastRequest?: string },
  keyCreatedAt?: string,
): Record<string, unknown> {
  const current = ctx.resource.status?.rotation;
  // The schedule counts from the last rotation, else from the creation of the key (a new one, when given).
  const born = change.lastRotatedAt ?? current?.lastRotatedAt ?? keyCreatedAt;
  const bornAt = born !== undefined && (change.lastRotatedAt !== undefined || keyCreatedAt !== undefined) ? Date.parse(born) : undefined;
  const nextAt = bornAt !== undefined && Number.isFinite(bornAt) ? schedule(ctx.rotation.spec, bornAt, bornAt).nextAt : ctx.rotation.schedule.nextAt;
  const next: Record<string, unknown> = { ...current, ...change };
  if (nextAt !== undefined) next.nextRotationAt = iso(nextAt);
  else if (current?.nextRotationAt !== undefined)
    next.nextRotationAt = null; // merge patch: removes it
  else delete next.nextRotationAt;
  if (Object.keys(next).length === 0) return {};
  return { rotation: next };
}

/** When to look again at an in-sync key: the next drift check, or a scheduled rotation due before it. */
export function nextLook(deps: { driftIntervalMs: number; now: () => number }, nextRotationAt: number | undefined, atMostMs = deps.driftIntervalMs): number {
  const untilRotation = nextRotationAt !== undefined ? Math.max(1_000, nextRotationAt - deps.now()) : Number.POSITIVE_INFINITY;
  return Math.min(atMostMs, deps.driftIntervalMs, untilRotation);
}
