// The moments a campaign disturbs everyone on purpose, and what the victims' bounds allow for them:
// - the operator's planned restarts (a rollout: SIGTERM, drain, a new incarnation; operator.ts),
//   each a window from the SIGTERM to the new incarnation's readiness. An operation of a victim that
//   overlaps one may take the lease's takeover time (the operator's --leader-elect-lease-duration
//   default, 15 s: what a new leader of a rollout may wait before it reconciles) beyond its bound;
// - revoke outages (attacker.ts, the revoke-outage playbook): the emulator answers 503 to every
//   revoke for 10-20 s. The faults are the platform's, so global: one outage at a time, and a
//   victim's delete that overlaps one may take twice the outage beyond its bound (its revoke fails
//   until the outage ends, and the failure backoff doubles: the first retry after the outage comes
//   at most about one outage later).
// - requeue storms (attacker.ts, the requeue-storm playbook): a tenant rewrites invalid create
//   intents on many of its resources in a loop, and the answers of a few victims' creates are
//   dropped after the platform committed them (platform-tap.ts). They add nothing to the bounds:
//   the work queue's per-namespace token bucket is there so that one namespace's storm does not
//   delay another's work; the operations they overlap are reported apart all the same.
import type { Environment } from '../environment.ts';
import { admin } from '../platform-faults.ts';

/** The operator's default --leader-elect-lease-duration (src/operator/flags.ts). */
export const LEASE_TAKEOVER_MS = 15_000;
const REVOKE_ROUTES = ['/api/v2/api_keys/:key_id', '/api/v2/organizations/:org_id/api_keys/:key_id'];

export interface Window {
  from: number;
  to: number | undefined;
  by: string;
}
export type Operation = 'ready' | 'rotate' | 'delete';

export class Disruptions {
  readonly #env: Environment;
  readonly restarts: Window[] = [];
  readonly revokeOutages: (Window & { revokesRefused: number })[] = [];
  /** Requeue storms: no allowance, their operations reported apart (run.ts). */
  readonly storms: Window[] = [];
  /** The storms' drops of victims' create answers: one armed at a time, each victim's key name base once. */
  readonly victimDrops = { armed: false, bases: new Set<string>() };
  #outage: Promise<void> | undefined;

  constructor(env: Environment) {
    this.#env = env;
  }

  /** The extra time (ms) an operation from `since` to `until` is allowed for the windows it overlaps. */
  allowanceMs(what: Operation, since: number, until: number): number {
    const overlaps = (w: Window): boolean => w.from <= until && (w.to ?? Date.now()) >= since;
    let extra = this.restarts.some(overlaps) ? LEASE_TAKEOVER_MS : 0;
    if (what === 'delete') for (const w of this.revokeOutages.filter(overlaps)) extra += 2 * ((w.to ?? Date.now()) - w.from);
    return extra;
  }

  /** Whether an operation from `since` to `until` overlaps a requeue storm. */
  inStorm(since: number, until: number): boolean {
    return this.storms.some((w) => w.from <= until && (w.to ?? Date.now()) >= since);
  }

  /** Whether an operation from `since` to `until` overlaps any window (its figures are kept apart). */
  disturbed(what: Operation, since: number, until: number): boolean {
    return this.allowanceMs(what, since, until) > 0;
  }

  /**
   * Every revoke answered 503 for `ms`, while `during` runs (it is given the time the outage ends);
   * undefined without an outage when another one is on and does not end within `waitMs`, or when
   * `cancelled` says so once it has (the attacks are over).
   */
  async revokeOutage<T>(by: string, ms: number, waitMs: number, cancelled: () => boolean, during: (until: number) => Promise<T>): Promise<T | undefined> {
    const deadline = Date.now() + waitMs;
    while (this.#outage !== undefined) {
      if (Date.now() > deadline) return undefined;
      await Promise.race([this.#outage, new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())))]);
    }
    if (cancelled()) return undefined;
    let done!: () => void;
    this.#outage = new Promise<void>((resolve) => {
      done = resolve;
    });
    const window = { from: Date.now(), to: undefined as number | undefined, by, revokesRefused: 0 };
    this.revokeOutages.push(window);
    try {
      await admin(this.#env.emulator, 'PUT', '/faults', {
        rules: REVOKE_ROUTES.map((route) => ({ method: 'DELETE', route, probability: 1, kind: 'status', status: 503 })),
      });
      const until = Date.now() + ms;
      const result = await Promise.all([during(until), new Promise((resolve) => setTimeout(resolve, ms))]);
      return result[0];
    } finally {
      const rules = await admin<{ rules: { injected: number }[] }>(this.#env.emulator, 'GET', '/faults').catch(() => ({ rules: [] }));
      window.revokesRefused = rules.rules.reduce((n, r) => n + r.injected, 0);
      await admin(this.#env.emulator, 'DELETE', '/faults').catch(() => undefined);
      window.to = Date.now();
      this.#outage = undefined;
      done();
    }
  }
}
