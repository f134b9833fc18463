// The drift lists are bounded in bytes (keys/observing/drift-budget.ts MAX_DRIFT_BYTES, docs/security.md
// Bounds), whatever a tenant's credentials list: against the emulator over HTTP, with real
// PlatformClients and DriftCaches. A tenant holds many credentials Secrets, each a personal key of
// one user who owns 10,000 personal keys (each named like an attempt of the operator, each with a tag
// of its own: a tagged key too): each credentials value is a list of its own, of 10,000 keys. The list calls
// are counted by a wrapper that passes each call on to the real client.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startEmulator, type Emulator } from '../../../../src/emulator/server.ts';
import { adapterFor, type KeyPlatform } from '../../../../src/operator/keys/adapter.ts';
import { MAX_DRIFT_BYTES, MAX_LISTS_AT_ONCE } from '../../../../src/operator/keys/observing/drift-budget.ts';
import { DriftCache } from '../../../../src/operator/keys/observing/drift.ts';
import type { KeyResource } from '../../../../src/operator/resources/schema.ts';
import { PlatformClient } from '../../../../src/platform/index.ts';

const KEYS = 10_000;
const CREDENTIALS = 40;
const MiB = 1024 * 1024;
const INTERVAL = 60_000;
const personal = adapterFor({ kind: 'ApiKey' } as KeyResource, { scope: 'Personal' } as never);

/** The attempt tag of key i (create-intent.ts attemptTagOf: the first 5 of the 8 characters after the name's last dash). */
const tagOf = (i: number): string => i.toString(36).padStart(5, '0');

/** The list calls made through `platform`: how many, how many at once at most, and in which order they started. */
interface Calls {
  made: number;
  inFlight: number;
  most: number;
  started: string[];
}

function counted(client: PlatformClient, calls: Calls, label: string): KeyPlatform {
  return {
    listPersonalKeys: async (...args: Parameters<PlatformClient['listPersonalKeys']>) => {
      calls.made += 1;
      calls.inFlight += 1;
      calls.most = Math.max(calls.most, calls.inFlight);
      calls.started.push(label);
      try {
        return await client.listPersonalKeys(...args);
      } finally {
        calls.inFlight -= 1;
      }
    },
  } as unknown as KeyPlatform;
}

