// What an inventory keeps of its organization's key list between two lists (docs/inventory.md,
// Cost): made once, when the drift cache takes the list (keys/observing/drift.ts, DriftCache.listing), from
// the platform's answer, which is then dropped. The counts need only a few numbers a key, kept for
// every key in typed arrays (25 bytes a key); the status lists show the newest 50 keys not managed
// and the newest 50 unused, so the details a list entry shows (name, creator, project, address) are
// kept only for the newest KEPT_DETAILS keys not managed and the newest KEPT_DETAILS unused of each
// unusedAfter asked for, as the list is taken, each string cut to what status shows. A list as large
// as the platform may answer (the client reads at most 16 MiB) keeps no more details than a small one.
//
// Every view of one list (one per unusedAfter) is the same KeptListing: the columns are made and
// sorted once per list, whatever the number of views, and a view of an unusedAfter the list was not
// taken for is that same object, given without a new list (inventoryView's `from`): its counts are
// exact from the columns; only the details of its unused keys may be missing until the next list.
import type { ListedKey, ListingView } from '../keys/index.ts';

/**
 * The most keys of each kind (not managed; unused) whose details a list keeps. Well over the 50 a
 * status list shows: a key that becomes managed between the list and a later reconcile in the same
 * interval (a key listed in the second between its create and its status patch) leaves room for an
 * older one. A key to be listed whose details were not kept is listed without them (report.ts,
 * status.withoutDetails).
 */
export const KEPT_DETAILS = 200;
/** The longest string of a detail kept: what status shows (resources/inventory.ts). */
const MAX_DETAIL_LENGTH = 64;

export const NEVER_USED = 1;
export const PROJECT_SCOPED = 2;

/** The details a status entry shows of a key, each string at most MAX_DETAIL_LENGTH. */
export interface KeptDetail {
  name: string;
  projectId?: string;
  createdBy?: { id: string; name: string };
  lastUsedFromAddr: string;
}

export interface KeptListing {
  /** Keys listed. */
  readonly size: number;
  /** Columns of every key, newest first (creation time, then id: the platform's ids grow). */
  readonly ids: Float64Array;
  /** Creation time (ms); NaN when it does not parse. */
  readonly createdMs: Float64Array;
  /** Last use (ms), NaN when never used or it does not parse. */
  readonly lastUsedMs: Float64Array;
  /** NEVER_USED, PROJECT_SCOPED. */
  readonly flags: Uint8Array;
  /** The details kept, by key id (at most KEPT_DETAILS, and KEPT_DETAILS more for each of `unusedDetailsFor`). */
  readonly details: ReadonlyMap<number, KeptDetail>;
  /**
   * The unusedAfter values (ms) whose newest unused keys' details were kept as the list was taken
   * (the views asked for then: at most 4, drift-listing.ts). A view of another value lists the unused keys
   * whose details were not kept without them (status.withoutDetails) until the next list.
   */
  readonly unusedDetailsFor: ReadonlySet<number>;
}

/**
 * A string of at most `max` characters that holds nothing else alive: a slice of a longer string
 * may share its memory (a 16 MiB name cut to 64 characters would keep the 16 MiB), so a cut one is
 * copied.
 */
function own(value: string, max = MAX_DETAIL_LENGTH): string {
  return value.length <= max ? value : Buffer.from(value.slice(0, max), 'utf8').toString('utf8');
}

/** When a key is (or becomes) unused: unusedAfter past its last use, or past its creation if never used; 0 when neither parses. */
export function unusedFrom(createdMs: number, lastUsedMs: number, unusedAfterMs: number): number {
  const base = Number.isNaN(lastUsedMs) ? createdMs : lastUsedMs;
  return (Number.isFinite(base) ? base : 0) + unusedAfterMs;
}

const VIEW_PREFIX = 'unusedAfter=';

/** What one list keeps while it is taken: the kept listing, and the platform's entries in row order (to read details from). */
interface Taking {
  at: number;
  kept: KeptListing & { details: Map<number, KeptDetail>; unusedDetailsFor: Set<number> };
  rows: readonly ListedKey[];
}

/**
 * The listing being made of each answer, while the drift cache makes its views from it (one after
 * the other, the same answer and time): the second view of a list adds its details to the first's
 * columns instead of sorting again. Held only as long as the answer itself.
 */
const taking = new WeakMap<readonly ListedKey[], Taking>();

/**
 * What an inventory with `unusedAfterMs` reads of a list: a view of the drift cache, one per
 * unusedAfter (inventories on the same list and unusedAfter share it; views of one list share what
 * is kept). `recorded`: the key ids key resources of this cluster record as the list is taken
 * (managed, so no details kept unless unused). `from`: a view of another unusedAfter made from the
 * same list answers this one (no new list: the counts are exact, unused keys' details as kept).
 */
