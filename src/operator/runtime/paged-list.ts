// A LIST that never holds more than one object as sent. A tenant chooses the size of its objects
// (up to the apiserver's limit: about 1.5 MiB as stored, 256 KiB of annotations, any number of
// labels), so a LIST of a namespace is as large as the tenant likes: 40 objects of 1 MiB parsed
// at once took the operator to 476 MiB (docs/security.md, Bounds).
//
// So, as client-go's pager does, the LIST goes in pages (`limit` and `continue`), and more: each
// page's body is read as a stream, the top-level `items` array cut into its elements as they
// arrive (ListItems below), and each element parsed and handed to `project` at once. What is kept
// is the projection; the element's bytes and its parse are garbage before the next one is read.
// A continue token the apiserver no longer serves (410 Gone: its version was compacted) starts the
// LIST again from the first page, dropping what was kept of the older snapshot.
import type { KubeConfig, KubernetesObject, KubernetesListObject, ListPromise } from '@kubernetes/client-node';
import { HttpMethod, RequestContext } from '@kubernetes/client-node';
import { fetch } from 'undici';

/**
 * Objects per page of a metadata LIST. Metadata is the tenant's to size (up to about 1.5 MiB an
 * object), and the apiserver must send a whole page within its request timeout (60 s): 50 objects
 * are at most about 75 MiB, where client-go's 500 could be 750 MiB.
 */
const METADATA_PAGE = 50;
/** PartialObjectMetadataList (client-go's metadata client): no object's content is sent. */
const METADATA_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/**
 * The most one object of a list may weigh as sent (its JSON). The apiserver stores at most about
 * 1.5 MiB an object (etcd's request limit), about 2 MiB as JSON (a Secret's data grows by base64):
 * anything over this is not an apiserver's answer, and the LIST fails.
 */
export const MAX_OBJECT_BYTES = 8 * 1024 * 1024;

/** How often a LIST starts again after its continue token expired (410), before it fails (the informer backs off). */
const MAX_RESTARTS = 3;

export interface PagedListOptions<T> {
  /** Objects per page (the apiserver's `limit`): a page is at most this many times an object's size as sent, never held whole. */
  pageSize: number;
  labelSelector?: string;
  /** Ask for PartialObjectMetadata: the objects' content is never sent. */
  metadataOnly?: boolean;
  /** What is kept of each object, as it arrives (`bytes`: its size as sent); undefined: nothing. */
  project(obj: KubernetesObject, bytes: number): T | undefined;
  maxObjectBytes?: number;
}

/** An apiserver's refusal of a page, with its HTTP status (the reflector and the callers branch on it). */
class ListError extends Error {
  readonly statusCode: number;
  constructor(message: string, statusCode: number) {
    super(message);
    this.statusCode = statusCode;
  }
}

/** A LIST of `path`, page by page, keeping only the projection of each object (see the top of this file): an informer's LIST. */
export function pagedList<T extends KubernetesObject>(kubeConfig: KubeConfig, path: string, options: PagedListOptions<T>): ListPromise<T> {
  return async () => {
    const { items, resourceVersion } = await listProjected(kubeConfig, path, options);
    return { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion }, items } satisfies KubernetesListObject<T>;
  };
}

/** The same LIST, for a projection of any shape (what one decision reads of each object). */
export async function listProjected<T>(
  kubeConfig: KubeConfig,
  path: string,
  options: PagedListOptions<T>,
): Promise<{ items: T[]; resourceVersion: string | undefined }> {
  for (let restarts = 0; ; restarts++) {
    try {
      return await listOnce(kubeConfig, path, options);
    } catch (error) {
      if (!(error instanceof ListError && error.statusCode === 410 && restarts < MAX_RESTARTS)) throw error;
    }
  }
}

