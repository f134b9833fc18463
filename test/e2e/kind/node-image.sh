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
#
# Each image is what its program needs and nothing more: one layer holding a static Go binary
# (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, CoreDNS, pause, the kindnetd
# stand-in of tools/kindnetd), and for kube-proxy a first layer with iptables and the libraries it
# loads (base-image.sh takes them from the base rootfs). The archives are written here in the
# format `docker save` writes (manifest.json, a config and a layer tar per image), without an
# image build or a save, and the tarball is gzipped without compression (kind reads only gzip, and
# unpacks it on the same disk a moment later: compressing 23 s, a copy 1-2 s). kind's default storage
# (local-path-provisioner, a Deployment kind installs from /kind/manifests/default-storage.yaml)
# is left out: no scenario uses a PersistentVolume, and it was the second-longest cold Go build.
# kind's build still asks for its two images, so both names are given to the pause image (nothing
# to fetch, no layer added), and the manifest is removed from the node image: `kind create
# cluster` then installs its fallback StorageClass (provisioner kubernetes.io/host-path), which
# provisions nothing, so a PersistentVolumeClaim stays Pending and no pod runs the stand-in.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
log() { echo "node-image.sh: $*" >&2; }
export DOCKER_BUILDKIT=0
start=$(date +%s)
step_start=$start
step() { local now; now=$(date +%s); log "($1: $(( now - step_start ))s)"; step_start=$now; }

