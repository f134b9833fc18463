// The admin API and the console take no credentials: they trust the loopback connection. A
// loopback connection does not prove a loopback caller, though: any web page open in the
// developer's browser can make it send requests to 127.0.0.1 (a form POST needs no CORS
// preflight), and a DNS name rebound to 127.0.0.1 turns a page of that name into a same-origin
// caller. Either could then create users, hand out their first key or inject faults. The checks
// below refuse what only a browser sends or what only such a page can arrange, and keep what
// the project's own clients send (fetch from Node, curl through a port-forward):
//
// - an `Origin` header: browsers add it to every cross-origin request and to every state-changing
//   one; Node's fetch and curl never send it. Any value, "null" included, is refused.
// - a `Host` that is not loopback: a rebound DNS name arrives with its own name as Host; the
//   project's clients name 127.0.0.1, localhost or [::1].
// - a state-changing request whose body is not `application/json`: the three content types a
//   page may send cross-site without a preflight (text/plain, form-urlencoded, multipart) are not
//   JSON, so a cross-site form can never be read as an admin command.
import type { IncomingMessage } from 'node:http';
import { ApiError, forbidden } from './http-io.ts';

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** 127.0.0.0/8, localhost or [::1], each with or without a port. */
export function isLoopbackHost(host: string): boolean {
  const match = /^(localhost|\[::1\]|(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}))(?::(\d{1,5}))?$/i.exec(host);
  if (match === null) return false;
  if (match[6] !== undefined && Number(match[6]) > 65_535) return false;
  if (match[2] === undefined) return true;
  const octets = [match[2], match[3], match[4], match[5]].map(Number);
  return octets[0] === 127 && octets.every((o) => o <= 255);
}

/** A body is on its way when the request declares a length above zero or a chunked transfer. */
function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? '0') > 0;
}

/** The media type of a Content-Type header, without parameters (charset), lower case. */
function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
}

/** Throws the emulator's error (403, or 415 for the content type) for a request a browser could have been made to send. */
export function refuseCrossSite(req: IncomingMessage, method: string): void {
  if (req.headers.origin !== undefined) {
    throw forbidden(
      "cross-site request refused: the admin API and the console take no request with an Origin header (browsers add it; the emulator's own clients never do)",
    );
  }
  const host = req.headers.host;
  if (host === undefined || !isLoopbackHost(host)) {
    throw forbidden(
      `request refused: Host ${JSON.stringify(host ?? '').slice(0, 100)} is not a loopback name; the admin API and the console answer to 127.0.0.1, localhost or [::1] only`,
    );
  }
  // POST, PUT and PATCH always carry a command; a DELETE only when it has a body.
  if (STATE_CHANGING.has(method) && (method !== 'DELETE' || hasBody(req)) && mediaType(req.headers['content-type']) !== 'application/json') {
    throw new ApiError(
      415,
      'UNSUPPORTED_MEDIA_TYPE',
      `${method} to the admin API needs Content-Type: application/json (got ${JSON.stringify(req.headers['content-type'] ?? '').slice(0, 100)})`,
    );
  }
}
