// The operator's command line: every flag, its environment variable and default, defined once.
// main.ts parses with it, `--help` prints it, and `npm run generate` writes docs/reference/flags.md
// from it (test/reference/reference.test.ts fails when that page is stale). Durations are Go
// durations (go-duration.ts), the grammar of the CRDs and the Helm chart too.
import { parseArgs } from 'node:util';
import { parseGoDuration } from './go-duration.ts';
import { CLUSTER_NAME_MAX, clusterNameProblem, DEFAULT_SIGNING_KEY_SECRET, organizationShareProblem, parseLabelSelector } from './keys/index.ts';

export interface FlagSpec {
  name: string;
  /** What the value is (`<duration>`, `<host:port>`); none for a boolean flag. */
  value?: string;
  /** The environment variable read when the flag is not given. */
  env?: string;
  /** The default, as a user reads it. */
  default: string;
  help: string;
}

export const DEFAULT_PLATFORM_URL = 'https://console.neon.tech/api/v2';
export const DEFAULT_LEADER_ELECTION_ID = 'neon-key-operator';

export const FLAGS = [
  { name: 'platform-url', value: '<url>', env: 'NEON_API_URL', default: DEFAULT_PLATFORM_URL, help: 'The platform API base URL, ending in /api/v2.' },
  {
    name: 'kubeconfig',
    value: '<file>',
    default: '$KUBECONFIG, then ~/.kube/config, then in-cluster',
    help:
      'The kubeconfig file to use. Without it: the files of $KUBECONFIG (a list separated by ":", merged as kubectl merges them: the first to set a value wins, ' +
      'files that do not exist are skipped), else ~/.kube/config, else the in-cluster ServiceAccount.',
  },
  {
    name: 'watch-namespace',
    value: '<ns>[,<ns>...]',
    env: 'WATCH_NAMESPACE',
    default: 'every namespace',
    help: 'Watch these namespaces only: one informer per namespace and kind, so a Role in each suffices.',
  },
  {
    name: 'workers',
    value: '<n>',
    env: 'WORKERS',
    default: '16',
    help: "Concurrent reconciles (each mostly waits on the apiserver; a create waits for its organization's rate limit without holding one).",
  },
  { name: 'drift-interval', value: '<duration>', env: 'DRIFT_INTERVAL', default: '5m', help: 'How often every key is checked against the platform.' },
  {
    name: 'pending-grace',
    value: '<duration>',
    env: 'PENDING_GRACE',
    default: '2m',
    help: "How long another process's create intent is presumed in flight before it is recovered; keep it longer than a create request can take.",
  },
  {
    name: 'unverified-after',
    value: '<duration>',
    env: 'UNVERIFIED_AFTER',
    default: 'two drift intervals',
    help: 'How long drift checks of a key may fail (credentials refused, platform unavailable) before its conditions say it is no longer known to be live.',
  },
  {
    name: 'min-rotation-grace',
    value: '<duration>',
    env: 'MIN_ROTATION_GRACE',
    default: '1m',
    help:
      "The shortest a replaced key stays live after a rotation's switch (at least 1s): the floor of the CRD's rule on spec.rotation.gracePeriod. " +
      'A shorter stored value is raised to it and reported (Rotating False, InvalidSpec). Lower it only with CRDs rendered with the same floor (tests, the demo, chaos).',
  },
  {
    name: 'cache-stale-after',
    value: '<duration>',
    env: 'CACHE_STALE_AFTER',
    default: '3m',
    help:
      "How long an informer's LIST or WATCH may fail before its cache is stale: the leader's /readyz answers 503 naming it, " +
      'and the keys of that namespace are not trusted at rest until the watch is back.',
  },
  {
    name: 'watch-backoff-max',
    value: '<duration>',
    env: 'WATCH_BACKOFF_MAX',
    default: '60s',
    help: 'The longest pause between retries of a failing LIST or WATCH (1s doubling, up to 10 % added at random; at least 1s).',
  },
  {
    name: 'signing-key-secret',
    value: '<name>',
    default: DEFAULT_SIGNING_KEY_SECRET,
    help:
      'The Secret in $POD_NAMESPACE holding the key that signs intents and Secret annotations; made on first start. ' +
      'The manifests grant `get` on this name only: with Helm set the value signingKeySecret (it changes both), with kustomize change the Role too.',
  },
  {
    name: 'allow-insecure-platform-url',
    env: 'ALLOW_INSECURE_PLATFORM_URL',
    default: 'off',
    help: 'Allow a plain http --platform-url to a host that is not loopback (API keys then travel in clear text; e.g. an in-cluster emulator). The environment variable: `true`.',
  },
  {
    name: 'inventory-organization-label',
    env: 'INVENTORY_ORGANIZATION_LABEL',
    default: 'off',
    help: 'Label the inventory gauge (neon_key_operator_inventory_keys) with the organization id: one series per organization and state. The environment variable: `true`.',
  },
  {
    name: 'issuer-secrets-namespace',
    value: '<ns>',
    env: 'ISSUER_SECRETS_NAMESPACE',
    default: '$POD_NAMESPACE',
    help:
      'The one namespace whose Secrets a ClusterKeyIssuer may name as its credentials (spec.credentialsSecretRef): keep it a namespace no tenant can read. ' +
      'With every namespace watched, issuers are used by default; with --watch-namespace, only when this flag is given (list this namespace among the watched ones, ' +
      'and grant the issuer rules of docs/install.md).',
  },
  {
    name: 'issuer-label-selector',
    value: '<selector>',
    env: 'ISSUER_LABEL_SELECTOR',
    default: 'every issuer',
    help:
      'Use only the ClusterKeyIssuers with these labels (a Kubernetes label selector, e.g. keys.neon.dev/cluster=prod): for two installs of the operator in one cluster, ' +
      'each with issuers of its own. A resource naming another issuer gets IssuerNotFound.',
  },
  {
    name: 'namespace-credentials',
    value: 'allow|forbid',
    env: 'NAMESPACE_CREDENTIALS',
    default: 'allow',
    help:
      'forbid: a resource may not name credentials of its own namespace (spec.credentialsSecretRef): it gets NotAllowed and only issuers mint keys; ' +
      'a key issued before stays until its resource is deleted (and is revoked with those credentials then).',
  },
  {
    name: 'cluster-name',
    value: '<name>',
    env: 'CLUSTER_NAME',
    default: 'none',
    help:
      `This cluster's name in the names of the keys it issues, \`<keyName>.<name>.<tag>\` (at most ${CLUSTER_NAME_MAX} of a-z, 0-9 and '-'): ` +
      "give every cluster creating keys in one organization its own, and each ApiKeyInventory tells the others' keys from keys made by hand (docs/clusters.md). " +
      'None: `<keyName>-<tag>`, as before cluster names.',
  },
  {
    name: 'organization-rate-share',
    value: '<fraction>',
    env: 'ORGANIZATION_RATE_SHARE',
    default: '1',
    help:
      "This cluster's share of each organization's 10 key creations a second, from 0.1 to 1, in whole creations (0.5: 5 a second; 0.33: 3): " +
      'clusters creating keys in one organization with shares adding up to at most 1 never draw a 429 together (docs/clusters.md).',
  },
  { name: 'leader-elect', default: 'off', help: 'Reconcile only while holding a Lease in $POD_NAMESPACE; identity $POD_NAME.' },
  {
    name: 'leader-election-id',
    value: '<name>',
    default: DEFAULT_LEADER_ELECTION_ID,
    help: 'The name of that Lease. The manifests grant `get`/`update` on this name only: change their Role with it.',
  },
  { name: 'leader-elect-lease-duration', value: '<duration>', default: '15s', help: 'How long a standby waits for an unrenewed Lease before taking it.' },
  { name: 'leader-elect-renew-deadline', value: '<duration>', default: '10s', help: 'How long the leader tries to renew before it stops leading (and exits).' },
  {
    name: 'leader-elect-retry-period',
    value: '<duration>',
    default: '2s',
    help: 'How often candidates try and the leader renews; lease duration > renew deadline > retry period.',
  },
  { name: 'metrics-bind-address', value: '<host:port>', default: ':8080', help: 'Where /metrics is served (and nothing else).' },
  { name: 'health-probe-bind-address', value: '<host:port>', default: ':8081', help: 'Where /healthz and /readyz are served (and nothing else).' },
  { name: 'version', default: '', help: 'Print the version and revision (those of build_info) and exit.' },
  { name: 'help', default: '', help: 'Print this and exit.' },
] as const satisfies readonly FlagSpec[];

