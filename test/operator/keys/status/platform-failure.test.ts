import { describe, expect, it } from '@jest/globals';
import { PlatformError, type PlatformErrorCode } from '../../../../src/platform/index.ts';
import { asPlatformFailure, failureReason, unverifiableReason } from '../../../../src/operator/keys/status/platform-failure.ts';
import { PLATFORM_FAILURE_REASONS, platformFailureReason } from '../../../../src/operator/keys/status/platform-reasons.ts';

function platformError(code: PlatformErrorCode, status: number | undefined): PlatformError {
  return new PlatformError({
    code,
    disposition: 'terminal',
    message: 'm',
    method: 'POST',
    route: '/api_keys',
    requestId: 'req-1',
    ...(status !== undefined ? { status } : {}),
  });
}

describe('platform failures', () => {
  it.each([
    ['UNAUTHORIZED', 401, 'Unauthorized'],
    ['FORBIDDEN', 403, 'Forbidden'],
    ['NOT_FOUND', 404, 'NotFound'],
    ['INVALID_REQUEST', 400, 'InvalidSpec'],
    ['CONFLICT', 409, 'InvalidSpec'],
    ['RATE_LIMITED', 429, 'RateLimited'],
    ['UNAVAILABLE', 503, 'PlatformUnavailable'],
    ['SERVER_ERROR', 500, 'PlatformUnavailable'],
    ['TIMEOUT', undefined, 'PlatformUnavailable'],
  ] as [PlatformErrorCode, number | undefined, string][])('%s maps to reason %s', (code, status, reason) => {
    const failure = asPlatformFailure(platformError(code, status));
    expect(failure).toBeDefined();
    const answer = failureReason(failure, 'issuing a key');
    expect(answer.reason).toBe(reason);
    expect(answer.message).toContain('issuing a key');
    expect(answer.message).toContain('req-1');
  });

  it('recognises only src/platform errors (by their class), never a look-alike', () => {
    expect(asPlatformFailure(new Error('x'))).toBeUndefined();
    expect(asPlatformFailure({ code: 'UNAUTHORIZED', disposition: 'terminal' })).toBeUndefined();
    expect(failureReason(undefined, 'doing').reason).toBe('Error');
  });

  it.each([
    ['UNAUTHORIZED', 401, 'CredentialsRefused'],
    ['FORBIDDEN', 403, 'CredentialsRefused'],
    ['SERVER_ERROR', 502, 'PlatformUnavailable'],
    ['TIMEOUT', undefined, 'PlatformUnavailable'],
    ['RATE_LIMITED', 429, 'RateLimited'],
  ] as [PlatformErrorCode, number | undefined, string][])('a drift check failing with %s is %s', (code, status, reason) => {
    const answer = unverifiableReason(platformError(code, status));
    expect(answer.reason).toBe(reason);
    expect(answer.message).toContain('req-1');
  });
});

describe('the one platform failure -> reason table (platform-reasons.ts)', () => {
  // Every code of src/platform, the reason it reads on KeyIssued/Ready and on OperationsSettled alike.
  const table: [PlatformErrorCode, string][] = [
    ['UNAUTHORIZED', 'Unauthorized'],
    ['FORBIDDEN', 'Forbidden'],
    ['NOT_FOUND', 'NotFound'],
    ['INVALID_REQUEST', 'InvalidSpec'],
    ['CONFLICT', 'InvalidSpec'],
    ['RATE_LIMITED', 'RateLimited'],
    ['LOCKED', 'PlatformUnavailable'],
    ['SERVER_ERROR', 'PlatformUnavailable'],
    ['UNAVAILABLE', 'PlatformUnavailable'],
    ['NETWORK', 'PlatformUnavailable'],
    ['TIMEOUT', 'PlatformUnavailable'],
    ['INVALID_RESPONSE', 'PlatformUnavailable'],
    ['ABORTED', 'PlatformUnavailable'],
  ];

  it('has exactly one row per platform error code', () => {
    expect(Object.entries(PLATFORM_FAILURE_REASONS).sort()).toEqual([...table].sort());
  });

  it.each(table)('%s reads %s in the key lifecycle and in the operations mirror', (code, reason) => {
    const error = platformError(code, undefined);
    expect(platformFailureReason(error)).toBe(reason);
    // The key lifecycle's reason (failureReason) is the table's.
    expect(failureReason(error, 'issuing a key').reason).toBe(reason);
  });

  it('reads Error for anything that is not a platform error', () => {
    expect(platformFailureReason(undefined)).toBe('Error');
  });
});
