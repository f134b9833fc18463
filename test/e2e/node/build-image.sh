#!/usr/bin/env bash
# Builds the operator image from the project's Dockerfile, unchanged, with buildah (no Docker
# engine here), and writes it as an OCI archive that containerd imports. Layers are cached in
# buildah's store under .cache/e2e, so a warm build only redoes what changed.
#
#   test/e2e/node/build-image.sh <image-name> <archive> <buildah-storage-args...>
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=$1 archive=$(realpath -m "$2")
shift 2
log() { echo "build-image.sh: $*" >&2; }

node_image=$("$here/base-image.sh" "$@")
version=$(node -p 'require(process.argv[1]).version' "$root/package.json")

# Where outbound TLS is intercepted by a proxy whose CA only the host trusts (a CA added under
# /usr/local/share/ca-certificates), `npm ci` inside the build must trust the host's bundle: mount it
# read-only with a user npmrc (/root/.npmrc, beside the project's own .npmrc) naming it. Nowhere else:
# buildah leaves the mount points behind as empty files in the build stage. E2E_BUILD_CA=1/0 forces it.
ca_args=()
want_ca=${E2E_BUILD_CA:-auto}
if [ "$want_ca" = auto ]; then
  want_ca=0
  compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null && want_ca=1
fi
if [ "$want_ca" = 1 ]; then
  echo "cafile=/etc/ssl/certs/ca-certificates.crt" >"$(dirname "$archive")/build-npmrc"
  ca_args=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
           --volume "$(dirname "$archive")/build-npmrc:/root/.npmrc:ro")
  log "trusting the host's CA bundle in the build (an intercepting proxy's CA is installed)"
fi

start=$(date +%s)
# No REVISION build argument: its value (the commit) would change the cache key of every step of the
# runtime stage after it, apt-get included, at every commit; this image is tested, never published.
# runc, not crun (Debian's crun refuses this host's hybrid cgroup layout); --pull=false: the base
# is in the store (base-image.sh); --network host: npm ci and apt-get reach their repositories.
# --cgroup-parent: the build's containers in this run's cgroup subtree (run.sh), not in a
# top-level buildah-* cgroup that cannot be told from another build's on this machine.
buildah "$@" bud --quiet --runtime /usr/sbin/runc --pull=false --network host --layers --force-rm \
  ${E2E_CGROUP:+--cgroup-parent "/$E2E_CGROUP/build"} \
  "${ca_args[@]}" \
  --build-arg NODE_IMAGE="$node_image" --build-arg VERSION="$version" \
  -f "$root/Dockerfile" -t "$image" "$root" >/dev/null
log "built $image from $node_image in $(( $(date +%s) - start ))s"
# The archive is written again only when the image changed (a warm build gives the same image).
id=$(buildah "$@" inspect --type image --format '{{.FromImageID}}' "$image")
if [ ! -f "$archive" ] || [ "$(cat "$archive.id" 2>/dev/null)" != "$id" ]; then
  rm -f "$archive" "$archive.id"
  buildah "$@" push --quiet "$image" "oci-archive:$archive:$image"
  echo "$id" >"$archive.id"
fi
