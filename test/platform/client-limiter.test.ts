// The org key limiter with its latency credit (sliding-window.ts) in front of the real emulator over
// HTTP, with the emulator's latency fault on key creation. The emulator sleeps the injected latency
// BEFORE its rate limiter counts the request (server.ts dispatch, then routes/api-keys.ts): the
// arrival it counts is at the end of the outbound leg, right before the answer, the split that
// leaves the credit the least room. Throughput is printed, not asserted (timed tests on a shared
// machine measure the machine); what must hold is that the platform refuses nothing.
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { orgKeyCreationLimiter, type Answer, type RateLimiter } from '../../src/platform/sliding-window.ts';
import { adminKeys, client, countOf, emulator, failure, ORG, secrets, setFaults, user, type Emulator, type FaultRule } from './emulator-fixture.ts';

const ORG_KEYS = '/organizations/:org_id/api_keys';

let emu: Emulator;
beforeEach(async () => {
  emu = await emulator();
});
afterEach(async () => {
  await emu.close();
});

const latency = (latencyMs: number, probability = 1): FaultRule => ({ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability, kind: 'latency', latencyMs });

describe('org key creation through the limiter with platform latency', () => {
  it.each([
    ['100 ms', [latency(100)]],
    // The first rule that fires wins: about 1/3 at 50 ms, 1/3 at 150 ms, the rest at 300 ms.
    ['50, 150 or 300 ms at random', [latency(50, 1 / 3), latency(150, 1 / 2), latency(300)]],
  ])(
    '100 concurrent creations with %s of latency are all created, and the platform answers no 429',
    async (label, rules) => {
      await setFaults(emu, rules);
      const alice = client(emu, user(emu, 'alice').personalKey, { orgKeyLimiter: orgKeyCreationLimiter() });
      const started = performance.now();
      const keys = await Promise.all(Array.from({ length: 100 }, (_, i) => alice.createOrganizationKey(ORG, { keyName: `latency-${i}` })));
      const seconds = (performance.now() - started) / 1_000;
      for (const k of keys) secrets.add(k.key);

      expect(new Set(keys.map((k) => k.id)).size).toBe(100);
      const stored = new Set((await adminKeys(emu)).filter((k) => !k.revoked).map((k) => k.id));
      for (const k of keys) expect(stored.has(k.id)).toBe(true);
      expect(await countOf(emu, 'POST', ORG_KEYS, 429)).toBe(0);
      expect(await countOf(emu, 'POST', ORG_KEYS)).toBe(100);
      // The first 10 leave at once; the other 90 are paced (with credit after about 5 s): their rate is the limiter's.
      console.log(`org key limiter, ${label} of latency: 100 creations in ${seconds.toFixed(2)} s`);
    },
    30_000,
  );
});

describe('what the client tells the limiter', () => {
  it('each attempt reports its answer: the status when the platform answered, nothing when the connection failed', async () => {
    const told: (Answer | undefined)[] = [];
    const recording: RateLimiter = {
      take: () => Promise.resolve({ grantedAt: performance.now(), done: (answer?: Answer) => void told.push(answer) }),
    };
    const alice = client(emu, user(emu, 'alice').personalKey, { orgKeyLimiter: recording });
    // A 429 (nothing was created: retried), then the key.
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'status', status: 429, times: 1 }]);
    const key = await alice.createOrganizationKey(ORG, { keyName: 'told' });
    secrets.add(key.key);
    // A connection reset after the request was sent: no answer (an ambiguous failure, not retried).
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'reset', times: 1 }]);
    expect((await failure(alice.createOrganizationKey(ORG, { keyName: 'reset' }))).disposition).toBe('ambiguous');
    // A refusal for good: 403 from the platform is an answer too.
    const bob = client(emu, user(emu, 'bob').personalKey, { orgKeyLimiter: recording });
    await failure(bob.createOrganizationKey('org-nobody-00000000', { keyName: 'not-mine' }));
    expect(told).toEqual([{ status: 429 }, { status: 200 }, undefined, expect.objectContaining({ status: expect.any(Number) })]);
    expect((told[3] as Answer).status).toBeGreaterThanOrEqual(400);
    expect((told[3] as Answer).status).toBeLessThan(500);
  });

  it("hands each attempt's take() the create's waiter as it was given, and none to a create without one", async () => {
    const waiters: unknown[] = [];
    const recording: RateLimiter = {
      take: (_signal, waiter) => {
        waiters.push(waiter);
        return Promise.resolve({ grantedAt: performance.now(), done: () => undefined });
      },
    };
    const alice = client(emu, user(emu, 'alice').personalKey, { orgKeyLimiter: recording });
    const waiter = { whose: 'ApiKey/team/k' };
    // A 429 first (retried): both attempts wait as the same waiter.
    await setFaults(emu, [{ method: 'POST', route: `/api/v2${ORG_KEYS}`, probability: 1, kind: 'status', status: 429, times: 1 }]);
    secrets.add((await alice.createOrganizationKey(ORG, { keyName: 'waiter' }, { waiter })).key);
    secrets.add((await alice.createOrganizationKey(ORG, { keyName: 'no-waiter' })).key);
    expect(waiters).toHaveLength(3);
    expect(waiters[0]).toBe(waiter);
    expect(waiters[1]).toBe(waiter);
    expect(waiters[2]).toBeUndefined();
  });
});
