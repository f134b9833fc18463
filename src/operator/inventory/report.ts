// The inventory's report (docs/inventory.md): a pure function of the platform's list, of which ids
// this cluster records, of what each key's name says made it (origins.ts), of spec.unusedAfter and
// of the time the list was taken. It counts, lists
// (newest first, bounded) and says which keys are news since the last list: a key not managed that
// appeared, a managed key that went unused (the events).
import { INVENTORY_LIST_MAX, type ApiKeyInventoryStatus, type InventoryKey } from '../resources/inventory.ts';
import { MAX_KEY_EVENTS, type KeyNews } from './events.ts';
import { NEVER_USED, PROJECT_SCOPED, unusedFrom, type KeptListing } from './listing.ts';
import { nameOrigin } from '../keys/index.ts';
import { OTHER_CLUSTER, THIS_CLUSTER } from './origins.ts';

export interface Report {
  live: number;
  managed: number;
  notManaged: number;
  /** The keys not managed by what their names say made them (with `origins` only). */
  notManagedByOrigin?: { thisCluster: number; otherCluster: number; byHand: number };
  unused: number;
  neverUsed: number;
  notManagedKeys: InventoryKey[];
  unusedKeys: InventoryKey[];
  /** Entries of those lists shown without their details (not kept: inventory/listing.ts). */
  withoutDetails: number;
  /** Keys not managed that are new since the previous list (the newest MAX_KEY_EVENTS, and how many). */
  appeared: KeyNews;
  /** Managed keys whose unused moment fell between the previous list and this one (the newest MAX_KEY_EVENTS, and how many). */
  wentUnused: KeyNews;
}

export interface ReportInput {
  listing: KeptListing;
  /** Whether this cluster records the key (a key resource's status.keyId or retiringKeys). */
  isManaged(id: number): boolean;
  unusedAfterMs: number;
  /** When the list was taken. */
  listedAt: number;
  /** Personal keys, or an organization's keys. */
  scope: 'Personal' | 'Organization';
  /** What each row's name says made it (origins.ts), and this cluster's name ('' for none). */
  origins?: { rows: Uint8Array; cluster: string };
  /**
   * What the previous report knew: when its list was taken and, when this process made it, the ids
   * it found not managed. Without it (a new inventory) nothing is news.
   */
  previous?: { listedAt: number; notManaged?: ReadonlySet<number> };
}

/** A time of status (RFC 3339, seconds), or undefined outside the years 1970 to 9999. */
function timestamp(ms: number): string | undefined {
  return Number.isFinite(ms) && ms >= Date.UTC(1970, 0, 1) && ms < Date.UTC(10000, 0, 1) ? new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z') : undefined;
}

/** The entry of row `row`: with its details when kept, else what the columns say (no name, creator, project or address). */
function inventoryKey(listing: KeptListing, row: number, scope: ReportInput['scope'], managed: boolean, origins?: ReportInput['origins']): InventoryKey {
  const id = listing.ids[row] as number;
  const detail = listing.details.get(id);
  const projectScoped = ((listing.flags[row] as number) & PROJECT_SCOPED) !== 0;
  const lastUsedAt = timestamp(listing.lastUsedMs[row] as number);
  const by = detail?.createdBy;
  return {
    id,
    ...(detail !== undefined ? { name: detail.name } : {}),
    kind: scope === 'Personal' ? 'Personal' : projectScoped ? 'Project' : 'Organization',
    ...(detail?.projectId !== undefined ? { projectId: detail.projectId } : {}),
    createdAt: timestamp(listing.createdMs[row] as number) ?? '1970-01-01T00:00:00Z',
    ...(by !== undefined ? { createdBy: `${by.name} (${by.id})` } : {}),
    ...(lastUsedAt !== undefined ? { lastUsedAt } : {}),
    ...(detail !== undefined && detail.lastUsedFromAddr !== '' ? { lastUsedFromAddr: detail.lastUsedFromAddr } : {}),
    managed,
    ...(!managed && origins !== undefined ? originFields(origins.rows[row] as number, detail?.name, origins.cluster) : {}),
  };
}