kind_bin=$1 cp_bin=$2 node_bin=$3
base_image=$(bash "$here/base-image.sh" "$kind_bin")
iptables_layer="$root/.cache/kind/base-rootfs-${base_image##*:}.iptables.tar"
[ -f "$iptables_layer" ] || { log "no $iptables_layer: run base-image.sh rootfs first"; exit 1; }
kube_version=$("$kind_bin/kubeadm" version -o short)
kind_module=$(cd "$here/tools" && GOTOOLCHAIN=local GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/kind@$("$kind_bin/kind" version | awk '{ print $2 }')
# The node image: keyed by the base, this script and every binary folder (their names carry their
# own stamps).
node_stamp=$( (echo "$base_image $(basename "$(dirname "$kind_bin")") $(basename "$(dirname "$cp_bin")") $(basename "$(dirname "$node_bin")")"
  cat "$here/node-image.sh") | sha256sum | cut -c1-16)
node_image=localhost/kind-node:$kube_version-$node_stamp
if docker image inspect "$node_image" >/dev/null 2>&1; then echo "$node_image"; exit 0; fi
step "base image"

work=$(mktemp -d "$root/.cache/kind/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A layer holding one program: <binary> at /usr/local/bin/<its name>, owned by root. Prints the
# layer tar's path.
binary_layer() {
  local binary=$1 layer
  layer="$work/layers/$(basename "$binary").tar"
  mkdir -p "$work/layers" "$work/tree/usr/local/bin"
  tar -C "$work/tree" --owner=0 --group=0 --numeric-owner --mtime=@0 --no-recursion -cf "$layer" usr usr/local usr/local/bin
  tar -C "$(dirname "$binary")" --owner=0 --group=0 --numeric-owner --mtime=@0 --mode=0755 \
    --transform 's,^,usr/local/bin/,' -rf "$layer" "$(basename "$binary")"
  echo "$layer"
}

# An image into the archive folder <dir> (later tarred into one archive by archive()):
#   add_image <dir> <name[,name...]> <entrypoint JSON array or ""> <layer tar>...
# Its config (PATH, entrypoint, the layers' digests), each layer under its digest (a layer two
# images share is there once), and its entries in manifest.json and repositories.
add_image() {
  local dir=$1 names=$2 entrypoint=$3 layer digest diff_ids=() layers=() config config_digest top
  shift 3
  mkdir -p "$dir"
  for layer in "$@"; do
    digest=$(sha256sum "$layer" | cut -d' ' -f1)
    if [ ! -f "$dir/$digest/layer.tar" ]; then mkdir -p "$dir/$digest" && mv "$layer" "$dir/$digest/layer.tar"; fi
    diff_ids+=("sha256:$digest") layers+=("$digest/layer.tar") top=$digest
  done
  config=$(jq -cn --arg entrypoint "$entrypoint" --args '{
      architecture: "amd64", os: "linux",
      config: ({ Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] }
        + (if $entrypoint == "" then {} else { Entrypoint: ($entrypoint | fromjson) } end)),
      rootfs: { type: "layers", diff_ids: $ARGS.positional } }' "${diff_ids[@]}")
  config_digest=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" >"$dir/$config_digest.json"
  [ -f "$dir/manifest.json" ] || echo '[]' >"$dir/manifest.json"
  [ -f "$dir/repositories" ] || echo '{}' >"$dir/repositories"
  jq -c --arg config "$config_digest.json" --arg names "$names" --args \
    '. + [{ Config: $config, RepoTags: ($names | split(",")), Layers: $ARGS.positional }]' "${layers[@]}" \
    <"$dir/manifest.json" >"$dir/manifest.next" && mv "$dir/manifest.next" "$dir/manifest.json"
  # repositories: { repository: { tag: top layer } }, names in full (kind compares them so).
  jq -c --arg names "$names" --arg top "$top" \
    'reduce ($names | split(",") | .[] | capture("^(?<repo>.+):(?<tag>[^:/]+)$")) as $n (.; .[$n.repo][$n.tag] = $top)' \
    <"$dir/repositories" >"$dir/repositories.next" && mv "$dir/repositories.next" "$dir/repositories"
}

# archive <dir> <archive>: the folder as one tar, `repositories` first (kind reads the first of it
# or manifest.json); links resolved, since kind's extraction takes every entry for a file.
archive() {
  (cd "$1" && tar --hard-dereference --owner=0 --group=0 --numeric-owner -cf "$2" repositories manifest.json $(ls | grep -vx -e repositories -e manifest.json))
  rm -rf "$1"
}

log "images (Kubernetes $kube_version)"
registry=registry.k8s.io
server="$work/tarball/kubernetes"
mkdir -p "$server/server/bin"
for component in kube-apiserver kube-controller-manager; do
  add_image "$work/$component" "$registry/$component:$kube_version" "" "$(binary_layer "$cp_bin/$component")"
  archive "$work/$component" "$server/server/bin/$component.tar"
done
add_image "$work/kube-scheduler" "$registry/kube-scheduler:$kube_version" "" "$(binary_layer "$node_bin/kube-scheduler")"
archive "$work/kube-scheduler" "$server/server/bin/kube-scheduler.tar"

# The names kubeadm and kind ask for.
required=$("$kind_bin/kubeadm" config images list --kubernetes-version "$kube_version" 2>/dev/null)
etcd_name=$(grep '/etcd:' <<<"$required")
coredns_name=$(grep '/coredns' <<<"$required")
pause_name=$(sed -nE 's/^\s*sandbox_image = "(.*)"/\1/p' "$kind_module/images/base/files/etc/containerd/config.toml")
kindnetd_name=$(sed -nE 's/^const kindnetdImage = "(.*)"/\1/p' "$kind_module/pkg/build/nodeimage/const_cni.go")
provisioner_name=$(sed -nE 's/^const storageProvisionerImage = "(.*)"/\1/p' "$kind_module/pkg/build/nodeimage/const_storage.go")
helper_name=$(sed -nE 's/^const storageHelperImage = "(.*)"/\1/p' "$kind_module/pkg/build/nodeimage/const_storage.go")
for name in etcd_name coredns_name pause_name kindnetd_name provisioner_name helper_name; do
  [ -n "${!name}" ] || { log "could not find the $name kind's build asks for"; exit 1; }
done
# Full names: docker.io's as kind compares them (kindest/kindnetd is docker.io/kindest/kindnetd).
full() { case "$1" in *.*/*|*:*/*|localhost/*) echo "$1" ;; */*) echo "docker.io/$1" ;; *) echo "docker.io/library/$1" ;; esac; }

