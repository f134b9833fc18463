#!/usr/bin/env bash
# Makes a kind node image on this machine, with no container registry, and prints its name. Run
# where `docker` reaches a Docker engine (session.sh: the run's own dockerd).
#
#   test/e2e/kind/node-image.sh <kind-bin> <controlplane-bin> <node-bin>   (needs no network)
#
# kind's own `kind build node-image --type file <kubernetes-server tarball>` does the build,
# unchanged. What it would pull is made here:
# - the base image (kindest/base): base-image.sh;
# - the Kubernetes server tarball: kubeadm, kubelet and kubectl, and images of kube-apiserver,
#   kube-controller-manager, kube-scheduler and kube-proxy, all from the binaries the other suites
#   build from k8s.io/kubernetes;
# - the images kind's build would fetch from registries (etcd, CoreDNS, pause, kindnetd,
#   local-path-provisioner and its helper), under the names kubeadm and kind ask for. kind fetches
#   only the images its Kubernetes tarball does not carry, and it reads which images an archive
#   carries from the archive's `repositories` file when that comes first: kube-proxy.tar carries
#   them all, so nothing is fetched.
# The images are made from Go binaries (CoreDNS, etcd, pause) or from the base rootfs (kube-proxy
# needs a shell and iptables). kindnetd is not a Go module the module proxy serves: its stand-in
# writes a ptp + host-local CNI configuration for the cluster's pod subnet, which serves a
# one-node cluster (the e2e's) and no more. kind's default storage (local-path-provisioner, a
# Deployment kind installs from /kind/manifests/default-storage.yaml) is left out: no scenario
# uses a PersistentVolume, and it was the second-longest cold Go build. kind's build still asks
# for its two images, so both names are given to the base image (nothing to fetch, no layer
# added), and the manifest is removed from the node image: `kind create cluster` then installs
# its fallback StorageClass (provisioner kubernetes.io/host-path), which provisions nothing, so
# a PersistentVolumeClaim stays Pending and no pod runs the stand-in.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
log() { echo "node-image.sh: $*" >&2; }
export DOCKER_BUILDKIT=0
start=$(date +%s)

