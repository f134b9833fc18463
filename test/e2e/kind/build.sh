#!/usr/bin/env bash
# Builds the Go programs of the offline kind e2e into .cache/kind/<stamp>/bin and prints that folder
# on stdout: kind itself, kubeadm (the same k8s.io/kubernetes version as test/controlplane and
# test/node, whose kube-apiserver, kube-controller-manager, kubectl, etcd, kubelet, kube-scheduler,
# kube-proxy and pause are reused as built), containerd, crictl, CoreDNS and the kindnetd stand-in
# (tools/kindnetd). Each is a Go module at a pinned version; Go's build cache shares what they
# have in common with the other builds (kubeadm: ~1 min after test/node's build, cold). CoreDNS is built with the plugins of kind's Corefile only
# (tools/coredns). kind's default storage (local-path-provisioner) is not built: no scenario uses a
# PersistentVolume (node-image.sh, docs/testing.md "On kind").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "test/e2e/kind/build.sh: Go is required (https://go.dev/dl); none on PATH" >&2; exit 1; }
# shellcheck source=../../go-binary.sh
source "$here/../../go-binary.sh"

kind_version=v0.33.0
# containerd as kind v0.33.0's base image has it (images/base/Dockerfile).
containerd_version=v2.3.4
crictl_version=v1.34.0
# CoreDNS: the Go module proxy this project's CI reaches serves v1.14.3 and later only; kubeadm
# 1.34 names v1.12.1, and the image is tagged with kubeadm's name (node-image.sh). Its version is
# tools/coredns/go.mod's.

kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$here/tools/go.mod")
controlplane_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$root/test/controlplane/go.mod")
if [ "$kube_version" != "$controlplane_version" ]; then
  echo "test/e2e/kind/build.sh: k8s.io/kubernetes is $kube_version here but $controlplane_version in test/controlplane; pin both to one version" >&2
  exit 1
fi

build_lock "$root/.cache/kind/build.lock"
stamp=$( (cat "$here/tools/go.mod" "$here/tools/go.sum" "$here"/tools/coredns/go.* "$here/tools/coredns/main.go" "$here/tools/kindnetd/main.go" \
  "$here/build.sh"; go version) | sha256sum | cut -c1-16)
bin="$root/.cache/kind/$kube_version-$stamp/bin"
programs=(kind kubeadm containerd ctr containerd-shim-runc-v2 crictl coredns kindnetd)
complete=true
for program in "${programs[@]}"; do [ -x "$bin/$program" ] || complete=false; done
if $complete; then echo "$bin"; exit 0; fi

log() { echo "test/e2e/kind/build.sh: $*" >&2; }
rm -rf "$bin.partial" && mkdir -p "$bin.partial"
bin_partial=$(cd "$bin.partial" && pwd)
export CGO_ENABLED=0 GOTOOLCHAIN=local
GO_TAGS=()
start=$(date +%s)

# kubeadm from the tools module (-mod=readonly: go.sum is committed), stamped like the others.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1"
  kube_ldflags+=" -X $pkg.gitMinor=$(echo "$kube_version" | cut -d. -f2)"
  kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
log "building kubeadm $kube_version"
(cd "$here/tools" && GOFLAGS=-mod=readonly go_binary "$bin_partial/kubeadm" -trimpath -ldflags "-s -w $kube_ldflags" k8s.io/kubernetes/cmd/kubeadm)
# The kindnetd stand-in (tools/kindnetd: the standard library only).
(cd "$here/tools" && GOFLAGS=-mod=readonly go_binary "$bin_partial/kindnetd" -trimpath -ldflags "-s -w" ./kindnetd)

# The others from their own modules at a pinned version (module@version: their go.sum,
# checked against the checksum database).
install() { # <package@version>...
  local package package_name
  log "building $*"
  for package in "$@"; do
    package_name=${package%@*}
    GOFLAGS= go_binary "$bin_partial/${package_name##*/}" -trimpath -ldflags "-s -w" "${GO_TAGS[@]}" "$package"
  done
}
install "sigs.k8s.io/kind@$kind_version"
# kind's build tags for containerd (no aufs, zfs, btrfs or devmapper snapshotters); static, no cgo.
GO_TAGS=(-tags "no_aufs no_zfs no_btrfs no_devmapper")
install "github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
  "github.com/containerd/containerd/v2/cmd/ctr@$containerd_version" \
  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version"
GO_TAGS=()
install "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
log "building CoreDNS (the plugins of kind's Corefile: tools/coredns)"
(cd "$here/tools/coredns" && GOFLAGS=-mod=readonly go_binary "$bin_partial/coredns" -trimpath -ldflags "-s -w" .)

rm -rf "$bin" && mv "$bin.partial" "$bin"
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