# kube-proxy.tar: kube-proxy and every image kind would otherwise fetch.
proxy="$work/kube-proxy"
cp "$iptables_layer" "$work/iptables.tar"
add_image "$proxy" "$registry/kube-proxy:$kube_version" "" "$work/iptables.tar" "$(binary_layer "$node_bin/kube-proxy")"
add_image "$proxy" "$(full "$etcd_name")" "" "$(binary_layer "$cp_bin/etcd")"
add_image "$proxy" "$(full "$coredns_name")" '["/usr/local/bin/coredns"]' "$(binary_layer "$kind_bin/coredns")"
add_image "$proxy" "$(full "$pause_name"),$(full "$provisioner_name"),$(full "$helper_name")" '["/usr/local/bin/pause"]' \
  "$(binary_layer "$node_bin/pause")"
add_image "$proxy" "$(full "$kindnetd_name")" '["/usr/local/bin/kindnetd"]' "$(binary_layer "$kind_bin/kindnetd")"
archive "$proxy" "$server/server/bin/kube-proxy.tar"
step "image archives"

log "Kubernetes server tarball"
echo "$kube_version" >"$server/version"
for binary in "$kind_bin/kubeadm" "$node_bin/kubelet" "$cp_bin/kubectl"; do
  ln -f "$binary" "$server/server/bin/" 2>/dev/null || cp "$binary" "$server/server/bin/"
done
# gzip without compression (kind reads only gzip): node's zlib at level 0.
tar -C "$work/tarball" --hard-dereference -cf - kubernetes \
  | node -e 'process.stdin.pipe(require("node:zlib").createGzip({ level: 0 })).pipe(process.stdout)' \
  >"$work/kubernetes-server-linux-amd64.tar.gz"
rm -rf "$work/tarball"
step "tarball"

log "kind build node-image $node_image"
# kind's build runs `docker pull` of its base image first, and when no registry answers retries it
# four times, 1+2+3+4 s apart, before going on with the image it has. A `docker` in front of the
# engine's answers a pull of an image the engine already holds, as a pull that finds it up to
# date would; every other command goes to docker itself.
mkdir -p "$work/docker-shim"
cat >"$work/docker-shim/docker" <<EOF
#!/bin/sh
if [ "\$1" = pull ]; then
  for image; do :; done
  "$(command -v docker)" image inspect "\$image" >/dev/null 2>&1 && exit 0
fi
exec "$(command -v docker)" "\$@"
EOF
chmod 0755 "$work/docker-shim/docker"
stamped() { local t0 line; t0=$(date +%s); while IFS= read -r line; do printf '[%3ss] %s\n' "$(( $(date +%s) - t0 ))" "$line"; done; }
# kind extracts the tarball under TMPDIR and leaves it there: the work folder, removed on exit.
PATH="$work/docker-shim:$PATH" TMPDIR="$work" "$kind_bin/kind" build node-image --type file --base-image "$base_image" \
  --image "$node_image-kind" "$work/kubernetes-server-linux-amd64.tar.gz" 2>&1 | stamped >"$work/kind-build.log" \
  || { grep -v 'Importing' "$work/kind-build.log" | tail -30 >&2; exit 1; }
grep -v -e 'Importing' -e 'DEPRECATION' -e 'saved' -e 'application/vnd' "$work/kind-build.log" >&2
step "kind build node-image"
# No storage manifest: no local-path-provisioner Deployment (above).
printf 'FROM %s\nRUN rm /kind/manifests/default-storage.yaml\n' "$node_image-kind" | docker build -q -t "$node_image" - >/dev/null
docker rmi "$node_image-kind" >/dev/null
step "storage manifest removed"
log "node image $node_image in $(( $(date +%s) - start ))s"
echo "$node_image"
