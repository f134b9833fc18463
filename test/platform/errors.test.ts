import { describe, expect, it } from '@jest/globals';
import { classify, isPlatformError, PlatformError, type Disposition, type Failure, type PlatformErrorCode } from '../../src/platform/errors.ts';

type Row = [method: string, failure: Failure, code: PlatformErrorCode, disposition: Disposition];

const status = (s: number): Failure => ({ kind: 'status', status: s });

// docs/design.md section 3.2: GET/DELETE retry transient failures; a POST whose outcome is unknown
// is ambiguous; a POST answered 429/423/503 was not performed; 4xx are terminal.
const rows: Row[] = [
  // Reads: transient failures are retried.
  ['GET', status(500), 'SERVER_ERROR', 'retryable'],
  ['GET', status(502), 'SERVER_ERROR', 'retryable'],
  ['GET', status(503), 'UNAVAILABLE', 'retryable'],
  ['GET', status(504), 'SERVER_ERROR', 'retryable'],
  ['GET', status(429), 'RATE_LIMITED', 'retryable'],
  ['GET', status(423), 'LOCKED', 'retryable'],
  ['GET', status(408), 'TIMEOUT', 'retryable'],
  ['GET', { kind: 'network' }, 'NETWORK', 'retryable'],
  ['GET', { kind: 'timeout' }, 'TIMEOUT', 'retryable'],
  ['GET', { kind: 'connect', timedOut: false }, 'NETWORK', 'retryable'],
  ['GET', { kind: 'connect', timedOut: true }, 'TIMEOUT', 'retryable'],
  // Reads: permanent failures are terminal.
  ['GET', status(400), 'INVALID_REQUEST', 'terminal'],
  ['GET', status(401), 'UNAUTHORIZED', 'terminal'],
  ['GET', status(403), 'FORBIDDEN', 'terminal'],
  ['GET', status(404), 'NOT_FOUND', 'terminal'],
  ['GET', status(405), 'INVALID_REQUEST', 'terminal'],
  ['GET', status(409), 'CONFLICT', 'terminal'],
  ['GET', status(410), 'INVALID_REQUEST', 'terminal'],
  ['GET', status(422), 'INVALID_REQUEST', 'terminal'],
  ['GET', status(302), 'INVALID_RESPONSE', 'terminal'],
  ['GET', { kind: 'invalid-response' }, 'INVALID_RESPONSE', 'terminal'],
  ['GET', { kind: 'aborted', sent: true }, 'ABORTED', 'terminal'],
  ['GET', { kind: 'aborted', sent: false }, 'ABORTED', 'terminal'],
  ['get', status(503), 'UNAVAILABLE', 'retryable'],
  // Revoke (DELETE) is idempotent: treated as a read.
  ['DELETE', status(500), 'SERVER_ERROR', 'retryable'],
  ['DELETE', status(503), 'UNAVAILABLE', 'retryable'],
  ['DELETE', status(429), 'RATE_LIMITED', 'retryable'],
  ['DELETE', status(423), 'LOCKED', 'retryable'],
  ['DELETE', { kind: 'network' }, 'NETWORK', 'retryable'],
  ['DELETE', { kind: 'timeout' }, 'TIMEOUT', 'retryable'],
  ['DELETE', status(401), 'UNAUTHORIZED', 'terminal'],
  ['DELETE', status(403), 'FORBIDDEN', 'terminal'],
  ['DELETE', status(404), 'NOT_FOUND', 'terminal'],
  ['DELETE', { kind: 'aborted', sent: true }, 'ABORTED', 'terminal'],
  ['DELETE', { kind: 'invalid-response' }, 'INVALID_RESPONSE', 'terminal'],
  // POST: outcome unknown → ambiguous, never retried.
  ['POST', status(500), 'SERVER_ERROR', 'ambiguous'],
  ['POST', status(502), 'SERVER_ERROR', 'ambiguous'],
  ['POST', status(504), 'SERVER_ERROR', 'ambiguous'],
  ['POST', status(599), 'SERVER_ERROR', 'ambiguous'],
  ['POST', status(408), 'TIMEOUT', 'ambiguous'],
  ['POST', { kind: 'network' }, 'NETWORK', 'ambiguous'],
  ['POST', { kind: 'timeout' }, 'TIMEOUT', 'ambiguous'],
  ['POST', { kind: 'aborted', sent: true }, 'ABORTED', 'ambiguous'],
  ['POST', { kind: 'invalid-response' }, 'INVALID_RESPONSE', 'ambiguous'],
  // POST: the platform did not perform it → retryable.
  ['POST', status(503), 'UNAVAILABLE', 'retryable'],
  ['POST', status(429), 'RATE_LIMITED', 'retryable'],
  ['POST', status(423), 'LOCKED', 'retryable'],
  ['POST', { kind: 'connect', timedOut: false }, 'NETWORK', 'retryable'],
  ['POST', { kind: 'connect', timedOut: true }, 'TIMEOUT', 'retryable'],
  // POST: aborted before anything was sent (waiting on the limiter or a backoff).
  ['POST', { kind: 'aborted', sent: false }, 'ABORTED', 'terminal'],
  // POST: refused → terminal.
  ['POST', status(400), 'INVALID_REQUEST', 'terminal'],
  ['POST', status(401), 'UNAUTHORIZED', 'terminal'],
  ['POST', status(403), 'FORBIDDEN', 'terminal'],
  ['POST', status(404), 'NOT_FOUND', 'terminal'],
  ['POST', status(409), 'CONFLICT', 'terminal'],
  ['POST', status(413), 'INVALID_REQUEST', 'terminal'],
  ['POST', status(422), 'INVALID_REQUEST', 'terminal'],
  ['POST', status(301), 'INVALID_RESPONSE', 'terminal'],
];

