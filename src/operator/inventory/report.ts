// The inventory's report (docs/inventory.md): a pure function of the platform's list, of which ids
// this cluster records, of spec.unusedAfter and of the time the list was taken. It counts, lists
// (newest first, bounded) and says which keys are news since the last list: a key not managed that
// appeared, a managed key that went unused (the events).
import { INVENTORY_LIST_MAX, type ApiKeyInventoryStatus, type InventoryKey } from '../resources/inventory.ts';
import { statusTimestamp, type ListedDetail } from '../keys/index.ts';

export interface Report {
  live: number;
  managed: number;
  notManaged: number;
  unused: number;
  neverUsed: number;
  notManagedKeys: InventoryKey[];
  unusedKeys: InventoryKey[];
  /** Keys not managed that are new since the previous list (newest first). */
  appeared: InventoryKey[];
  /** Managed keys whose unused moment fell between the previous list and this one (newest first). */
  wentUnused: InventoryKey[];
}

export interface ReportInput {
  keys: readonly ListedDetail[];
  /** Whether this cluster records the key (a key resource's status.keyId or retiringKeys). */
  isManaged(id: number): boolean;
  unusedAfterMs: number;
  /** When the list was taken. */
  listedAt: number;
  /** Personal keys, or an organization's keys. */
  scope: 'Personal' | 'Organization';
  /**
   * What the previous report knew: when its list was taken and, when this process made it, the ids
   * it found not managed. Without it (a new inventory) nothing is news.
   */
  previous?: { listedAt: number; notManaged?: ReadonlySet<number> };
}

/** When a key became (or becomes) unused: unusedAfter past its last use, or past its creation if never used. */
function unusedFrom(key: ListedDetail, unusedAfterMs: number): number {
  const base = Date.parse(key.last_used_at ?? key.created_at);
  return (Number.isFinite(base) ? base : 0) + unusedAfterMs;
}

function inventoryKey(key: ListedDetail, scope: ReportInput['scope'], managed: boolean): InventoryKey {
  const createdAt = statusTimestamp(key.created_at) ?? '1970-01-01T00:00:00Z';
  const lastUsedAt = statusTimestamp(key.last_used_at);
  const by = key.created_by;
  return {
    id: key.id,
    name: key.name.slice(0, 64),
    kind: scope === 'Personal' ? 'Personal' : key.project_id !== undefined ? 'Project' : 'Organization',
    ...(key.project_id !== undefined ? { projectId: key.project_id.slice(0, 64) } : {}),
    createdAt,
    ...(by !== undefined ? { createdBy: `${by.name.slice(0, 60)} (${by.id.slice(0, 60)})` } : {}),
    ...(lastUsedAt !== undefined ? { lastUsedAt } : {}),
    ...(key.last_used_from_addr !== '' ? { lastUsedFromAddr: key.last_used_from_addr.slice(0, 64) } : {}),
    managed,
  };
}

/** Newest first (creation time, then id: the platform's ids grow). */
function newestFirst(a: ListedDetail, b: ListedDetail): number {
  return Date.parse(b.created_at) - Date.parse(a.created_at) || b.id - a.id;
}

export function report(input: ReportInput): Report {
  const { keys, isManaged, unusedAfterMs, listedAt, scope, previous } = input;
  const sorted = [...keys].sort(newestFirst);
  const out: Report = { live: keys.length, managed: 0, notManaged: 0, unused: 0, neverUsed: 0, notManagedKeys: [], unusedKeys: [], appeared: [], wentUnused: [] };
  for (const key of sorted) {
    const managed = isManaged(key.id);
    const unusedAt = unusedFrom(key, unusedAfterMs);
    const unused = unusedAt <= listedAt;
    if (managed) out.managed++;
    else out.notManaged++;
    if (unused) out.unused++;
    if (key.last_used_at === null) out.neverUsed++;
    if (!managed && out.notManagedKeys.length < INVENTORY_LIST_MAX) out.notManagedKeys.push(inventoryKey(key, scope, managed));
    if (unused && out.unusedKeys.length < INVENTORY_LIST_MAX) out.unusedKeys.push(inventoryKey(key, scope, managed));
    if (previous !== undefined) {
      // Not managed and not so before: by the ids this process saw, else by creation after the previous list.
      const isNew = previous.notManaged !== undefined ? !previous.notManaged.has(key.id) : Date.parse(key.created_at) > previous.listedAt;
      if (!managed && isNew) out.appeared.push(inventoryKey(key, scope, managed));
      if (managed && unused && unusedAt > previous.listedAt) out.wentUnused.push(inventoryKey(key, scope, managed));
    }
  }
  return out;
}

/** The status fields of a report (conditions and observedGeneration are the reconciler's). */
export function reportStatus(r: Report, listedAt: number): Omit<ApiKeyInventoryStatus, 'conditions' | 'observedGeneration'> {
  return {
    listedAt: new Date(listedAt).toISOString().replace(/\.\d+Z$/, 'Z'),
    live: r.live,
    managed: r.managed,
    notManaged: r.notManaged,
    unused: r.unused,
    neverUsed: r.neverUsed,
    notManagedKeys: r.notManagedKeys,
    unusedKeys: r.unusedKeys,
  };
}
