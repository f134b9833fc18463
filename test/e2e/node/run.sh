#!/usr/bin/env bash
# `npm run e2e`: the operator as users run it, on a real Kubernetes node of this machine. Builds (or
# reuses) the node's binaries, the Dockerfile's base image stand-in where the real one cannot be
# had, and the operator image from the unchanged Dockerfile; starts etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet and kube-proxy inside private
# namespaces (session.sh); runs the scenarios of test/e2e/scenarios.sh; and checks the machine is
# left as it was found (machine-state.sh before and after).
#
# Skips, saying why, where it cannot run: not Linux, not root, a tool missing that apt-get cannot
# install. E2E_REQUIRE=1 (CI) turns a skip into a failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
started=$(date +%s)
log() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
skip() {
  echo "e2e SKIPPED: $*" >&2
  [ "${E2E_REQUIRE:-0}" = 1 ] && { echo "E2E_REQUIRE=1: a skip is a failure here" >&2; exit 1; }
  exit 0
}
phase_start=$started
phase() { local now; now=$(date +%s); echo "  ($1: $(( now - phase_start ))s)"; phase_start=$now; }

[ "$(uname -s)" = Linux ] || skip "not Linux: a real node needs Linux namespaces, cgroups and containerd (test/e2e/kind.sh runs the same scenarios where Docker is)"
[ "$(id -u)" = 0 ] || skip "not root: the node's kubelet, containerd and network namespace need root (test/e2e/kind.sh runs the same scenarios where Docker is)"
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || skip "Go is not on PATH (nor in /usr/local/go/bin): the node's components are built from Go modules"
command -v node >/dev/null || skip "node is not on PATH: run it through npm (npm run e2e) after npm ci"

# Debian packages: the container runtime, its network plugins and iptables for kube-proxy, buildah
# for the image and mmdebstrap for the base image stand-in.
packages=(containerd runc containernetworking-plugins iptables conntrack buildah mmdebstrap openssl iproute2 util-linux)
tools=(containerd ctr containerd-shim-runc-v2 runc /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback
       /usr/lib/cni/portmap iptables conntrack buildah mmdebstrap openssl ip unshare mount sysctl)
missing() { local t; for t in "${tools[@]}"; do command -v "$t" >/dev/null || [ -x "$t" ] || echo "$t"; done; }
if [ -n "$(missing)" ]; then
  if command -v apt-get >/dev/null && [ "${E2E_INSTALL_TOOLS:-1}" = 1 ]; then
    log "Installing ${packages[*]} (missing: $(missing | tr '\n' ' '))"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  fi
  [ -z "$(missing)" ] || skip "missing $(missing | tr '\n' ' ')(Debian packages: ${packages[*]})"
fi
phase tools

mkdir -p "$root/.cache/e2e"
scratch=$(mktemp -d "$root/.cache/e2e/scratch.XXXXXX")
# libmount records some mounts in /run/mount/utab (made on first use): this run's mounts are
# recorded in its scratch folder instead, so /run is left as it was.
export LIBMOUNT_UTAB="$scratch/utab"
state_before="$scratch.before"
# This run's cgroup subtree in every hierarchy, the kubelet's cgroupRoot; machine-state.sh leaves
# out other runs' subtrees (nko-e2e-*, and a plain /kubepods of other nodes), not this one's.
export E2E_CGROUP="nko-e2e-${scratch##*.}"
bash "$here/machine-state.sh" >"$state_before"
# Host-wide sysctls the kubelet rewrites at start (session.sh restores them once the node is Ready).
sysctl vm.overcommit_memory kernel.panic kernel.panic_on_oops >"$scratch.sysctls"
cp "$scratch.sysctls" "$scratch/sysctls.saved"

