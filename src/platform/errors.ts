// The one place that decides what a failed platform call means: a stable `code` to branch on
// (undici style: callers never parse message text) and a `disposition` that says whether the
// call may be repeated. Everything else in src/platform asks `classify()`; nothing re-derives it.
//
// Why three dispositions, not "retryable or not": the platform returns a key's secret only in
// the create response (docs/platform-api.md, Resources › API key: returned once, in the create response). When a
// POST's outcome is unknown, a blind retry could mint a second live key and lose the first one's
// secret, so such failures are 'ambiguous' and go to the operator's recovery protocol
// (docs/design.md section 3.2) instead of being retried here.

export type PlatformErrorCode =
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'INVALID_REQUEST'
  | 'RATE_LIMITED'
  | 'LOCKED'
  | 'SERVER_ERROR'
  | 'UNAVAILABLE'
  | 'NETWORK'
  | 'TIMEOUT'
  | 'INVALID_RESPONSE'
  | 'ABORTED';

/**
 * - `retryable`: the platform did not perform the request (or repeating it is harmless); the
 *   client has already retried it with backoff before throwing, and a caller may try again later
 *   (after `retryAfterMs` when set).
 * - `ambiguous`: a non-idempotent request may or may not have been performed. Never repeat it
 *   blindly: observe the platform first (docs/design.md section 3.2).
 * - `terminal`: repeating the same request will fail the same way until something else changes
 *   (credentials, permissions, the request itself).
 */
export type Disposition = 'retryable' | 'ambiguous' | 'terminal';

/** What went wrong with one attempt, as seen by the transport. */
export type Failure =
  /** The platform answered with a non-2xx status. */
  | { kind: 'status'; status: number }
  /**
   * The connection could not be opened (refused, DNS, unreachable, connect timeout), so the
   * platform never saw the request.
   */
  | { kind: 'connect'; timedOut: boolean }
  /** The connection failed after the request may have been written (reset, closed, truncated). */
  | { kind: 'network' }
  /** No (complete) response within the time limit after the request may have been written. */
  | { kind: 'timeout' }
  /** The caller's AbortSignal fired; `sent` tells whether the request may have left the process. */
  | { kind: 'aborted'; sent: boolean }
  /** A 2xx response whose body does not match the schema (or is not JSON). */
  | { kind: 'invalid-response' };

export interface Classification {
  code: PlatformErrorCode;
  disposition: Disposition;
}

/**
 * Methods whose repetition has no extra effect. DELETE here is only ever a key revocation, which
 * is immediate and permanent (docs/platform-api.md, Endpoints › Revoke key): revoking twice leaves the
 * same state. POST (create key, create branch) is the only non-idempotent method the client uses.
 */
export function isIdempotent(method: string): boolean {
  const m = method.toUpperCase();
  return m === 'GET' || m === 'HEAD' || m === 'DELETE' || m === 'OPTIONS';
}

function codeForStatus(status: number): PlatformErrorCode {
  switch (status) {
    case 400:
    case 422:
      return 'INVALID_REQUEST';
    case 401:
      // docs/platform-api.md, Errors: missing header, invalid key, revoked key.
      return 'UNAUTHORIZED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 408:
      return 'TIMEOUT';
    case 409:
      return 'CONFLICT';
    case 423:
      return 'LOCKED';
    case 429:
      return 'RATE_LIMITED';
    case 503:
      return 'UNAVAILABLE';
  }
  if (status >= 500) return 'SERVER_ERROR';
  if (status >= 400) return 'INVALID_REQUEST';
  // 1xx/3xx reaching us (undici does not follow redirects): not an answer this client understands.
  return 'INVALID_RESPONSE';
}

/** The single decision table. Pure; table-tested in test/platform/errors.test.ts. */
export function classify(method: string, failure: Failure): Classification {
  const idempotent = isIdempotent(method);
  switch (failure.kind) {
    case 'status': {
      const code = codeForStatus(failure.status);
      // "Any request that returns a 503 Service Unavailable response is always safe to retry",
      // "423 Locked ... is safe to retry" (GeneralError in the platform's OpenAPI), and a 429 is
      // rejected before any work (docs/platform-api.md, Limits): none of these performed the request,
      // so even a POST may be repeated after waiting.
      if (code === 'RATE_LIMITED' || code === 'LOCKED' || code === 'UNAVAILABLE') {
        return { code, disposition: 'retryable' };
      }
      // Any other 5xx (and 408) may have been raised after the write committed.
      if (code === 'SERVER_ERROR' || code === 'TIMEOUT') {
        return { code, disposition: idempotent ? 'retryable' : 'ambiguous' };
      }
      return { code, disposition: 'terminal' };
    }
    case 'connect':
      // Nothing was sent: safe to repeat for every method.
      return { code: failure.timedOut ? 'TIMEOUT' : 'NETWORK', disposition: 'retryable' };
    case 'network':
      return { code: 'NETWORK', disposition: idempotent ? 'retryable' : 'ambiguous' };
    case 'timeout':
      return { code: 'TIMEOUT', disposition: idempotent ? 'retryable' : 'ambiguous' };
    case 'aborted':
      // The caller asked us to stop, so nothing is retried. A POST already on the wire may still
      // have been performed by the platform.
      return { code: 'ABORTED', disposition: failure.sent && !idempotent ? 'ambiguous' : 'terminal' };
    case 'invalid-response':
      // A 2xx means the platform did the work; for a create we could not read the result (the
      // secret is lost), so the operator must recover. For reads a schema mismatch does not fix
      // itself by repetition.
      return { code: 'INVALID_RESPONSE', disposition: idempotent ? 'terminal' : 'ambiguous' };
  }
}

export interface PlatformErrorInit extends Classification {
  message: string;
  method: string;
  /** Route template, e.g. '/organizations/:org_id/api_keys' (never the concrete path with ids). */
  route: string;
  status?: number;
  requestId?: string;
  retryAfterMs?: number;
  /** The `code` field of the platform's error body ({"code","message","request_id"}), if any. */
  platformCode?: string;
  cause?: unknown;
}

const BRAND = Symbol.for('neon-key-operator.PlatformError');

/**
 * Every failure of a PlatformClient call. Carries no request or response body and no headers:
 * the API key and created secrets never reach an error (docs/design.md section 2, "A key's secret never
 * appears in status, events, logs or metrics").
 */
export class PlatformError extends Error {
  readonly code: PlatformErrorCode;
  readonly disposition: Disposition;
  readonly method: string;
  readonly route: string;
  readonly status?: number;
  readonly requestId?: string;
  readonly retryAfterMs?: number;
  readonly platformCode?: string;

  constructor(init: PlatformErrorInit) {
    // `cause` set through the options is a non-enumerable own property, so it stays out of
    // JSON.stringify(error).
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'PlatformError';
    this.code = init.code;
    this.disposition = init.disposition;
    this.method = init.method;
    this.route = init.route;
    if (init.status !== undefined) this.status = init.status;
    if (init.requestId !== undefined) this.requestId = init.requestId;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
    if (init.platformCode !== undefined) this.platformCode = init.platformCode;
    Object.defineProperty(this, BRAND, { value: true });
  }

  get retryable(): boolean {
    return this.disposition === 'retryable';
  }

  get ambiguous(): boolean {
    return this.disposition === 'ambiguous';
  }
}

/** Brand check rather than instanceof alone, so two loaded copies of this module still agree. */
export function isPlatformError(e: unknown): e is PlatformError {
  return e instanceof PlatformError || (typeof e === 'object' && e !== null && (e as Record<symbol, unknown>)[BRAND] === true);
}
