// What each listed key's name says made it (docs/clusters.md, Inventory): this cluster, another
// cluster, or neither (made by hand, by a script, by another tool). Read from the names alone, with
// this cluster's name (--cluster-name): anyone who can create keys can name one like any cluster's,
// so this is reported as what the name says and decides nothing (nothing is revoked by it).
//
// One byte a key, in the listing's row order, made when the list is taken (the view's make) beside
// the columns of listing.ts (25 bytes a key) and kept as long as they are (a WeakMap on the
// listing): every view of one list shares it.
import { nameOrigin, type ListedKey, type ListingView, type NameOrigin } from '../keys/index.ts';
import type { KeptListing } from './listing.ts';

export const THIS_CLUSTER = 1;
export const OTHER_CLUSTER = 2;
/** Made by hand: in no operator's format. */
export const BY_HAND = 0;

/** Heap held by a listing's origins besides their bytes (the array's objects and the map's entry). */
const ORIGINS_BYTES = 256;

/** By listing: its origins as seen by one cluster (one per process but in tests). */
const originColumns = new WeakMap<KeptListing, { cluster: string; rows: Uint8Array }>();

function code(origin: NameOrigin): number {
  return origin.origin === 'ThisCluster' ? THIS_CLUSTER : origin.origin === 'OtherCluster' ? OTHER_CLUSTER : BY_HAND;
}

/** The origin of every row of `kept`, from the names of `listed` (the answer it was made from). */
function column(listed: readonly ListedKey[], kept: KeptListing, cluster: string): Uint8Array {
  const byId = new Map<number, number>();
  for (const key of listed) byId.set(key.id, code(nameOrigin(key.name, cluster)));
  const origins = new Uint8Array(kept.size);
  for (let row = 0; row < kept.size; row++) origins[row] = byId.get(kept.ids[row] as number) ?? BY_HAND;
  return origins;
}

/** `view`, whose listings also carry each row's origin (originsOf) as seen by the cluster named `cluster` ('' for none). */
export function withOrigins(view: ListingView<KeptListing>, cluster: string): ListingView<KeptListing> {
  return {
    ...view,
    make: (listed, at) => {
      const kept = view.make(listed, at);
      if (originColumns.get(kept)?.cluster !== cluster) originColumns.set(kept, { cluster, rows: column(listed, kept, cluster) });
      return kept;
    },
    // The origins' column (one byte a row, and its objects) is held as long as the listing.
    bytes: (kept) => (view.bytes?.(kept) ?? 0) + kept.size + ORIGINS_BYTES,
  };
}

/** The origin of each row of a listing made through withOrigins for `cluster`; undefined for one made otherwise. */
export function originsOf(kept: KeptListing, cluster: string): Uint8Array | undefined {
  const made = originColumns.get(kept);
  return made?.cluster === cluster ? made.rows : undefined;
}
