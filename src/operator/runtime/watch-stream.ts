// The informers' watch requests. client-node's Watch reads a watch with undici's `fetch`, turns
// its WHATWG stream back into a Node stream (Readable.fromWeb), splits it with readline, re-arms a
// timer on every chunk, and ignores a line it cannot parse and any error the callback throws. At
// tens of events a second (a wave of keys: three or four events a key) that machinery is about as
// much of the operator's CPU as parsing the events themselves, and the informers needed each
// object's size as sent, which it does not give (they wrote each object to JSON again to know it).
//
// ProjectingWatch sends the same request (signed by the KubeConfig as client-node signs it, over
// the dispatcher that reuseKubeConnections keeps) with undici's `request`, splits its body into
// lines on the Buffers as they arrive, and parses each line once; the object's size as sent is the
// line's length. What client-node let pass, this ends the watch on (the reflector watches again
// from the last version it saw, or lists): a line that is not JSON, a line longer than any object
// the apiserver stores (a tenant sizes its objects, not the buffer: paged-list.ts's bound), and an
// error from the callback (it would otherwise leave the cache behind the stream without a word).
import { STATUS_CODES } from 'node:http';
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';
import { MAX_OBJECT_BYTES } from './paged-list.ts';

const NEWLINE = 0x0a;

/** A watch's events as the reflector takes them: the phase, and the object (projected for ADDED, MODIFIED and DELETED). */
export type WatchCallback = (phase: string, obj: unknown) => void;

/** What the reflector needs of a watch: client-node's Watch has this shape too (tests hand it fakes). */
export interface WatchSource {
  /** The watch ends after this long without a byte from the apiserver (bookmarks come about once a minute). */
  requestTimeoutMs: number;
  watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController>;
}

/** The error a watch ends with when the apiserver answers it with another status than 200 (the reflector reads `statusCode`). */
class WatchRefused extends Error {
  readonly statusCode: number;
  constructor(statusCode: number) {
    super(STATUS_CODES[statusCode] ?? `HTTP ${statusCode}`);
    this.statusCode = statusCode;
  }
}

/**
 * A watch whose ADDED, MODIFIED and DELETED objects go through `project` with their size as sent
 * (bytes of the event's line) before the callback sees them; ERROR and BOOKMARK pass as sent.
 */
export class ProjectingWatch<T> implements WatchSource {
  requestTimeoutMs = 30_000;
  readonly #kubeConfig: KubeConfig;
  readonly #project: (obj: T, bytes: number) => T;
  readonly #maxLineBytes: number;

  constructor(kubeConfig: KubeConfig, project: (obj: T, bytes: number) => T, maxLineBytes = MAX_OBJECT_BYTES) {
    this.#kubeConfig = kubeConfig;
    this.#project = project;
    this.#maxLineBytes = maxLineBytes;
  }

  async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const server = this.#kubeConfig.getCurrentCluster()?.server;
    if (server === undefined) throw new Error('No currently active cluster');
    const url = new URL(server + path);
    url.searchParams.set('watch', 'true');
    for (const [key, value] of Object.entries(queryParams)) if (value !== undefined) url.searchParams.set(key, String(value));
    const context = new RequestContext(url.toString(), HttpMethod.GET);
    // Before signing: a metadata informer's KubeConfig asks for PartialObjectMetadata instead (informer-cache.ts).
    context.setHeaderParam('Accept', 'application/json');
    await this.#kubeConfig.applySecurityAuthentication(context);

    const controller = new AbortController();
    const timeoutMs = this.requestTimeoutMs;
    let ended = false;
    let lastByteAt = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const end = (err: unknown): void => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      controller.abort();
      done(err);
    };
    // One timer for the whole watch, not one a chunk: when it fires it looks at when the last byte came.
    const arm = (ms: number): void => {
      timer = setTimeout(() => {
        const quiet = performance.now() - lastByteAt;
        if (quiet < timeoutMs) return arm(timeoutMs - quiet);
        end(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
      }, ms);
      timer.unref();
    };
    arm(timeoutMs);

    const lines = new LineSplitter(this.#maxLineBytes, (line) => {
      const event = parseEvent(line);
      const { type } = event;
      callback(type, type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED' ? this.#project(event.object as T, line.length) : event.object);
    });
    try {
      const dispatcher = context.getDispatcher() as Dispatcher | undefined;
      const response = await request(url, {
        method: 'GET',
        headers: context.getHeaders(),
        signal: controller.signal,
        ...(dispatcher !== undefined ? { dispatcher } : {}),
      });
      if (response.statusCode !== 200) {
        response.body.destroy();
        throw new WatchRefused(response.statusCode);
      }
      lastByteAt = performance.now();
      response.body.on('data', (chunk: Buffer) => {
        if (ended) return;
        lastByteAt = performance.now();
        try {
          lines.write(chunk);
        } catch (error) {
          end(error);
        }
      });
      response.body.on('error', end);
      response.body.on('end', () => end(null));
      response.body.on('close', () => end(null));
    } catch (error) {
      end(error);
    }
    return controller;
  }
}

/**
 * One line of a watch, parsed. JSON.parse's own error quotes the text around the fault, which may be
 * an object's content: this error says how long the line was, and nothing of it.
 */
function parseEvent(line: Buffer): { type: string; object: unknown } {
  try {
    return JSON.parse(line.toString('utf8')) as { type: string; object: unknown };
  } catch {
    throw new Error(`a watch event that is not JSON (${line.length} bytes)`);
  }
}

/** A byte stream cut into its lines (without the newline), each handed on as soon as it is whole; a line longer than `maxBytes` throws. */
export class LineSplitter {
  readonly #maxBytes: number;
  readonly #onLine: (line: Buffer) => void;
  /** The start of a line that has not ended yet: the chunks it came in. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;

  constructor(maxBytes: number, onLine: (line: Buffer) => void) {
    this.#maxBytes = maxBytes;
    this.#onLine = onLine;
  }

  write(chunk: Buffer): void {
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
      let line = chunk.subarray(start, newline);
      if (this.#pending.length > 0) {
        this.#pending.push(line);
        line = Buffer.concat(this.#pending, this.#pendingBytes + line.length);
        this.#pending = [];
        this.#pendingBytes = 0;
      }
      start = newline + 1;
      if (line.length > this.#maxBytes) throw this.#tooLong();
      if (line.length > 0) this.#onLine(line);
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.#pendingBytes += rest.length;
      if (this.#pendingBytes > this.#maxBytes) throw this.#tooLong();
      this.#pending.push(rest);
    }
  }

  #tooLong(): Error {
    return new Error(`a watch event of more than ${this.#maxBytes} bytes, the most an object may weigh as sent`);
  }
}
