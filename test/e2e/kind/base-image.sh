#!/usr/bin/env bash
# The kind base image (kindest/base) made on this machine, for node-image.sh; prints its name. Run
# where `docker` reaches a Docker engine, except `rootfs`, which needs Debian's repository.
#
#   test/e2e/kind/base-image.sh rootfs          the Debian rootfs (mmdebstrap), cached in .cache/kind
#   test/e2e/kind/base-image.sh <kind-bin>      the base image: kind's recipe on that rootfs
#
# Debian bookworm from Debian's apt repository with the packages of kind's base image recipe
# (images/base/Dockerfile in the kind module), and its files (entrypoint, systemd units, containerd
# configuration). containerd and crictl are built from their Go modules (build.sh), runc and the
# CNI plugins are Debian's (kind builds them from Go modules too).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
log() { echo "base-image.sh: $*" >&2; }
start=$(date +%s)

# kind's package list (images/base/Dockerfile) less the storage test tools (nfs-common,
# open-iscsi), plus what its build stages add: containerd, runc, the CNI plugins. The rootfs is
# cached apart, keyed by this list and the tool that makes it.
packages=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod
packages+=,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins,fuse-overlayfs
rootfs_tar="$root/.cache/kind/mmdebstrap-bookworm-$(echo "$packages" | sha256sum | cut -c1-16).tar"

if [ "$1" = rootfs ]; then
  [ -f "$rootfs_tar" ] && exit 0
  log "base rootfs: mmdebstrap bookworm with kind's base packages"
  rootfs=$(mktemp -d "$root/.cache/kind/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  # mmdebstrap, not debootstrap: one apt run fetches every package in parallel and one dpkg run
  # unpacks and configures them, where debootstrap fetches one by one and runs dpkg per stage
  # (docs/testing.md, "On kind"). minbase is debootstrap's minbase: the Essential packages and
  # apt, plus the list; the merged-usr hooks make /bin, /lib and /sbin links into /usr as
  # debootstrap does (without them apt would pick usrmerge, and perl with it). In a private mount
  # namespace: it mounts /proc, /sys and /dev in the rootfs.
  unshare --mount --propagation private mmdebstrap --mode=root --variant=minbase \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="$packages" \
    bookworm "$rootfs" http://deb.debian.org/debian >"$rootfs.log" 2>&1 \
    || { tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
  tar -C "$rootfs" --numeric-owner -cf "$rootfs_tar.partial" .
  mv "$rootfs_tar.partial" "$rootfs_tar"
  log "mmdebstrap in $(( $(date +%s) - start ))s"
  exit 0
fi

kind_bin=$1
[ -f "$rootfs_tar" ] || { log "no $rootfs_tar: run base-image.sh rootfs first"; exit 1; }
kind_module=$(cd "$here/tools" && GOTOOLCHAIN=local GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/kind@$("$kind_bin/kind" version | awk '{ print $2 }')
[ -d "$kind_module/images/base/files" ] || { log "kind's module source is not in $kind_module"; exit 1; }
# Keyed by the rootfs, this script, kind's base files and crictl.
base_stamp=$( (echo "$rootfs_tar $kind_bin"; cat "$here/base-image.sh"; cd "$kind_module/images/base" && find files Dockerfile -type f | sort | xargs cat) | sha256sum | cut -c1-16)
base_image=localhost/kind-base:$base_stamp
if docker image inspect "$base_image" >/dev/null 2>&1; then echo "$base_image"; exit 0; fi

work=$(mktemp -d "$root/.cache/kind/base.XXXXXX")
trap 'rm -rf "$work"' EXIT
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
find "$files/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "$rootfs/etc/systemd/system/" \;
install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$rootfs/etc/systemd/system/kubelet.service.d/"
# containerd 2 as kind's base has it, from its Go module (build.sh): Debian's 1.6 lacks `ctr info`,
# which kind's node image build waits with. runc and the CNI plugins are Debian's, where kind's
# units and scripts look for them.
install -m 0755 "$kind_bin/containerd" "$kind_bin/ctr" "$kind_bin/containerd-shim-runc-v2" "$rootfs/usr/local/bin/"
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
# (docker import takes no STOPSIGNAL: a one-line build adds it.)
tar -C "$rootfs" --numeric-owner -c . | docker import - "$base_image-rootfs" >/dev/null
printf 'FROM %s\nENV container=docker\nSTOPSIGNAL SIGRTMIN+3\nENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]\n' \
  "$base_image-rootfs" | docker build -q -t "$base_image" - >/dev/null
docker rmi "$base_image-rootfs" >/dev/null
rm -rf "$rootfs"
log "built $base_image in $(( $(date +%s) - start ))s"
echo "$base_image"
