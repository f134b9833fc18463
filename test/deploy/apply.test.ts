// The manifests against the real kube-apiserver: what `kubectl apply` and `helm install` would do,
// admitted by the apiserver's own validation (server-side dry run), and the RBAC a real install
// creates, asked of the apiserver's authorizer for the operator's ServiceAccount.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AuthorizationV1Api, VersionApi } from '@kubernetes/client-node';
import { testCrdYaml } from '../harness/crds.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { baseDir, chartDir, CommandError, parseYaml, tools, type Tools } from './kube-tools.ts';

const suffix = randomBytes(3).toString('hex');
const ns = `deploy-${suffix}`;
const watched = [`deploy-${suffix}-a`, `deploy-${suffix}-b`];
const unwatched = `deploy-${suffix}-other`;

describe('the manifests applied to a real apiserver', () => {
  let cp: ControlPlane;
  let t: Tools;
  let authz: AuthorizationV1Api;
  let kubeVersion: string;
  const createdNamespaces: string[] = [];
  const releases: { name: string; namespace: string }[] = [];

  /** keep: a namespace other suites of this run may share (deploy/base's): made if missing, never deleted. */
  const createNamespace = async (name: string, keep = false): Promise<void> => {
    try {
      await t.kubectl(['create', 'namespace', name]);
      if (!keep) createdNamespaces.push(name);
    } catch (error) {
      // Another suite of this run may have made it (deploy/base's namespace): that is as good.
      if (!(error instanceof CommandError && error.stderr.includes('AlreadyExists'))) throw error;
    }
  };
  /**
   * Server-side dry run; kubectl's warnings (PodSecurity among them) fail it. --force-conflicts: it
   * changes nothing, and other suites of this run apply deploy/base for real under their own manager.
   */
  const dryRun = async (manifests: string): Promise<string> => {
    const { stdout, stderr } = await t.kubectlOutput(
      ['apply', '--server-side', '--dry-run=server', '--force-conflicts', '--field-manager=deploy-test', '-f', '-'],
      manifests,
    );
    expect(stderr).toBe('');
    return stdout;
  };

  /** What the apiserver's authorizer answers for the ServiceAccount. */
  const can = async (
    serviceAccount: string,
    saNamespace: string,
    verb: string,
    resource: string,
    namespace?: string,
    group = '',
    name?: string,
  ): Promise<boolean> => {
    const [plural, subresource] = resource.split('/');
    const review = await authz.createSubjectAccessReview({
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${saNamespace}:${serviceAccount}`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${saNamespace}`, 'system:authenticated'],
          resourceAttributes: { verb, group, resource: plural, subresource, namespace, name },
        },
      },
    });
    return review.status?.allowed === true;
  };
  /** The authorizer reads RBAC objects through an informer: a new binding takes a moment to count. */
  const settles = async (expected: boolean, ...args: Parameters<typeof can>): Promise<boolean> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const answer = await can(...args);
      if (answer === expected || Date.now() > deadline) return answer;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  beforeAll(async () => {
    cp = await controlPlane();
    kubeVersion = (await cp.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion;
    t = tools(cp, kubeVersion);
    authz = cp.kubeConfig.makeApiClient(AuthorizationV1Api);
    // The CRDs for real (crds/ with the test run's gracePeriod floor, test/harness/crds.ts; the
    // chart's files/crds/ are the same files): custom resources, their RBAC and the dry runs below need
    // their API to exist.
    // --force-conflicts: other suites of this run apply the same CRDs under their own field manager.
    await t.kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=deploy-test', '-f', '-'], testCrdYaml());
    await t.kubectl(['wait', '--for=condition=Established', '--timeout=30s', 'crd/apikeys.keys.neon.dev', 'crd/projectapikeys.keys.neon.dev']);
    await Promise.all([ns, ...watched, unwatched].map((name) => createNamespace(name)));
    // The release namespace enforces the restricted Pod Security Standard: the apiserver's PodSecurity
    // admission warns on a Deployment whose pod template would be refused.
    await t.kubectl(['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/warn=restricted']);
  });

  afterAll(async () => {
    // One command per kind of cleanup (each kubectl or helm is a process and a connection).
    await Promise.all(releases.map((release) => t?.helm(['uninstall', release.name, '--namespace', release.namespace, '--wait=false']).catch(() => undefined)));
    if (createdNamespaces.length > 0)
      await t?.kubectl(['delete', 'namespace', ...createdNamespaces, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    t?.dispose();
  });

  it('admits the chart output with default values, restricted Pod Security included (server-side dry run)', async () => {
    // A release name of its own: "neon-key-operator" would name the ClusterRole of deploy/base.
    const manifests = await t.helm(['template', `dry-${suffix}`, chartDir, '--namespace', ns, '--kube-version', kubeVersion]);
    const out = await dryRun(manifests);
    for (const kind of [
      'serviceaccount',
      'clusterrole.rbac.authorization.k8s.io',
      'clusterrolebinding.rbac.authorization.k8s.io',
      'role.rbac.authorization.k8s.io',
      'rolebinding.rbac.authorization.k8s.io',
      'deployment.apps',
      'poddisruptionbudget.policy',
      'service',
    ]) {
      expect(out).toMatch(new RegExp(`^${kind.replace(/\./g, '\\.')}/\\S+ serverside-applied \\(server dry run\\)$`, 'm'));
    }
  });

  it('admits the chart output with watchNamespaces and a NetworkPolicy, a ServiceMonitor left out (server-side dry run)', async () => {
    const set = [
      `watchNamespaces={${watched.join(',')}}`,
      'workers=4',
      'driftInterval=2m',
      'replicaCount=3',
      'networkPolicy.enabled=true',
      'networkPolicy.apiServer.cidrs={127.0.0.1/32}',
      'networkPolicy.metricsFrom[0].podSelector.matchLabels.app=prometheus',
    ];
    const manifests = await t.helm([
      'template',
      `dryns-${suffix}`,
      chartDir,
      '--namespace',
      ns,
      '--kube-version',
      kubeVersion,
      ...set.flatMap((s) => ['--set', s]),
    ]);
    const out = await dryRun(manifests);
    // A Role per watched namespace, and the one in the release namespace.
    expect(out.match(/^role\.rbac\.authorization\.k8s\.io\/\S+ serverside-applied/gm)).toHaveLength(watched.length + 1);
    expect(out).toMatch(/^networkpolicy\.networking\.k8s\.io\/\S+ serverside-applied \(server dry run\)$/m);
    // No cluster-wide grant to the operator; the tenant roles (for people, aggregated into view/edit) are the only ClusterRoles.
    expect(out.match(/^clusterrole\.rbac\.authorization\.k8s\.io\/\S+/gm)?.sort()).toEqual([
      `clusterrole.rbac.authorization.k8s.io/dryns-${suffix}-neon-key-operator-edit`,
      `clusterrole.rbac.authorization.k8s.io/dryns-${suffix}-neon-key-operator-view`,
    ]);
    expect(out).not.toContain('clusterrolebinding');
  });

  const hasBase = existsSync(join(baseDir, 'kustomization.yaml'));
  (hasBase ? it : it.skip)('admits the kustomize base, deploy/base (server-side dry run)', async () => {
    const manifests = await t.kubectl(['kustomize', baseDir]);
    const objects = parseYaml(manifests);
    // The namespaced objects need their namespace to exist: a dry run of the Namespace creates nothing.
    for (const name of new Set(objects.flatMap((o) => (o.kind === 'Namespace' ? [o.metadata.name] : (o.metadata.namespace ?? []))))) {
      await createNamespace(name, true);
    }
    const out = await dryRun(manifests);
    expect(out.trim().split('\n')).toHaveLength(objects.length);
    expect(out).toContain('deployment.apps/neon-key-operator serverside-applied (server dry run)');
  });

  it('installs with helm, and its ServiceAccount may do what the operator does and nothing more', async () => {
    const release = `nko-${suffix}`;
    releases.push({ name: release, namespace: ns });
    // No --wait: this control plane has no nodes, the pods stay Pending; the API objects are what counts.
    // crds.enabled=false: the CRDs exist already (applied with kubectl above and by other suites), and
    // a release never takes over objects it did not make; as for a second release in one cluster.
    const out = await t.helm(['install', release, chartDir, '--namespace', ns, '--set', 'crds.enabled=false', '--set', 'rbac.issuedKeysPolicy=false']);
    expect(out).toContain('STATUS: deployed');
    expect(out).toContain('Watching: every namespace');
    const sa = `${release}-neon-key-operator`;
    const anywhere = watched[0];

    const allowed: [string, string, string | undefined, string?, string?][] = [
      ['list', 'apikeys', undefined, 'keys.neon.dev'],
      ['watch', 'projectapikeys', undefined, 'keys.neon.dev'],
      ['update', 'projectapikeys', anywhere, 'keys.neon.dev'],
      ['patch', 'apikeys/status', anywhere, 'keys.neon.dev'],
      ['update', 'apikeys/status', anywhere, 'keys.neon.dev'],
      ['update', 'projectapikeys/finalizers', anywhere, 'keys.neon.dev'],
      ['list', 'secrets', undefined],
      ['create', 'secrets', anywhere],
      ['delete', 'secrets', anywhere],
      ['create', 'events', anywhere],
      ['get', 'leases', ns, 'coordination.k8s.io', 'neon-key-operator'],
      ['create', 'leases', ns, 'coordination.k8s.io'],
      ['update', 'leases', ns, 'coordination.k8s.io', 'neon-key-operator'],
      // ClusterKeyIssuers (cluster-scoped, cluster-wide mode) and the resource's own Namespace.
      ['watch', 'clusterkeyissuers', undefined, 'keys.neon.dev'],
      ['update', 'clusterkeyissuers', undefined, 'keys.neon.dev', 'team-keys'],
      ['patch', 'clusterkeyissuers/status', undefined, 'keys.neon.dev', 'team-keys'],
      ['get', 'namespaces', anywhere, '', anywhere],
    ];
    const denied: [string, string, string | undefined, string?, string?][] = [
      ['create', 'apikeys', anywhere, 'keys.neon.dev'],
      ['delete', 'projectapikeys', anywhere, 'keys.neon.dev'],
      // Verbs the code never calls (test/deploy/rbac-contract.ts).
      ['patch', 'projectapikeys', anywhere, 'keys.neon.dev'],
      ['update', 'apikeyinventories/status', anywhere, 'keys.neon.dev'],
      ['patch', 'secrets', anywhere],
      ['patch', 'events', anywhere],
      ['create', 'events', anywhere, 'events.k8s.io'],
      ['update', 'leases', ns, 'coordination.k8s.io', 'another-lease'],
      ['get', 'leases', ns, 'coordination.k8s.io'],
      ['get', 'configmaps', anywhere],
      ['list', 'pods', undefined],
      ['create', 'namespaces', undefined],
      ['update', 'customresourcedefinitions', undefined, 'apiextensions.k8s.io'],
      ['escalate', 'clusterroles', undefined, 'rbac.authorization.k8s.io'],
      ['create', 'serviceaccounts/token', ns],
      ['get', 'leases', anywhere, 'coordination.k8s.io'],
      ['delete', 'leases', ns, 'coordination.k8s.io'],
      ['create', 'clusterkeyissuers', undefined, 'keys.neon.dev'],
      ['delete', 'clusterkeyissuers', undefined, 'keys.neon.dev', 'team-keys'],
      ['patch', 'clusterkeyissuers', undefined, 'keys.neon.dev', 'team-keys'],
      ['update', 'clusterkeyissuers/finalizers', undefined, 'keys.neon.dev', 'team-keys'],
      ['list', 'namespaces', undefined],
      ['update', 'namespaces', anywhere, '', anywhere],
    ];
    for (const [verb, resource, namespace, group, name] of allowed) {
      expect([verb, resource, namespace, name, await settles(true, sa, ns, verb, resource, namespace, group, name)]).toEqual([
        verb,
        resource,
        namespace,
        name,
        true,
      ]);
    }
    for (const [verb, resource, namespace, group, name] of denied) {
      expect([verb, resource, namespace, name, await can(sa, ns, verb, resource, namespace, group, name)]).toEqual([verb, resource, namespace, name, false]);
    }

    const uninstalled = await t.helm(['uninstall', release, '--namespace', ns, '--wait=false']);
    releases.splice(
      releases.findIndex((r) => r.name === release),
      1,
    );
    expect(uninstalled).toContain(`release "${release}" uninstalled`);
    expect(await settles(false, sa, ns, 'list', 'secrets', anywhere)).toBe(false);
    // The CRDs were not the release's (crds.enabled=false): the custom resources (and the keys) outlive it.
    await t.kubectl(['get', 'crd', 'apikeys.keys.neon.dev']);
  });

  it('installs with helm for a watched namespace only: rights there, none elsewhere', async () => {
    const release = `nkw-${suffix}`;
    releases.push({ name: release, namespace: ns });
    const out = await t.helm([
      'install',
      release,
      chartDir,
      '--namespace',
      ns,
      '--set',
      'crds.enabled=false',
      '--set',
      'rbac.issuedKeysPolicy=false',
      '--set',
      `watchNamespaces={${watched.join(',')}}`,
    ]);
    expect(out).toContain(`Watching: ${watched.join(', ')}`);
    const sa = `${release}-neon-key-operator`;
    for (const namespace of watched) {
      expect(await settles(true, sa, ns, 'list', 'secrets', namespace)).toBe(true);
      expect(await settles(true, sa, ns, 'watch', 'apikeys', namespace, 'keys.neon.dev')).toBe(true);
      expect(await settles(true, sa, ns, 'patch', 'projectapikeys/status', namespace, 'keys.neon.dev')).toBe(true);
    }
    expect(await can(sa, ns, 'list', 'secrets', unwatched)).toBe(false);
    expect(await can(sa, ns, 'list', 'secrets', undefined)).toBe(false);
    expect(await can(sa, ns, 'list', 'apikeys', undefined, 'keys.neon.dev')).toBe(false);
    // No issuer in this mode; its own namespaces' Namespace objects only.
    expect(await can(sa, ns, 'get', 'clusterkeyissuers', undefined, 'keys.neon.dev', 'team-keys')).toBe(false);
    expect(await can(sa, ns, 'list', 'clusterkeyissuers', undefined, 'keys.neon.dev')).toBe(false);
    expect(await settles(true, sa, ns, 'get', 'namespaces', watched[0], '', watched[0])).toBe(true);
    expect(await can(sa, ns, 'get', 'namespaces', unwatched, '', unwatched)).toBe(false);
    expect(await settles(true, sa, ns, 'update', 'leases', ns, 'coordination.k8s.io', 'neon-key-operator')).toBe(true);
    // The intent-signing key in the release namespace: read by name only, created.
    expect(await settles(true, sa, ns, 'get', 'secrets', ns, '', 'neon-key-operator-signing-key')).toBe(true);
    expect(await can(sa, ns, 'get', 'secrets', ns, '', 'neon-admin')).toBe(false);
    expect(await can(sa, ns, 'list', 'secrets', ns)).toBe(false);
    expect(await settles(true, sa, ns, 'create', 'secrets', ns)).toBe(true);

    // An upgrade back to the defaults (every namespace) swaps the Roles for the ClusterRole.
    await t.helm(['upgrade', release, chartDir, '--namespace', ns, '--reset-values', '--set', 'crds.enabled=false', '--set', 'rbac.issuedKeysPolicy=false']);
    expect(await settles(true, sa, ns, 'list', 'secrets', unwatched)).toBe(true);
    expect(await settles(false, sa, ns, 'get', 'leases', watched[0], 'coordination.k8s.io')).toBe(false);
    const roles = await t.kubectl(['get', 'roles', '-n', watched[0] as string, '-l', `app.kubernetes.io/instance=${release}`, '-o', 'name']);
    expect(roles.trim()).toBe('');
  });
});
