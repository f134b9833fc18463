#!/usr/bin/env bash
# Makes a kind node image on this machine, with no container registry, and prints its name. Run
# where `docker` reaches a Docker engine (session.sh: the run's own dockerd).
#
#   test/e2e/kind/node-image.sh rootfs                                  (needs Debian's repository)
#   test/e2e/kind/node-image.sh <kind-bin> <controlplane-bin> <node-bin>  (needs no network)
#
# kind's own `kind build node-image --type file <kubernetes-server tarball>` does the build,
# unchanged. What it would pull is made here:
# - the base image (kindest/base): Debian bookworm from Debian's apt repository (debootstrap), with
#   the packages and the files of kind's base image recipe (images/base in the kind module:
#   entrypoint, systemd units, containerd configuration); containerd, runc and the CNI plugins are
#   Debian's, crictl is built from its Go module;
# - the Kubernetes server tarball: kubeadm, kubelet and kubectl, and images of kube-apiserver,
#   kube-controller-manager, kube-scheduler and kube-proxy, all from the binaries the other suites
#   build from k8s.io/kubernetes;
# - the images kind's build would fetch from registries (etcd, CoreDNS, pause, kindnetd,
#   local-path-provisioner and its helper), under the names kubeadm and kind ask for. kind fetches
#   only the images its Kubernetes tarball does not carry, and it reads which images an archive
#   carries from the archive's `repositories` file when that comes first: kube-proxy.tar carries
#   them all, so nothing is fetched.
# The images are made from Go binaries (CoreDNS, local-path-provisioner, etcd, pause) or from the
# base rootfs (kube-proxy and the local-path helper need a shell and iptables). kindnetd is not a
# Go module the module proxy serves: its stand-in writes a ptp + host-local CNI configuration for
# the cluster's pod subnet, which serves a one-node cluster (the e2e's) and no more.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
log() { echo "node-image.sh: $*" >&2; }
export DOCKER_BUILDKIT=0
start=$(date +%s)

# kind's package list (images/base/Dockerfile) less the storage test tools (nfs-common,
# open-iscsi), plus what its build stages add: containerd, runc, the CNI plugins. Debootstrap's
# output is cached apart, keyed by this list: the slow part (7-8 min on 2 busy cores).
packages=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod
packages+=,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins,fuse-overlayfs
rootfs_tar="$root/.cache/kind/debootstrap-bookworm-$(echo "$packages" | sha256sum | cut -c1-16).tar"

