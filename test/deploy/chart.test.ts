// The Helm chart as users get it: linted strictly, rendered by the real helm, its RBAC held to the
// contract, its CRDs and rules the same as the top-level crds/ and deploy/base (one truth each).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VersionApi } from '@kubernetes/client-node';
import { controlPlane } from '../harness/index.ts';
import { OPERATOR_SOURCE, runOperatorSync } from '../harness/operator-process.ts';
import { baseDir, byKind, chartDir, CommandError, parseYaml, permissions, root, tools, type K8sObject, type PolicyRule, type Tools } from './kube-tools.ts';
import { clusterWideGrants, issuerEventsGrants, issuerGrants, ISSUER_EVENTS_NAMESPACE, ownNamespaceGrants, reconcileGrants } from './rbac-contract.ts';
import { FlagError, readFlags } from '../../src/operator/flags.ts';
import { GO_DURATION_SOURCE, GO_ZERO_DURATION_SOURCE } from '../../src/operator/go-duration.ts';

interface Container {
  name: string;
  image: string;
  args: string[];
  env?: { name: string; value?: string }[];
  ports: { name: string; containerPort: number }[];
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  resources: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext: {
    runAsNonRoot?: boolean;
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    seccompProfile?: { type: string };
  };
  volumeMounts?: { name: string; mountPath: string }[];
}

interface Deployment extends K8sObject {
  spec: {
    replicas: number;
    selector: { matchLabels: Record<string, string> };
    template: {
      metadata: { labels: Record<string, string> };
      spec: {
        serviceAccountName: string;
        securityContext: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
        containers: Container[];
        topologySpreadConstraints?: { topologyKey: string; whenUnsatisfiable: string; labelSelector: { matchLabels: Record<string, string> } }[];
        volumes?: { name: string; emptyDir?: object }[];
      };
    };
  };
}

const rulesOf = (o: K8sObject): PolicyRule[] => (o as K8sObject & { rules: PolicyRule[] }).rules;
/** The ClusterRoles for the teams that declare keys (rbac.aggregateToDefaultRoles), not the operator's. */
const tenantRole = (o: K8sObject): boolean => o.metadata.labels?.['app.kubernetes.io/component'] === 'tenant-role';
/** The platform team's ClusterRole on ClusterKeyIssuers (rbac.issuerAdminRole), not the operator's either. */
const issuerAdminRole = (o: K8sObject): boolean => o.metadata.labels?.['app.kubernetes.io/component'] === 'issuer-admin-role';
const ISSUER_ADMIN_GRANTS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']
  .map((verb) => `keys.neon.dev|clusterkeyissuers|${verb}`)
  .sort();
const operatorObjects = (objects: K8sObject[]): K8sObject[] =>
  objects.filter((o) => !tenantRole(o) && !issuerAdminRole(o) && o.kind !== 'CustomResourceDefinition');
/** What the two tenant roles grant, and to which built-in roles they are aggregated. */
const TENANT_ROLES = {
  view: {
    grants: ['get', 'list', 'watch'].flatMap((verb) => ['apikeys', 'projectapikeys', 'apikeyinventories'].map((r) => `keys.neon.dev|${r}|${verb}`)).sort(),
    aggregateTo: ['admin', 'edit', 'view'],
  },
  edit: {
    grants: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch']
      .flatMap((verb) => [`keys.neon.dev|apikeys|${verb}`, `keys.neon.dev|projectapikeys|${verb}`, `keys.neon.dev|apikeyinventories|${verb}`])
      .sort(),
    aggregateTo: ['admin', 'edit'],
  },
};
const onlyOne = (objects: K8sObject[], kind: string, name?: (n: string) => boolean): K8sObject => {
  const found = byKind(objects, kind).filter((o) => name === undefined || name(o.metadata.name));
  expect(found).toHaveLength(1);
  return found[0] as K8sObject;
};
const operatorContainer = (d: Deployment): Container => {
  const container = d.spec.template.spec.containers.find((c) => c.name === 'operator');
  if (container === undefined) throw new Error('no operator container');
  return container;
};
const noWildcards = (rules: PolicyRule[]): void => {
  for (const rule of rules) {
    expect(rule.verbs).not.toContain('*');
    expect(rule.resources ?? []).not.toContain('*');
    expect(rule.apiGroups ?? []).not.toContain('*');
    expect(rule.nonResourceURLs).toBeUndefined();
  }
};
const overlayDir = join(root, 'deploy/overlays/namespaced');