const newCalls = (): Calls => ({ made: 0, inFlight: 0, most: 0, started: [] });

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe('the drift lists are bounded in bytes', () => {
  let emulator: Emulator;
  /** The tenant's credentials: personal keys of alice, each listing all her keys. */
  const credentials: { id: string; client: PlatformClient }[] = [];
  /** Ids of alice's keys, by index (key i named with tag tagOf(i)). */
  const keyIds: number[] = [];

  beforeAll(async () => {
    emulator = await startEmulator({ db: ':memory:', timeScale: 0.01, controlPlaneActivity: false });
    const aliceKey = emulator.bootstrap.users.find((u) => u.name === 'alice')?.personalKey ?? '';
    const alice = new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: aliceKey, retry: { maxAttempts: 1 } });
    const already = (await alice.listPersonalKeys()).length;
    // 16 creates at once (the emulator does not pace personal keys).
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < KEYS - already) {
          const i = next++;
          const made = await alice.createPersonalKey(`tenant-${tagOf(i)}abc`);
          keyIds[i] = made.id;
          if (i < CREDENTIALS + 1)
            credentials[i] = { id: `credentials-${i}`, client: new PlatformClient({ baseUrl: emulator.baseUrl, apiKey: made.key, retry: { maxAttempts: 1 } }) };
        }
      }),
    );
    expect((await alice.listPersonalKeys()).length).toBe(KEYS);
  }, 600_000);

  afterAll(async () => {
    await emulator?.close();
  });

  it(`${CREDENTIALS} credentials each listing ${KEYS} keys: the lists keep at most MAX_DRIFT_BYTES (by the cache's count and by the heap), ${MAX_LISTS_AT_ONCE} taken at once, each asker answered without a list of its own`, async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const settled = async (): Promise<number> => {
      for (let i = 0; i < 3; i++) {
        gc();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const { heapUsed, arrayBuffers } = process.memoryUsage();
      return heapUsed + arrayBuffers;
    };
    let now = 1_000_000;
    const calls = newCalls();
    const platforms = credentials.slice(0, CREDENTIALS).map((c) => counted(c.client, calls, c.id));
    // What the cache retains: the heap while it is held less the heap once it is let go (what the
    // process allocated meanwhile, the emulator's and the clients', is on both sides).
    const slot: { cache?: DriftCache } = { cache: new DriftCache(INTERVAL, () => now) };
    const cache = (): DriftCache => slot.cache as DriftCache;
    // Each credentials' resource checks its key (key i of the list), and its orphans (its tag): all at once.
    const ask = (): Promise<{ state: string; key?: { id: number } }[]> =>
      Promise.all(
        credentials.slice(0, CREDENTIALS).map(async (c, i) => {
          const state = await cache().keyState(c.id, personal, platforms[i] as KeyPlatform, keyIds[i] as number, undefined);
          expect(
            cache()
              .tagged(c.id, 'personal', tagOf(i))
              ?.keys.map((k) => k.id),
          ).toEqual([keyIds[i]]);
          return state;
        }),
      );
    const first = await ask();
    expect(first.map((s) => [s.state, s.key?.id])).toEqual(keyIds.slice(0, CREDENTIALS).map((id) => ['Live', id]));
    expect([calls.made, calls.inFlight, calls.most]).toEqual([CREDENTIALS, 0, MAX_LISTS_AT_ONCE]);
    // Every list is kept, the least recently asked with their askers' answers only.
    expect(cache().size).toBe(CREDENTIALS);
    expect(cache().bytes).toBeLessThanOrEqual(MAX_DRIFT_BYTES);
    expect(cache().bytes).toBeGreaterThan(MAX_DRIFT_BYTES / 2);
    const whole = cache().wholeLists;
    expect(whole).toBeGreaterThan(0);
    expect(whole).toBeLessThan(CREDENTIALS / 4);
    // The same askers again within the interval: answered from what is kept, no list.
    const again = await ask();
    expect(again.map((s) => [s.state, s.key?.id])).toEqual(first.map((s) => [s.state, s.key?.id]));
    expect(calls.made).toBe(CREDENTIALS);
    // An interval on, the sweep takes each list again, two at once; an asker of other credentials
    // meanwhile goes before the sweep's lists still waiting.
    now += INTERVAL;
    cache().refreshDue();
    const other = credentials[CREDENTIALS] as { id: string; client: PlatformClient };
    const otherState = await cache().keyState(other.id, personal, counted(other.client, calls, other.id), keyIds[CREDENTIALS] as number, undefined);
    expect(otherState.state).toBe('Live');
    expect(calls.started.slice(CREDENTIALS).indexOf(other.id)).toBeLessThanOrEqual(MAX_LISTS_AT_ONCE);
    await until(() => calls.made === 2 * CREDENTIALS + 1 && calls.inFlight === 0);
    expect(calls.most).toBe(MAX_LISTS_AT_ONCE);
    expect(cache().size).toBe(CREDENTIALS + 1);
    expect(cache().bytes).toBeLessThanOrEqual(MAX_DRIFT_BYTES);
    expect((await ask()).map((s) => s.state)).toEqual(first.map(() => 'Live'));
    expect(calls.made).toBe(2 * CREDENTIALS + 1);
    const kept = cache().bytes;
    const held = await settled();
    delete slot.cache;
    const released = await settled();
    const retained = held - released;
    // The heap agrees: what the cache held is within the budget, and within its own count of it.
    expect(retained).toBeLessThanOrEqual(MAX_DRIFT_BYTES + MiB);
    expect(retained).toBeLessThanOrEqual(kept + MiB);
    expect(retained).toBeGreaterThan(MAX_DRIFT_BYTES / 4);
    setFlagsFromString('--no-expose-gc');
  }, 600_000);

  it("a list larger than the budget is never kept whole: its askers' answers are, so each asker lists at most once an interval, and the sweep once", async () => {
    let now = 1_000_000;
    const calls = newCalls();
    const c = credentials[0] as { id: string; client: PlatformClient };
    const platform = counted(c.client, calls, c.id);
    const budget = MiB;
    const cache = new DriftCache(INTERVAL, () => now, undefined, { maxBytes: budget });
    // 20 askers at once: 10 keys of the list, 10 not in it (ids the platform never gave, made an hour ago).
    const present = keyIds.slice(100, 110);
    const absent = present.map((id) => id + 10_000_000);
    const askAll = (): Promise<string[]> =>
      Promise.all([...present, ...absent].map(async (id) => (await cache.keyState(c.id, personal, platform, id, now - 3_600_000)).state));
    const asked = askAll();
    for (let i = 100; i < 105; i++) cache.tagged(c.id, 'personal', tagOf(i));
    expect(await asked).toEqual([...present.map(() => 'Live'), ...absent.map(() => 'Absent')]);
    expect(calls.made).toBe(1);
    // Not kept whole: the askers' answers only, far under the budget.
    expect([cache.size, cache.wholeLists]).toEqual([1, 0]);
    expect(cache.bytes).toBeLessThan(budget / 10);
    expect(cache.tagged(c.id, 'personal', tagOf(100))?.keys.map((k) => k.id)).toEqual([keyIds[100]]);
    // A tag no asker had asked for: not known until the next list.
    expect(cache.tagged(c.id, 'personal', tagOf(200))).toBeUndefined();
    // The same askers, again and again, and the sweep every second of the interval: no list.
    for (let second = 1; second < INTERVAL / 1000; second++) {
      now += 1000;
      cache.refreshDue();
      if (second % 10 === 0) expect(await askAll()).toEqual([...present.map(() => 'Live'), ...absent.map(() => 'Absent')]);
    }
    expect(calls.made).toBe(1);
    // An interval on: the sweep takes it once, and answers the tag asked for meanwhile.
    now += 1000;
    cache.refreshDue();
    cache.refreshDue();
    await until(() => calls.made === 2 && calls.inFlight === 0);
    expect(cache.tagged(c.id, 'personal', tagOf(200))?.keys.map((k) => k.id)).toEqual([keyIds[200]]);
    expect(cache.wholeLists).toBe(0);
    // A new asker: one list (its own), then answered from what is kept.
    expect((await cache.keyState(c.id, personal, platform, keyIds[300] as number, undefined)).state).toBe('Live');
    expect((await cache.keyState(c.id, personal, platform, keyIds[300] as number, undefined)).state).toBe('Live');
    expect(calls.made).toBe(3);
    // A resource being deleted with a tag not asked for: one list, then it is answered.
    await cache.ensureList(c.id, personal, platform, [tagOf(400)]);
    expect(cache.tagged(c.id, 'personal', tagOf(400))?.keys.map((k) => k.id)).toEqual([keyIds[400]]);
    await cache.ensureList(c.id, personal, platform, [tagOf(400)]);
    expect(calls.made).toBe(4);
    expect(cache.bytes).toBeLessThan(budget / 10);
    expect(await askAll()).toEqual([...present.map(() => 'Live'), ...absent.map(() => 'Absent')]);
    expect(calls.made).toBe(4);
  }, 600_000);
});