if [ "$1" = rootfs ]; then
  [ -f "$rootfs_tar" ] && exit 0
  log "base rootfs: debootstrap bookworm with kind's base packages"
  rootfs=$(mktemp -d "$root/.cache/kind/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  # In a private mount namespace: debootstrap mounts /proc and /sys in the rootfs.
  unshare --mount --propagation private debootstrap --variant=minbase --include="$packages" \
    bookworm "$rootfs" http://deb.debian.org/debian >"$rootfs.log" 2>&1 \
    || { tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
  tar -C "$rootfs" --numeric-owner -cf "$rootfs_tar.partial" .
  mv "$rootfs_tar.partial" "$rootfs_tar"
  log "debootstrap in $(( $(date +%s) - start ))s"
  exit 0
fi

kind_bin=$1 cp_bin=$2 node_bin=$3
[ -f "$rootfs_tar" ] || { log "no $rootfs_tar: run node-image.sh rootfs first"; exit 1; }
kube_version=$("$kind_bin/kubeadm" version -o short)
kind_module=$(cd "$here/tools" && GOTOOLCHAIN=local GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/kind@$("$kind_bin/kind" version | awk '{ print $2 }')
[ -d "$kind_module/images/base/files" ] || { log "kind's module source is not in $kind_module"; exit 1; }

# The base image: keyed by the rootfs, this script and kind's base files.
base_stamp=$( (echo "$rootfs_tar"; cat "$here/node-image.sh"; cd "$kind_module/images/base" && find files Dockerfile -type f | sort | xargs cat) | sha256sum | cut -c1-16)
base_image=localhost/kind-base:$base_stamp
# The node image: keyed by the base and every binary folder (their names carry their own stamps).
node_stamp=$(echo "$base_stamp $kind_bin $cp_bin $node_bin" | sha256sum | cut -c1-16)
node_image=localhost/kind-node:$kube_version-$node_stamp
if docker image inspect "$node_image" >/dev/null 2>&1; then echo "$node_image"; exit 0; fi

work=$(mktemp -d "$root/.cache/kind/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! docker image inspect "$base_image" >/dev/null 2>&1; then
  rootfs="$work/rootfs"
  mkdir -p "$rootfs"
  tar -C "$rootfs" --numeric-owner -xf "$rootfs_tar"
  log "base image $base_image: kind's base recipe on the rootfs"
  files="$kind_module/images/base/files"
  install -m 0755 "$files"/usr/local/bin/* "$rootfs/usr/local/bin/"
  mkdir -p "$rootfs/kind/bin" "$rootfs/etc/containerd" "$rootfs/etc/default" "$rootfs/etc/sysctl.d" \
    "$rootfs/etc/systemd/system/kubelet.service.d" "$rootfs/etc/kubernetes/manifests" "$rootfs/opt/cni/bin"
  install -m 0644 "$files/kind/README.txt" "$rootfs/kind/"
  install -m 0755 "$files"/kind/bin/* "$rootfs/kind/bin/"
  install -m 0644 "$files/etc/crictl.yaml" "$rootfs/etc/"
  install -m 0644 "$files"/etc/containerd/* "$rootfs/etc/containerd/"
  install -m 0644 "$files"/etc/default/* "$rootfs/etc/default/"
  install -m 0644 "$files"/etc/sysctl.d/* "$rootfs/etc/sysctl.d/"
  install -m 0644 "$files"/etc/systemd/system/*.* "$rootfs/etc/systemd/system/"
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$rootfs/etc/systemd/system/kubelet.service.d/"
  # kind's units and scripts expect its build's paths: Debian's binaries linked there.
  for b in containerd ctr containerd-shim-runc-v2; do ln -sf "/usr/bin/$b" "$rootfs/usr/local/bin/$b"; done
  ln -sf /usr/sbin/runc "$rootfs/usr/local/sbin/runc"
  for p in host-local loopback ptp portmap bridge; do ln -sf "/usr/lib/cni/$p" "$rootfs/opt/cni/bin/$p"; done
  install -m 0755 "$kind_bin/crictl" "$rootfs/usr/local/bin/crictl"
  # This machine's root lacks CAP_SYS_RESOURCE: runc cannot lower a container's oom_score_adj
  # below its own, so containerd must not ask it to (kind sets this itself for rootless nodes).
  sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$rootfs/etc/containerd/config.toml"
  # A privileged node writes /proc/sys: Debian's defaults for a whole machine (kernel.pid_max,
  # fs.protected_*) are host-wide sysctls, not the node's to set. kind's own (network) stay.
  rm -f "$rootfs"/usr/lib/sysctl.d/50-pid-max.conf "$rootfs"/usr/lib/sysctl.d/99-protect-links.conf
  # The rest of kind's recipe, as its Dockerfile runs it.
  chroot "$rootfs" sh -euc '
    find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
    rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
    echo ReadKMsg=no >>/etc/systemd/journald.conf
    ln -sf /usr/lib/systemd/systemd /sbin/init
    systemctl enable kubelet.service containerd.service undo-mount-hacks.service 2>/dev/null
    systemctl mask systemd-binfmt.service 2>/dev/null
    ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" \
      | jq "del(.process.rlimits)" >/etc/containerd/cri-base.json
  '
  # kind's base image metadata (images/base/Dockerfile): systemd learns it runs in a container,
  # SIGRTMIN+3 stops it.
  tar -C "$rootfs" --numeric-owner -c . | docker import -c 'ENV container=docker' -c 'STOPSIGNAL SIGRTMIN+3' \
    -c 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "$base_image" >/dev/null
  rm -rf "$rootfs"
fi

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
image "$provisioner_name" "$kind_bin/local-path-provisioner" scratch /usr/local/bin/local-path-provisioner
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
(cd "$work/proxy" && tar -cf "$server/server/bin/kube-proxy.tar" repositories $(ls | grep -vx repositories))
rm -rf "$work/proxy"
tar -C "$work/tarball" -czf "$work/kubernetes-server-linux-amd64.tar.gz" kubernetes
rm -rf "$work/tarball"

log "kind build node-image $node_image"
# kind extracts the tarball under TMPDIR and leaves it there: the work folder, removed on exit.
TMPDIR="$work" "$kind_bin/kind" build node-image --type file --base-image "$base_image" \
  --image "$node_image" "$work/kubernetes-server-linux-amd64.tar.gz" >&2
# The component images were only material for the tarball.
docker rmi -f "$registry/kube-apiserver:$kube_version" "$registry/kube-controller-manager:$kube_version" \
  "$registry/kube-scheduler:$kube_version" "$registry/kube-proxy:$kube_version" "$etcd_name" "$coredns_name" \
  "$pause_name" "$kindnetd_name" "$provisioner_name" "$helper_name" >/dev/null
log "node image $node_image in $(( $(date +%s) - start ))s"
echo "$node_image"
