// `npm run bundle` (the second step of `npm run build`, and the Dockerfile's): esbuild bundles the
// operator, its dependencies included, into one file (dist/operator/main.js, its source map beside
// it); `--outfile=<path>` writes it elsewhere. The options are the image's reasons (Dockerfile):
// whitespace and syntax minified, identifiers kept (the stack traces in the logs name the
// functions), license comments in main.js.LEGAL.txt, a `require` for the CommonJS dependencies.
//
// client-node's modules are marked free of side effects, so that a module none of whose exports
// the operator uses is left out. Each of its generated model modules (dist/gen/) assigns its class's
// attribute map at top level, and dist/serializer.js extends the generated ObjectSerializer, which
// names every model: without the mark, every model of every API group is in the bundle, used or not.
// The operator's API clients are its own (runtime/kube-client.ts); it uses of client-node the
// KubeConfig, Watch, the request context and ApiException, and only what those import stays. The
// one module imported for what it does rather than what it exports (polyfill.js) keeps its effect.
import { createRequire } from 'node:module';
import { dirname, join, resolve, sep } from 'node:path';
import { build, type BuildOptions, type Plugin } from 'esbuild';

const OPERATOR_SOURCE = 'src/operator/main.ts';
const OPERATOR_BUNDLE = 'dist/operator/main.js';

/** client-node's dist/ folder, as esbuild sees it (symbolic links resolved). */
const CLIENT_NODE_DIST = dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node'));
/** A File global for Node 18, set when imported. */
const POLYFILL = join(CLIENT_NODE_DIST, 'polyfill.js');

/** Marks each module client-node's modules import free of side effects: left out unless something used imports from it. */
export const clientNodeIsPure: Plugin = {
  name: 'client-node-is-pure',
  setup(esbuild) {
    // client-node's modules import each other by relative path with the file's full name, as ESM
    // must: the path is the file's.
    esbuild.onResolve({ filter: /^\.\.?\// }, (args) => {
      if (!args.importer.startsWith(`${CLIENT_NODE_DIST}${sep}`)) return undefined;
      const path = resolve(args.resolveDir, args.path);
      return path === POLYFILL ? undefined : { path, sideEffects: false };
    });
  },
};

/**
 * Loads node:http through `require` (the banner's), not as an ES module. Node builds an ES module
 * of a built-in from all its exports, and node:http's include `WebSocket`, `CloseEvent` and
 * `MessageEvent`, getters that load Node's own copy of undici (internal/deps/undici) the first time
 * they are read: an `import` of node:http, named or not, loads it. The operator sends its requests
 * with the undici it bundles and uses none of Node's; loading it anyway cost 3 MiB of heap and 17 MiB
 * of RSS in a bare node, and an operator with ~12,000 keys about 1 MiB of live heap and 1-3 MiB of
 * RSS at rest (docs/benchmarks.md). `require` returns the module as it is, its getters not read. The
 * operator's own code and client-node's each import node:http.
 */
export const httpThroughRequire: Plugin = {
  name: 'http-through-require',
  setup(esbuild) {
    esbuild.onResolve({ filter: /^(node:)?http$/ }, (args) =>
      // The module's own `require` is of Node's node:http, left to the banner's `require` at run time.
      args.namespace === 'http-through-require' ? { path: 'node:http', external: true } : { path: 'node:http', namespace: 'http-through-require' },
    );
    esbuild.onLoad({ filter: /.*/, namespace: 'http-through-require' }, () => ({ contents: "module.exports = require('node:http');", loader: 'js' }));
  },
};

export function bundleOptions(outfile: string): BuildOptions {
  return {
    entryPoints: [OPERATOR_SOURCE],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'es2024',
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: true,
    sourcesContent: false,
    legalComments: 'linked',
    logLevel: 'warning',
    outfile,
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    plugins: [clientNodeIsPure, httpThroughRequire],
  };
}

if (import.meta.main) {
  const outfile = process.argv.find((arg) => arg.startsWith('--outfile='))?.slice('--outfile='.length) ?? OPERATOR_BUNDLE;
  await build(bundleOptions(outfile));
}
