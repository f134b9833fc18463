// The operator's command line (src/operator/flags.ts): flags win over the environment, Go
// durations only (the chart's and the CRDs' grammar), a clear error naming the flag otherwise.
import { describe, expect, it } from '@jest/globals';
import { FLAGS, FlagError, helpText, readFlags, type OperatorFlags } from '../../../src/operator/flags.ts';

const read = (argv: string[], env: Record<string, string> = {}): OperatorFlags => {
  const flags = readFlags(argv, env);
  if (typeof flags === 'string') throw new Error(`asked for ${flags}`);
  return flags;
};

describe('the operator flags', () => {
  it('have the documented defaults', () => {
    expect(read([])).toEqual({
      platformUrl: 'https://console.neon.tech/api/v2',
      workers: 16,
      driftIntervalMs: 300_000,
      pendingGraceMs: 120_000,
      minRotationGraceMs: 60_000,
      signingKeySecret: 'neon-key-operator-signing-key',
      allowInsecurePlatformUrl: false,
      inventoryOrganizationLabel: false,
      allowNamespaceCredentials: true,
      clusterName: '',
      organizationRateShare: 1,
      leaderElect: false,
      leaderElectionId: 'neon-key-operator',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      metrics: { host: '0.0.0.0', port: 8080 },
      health: { host: '0.0.0.0', port: 8081 },
    });
  });

  it("the issuers' flags: where their Secrets are, which issuers are this install's, whether namespace credentials are allowed", () => {
    expect(
      read(['--issuer-secrets-namespace', 'platform-keys', '--issuer-label-selector', 'keys.neon.dev/cluster=prod', '--namespace-credentials', 'forbid']),
    ).toMatchObject({ issuerSecretsNamespace: 'platform-keys', issuerLabelSelector: 'keys.neon.dev/cluster=prod', allowNamespaceCredentials: false });
    expect(read([], { NAMESPACE_CREDENTIALS: 'forbid', ISSUER_SECRETS_NAMESPACE: 'keys' })).toMatchObject({
      allowNamespaceCredentials: false,
      issuerSecretsNamespace: 'keys',
    });
  });

  it("a cluster's name and its share of each organization's creations: from the flag or the environment, refused when unusable", () => {
    expect(read(['--cluster-name', 'prod-eu-1', '--organization-rate-share', '0.5'])).toMatchObject({ clusterName: 'prod-eu-1', organizationRateShare: 0.5 });
    expect(read([], { CLUSTER_NAME: 'staging', ORGANIZATION_RATE_SHARE: '.25' })).toMatchObject({ clusterName: 'staging', organizationRateShare: 0.25 });
    expect(read(['--organization-rate-share=1.0'])).toMatchObject({ organizationRateShare: 1 });
    for (const name of ['Prod', 'prod.eu', 'prod-', 'c'.repeat(21)]) expect(() => read(['--cluster-name', name])).toThrow(/--cluster-name/);
    for (const share of ['0', '0.05', '1.5', 'half', '1e-1', '-0.5'])
      expect(() => read(['--organization-rate-share', share])).toThrow(/--organization-rate-share/);
  });

  it('read the environment, and a flag wins over it', () => {
    const env = {
      NEON_API_URL: 'http://127.0.0.1:1/api/v2',
      WORKERS: '4',
      DRIFT_INTERVAL: '1h30m',
      WATCH_NAMESPACE: 'a,b',
      ALLOW_INSECURE_PLATFORM_URL: 'true',
      CACHE_STALE_AFTER: '90s',
    };
    expect(read([], env)).toMatchObject({
      platformUrl: 'http://127.0.0.1:1/api/v2',
      workers: 4,
      driftIntervalMs: 5_400_000,
      namespaces: 'a,b',
      allowInsecurePlatformUrl: true,
      cacheStaleAfterMs: 90_000,
    });
    expect(read(['--workers=2', '--drift-interval', '10m', '--metrics-bind-address=127.0.0.1:0', '--health-probe-bind-address=[::1]:9'], env)).toMatchObject({
      workers: 2,
      driftIntervalMs: 600_000,
      metrics: { host: '127.0.0.1', port: 0 },
      health: { host: '::1', port: 9 },
    });
  });

  it.each([
    // A bare number was once read as seconds; Go, the CRDs and the chart refuse it.
    [['--drift-interval=300'], '--drift-interval: "300" is not a Go duration'],
    [['--pending-grace=1d'], '--pending-grace: "1d" is not a Go duration'],
    [['--drift-interval=0s'], '--drift-interval: must be longer than 0'],
    [['--leader-elect-lease-duration=-15s'], '--leader-elect-lease-duration: "-15s" is not a Go duration'],
    [['--min-rotation-grace=500ms'], '--min-rotation-grace: must be at least 1s'],
    [['--workers=x'], '--workers: "x" is not a positive integer'],
    [['--workers=0'], '--workers: "0" is not a positive integer'],
    [['--metrics-bind-address=8080'], '--metrics-bind-address: "8080" is not <host>:<port>'],
    [['--no-such-flag'], "Unknown option '--no-such-flag'"],
    [['--namespace-credentials=deny'], '--namespace-credentials: "deny" is not allow or forbid'],
    [['--issuer-secrets-namespace=Team_A'], '--issuer-secrets-namespace: "Team_A" is not a namespace name'],
    [['--issuer-label-selector=tier in (a)'], '--issuer-label-selector: "tier in (a)" is not an equality-based label selector'],
  ])('refuse %j, naming the flag', (argv, message) => {
    expect(() => readFlags(argv, {})).toThrow(FlagError);
    expect(() => readFlags(argv, {})).toThrow(message);
  });

  it('refuse a bad duration from the environment too', () => {
    expect(() => readFlags([], { DRIFT_INTERVAL: '5 m' })).toThrow('--drift-interval: "5 m" is not a Go duration');
  });

  it('answer --help and --version, and the help lists every flag with its default', () => {
    expect(readFlags(['--help'], {})).toBe('help');
    expect(readFlags(['-h'], {})).toBe('help');
    expect(readFlags(['--version'], {})).toBe('version');
    const help = helpText();
    for (const flag of FLAGS) expect(help).toContain(`--${flag.name}`);
    expect(help).toContain('(default: $DRIFT_INTERVAL or 5m)');
  });
});
