# syntax=docker/dockerfile:1
# The neon-key-operator image: `node dist/operator/main.js` under tini, as user 65532, on a
# read-only root filesystem. The same image runs the platform emulator
# (command: [tini, --, node, dist/emulator/main.js]), which the kind e2e script uses.
#
#   docker build -t neon-key-operator:dev \
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .

# Node 24 LTS, the version pinned in package.json (devDependency "node"): the image runs what the
# tests ran. Debian bookworm slim: glibc, and tini from Debian's own packages.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
# Dependencies first: this layer is reused until package.json or the lock file changes.
COPY package.json package-lock.json .npmrc ./
RUN --mount=type=cache,target=/root/.npm npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/stamp-build.ts ./scripts/stamp-build.ts
COPY scripts/bundle.ts ./scripts/bundle.ts
# npm run build: tsc -p tsconfig.build.json type-checks src/**/*.ts into dist/**/*.js (+ source
# maps; what the emulator runs), then esbuild (devDependency, pinned; scripts/bundle.ts) bundles the
# operator, its dependencies included, into the one file dist/operator/main.js (+ main.js.map), over
# tsc's; client-node's modules marked free of side effects, so its unused generated models stay out.
# Why one file: V8 keeps the source text of every loaded module in the heap, and
# @kubernetes/client-node alone is 25 MB of JavaScript in hundreds of modules, most never called;
# the bundle holds only what the operator imports (docs/benchmarks.md, operator memory). RSS after
# loading (`main.js --help`, the flags of the ENTRYPOINT, Node 24): tsc's dist/ 112 MiB; the bundle 103;
# whitespace and syntax minified 94 (chosen); fully minified 96: no smaller, and its renamed
# identifiers would take the function names out of the stack traces in the logs. ASCII only, the
# license comments in main.js.LEGAL.txt beside it: one other character makes V8 keep the whole
# source text at two bytes per character (8.2 instead of 4.1 MiB of heap; the RSS after loading
# 4 MiB lower; test/deploy/image.test.ts checks it). Its last step stamps VERSION and REVISION (else
# package.json's version) into dist/operator/build.json: the operator's build_info and --version.
# Declared here, after npm ci: a new revision rebuilds from this step on, not the dependencies.
ARG VERSION
ARG REVISION
RUN npm run build
# Production dependencies only (the operator needs none of them, bundled; the emulator does, from
# tsc's dist/emulator). The devDependency "node" (the pinned Node binary the npm scripts
# run on, ~120 MB) must not reach the runtime image: the image's own Node runs the operator.
RUN npm prune --omit=dev \
 && test ! -e node_modules/node \
 && test ! -e node_modules/.bin/node \
 && test ! -e node_modules/typescript

FROM ${NODE_IMAGE} AS runtime
ARG NODE_IMAGE
ARG VERSION=0.0.0-dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="neon-key-operator" \
      org.opencontainers.image.description="Kubernetes operator for Neon API keys (ApiKey, ProjectApiKey), with a wire-compatible emulator of the platform API" \
      org.opencontainers.image.source="https://github.com/neon-key-operator/neon-key-operator" \
      org.opencontainers.image.url="https://github.com/neon-key-operator/neon-key-operator" \
      org.opencontainers.image.documentation="https://github.com/neon-key-operator/neon-key-operator/blob/main/docs/install.md" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="neon-key-operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/${NODE_IMAGE}"

# tini as PID 1. Node as PID 1 would do for the operator itself (it handles SIGTERM to drain its
# reconciles and starts no children), but the kernel ignores a signal sent to PID 1 that has no
# handler installed: a SIGTERM that arrives before main.js has set its handlers (or one sent to
# the emulator, or a SIGINT from `docker run` + Ctrl-C) would then do nothing and the pod would
# wait out its whole grace period. tini forwards signals to node, reaps any zombie and exits with
# node's exit code. The package manager and npm are removed: nothing at run time installs.
# jemalloc (Debian's libjemalloc2) is node's allocator here, preloaded (LD_PRELOAD below); its path
# differs by architecture, so a link at a fixed one.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini libjemalloc2 \
 && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc[.]so[.]2$')" /usr/local/lib/libjemalloc.so.2 \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
           /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*

WORKDIR /app
# Owned by root and not writable by the user that runs them. package.json carries "type": "module".
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist

# HOME and TMPDIR are /tmp: with readOnlyRootFilesystem, /tmp (an emptyDir in the chart) is the
# only writable place.
ENV NODE_ENV=production \
    HOME=/tmp \
    TMPDIR=/tmp

# malloc: jemalloc instead of glibc's, for the memory that is not V8's heap (TLS, HTTP buffers, the
# compilers' zones). glibc keeps what it freed in per-thread arenas it can rarely give back: at
# ~12,000 keys about 32 MiB of the operator's RSS beside the heap, against 11-17 with jemalloc, which
# returns freed pages within seconds (docs/benchmarks.md, issue 44). Two arenas, not four per core of
# the node: fewer half-used pages, and the same for a pod on any node. test/harness/operator-process.ts
# reads this line: the benchmarks and the memory suites run the operator with it.
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 MALLOC_CONF=narenas:2

# metrics (--metrics-bind-address) and health probes (--health-probe-bind-address)
EXPOSE 8080 8081
# The nonroot numeric uid/gid of distroless: Kubernetes' runAsNonRoot can verify a number, not a name.
USER 65532:65532
# V8 flags that trade a little CPU for memory (docs/benchmarks.md, operator memory; bench/operator.ts
# runs the operator with exactly the flags of this line). Here, not in NODE_OPTIONS, which refuses
# --optimize-for-size.
# - --max-semi-space-size=4 (MiB): V8 sizes the young generation from the machine's memory, not the
#   container's (64 MiB semi-spaces on a 24 GiB node); an operator's garbage is short-lived request
#   and watch objects, which a small young generation collects just as well;
# - --optimize-for-size: V8 grows the old generation less far ahead of the live heap;
# - no --enable-source-maps: it would keep the bundle's source map in the heap. Stack traces name
#   the functions of src/*.ts (identifiers are not minified) at a line and column of
#   dist/operator/main.js; its map ships beside it (NODE_OPTIONS=--enable-source-maps maps traces
#   to src/).
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--max-semi-space-size=4", "--optimize-for-size", "dist/operator/main.js"]
# Flags come from the Deployment's args (deploy/base, the Helm chart).
CMD ["--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"]
