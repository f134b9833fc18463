#!/usr/bin/env bash
# `npm run e2e:kind`: test/e2e/kind.sh on a machine with no Docker engine and no container
# registry (this project's CI). Gets Debian's docker.io; builds (or reuses) kind and the Go
# programs of the node image (build.sh); then, at the same time, the operator image from the
# unchanged Dockerfile (buildah, as test/e2e/node/run.sh does) and the rest: the base rootfs
# (base-image.sh rootfs: mmdebstrap and kind's recipe), then session.sh, which in private PID,
# mount and network namespaces starts its own dockerd, makes the kind node image and runs
# test/e2e/kind.sh (the cluster is made while the image may still be building). Checks the
# machine is left as it was found (test/e2e/node/machine-state.sh before and after).
#
# Skips, saying why, where it cannot run: not Linux, not root, a tool missing that apt-get cannot
# install. E2E_REQUIRE=1 (CI) turns a skip into a failure. Where Docker reaches the registries, run
# test/e2e/kind.sh itself: it uses kind's published images.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
started=$(date +%s)
log() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
skip() {
  echo "kind e2e SKIPPED: $*" >&2
  [ "${E2E_REQUIRE:-0}" = 1 ] && { echo "E2E_REQUIRE=1: a skip is a failure here" >&2; exit 1; }
  exit 0
}
phase_start=$started
phase() { local now; now=$(date +%s); echo "  ($1: $(( now - phase_start ))s)"; phase_start=$now; }

[ "$(uname -s)" = Linux ] || skip "not Linux"
[ "$(id -u)" = 0 ] || skip "not root: its own dockerd, namespaces and the node image build need root (with Docker, run test/e2e/kind.sh)"
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || skip "Go is not on PATH (nor in /usr/local/go/bin): kind and the node's programs are built from Go modules"
command -v node >/dev/null || skip "node is not on PATH: run it through npm (npm run e2e:kind) after npm ci"

# Debian packages: the runtime dockerd drives (containerd, runc), iptables for its bridges,
# mmdebstrap for the base rootfs, jq (runc-caps.sh), buildah for the operator image, helm's and
# kubectl's helpers. docker.io itself is unpacked into .cache/kind, never installed: its
# maintainer scripts would start a dockerd of the machine's.
packages=(containerd runc iptables mmdebstrap jq buildah openssl iproute2 util-linux curl)
tools=(containerd runc iptables mmdebstrap jq buildah ip unshare mount sysctl curl dpkg-deb)
missing() { local t; for t in "${tools[@]}"; do command -v "$t" >/dev/null || echo "$t"; done; }
if [ -n "$(missing)" ]; then
  if command -v apt-get >/dev/null && [ "${E2E_INSTALL_TOOLS:-1}" = 1 ]; then
    log "Installing ${packages[*]} (missing: $(missing | tr '\n' ' '))"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  fi
  [ -z "$(missing)" ] || skip "missing $(missing | tr '\n' ' ')(Debian packages: ${packages[*]})"
fi
mkdir -p "$root/.cache/kind"
docker_root="$root/.cache/kind/docker.io"
if [ ! -x "$docker_root/usr/sbin/dockerd" ]; then
  log "Debian's docker.io and tini, unpacked into $docker_root"
  debs=$(mktemp -d "$root/.cache/kind/debs.XXXXXX")
  (cd "$debs" && { apt-get download -qq docker.io tini 2>/dev/null || { apt-get update -qq && apt-get download -qq docker.io tini; }; })
  rm -rf "$docker_root.partial" && mkdir -p "$docker_root.partial"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$docker_root.partial"; done
  rm -rf "$debs" "$docker_root" && mv "$docker_root.partial" "$docker_root"
fi
phase tools

log "Binaries: control plane, node, kind and the node image's programs, Prometheus (Go modules)"
cp_bin=$(bash "$root/test/controlplane/build.sh")
node_bin=$(bash "$root/test/node/build.sh")
kind_bin=$(bash "$here/build.sh")
# Prometheus for the scenarios that evaluate the chart's alert rules: built here, where the Go
# module proxy is reachable (the session's network namespace reaches nothing).
E2E_PROMETHEUS="$(bash "$root/test/prometheus/build.sh")/prometheus"
export E2E_PROMETHEUS
phase binaries

# One offline kind run at a time on this machine: the engine's store (.cache/kind/docker) is shared.
exec 9>"$root/.cache/kind/run.lock"
flock 9

scratch=$(mktemp -d "$root/.cache/kind/scratch.XXXXXX")
export LIBMOUNT_UTAB="$scratch/utab"
state_before="$scratch.before"
# This run's cgroup subtree in every hierarchy: dockerd's --cgroup-parent. machine-state.sh leaves
# out other runs' subtrees (nko-e2e-*), not this one's.
export E2E_CGROUP="nko-e2e-kind-${scratch##*.}"
bash "$root/test/e2e/node/machine-state.sh" >"$state_before"
# Host-wide sysctls the node rewrites at start (session.sh puts them back once it is up): its
# kubelet's three, and the two systemd as PID 1 raises (fs.file-max, fs.nr_open), which it may in a
# privileged container.
sysctl vm.overcommit_memory kernel.panic kernel.panic_on_oops fs.file-max fs.nr_open >"$scratch.sysctls"
cp "$scratch.sysctls" "$scratch/sysctls.saved"

