#!/usr/bin/env bash
# The kind base image (kindest/base) made on this machine, for node-image.sh. Two steps:
#
#   test/e2e/kind/base-image.sh rootfs <kind-bin>   the base rootfs: Debian (mmdebstrap) with kind's
#                                                   recipe applied, a tar in .cache/kind; needs
#                                                   Debian's repository, no Docker engine
#   test/e2e/kind/base-image.sh <kind-bin>          the base image in the Docker engine `docker`
#                                                   reaches: that tar imported; prints its name
#
# Debian bookworm from Debian's apt repository with the packages of kind's base image recipe
# (images/base/Dockerfile in the kind module), and its files (entrypoint, systemd units, containerd
# configuration). containerd and crictl are built from their Go modules (build.sh), runc and the
# CNI plugins are Debian's (kind builds them from Go modules too).
#
# The rootfs step also writes the userland kube-proxy's image needs from that rootfs (iptables and
# the libraries it loads), a layer of its own for node-image.sh: the image holds that and the
# kube-proxy binary, not a copy of the whole base (docs/testing.md, "On kind").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
log() { echo "base-image.sh: $*" >&2; }
start=$(date +%s)

mode=image
if [ "$1" = rootfs ]; then mode=rootfs; shift; fi
kind_bin=$1
kind_module=$(cd "$here/tools" && GOTOOLCHAIN=local GOFLAGS= go env GOMODCACHE)/sigs.k8s.io/kind@$("$kind_bin/kind" version | awk '{ print $2 }')
[ -d "$kind_module/images/base/files" ] || { log "kind's module source is not in $kind_module"; exit 1; }

# kind's package list (images/base/Dockerfile) less the storage test tools (nfs-common,
# open-iscsi), plus what its build stages add: runc and the CNI plugins. Not Debian's containerd:
# the node runs containerd 2 from its Go module (below), and Debian's (1.6, 100 MB) would only be
# carried along in every copy of the base.
packages=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod
packages+=,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,runc,containernetworking-plugins,fuse-overlayfs
# Keyed by the list, this script, kind's base files and the binaries folder (its name carries the
# stamp of its programs: containerd, crictl).
stamp=$( (echo "$packages $(basename "$(dirname "$kind_bin")")"; cat "$here/base-image.sh"
  cd "$kind_module/images/base" && find files Dockerfile -type f | sort | xargs cat) | sha256sum | cut -c1-16)
rootfs_tar="$root/.cache/kind/base-rootfs-$stamp.tar"
iptables_layer="$root/.cache/kind/base-rootfs-$stamp.iptables.tar"
base_image=localhost/kind-base:$stamp

if [ "$mode" = image ]; then
  [ -f "$rootfs_tar" ] || { log "no $rootfs_tar: run base-image.sh rootfs first"; exit 1; }
  if docker image inspect "$base_image" >/dev/null 2>&1; then echo "$base_image"; exit 0; fi
  # kind's base image metadata (images/base/Dockerfile): systemd learns it runs in a container,
  # SIGRTMIN+3 stops it. docker import takes no STOPSIGNAL: a one-line build adds it (no layer).
  docker import --change 'ENV container=docker' --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    "$rootfs_tar" "$base_image-rootfs" >/dev/null
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$base_image-rootfs" | DOCKER_BUILDKIT=0 docker build -q -t "$base_image" - >/dev/null
  docker rmi "$base_image-rootfs" >/dev/null
  log "imported $base_image in $(( $(date +%s) - start ))s"
  echo "$base_image"
  exit 0
fi

[ -f "$rootfs_tar" ] && [ -f "$iptables_layer" ] && exit 0
log "base rootfs: mmdebstrap bookworm with kind's base packages, then kind's recipe"
rootfs=$(mktemp -d "$root/.cache/kind/rootfs.XXXXXX")
trap 'rm -rf "$rootfs" "$rootfs.log" "$rootfs_tar.partial" "$iptables_layer.partial"' EXIT
# mmdebstrap, not debootstrap: one apt run fetches every package in parallel and one dpkg run
# unpacks and configures them, where debootstrap fetches one by one and runs dpkg per stage
# (docs/testing.md, "On kind"). minbase is debootstrap's minbase: the Essential packages and
# apt, plus the list; the merged-usr hooks make /bin, /lib and /sbin links into /usr as
# debootstrap does (without them apt would pick usrmerge, and perl with it). In a private mount
# namespace: it mounts /proc, /sys and /dev in the rootfs.
unshare --mount --propagation private mmdebstrap --mode=root --variant=minbase \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="$packages" \
  bookworm "$rootfs" http://deb.debian.org/debian >"$rootfs.log" 2>&1 \
  || { tail -20 "$rootfs.log" >&2; exit 1; }