type FlagName = (typeof FLAGS)[number]['name'];

export interface BindAddress {
  host: string;
  port: number;
}

/** What the command line asks for (defaults applied, durations in milliseconds). */
export interface OperatorFlags {
  kubeconfig?: string;
  platformUrl: string;
  workers: number;
  namespaces?: string;
  driftIntervalMs: number;
  pendingGraceMs: number;
  unverifiedAfterMs?: number;
  minRotationGraceMs: number;
  cacheStaleAfterMs?: number;
  watchBackoffMaxMs?: number;
  signingKeySecret: string;
  allowInsecurePlatformUrl: boolean;
  inventoryOrganizationLabel: boolean;
  issuerSecretsNamespace?: string;
  issuerLabelSelector?: string;
  allowNamespaceCredentials: boolean;
  /** '' for none. */
  clusterName: string;
  organizationRateShare: number;
  leaderElect: boolean;
  leaderElectionId: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  metrics: BindAddress;
  health: BindAddress;
}

/** A flag's value that cannot be used: the message names the flag and says what it takes. */
export class FlagError extends Error {}

/** The `--help` text, from FLAGS. */
export function helpText(): string {
  const lines = ['neon-key-operator', 'A Kubernetes operator for Neon API keys. Flags (docs/reference/flags.md):'];
  for (const flag of FLAGS) {
    const head = `  --${flag.name}${'value' in flag ? ` ${flag.value}` : ''}`;
    const from = 'env' in flag ? `$${flag.env} or ` : '';
    const tail = flag.default === '' ? '' : ` (default: ${from}${flag.default})`;
    lines.push(head, `      ${flag.help}${tail}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Parses argv (flags win over the environment); `'help'` or `'version'` when that was asked for. */
export function readFlags(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): OperatorFlags | 'help' | 'version' {
  const options = Object.fromEntries(FLAGS.map((f) => [f.name, { type: 'value' in f ? ('string' as const) : ('boolean' as const) }]));
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: [...argv], options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new FlagError(`${(error as Error).message} (--help lists the flags)`);
  }
  if (values.help === true) return 'help';
  if (values.version === true) return 'version';
  const text = (name: FlagName): string | undefined => {
    const flag = FLAGS.find((f) => f.name === name);
    const given = values[name];
    if (typeof given === 'string') return given;
    const fromEnv = flag !== undefined && 'env' in flag ? env[flag.env] : undefined;
    return fromEnv === '' ? undefined : fromEnv;
  };
  const duration = (name: FlagName, fallback?: string): number | undefined => {
    const value = text(name) ?? fallback;
    if (value === undefined) return undefined;
    const ms = parseGoDuration(value);
    if (ms === undefined) throw new FlagError(`--${name}: ${JSON.stringify(value)} is not a Go duration (e.g. 90s, 5m, 1h30m)`);
    if (ms <= 0) throw new FlagError(`--${name}: must be longer than 0`);
    return ms;
  };
  const workersText = text('workers') ?? '16';
  const workers = /^[0-9]+$/.test(workersText) ? Number(workersText) : Number.NaN;
  if (!Number.isSafeInteger(workers) || workers < 1) throw new FlagError(`--workers: ${JSON.stringify(workersText)} is not a positive integer`);
  const minRotationGraceMs = duration('min-rotation-grace', '1m') as number;
  if (minRotationGraceMs < 1_000) throw new FlagError('--min-rotation-grace: must be at least 1s');
  const unverifiedAfterMs = duration('unverified-after');
  const cacheStaleAfterMs = duration('cache-stale-after');
  const watchBackoffMaxMs = duration('watch-backoff-max');
  const namespaces = text('watch-namespace');
  const namespaceCredentials = text('namespace-credentials') ?? 'allow';
  if (namespaceCredentials !== 'allow' && namespaceCredentials !== 'forbid')
    throw new FlagError(`--namespace-credentials: ${JSON.stringify(namespaceCredentials)} is not allow or forbid`);
  const issuerSecretsNamespace = text('issuer-secrets-namespace');
  const issuerLabelSelector = text('issuer-label-selector');
  if (issuerLabelSelector !== undefined && parseLabelSelector(issuerLabelSelector) === undefined) {
    throw new FlagError(`--issuer-label-selector: ${JSON.stringify(issuerLabelSelector)} is not an equality-based label selector (a=b,c!=d,e,!f)`);
  }
  if (issuerSecretsNamespace !== undefined && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(issuerSecretsNamespace))
    throw new FlagError(`--issuer-secrets-namespace: ${JSON.stringify(issuerSecretsNamespace)} is not a namespace name`);
  const clusterName = text('cluster-name') ?? '';
  const clusterProblem = clusterNameProblem(clusterName);
  if (clusterProblem !== undefined) throw new FlagError(`--cluster-name: ${JSON.stringify(clusterName)} is not a cluster name (${clusterProblem})`);
  const shareText = text('organization-rate-share') ?? '1';
  const share = /^([0-9]+\.?[0-9]*|\.[0-9]+)$/.test(shareText) ? Number(shareText) : Number.NaN;
  const shareProblem = organizationShareProblem(share);
  if (shareProblem !== undefined) throw new FlagError(`--organization-rate-share: ${JSON.stringify(shareText)} is not ${shareProblem}`);
  const kubeconfig = typeof values.kubeconfig === 'string' && values.kubeconfig !== '' ? values.kubeconfig : undefined;
  return {
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    platformUrl: text('platform-url') ?? DEFAULT_PLATFORM_URL,
    workers,
    ...(namespaces !== undefined ? { namespaces } : {}),
    driftIntervalMs: duration('drift-interval', '5m') as number,
    pendingGraceMs: duration('pending-grace', '2m') as number,
    ...(unverifiedAfterMs !== undefined ? { unverifiedAfterMs } : {}),
    minRotationGraceMs,
    ...(cacheStaleAfterMs !== undefined ? { cacheStaleAfterMs } : {}),
    ...(watchBackoffMaxMs !== undefined ? { watchBackoffMaxMs: Math.max(1_000, watchBackoffMaxMs) } : {}),
    signingKeySecret: text('signing-key-secret') ?? DEFAULT_SIGNING_KEY_SECRET,
    allowInsecurePlatformUrl: values['allow-insecure-platform-url'] === true || env.ALLOW_INSECURE_PLATFORM_URL === 'true',
    inventoryOrganizationLabel: values['inventory-organization-label'] === true || env.INVENTORY_ORGANIZATION_LABEL === 'true',
    ...(issuerSecretsNamespace !== undefined ? { issuerSecretsNamespace } : {}),
    ...(issuerLabelSelector !== undefined ? { issuerLabelSelector } : {}),
    allowNamespaceCredentials: namespaceCredentials === 'allow',
    clusterName,
    organizationRateShare: share,
    leaderElect: values['leader-elect'] === true,
    leaderElectionId: text('leader-election-id') ?? DEFAULT_LEADER_ELECTION_ID,
    leaseDurationMs: duration('leader-elect-lease-duration', '15s') as number,
    renewDeadlineMs: duration('leader-elect-renew-deadline', '10s') as number,
    retryPeriodMs: duration('leader-elect-retry-period', '2s') as number,
    metrics: bindAddress('metrics-bind-address', text('metrics-bind-address') ?? ':8080'),
    health: bindAddress('health-probe-bind-address', text('health-probe-bind-address') ?? ':8081'),
  };
}

/** `host:port`, `:port` (every interface) or `[v6]:port`; port 0 picks a free port. */
function bindAddress(name: FlagName, value: string): BindAddress {
  const index = value.lastIndexOf(':');
  const portText = value.slice(index + 1);
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : Number.NaN;
  if (index < 0 || !(port >= 0 && port <= 65_535)) throw new FlagError(`--${name}: ${JSON.stringify(value)} is not <host>:<port>`);
  const host = value.slice(0, index).replace(/^\[|\]$/g, '');
  return { host: host === '' ? '0.0.0.0' : host, port };
}