build_pid=""
cleanup() {
  local status=$?
  set +e
  # The operator image's build, when the run ends before it does: its process group (it runs in a
  # session of its own), then whatever of it is left in its cgroup.
  if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
    kill -TERM -- "-$build_pid" 2>/dev/null
    wait "$build_pid" 2>/dev/null
    find /sys/fs/cgroup -path "*/$E2E_CGROUP/build*" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    [ "$status" -eq 0 ] && status=1
  fi
  # The session's PID namespace is gone, and every process of it (dockerd, containerd, the node's
  # container and all in it). What outlives a namespace: cgroup directories (child first), files
  # buildah and runc write to fixed host paths, the sysctls.
  find /sys/fs/cgroup -mindepth 2 -maxdepth 2 -type d -name "$E2E_CGROUP" 2>/dev/null \
    | while read -r tree; do find "$tree" -depth -type d -exec rmdir {} + 2>/dev/null; done
  for path in /var/lib/containers /etc/cni /run/runc; do
    grep -qx "$path" "$state_before" || rm -rf "$path"
  done
  sysctl -q -p "$scratch.sysctls" >/dev/null
  rm -rf "$scratch" "$scratch.sysctls"
  find /etc /usr /opt /var /run /srv /boot -xdev -newer "$state_before" 2>/dev/null | head -20 >"$scratch.files"
  if [ -s "$scratch.files" ]; then
    echo "FAIL: files written outside the e2e's folders:" >&2
    cat "$scratch.files" >&2
    [ "$status" -eq 0 ] && status=1
  fi
  if ! diff -u "$state_before" <(bash "$root/test/e2e/node/machine-state.sh") >"$scratch.diff"; then
    echo "FAIL: the kind e2e left the machine changed (- before, + after):" >&2
    grep -E '^[-+][^-+]' "$scratch.diff" >&2
    [ "$status" -eq 0 ] && status=1
  else
    [ -s "$scratch.files" ] || echo "clean machine: sysctls, mounts, cgroups, network, paths and processes (dockerd, containerd, kind) as before; no file written in /etc /usr /opt /var /run /srv /boot"
  fi
  rm -f "$state_before" "$scratch.diff" "$scratch.files"
  echo "kind e2e total $(( $(date +%s) - started ))s, exit $status"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for hierarchy in /sys/fs/cgroup/*/; do
  mkdir "$hierarchy$E2E_CGROUP"
  if [ -f "$hierarchy$E2E_CGROUP/cpuset.cpus" ]; then
    cat "${hierarchy}cpuset.cpus" >"$hierarchy$E2E_CGROUP/cpuset.cpus"
    cat "${hierarchy}cpuset.mems" >"$hierarchy$E2E_CGROUP/cpuset.mems"
  fi
done

# The operator image, built while the rest is made: the base rootfs, the node image and the
# cluster need it only when kind.sh loads it into the cluster (session.sh waits for its exit status
# there). Its lines are prefixed "operator image:".
log "Operator image from the Dockerfile (buildah, as test/e2e/node/run.sh), in the background"
image=docker.io/library/neon-key-operator:e2e
operator_archive="$root/.cache/e2e/operator.oci.tar"
operator_status="$scratch/operator.status"
mkdir -p "$root/.cache/e2e/var-tmp" "$root/.cache/e2e/var-lib" "$scratch/build-run" "$scratch/build-cni"
printf '[network]\nnetwork_config_dir = "%s"\n' "$scratch/build-cni" >"$scratch/containers.conf"
# setsid: a process group of its own, which cleanup() can stop as a whole.
CONTAINERS_CONF="$scratch/containers.conf" setsid bash -uo pipefail -c '
  status=$1 cache=$2 run=$3
  shift 3
  started=$(date +%s)
  unshare --mount --propagation private bash -euo pipefail -c "
    mount --bind \"$cache/var-tmp\" /var/tmp
    mount --bind \"$cache/var-lib\" /var/lib
    mount --bind \"$run\" /run
    \"\$@\"
  " build "$@" 2>&1 | sed -u "s/^/operator image: /"
  code=${PIPESTATUS[0]}
  echo "  (operator image: $(( $(date +%s) - started ))s, exit $code)"
  echo "$code" >"$status.partial" && mv "$status.partial" "$status"
' build "$operator_status" "$root/.cache/e2e" "$scratch/build-run" \
  "$root/test/e2e/node/build-image.sh" "$image" "$operator_archive" \
  --root "$root/.cache/e2e/storage" --runroot "$scratch/buildah-run" --storage-driver overlay &
build_pid=$!

log "Base rootfs (mmdebstrap and kind's recipe; cached)"
bash "$here/base-image.sh" rootfs "$kind_bin"
phase rootfs

log "kind (own dockerd, private PID, mount and network namespaces)"
unshare --pid --fork --mount-proc --mount --net --propagation private \
  bash "$here/session.sh" "$scratch" "$kind_bin" "$cp_bin" "$node_bin" "$docker_root" "$operator_archive" "$operator_status"
wait "$build_pid"
build_pid=""
phase "node image+kind+scenarios"
