// A loopback proxy between the operator and the emulator that notes every key create the operator
// sends: the organization in its path and which credentials sent it (a digest of the bearer), with
// the platform's answer. The campaign judges from it, not from the operator's own log, that a
// create for an organization its credentials do not belong to never reaches the platform (issue 41:
// foreign and random organization ids). Everything else passes through untouched, but for one
// fault of its own: the answer to a chosen key create dropped after the platform committed it
// (drop-after-commit, as the emulator's fault rules do, but for the creates of one resource only:
// the emulator's rules are global and cannot tell whose create it is). The platform has the key;
// the operator's connection is cut before it learns of it. A hook runs just before the cut or just
// after it (the tenant editing the resource's create intent while the operator recovers).
import { createHash } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const ORGANIZATION_CREATE = /^\/api\/v2\/organizations\/([^/?]+)\/api_keys\/?(?:\?.*)?$/;
const PERSONAL_CREATE = /^\/api\/v2\/api_keys\/?(?:\?.*)?$/;

/** A create whose answer the tap drops once the platform has committed it. */
export interface DroppedCreate {
  at: number;
  keyName: string;
  keyId: number | undefined;
}

interface ArmedDrop {
  /** Whether a create of this key name is the one to drop. */
  matches: (keyName: string) => boolean;
  /** Runs once the platform has committed the key, before (or, `after`, right after) the operator's connection is cut. */
  hook: ((dropped: DroppedCreate) => Promise<void>) | undefined;
  after: boolean;
  resolve: (dropped: DroppedCreate) => void;
}

export interface TappedCreate {
  at: number;
  organizationId: string;
  credentials: string;
  status: number;
}

/** The digest the tap records for a credentials value (never the value itself). */
export const credentialsDigest = (apiKey: string): string => createHash('sha256').update(apiKey).digest('hex').slice(0, 16);

export class PlatformTap {
  readonly #server: Server;
  readonly #target: URL;
  /** Every organization key create sent (POST /organizations/:org_id/api_keys). */
  readonly creates: TappedCreate[] = [];
  /** GET /users/me/organizations sent (the operator's membership checks). */
  membershipChecks = 0;
  requests = 0;
  /** Every create answer dropped after the commit. */
  readonly dropped: DroppedCreate[] = [];
  readonly #armed = new Set<ArmedDrop>();
  #baseUrl = '';

  private constructor(target: string) {
    this.#target = new URL(target);
    this.#server = createServer((req, res) => {
      this.requests += 1;
      const path = req.url ?? '/';
      const create = req.method === 'POST' ? ORGANIZATION_CREATE.exec(path) : null;
      if (req.method === 'GET' && path.startsWith('/api/v2/users/me/organizations')) this.membershipChecks += 1;
      const bearer = /^Bearer (.+)$/i.exec(String(req.headers.authorization ?? ''))?.[1] ?? '';
      const note = (status: number): void => {
        if (create !== null)
          this.creates.push({ at: Date.now(), organizationId: decodeURIComponent(create[1] ?? ''), credentials: credentialsDigest(bearer), status });
      };
      const anyCreate = req.method === 'POST' && (create !== null || PERSONAL_CREATE.test(path));
      if (anyCreate && this.#armed.size > 0) {
        // Read whole to see the key's name; sent on as it came.
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          const body = Buffer.concat(chunks);
          let keyName = '';
          try {
            keyName = String((JSON.parse(body.toString('utf8')) as { key_name?: unknown }).key_name ?? '');
          } catch {
            // not JSON: the platform answers it
          }
          const armed = [...this.#armed].find((a) => a.matches(keyName));
          this.#forward(req, res, path, body, note, armed === undefined ? undefined : { armed, keyName });
        });
        return;
      }
      this.#forward(req, res, path, undefined, note, undefined);
    });
  }

  #forward(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    body: Buffer | undefined,
    note: (status: number) => void,
    drop: { armed: ArmedDrop; keyName: string } | undefined,
  ): void {
    const upstream = request({ host: this.#target.hostname, port: this.#target.port, method: req.method, path, headers: req.headers }, (answer) => {
      const status = answer.statusCode ?? 0;
      note(status);
      if (drop !== undefined && status >= 200 && status < 300 && this.#armed.has(drop.armed)) {
        // Committed: the key exists on the platform. Its answer never reaches the operator.
        this.#armed.delete(drop.armed);
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on(
          'end',
          () =>
            void (async () => {
              let keyId: number | undefined;
              try {
                const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown }).id;
                keyId = typeof id === 'number' ? id : undefined;
              } catch {
                // the answer's body is not the tap's to judge
              }
              const dropped = { at: Date.now(), keyName: drop.keyName, keyId };
              this.dropped.push(dropped);
              if (!drop.armed.after) await drop.armed.hook?.(dropped).catch(() => undefined);
              res.socket?.destroy();
              res.destroy();
              drop.armed.resolve(dropped);
              if (drop.armed.after) await drop.armed.hook?.(dropped).catch(() => undefined);
            })(),
        );
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => {
      note(0);
      res.destroy();
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    if (body === undefined) req.pipe(upstream);
    else upstream.end(body);
  }

  /**
   * Drops the answer of the next committed create whose key name `matches` (the operator's
   * connection cut: drop-after-commit), running `hook` before the cut, or right after it with
   * `after`. Resolves with the dropped create; undefined after `ms` without one (disarmed).
   */
  async dropCreate(
    matches: (keyName: string) => boolean,
    ms: number,
    hook?: (dropped: DroppedCreate) => Promise<void>,
    after = false,
  ): Promise<DroppedCreate | undefined> {
    let armed!: ArmedDrop;
    const dropped = new Promise<DroppedCreate>((resolve) => {
      armed = { matches, hook, after, resolve };
    });
    this.#armed.add(armed);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    });
    const result = await Promise.race([dropped, timeout]);
    clearTimeout(timer);
    // Disarmed: a create in flight when the wait ends is answered as usual.
    if (result === undefined) this.#armed.delete(armed);
    return result;
  }

  /** Listening on loopback in front of `target` (the emulator's base URL, …/api/v2). */
  static async start(target: string): Promise<PlatformTap> {
    const tap = new PlatformTap(target);
    await new Promise<void>((resolve) => tap.#server.listen(0, '127.0.0.1', resolve));
    const { port } = tap.#server.address() as AddressInfo;
    tap.#baseUrl = `http://127.0.0.1:${port}${tap.#target.pathname.replace(/\/$/, '')}`;
    return tap;
  }

  /** The platform URL the operator is given. */
  get baseUrl(): string {
    return this.#baseUrl;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
