// Unit suites (test/**/*.test.ts) run against nothing but code; integration suites talk to a real
// kube-apiserver + etcd that the global setup starts (test/harness) and to the emulator over HTTP.
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  transform: { '^.+\\.ts$': '<rootDir>/test/strip-types-transform.js' },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
  // The slowest suites first, also in a fresh clone (test/harness/sequencer.js).
  testSequencer: '<rootDir>/test/harness/sequencer.js',
  // A liveness bound, not a measure: a test waits on events and counts, and this only ends one that
  // hangs. Suites that start Go programs (helm, kubectl) take minutes at load 15 (docs/testing.md).
  testTimeout: 120_000,
  maxWorkers: 2,
};
