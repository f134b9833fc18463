// "10 requests per second" on the organization API key creation endpoint (docs/platform-api.md
// "Limits"): a sliding one-second window per organization. Beyond it: 429 with Retry-After.
// Wall-clock time on purpose (not timeScale): clients throttle against the real figure.

export interface RateLimiter {
  /** undefined when admitted (and counted); otherwise the seconds to wait, for Retry-After. */
  take(bucket: string, nowMs?: number): number | undefined;
}

export function slidingWindowLimiter(limit: number, windowMs: number): RateLimiter {
  const admitted = new Map<string, number[]>();
  return {
    take(bucket, nowMs = Date.now()) {
      const times = (admitted.get(bucket) ?? []).filter((t) => nowMs - t < windowMs);
      if (times.length >= limit) {
        admitted.set(bucket, times);
        const oldest = times[0] ?? nowMs;
        return Math.max(1, Math.ceil((oldest + windowMs - nowMs) / 1000));
      }
      times.push(nowMs);
      admitted.set(bucket, times);
      return undefined;
    },
  };
}
