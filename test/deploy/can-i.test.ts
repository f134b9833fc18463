// What the operator's ServiceAccount may do, in each install mode, as `kubectl auth can-i --list`
// answers it when run WITH THAT ServiceAccount's token (a SelfSubjectRulesReview: the apiserver's
// own account of every rule that applies to the caller in a namespace). Each mode is installed for
// real: deploy/base and deploy/overlays/namespaced with kubectl (their namespaces renamed, so that
// suites applying deploy/base itself are not disturbed), the chart with helm install. The listing
// must be exactly the RBAC contract (rbac-contract.ts) on top of what every authenticated user
// has, in the operator's namespace, in a watched namespace and in a namespace it does not watch.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VersionApi } from '@kubernetes/client-node';
import { kubeconfigYaml } from '../harness/controlplane.ts';
import { testCrdYaml } from '../harness/crds.ts';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { baseDir, chartDir, CommandError, parseYaml, root, tools, type K8sObject, type Tools } from './kube-tools.ts';
import { clusterWideGrants, issuerEventsGrants, issuerGrants, ISSUER_EVENTS_NAMESPACE, ownNamespaceGrants, reconcileGrants } from './rbac-contract.ts';

const suffix = randomBytes(3).toString('hex');
const overlayDir = join(root, 'deploy/overlays/namespaced');
const RBAC_KINDS = new Set(['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

/** One line of `kubectl auth can-i --list`: Resources, Non-Resource URLs, Resource Names, Verbs. */
const LINE = /^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$/;

/**
 * The listing as a set of `group|resource|verb[@name]` (the form of rbac-contract.ts), and
 * `url|verb` for non-resource URLs. kubectl prints a resource as `plural[/sub][.group]`.
 */
function parseCanIList(text: string): string[] {
  const out = new Set<string>();
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  expect(lines[0]).toMatch(/^Resources\s+Non-Resource URLs\s+Resource Names\s+Verbs/);
  for (const line of lines.slice(1)) {
    const match = LINE.exec(line);
    if (match === null) throw new Error(`unexpected kubectl auth can-i --list line: ${line}`);
    const [, resource = '', urls = '', names = '', verbs = ''] = match;
    const split = (list: string): string[] => list.split(' ').filter((s) => s !== '');
    for (const verb of split(verbs)) {
      for (const url of split(urls)) out.add(`url:${url}|${verb}`);
      if (resource === '') continue;
      const dot = resource.indexOf('.');
      const [plural, group] = dot === -1 ? [resource, ''] : [resource.slice(0, dot), resource.slice(dot + 1)];
      // A subresource may be printed before or after the group: apikeys/status.keys.neon.dev.
      const [base, sub] = plural.split('/');
      const [groupName, groupSub] = group.split('/');
      const full = `${base}${sub !== undefined ? `/${sub}` : groupSub !== undefined ? `/${groupSub}` : ''}`;
      const nameList = split(names);
      for (const name of nameList.length === 0 ? [undefined] : nameList) out.add(`${groupName ?? ''}|${full}|${verb}${name !== undefined ? `@${name}` : ''}`);
    }
  }
  return [...out].sort();
}

interface Mode {
  title: string;
  /** Where the ServiceAccount lives, its name, the namespaces it watches (none: every one). */
  operatorNamespace: string;
  serviceAccount: string;
  watched: string[];
  unwatched: string;
  /** Namespaced mode with issuers (the chart's issuerSecretsNamespace): their ClusterRole, events in default. */
  issuers?: boolean;
}

describe("kubectl auth can-i --list as the operator's ServiceAccount, per install mode", () => {
  let cp: ControlPlane;
  let t: Tools;
  const namespaces: string[] = [];
  const clusterObjects: string[] = [];
  const releases: { name: string; namespace: string }[] = [];
  /** What any authenticated ServiceAccount may do: a fresh one with no binding, per namespace. */
  const baseline = new Map<string, string[]>();
  let baselineAccount: { namespace: string; name: string };
  const dir = mkdtempSync(join(tmpdir(), 'nko-can-i-'));

  const createNamespace = async (name: string): Promise<string> => {
    await t.kubectl(['create', 'namespace', name]);
    namespaces.push(name);
    return name;
  };

  /**
   * A kubeconfig holding a token of the ServiceAccount, nothing of the admin's: minted once per
   * account (every check of a mode runs at once, each its own kubectl) and good for 10 minutes.
   */
  const kubeconfigs = new Map<string, Promise<string>>();
  const kubeconfigOf = (namespace: string, name: string): Promise<string> => {
    const id = `${namespace}.${name}`;
    let file = kubeconfigs.get(id);
    if (file === undefined) {
      file = (async () => {
        const token = await cp.mintServiceAccountToken(namespace, name, 600);
        const path = join(dir, `${id}.kubeconfig`);
        writeFileSync(path, kubeconfigYaml(cp, token, name), { mode: 0o600 });
        return path;
      })();
      kubeconfigs.set(id, file);
    }
    return file;
  };
  const asServiceAccount = async (namespace: string, name: string, args: string[]): Promise<string> =>
    await t.kubectl([`--kubeconfig=${await kubeconfigOf(namespace, name)}`, ...args]);
  const listFor = async (account: { namespace: string; name: string }, namespace: string): Promise<string[]> =>
    parseCanIList(await asServiceAccount(account.namespace, account.name, ['auth', 'can-i', '--list', '-n', namespace]));
  /** `kubectl auth can-i VERB RESOURCE ...`: yes (exit 0) or no (exit 1). */
  const canI = async (account: { namespace: string; name: string }, args: string[]): Promise<boolean> => {
    try {
      return (await asServiceAccount(account.namespace, account.name, ['auth', 'can-i', ...args])).trim() === 'yes';
    } catch (error) {
      if (error instanceof CommandError && /^no\b/m.test(error.stderr)) return false;
      throw error;
    }
  };
  const baselineIn = async (namespace: string): Promise<string[]> => {
    let found = baseline.get(namespace);
    if (found === undefined) {
      found = await listFor(baselineAccount, namespace);
      baseline.set(namespace, found);
    }
    return found;
  };

  /**
   * The authorizer reads RBAC objects through an informer: right after an install the listing may
   * lag. Polls until it equals the expectation (or 10 s pass), then asserts it.
   */
  const expectListing = async (mode: Mode, namespace: string, grants: readonly string[]): Promise<void> => {
    const account = { namespace: mode.operatorNamespace, name: mode.serviceAccount };
    const expected = [...new Set([...(await baselineIn(namespace)), ...grants])].sort();
    const deadline = Date.now() + 10_000;
    let listed = await listFor(account, namespace);
    while (JSON.stringify(listed) !== JSON.stringify(expected) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      listed = await listFor(account, namespace);
    }
    expect([mode.title, namespace, listed]).toEqual([mode.title, namespace, expected]);
    // Beyond the baseline (whose discovery URLs, /api/* and the like, every user may GET): no
    // wildcard of any kind, and never a create or delete of the custom resources.
    for (const entry of listed.filter((e) => !baseline.get(namespace)?.includes(e))) {
      expect([namespace, entry]).not.toEqual([namespace, expect.stringMatching(/\*/)]);
      expect([namespace, entry]).not.toEqual([namespace, expect.stringMatching(/^keys\.neon\.dev\|[a-z]+\|(create|delete|deletecollection)/)]);
    }
  };

  /**
   * The modes' own checks, in words, beside the exact listings. They only read, so they run at
   * once: each is a kubectl process and a review by the apiserver (one after the other they were
   * most of this suite's time).
   */
  const expectMode = async (mode: Mode): Promise<void> => {
    const account = { namespace: mode.operatorNamespace, name: mode.serviceAccount };
    const namespaced = mode.watched.length > 0;
    // The ClusterRole of the every-namespace mode shows in every namespace's listing, its issuer rules (cluster-scoped) too;
    // so does the issuers' ClusterRole of a namespaced install with issuers.
    const issuers = !namespaced || mode.issuers === true;
    const reconcileIn = (namespace: string): readonly string[] =>
      !namespaced ? clusterWideGrants : [...(mode.watched.includes(namespace) ? reconcileGrants : []), ...(mode.issuers === true ? issuerGrants : [])];
    await Promise.all([
      ...[...new Set([mode.operatorNamespace, ...mode.watched, mode.unwatched, ...(mode.issuers === true ? [ISSUER_EVENTS_NAMESPACE] : [])])].map((namespace) =>
        baselineIn(namespace),
      ),
      kubeconfigOf(account.namespace, account.name),
    ]);
    await Promise.all([
      expectListing(mode, mode.operatorNamespace, [...reconcileIn(mode.operatorNamespace), ...ownNamespaceGrants()]),
      ...mode.watched.map((namespace) => expectListing(mode, namespace, reconcileIn(namespace))),
      expectListing(mode, mode.unwatched, reconcileIn(mode.unwatched)),
      ...(mode.issuers === true ? [expectListing(mode, ISSUER_EVENTS_NAMESPACE, [...reconcileIn(ISSUER_EVENTS_NAMESPACE), ...issuerEventsGrants])] : []),
    ]);

    const checks: [string[], boolean][] = [
      [['list', 'secrets', '--all-namespaces'], !namespaced],
      [['get', 'secrets', '-n', mode.unwatched], !namespaced],
      [['get', 'secrets/neon-admin', '-n', mode.operatorNamespace], !namespaced],
      [['get', 'secrets/neon-key-operator-signing-key', '-n', mode.operatorNamespace], true],
      [['create', 'apikeys.keys.neon.dev', '-n', mode.watched[0] ?? mode.unwatched], false],
      [['delete', 'projectapikeys.keys.neon.dev', '-n', mode.watched[0] ?? mode.unwatched], false],
      [['update', 'leases/another-lease', '-n', mode.operatorNamespace], false],
      [['update', 'leases/neon-key-operator', '-n', mode.operatorNamespace], true],
      [['*', '*', '--all-namespaces'], false],
      // ClusterKeyIssuers: read and their finalizer and status written in cluster-wide mode only,
      // never created, deleted or patched; no finalizers subresource (nothing is owned by one).
      [['get', 'clusterkeyissuers.keys.neon.dev'], issuers],
      [['watch', 'clusterkeyissuers.keys.neon.dev'], issuers],
      [['update', 'clusterkeyissuers.keys.neon.dev'], issuers],
      [['patch', 'clusterkeyissuers.keys.neon.dev', '--subresource=status'], issuers],
      // An issuer's events, in default: the ClusterRole's, or a Role there.
      [['create', 'events', '-n', ISSUER_EVENTS_NAMESPACE], issuers],
      [['get', 'events', '-n', ISSUER_EVENTS_NAMESPACE], false],
      [['create', 'clusterkeyissuers.keys.neon.dev'], false],
      [['delete', 'clusterkeyissuers.keys.neon.dev'], false],
      [['patch', 'clusterkeyissuers.keys.neon.dev'], false],
      [['update', 'clusterkeyissuers.keys.neon.dev', '--subresource=finalizers'], false],
      // Namespaces: read by name, never listed or written.
      [['list', 'namespaces'], false],
      [['update', `namespaces/${mode.watched[0] ?? mode.unwatched}`, '-n', mode.watched[0] ?? mode.unwatched], false],
    ];
    const answers = await Promise.all(checks.map(async ([args]) => [mode.title, args.join(' '), await canI(account, args)] as const));
    expect(answers).toEqual(checks.map(([args, allowed]) => [mode.title, args.join(' '), allowed]));

    // GET of a Namespace, as the operator makes it (keys/kube-writes.ts readNamespace): a real request,
    // not a review. In namespaced mode the Role of namespace X grants GET of the Namespace X itself
    // (the apiserver authorizes /api/v1/namespaces/X as a request in namespace X) and of no other.
    const getNamespace = async (namespace: string): Promise<string> => {
      try {
        return (await asServiceAccount(account.namespace, account.name, ['get', 'namespace', namespace, '-o', 'name'])).trim();
      } catch (error) {
        if (error instanceof CommandError && /Forbidden|forbidden/.test(error.stderr)) return 'forbidden';
        throw error;
      }
    };
    const reads = await Promise.all([...mode.watched, mode.unwatched].map(async (namespace) => [mode.title, namespace, await getNamespace(namespace)]));
    expect(reads).toEqual(
      [...mode.watched, mode.unwatched].map((namespace) => [
        mode.title,
        namespace,
        namespaced && !mode.watched.includes(namespace) ? 'forbidden' : `namespace/${namespace}`,
      ]),
    );
  };

  /** Renames the namespaces and cluster-scoped names of kustomize output, keeps its RBAC objects. */
  const relocate = (objects: K8sObject[], rename: Record<string, string>): K8sObject[] =>
    objects
      .filter((o) => RBAC_KINDS.has(o.kind))
      .map((o) => {
        const copy = structuredClone(o) as K8sObject & { roleRef?: { kind: string; name: string }; subjects?: { namespace?: string }[] };
        const to = (namespace: string): string => {
          const renamed = rename[namespace];
          if (renamed === undefined) throw new Error(`namespace ${namespace} of ${o.kind}/${o.metadata.name} has no test name`);
          return renamed;
        };
        if (copy.metadata.namespace !== undefined) copy.metadata.namespace = to(copy.metadata.namespace);
        else copy.metadata.name = `${copy.metadata.name}-${suffix}`;
        if (copy.roleRef?.kind === 'ClusterRole') copy.roleRef.name = `${copy.roleRef.name}-${suffix}`;
        for (const subject of copy.subjects ?? []) if (subject.namespace !== undefined) subject.namespace = to(subject.namespace);
        return copy;
      });
  const applyRelocated = async (dirToBuild: string, rename: Record<string, string>): Promise<void> => {
    const objects = relocate(parseYaml(await t.kubectl(['kustomize', dirToBuild])), rename);
    for (const o of objects)
      if (o.metadata.namespace === undefined) clusterObjects.push(`${o.kind.toLowerCase()}.rbac.authorization.k8s.io/${o.metadata.name}`);
    await t.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
  };

  beforeAll(async () => {
    cp = await controlPlane();
    t = tools(cp, (await cp.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion);
    // The CRDs make apikeys.keys.neon.dev a resource kubectl can name. --force-conflicts: other suites apply them too.
    await t.kubectl(['apply', '--server-side', '--force-conflicts', '--field-manager=deploy-test', '-f', '-'], testCrdYaml());
    const home = await createNamespace(`can-i-${suffix}`);
    await t.kubectl(['create', 'serviceaccount', 'nobody', '-n', home]);
    baselineAccount = { namespace: home, name: 'nobody' };
  });

  afterAll(async () => {
    // One command per kind of cleanup (each kubectl or helm is a process and a connection).
    await Promise.all(releases.map((release) => t?.helm(['uninstall', release.name, '--namespace', release.namespace, '--wait=false']).catch(() => undefined)));
    if (clusterObjects.length > 0) await t?.kubectl(['delete', ...clusterObjects, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    if (namespaces.length > 0) await t?.kubectl(['delete', 'namespace', ...namespaces, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    t?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every authenticated ServiceAccount (the baseline the listings add to) may only review its own access', async () => {
    const listed = await baselineIn(`can-i-${suffix}`);
    const resources = listed.filter((e) => !e.startsWith('url:'));
    expect(resources.length).toBeGreaterThan(0);
    for (const entry of resources) expect(entry).toMatch(/^(authorization|authentication)\.k8s\.io\|self\w+reviews\|create$/);
    for (const entry of listed.filter((e) => e.startsWith('url:'))) expect(entry).toMatch(/\|get$/);
  });

  it('cluster-wide mode, deploy/base: the contract in every namespace, the Lease and signing key in its own', async () => {
    const rename = { 'neon-key-operator-system': await createNamespace(`can-i-${suffix}-base`) };
    await applyRelocated(baseDir, rename);
    const unwatched = await createNamespace(`can-i-${suffix}-base-other`);
    await expectMode({
      title: 'deploy/base',
      operatorNamespace: rename['neon-key-operator-system'],
      serviceAccount: 'neon-key-operator',
      watched: [],
      unwatched,
    });
  });

  it('namespaced mode, deploy/overlays/namespaced: the contract in the watched namespaces only, no Secret anywhere else', async () => {
    const rename = {
      'neon-key-operator-system': await createNamespace(`can-i-${suffix}-ovl`),
      'team-a': await createNamespace(`can-i-${suffix}-ovl-a`),
      'team-b': await createNamespace(`can-i-${suffix}-ovl-b`),
    };
    await applyRelocated(overlayDir, rename);
    const unwatched = await createNamespace(`can-i-${suffix}-ovl-other`);
    await expectMode({
      title: 'deploy/overlays/namespaced',
      operatorNamespace: rename['neon-key-operator-system'],
      serviceAccount: 'neon-key-operator',
      watched: [rename['team-a'], rename['team-b']],
      unwatched,
    });
  });

  it('cluster-wide mode, the chart with default values (helm install)', async () => {
    const namespace = await createNamespace(`can-i-${suffix}-chart`);
    const unwatched = await createNamespace(`can-i-${suffix}-chart-other`);
    const release = `ci-${suffix}`;
    releases.push({ name: release, namespace });
    // crds.enabled=false: the CRDs exist already (applied with kubectl); a release never takes them over.
    await t.helm(['install', release, chartDir, '--namespace', namespace, '--set', 'crds.enabled=false', '--set', 'rbac.issuedKeysPolicy=false']);
    await expectMode({ title: 'chart, default values', operatorNamespace: namespace, serviceAccount: `${release}-neon-key-operator`, watched: [], unwatched });
  });

  it('namespaced mode, the chart with watchNamespaces (helm install)', async () => {
    const namespace = await createNamespace(`can-i-${suffix}-chns`);
    const watched = [await createNamespace(`can-i-${suffix}-chns-a`), await createNamespace(`can-i-${suffix}-chns-b`)];
    const unwatched = await createNamespace(`can-i-${suffix}-chns-other`);
    const release = `cn-${suffix}`;
    releases.push({ name: release, namespace });
    await t.helm([
      'install',
      release,
      chartDir,
      '--namespace',
      namespace,
      '--set',
      'crds.enabled=false',
      '--set',
      'rbac.issuedKeysPolicy=false',
      '--set',
      `watchNamespaces={${watched.join(',')}}`,
    ]);
    await expectMode({ title: 'chart, watchNamespaces', operatorNamespace: namespace, serviceAccount: `${release}-neon-key-operator`, watched, unwatched });
  });

  it('namespaced mode with issuers, the chart with watchNamespaces and issuerSecretsNamespace (helm install): issuers cluster-wide, nothing else', async () => {
    const namespace = await createNamespace(`can-i-${suffix}-chis`);
    const watched = [await createNamespace(`can-i-${suffix}-chis-a`), await createNamespace(`can-i-${suffix}-chis-keys`)];
    const unwatched = await createNamespace(`can-i-${suffix}-chis-other`);
    const release = `cs-${suffix}`;
    releases.push({ name: release, namespace });
    await t.helm([
      'install',
      release,
      chartDir,
      '--namespace',
      namespace,
      '--set',
      'crds.enabled=false',
      '--set',
      'rbac.issuedKeysPolicy=false',
      '--set',
      `watchNamespaces={${watched.join(',')}}`,
      '--set',
      `issuerSecretsNamespace=${watched[1]}`,
    ]);
    await expectMode({
      title: 'chart, watchNamespaces and issuerSecretsNamespace',
      operatorNamespace: namespace,
      serviceAccount: `${release}-neon-key-operator`,
      watched,
      unwatched,
      issuers: true,
    });
  });
});
