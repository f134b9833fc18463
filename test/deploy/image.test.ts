// The container image cannot be built here (no Docker engine): these checks hold the Dockerfile,
// its build context and the kind e2e script to what the chart and deploy/base expect of them.
import { describe, expect, it } from '@jest/globals';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { imageAllocator, imageAllocatorEnv, imageNodeFlags, OPERATOR_BUNDLE, OPERATOR_SOURCE, runOperatorSync } from '../harness/operator-process.ts';
import { bundleOptions } from '../../scripts/bundle.ts';
import { root } from './kube-tools.ts';

const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
// Instructions with their continuation lines joined, comments dropped.
const instructions = dockerfile
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const stages = ((): Map<string, string[]> => {
  const out = new Map<string, string[]>();
  let current: string[] = [];
  for (const line of instructions) {
    const from = /^FROM\s+\S+\s+AS\s+(\S+)$/i.exec(line);
    if (from?.[1] !== undefined) {
      current = [];
      out.set(from[1], current);
    } else {
      current.push(line);
    }
  }
  return out;
})();
const runtime = stages.get('runtime') ?? [];
const build = stages.get('build') ?? [];
const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  devDependencies: Record<string, string>;
  dependencies: Record<string, string>;
};

describe('the container image', () => {
  it('builds in one stage and runs from another, on the Node version the tests run on', () => {
    expect([...stages.keys()]).toEqual(['build', 'runtime']);
    const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile)?.[1];
    expect(nodeImage).toBe(`node:${packageJson.devDependencies.node}-bookworm-slim`);
    expect(instructions.filter((l) => l.startsWith('FROM '))).toEqual(['FROM ${NODE_IMAGE} AS build', 'FROM ${NODE_IMAGE} AS runtime']);
    expect(build.some((l) => /^RUN .*npm ci\b/.test(l))).toBe(true);
    expect(build).toContain('RUN npm run build');
    expect(build.some((l) => /^RUN npm prune --omit=dev\b/.test(l))).toBe(true);
  });

  it('leaves the devDependencies, the pinned node binary among them, out of the runtime image', () => {
    // npm prune --omit=dev removes exactly what the lock file marks dev-only.
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    expect(packageJson.dependencies.node).toBeUndefined();
    expect(lock.packages['node_modules/node']?.dev).toBe(true);
    expect(lock.packages['node_modules/typescript']?.dev).toBe(true);
    // The build stage refuses to go on should they survive the prune.
    expect(build.find((l) => l.startsWith('RUN npm prune'))).toContain('test ! -e node_modules/node');
    // The runtime stage takes the pruned node_modules, dist and package.json (type: module), nothing else.
    expect(runtime.filter((l) => l.startsWith('COPY'))).toEqual([
      'COPY --from=build /src/package.json ./',
      'COPY --from=build /src/node_modules ./node_modules',
      'COPY --from=build /src/dist ./dist',
    ]);
  });

  it(`runs node ${OPERATOR_BUNDLE} under tini as uid 65532, exposing the chart ports, with OCI labels`, () => {
    expect(runtime).toContain('USER 65532:65532');
    const entrypoint = runtime.find((l) => l.startsWith('ENTRYPOINT '));
    const argv = JSON.parse(entrypoint?.slice('ENTRYPOINT '.length) ?? 'null') as string[];
    expect(argv.slice(0, 3)).toEqual(['/usr/bin/tini', '--', 'node']);
    expect(argv.at(-1)).toBe(OPERATOR_BUNDLE);
    // Between them only node's own flags (the memory flags test/harness/operator-process.ts reads from here for the benches and tests).
    for (const flag of argv.slice(3, -1)) expect(flag).toMatch(/^--[a-z-]+(=\S+)?$/);
    expect(runtime.some((l) => /apt-get install -y --no-install-recommends tini libjemalloc2 /.test(l))).toBe(true);
    expect(runtime).toContain('EXPOSE 8080 8081');
    const values = readFileSync(join(root, 'deploy/helm/neon-key-operator/values.yaml'), 'utf8');
    expect(values).toMatch(/^metrics:\n {2}# [^\n]*\n {2}port: 8080$/m);
    expect(values).toMatch(/^health:\n {2}# [^\n]*\n {2}port: 8081$/m);
    // tsc -p tsconfig.build.json maps OPERATOR_SOURCE (src/) to OPERATOR_BUNDLE (dist/).
    const buildConfig = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8')) as { compilerOptions: { rootDir: string; outDir: string } };
    expect(buildConfig.compilerOptions).toMatchObject({ rootDir: 'src', outDir: 'dist' });
    const labels = runtime.filter((l) => l.startsWith('LABEL')).join(' ');
    for (const label of ['title', 'description', 'source', 'licenses', 'version', 'revision', 'created']) {
      expect(labels).toContain(`org.opencontainers.image.${label}=`);
    }
  });

  it("preloads jemalloc as node's malloc, at the path where the runtime stage links Debian's library", () => {
    const allocator = imageAllocator(dockerfile);
    expect(allocator.preload).toBe('/usr/local/lib/libjemalloc.so.2');
    // The link is made in the step that installs the package (the library's path differs by architecture).
    const install = runtime.find((l) => l.includes('apt-get install'));
    expect(install).toContain(`ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc[.]so[.]2$')" ${allocator.preload}`);
    expect(runtime.indexOf(runtime.find((l) => l.startsWith('ENV LD_PRELOAD=')) ?? '')).toBeGreaterThan(runtime.indexOf(install ?? ''));
    // Options jemalloc knows, each name=value: an unknown one is only a warning on stderr at start (the bundle's run below and the kind e2e check it).
    for (const option of allocator.conf.split(',')) expect(option).toMatch(/^(narenas|background_thread|dirty_decay_ms|muzzy_decay_ms):\w+$/);
  });

  it('runs the operator from one esbuild bundle that loads without node_modules, with readable names', () => {
    const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    // tsc first (type-checked; dist/ for the emulator), then the bundle over tsc's main.js.
    expect(scripts.build).toBe('tsc -p tsconfig.build.json && npm run --silent bundle && node scripts/stamp-build.ts');
    // The image's VERSION and REVISION reach the build step, which stamps them (build_info).
    const buildStep = build.indexOf('RUN npm run build');
    expect(build.indexOf('ARG VERSION')).toBeGreaterThan(build.findIndex((l) => /^RUN .*npm ci\b/.test(l)));
    expect(build.indexOf('ARG VERSION')).toBeLessThan(buildStep);
    expect(build.indexOf('ARG REVISION')).toBeLessThan(buildStep);
    // esbuild's API (scripts/bundle.ts), for its plugin: client-node's unused modules left out.
    expect(scripts.bundle).toBe('node scripts/bundle.ts');
    const options = bundleOptions(OPERATOR_BUNDLE);
    expect(options).toMatchObject({ entryPoints: [OPERATOR_SOURCE], bundle: true, platform: 'node', format: 'esm', outfile: OPERATOR_BUNDLE, sourcemap: true });
    expect(options.plugins?.map((p) => p.name)).toEqual(['client-node-is-pure', 'http-through-require']);
    // Identifiers stay: stack traces in the logs name the functions.
    expect(options.minify).toBeUndefined();
    expect(options.minifyIdentifiers).toBeUndefined();
    // esbuild is a pinned devDependency of ours, not something another package happens to bring.
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean; devDependencies?: Record<string, string> }>;
    };
    expect(packageJson.devDependencies.esbuild).toMatch(/^\d+\.\d+\.\d+$/);
    expect(lock.packages['']?.devDependencies?.esbuild).toBe(packageJson.devDependencies.esbuild);
    expect(lock.packages['node_modules/esbuild']).toMatchObject({ version: packageJson.devDependencies.esbuild, dev: true });
    // The same command, into a folder with no node_modules above it: the bundle must load every
    // module the operator imports (a require or import left unbundled would throw here), then
    // print its usage and exit, on the image's node flags.
    const out = mkdtempSync(join(tmpdir(), 'operator-bundle-'));
    try {
      writeFileSync(join(out, 'package.json'), '{"type": "module"}\n');
      const outfile = join(out, 'main.js');
      execFileSync(process.execPath, ['scripts/bundle.ts', `--outfile=${outfile}`], { cwd: root, stdio: 'pipe' });
      expect(existsSync(`${outfile}.map`)).toBe(true);
      // ASCII only: V8 holds a script's source text in the heap at one byte per character only when
      // every character fits in one; a single other one (a 'µ' in a regular expression, a name in
      // a license comment) doubles it, 4 MiB more for this bundle. Licenses go beside it.
      const nonAscii = [...readFileSync(outfile, 'latin1').matchAll(/[^\t\n\r -~]/g)].map((m) => m.index);
      expect(nonAscii).toEqual([]);
      // client-node's generated models left out (the operator's API clients are its own): none assigns its attribute map.
      expect(readFileSync(outfile, 'utf8')).not.toContain('attributeTypeMap');
      expect(readFileSync(`${outfile}.LEGAL.txt`, 'utf8')).toContain('MIT');
      const nodeFlags = imageNodeFlags(dockerfile);
      expect(nodeFlags.length).toBeGreaterThan(0);
      // The bundle in `out`, run there on the image's node flags.
      // And with the image's malloc where this machine has the library: it loads and takes its options without a word on stderr.
      const malloc = imageAllocatorEnv(imageAllocator(dockerfile)).env;
      const bundled = (args: string[]) => runOperatorSync({ entry: outfile, nodeFlags, args, cwd: out, env: { ...process.env, NODE_OPTIONS: '', ...malloc } });
      const help = bundled(['--help']);
      expect(help.stderr).toBe('');
      expect(help.status).toBe(0);
      expect(help.stdout).toMatch(/^neon-key-operator\n/);
      // node:http through `require` (the plugin http-through-require): imported as an ES module, its
      // getters would load Node's own undici, which the operator does not use (1-3 MiB of its RSS at rest).
      // Node lists what it loaded; the hook prints that list's verdict as the process exits.
      expect(readFileSync(outfile, 'utf8')).not.toMatch(/from\s*"(node:)?http"|import\(\s*"(node:)?http"\s*\)/);
      const hook = `process.on('exit', () => process.stdout.write("Node's undici " + (process.moduleLoadList.includes('NativeModule internal/deps/undici/undici') ? 'loaded' : 'not loaded')))`;
      const loaded = runOperatorSync({
        entry: outfile,
        nodeFlags: [...nodeFlags, `--import=data:text/javascript,${encodeURIComponent(hook)}`],
        args: ['--help'],
        cwd: out,
        env: { ...process.env, NODE_OPTIONS: '' },
      });
      expect(loaded.stdout).toMatch(/Node's undici not loaded$/);
      // npm run build's stamp, as the image's build runs it with its build arguments: --version
      // (and build_info, from the same file) report them.
      execFileSync(process.execPath, [join(root, 'scripts/stamp-build.ts'), join(out, 'build.json')], {
        env: { ...process.env, VERSION: '9.8.7-test', REVISION: '0123456789abcdef' },
        stdio: 'pipe',
      });
      const version = bundled(['--version']);
      expect(version.stdout).toBe('neon-key-operator 9.8.7-test (revision 0123456789abcdef)\n');
      // The operator's own code runs too: a bad flag stops it at start-up, saying which.
      const bad = bundled(['--workers=x']);
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toContain('--workers');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('ships every package the code under src/ imports at run time as a production dependency', () => {
    // The runtime image has only what npm prune --omit=dev keeps: an import of a devDependency
    // would pass every test here and crash in the cluster.
    const files = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' }).filter(
      (f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !f.endsWith('.d.ts'),
    );
    expect(files.length).toBeGreaterThan(0);
    const builtins = new Set(builtinModules);
    const imported = new Map<string, string>();
    for (const file of files) {
      const text = readFileSync(join(root, 'src', file), 'utf8');
      // Static imports and re-exports (not `import type`, which erases), and dynamic import().
      const specifiers = [
        ...[...text.matchAll(/^\s*(?:import|export)\s+(?!type\b)[^'";]*?\bfrom\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]),
        ...[...text.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]),
        ...[...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1]),
      ];
      for (const specifier of specifiers) {
        if (specifier === undefined || specifier.startsWith('.') || specifier.startsWith('node:') || builtins.has(specifier)) continue;
        const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : (specifier.split('/')[0] as string);
        imported.set(name, file);
      }
    }
    expect(imported.has('zod')).toBe(true);
    const notProduction = [...imported].filter(([name]) => packageJson.dependencies[name] === undefined).map(([name, file]) => `${name} (src/${file})`);
    expect(notProduction).toEqual([]);
  });

  it('sends the build only what it needs: no node_modules, .cache, .git or local databases', () => {
    const ignore = readFileSync(join(root, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignore[0]).toBe('*');
    const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''));
    expect(allowed.sort()).toEqual([
      '.npmrc',
      'package-lock.json',
      'package.json',
      'scripts/bundle.ts',
      'scripts/stamp-build.ts',
      'src',
      'tsconfig.build.json',
      'tsconfig.json',
    ]);
    // Everything the build stage copies is in the context and exists in the repository.
    const copied = build.filter((l) => l.startsWith('COPY ')).flatMap((l) => l.split(/\s+/).slice(1, -1));
    for (const path of copied) {
      expect(allowed).toContain(path);
      expect(existsSync(join(root, path))).toBe(true);
    }
  });
});

describe('the e2e scripts', () => {
  // kind.sh (kind, where Docker is) and node/run.sh (`npm run e2e`, a real node) run the scenarios
  // of scenarios.sh, a library they source.
  const e2e = join(root, 'test/e2e');
  const kind = join(e2e, 'kind.sh');
  const scenarios = join(e2e, 'scenarios.sh');
  const entryPoints = [kind, ...['run.sh', 'session.sh', 'build-image.sh', 'base-image.sh', 'machine-state.sh'].map((f) => join(e2e, 'node', f))];

  it('are valid bash, strict, and shellcheck-clean where shellcheck is installed', () => {
    execFileSync('bash', ['-n', scenarios]);
    for (const script of entryPoints) {
      execFileSync('bash', ['-n', script]);
      const text = readFileSync(script, 'utf8');
      expect(text.startsWith('#!/usr/bin/env bash\n')).toBe(true);
      expect(text).toContain('set -euo pipefail');
    }
    expect(readFileSync(kind, 'utf8')).toMatch(/^trap cleanup EXIT$/m);
    expect(readFileSync(join(e2e, 'node/run.sh'), 'utf8')).toMatch(/^trap cleanup EXIT$/m);
    expect(readFileSync(join(e2e, 'node/session.sh'), 'utf8')).toMatch(/^trap teardown EXIT$/m);
    const shellcheck = spawnSync('shellcheck', ['--version']);
    if (shellcheck.error === undefined && shellcheck.status === 0) {
      for (const script of [...entryPoints, scenarios]) {
        const result = spawnSync('shellcheck', ['-x', script], { encoding: 'utf8', cwd: dirname(script) });
        expect(result.stdout + result.stderr).toBe('');
        expect(result.status).toBe(0);
      }
    }
  });

  it('run the image the Dockerfile builds: the operator through the chart and the base, the emulator from dist/', () => {
    const text = readFileSync(scenarios, 'utf8');
    expect(text).toContain('command: [/usr/bin/tini, --, node, dist/emulator/main.js]');
    expect(text).toContain('"$e2e_root/deploy/helm/neon-key-operator"');
    expect(text).toContain('"$e2e_root/deploy/base"');
    expect(text).toContain('--for=condition=Ready');
    expect(readFileSync(kind, 'utf8')).toContain('kind load docker-image');
    expect(readFileSync(kind, 'utf8')).toContain('source "$root/test/e2e/scenarios.sh"');
    expect(readFileSync(join(e2e, 'node/session.sh'), 'utf8')).toContain('source "$root/test/e2e/scenarios.sh"');
    // The unchanged Dockerfile: build-image.sh passes build arguments only, never another file.
    const build = readFileSync(join(e2e, 'node/build-image.sh'), 'utf8');
    expect(build).toContain('-f "$root/Dockerfile"');
    // The emulator's command line: the flags the script passes are those main.ts declares.
    const emulatorMain = readFileSync(join(root, 'src/emulator/main.ts'), 'utf8');
    const passed = /args: \[([^\]]*)\]/.exec(text.slice(text.indexOf('dist/emulator/main.js')))?.[1] ?? '';
    const flags = [...passed.matchAll(/--([a-z-]+)=/g)].map((m) => m[1] as string);
    expect(flags.sort()).toEqual(['db', 'host', 'port']);
    for (const flag of flags) expect(emulatorMain).toMatch(new RegExp(`^\\s*'?${flag}'?: \\{ type: 'string'`, 'm'));
  });
});
