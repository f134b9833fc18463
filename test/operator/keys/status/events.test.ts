// The key resources' events (src/operator/keys/status/events.ts): a repeat within the window is not
// sent again, and what is remembered for that ages out with the window, at rest too.
import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import type { CoreV1Event } from '@kubernetes/client-node';
import { EventRecorder } from '../../../../src/operator/keys/status/events.ts';

const WINDOW_MS = 300_000;

/** A recorder whose events are kept in a list (the apiserver's answer is not what is tested), on a manual clock. */
function recorder(windowMs = WINDOW_MS) {
  const sent: string[] = [];
  const clock = { now: 1_000_000 };
  const events = new EventRecorder(
    {
      createNamespacedEvent: async ({ body }: { namespace: string; body: CoreV1Event }) => {
        sent.push(`${body.involvedObject?.uid}/${body.reason}: ${body.message}`);
        return body;
      },
    } as never,
    'test',
    pino({ level: 'silent' }),
    windowMs,
    () => clock.now,
  );
  return { events, sent, clock };
}

const resource = (uid: string) => ({ kind: 'ProjectApiKey', metadata: { name: `k-${uid}`, namespace: 'team', uid, resourceVersion: '1' } }) as never;

describe('the events of key resources', () => {
  it('sends a repeat only after the window, and a different message or resource at once', async () => {
    const { events, sent, clock } = recorder();
    await events.record(resource('a'), 'Warning', 'InvalidSpec', 'spec.projectId is empty');
    await events.record(resource('a'), 'Warning', 'InvalidSpec', 'spec.projectId is empty');
    await events.record(resource('a'), 'Warning', 'InvalidSpec', 'spec.projectId is too long');
    await events.record(resource('b'), 'Warning', 'InvalidSpec', 'spec.projectId is empty');
    expect(sent).toEqual(['a/InvalidSpec: spec.projectId is empty', 'a/InvalidSpec: spec.projectId is too long', 'b/InvalidSpec: spec.projectId is empty']);
    clock.now += WINDOW_MS - 1;
    await events.record(resource('a'), 'Warning', 'InvalidSpec', 'spec.projectId is empty');
    expect(sent).toHaveLength(3);
    clock.now += 1;
    await events.record(resource('a'), 'Warning', 'InvalidSpec', 'spec.projectId is empty');
    expect(sent).toHaveLength(4);
  });

  it('forgets what it sent before the window: a wave of events leaves nothing behind', async () => {
    const { events, clock } = recorder();
    for (let i = 0; i < 1_000; i++) await events.record(resource(`u${i}`), 'Normal', 'KeyIssued', `issued key ${i}`);
    expect(events.remembered()).toBe(1_000);
    clock.now += WINDOW_MS / 2;
    await events.record(resource('late'), 'Normal', 'KeyIssued', 'issued key late');
    expect(events.remembered()).toBe(1_001);
    clock.now += WINDOW_MS / 2;
    // The wave is past its window; the late one is not.
    await events.record(resource('later'), 'Normal', 'KeyIssued', 'issued key later');
    expect(events.remembered()).toBe(2);
  });

  it('forgets at rest, with no event after the wave', async () => {
    const windowMs = 20;
    const sent: string[] = [];
    // A manual clock: however slowly a loaded machine records the wave, none of it is past the window
    // until the clock says so (a real clock's 20 ms passed during the loop on a busy CI machine).
    const clock = { now: 1_000_000 };
    const events = new EventRecorder(
      { createNamespacedEvent: async ({ body }: { body: CoreV1Event }) => void sent.push(String(body.reason)) } as never,
      'test',
      pino({ level: 'silent' }),
      windowMs,
      () => clock.now,
    );
    for (let i = 0; i < 100; i++) await events.record(resource(`u${i}`), 'Normal', 'KeyIssued', `issued key ${i}`);
    expect(events.remembered()).toBe(100);
    clock.now += windowMs;
    // Its own timer empties it, with no event after the wave: waited for as a count.
    while (events.remembered() > 0) await new Promise((resolve) => setTimeout(resolve, windowMs));
    expect(sent).toHaveLength(100);
  });
});