kind_bin=$1 cp_bin=$2 node_bin=$3
base_image=$(bash "$here/base-image.sh" "$kind_bin")
kube_version=$("$kind_bin/kubeadm" version -o short)
kind_module=$(cd "$here/tools" && GOTOOLCHAIN=local GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/kind@$("$kind_bin/kind" version | awk '{ print $2 }')
# The node image: keyed by the base, this script and every binary folder (their names carry their
# own stamps).
node_stamp=$( (echo "$base_image $kind_bin $cp_bin $node_bin"; cat "$here/node-image.sh") | sha256sum | cut -c1-16)
node_image=localhost/kind-node:$kube_version-$node_stamp
if docker image inspect "$node_image" >/dev/null 2>&1; then echo "$node_image"; exit 0; fi

work=$(mktemp -d "$root/.cache/kind/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# An image from a binary: <name> <binary> <FROM> [<entrypoint>]
image() {
  local name=$1 binary=$2 from=$3 entrypoint=${4:-} ctx
  ctx="$work/ctx-$(basename "$binary")"
  mkdir -p "$ctx"
  cp "$binary" "$ctx/"
  {
    echo "FROM $from"
    echo "COPY $(basename "$binary") /usr/local/bin/"
    echo "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    [ -n "$entrypoint" ] && echo "ENTRYPOINT [\"$entrypoint\"]"
  } >"$ctx/Dockerfile"
  docker build -q -t "$name" "$ctx" >/dev/null
}

log "images (Kubernetes $kube_version)"
registry=registry.k8s.io
for component in kube-apiserver kube-controller-manager; do
  image "$registry/$component:$kube_version" "$cp_bin/$component" scratch
done
image "$registry/kube-scheduler:$kube_version" "$node_bin/kube-scheduler" scratch
image "$registry/kube-proxy:$kube_version" "$node_bin/kube-proxy" "$base_image"

# The names kubeadm and kind ask for.
required=$("$kind_bin/kubeadm" config images list --kubernetes-version "$kube_version")
etcd_name=$(grep '/etcd:' <<<"$required")
coredns_name=$(grep '/coredns' <<<"$required")
pause_name=$(sed -nE 's/^\s*sandbox_image = "(.*)"/\1/p' "$kind_module/images/base/files/etc/containerd/config.toml")
kindnetd_name=$(sed -nE 's/^const kindnetdImage = "(.*)"/\1/p' "$kind_module/pkg/build/nodeimage/const_cni.go")
provisioner_name=$(sed -nE 's/^const storageProvisionerImage = "(.*)"/\1/p' "$kind_module/pkg/build/nodeimage/const_storage.go")
helper_name=$(sed -nE 's/^const storageHelperImage = "(.*)"/\1/p' "$kind_module/pkg/build/nodeimage/const_storage.go")
for name in etcd_name coredns_name pause_name kindnetd_name provisioner_name helper_name; do
  [ -n "${!name}" ] || { log "could not find the $name kind's build asks for"; exit 1; }
done
image "$etcd_name" "$cp_bin/etcd" scratch
image "$coredns_name" "$kind_bin/coredns" scratch /usr/local/bin/coredns
image "$pause_name" "$node_bin/pause" scratch /usr/local/bin/pause
docker tag "$base_image" "$provisioner_name"
docker tag "$base_image" "$helper_name"
cat >"$work/kindnetd" <<'EOF'
#!/bin/sh
# kindnetd stand-in (test/e2e/kind/node-image.sh): the node's CNI configuration, then nothing.
set -eu
cat >/etc/cni/net.d/.10-kindnet.conflist <<CONF
{ "cniVersion": "0.4.0", "name": "kindnet", "plugins": [
  { "type": "ptp", "ipMasq": false, "mtu": 1500,
    "ipam": { "type": "host-local", "dataDir": "/run/cni-ipam-state",
              "routes": [{ "dst": "0.0.0.0/0" }], "ranges": [[{ "subnet": "$POD_SUBNET" }]] } },
  { "type": "portmap", "capabilities": { "portMappings": true } } ] }
CONF
mv /etc/cni/net.d/.10-kindnet.conflist /etc/cni/net.d/10-kindnet.conflist
exec sleep infinity
EOF
chmod 0755 "$work/kindnetd"
image "$kindnetd_name" "$work/kindnetd" "$base_image" /usr/local/bin/kindnetd

log "Kubernetes server tarball"
server="$work/tarball/kubernetes"
mkdir -p "$server/server/bin"
echo "$kube_version" >"$server/version"
cp "$kind_bin/kubeadm" "$node_bin/kubelet" "$cp_bin/kubectl" "$server/server/bin/"
for component in kube-apiserver kube-controller-manager kube-scheduler; do
  docker save -o "$server/server/bin/$component.tar" "$registry/$component:$kube_version"
done
# kube-proxy.tar: kube-proxy and every image kind would otherwise fetch, its `repositories` file first.
mkdir "$work/proxy"
docker save "$registry/kube-proxy:$kube_version" "$etcd_name" "$coredns_name" "$pause_name" \
  "$kindnetd_name" "$provisioner_name" "$helper_name" | tar -C "$work/proxy" -xf -
# Docker writes docker.io's names short (kindest/kindnetd); kind compares them in full.
# shellcheck disable=SC2016 # jq's, not the shell's
full='def full: if (split("/")[0] | test("[.:]")) and contains("/") then . elif contains("/") then "docker.io/" + . else "docker.io/library/" + . end;'
jq -c "$full with_entries(.key |= full)" "$work/proxy/repositories" >"$work/repositories" && mv "$work/repositories" "$work/proxy/repositories"
jq -c "$full map(.RepoTags |= map(full))" "$work/proxy/manifest.json" >"$work/manifest.json" && mv "$work/manifest.json" "$work/proxy/manifest.json"
(cd "$work/proxy" && tar -cf "$server/server/bin/kube-proxy.tar" repositories $(ls | grep -vx repositories))
rm -rf "$work/proxy"
# gzip -1: kind reads only gzipped tarballs; the images in it are the bulk and compress little.
tar -C "$work/tarball" -cf - kubernetes | gzip -1 >"$work/kubernetes-server-linux-amd64.tar.gz"
rm -rf "$work/tarball"

log "kind build node-image $node_image"
# kind extracts the tarball under TMPDIR and leaves it there: the work folder, removed on exit.
TMPDIR="$work" "$kind_bin/kind" build node-image --type file --base-image "$base_image" \
  --image "$node_image-kind" "$work/kubernetes-server-linux-amd64.tar.gz" >"$work/kind-build.log" 2>&1 \
  || { grep -v '^Importing' "$work/kind-build.log" | tail -30 >&2; exit 1; }
# No storage manifest: no local-path-provisioner Deployment (above).
printf 'FROM %s\nRUN rm /kind/manifests/default-storage.yaml\n' "$node_image-kind" | docker build -q -t "$node_image" - >/dev/null
docker rmi "$node_image-kind" >/dev/null
# The component images were only material for the tarball.
docker rmi -f "$registry/kube-apiserver:$kube_version" "$registry/kube-controller-manager:$kube_version" \
  "$registry/kube-scheduler:$kube_version" "$registry/kube-proxy:$kube_version" "$etcd_name" "$coredns_name" \
  "$pause_name" "$kindnetd_name" "$provisioner_name" "$helper_name" >/dev/null
log "node image $node_image in $(( $(date +%s) - start ))s"
echo "$node_image"
