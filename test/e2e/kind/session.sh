#!/usr/bin/env bash
# The offline kind e2e's own Docker engine, the kind node image, then test/e2e/kind.sh. run.sh
# starts it as PID 1 of private PID, mount and network namespaces: dockerd, its containerd, the
# kind node's container and everything in it die with this script; the docker0 and kind bridges,
# their veths and iptables rules vanish with the network namespace, every mount with the mount
# namespace. Only the engine's store outlives a run, in .cache/kind/docker (images: the kind base
# and node images, kept for the next run).
#
#   session.sh <scratch> <kind-bin> <controlplane-bin> <node-bin> <docker-root> <operator-archive> <operator-status>
#
# <operator-status> is the file where run.sh's build of the operator image writes its exit status
# when it ends: the node image and the cluster are made meanwhile, and kind.sh waits for it only
# before loading the image.
set -euo pipefail

: "${E2E_CGROUP:?run.sh sets E2E_CGROUP}"
scratch=$1 kind_bin=$2 cp_bin=$3 node_bin=$4 docker_root=$5 operator_archive=$6 operator_status=$7
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
export PATH="$kind_bin:$cp_bin:$docker_root/usr/bin:$docker_root/usr/sbin:$PATH"
started=$(date +%s)
log() { printf '\n\033[1m==> %s\033[0m (at %ss)\n' "$*" "$(( $(date +%s) - started ))"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
[ "$$" = 1 ] || fail "session.sh must run as PID 1 of its own PID namespace (run.sh starts it)"

dockerd_pid=""
teardown() {
  local status=$?
  set +e
  # kind.sh deleted its cluster (or failed to): prove it. No container, no kind cluster left in
  # this engine; then the engine stopped, then everything else in the namespace killed.
  if [ -n "$dockerd_pid" ]; then
    local containers clusters
    containers=$(docker ps -aq)
    clusters=$(kind get clusters 2>/dev/null)
    if [ -n "$containers$clusters" ]; then
      echo "FAIL: left in the engine after the e2e: containers [$(echo $containers)], kind clusters [$(echo $clusters)]" >&2
      docker rm -f -v $containers >/dev/null 2>&1
      [ "$status" -eq 0 ] && status=1
    else
      echo "kind delete cluster: no container and no kind cluster left in the engine"
    fi
    kill -TERM "$dockerd_pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.5; done
  fi
  kill -KILL -1 2>/dev/null
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "Private namespaces: /run, /var/lib, /etc/docker, /opt of the run; loopback; /lib/modules"
mkdir -p "$scratch/run" "$scratch/varlib" "$scratch/etc-docker" "$scratch/docker-config"
mount --make-rprivate /
# Paths the engine, containerd, runc and iptables write by default, seen by this namespace only.
mount --bind "$scratch/run" /run
mount --bind "$scratch/varlib" /var/lib
[ -d /etc/docker ] && mount --bind "$scratch/etc-docker" /etc/docker
# Where those folders do not exist (a fresh machine), a bind mount would have to make them on the
# host first: dockerd is given its key's path (daemon.json, below), and /opt, where containerd
# makes its fixed /opt/containerd, gets an overlay whose writes go to the scratch folder (seen by
# this namespace only). A fresh machine's cold CI run left /etc/docker/key.json and /opt/containerd.
mkdir -p "$scratch/opt-upper" "$scratch/opt-work"
mount -t overlay overlay -o "lowerdir=/opt,upperdir=$scratch/opt-upper,workdir=$scratch/opt-work" /opt
ip link set lo up
# kind mounts the host's /lib/modules into its node; where the host has none, Docker would make
# it. An overlay on that folder's parent (this namespace only) takes it into the scratch folder.
if [ ! -e /lib/modules ]; then
  libdir=$(readlink -f /lib)
  mkdir -p "$scratch/lib-upper" "$scratch/lib-work"
  mount -t overlay overlay -o "lowerdir=$libdir,upperdir=$scratch/lib-upper,workdir=$scratch/lib-work" "$libdir"
  mkdir "$libdir/modules"
fi
export DOCKER_HOST="unix://$scratch/docker.sock" DOCKER_CONFIG="$scratch/docker-config"
export KUBECONFIG="$scratch/kubeconfig"

log "dockerd (Debian's docker.io, its own store, sockets and cgroup subtree)"
mkdir -p "$root/.cache/kind/docker"
# Its identity key in the scratch folder, not /etc/docker/key.json (the default of dockerd 20.10).
printf '{"deprecated-key-path": "%s"}\n' "$scratch/etc-docker/key.json" >"$scratch/daemon.json"
# --default-runtime: runc-caps.sh (the runc of kind's privileged nodes, minus the capabilities this
# machine's root lacks). --cgroup-parent: the containers in this run's cgroup subtree (run.sh).
dockerd --config-file "$scratch/daemon.json" --data-root "$root/.cache/kind/docker" \
  --exec-root "$scratch/docker-exec" -H "$DOCKER_HOST" --pidfile "$scratch/docker.pid" \
  --userland-proxy-path "$docker_root/usr/sbin/docker-proxy" --init-path "$docker_root/usr/bin/docker-init" \
  --add-runtime "caps=$here/runc-caps.sh" --default-runtime caps --cgroup-parent "/$E2E_CGROUP" \
  >"$scratch/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 120); do
  docker version >/dev/null 2>&1 && break
  kill -0 "$dockerd_pid" 2>/dev/null || { tail -20 "$scratch/dockerd.log" >&2; fail "dockerd exited"; }
  sleep 0.5
done
docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}' || fail "dockerd did not answer"

log "kind node image (built here, or reused from the engine's store)"
node_image=$(bash "$here/node-image.sh" "$kind_bin" "$cp_bin" "$node_bin")
echo "$node_image"
# Node and base images of earlier stamps (1-2 GB each) are not needed again: removed from the store.
for stale in $(docker images --format '{{.Repository}}:{{.Tag}}' | grep -E '^localhost/kind-(node|base):' \
  | grep -vxF -e "$node_image" -e "$(bash "$here/base-image.sh" "$kind_bin")"); do
  docker rmi "$stale" >/dev/null 2>&1 || true
done
docker image prune -f >/dev/null

# test/e2e/kind.sh, as on any machine with Docker; what differs here: the node image, the operator
# image from its archive (built by buildah from the unchanged Dockerfile, maybe still building when
# the cluster is up), the kubeconfig's place, and the host-wide sysctls the node's kubelet rewrites
# at start, put back once the node is up.
log "test/e2e/kind.sh"
# kind.sh's hook before it loads the image: the build's exit status, once the build has ended.
wait_build() {
  local deadline=$(( $(date +%s) + 1800 ))
  until [ -s "$operator_status" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "the operator image build did not end in 30 minutes" >&2; return 1; }
    sleep 1
  done
  [ "$(cat "$operator_status")" = 0 ] || { echo "the operator image build failed: its lines above, prefixed 'operator image:'" >&2; return 1; }
}
export -f wait_build
export operator_status
KIND_NODE_IMAGE=$node_image E2E_IMAGE_ARCHIVE=$operator_archive KIND_BEFORE_LOAD=wait_build \
  KIND_AFTER_CREATE="sysctl -q -p $scratch/sysctls.saved" bash "$root/test/e2e/kind.sh"
echo "offline kind e2e passed in $(( $(date +%s) - started ))s"
