// `npm run release`: the packaged chart, the image's OCI archive with its digest, the SBOM of the
// image's npm packages and their checksums, made with the real helm and npm; an image archive is an
// OCI image layout in a tar (here a minimal one: its digest is what the script must report).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { controlPlane, type ControlPlane } from '../harness/index.ts';
import { chartDir, root } from './kube-tools.ts';

const run = promisify(execFile);
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const chartVersion = /^version: (\S+)$/m.exec(readFileSync(join(chartDir, 'Chart.yaml'), 'utf8'))?.[1] ?? '';

interface Bom {
  bomFormat: string;
  metadata: { component: { name: string; version: string } };
  components: { name: string; purl?: string }[];
}

describe('npm run release', () => {
  let cp: ControlPlane;
  let dir: string;
  const release = (...args: string[]) => run(process.execPath, [join(root, 'scripts/release.ts'), '--helm', join(cp.binDir, 'helm'), ...args], { cwd: root });

  beforeAll(async () => {
    cp = await controlPlane();
    dir = mkdtempSync(join(tmpdir(), 'nko-release-'));
  });
  afterAll(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** An OCI image layout with one manifest, as a tar; returns its manifest's digest. */
  async function ociArchive(path: string): Promise<string> {
    const layout = join(dir, 'layout');
    mkdirSync(join(layout, 'blobs/sha256'), { recursive: true });
    const blob = (content: string): string => {
      const digest = createHash('sha256').update(content).digest('hex');
      writeFileSync(join(layout, 'blobs/sha256', digest), content);
      return `sha256:${digest}`;
    };
    const config = '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}';
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: blob(config), size: config.length },
      layers: [],
    });
    const digest = blob(manifest);
    writeFileSync(join(layout, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
    writeFileSync(
      join(layout, 'index.json'),
      JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest, size: manifest.length }] }),
    );
    await run('tar', ['-cf', path, '-C', layout, 'oci-layout', 'index.json', 'blobs']);
    return digest;
  }

  it('writes the packaged chart, the image archive with its digest, the SBOM of the production packages and SHA256SUMS', async () => {
    const archive = join(dir, 'image.tar');
    const digest = await ociArchive(archive);
    const out = join(dir, 'out');
    const { stdout } = await release('--out', out, '--image-archive', archive);
    expect(stdout).toContain(digest);

    const chart = join(out, `neon-key-operator-${chartVersion}.tgz`);
    const listing = (await run('tar', ['-tzf', chart])).stdout.split('\n');
    expect(listing).toEqual(
      expect.arrayContaining(['neon-key-operator/Chart.yaml', 'neon-key-operator/values.schema.json', 'neon-key-operator/templates/NOTES.txt']),
    );
    expect(readFileSync(join(out, `neon-key-operator-${pkg.version}.oci.digest`), 'utf8')).toBe(`${digest}\n`);

    const bom = JSON.parse(readFileSync(join(out, `neon-key-operator-${pkg.version}.sbom.cdx.json`), 'utf8')) as Bom;
    expect(bom.bomFormat).toBe('CycloneDX');
    expect(bom.metadata.component).toMatchObject({ name: 'neon-key-operator', version: pkg.version });
    // The production tree as npm itself sees it (what `npm prune --omit=dev` keeps in the image),
    // zod included, which a devDependency shares and `npm sbom --omit=dev` drops; no tool of the build.
    // One line per installed package, path:name@version[:...]; the checkout also holds extraneous ones.
    const listed = (
      await run('npm', ['ls', '--omit=dev', '--all', '--parseable', '--long'], { cwd: root, maxBuffer: 16 << 20 }).catch((error: { stdout: string }) => error)
    ).stdout;
    const production = new Set(
      listed
        .trim()
        .split('\n')
        .slice(1)
        .filter((l) => !/:EXTRANEOUS/.test(l))
        .map((l) => l.split(':')[1] ?? ''),
    );
    const components = bom.components as { name: string; version?: string; purl?: string }[];
    expect(new Set(components.map((c) => `${c.name}@${c.version ?? ''}`))).toEqual(production);
    expect(Object.keys(pkg.dependencies).filter((d) => !components.some((c) => c.name === d))).toEqual([]);
    expect(components.filter((c) => ['jest', 'typescript', 'eslint', 'esbuild', 'node'].includes(c.name))).toEqual([]);
    expect(bom.components.every((c) => c.purl?.startsWith('pkg:npm/') === true)).toBe(true);

    // The checksums hold for the files beside them.
    const { stdout: checked } = await run('sha256sum', ['-c', 'SHA256SUMS'], { cwd: out });
    expect(checked.trim().split('\n').sort()).toEqual(
      [
        `neon-key-operator-${chartVersion}.tgz: OK`,
        `neon-key-operator-${pkg.version}.oci.digest: OK`,
        `neon-key-operator-${pkg.version}.oci.tar: OK`,
        `neon-key-operator-${pkg.version}.sbom.cdx.json: OK`,
      ].sort(),
    );
  });

  it('refuses to run without saying what to do with the image, and refuses an archive that is not an OCI layout', async () => {
    await expect(release('--out', join(dir, 'none'))).rejects.toMatchObject({ code: 2, stderr: expect.stringContaining('--image-archive') });
    const notOci = join(dir, 'not-oci.tar');
    writeFileSync(join(dir, 'file'), 'x');
    await run('tar', ['-cf', notOci, '-C', dir, 'file']);
    await expect(release('--out', join(dir, 'bad'), '--image-archive', notOci)).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('not an OCI archive'),
    });
  });
});
