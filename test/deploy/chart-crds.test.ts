// The CRDs' life with the chart, for real (helm and the apiserver): a release whose CRDs lack a
// field is upgraded and the field then holds; `helm uninstall` leaves the CRDs and the resources;
// and a cluster whose CRDs came from an older chart's crds/ folder (which helm never upgrades nor
// owns) moves to the templated CRDs by the documented adoption (docs/install.md "Upgrade").
//
// CRD names are cluster-wide and every suite of the run uses keys.neon.dev, so each chart copy
// here renames its CRDs' group to one of this suite's own (z<random>.crdtest.neon.dev): the same
// templates and the same generated schemas, a group nobody else touches, deleted at the end. Other
// suites run meanwhile and ask kubectl for `apikeys`, `npak` or `neon`: the copies have no short
// names nor categories, and their groups sort after keys.neon.dev, which kubectl prefers for a
// plural that two groups serve (discovery lists groups of one priority by name).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VersionApi } from '@kubernetes/client-node';
import { parseDocument } from 'yaml';
import { controlPlane } from '../harness/index.ts';
import { chartDir, CommandError, tools, type Tools } from './kube-tools.ts';

const suffix = randomBytes(3).toString('hex');
const dir = mkdtempSync(join(tmpdir(), 'nko-chart-crds-'));
const crdFiles = (chart: string): string => join(chart, 'files', 'crds');

/**
 * A copy of the chart whose CRDs are in `group`; `withoutUsage`: ApiKey's spec.usage removed, as in
 * the charts before that field; `layout`: `templates` (this chart) or `crds-folder` (the charts
 * before this one: the same files in crds/, installed once by helm, never upgraded).
 */
function chartCopy(name: string, group: string, options: { withoutUsage?: boolean; layout?: 'templates' | 'crds-folder' } = {}): string {
  const copy = join(dir, name);
  cpSync(chartDir, copy, { recursive: true });
  for (const file of readdirSync(crdFiles(copy))) {
    const path = join(crdFiles(copy), file);
    const doc = parseDocument(readFileSync(path, 'utf8'));
    const plural = String(doc.getIn(['spec', 'names', 'plural']));
    doc.setIn(['metadata', 'name'], `${plural}.${group}`);
    doc.setIn(['spec', 'group'], group);
    doc.deleteIn(['spec', 'names', 'shortNames']);
    doc.deleteIn(['spec', 'names', 'categories']);
    if (options.withoutUsage === true && doc.getIn(['spec', 'names', 'kind']) === 'ApiKey') {
      const specProperties = ['spec', 'versions', 0, 'schema', 'openAPIV3Schema', 'properties', 'spec', 'properties'];
      expect(doc.hasIn([...specProperties, 'usage'])).toBe(true);
      doc.deleteIn([...specProperties, 'usage']);
    }
    writeFileSync(path, doc.toString());
  }
  if (options.layout === 'crds-folder') {
    // The charts with a crds/ folder came before ApiKeyInventory and ClusterKeyIssuer: their CRDs are new at the upgrade.
    rmSync(join(crdFiles(copy), 'keys.neon.dev_apikeyinventories.yaml'));
    rmSync(join(crdFiles(copy), 'keys.neon.dev_clusterkeyissuers.yaml'));
    cpSync(crdFiles(copy), join(copy, 'crds'), { recursive: true });
    rmSync(join(copy, 'files'), { recursive: true });
    rmSync(join(copy, 'templates', 'crds.yaml'));
  }
  return copy;
}

