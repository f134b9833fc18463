#!/usr/bin/env bash
# Builds the node components of the e2e's real node (kubelet, kube-scheduler, kube-proxy, and our
# pause program) from Go modules into .cache/node/<stamp>/bin. Prints the bin folder on stdout.
#
# A module of its own, not test/controlplane's: that module's stamp hashes its go.mod/go.sum, so
# adding the node's modules there would rebuild the control plane of every `npm test` once and tie
# the unit/integration tests to an e2e-only change. Here the Kubernetes version is the same (checked
# below), and Go's build cache shares every package the two builds have in common (+~45 s).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "test/node/build.sh: Go is required (https://go.dev/dl); none on PATH" >&2; exit 1; }
# shellcheck source=../go-binary.sh
source "$here/../go-binary.sh"

kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$here/go.mod")
controlplane_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$root/test/controlplane/go.mod")
if [ "$kube_version" != "$controlplane_version" ]; then
  echo "test/node/build.sh: k8s.io/kubernetes is $kube_version here but $controlplane_version in test/controlplane; pin both to one version" >&2
  exit 1
fi

build_lock "$root/.cache/node/build.lock"
stamp=$( (cat "$here/go.mod" "$here/go.sum" "$here/build.sh" "$here/pause/main.go"; go version) | sha256sum | cut -c1-16)
bin="$root/.cache/node/$kube_version-$stamp/bin"
if [ -x "$bin/kubelet" ] && [ -x "$bin/kube-scheduler" ] && [ -x "$bin/kube-proxy" ] && [ -x "$bin/pause" ]; then
  echo "$bin"
  exit 0
fi

log() { echo "test/node/build.sh: $*" >&2; }
rm -rf "$bin.partial" && mkdir -p "$bin.partial"
bin_partial=$(cd "$bin.partial" && pwd)
# -mod=readonly: go.sum is committed; a missing entry is an error here, never a silent edit.
export CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local
start=$(date +%s)

# The same version stamping as test/controlplane/build.sh: the kubelet reports it to the apiserver.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1"
  kube_ldflags+=" -X $pkg.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

cd "$here"
log "building kubelet, kube-scheduler, kube-proxy $kube_version and pause"
for cmd in kubelet kube-scheduler kube-proxy; do
  go_binary "$bin_partial/$cmd" -trimpath -ldflags "-s -w $kube_ldflags" "k8s.io/kubernetes/cmd/$cmd"
done
go_binary "$bin_partial/pause" -trimpath -ldflags "-s -w" ./pause

rm -rf "$bin" && mv "$bin.partial" "$bin"
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
