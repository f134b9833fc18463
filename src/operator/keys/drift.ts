// Drift detection (DESIGN.md section 3, Drift): ONE list call per (credentials, scope) per interval
// shows every managed key of that scope, instead of one call per key. Reconciles of many resources
// share the snapshot; concurrent refreshes share one request.
import type { KeyAdapter, KeyPlatform, ListedKey } from './adapter.ts';

const CREATED_AT_MARGIN_MS = 5_000;

interface Snapshot<T> { at: number; value: T }

export class DriftCache {
  readonly #intervalMs: number;
  readonly #now: () => number;
  readonly #keys = new Map<string, Snapshot<Map<number, ListedKey>>>();
  readonly #projects = new Map<string, Snapshot<Set<string>>>();
  readonly #inflight = new Map<string, Promise<unknown>>();
  readonly #failures = new Map<string, { at: number; error: unknown }>();

  constructor(intervalMs: number, now: () => number = Date.now) {
    this.#intervalMs = intervalMs;
    this.#now = now;
  }

  async #fresh<T>(cache: Map<string, Snapshot<T>>, id: string, load: () => Promise<T>, maxAgeMs = this.#intervalMs): Promise<Snapshot<T>> {
    const cached = cache.get(id);
    if (cached !== undefined && this.#now() - cached.at < maxAgeMs) return cached;
    // A failed list is remembered for the interval too: every resource on broken credentials (or
    // an unavailable platform) asks once per interval, not once per resource and requeue. Fixed
    // credentials are other credentials (another id), asked at once.
    const failed = this.#failures.get(id);
    if (failed !== undefined && this.#now() - failed.at < maxAgeMs) throw failed.error;
    const running = this.#inflight.get(id) as Promise<Snapshot<T>> | undefined;
    if (running !== undefined) return running;
    const at = this.#now();
    const promise = load().then((value) => {
      const snapshot = { at, value };
      cache.set(id, snapshot);
      this.#failures.delete(id);
      return snapshot;
    }, (error: unknown) => {
      this.#failures.set(id, { at, error });
      throw error;
    }).finally(() => this.#inflight.delete(id));
    this.#inflight.set(id, promise);
    return promise;
  }

  /**
   * Live / Absent for a recorded key. A key created after the list was taken is not in it, so
   * absence counts only for keys older than the snapshot.
   */
  async keyState(credentialsId: string, adapter: KeyAdapter, platform: KeyPlatform, keyId: number, createdAt: number | undefined): Promise<{ state: 'Live' | 'Absent'; key?: ListedKey }> {
    const snapshot = await this.#fresh(this.#keys, `keys|${credentialsId}|${adapter.listScope}`, async () =>
      new Map((await adapter.list(platform)).map((k) => [k.id, k] as const)));
    const key = snapshot.value.get(keyId);
    if (key !== undefined) return { state: 'Live', key };
    // created_at has second precision and clocks differ: only keys clearly older than the list count.
    if (createdAt === undefined || createdAt >= snapshot.at - CREATED_AT_MARGIN_MS) return { state: 'Live' };
    return { state: 'Absent' };
  }

  async projectInOrganization(credentialsId: string, platform: KeyPlatform, organizationId: string, projectId: string): Promise<boolean> {
    const snapshot = await this.#fresh(this.#projects, `projects|${credentialsId}|${organizationId}`, async () => {
      const answer = await platform.listProjects({ orgId: organizationId });
      const projects = Array.isArray(answer) ? answer : answer.projects;
      return new Set(projects.map((p) => p.id));
    });
    return snapshot.value.has(projectId);
  }
}
