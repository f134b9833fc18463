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
  testTimeout: 60_000,
  maxWorkers: 2,
};