log "(mmdebstrap: $(( $(date +%s) - start ))s)"
rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/var/cache/apt/*.bin \
  "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log

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
# units and scripts look for them; of the plugins, those kind's base image has (the others are
# 25 MB no pod here uses).
install -m 0755 "$kind_bin/containerd" "$kind_bin/ctr" "$kind_bin/containerd-shim-runc-v2" "$rootfs/usr/local/bin/"
ln -sf /usr/sbin/runc "$rootfs/usr/local/sbin/runc"
cni_plugins=(host-local loopback ptp portmap bridge)
find "$rootfs/usr/lib/cni" -type f $(printf ' ! -name %s' "${cni_plugins[@]}") -delete
for p in "${cni_plugins[@]}"; do ln -sf "/usr/lib/cni/$p" "$rootfs/opt/cni/bin/$p"; done
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

# kube-proxy's userland (its image's first layer): iptables in Debian's default (nft) mode, as the
# whole base gave it before, with its extensions, the libraries they load (ldd) and netbase's
# protocol names. Paths as the rootfs resolves them, with every parent folder and link on the way.
chroot "$rootfs" bash -euo pipefail -c '
  packages="iptables libip4tc2 libip6tc2 libxtables12 libmnl0 libnetfilter-conntrack3 libnfnetlink0 libnftnl11 netbase"
  {
    for p in $packages; do cat /var/lib/dpkg/info/$p.list /var/lib/dpkg/info/$p:amd64.list 2>/dev/null || true; done \
      | grep -v -e "^/usr/share/doc" -e "^/usr/share/man" -e "^/\.$"
    ls -d /usr/sbin/*tables* /etc/alternatives/*tables*
    echo /etc/ld.so.cache
    for elf in /usr/sbin/xtables-nft-multi /usr/lib/x86_64-linux-gnu/xtables/*.so; do
      ldd "$elf" | awk "/=> \\// { print \$3 } /^\\t\\/.*ld-linux/ { print \$1 }"
    done
  } | sort -u | while read -r path; do
    [ -e "$path" ] || [ -L "$path" ] || continue
    # The entry itself (a link stays a link) under its real folder, and what a link points to.
    dir=$(realpath "$(dirname "$path")")
    echo "${dir%/}/$(basename "$path")"
    if [ -L "$path" ]; then realpath "$path"; fi
    # The merged-usr links (/lib, /lib64, /bin, /sbin) a path may start with.
    first=/$(echo "$path" | cut -d/ -f2)
    if [ -L "$first" ]; then echo "$first"; fi
  done | sort -u | while read -r path; do
    # Parent folders, so the layer makes them as the rootfs has them.
    dir=$(dirname "$path")
    while [ "$dir" != / ]; do echo "$dir"; dir=$(dirname "$dir"); done
    echo "$path"
  done | sort -u | sed "s,^/,,"
' >"$rootfs.iptables-files"
tar -C "$rootfs" --numeric-owner --no-recursion -T "$rootfs.iptables-files" -cf "$iptables_layer.partial"
rm -f "$rootfs.iptables-files"
log "(recipe and kube-proxy's userland: $(( $(date +%s) - start ))s)"

tar -C "$rootfs" --numeric-owner -cf "$rootfs_tar.partial" .
# Rootfs tars of earlier stamps are not needed again.
find "$root/.cache/kind" -maxdepth 1 -name 'base-rootfs-*.tar' ! -name "base-rootfs-$stamp.*" -delete
mv "$iptables_layer.partial" "$iptables_layer"
mv "$rootfs_tar.partial" "$rootfs_tar"
log "base rootfs $(basename "$rootfs_tar") ($(du -m "$rootfs_tar" | cut -f1) MB) in $(( $(date +%s) - start ))s"
