#!/usr/bin/env bash
# Builds another Kubernetes version's kube-apiserver, kube-controller-manager and kubectl from the
# tools-only module test/controlplane/versions/<major.minor> (written by add-version.sh) into
# .cache/controlplane/<version>-<stamp>/bin, beside the etcd and helm of the default control plane
# (build.sh): the operator talks to the apiserver only, so etcd's version is not under test, and a
# second etcd would cost a cold machine another module graph to download and compile. Prints the bin
# folder on stdout, like build.sh. Usage: test/controlplane/build-version.sh 1.30.14
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build-version.sh: Go is required (https://go.dev/dl); none on PATH" >&2; exit 1; }
# shellcheck source=../go-binary.sh
source "$here/../go-binary.sh"

requested=${1:?usage: build-version.sh <kubernetes version, e.g. 1.30.14>}
requested=v${requested#v}
[[ $requested =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || { echo "build-version.sh: '$requested' is not a Kubernetes release (1.MINOR.PATCH)" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
module="$here/versions/1.$minor"
pinned=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$module/go.mod" 2>/dev/null || true)
if [ "$pinned" != "$requested" ]; then
  echo "build-version.sh: no module pins Kubernetes $requested (test/controlplane/versions/1.$minor pins ${pinned:-nothing});" \
    "write one with: bash test/controlplane/add-version.sh ${requested#v}" >&2
  exit 2
fi

# etcd and helm: the default control plane's, built first when missing.
build_lock "$root/.cache/controlplane/build-version.lock"
base=$(bash "$here/build.sh")

stamp=$( (cat "$module/go.mod" "$module/go.sum" "$here/build-version.sh"; go version) | sha256sum | cut -c1-16)
bin="$root/.cache/controlplane/$requested-$stamp/bin"
link() { ln -f "$base/$1" "$bin/$1" 2>/dev/null || cp -f "$base/$1" "$bin/$1"; }
if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/kubectl" ]; then
  link etcd && link helm
  echo "$bin"
  exit 0
fi

log() { echo "build-version.sh: $*" >&2; }
mkdir -p "$bin.partial"
bin_partial=$(cd "$bin.partial" && pwd)
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
start=$(date +%s)

# As build.sh: the version variables that a release build sets.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$requested -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

cd "$module"
log "building kube-apiserver, kube-controller-manager and kubectl $requested (a cold build takes about 15 minutes on 2 cores)"
for cmd in kube-apiserver kube-controller-manager kubectl; do
  go_binary "$bin_partial/$cmd" -trimpath -ldflags "-s -w $kube_ldflags" "k8s.io/kubernetes/cmd/$cmd"
  log "$cmd after $(( $(date +%s) - start ))s"
done
rm -rf "$bin" && mv "$bin.partial" "$bin"
link etcd && link helm
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
