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
  'test/operator/fat-objects.test.ts': 232,
  'test/operator/hostile-tenant.test.ts': 143,
  'test/chaos/hostile-campaign.test.ts': 104,
  'test/operator/organization-bounds.test.ts': 84,
  'test/operator/rotation.test.ts': 78,
  'test/operator/ha.test.ts': 71,
  'test/operator/hostile-memory.test.ts': 68,
  'test/operator/edit-during-create.test.ts': 54,
  'test/deploy/can-i.test.ts': 53,
  'test/operator/namespace-deletion.test.ts': 52,
  'test/operator/lifecycle.test.ts': 45,
  'test/operator/at-rest.test.ts': 43,
  'test/operator/fair-turns.test.ts': 36,
  'test/operator/keys/observing/drift-bytes.test.ts': 35,
  'test/alerts/operator-alerts.test.ts': 34,
  'test/deploy/chart.test.ts': 32,
  'test/operator/inventory-edits.test.ts': 31,
  'test/operator/inventory.test.ts': 31,
  'test/deploy/chart-crds.test.ts': 30,
  'test/operator/issuer-keys.test.ts': 29,
  'test/operator/create-turns.test.ts': 26,
  'test/platform/client-limiter.test.ts': 25,
  'test/deploy/examples.test.ts': 23,
  'test/operator/truthful-status.test.ts': 21,
  'test/operator/watch-refused.test.ts': 20,
  'test/alerts/rules.test.ts': 20,
  'test/operator/runtime/manager.test.ts': 19,
  'test/operator/inventory/kept-listing.test.ts': 19,
  'test/operator/runtime/leader.test.ts': 18,
  'test/operator/immutable-secret.test.ts': 18,
  'test/operator/keys/issuing/create-head-start.test.ts': 17,
  'test/operator/key-usage.test.ts': 17,
  'test/deploy/apply.test.ts': 17,
  'test/operator/bad-input.test.ts': 16,
  'test/deploy/operator-with-chart.test.ts': 16,
  'test/operator/keys/turns/org-limiter-idle.test.ts': 14,
  'test/operator/issuer-status.test.ts': 13,
  'test/operator/operations-settled.test.ts': 13,
  'test/operator/keys/observing/operations-poller.test.ts': 12,
  'test/operator/clusters.test.ts': 12,
  'test/deploy/image.test.ts': 12,
  'test/operator/create-from-cache.test.ts': 12,
  'test/deploy/issued-keys-policy.test.ts': 12,
  'test/emulator/operations.test.ts': 11,
  'test/emulator/neonctl.test.ts': 11,
  'test/operator/issuer-inventory.test.ts': 10,
  'test/platform/client.test.ts': 10,
  'test/operator/resources/crd-apiserver.test.ts': 10,
  'test/architecture/wall-clock-bounds.test.ts': 9,
  'test/deploy/release.test.ts': 9,
  'test/operator/writes-per-key.test.ts': 9,
  'test/operator/main.test.ts': 9,
  'test/operator/runtime/kube-client.test.ts': 9,
  'test/operator/hostile-platform.test.ts': 7,
  'test/emulator/robustness.test.ts': 7,
  'test/operator/secret-template.test.ts': 7,
  'test/operator/create-head.test.ts': 7,
  'test/operator/keys/observing/in-sync-and-drift.test.ts': 6,
  'test/operator/keys/observing/usage.test.ts': 6,
  'test/operator/keys/observing/cache-projection.test.ts': 6,
  'test/operator/keys/bounds.test.ts': 6,
  'test/deploy/tenant-roles.test.ts': 6,
  'test/emulator/permissions.test.ts': 6,
  'test/operator/runtime/list-items.test.ts': 6,
  'test/operator/runtime/kubeconfig.test.ts': 6,
  'test/operator/signing-key.test.ts': 6,
  'test/operator/informer-cache.test.ts': 6,
  'test/emulator/cli.test.ts': 6,
  'test/operator/keys/status/platform-failure.test.ts': 5,
  'test/operator/keys/issuing/organization-membership.test.ts': 5,
  'test/architecture/import-circles.test.ts': 5,
  'test/operator/runtime/readiness.test.ts': 5,
  'test/operator/runtime/reflector.test.ts': 5,
  'test/operator/inventory/drift-listing.test.ts': 5,
  'test/operator/credentials-check.test.ts': 5,
  'test/deploy/emulator-manifest.test.ts': 5,
};

export default class SlowFirstSequencer extends Sequencer {
  /** Milliseconds, as jest's cache keeps them. */
  time(test) {
    return super.time(test) ?? (SECONDS[relative(test.context.config.rootDir, test.path)] ?? 0) * 1000;
  }
}
