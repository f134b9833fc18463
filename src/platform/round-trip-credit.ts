// The part of a round trip the org key limiter (sliding-window.ts, where the reasoning is) may give
// back: the smallest round trip recently observed less a margin, never more than half a window, and
// nothing at all until enough round trips over enough time have been seen, or for a while after
// the platform answered 429.

/**
 * Kept back from the smallest recent round trip: 10 % of it plus 10 ms (jitter of the network
 * grows with its length; timer and clock granularity, the platform counting in whole ms), and
 * never less than 30 ms: a stalled event loop (GC, a starved CPU) lengthens every round trip in
 * flight by its length whatever the network (see COVERED_WINDOWS).
 */
const MARGIN_SHARE = 0.1;
const MARGIN_MS = 10;
const MIN_MARGIN_MS = 30;
/** Round trips older than this many windows are forgotten: round trips change. */
const SAMPLE_WINDOWS = 10;
/**
 * No credit before the round trips kept go back this many windows: a stall of the event loop (or of
 * the platform) lengthens every round trip for its duration, and the first seconds of a process
 * (connections opening, code being compiled, other work starting) are the most stalled. On a
 * loaded 2-core machine, three whole rounds were seen 60 ms slower than the rounds after them.
 */
const COVERED_WINDOWS = 5;
/** No credit before this many round trips per slot within SAMPLE_WINDOWS (see minimumSamples). */
const SAMPLES_PER_SLOT = 3;
/** No credit for this many windows after a 429; doubled on each further 429, up to MAX_CAUTION_WINDOWS. */
const FIRST_CAUTION_WINDOWS = 10;
const MAX_CAUTION_WINDOWS = 300;

interface Sample {
  at: number;
  rttMs: number;
}

export class RoundTripCredit {
  readonly #windowMs: number;
  /**
   * The first requests of a burst open connections (TCP, TLS) on their way out, so their round
   * trips are longer than those that follow on the same connections; the minimum counts only once
   * two more rounds of `limit` requests, sent on connections already open, have been answered (and
   * a few round trips are too few to show the smallest one).
   */
  readonly #minimumSamples: number;
  readonly #maxSamples: number;
  /** Oldest first. */
  #samples: Sample[] = [];
  #cautionUntil = Number.NEGATIVE_INFINITY;
  #cautionMs: number;

  constructor(limit: number, windowMs: number) {
    this.#windowMs = windowMs;
    this.#minimumSamples = SAMPLES_PER_SLOT * limit;
    // At the full rate, SAMPLE_WINDOWS windows hold this many answers; the bound keeps memory flat.
    this.#maxSamples = SAMPLE_WINDOWS * limit;
    this.#cautionMs = FIRST_CAUTION_WINDOWS * windowMs;
  }

  /** A request let through at `grantedAt` was answered by the platform at `now`. */
  answered(grantedAt: number, now: number): void {
    this.#samples.push({ at: now, rttMs: Math.max(0, now - grantedAt) });
    if (this.#samples.length > this.#maxSamples) this.#samples.shift();
  }

  /** The platform answered 429: it counted more than the limiter meant to send. */
  refused(now: number): void {
    this.#cautionUntil = now + this.#cautionMs;
    this.#cautionMs = Math.min(this.#cautionMs * 2, MAX_CAUTION_WINDOWS * this.#windowMs);
  }

  /**
   * Nothing kept can change a credit from `now` on: no round trip within SAMPLE_WINDOWS, no caution
   * in effect, and never a 429 (the next caution would be doubled). A new RoundTripCredit is then the same.
   */
  idle(now: number): boolean {
    const newest = this.#samples.at(-1);
    return (
      (newest === undefined || newest.at < now - SAMPLE_WINDOWS * this.#windowMs) &&
      now >= this.#cautionUntil &&
      this.#cautionMs === FIRST_CAUTION_WINDOWS * this.#windowMs
    );
  }

  /** Milliseconds a slot answered before `now` may be reused ahead of a full window after its answer. */
  creditMs(now: number): number {
    if (now < this.#cautionUntil) return 0;
    const since = now - SAMPLE_WINDOWS * this.#windowMs;
    while (this.#samples.length > 0 && (this.#samples[0] as Sample).at < since) this.#samples.shift();
    const oldest = this.#samples[0];
    if (oldest === undefined || this.#samples.length < this.#minimumSamples || now - oldest.at < COVERED_WINDOWS * this.#windowMs) return 0;
    let smallest = Number.POSITIVE_INFINITY;
    for (const s of this.#samples) smallest = Math.min(smallest, s.rttMs);
    const margin = Math.max(MIN_MARGIN_MS, MARGIN_SHARE * smallest + MARGIN_MS);
    return Math.min(this.#windowMs / 2, Math.max(0, smallest - margin));
  }
}