/** A key's origin fields: the column's, with the other cluster's name read from the name when it was kept. */
function originFields(code: number, name: string | undefined, cluster: string): Pick<InventoryKey, 'origin' | 'cluster'> {
  if (code === THIS_CLUSTER) return { origin: 'ThisCluster' };
  if (code !== OTHER_CLUSTER) return { origin: 'ByHand' };
  const read = name !== undefined ? nameOrigin(name, cluster) : undefined;
  return read?.origin === 'OtherCluster' && read.cluster !== undefined ? { origin: 'OtherCluster', cluster: read.cluster } : { origin: 'OtherCluster' };
}

export function report(input: ReportInput): Report {
  const { listing, isManaged, unusedAfterMs, listedAt, scope, previous, origins } = input;
  const out: Report = {
    live: listing.size,
    managed: 0,
    notManaged: 0,
    unused: 0,
    neverUsed: 0,
    notManagedKeys: [],
    unusedKeys: [],
    withoutDetails: 0,
    appeared: { keys: [], total: 0 },
    wentUnused: { keys: [], total: 0 },
  };
  const byOrigin = origins !== undefined ? { thisCluster: 0, otherCluster: 0, byHand: 0 } : undefined;
  const listed = (row: number, managed: boolean): InventoryKey => {
    const key = inventoryKey(listing, row, scope, managed, origins);
    if (key.name === undefined) out.withoutDetails++;
    return key;
  };
  // Rows are newest first (inventory/listing.ts).
  for (let row = 0; row < listing.size; row++) {
    const id = listing.ids[row] as number;
    const createdMs = listing.createdMs[row] as number;
    const managed = isManaged(id);
    const unusedAt = unusedFrom(createdMs, listing.lastUsedMs[row] as number, unusedAfterMs);
    const unused = unusedAt <= listedAt;
    if (managed) out.managed++;
    else out.notManaged++;
    if (!managed && byOrigin !== undefined) {
      const code = origins?.rows[row];
      if (code === THIS_CLUSTER) byOrigin.thisCluster++;
      else if (code === OTHER_CLUSTER) byOrigin.otherCluster++;
      else byOrigin.byHand++;
    }
    if (unused) out.unused++;
    if (((listing.flags[row] as number) & NEVER_USED) !== 0) out.neverUsed++;
    if (!managed && out.notManagedKeys.length < INVENTORY_LIST_MAX) out.notManagedKeys.push(listed(row, managed));
    if (unused && out.unusedKeys.length < INVENTORY_LIST_MAX) out.unusedKeys.push(listed(row, managed));
    if (previous !== undefined) {
      // Not managed and not so before: by the ids this process saw, else by creation after the previous list.
      const isNew = previous.notManaged !== undefined ? !previous.notManaged.has(id) : createdMs > previous.listedAt;
      const news = !managed && isNew ? out.appeared : managed && unused && unusedAt > previous.listedAt ? out.wentUnused : undefined;
      if (news !== undefined && news.total++ < MAX_KEY_EVENTS) news.keys.push(inventoryKey(listing, row, scope, managed, origins));
    }
  }
  if (byOrigin !== undefined) out.notManagedByOrigin = byOrigin;
  return out;
}

/** The status fields of a report (conditions and observedGeneration are the reconciler's). */
export function reportStatus(r: Report, listedAt: number): Omit<ApiKeyInventoryStatus, 'conditions' | 'observedGeneration'> {
  return {
    listedAt: new Date(listedAt).toISOString().replace(/\.\d+Z$/, 'Z'),
    live: r.live,
    managed: r.managed,
    notManaged: r.notManaged,
    ...(r.notManagedByOrigin !== undefined ? { notManagedByOrigin: r.notManagedByOrigin } : {}),
    unused: r.unused,
    neverUsed: r.neverUsed,
    notManagedKeys: r.notManagedKeys,
    unusedKeys: r.unusedKeys,
    withoutDetails: r.withoutDetails,
  };
}