cleanup() {
  local status=$?
  set +e
  # The session's PID namespace is gone, and every process of it. What outlives a namespace:
  # cgroup directories the kubelet and runc made (child first), files buildah and runc write to
  # fixed host paths, the sysctls.
  # This run's cgroup subtrees, child first (every process in them died with the PID namespace).
  find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d -name "$E2E_CGROUP" 2>/dev/null \
    | while read -r tree; do find "$tree" -depth -type d -exec rmdir {} + 2>/dev/null; done
  for path in /var/lib/containers /etc/cni /run/runc; do
    grep -qx "$path" "$state_before" || rm -rf "$path"
  done
  sysctl -q -p "$scratch.sysctls" >/dev/null
  rm -rf "$scratch" "$scratch.sysctls"
  # The clean-machine check: everything machine-state.sh sees is as it was before, and no file or
  # folder of the system's trees was created, changed or had an entry removed since the e2e began
  # (the checkout, /tmp, /root and /home are not searched: caches and other work live there).
  find /etc /usr /opt /var /run /srv /boot -xdev -newer "$state_before" 2>/dev/null | head -20 >"$scratch.files"
  if [ -s "$scratch.files" ]; then
    echo "FAIL: files written outside the e2e's folders:" >&2
    cat "$scratch.files" >&2
    [ "$status" -eq 0 ] && status=1
  fi
  if ! diff -u "$state_before" <(bash "$here/machine-state.sh") >"$scratch.diff"; then
    echo "FAIL: the e2e left the machine changed (- before, + after):" >&2
    grep -E '^[-+][^-+]' "$scratch.diff" >&2
    [ "$status" -eq 0 ] && status=1
  else
    [ -s "$scratch.files" ] || echo "clean machine: sysctls, mounts, cgroups, network, paths and processes as before the e2e; no file written in /etc /usr /opt /var /run /srv /boot"
  fi
  rm -f "$state_before" "$scratch.diff" "$scratch.files"
  echo "e2e total $(( $(date +%s) - started ))s, exit $status"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# This run's cgroup subtree: the image build's containers (build/) and the node's pods (the
# kubelet's cgroupRoot) go there, apart from anything else on the machine.
for hierarchy in /sys/fs/cgroup/*/; do
  mkdir "$hierarchy$E2E_CGROUP"
  # cgroup v1 cpuset: a new cgroup starts with no CPUs and no memory nodes; its children copy them.
  if [ -f "$hierarchy$E2E_CGROUP/cpuset.cpus" ]; then
    cat "${hierarchy}cpuset.cpus" >"$hierarchy$E2E_CGROUP/cpuset.cpus"
    cat "${hierarchy}cpuset.mems" >"$hierarchy$E2E_CGROUP/cpuset.mems"
  fi
done

log "Binaries: control plane (test/controlplane), node (test/node), Prometheus (test/prometheus)"
cp_bin=$(bash "$root/test/controlplane/build.sh")
node_bin=$(bash "$root/test/node/build.sh")
# Prometheus, for the alerts of scenario 10 (the same build as test/alerts').
E2E_PROMETHEUS="$(bash "$root/test/prometheus/build.sh")/prometheus"
export E2E_PROMETHEUS
phase binaries

log "Images: operator from the Dockerfile, pause"
image=docker.io/library/neon-key-operator:e2e
image2=docker.io/library/neon-key-operator:e2e-upgrade
pause_image=localhost/e2e-pause:1
operator_archive="$root/.cache/e2e/operator.oci.tar"
pause_archive="$root/.cache/e2e/pause.oci.tar"
# buildah's store (layers, the base image) under .cache/e2e: reused by the next run, never in
# /var/lib/containers. Inside a private mount namespace: its overlay mounts cannot outlive it, and
# the fixed host paths buildah and runc write to are folders of .cache/e2e or of the scratch folder
# there: /var/tmp (buildah-cache: the npm cache of the Dockerfile's RUN --mount=type=cache, kept
# for the next run), /var/lib (containers/cache), /run (runc's state), and the CNI configuration
# folder, which containers.conf moves (by default /etc/cni/net.d, where buildah takes a lock).
storage=(--root "$root/.cache/e2e/storage" --runroot "$scratch/buildah-run" --storage-driver overlay)
mkdir -p "$root/.cache/e2e/var-tmp" "$root/.cache/e2e/var-lib" "$scratch/build-run" "$scratch/build-cni"
printf '[network]\nnetwork_config_dir = "%s"\n' "$scratch/build-cni" >"$scratch/containers.conf"
CONTAINERS_CONF="$scratch/containers.conf" unshare --mount --propagation private bash -euo pipefail -c '
  here=$1 image=$2 operator_archive=$3 pause_bin=$4 pause_image=$5 pause_archive=$6 cache=$7 run=$8
  shift 8
  mount --bind "$cache/var-tmp" /var/tmp
  mount --bind "$cache/var-lib" /var/lib
  mount --bind "$run" /run
  "$here/build-image.sh" "$image" "$operator_archive" "$@"
  if [ ! "$pause_archive" -nt "$pause_bin" ]; then
    container=$(buildah "$@" from scratch)
    buildah "$@" copy "$container" "$pause_bin" /pause >/dev/null
    buildah "$@" config --entrypoint "[\"/pause\"]" --user 65535:65535 "$container"
    buildah "$@" commit -q --rm "$container" "$pause_image" >/dev/null
    buildah "$@" push --quiet "$pause_image" "oci-archive:$pause_archive:$pause_image"
  fi
' build "$here" "$image" "$operator_archive" "$node_bin/pause" "$pause_image" "$pause_archive" \
  "$root/.cache/e2e" "$scratch/build-run" "${storage[@]}"
phase images

log "Real node (private PID, mount and network namespaces)"
unshare --pid --fork --mount-proc --mount --net --propagation private \
  bash "$here/session.sh" "$scratch" "$cp_bin" "$node_bin" "$operator_archive" "$image" "$image2" "$pause_archive" "$pause_image"
phase node+scenarios
