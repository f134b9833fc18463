// Jest's order of suites, with a memory a fresh clone lacks. Jest starts the suites it knows to be
// slow first (its cache of the last run's times, under the checkout's path), so that no worker is
// left with an 80-second suite when the others are done; a suite it has no time for is ordered by
// the size of its file. A fresh clone (CI) has no times, and the slowest suites are small files
// (the hostile campaign: 60 lines, 80 s): they started last and ran alone at the end. Here a suite
// jest has no time for takes its time from the table below (seconds: a full run on a quiet
// machine, and the suites made faster since from their own runs; docs/testing.md "What CI runs"),
// then 0. A wrong or stale figure only changes the order.
import Sequencer from '@jest/test-sequencer';
import { relative } from 'node:path';

/** Suites of 5 s and more, in seconds. */
const SECONDS = {
  'test/operator/organization-bounds.test.ts': 130,
  'test/operator/fat-objects.test.ts': 250,
  'test/operator/rotation.test.ts': 85,
  'test/operator/issuer-keys.test.ts': 75,
  'test/operator/namespace-deletion.test.ts': 55,
  'test/chaos/hostile-campaign.test.ts': 80,
  'test/operator/hostile-memory.test.ts': 55,
  'test/operator/ha.test.ts': 55,
  'test/operator/lifecycle.test.ts': 46,
  'test/operator/hostile-tenant.test.ts': 45,
  'test/operator/at-rest.test.ts': 44,
  'test/operator/fair-turns.test.ts': 35,
  'test/operator/inventory.test.ts': 28,
  'test/operator/clusters.test.ts': 24,
  'test/operator/inventory-edits.test.ts': 42,
  'test/operator/create-turns.test.ts': 26,
  'test/operator/truthful-status.test.ts': 24,
  'test/operator/watch-refused.test.ts': 23,
  'test/platform/client-limiter.test.ts': 22,
  'test/alerts/operator-alerts.test.ts': 29,
  'test/operator/credentials-watch.test.ts': 19,
  'test/operator/issuer-status.test.ts': 20,
  'test/operator/issuer-inventory.test.ts': 15,
  'test/deploy/tenant-roles.test.ts': 17,
  'test/operator/key-usage.test.ts': 19,
  'test/operator/runtime/leader.test.ts': 18,
  'test/operator/bad-input.test.ts': 18,
  'test/deploy/chart-crds.test.ts': 17,
  'test/deploy/chart.test.ts': 16,
  'test/deploy/examples.test.ts': 28,
  'test/deploy/release.test.ts': 15,
  'test/deploy/apply.test.ts': 15,
  'test/operator/operations-settled.test.ts': 14,
  'test/deploy/can-i.test.ts': 13,
  'test/operator/immutable-secret.test.ts': 13,
  'test/operator/writes-per-key.test.ts': 13,
  'test/operator/runtime/manager.test.ts': 12,
  'test/emulator/operations.test.ts': 12,
  'test/operator/keys/observing/operations-poller.test.ts': 11,
  'test/emulator/neonctl.test.ts': 11,
  'test/operator/inventory/kept-listing.test.ts': 11,
  'test/platform/client.test.ts': 10,
  'test/deploy/operator-with-chart.test.ts': 9,
  'test/operator/main.test.ts': 9,
  'test/deploy/image.test.ts': 8,
  'test/operator/resources/crd-apiserver.test.ts': 8,
  'test/alerts/rules.test.ts': 7,
  'test/emulator/permissions.test.ts': 7,
  'test/operator/hostile-platform.test.ts': 7,
  'test/operator/runtime/wake-limiter.test.ts': 6,
  'test/emulator/robustness.test.ts': 6,
  'test/operator/crash-recovery.test.ts': 6,
  'test/operator/keys/create-protocol.test.ts': 5,
  'test/operator/keys/observing/in-sync-and-drift.test.ts': 5,
  'test/operator/secret-template.test.ts': 5,
  'test/controlplane/smoke.test.ts': 5,
};

export default class SlowFirstSequencer extends Sequencer {
  /** Milliseconds, as jest's cache keeps them. */
  time(test) {
    return super.time(test) ?? (SECONDS[relative(test.context.config.rootDir, test.path)] ?? 0) * 1000;
  }
}
