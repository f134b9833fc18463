#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kubectl, etcd, helm) from Go modules into
# .cache/controlplane/<stamp>/bin. The stamp is a hash of this folder's inputs, so a warm cache
# is reused and a change of pinned versions rebuilds. Prints the bin folder on stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl); none on PATH" >&2; exit 1; }
# shellcheck source=../go-binary.sh
source "$here/../go-binary.sh"

# Pinned versions. The Kubernetes version comes from go.mod; etcd is the one k8s.io/apiserver pins.
kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$here/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$here/go.mod")
helm_version=v3.19.5

build_lock "$root/.cache/controlplane/build.lock"
stamp=$( (cat "$here/go.mod" "$here/go.sum" "$here/build.sh"; go version) | sha256sum | cut -c1-16)
out="$root/.cache/controlplane/$kube_version-$stamp"
bin="$out/bin"
if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/etcd" ] && [ -x "$bin/kubectl" ] && [ -x "$bin/helm" ]; then
  echo "$bin"
  exit 0
fi

log() { echo "build.sh: $*" >&2; }
mkdir -p "$bin.partial"
bin_partial=$(cd "$bin.partial" && pwd)
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
start=$(date +%s)

# kube-apiserver and kubectl read their version from these variables, as the release build sets them.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1"
  kube_ldflags+=" -X $pkg.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

cd "$here"
log "building kube-apiserver $kube_version, kube-controller-manager, kubectl, etcd $etcd_version (a cold build takes 10-25 minutes on 2 cores)"
go_binary "$bin_partial/kube-apiserver" -trimpath -ldflags "-s -w $kube_ldflags" k8s.io/kubernetes/cmd/kube-apiserver
go_binary "$bin_partial/kubectl" -trimpath -ldflags "-s -w $kube_ldflags" k8s.io/kubernetes/cmd/kubectl
# Only its garbage collector (owner references) and namespace controller run in tests.
go_binary "$bin_partial/kube-controller-manager" -trimpath -ldflags "-s -w $kube_ldflags" k8s.io/kubernetes/cmd/kube-controller-manager
go_binary "$bin_partial/etcd" -trimpath -ldflags "-s -w" go.etcd.io/etcd/server/v3

# Helm is built outside this module: its dependency graph (client-go versions) differs.
log "building helm $helm_version"
GOFLAGS= go_binary "$bin_partial/helm" -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v3/cmd/helm@$helm_version"

rm -rf "$bin" && mv "$bin.partial" "$bin"
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