describe('the chart upgrades its CRDs and keeps them on uninstall', () => {
  let t: Tools;
  const namespaces: string[] = [];
  const releases: { name: string; namespace: string }[] = [];
  const groups = [`z${suffix}a.crdtest.neon.dev`, `z${suffix}b.crdtest.neon.dev`];

  const apiKey = (group: string, name: string, usage: boolean): string =>
    JSON.stringify({
      apiVersion: `${group}/v1alpha1`,
      kind: 'ApiKey',
      metadata: { name },
      spec: {
        scope: 'Organization',
        organizationId: 'org-cool-cherry-12345678',
        credentialsSecretRef: { name: 'neon-admin' },
        ...(usage ? { usage: { unusedAfter: '720h' } } : {}),
      },
    });
  const spec = async (group: string, namespace: string, name: string): Promise<{ usage?: unknown }> =>
    JSON.parse(await t.kubectl(['get', `apikeys.${group}`, name, '-n', namespace, '-o', 'jsonpath={.spec}'])) as { usage?: unknown };
  const crdExists = async (group: string): Promise<boolean> =>
    (await t.kubectl(['get', 'crd', `apikeys.${group}`, `projectapikeys.${group}`, '--ignore-not-found', '-o', 'name']))
      .trim()
      .split('\n')
      .filter((l) => l !== '').length === 2;
  const establish = async (group: string): Promise<void> => {
    await t.kubectl(['wait', '--for=condition=Established', '--timeout=30s', `crd/apikeys.${group}`, `crd/projectapikeys.${group}`]);
  };
  const install = async (verb: 'install' | 'upgrade', release: string, namespace: string, chart: string): Promise<string> =>
    await t.helm([verb, release, chart, '--namespace', namespace, '--set', 'rbac.aggregateToDefaultRoles=false', '--set', 'rbac.issuedKeysPolicy=false']);

  beforeAll(async () => {
    const cp = await controlPlane();
    t = tools(cp, (await cp.kubeConfig.makeApiClient(VersionApi).getCode()).gitVersion);
  });

  afterAll(async () => {
    // One command per kind of cleanup (each kubectl or helm is a process and a connection).
    await Promise.all(releases.map((release) => t?.helm(['uninstall', release.name, '--namespace', release.namespace, '--wait=false']).catch(() => undefined)));
    // Every CRD of this suite's groups (the keys', the inventory's, the issuers').
    const crds = groups.flatMap((group) => readdirSync(crdFiles(chartDir)).map((file) => `crd/${file.replace(/^keys\.neon\.dev_(.*)\.yaml$/, `$1.${group}`)}`));
    if (crds.length > 0) await t?.kubectl(['delete', ...crds, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    if (namespaces.length > 0) await t?.kubectl(['delete', 'namespace', ...namespaces, '--ignore-not-found', '--wait=false']).catch(() => undefined);
    t?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  const namespace = async (name: string): Promise<string> => {
    await t.kubectl(['create', 'namespace', name]);
    namespaces.push(name);
    return name;
  };

  it('a release whose CRDs lack a field is upgraded: the field is pruned before, kept after; uninstall leaves the CRDs and the resources', async () => {
    const group = groups[0] as string;
    const ns = await namespace(`crds-a-${suffix}`);
    const release = `crds-a-${suffix}`;
    releases.push({ name: release, namespace: ns });
    await install('install', release, ns, chartCopy('older', group, { withoutUsage: true }));
    await establish(group);
    // The older schema: the apiserver prunes the unknown field. kubectl's strict field validation
    // would refuse it; a client without it (--validate=false, as many GitOps tools and client
    // libraries send) sees the field silently dropped.
    await t.kubectl(['apply', '--validate=false', '-n', ns, '-f', '-'], apiKey(group, 'pruned', true));
    expect(await spec(group, ns, 'pruned')).not.toHaveProperty('usage');

    await install('upgrade', release, ns, chartCopy('current', group));
    await t.kubectl(['apply', '-n', ns, '-f', '-'], apiKey(group, 'kept', true));
    expect((await spec(group, ns, 'kept')).usage).toEqual({ unusedAfter: '720h' });
    // The resource made under the older schema takes the field when applied again.
    await t.kubectl(['apply', '-n', ns, '-f', '-'], apiKey(group, 'pruned', true));
    expect((await spec(group, ns, 'pruned')).usage).toEqual({ unusedAfter: '720h' });

    const out = await t.helm(['uninstall', release, '--namespace', ns]);
    releases.splice(
      releases.findIndex((r) => r.name === release),
      1,
    );
    expect(out).toMatch(/These resources were kept due to the resource policy:[\s\S]*CustomResourceDefinition/);
    expect(await crdExists(group)).toBe(true);
    expect((await t.kubectl(['get', `apikeys.${group}`, '-n', ns, '-o', 'name'])).trim().split('\n').sort()).toEqual([
      `apikey.${group}/kept`,
      `apikey.${group}/pruned`,
    ]);
  });

  it("CRDs installed from an older chart's crds/ folder: helm refuses to take them over until they are adopted, then upgrades them", async () => {
    const group = groups[1] as string;
    const ns = await namespace(`crds-b-${suffix}`);
    const release = `crds-b-${suffix}`;
    releases.push({ name: release, namespace: ns });
    await install('install', release, ns, chartCopy('folder', group, { withoutUsage: true, layout: 'crds-folder' }));
    await establish(group);
    await t.kubectl(['apply', '--validate=false', '-n', ns, '-f', '-'], apiKey(group, 'old', true));
    expect(await spec(group, ns, 'old')).not.toHaveProperty('usage');

    const current = chartCopy('current-b', group);
    const refused = await install('upgrade', release, ns, current).then(
      () => '',
      (error: unknown) => {
        if (error instanceof CommandError) return error.stderr;
        throw error;
      },
    );
    expect(refused).toMatch(/exists and cannot be imported into the current release: invalid ownership metadata/);

    // The adoption docs/install.md gives: the ownership marks helm looks for, on both CRDs.
    const crds = [`crd/apikeys.${group}`, `crd/projectapikeys.${group}`];
    await t.kubectl(['label', ...crds, 'app.kubernetes.io/managed-by=Helm']);
    await t.kubectl(['annotate', ...crds, `meta.helm.sh/release-name=${release}`, `meta.helm.sh/release-namespace=${ns}`]);
    await install('upgrade', release, ns, current);
    expect(await t.kubectl(['get', `crd/apikeys.${group}`, '-o', 'jsonpath={.metadata.annotations.helm\\.sh/resource-policy}'])).toBe('keep');
    // The upgrade brings the inventory's CRD, new in this chart.
    expect((await t.kubectl(['get', 'crd', `apikeyinventories.${group}`, '-o', 'name'])).trim()).toBe(
      `customresourcedefinition.apiextensions.k8s.io/apikeyinventories.${group}`,
    );
    await t.kubectl(['apply', '-n', ns, '-f', '-'], apiKey(group, 'old', true));
    expect((await spec(group, ns, 'old')).usage).toEqual({ unusedAfter: '720h' });

    await t.helm(['uninstall', release, '--namespace', ns]);
    releases.splice(
      releases.findIndex((r) => r.name === release),
      1,
    );
    expect(await crdExists(group)).toBe(true);
    expect((await t.kubectl(['get', `apikeys.${group}`, 'old', '-n', ns, '-o', 'name'])).trim()).toBe(`apikey.${group}/old`);
  });
});
