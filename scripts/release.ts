// `npm run release`: what a release publishes, into one folder (default dist/release/):
//   neon-key-operator-<chart version>.tgz      the packaged chart (helm package)
//   neon-key-operator-<version>.oci.tar        the image as an OCI archive, and beside it
//   neon-key-operator-<version>.oci.digest     its manifest's digest (sha256:...), what a registry serves it by
//   neon-key-operator-<version>.sbom.cdx.json  a CycloneDX SBOM of the image's npm packages
//   SHA256SUMS
// The image is not built here: --image-archive names an OCI archive of the image built from the
// Dockerfile (CI passes the one its e2e built and ran), --no-image leaves it out (docs/release.md).
import { execFile } from 'node:child_process';
import { copyFileSync, createReadStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const CHART = join(root, 'deploy/helm/neon-key-operator');

const { values: flags } = parseArgs({
  options: {
    out: { type: 'string', default: join(root, 'dist/release') },
    'image-archive': { type: 'string' },
    'no-image': { type: 'boolean', default: false },
    helm: { type: 'string' },
  },
});

class ReleaseError extends Error {}

interface CycloneDx {
  bomFormat: string;
  metadata: { component: { 'bom-ref': string; name: string; version: string } };
  components: { 'bom-ref': string; name: string; version: string; purl?: string }[];
  dependencies: { ref: string; dependsOn?: string[] }[];
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** helm: --helm, else the one the tests build from Go modules (test/controlplane/build.sh). */
async function helmBinary(): Promise<string> {
  if (flags.helm !== undefined) return flags.helm;
  const { stdout } = await run('bash', [join(root, 'test/controlplane/build.sh')], { maxBuffer: 1 << 20 });
  return join(stdout.trim(), 'helm');
}

async function packageChart(out: string, version: string): Promise<string> {
  const helm = await helmBinary();
  const home = join(out, '.helm');
  const env = {
    PATH: process.env.PATH,
    HOME: home,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
  };
  try {
    await run(helm, ['lint', '--strict', CHART], { env });
    await run(helm, ['package', CHART, '--destination', out], { env });
    const file = join(out, `neon-key-operator-${version}.tgz`);
    // The package holds the chart as checked in: its Chart.yaml, values and schema.
    const { stdout } = await run(helm, ['show', 'chart', file], { env });
    if (!new RegExp(`^version: ${version.replace(/\./g, '\\.')}$`, 'm').test(stdout))
      throw new ReleaseError(`helm package wrote ${file} without version ${version}`);
    return file;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * The image's npm packages: its node_modules is `npm ci` then `npm prune --omit=dev` (Dockerfile),
 * so the packages reachable from package.json's dependencies in the lock file. `npm sbom --omit=dev`
 * also drops a production package that a devDependency shares (npm/cli#7909): the whole lock's SBOM
 * is made, then kept to what the dependencies reach in its own dependency graph.
 */
async function sbom(out: string, name: string, version: string, dependencies: string[]): Promise<{ file: string; components: number }> {
  const { stdout } = await run('npm', ['sbom', '--sbom-format=cyclonedx', '--sbom-type=application', '--package-lock-only'], {
    cwd: root,
    maxBuffer: 64 << 20,
  });
  const bom = JSON.parse(stdout) as CycloneDx;
  const edges = new Map(bom.dependencies.map((d) => [d.ref, d.dependsOn ?? []]));
  const rootRef = bom.metadata.component['bom-ref'];
  const direct = (edges.get(rootRef) ?? []).filter((ref) => dependencies.some((d) => ref.startsWith(`${d}@`)));
  if (direct.length !== dependencies.length)
    throw new ReleaseError(
      `the SBOM lacks dependencies of package.json: ${dependencies.filter((d) => !direct.some((ref) => ref.startsWith(`${d}@`))).join(', ')}`,
    );
  const reached = new Set<string>();
  const queue = [...direct];
  for (let ref = queue.shift(); ref !== undefined; ref = queue.shift()) {
    if (reached.has(ref)) continue;
    reached.add(ref);
    queue.push(...(edges.get(ref) ?? []));
  }
  const kept: CycloneDx = {
    ...bom,
    metadata: { ...bom.metadata, component: { ...bom.metadata.component, name, version } },
    components: bom.components.filter((c) => reached.has(c['bom-ref'])),
    dependencies: bom.dependencies.filter((d) => d.ref === rootRef || reached.has(d.ref)).map((d) => (d.ref === rootRef ? { ...d, dependsOn: direct } : d)),
  };
  const file = join(out, `neon-key-operator-${version}.sbom.cdx.json`);
  writeFileSync(file, `${JSON.stringify(kept, null, 2)}\n`);
  return { file, components: kept.components.length };
}

/** The archive's image manifest digest, from its index.json (an OCI image layout in a tar). */
async function imageDigest(archive: string): Promise<string> {
  // buildah writes index.json at the top; tar -C dir . writes ./index.json.
  const read = (name: string): Promise<string> => run('tar', ['-xOf', archive, name], { maxBuffer: 1 << 20 }).then((r) => r.stdout);
  const stdout = await read('index.json')
    .catch(() => read('./index.json'))
    .catch(() => {
      throw new ReleaseError(`${archive} is not an OCI archive (no index.json)`);
    });
  const index = JSON.parse(stdout) as { manifests?: { mediaType?: string; digest?: string }[] };
  const manifests = index.manifests ?? [];
  if (manifests.length !== 1 || !/^sha256:[0-9a-f]{64}$/.test(manifests[0]?.digest ?? '')) {
    throw new ReleaseError(`${archive}: expected one image manifest in index.json, found ${JSON.stringify(manifests.map((m) => m.digest))}`);
  }
  return manifests[0]?.digest ?? '';
}

async function main(): Promise<void> {
  if ((flags['image-archive'] === undefined) === !flags['no-image']) {
    throw new ReleaseError('give --image-archive <OCI archive of the image> or --no-image (docs/release.md)');
  }
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
  const chartVersion = /^version: (\S+)$/m.exec(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'))?.[1] ?? '';
  const out = resolve(flags.out);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const started = Date.now();
  const files: string[] = [];

  const [chart, bom] = await Promise.all([packageChart(out, chartVersion), sbom(out, 'neon-key-operator', pkg.version, Object.keys(pkg.dependencies))]);
  files.push(chart, bom.file);
  console.log(`chart   ${basename(chart)}`);
  console.log(`sbom    ${basename(bom.file)}: ${bom.components} npm packages`);

  if (flags['image-archive'] !== undefined) {
    const digest = await imageDigest(flags['image-archive']);
    const image = join(out, `neon-key-operator-${pkg.version}.oci.tar`);
    copyFileSync(flags['image-archive'], image);
    writeFileSync(`${image.replace(/\.tar$/, '')}.digest`, `${digest}\n`);
    files.push(image, `${image.replace(/\.tar$/, '')}.digest`);
    console.log(`image   ${basename(image)}: ${digest}`);
  } else {
    console.log('image   left out (--no-image)');
  }

  const sums = await Promise.all(files.map(async (f) => `${await sha256(f)}  ${basename(f)}`));
  writeFileSync(join(out, 'SHA256SUMS'), `${sums.join('\n')}\n`);
  console.log(`${out} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

try {
  await main();
} catch (error) {
  console.error(`release: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(error instanceof ReleaseError ? 2 : 1);
}
