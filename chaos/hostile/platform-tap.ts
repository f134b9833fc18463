// A loopback proxy between the operator and the emulator that notes every key create the operator
// sends: the organization in its path and which credentials sent it (a digest of the bearer), with
// the platform's answer. The campaign judges from it, not from the operator's own log, that a
// create for an organization its credentials do not belong to never reaches the platform (issue 41:
// foreign and random organization ids). Everything else passes through untouched.
import { createHash } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const ORGANIZATION_CREATE = /^\/api\/v2\/organizations\/([^/?]+)\/api_keys\/?(?:\?.*)?$/;

export interface TappedCreate { at: number; organizationId: string; credentials: string; status: number }

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
  #baseUrl = '';

  private constructor(target: string) {
    this.#target = new URL(target);
    this.#server = createServer((req, res) => {
      this.requests += 1;
      const path = req.url ?? '/';
      const create = req.method === 'POST' ? ORGANIZATION_CREATE.exec(path) : null;
      if (req.method === 'GET' && path.startsWith('/api/v2/users/me/organizations')) this.membershipChecks += 1;
      const bearer = /^Bearer (.+)$/i.exec(String(req.headers.authorization ?? ''))?.[1] ?? '';
      const upstream = request({ host: this.#target.hostname, port: this.#target.port, method: req.method, path, headers: req.headers }, (answer) => {
        if (create !== null) this.creates.push({ at: Date.now(), organizationId: decodeURIComponent(create[1] ?? ''), credentials: credentialsDigest(bearer), status: answer.statusCode ?? 0 });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => {
        if (create !== null) this.creates.push({ at: Date.now(), organizationId: decodeURIComponent(create[1] ?? ''), credentials: credentialsDigest(bearer), status: 0 });
        res.destroy();
      });
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      req.pipe(upstream);
    });
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