describe('the Helm chart', () => {
  let t: Tools;
  let chartVersion: string;
  let appVersion: string;
  let kubeVersion: string;

  beforeAll(async () => {
    const cp = await controlPlane();
    const version = await cp.kubeConfig.makeApiClient(VersionApi).getCode();
    kubeVersion = version.gitVersion;
    t = tools(cp, kubeVersion);
    const chart = readFileSync(join(chartDir, 'Chart.yaml'), 'utf8');
    chartVersion = /^version: (\S+)$/m.exec(chart)?.[1] ?? '';
    appVersion = /^appVersion: "?([^"\s]+)"?$/m.exec(chart)?.[1] ?? '';
  });

  afterAll(() => {
    t?.dispose();
  });

  it('passes helm lint --strict with the default values, with watchNamespaces, a NetworkPolicy and a ServiceMonitor', async () => {
    for (const set of [
      [],
      ['watchNamespaces={team-a,team-b}'],
      ['networkPolicy.enabled=true', 'networkPolicy.apiServer.cidrs={10.0.0.1/32}'],
      ['metrics.serviceMonitor.enabled=true', 'replicaCount=1'],
    ]) {
      const out = await t.helm(['lint', '--strict', chartDir, ...set.flatMap((s) => ['--set', s])]);
      expect(out).toContain('0 chart(s) failed');
      expect(out).not.toMatch(/\[(WARNING|ERROR)\]/);
    }
  });

  it('is usable as a dependency: a parent chart (file:// dependency, resolved offline) with global values passes helm lint --strict and renders', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nko-parent-'));
    try {
      const parent = join(dir, 'platform');
      mkdirSync(join(parent, 'templates'), { recursive: true });
      writeFileSync(
        join(parent, 'Chart.yaml'),
        [
          'apiVersion: v2',
          'name: platform',
          "description: A platform team's chart that bundles the operator.",
          'version: 1.0.0',
          'dependencies:',
          '  - name: neon-key-operator',
          `    version: "${chartVersion}"`,
          `    repository: file://${chartDir}`,
          '',
        ].join('\n'),
      );
      // Helm gives every subchart the parent's global (and an empty one without it).
      writeFileSync(join(parent, 'values.yaml'), 'global:\n  imageRegistry: registry.example\nneon-key-operator:\n  replicaCount: 1\n');
      expect(await t.helm(['dependency', 'update', parent])).toContain('Saving 1 charts');
      expect(readdirSync(join(parent, 'charts'))).toEqual([`neon-key-operator-${chartVersion}.tgz`]);
      expect(await t.helm(['dependency', 'build', parent])).toContain('Saving 1 charts');
      const lint = await t.helm(['lint', '--strict', '--with-subcharts', parent, '--kube-version', kubeVersion]);
      expect(lint).toContain('2 chart(s) linted, 0 chart(s) failed');
      expect(lint).not.toMatch(/\[(WARNING|ERROR)\]/);
      const objects = parseYaml(await t.helm(['template', 'platform', parent, '--namespace', 'ops', '--kube-version', kubeVersion]));
      expect(byKind(objects, 'Deployment').map((d) => [d.metadata.name, (d.spec as { replicas: number }).replicas])).toEqual([
        ['platform-neon-key-operator', 1],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('claims a lower bound of Kubernetes only: the next minor renders, 1.29 is refused', async () => {
    expect(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8')).toMatch(/^kubeVersion: ">=1\.30\.0-0"$/m);
    const render = (version: string): Promise<string> => t.helm(['template', 'k', chartDir, '--namespace', 'ops', '--kube-version', version]);
    expect(byKind(parseYaml(await render('1.38.0')), 'Deployment')).toHaveLength(1);
    await expect(render('1.29.15')).rejects.toThrow(/chart requires kubeVersion: >=1\.30\.0-0 which is incompatible with Kubernetes v1\.29\.15/);
  });

  it('refuses unknown or malformed values through values.schema.json, offline', async () => {
    const refused = async (set: string): Promise<string> => {
      try {
        await t.template('bad', 'ops', [set]);
      } catch (error) {
        if (error instanceof CommandError) return error.stderr;
        throw error;
      }
      throw new Error(`helm accepted --set ${set}`);
    };
    expect(await refused('replicas=3')).toMatch(/additional properties 'replicas' not allowed/);
    expect(await refused('image.digest=latest')).toContain('digest');
    expect(await refused('logLevel=loud')).toContain('logLevel');
    expect(await refused('platformUrl=console.neon.tech')).toContain('platformUrl');
    expect(await refused('watchNamespaces={Team_A}')).toContain('watchNamespaces');
    expect(await refused('watchNamespaces={team-a,team-a}')).toContain('watchNamespaces');
    expect(await refused('networkPolicy.enable=true')).toContain("'enable' not allowed");
    expect(await refused('networkPolicy.platform.cidrs={console.neon.tech}')).toContain('cidrs');
    expect(await refused('metrics.serviceMonitor.enable=true')).toContain("'enable' not allowed");
    expect(await refused('metrics.serviceMonitor.interval=1.5s')).toContain('interval');
    // The Role names the signing key's Secret: its name is a value, never an extra flag.
    expect(await refused('extraArgs={--signing-key-secret=other}')).toContain('extraArgs');
    expect(await refused('extraArgs={--leader-election-id=other}')).toContain('extraArgs');
    // Flags that a value sets (and the chart checks against watchNamespaces).
    expect(await refused('extraArgs={--issuer-secrets-namespace=ops}')).toContain('extraArgs');
    expect(await refused('extraArgs={--namespace-credentials=forbid}')).toContain('extraArgs');
    expect(await refused('namespaceCredentials=deny')).toContain('namespaceCredentials');
    expect(await refused('issuerSecretsNamespace=Platform_Keys')).toContain('issuerSecretsNamespace');
    // With watchNamespaces, the issuers' namespace must be one of them (its Role reads their Secrets).
    expect(await refused('watchNamespaces={team-a},issuerSecretsNamespace=platform-keys')).toContain('issuerSecretsNamespace');
  });

  it("passes a cluster name and a share of the organizations' rate as the flags the operator reads, refuses what it would refuse, and neither by default", async () => {
    const argsOf = async (set: string[]): Promise<string[]> =>
      operatorContainer(onlyOne(await t.template('keys', 'ops', set), 'Deployment') as Deployment).args;
    const ours = (args: string[]): string[] => args.filter((a) => /^--(cluster-name|organization-rate-share)=/.test(a));
    expect(ours(await argsOf([]))).toEqual([]);
    expect(ours(await argsOf(['organizationRateShare=1.0']))).toEqual([]);
    const args = await argsOf(['clusterName=prod-eu-1', 'organizationRateShare=0.5']);
    expect(ours(args)).toEqual(['--cluster-name=prod-eu-1', '--organization-rate-share=0.5']);
    const flags = readFlags(ours(args), {});
    expect(typeof flags === 'object' ? [flags.clusterName, flags.organizationRateShare] : flags).toEqual(['prod-eu-1', 0.5]);
    // A number, as a values file gives it (--set passes 0.5 as a string, taken too).
    const fromJson = parseYaml(
      await t.helm(['template', 'd', chartDir, '--namespace', 'ops', '--kube-version', kubeVersion, '--set-json', 'organizationRateShare=0.3']),
    );
    expect(ours(operatorContainer(onlyOne(fromJson, 'Deployment') as Deployment).args)).toEqual(['--organization-rate-share=0.3']);
    for (const set of [
      'clusterName=Prod',
      'clusterName=prod.eu',
      'clusterName=prod-',
      `clusterName=${'c'.repeat(21)}`,
      'organizationRateShare=0.05',
      'organizationRateShare=1.5',
      'organizationRateShare=half',
      'extraArgs={--cluster-name=prod}',
      'extraArgs={--organization-rate-share=0.5}',
    ]) {
      const refused = await t.template('bad', 'ops', [set]).then(
        () => undefined,
        (error: unknown) => (error instanceof CommandError ? error.stderr : String(error)),
      );
      expect(refused).toContain(set.replace(/[=.].*$/, ''));
    }
  });

  it("refuses the durations the operator refuses, and passes those it reads (one grammar: Go's)", async () => {
    // The schema's pattern is the operator's grammar (src/operator/go-duration.ts), character for character.
    const schema = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8')) as {
      definitions: Record<string, { pattern: string; not: { pattern: string } }>;
    };
    expect(schema.definitions.goDuration?.pattern).toBe(`^$|^(${GO_DURATION_SOURCE})$`);
    expect(schema.definitions.goDuration?.not.pattern).toBe(`^(${GO_ZERO_DURATION_SOURCE})$`);
    // And helm, with its own JSON schema validator and regular expressions, agrees with the
    // operator's flag parser on each of these (--set-string: as a user's values file writes them).
    // Not covered: a duration past Go's bound (about 292 years) passes the schema.
    const samples = [
      '5m',
      '1h30m',
      '1.5h',
      '.5s',
      '5.s',
      '250ms',
      '10us',
      '10\u00b5s',
      '10\u03bcs',
      '2h45m30s',
      '0',
      '0s',
      '0.0h',
      '300',
      '1d',
      '-5m',
      '+5m',
      '5 m',
      '1H',
      'm',
      '.s',
      '1e3s',
      'P1D',
    ];
    const verdicts: string[] = [];
    for (const value of samples) {
      let operator: string;
      try {
        const flags = readFlags([`--drift-interval=${value}`], {});
        operator = typeof flags === 'object' ? 'accepts' : 'asks for help';
      } catch (error) {
        operator = error instanceof FlagError ? 'refuses' : String(error);
      }
      let chart = 'accepts';
      try {
        const objects = parseYaml(
          await t.helm(['template', 'd', chartDir, '--namespace', 'ops', '--kube-version', kubeVersion, '--set-string', `driftInterval=${value}`]),
        );
        expect(operatorContainer(onlyOne(objects, 'Deployment') as Deployment).args).toContain(`--drift-interval=${value}`);
      } catch (error) {
        if (!(error instanceof CommandError)) throw error;
        expect(error.stderr).toContain('driftInterval');
        chart = 'refuses';
      }
      verdicts.push(`${value}: operator ${operator}, chart ${chart}`);
    }
    expect(verdicts).toEqual(
      samples.map((value) => {
        const same = ['0', '0s', '0.0h', '300', '1d', '-5m', '+5m', '5 m', '1H', 'm', '.s', '1e3s', 'P1D'].includes(value) ? 'refuses' : 'accepts';
        return `${value}: operator ${same}, chart ${same}`;
      }),
    );
  });

  it("names the signing key's Secret in the flag and in the Role alike (signingKeySecret)", async () => {
    const objects = await t.template('neon-key-operator', 'ops', ['signingKeySecret=team-signing-key']);
    expect(operatorContainer(onlyOne(objects, 'Deployment') as Deployment).args).toContain('--signing-key-secret=team-signing-key');
    const own = byKind(objects, 'Role').find((r) => r.metadata.namespace === 'ops' && r.metadata.name.endsWith('-leader-election'));
    expect(permissions(rulesOf(own as K8sObject))).toContain('|secrets|get@team-signing-key');
    expect(permissions(rulesOf(own as K8sObject)).filter((p) => p.startsWith('|secrets|get'))).toEqual(['|secrets|get@team-signing-key']);
  });

  it('renders, by default, a cluster-wide operator: two replicas with leader election, probes, a hardened pod', async () => {
    const objects = await t.template('neon-key-operator', 'ops');
    expect(
      operatorObjects(objects)
        .map((o) => o.kind)
        .sort(),
    ).toEqual([
      'ClusterRole',
      'ClusterRoleBinding',
      'Deployment',
      'PodDisruptionBudget',
      'Role',
      'RoleBinding',
      'Service',
      'ServiceAccount',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ]);
    expect(
      objects
        .filter(tenantRole)
        .map((o) => `${o.kind}/${o.metadata.name}`)
        .sort(),
    ).toEqual(['ClusterRole/neon-key-operator-edit', 'ClusterRole/neon-key-operator-view']);
    expect(objects.filter(issuerAdminRole).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['ClusterRole/neon-key-operator-issuer-admin']);
    expect(
      byKind(objects, 'CustomResourceDefinition')
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['apikeyinventories.keys.neon.dev', 'apikeys.keys.neon.dev', 'clusterkeyissuers.keys.neon.dev', 'projectapikeys.keys.neon.dev']);
    for (const o of objects) {
      expect(o.metadata.labels).toMatchObject({
        'app.kubernetes.io/name': 'neon-key-operator',
        'app.kubernetes.io/instance': 'neon-key-operator',
        'app.kubernetes.io/version': appVersion,
        'app.kubernetes.io/managed-by': 'Helm',
        'helm.sh/chart': `neon-key-operator-${chartVersion}`,
      });
      if (!o.kind.startsWith('Cluster') && !o.kind.startsWith('ValidatingAdmissionPolicy') && o.kind !== 'CustomResourceDefinition')
        expect(o.metadata.namespace).toBe('ops');
    }

    const deployment = onlyOne(objects, 'Deployment') as Deployment;
    expect(deployment.spec.replicas).toBe(2);
    const pod = deployment.spec.template.spec;
    const container = operatorContainer(deployment);
    expect(container.image).toBe(`ghcr.io/neon-key-operator/neon-key-operator:${appVersion}`);
    expect(container.args).toEqual([
      '--platform-url=https://console.neon.tech/api/v2',
      '--metrics-bind-address=:8080',
      '--health-probe-bind-address=:8081',
      '--leader-elect',
      '--signing-key-secret=neon-key-operator-signing-key',
    ]);
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'LOG_LEVEL', value: 'info' },
        expect.objectContaining({ name: 'POD_NAMESPACE' }),
        expect.objectContaining({ name: 'POD_NAME' }),
      ]),
    );
    expect(container.ports).toEqual([
      { name: 'metrics', containerPort: 8080, protocol: 'TCP' },
      { name: 'health', containerPort: 8081, protocol: 'TCP' },
    ]);
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'health' });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'health' });
    expect(container.resources.requests).toBeDefined();
    expect(container.resources.limits?.memory).toBeDefined();

    // Restricted Pod Security Standard: non-root, no escalation, no capabilities, RuntimeDefault seccomp.
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext.capabilities?.add).toBeUndefined();
    expect(container.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);

    // The replicas spread over nodes, softly (a one-node kind cluster still runs both).
    const selector = deployment.spec.selector.matchLabels;
    expect(selector).toEqual({ 'app.kubernetes.io/name': 'neon-key-operator', 'app.kubernetes.io/instance': 'neon-key-operator' });
    expect(deployment.spec.template.metadata.labels).toMatchObject(selector);
    expect(pod.topologySpreadConstraints?.map((c) => [c.topologyKey, c.whenUnsatisfiable, c.labelSelector.matchLabels])).toEqual([
      ['kubernetes.io/hostname', 'ScheduleAnyway', selector],
      ['topology.kubernetes.io/zone', 'ScheduleAnyway', selector],
    ]);

    const pdb = onlyOne(objects, 'PodDisruptionBudget') as K8sObject & { spec: { maxUnavailable: number; selector: { matchLabels: object } } };
    expect(pdb.spec).toEqual({ maxUnavailable: 1, selector: { matchLabels: selector } });
    const service = onlyOne(objects, 'Service') as K8sObject & { spec: { selector: object; ports: object[] } };
    expect(service.spec.selector).toEqual(selector);
    expect(service.spec.ports).toEqual([{ name: 'metrics', port: 8080, targetPort: 'metrics', protocol: 'TCP' }]);

    // Every binding names the chart's ServiceAccount in the release namespace.
    const serviceAccount = onlyOne(objects, 'ServiceAccount');
    expect(pod.serviceAccountName).toBe(serviceAccount.metadata.name);
    for (const binding of [...byKind(objects, 'ClusterRoleBinding'), ...byKind(objects, 'RoleBinding')]) {
      expect((binding as K8sObject & { subjects: object[] }).subjects).toEqual([
        { kind: 'ServiceAccount', name: serviceAccount.metadata.name, namespace: 'ops' },
      ]);
    }
  });

  it('grants exactly the RBAC contract, no wildcard, cluster-wide or per namespace, with or without leader election', async () => {
    for (const set of [[], ['watchNamespaces={team-a,team-b}'], ['leaderElection.enabled=false', 'replicaCount=1']]) {
      const objects = await t.template('neon-key-operator', 'ops', set);
      const own = onlyOne(objects, 'Role', (n) => n.endsWith('-leader-election'));
      expect(own.metadata.namespace).toBe('ops');
      noWildcards(rulesOf(own));
      expect([set, permissions(rulesOf(own))]).toEqual([set, ownNamespaceGrants(!set.includes('leaderElection.enabled=false'))]);

      const reconcileRoles = [...byKind(operatorObjects(objects), 'ClusterRole'), ...byKind(objects, 'Role').filter((r) => r !== own)];
      expect(reconcileRoles).toHaveLength(set[0]?.startsWith('watchNamespaces') === true ? 2 : 1);
      for (const role of reconcileRoles) {
        noWildcards(rulesOf(role));
        // The ClusterRole (every namespace) also grants the cluster-scoped issuers; a namespace's Role never does.
        expect([set, role.kind, permissions(rulesOf(role))]).toEqual([set, role.kind, role.kind === 'ClusterRole' ? clusterWideGrants : reconcileGrants]);
      }
    }
  });

  it('renders the tenant roles, aggregated to view/edit/admin, never status or Secrets; rbac.aggregateToDefaultRoles=false drops them', async () => {
    for (const set of [[], ['watchNamespaces={team-a}']]) {
      const roles = (await t.template('neon-key-operator', 'ops', set)).filter(tenantRole);
      expect([set, roles.map((r) => r.kind)]).toEqual([set, ['ClusterRole', 'ClusterRole']]);
      for (const [suffix, want] of Object.entries(TENANT_ROLES)) {
        const role = onlyOne(roles, 'ClusterRole', (n) => n === `neon-key-operator-${suffix}`);
        noWildcards(rulesOf(role));
        const grants = permissions(rulesOf(role));
        expect([suffix, grants]).toEqual([suffix, want.grants]);
        expect(grants.filter((g) => g.includes('/') || g.startsWith('|secrets'))).toEqual([]);
        const aggregated = Object.entries(role.metadata.labels ?? {})
          .filter(([k, v]) => k.startsWith('rbac.authorization.k8s.io/aggregate-to-') && v === 'true')
          .map(([k]) => k.slice('rbac.authorization.k8s.io/aggregate-to-'.length))
          .sort();
        expect([suffix, aggregated]).toEqual([suffix, want.aggregateTo]);
      }
    }
    expect(
      (await t.template('neon-key-operator', 'ops', ['rbac.aggregateToDefaultRoles=false']))
        .filter((o) => o.kind === 'ClusterRole')
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['neon-key-operator', 'neon-key-operator-issuer-admin']);
    // rbac.create=false: the platform team makes every role itself.
    expect((await t.template('neon-key-operator', 'ops', ['rbac.create=false'])).filter((o) => o.kind === 'ClusterRole')).toEqual([]);
  });

  it("renders the platform team's issuer-admin ClusterRole: every verb on ClusterKeyIssuers but status, bound to nobody, aggregated nowhere", async () => {
    const objects = await t.template('neon-key-operator', 'ops');
    const role = onlyOne(objects.filter(issuerAdminRole), 'ClusterRole');
    noWildcards(rulesOf(role));
    expect(permissions(rulesOf(role))).toEqual(ISSUER_ADMIN_GRANTS);
    expect(Object.keys(role.metadata.labels ?? {}).filter((k) => k.startsWith('rbac.authorization.k8s.io/'))).toEqual([]);
    const bound = [...byKind(objects, 'ClusterRoleBinding'), ...byKind(objects, 'RoleBinding')].map(
      (b) => (b as K8sObject & { roleRef: { name: string } }).roleRef.name,
    );
    expect(bound).not.toContain(role.metadata.name);
    // The tenant roles never name issuers (cluster-scoped; a team only names one in spec.issuerRef).
    for (const tenant of objects.filter(tenantRole))
      expect(
        rulesOf(tenant)
          .flatMap((r) => r.resources ?? [])
          .filter((r) => r.startsWith('clusterkeyissuers')),
      ).toEqual([]);
    // Not rendered without issuers (watchNamespaces alone), nor when asked not to, nor with rbac.create=false.
    for (const set of [['watchNamespaces={team-a}'], ['rbac.issuerAdminRole=false'], ['rbac.create=false']]) {
      expect([set, (await t.template('neon-key-operator', 'ops', set)).filter(issuerAdminRole)]).toEqual([set, []]);
    }
    const withIssuers = await t.template('neon-key-operator', 'ops', ['watchNamespaces={team-a,platform-keys}', 'issuerSecretsNamespace=platform-keys']);
    expect(withIssuers.filter(issuerAdminRole).map((o) => o.metadata.name)).toEqual(['neon-key-operator-issuer-admin']);
  });

  it('with watchNamespaces and issuerSecretsNamespace (one of them): issuers through a ClusterRole on them alone, their events in default, no other cluster-wide right', async () => {
    const objects = await t.template('keys', 'ops', ['watchNamespaces={team-a,platform-keys}', 'issuerSecretsNamespace=platform-keys']);
    const container = operatorContainer(onlyOne(objects, 'Deployment') as Deployment);
    expect(container.args).toEqual(expect.arrayContaining(['--watch-namespace=team-a,platform-keys', '--issuer-secrets-namespace=platform-keys']));
    const clusterRole = onlyOne(operatorObjects(objects), 'ClusterRole');
    expect(clusterRole.metadata.name).toBe('keys-neon-key-operator-issuers');
    noWildcards(rulesOf(clusterRole));
    expect(permissions(rulesOf(clusterRole))).toEqual(issuerGrants);
    const binding = onlyOne(objects, 'ClusterRoleBinding') as K8sObject & { roleRef: { name: string }; subjects: object[] };
    expect([binding.roleRef.name, binding.subjects]).toEqual([
      clusterRole.metadata.name,
      [{ kind: 'ServiceAccount', name: 'keys-neon-key-operator', namespace: 'ops' }],
    ]);
    // A Role per watched namespace as without issuers (the issuers' namespace among them), the own
    // namespace's, and one in default creating events only.
    const roles = byKind(objects, 'Role').map((r): [string | undefined, string, string[]] => [r.metadata.namespace, r.metadata.name, permissions(rulesOf(r))]);
    expect(roles.sort()).toEqual([
      [ISSUER_EVENTS_NAMESPACE, 'keys-neon-key-operator-issuer-events', [...issuerEventsGrants]],
      ['ops', 'keys-neon-key-operator-leader-election', ownNamespaceGrants()],
      ['platform-keys', 'keys-neon-key-operator', reconcileGrants],
      ['team-a', 'keys-neon-key-operator', reconcileGrants],
    ]);
    // default watched: its Role creates events already, none is added.
    const watchingDefault = await t.template('keys', 'ops', ['watchNamespaces={default,platform-keys}', 'issuerSecretsNamespace=platform-keys']);
    expect(byKind(watchingDefault, 'Role').map((r) => r.metadata.name)).not.toContain('keys-neon-key-operator-issuer-events');
  });

  it('passes issuerSecretsNamespace and namespaceCredentials to the operator, and nothing for their defaults', async () => {
    const args = async (set: string[]): Promise<string[]> =>
      operatorContainer(onlyOne(await t.template('neon-key-operator', 'ops', set), 'Deployment') as Deployment).args;
    const defaults = await args([]);
    expect(defaults.filter((a) => a.startsWith('--issuer-secrets-namespace') || a.startsWith('--namespace-credentials'))).toEqual([]);
    expect(await args(['issuerSecretsNamespace=platform-keys', 'namespaceCredentials=forbid'])).toEqual(
      expect.arrayContaining(['--issuer-secrets-namespace=platform-keys', '--namespace-credentials=forbid']),
    );
    expect(await args(['namespaceCredentials=allow'])).toEqual(defaults);
    // Namespaced mode: no issuers, and forbid leaves no way to mint (the chart passes it all the same).
    expect(await args(['watchNamespaces={team-a}', 'namespaceCredentials=forbid'])).toContain('--namespace-credentials=forbid');
    // The operator reads them (the values' schema refuses what its flag parser refuses).
    const flags = readFlags(await args(['issuerSecretsNamespace=platform-keys', 'namespaceCredentials=forbid']), {});
    expect(typeof flags === 'object' ? [flags.issuerSecretsNamespace, flags.allowNamespaceCredentials] : flags).toEqual(['platform-keys', false]);
  });

  it('with watchNamespaces, grants a Role in each watched namespace and nothing cluster-wide', async () => {
    const objects = await t.template('keys', 'ops', ['watchNamespaces={team-a,team-b}', 'workers=8', 'driftInterval=10m']);
    // The operator's: none. The tenant roles are for people (aggregated into view/edit/admin).
    expect(byKind(operatorObjects(objects), 'ClusterRole')).toEqual([]);
    expect(
      byKind(objects, 'ClusterRole')
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual(['keys-neon-key-operator-edit', 'keys-neon-key-operator-view']);
    expect(byKind(objects, 'ClusterRoleBinding')).toEqual([]);
    const roles = byKind(objects, 'Role').filter((r) => !r.metadata.name.endsWith('-leader-election'));
    expect(roles.map((r) => r.metadata.namespace)).toEqual(['team-a', 'team-b']);
    const bindings = byKind(objects, 'RoleBinding').filter((r) => !r.metadata.name.endsWith('-leader-election'));
    expect(bindings.map((b) => b.metadata.namespace)).toEqual(['team-a', 'team-b']);
    for (const binding of bindings) {
      expect((binding as K8sObject & { roleRef: object }).roleRef).toEqual({
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'Role',
        name: 'keys-neon-key-operator',
      });
    }
    const container = operatorContainer(onlyOne(objects, 'Deployment') as Deployment);
    expect(container.args).toEqual(expect.arrayContaining(['--watch-namespace=team-a,team-b', '--workers=8', '--drift-interval=10m']));
  });

  it('renders a NetworkPolicy only when asked: in to metrics and health, out to the API server, the platform and DNS', async () => {
    for (const set of [[], ['watchNamespaces={team-a}']]) expect(byKind(await t.template('neon-key-operator', 'ops', set), 'NetworkPolicy')).toEqual([]);
    const set = [
      'networkPolicy.enabled=true',
      'networkPolicy.apiServer.cidrs={10.96.0.1/32,172.18.0.2/32}',
      'networkPolicy.platform.ports={443}',
      'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring',
    ];
    const objects = await t.template('neon-key-operator', 'ops', set);
    onlyOne(objects, 'NetworkPolicy');
    // As JSON by kubectl: client-node's YAML loader renames fields (from becomes _from).
    const rendered = await t.helm([
      'template',
      'neon-key-operator',
      chartDir,
      '--namespace',
      'ops',
      '--show-only',
      'templates/networkpolicy.yaml',
      '--kube-version',
      kubeVersion,
      ...set.flatMap((s) => ['--set', s]),
    ]);
    const policy = JSON.parse(await t.kubectl(['create', '--dry-run=client', '-o', 'json', '-f', '-'], rendered)) as K8sObject & { spec: object };
    expect(policy.metadata.namespace).toBe('ops');
    const selector = { 'app.kubernetes.io/name': 'neon-key-operator', 'app.kubernetes.io/instance': 'neon-key-operator' };
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        { ports: [{ port: 'metrics', protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { name: 'monitoring' } } }] },
        { ports: [{ port: 'health', protocol: 'TCP' }] },
      ],
      egress: [
        {
          ports: [
            { port: 443, protocol: 'TCP' },
            { port: 6443, protocol: 'TCP' },
          ],
          to: [{ ipBlock: { cidr: '10.96.0.1/32' } }, { ipBlock: { cidr: '172.18.0.2/32' } }],
        },
        { ports: [{ port: 443, protocol: 'TCP' }] },
        {
          ports: [
            { port: 53, protocol: 'UDP' },
            { port: 53, protocol: 'TCP' },
          ],
        },
      ],
    });
    // The pod's named ports are the ones the policy opens.
    const container = operatorContainer(onlyOne(objects, 'Deployment') as Deployment);
    expect(container.ports.map((p) => p.name)).toEqual(['metrics', 'health']);
  });

  it('follows its values: one replica without leader election or PDB, a digest, a ServiceMonitor, extra env and args', async () => {
    const objects = await t.template('neon-key-operator', 'ops', [
      'replicaCount=1',
      'leaderElection.enabled=false',
      'logLevel=debug',
      'image.digest=sha256:' + 'a'.repeat(64),
      'platformUrl=http://emulator.neon-emulator.svc:8080/api/v2',
      'metrics.serviceMonitor.enabled=true',
      'metrics.serviceMonitor.labels.release=prometheus',
      'extraEnv[0].name=UV_THREADPOOL_SIZE',
      'extraEnv[0].value=eight',
      'extraArgs={--some-flag=1}',
    ]);
    expect(byKind(objects, 'PodDisruptionBudget')).toEqual([]);
    // The own-namespace Role stays (the intent-signing key), without a Lease.
    const own = onlyOne(objects, 'Role');
    expect(rulesOf(own).flatMap((r) => r.resources ?? [])).not.toContain('leases');
    const deployment = onlyOne(objects, 'Deployment') as Deployment;
    expect(deployment.spec.replicas).toBe(1);
    const container = operatorContainer(deployment);
    expect(container.image).toBe(`ghcr.io/neon-key-operator/neon-key-operator@sha256:${'a'.repeat(64)}`);
    expect(container.args).not.toContain('--leader-elect');
    expect(container.args).toEqual(expect.arrayContaining(['--platform-url=http://emulator.neon-emulator.svc:8080/api/v2', '--some-flag=1']));
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'LOG_LEVEL', value: 'debug' },
        { name: 'UV_THREADPOOL_SIZE', value: 'eight' },
      ]),
    );
    const monitor = onlyOne(objects, 'ServiceMonitor') as K8sObject & { spec: { selector: object; endpoints: { port: string; path: string }[] } };
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(monitor.metadata.labels?.release).toBe('prometheus');
    expect(monitor.spec.endpoints[0]).toMatchObject({ port: 'metrics', path: '/metrics' });
  });

  it(`passes the operator only flags it declares (node ${OPERATOR_SOURCE} parses them strictly)`, async () => {
    const objects = await t.template('neon-key-operator', 'ops', ['watchNamespaces={team-a}', 'workers=8', 'driftInterval=10m', 'namespaceCredentials=forbid']);
    const args = operatorContainer(onlyOne(objects, 'Deployment') as Deployment).args;
    expect(args.map((a) => a.replace(/=.*/, '')).sort()).toEqual([
      '--drift-interval',
      '--health-probe-bind-address',
      '--leader-elect',
      '--metrics-bind-address',
      '--namespace-credentials',
      '--platform-url',
      '--signing-key-secret',
      '--watch-namespace',
      '--workers',
    ]);
    expect(args).toContain('--watch-namespace=team-a');
    // parseArgs (strict) rejects an unknown flag or a value given to a boolean before --help prints.
    const result = runOperatorSync({ args: [...args, '--help'], timeoutMs: 30_000 });
    expect(result.stderr).not.toMatch(/ERR_PARSE_ARGS/);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('--platform-url');
  });

  it('ships files/crds/ byte for byte equal to the generated top-level crds/, and no crds/ (which helm would never upgrade)', () => {
    const top = readdirSync(join(root, 'crds'))
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    expect(top).toEqual([
      'keys.neon.dev_apikeyinventories.yaml',
      'keys.neon.dev_apikeys.yaml',
      'keys.neon.dev_clusterkeyissuers.yaml',
      'keys.neon.dev_projectapikeys.yaml',
    ]);
    expect(readdirSync(join(chartDir, 'files', 'crds')).sort()).toEqual(top);
    for (const file of top) {
      expect(readFileSync(join(chartDir, 'files', 'crds', file), 'utf8')).toBe(readFileSync(join(root, 'crds', file), 'utf8'));
    }
    expect(existsSync(join(chartDir, 'crds'))).toBe(false);
  });

  it('renders the CRDs as templates (upgraded with the release), kept on uninstall by default; crds.keep and crds.enabled', async () => {
    const generated = readdirSync(join(root, 'crds'))
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .flatMap((f) => parseYaml(readFileSync(join(root, 'crds', f), 'utf8')));
    const crds = (objects: K8sObject[]): (K8sObject & { spec: unknown; metadata: { annotations?: Record<string, string> } })[] =>
      byKind(objects, 'CustomResourceDefinition') as (K8sObject & { spec: unknown; metadata: { annotations?: Record<string, string> } })[];
    const byDefault = crds(await t.template('neon-key-operator', 'ops'));
    expect(byDefault.map((c) => c.metadata.name)).toEqual(generated.map((c) => c.metadata.name));
    for (const [i, crd] of byDefault.entries()) {
      // The same definition as crds/ (what kubectl and GitOps users apply), plus the release's labels.
      expect(crd.spec).toEqual((generated[i] as K8sObject & { spec: unknown }).spec);
      expect(crd.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
      expect(crd.metadata.labels).toMatchObject({
        'app.kubernetes.io/name': 'neon-key-operator',
        'app.kubernetes.io/component': 'crds',
        'helm.sh/chart': `neon-key-operator-${chartVersion}`,
      });
    }
    const notKept = crds(await t.template('neon-key-operator', 'ops', ['crds.keep=false']));
    expect(notKept).toHaveLength(generated.length);
    for (const crd of notKept) expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBeUndefined();
    expect(crds(await t.template('neon-key-operator', 'ops', ['crds.enabled=false']))).toEqual([]);
  });

  const hasBase = existsSync(join(baseDir, 'kustomization.yaml'));
  (hasBase ? it : it.skip)('grants the same rules as deploy/base (one truth for RBAC) and runs the same way', async () => {
    const base = parseYaml(await t.kubectl(['kustomize', baseDir]));
    const chart = await t.template('neon-key-operator', 'neon-key-operator-system');
    const baseClusterRole = onlyOne(operatorObjects(base), 'ClusterRole');
    const chartClusterRole = onlyOne(operatorObjects(chart), 'ClusterRole');
    expect(permissions(rulesOf(baseClusterRole))).toEqual(permissions(rulesOf(chartClusterRole)));
    // The tenant roles: the same names (the release is named after the chart), labels and rules.
    const tenantRoles = (objects: K8sObject[]): [string, Record<string, string>, string[]][] =>
      objects
        .filter(tenantRole)
        .map((o): [string, Record<string, string>, string[]] => [
          o.metadata.name,
          Object.fromEntries(Object.entries(o.metadata.labels ?? {}).filter(([k]) => k.startsWith('rbac.authorization.k8s.io/'))),
          permissions(rulesOf(o)),
        ])
        .sort(([a], [b]) => a.localeCompare(b));
    expect(tenantRoles(base)).toHaveLength(2);
    expect(tenantRoles(base)).toEqual(tenantRoles(chart));
    // The platform team's issuer-admin role: the same name and rules.
    const issuerAdmin = (objects: K8sObject[]): [string, string[]][] => objects.filter(issuerAdminRole).map((o) => [o.metadata.name, permissions(rulesOf(o))]);
    expect(issuerAdmin(base)).toEqual([['neon-key-operator-issuer-admin', ISSUER_ADMIN_GRANTS]]);
    expect(issuerAdmin(base)).toEqual(issuerAdmin(chart));

    // The issued keys' admission policy (docs/issuers.md, "Deletion"): the same name, rules and
    // binding, the operator's ServiceAccount named from the release; off with rbac.issuedKeysPolicy=false.
    const policy = (objects: K8sObject[]): unknown =>
      byKind(objects, 'ValidatingAdmissionPolicy')
        .concat(byKind(objects, 'ValidatingAdmissionPolicyBinding'))
        .map((o) => ({ kind: o.kind, name: o.metadata.name, spec: (o as K8sObject & { spec: unknown }).spec }));
    expect(policy(base)).toEqual(policy(chart));
    expect(JSON.stringify(policy(chart))).toContain("request.userInfo.username != 'system:serviceaccount:neon-key-operator-system:neon-key-operator'");
    expect(policy(await t.template('neon-key-operator', 'neon-key-operator-system', ['rbac.issuedKeysPolicy=false']))).toEqual([]);
    // With watchNamespaces, it governs those namespaces only: installs watching other namespaces keep theirs.
    const scoped = byKind(await t.template('team-b-keys', 'ops-b', ['watchNamespaces={team-b,team-c}']), 'ValidatingAdmissionPolicy')[0] as K8sObject & {
      spec: { matchConstraints: Record<string, unknown> };
    };
    expect(scoped.spec.matchConstraints.namespaceSelector).toEqual({
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-b', 'team-c'] }],
    });
    expect(
      (byKind(chart, 'ValidatingAdmissionPolicy')[0] as K8sObject & { spec: { matchConstraints: Record<string, unknown> } }).spec.matchConstraints
        .namespaceSelector,
    ).toBeUndefined();

    const baseLeader = onlyOne(base, 'Role', (n) => n.includes('leader'));
    const chartLeader = onlyOne(chart, 'Role', (n) => n.includes('leader'));
    expect(permissions(rulesOf(baseLeader))).toEqual(permissions(rulesOf(chartLeader)));

    const baseContainer = (onlyOne(base, 'Deployment') as Deployment).spec.template.spec.containers[0] as Container;
    const chartContainer = operatorContainer(onlyOne(chart, 'Deployment') as Deployment);
    expect(baseContainer.livenessProbe.httpGet.path).toBe(chartContainer.livenessProbe.httpGet.path);
    expect(baseContainer.readinessProbe.httpGet.path).toBe(chartContainer.readinessProbe.httpGet.path);
    expect(baseContainer.ports.map((p) => [p.name, p.containerPort])).toEqual(chartContainer.ports.map((p) => [p.name, p.containerPort]));
    expect(baseContainer.args).toEqual(expect.arrayContaining(['--leader-elect', '--metrics-bind-address=:8080', '--health-probe-bind-address=:8081']));
  });

  (existsSync(join(overlayDir, 'kustomization.yaml')) ? it : it.skip)(
    'grants in namespaced mode what the chart grants with watchNamespaces: deploy/overlays/namespaced',
    async () => {
      const overlay = parseYaml(await t.kubectl(['kustomize', overlayDir]));
      const chart = await t.template('neon-key-operator', 'neon-key-operator-system', ['watchNamespaces={team-a,team-b}']);
      for (const objects of [overlay, chart]) {
        expect(byKind(operatorObjects(objects), 'ClusterRole')).toEqual([]);
        expect(objects.filter(issuerAdminRole)).toEqual([]);
        expect(byKind(objects, 'ClusterRoleBinding')).toEqual([]);
      }
      const reconcileRoles = (objects: K8sObject[]): [string | undefined, string[]][] =>
        byKind(objects, 'Role')
          .filter((r) => !r.metadata.name.includes('leader'))
          .map((r) => [r.metadata.namespace, permissions(rulesOf(r))]);
      expect(reconcileRoles(overlay)).toEqual([
        ['team-a', reconcileGrants],
        ['team-b', reconcileGrants],
      ]);
      expect(reconcileRoles(overlay)).toEqual(reconcileRoles(chart));
      const leader = (objects: K8sObject[]): string[] => permissions(rulesOf(onlyOne(objects, 'Role', (n) => n.includes('leader'))));
      expect(leader(overlay)).toEqual(leader(chart));
      // Every binding names the operator's ServiceAccount in its own namespace.
      for (const binding of byKind(overlay, 'RoleBinding')) {
        expect((binding as K8sObject & { subjects: object[] }).subjects).toEqual([
          { kind: 'ServiceAccount', name: 'neon-key-operator', namespace: 'neon-key-operator-system' },
        ]);
      }
      const args = (onlyOne(overlay, 'Deployment') as Deployment).spec.template.spec.containers[0]?.args;
      expect(args).toContain('--watch-namespace=team-a,team-b');
      // No issuers in the overlay, so no issued keys' policy, which would match every namespace there.
      expect(byKind(overlay, 'ValidatingAdmissionPolicy').concat(byKind(overlay, 'ValidatingAdmissionPolicyBinding'))).toEqual([]);
    },
  );
});