describe('classify', () => {
  it.each(rows)('%s %j → %s %s', (method, failure, code, disposition) => {
    expect(classify(method, failure)).toEqual({ code, disposition });
  });

  it('never calls a POST failure after sending retryable unless the platform said it did nothing', () => {
    for (let s = 400; s < 600; s++) {
      const { disposition } = classify('POST', status(s));
      if (disposition === 'retryable') expect([423, 429, 503]).toContain(s);
    }
  });

  it('treats every 5xx of a read as retryable', () => {
    for (let s = 500; s < 600; s++) expect(classify('GET', status(s)).disposition).toBe('retryable');
  });
});

describe('PlatformError', () => {
  const err = new PlatformError({
    code: 'RATE_LIMITED',
    disposition: 'retryable',
    method: 'POST',
    route: '/organizations/:org_id/api_keys',
    status: 429,
    requestId: 'req-1',
    retryAfterMs: 1000,
    platformCode: 'TOO_MANY_REQUESTS',
    message: 'rate limited',
    cause: new Error('inner'),
  });

  it('carries its fields and a stable name', () => {
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('PlatformError');
    expect(err).toMatchObject({
      code: 'RATE_LIMITED',
      disposition: 'retryable',
      status: 429,
      requestId: 'req-1',
      retryAfterMs: 1000,
      platformCode: 'TOO_MANY_REQUESTS',
    });
    expect(err.retryable).toBe(true);
    expect(err.ambiguous).toBe(false);
  });

  it('keeps the cause out of its JSON', () => {
    const json = JSON.parse(JSON.stringify(err)) as Record<string, unknown>;
    expect(json.cause).toBeUndefined();
    expect(json.code).toBe('RATE_LIMITED');
  });

  it('is recognised by isPlatformError, other errors are not', () => {
    expect(isPlatformError(err)).toBe(true);
    expect(isPlatformError(new Error('x'))).toBe(false);
    expect(isPlatformError(null)).toBe(false);
    expect(isPlatformError({ code: 'NETWORK' })).toBe(false);
  });
});