/** One LIST from its first page; a 410 on a continue token is thrown (listProjected starts again). */
async function listOnce<T>(kubeConfig: KubeConfig, path: string, options: PagedListOptions<T>): Promise<{ items: T[]; resourceVersion: string | undefined }> {
  const server = kubeConfig.getCurrentCluster()?.server;
  if (server === undefined) throw new Error('no current cluster');
  const items: T[] = [];
  let resourceVersion: string | undefined;
  let next: string | undefined;
  do {
    const url = new URL(server + path);
    url.searchParams.set('limit', String(options.pageSize));
    if (options.labelSelector !== undefined) url.searchParams.set('labelSelector', options.labelSelector);
    if (next !== undefined) url.searchParams.set('continue', next);
    const context = new RequestContext(url.toString(), HttpMethod.GET);
    await kubeConfig.applySecurityAuthentication(context);
    context.setHeaderParam('Accept', options.metadataOnly === true ? METADATA_LIST_ACCEPT : 'application/json');
    const response = await fetch(url, { method: 'GET', headers: context.getHeaders(), dispatcher: context.getDispatcher() });
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new ListError(`list of ${path}: HTTP ${response.status}`, response.status);
    }
    const body = new ListItems(options.maxObjectBytes ?? MAX_OBJECT_BYTES, (json) => {
      const kept = options.project(JSON.parse(json.toString('utf8')) as KubernetesObject, json.length);
      if (kept !== undefined) items.push(kept);
    });
    for await (const chunk of response.body ?? []) body.write(chunk);
    // The list's own metadata: its version, and the token of the next page (an empty
    // PartialObjectMetadataList carries `items: null`, which ListItems passes over).
    const meta = JSON.parse(body.end()?.toString('utf8') ?? '{}') as { resourceVersion?: string; continue?: string };
    resourceVersion = meta.resourceVersion;
    next = meta.continue !== undefined && meta.continue !== '' ? meta.continue : undefined;
  } while (next !== undefined);
  return { items, resourceVersion };
}

