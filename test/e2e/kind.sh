#!/usr/bin/env bash
# End-to-end on a kind cluster, for machines with Docker: build the image, load it into kind (under
# two tags), then the same scenarios as `npm run e2e` on this project's real node
# (test/e2e/scenarios.sh: helm install, kustomize install, a consumer of the issued key, failover,
# upgrade under load, pod security and probes). Tears everything down on exit.
#
#   test/e2e/kind.sh                     # KEEP_CLUSTER=1 keeps the cluster for a look afterwards
#
# Needs: docker, kind, kubectl, helm (v3), curl, node >= 22.18 (reads JSON, runs test/e2e/check-keys.ts).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=${KIND_CLUSTER:-nko-e2e}
image=${IMAGE:-docker.io/library/neon-key-operator:e2e}
image2=${image%:*}:e2e-upgrade
created_cluster=false

log() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

cleanup() {
  local status=$?
  set +e
  # Diagnostics on failure (pods, events, operator logs), the port-forward and sampler stopped.
  declare -F scenarios_cleanup >/dev/null && scenarios_cleanup "$status"
  if [ "$created_cluster" = true ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    kind delete cluster --name "$cluster"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for tool in docker kind kubectl helm curl node; do
  command -v "$tool" >/dev/null || fail "$tool is required on PATH"
done

log "Creating kind cluster $cluster"
if kind get clusters | grep -qx "$cluster"; then fail "a kind cluster named $cluster exists; delete it or set KIND_CLUSTER"; fi
kind create cluster --name "$cluster" --wait 120s
created_cluster=true
kubectl config use-context "kind-$cluster" >/dev/null

log "Building $image and loading it into the cluster"
docker build -t "$image" "$root"
kind load docker-image "$image" --name "$cluster"

# The second tag of scenario 5 (helm upgrade to another image tag), loaded like the first.
docker tag "$image" "$image2"
kind load docker-image "$image2" --name "$cluster"

# The scenarios, shared with the real node of `npm run e2e` (test/e2e/node/session.sh). How kind
# kills a container outright: SIGKILL to its task through containerd, inside the node container.
kill_container() { # <containerd container id>
  local node
  node=$(docker ps --filter "label=io.x-k8s.kind.cluster=$cluster" --format '{{.Names}}' | head -n 1)
  docker exec "$node" ctr -n k8s.io tasks kill -s SIGKILL "$1"
}
export E2E_IMAGE=$image E2E_IMAGE2=$image2
# shellcheck source=scenarios.sh
source "$root/test/e2e/scenarios.sh"
run_scenarios
echo "e2e passed"