export function inventoryView(unusedAfterMs: number, recorded: () => ReadonlySet<number>, keptDetails = KEPT_DETAILS): ListingView<KeptListing> {
  return {
    id: `${VIEW_PREFIX}${unusedAfterMs}`,
    make: (listed, at) => {
      let t = taking.get(listed);
      if (t === undefined || t.at !== at) {
        t = columns(listed, at, recorded(), keptDetails);
        taking.set(listed, t);
      }
      keepUnused(t, unusedAfterMs, keptDetails);
      return t.kept;
    },
    from: (otherId, other) => (otherId.startsWith(VIEW_PREFIX) ? (other as KeptListing) : undefined),
    bytes: keptBytes,
  };
}

/** What a list keeps for one unusedAfter (`keptDetails`: KEPT_DETAILS but in tests). */
export function keep(listed: readonly ListedKey[], at: number, unusedAfterMs: number, recorded: ReadonlySet<number>, keptDetails = KEPT_DETAILS): KeptListing {
  const t = columns(listed, at, recorded, keptDetails);
  keepUnused(t, unusedAfterMs, keptDetails);
  return t.kept;
}

/** The columns of every key, newest first, and the details of the newest `keptDetails` keys not managed. */
function columns(listed: readonly ListedKey[], at: number, recorded: ReadonlySet<number>, keptDetails: number): Taking {
  const created = listed.map((k) => Date.parse(k.created_at));
  // A creation time that does not parse sorts as the oldest (a NaN would make the order arbitrary).
  const sortable = (i: number): number => {
    const t = created[i] as number;
    return Number.isFinite(t) ? t : -Infinity;
  };
  const order = listed
    .map((_, i) => i)
    .sort((a, b) => (sortable(b) === sortable(a) ? 0 : sortable(b) > sortable(a) ? 1 : -1) || (listed[b]?.id ?? 0) - (listed[a]?.id ?? 0));
  const size = listed.length;
  const ids = new Float64Array(size);
  const createdMs = new Float64Array(size);
  const lastUsedMs = new Float64Array(size);
  const flags = new Uint8Array(size);
  const details = new Map<number, KeptDetail>();
  const rows: ListedKey[] = [];
  let notManaged = 0;
  for (const [row, i] of order.entries()) {
    const key = listed[i] as ListedKey;
    rows.push(key);
    ids[row] = key.id;
    createdMs[row] = created[i] as number;
    lastUsedMs[row] = key.last_used_at === null ? Number.NaN : Date.parse(key.last_used_at);
    flags[row] = (key.last_used_at === null ? NEVER_USED : 0) | (key.project_id !== undefined ? PROJECT_SCOPED : 0);
    if (!recorded.has(key.id) && notManaged++ < keptDetails) details.set(key.id, detailOf(key));
  }
  return { at, rows, kept: { size, ids, createdMs, lastUsedMs, flags, details, unusedDetailsFor: new Set() } };
}

/** Adds the details of the newest `keptDetails` keys unused at the list's time under `unusedAfterMs`. */
function keepUnused(t: Taking, unusedAfterMs: number, keptDetails: number): void {
  const { kept, at, rows } = t;
  if (kept.unusedDetailsFor.has(unusedAfterMs)) return;
  kept.unusedDetailsFor.add(unusedAfterMs);
  let unused = 0;
  for (let row = 0; row < kept.size && unused < keptDetails; row++) {
    if (unusedFrom(kept.createdMs[row] as number, kept.lastUsedMs[row] as number, unusedAfterMs) > at) continue;
    unused++;
    const key = rows[row] as ListedKey;
    if (!kept.details.has(key.id)) kept.details.set(key.id, detailOf(key));
  }
}

function detailOf(key: ListedKey): KeptDetail {
  const by = key.created_by;
  return {
    name: own(key.name),
    lastUsedFromAddr: own(key.last_used_from_addr),
    ...(key.project_id !== undefined ? { projectId: own(key.project_id) } : {}),
    ...(by !== undefined ? { createdBy: { id: own(by.id, 60), name: own(by.name, 60) } } : {}),
  };
}

/**
 * Heap held by a listing besides its columns' bytes (its objects and arrays) and by each detail
 * besides its strings (its map entry and objects), as V8 lays them out; a string kept costs its
 * header (24 bytes at most) and its characters.
 */
const LISTING_BYTES = 1_024;
const DETAIL_BYTES = 240;

function stringBytes(value: string | undefined): number {
  return value === undefined || value.length === 0 ? 0 : 24 + 2 * value.length;
}

/** The bytes a listing holds, for the drift cache's budget (keys/observing/drift-budget.ts, MAX_DRIFT_BYTES). */
export function keptBytes(kept: KeptListing): number {
  let bytes = LISTING_BYTES + kept.ids.byteLength + kept.createdMs.byteLength + kept.lastUsedMs.byteLength + kept.flags.byteLength;
  for (const d of kept.details.values()) {
    bytes +=
      DETAIL_BYTES +
      stringBytes(d.name) +
      stringBytes(d.lastUsedFromAddr) +
      stringBytes(d.projectId) +
      stringBytes(d.createdBy?.id) +
      stringBytes(d.createdBy?.name);
  }
  return bytes;
}
