// What a benchmark is given (bench/run.ts parses the command line into it): shared by the runner and
// every benchmark, so none of them imports the runner.

export interface BenchOptions {
  /** Measured period of one throughput measurement. */
  durationMs: number;
  /** Request cap of one throughput measurement. */
  maxRequests: number;
  /** Each measurement is repeated this many times; the best is reported, with all rounds. */
  rounds: number;
  /** Concurrent connections of the throughput measurements. */
  connections: number;
  latencyDurationMs: number;
  latencyMaxRequests: number;
  /** Largest store of the store-size series (smaller for a quick smoke run). */
  largestStore?: number;
  /** When set, the servers under test run with `node --cpu-prof` and write their profiles here. */
  profileDir?: string;
  /** Another emulator entry point than src/emulator/main.ts (e.g. a patched copy, to measure a candidate fix). */
  emulatorMain?: string;
  /** How long the idle-churn benchmark idles (bench/idle-churn.ts). */
  idleChurnMinutes: number;
  /** Keys each cluster of the clusters benchmark applies (bench/clusters.ts). */
  clustersKeys: number;
  /** The fairness benchmark's sizes (bench/fairness.ts). */
  fairness: FairnessBenchOptions;
  /** The inventory benchmark's sizes (bench/inventory-operator.ts). */
  inventory: InventoryBenchOptions;
  /** The operator benchmark's sizes and durations (bench/operator.ts). */
  operator: OperatorBenchOptions;
  log(line: string): void;
}

/** The operator benchmark's sizes and durations (bench/operator.ts). */
export interface OperatorBenchOptions {
  keys: number;
  /** Phase 4: new keys in each organization, all applied at once. */
  wavePerOrg: number;
  /** Phase 5b: latency the emulator adds to every platform request. */
  latencyMs: number;
  /** Phase 4b: seconds with the emulator's own operations on, after the soak. */
  operationsSeconds: number;
  organizations: number;
  idleSeconds: number;
  soakSeconds: number;
  /** Seconds to wait for the memory phase's keys to be Ready before measuring at what is Ready. */
  memoryDeadlineSeconds: number;
  /** Seconds to wait for the convergence phase (at least its floor + 60 s); then it measures what is Ready. */
  convergenceDeadlineSeconds: number;
  driftInterval: string;
  workers?: number;
  /** Keep a heap snapshot of the operator, taken after the soak (after every RSS figure), in this folder. */
  heapSnapshotDir?: string;
  /** The operator's node flags instead of the image's (the Dockerfile's ENTRYPOINT): a candidate measured before it goes into the image. */
  nodeFlags?: string[];
  /** glibc: the operator on glibc's malloc instead of the image's (jemalloc, from the Dockerfile's ENV line), for an A/B. */
  malloc?: 'glibc';
}

/** The inventory benchmark's sizes (bench/inventory-operator.ts). */
export interface InventoryBenchOptions {
  managed: number;
  others: number;
  namespaces: number;
  driftInterval: string;
  /** Drift intervals in each measured window. */
  intervals: number;
  /** Seconds to wait for every managed key to be Ready. */
  deadlineSeconds: number;
}

/** The fairness benchmark's sizes (bench/fairness.ts). */
export interface FairnessBenchOptions {
  /** Scenarios 0 and 1: keys of the flooding namespace. */
  flood: number;
  /** Scenario 2: flooding namespaces, and keys of each. */
  floods: number;
  floodEach: number;
  /** The operator's drift interval (scenario 1's revoked key is replaced within it + 2 s). */
  driftInterval: string;
  /** Scenarios to run (a subset is for diagnosis: run it with --no-write). Default all: 0, 1, 2. */
  scenarios?: number[];
  /**
   * The operator logs at debug level, and each steady key's time is split into stages from its
   * log (apply answered → first reconcile → first 'decided' (the resource read) → 'creating key' → 'key created' → 'Secret written' →
   * 'status written' → the bench's watch sees Ready); printed, not written to the table.
   */
  stages?: boolean;
}
