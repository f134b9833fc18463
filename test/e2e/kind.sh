#!/usr/bin/env bash
# End-to-end on a kind cluster, for machines with Docker: build the image, load it into kind (under
# two tags), then the same scenarios as `npm run e2e` on this project's real node
# (test/e2e/scenarios.sh: helm install, kustomize install, a consumer of the issued key, failover,
# upgrade under load, pod security and probes). Tears everything down on exit.
#
#   test/e2e/kind.sh                     # KEEP_CLUSTER=1 keeps the cluster for a look afterwards
#
# Needs: docker, kind, kubectl, helm (v3), curl, node >= 22.18 (reads JSON, runs test/e2e/check-keys.ts).
# With Docker and registry access that is all: kind's published node image, the operator image
# built by `docker build`. Without (this project's CI), test/e2e/kind/run.sh (`npm run e2e:kind`)
# builds what would be pulled and runs this script with:
#   KIND_NODE_IMAGE      the node image for `kind create cluster --image` (default: kind's own)
#   E2E_IMAGE_ARCHIVE    the operator image as an archive, loaded with `kind load image-archive`
#                        instead of `docker build` + `kind load docker-image`
#   KIND_AFTER_CREATE    a command run once the cluster is up
#   KIND_BEFORE_LOAD     a command run before the image is loaded (its build may still be running)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=${KIND_CLUSTER:-nko-e2e}
image=${IMAGE:-docker.io/library/neon-key-operator:e2e}
image2=${image%:*}:e2e-upgrade
created_cluster=false

kind_started=$(date +%s)
log() { printf '\n\033[1m==> %s\033[0m (at %ss)\n' "$*" "$(( $(date +%s) - kind_started ))"; }
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
# Deleted on exit, also when the create fails half way.
created_cluster=true
stamped() { local t0 line; t0=$(date +%s); while IFS= read -r line; do printf '[%3ss] %s\n' "$(( $(date +%s) - t0 ))" "$line"; done; }
# Two settings the real node of `npm run e2e` has too (test/e2e/node/session.sh), neither part of
# what a scenario tests: etcd does not fsync (a cluster thrown away at the end needs no durable
# writes, and every write of the scenarios waited for one), and the kubelet reports the node's
# status every 2 s, not 10 (the cluster is Ready as soon as its network is).
kind create cluster --name "$cluster" --config - --wait 120s ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} <<'EOF' 2>&1 | stamped
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
kubeadmConfigPatches:
  - |
    kind: ClusterConfiguration
    etcd:
      local:
        extraArgs:
          unsafe-no-fsync: "true"
  - |
    kind: KubeletConfiguration
    nodeStatusUpdateFrequency: 2s
EOF
kubectl config use-context "kind-$cluster" >/dev/null
if [ -n "${KIND_AFTER_CREATE:-}" ]; then bash -c "$KIND_AFTER_CREATE"; fi

if [ -n "${KIND_BEFORE_LOAD:-}" ]; then
  log "Before loading the image: $KIND_BEFORE_LOAD"
  bash -c "$KIND_BEFORE_LOAD"
fi
if [ -n "${E2E_IMAGE_ARCHIVE:-}" ]; then
  log "Loading $image from $E2E_IMAGE_ARCHIVE into the cluster"
  kind load image-archive "$E2E_IMAGE_ARCHIVE" --name "$cluster"
  # The second tag of scenario 5 (helm upgrade to another image tag): the same image, another name.
  for node in $(kind get nodes --name "$cluster"); do
    docker exec "$node" ctr -n k8s.io images tag "$image" "$image2" >/dev/null
  done
else
  log "Building $image and loading it into the cluster"
  docker build -t "$image" "$root"
  kind load docker-image "$image" --name "$cluster"

  # The second tag of scenario 5 (helm upgrade to another image tag), loaded like the first.
  docker tag "$image" "$image2"
  kind load docker-image "$image2" --name "$cluster"
fi

# Cluster DNS, served by the cluster's CoreDNS (offline, test/e2e/kind/run.sh builds it with only
# the plugins of kind's Corefile): the scenarios reach Services by cluster IP, so this is where
# names are proven to resolve. A pod of the operator's image asks for the kubernetes Service by
# its full name and by a short one (the pod's search path) and must get its cluster IP both times.
log "Cluster DNS from a pod: kubernetes.default.svc.cluster.local and kubernetes.default"
kubectl -n kube-system rollout status deployment/coredns --timeout 120s >/dev/null
dns_want=$(kubectl get service kubernetes -o jsonpath='{.spec.clusterIP}')
kubectl run nko-dns-check --image "$image" --image-pull-policy Never --restart Never --command -- \
  node -e "const dns = require('node:dns').promises;
    Promise.all([dns.resolve4('kubernetes.default.svc.cluster.local'), dns.lookup('kubernetes.default', 4)])
      .then(([full, short]) => console.log('dns ' + full.join(',') + ' ' + short.address))" >/dev/null
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/nko-dns-check --timeout 120s >/dev/null \
  || { kubectl describe pod nko-dns-check >&2; kubectl logs nko-dns-check >&2; fail "the DNS check pod did not succeed"; }
dns_got=$(kubectl logs nko-dns-check)
[ "$dns_got" = "dns $dns_want $dns_want" ] || fail "cluster DNS answered [$dns_got], want the kubernetes Service's $dns_want"
echo "$dns_got"
kubectl delete pod nko-dns-check --wait=false >/dev/null

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
echo "e2e passed (at $(( $(date +%s) - kind_started ))s)"