/** A metadata-only LIST (PartialObjectMetadata), each object projected as it arrives. */
export function listMetadata<T extends KubernetesObject = KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  labelSelector?: string,
  pageSize = METADATA_PAGE,
  project: (obj: KubernetesObject) => T | undefined = (obj) => obj as T,
  maxObjectBytes = MAX_OBJECT_BYTES,
): ListPromise<T> {
  return pagedList(kubeConfig, path, { pageSize, metadataOnly: true, project, maxObjectBytes, ...(labelSelector !== undefined ? { labelSelector } : {}) });
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;

/**
 * The body of a List (`{"items":[{...},...],"metadata":{...},...}`, keys in any order) cut as it
 * is written: each element of the top-level `items` array goes to `onItem` as soon as its last byte
 * arrives, as its own JSON; the top-level `metadata` is kept for end(). Only the bytes of the
 * element being read are held. It follows strings (and their escapes) and nesting only: the JSON
 * itself is checked by JSON.parse of each part.
 */
export class ListItems {
  readonly #maxBytes: number;
  readonly #onItem: (json: Buffer) => void;
  #depth = 0;
  #inString = false;
  #escaped = false;
  #started = false;
  /** At the top level, the next string is a key. */
  #expectKey = false;
  /** The bytes of the top-level key being read (only as many as the longest we look for). */
  #key: number[] | undefined;
  #lastKey = '';
  #inItems = false;
  #capture: 'item' | 'metadata' | undefined;
  /** The depth the capture's value opened at: it ends when the depth is back there. */
  #captureDepth = 0;
  #parts: Uint8Array[] = [];
  #size = 0;
  #metadata: Buffer | undefined;

  constructor(maxBytes: number, onItem: (json: Buffer) => void) {
    this.#maxBytes = maxBytes;
    this.#onItem = onItem;
  }

  write(chunk: Uint8Array): void {
    let from = 0;
    /** The next backslash at or after i (-1: none left in the chunk), found again only once passed. */
    let escapeAt = -2;
    for (let i = 0; i < chunk.length; i++) {
      if (this.#inString) {
        // Most of a tenant's bytes are inside strings: jump to the next quote or backslash (memchr).
        if (this.#escaped) {
          this.#escaped = false;
          if (this.#key !== undefined && this.#key.length <= 8) this.#key.push(chunk[i] as number);
          continue;
        }
        const quote = chunk.indexOf(QUOTE, i);
        if (escapeAt !== -1 && escapeAt < i) escapeAt = chunk.indexOf(BACKSLASH, i);
        const escape = escapeAt;
        const end = quote === -1 ? chunk.length : quote;
        if (escape !== -1 && escape < end) {
          this.#keyBytes(chunk, i, escape);
          this.#escaped = true;
          i = escape;
          continue;
        }
        this.#keyBytes(chunk, i, end);
        if (quote === -1) break;
        i = quote;
        this.#inString = false;
        if (this.#key !== undefined) {
          this.#lastKey = String.fromCharCode(...this.#key);
          this.#key = undefined;
        }
        continue;
      }
      const b = chunk[i];
      switch (b) {
        case QUOTE:
          this.#inString = true;
          if (this.#depth === 1 && this.#expectKey) this.#key = [];
          break;
        case OPEN_OBJECT:
        case OPEN_ARRAY:
          if (this.#capture === undefined) {
            if (b === OPEN_OBJECT && this.#depth === 2 && this.#inItems) from = this.#begin('item', i);
            else if (b === OPEN_OBJECT && this.#depth === 1 && !this.#expectKey && this.#lastKey === 'metadata') from = this.#begin('metadata', i);
            else if (b === OPEN_ARRAY && this.#depth === 1 && !this.#expectKey && this.#lastKey === 'items') this.#inItems = true;
          }
          this.#depth++;
          if (this.#depth === 1) {
            if (this.#started) throw new Error('list body: more than one value');
            this.#started = true;
            this.#expectKey = true;
          }
          break;
        case CLOSE_OBJECT:
        case CLOSE_ARRAY:
          this.#depth--;
          if (this.#depth < 0) throw new Error('list body: unbalanced');
          if (this.#capture !== undefined && this.#depth === this.#captureDepth) {
            this.#keep(chunk.subarray(from, i + 1));
            from = i + 1;
            this.#finish();
          } else if (b === CLOSE_ARRAY && this.#depth === 1) this.#inItems = false;
          break;
        case COLON:
          if (this.#depth === 1) this.#expectKey = false;
          break;
        case COMMA:
          if (this.#depth === 1) this.#expectKey = true;
          break;
        default:
      }
    }
    if (this.#capture !== undefined && from < chunk.length) this.#keep(chunk.subarray(from));
  }

  /** The bytes [from, to) of a top-level key being read (only as many as the longest looked for). */
  #keyBytes(chunk: Uint8Array, from: number, to: number): void {
    if (this.#key === undefined) return;
    for (let j = from; j < to && this.#key.length <= 8; j++) this.#key.push(chunk[j] as number);
  }

  /** The body is complete: the list's own metadata (undefined if it had none). */
  end(): Buffer | undefined {
    if (!this.#started || this.#depth !== 0 || this.#inString) throw new Error('list body: truncated');
    return this.#metadata;
  }

  #begin(what: 'item' | 'metadata', at: number): number {
    this.#capture = what;
    this.#captureDepth = this.#depth;
    this.#parts = [];
    this.#size = 0;
    return at;
  }

  #keep(part: Uint8Array): void {
    this.#size += part.length;
    if (this.#size > this.#maxBytes) throw new Error(`list body: an object over ${this.#maxBytes} bytes`);
    this.#parts.push(part);
  }

  #finish(): void {
    const json = Buffer.concat(this.#parts, this.#size);
    const what = this.#capture;
    this.#capture = undefined;
    this.#parts = [];
    this.#size = 0;
    if (what === 'item') this.#onItem(json);
    else this.#metadata = json;
  }
}
