#!/usr/bin/env bash
# One real Kubernetes node, every component a process of this script, then the e2e scenarios on it.
# run.sh starts it as PID 1 of private PID, mount and network namespaces
# (unshare --pid --fork --mount-proc --mount --net): whatever this script leaves running dies with
# it (the kernel kills a PID namespace's processes when its PID 1 exits), every mount it makes
# vanishes with the mount namespace, and every address, route, bridge and iptables rule with the
# network namespace. Nothing here listens outside it.
#
#   session.sh <scratch> <controlplane-bin> <node-bin> <operator-archive> <image> <image2> <pause-archive> <pause-image>
set -euo pipefail

: "${E2E_CGROUP:?run.sh sets E2E_CGROUP}"
scratch=$1 cp_bin=$2 node_bin=$3 operator_archive=$4 image=$5 image2=$6 pause_archive=$7 pause_image=$8
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
export PATH="$cp_bin:$node_bin:$PATH"

node_name=e2e-node
# The node's address: on the namespace's loopback (these machines have no dummy interface driver),
# a /32 outside the pod and service ranges.
node_ip=10.213.0.10
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
api_port=6443
sock="$scratch/containerd/containerd.sock"
logs="$scratch/logs"
timeout_s=${E2E_NODE_TIMEOUT:-120}

log() { printf '\n\033[1m==> %s\033[0m (at %ss)\n' "$*" "$(( $(date +%s) - started ))"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
elapsed() { echo "$(( $(date +%s) - started ))s"; }
started=$(date +%s)

declare -A pids=()
start_component() {
  local name=$1
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  pids[$name]=$!
}

# Waits until "$@" succeeds, at most $1 seconds; fails naming what it waited for ($2).
wait_for() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    for name in "${!pids[@]}"; do
      kill -0 "${pids[$name]}" 2>/dev/null || { tail -30 "$logs/$name.log" >&2; fail "$name exited while waiting for $what"; }
    done
    [ "$(date +%s)" -lt "$deadline" ] || fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}

teardown() {
  local status=$?
  set +e
  declare -F scenarios_cleanup >/dev/null && scenarios_cleanup "$status"
  if [ "$status" -ne 0 ]; then
    echo "--- node diagnostics (exit $status) ---" >&2
    for name in kubelet containerd kube-apiserver kube-proxy kube-controller-manager kube-scheduler; do
      [ -f "$logs/$name.log" ] && { echo "--- last lines of $name.log" >&2; grep -E '^[EF][0-9]{4}|level=(error|fatal)' "$logs/$name.log" | tail -8 >&2; }
    done
  fi
  # Every process of this PID namespace (components, shims, containers), SIGKILLed at once: the
  # node is thrown away, so nothing needs a graceful stop, and containers cannot be restarted by a
  # kubelet that is already gone. When this script, the namespace's PID 1, exits, the kernel kills
  # any process left and waits for all of them before unshare returns to run.sh, which then finds
  # every cgroup empty. Mounts go with the mount namespace.
  kill -KILL -1 2>/dev/null
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ "$$" = 1 ] || fail "session.sh must run as PID 1 of its own PID namespace (run.sh starts it)"

log "Private namespaces: mounts, network $node_ip"
mkdir -p "$logs" "$scratch/run" "$scratch/varlib" "$scratch/varlog"
# Paths the kubelet, containerd's shims, runc and the CNI plugins hard-code (/run/containerd,
# /run/runc, /var/lib/kubelet, /var/lib/cni, /var/log/pods, /var/log/containers): scratch folders
# over /run, /var/lib and /var/log, seen by this mount namespace only.
mount --make-rprivate /
mount --bind "$scratch/run" /run
mount --bind "$scratch/varlib" /var/lib
mount --bind "$scratch/varlog" /var/log
ip link set lo up
ip addr add "$node_ip/32" dev lo
# Node-side clients (curl, kubectl port-forward) reach ClusterIPs: a route for the service range,
# which kube-proxy's OUTPUT rules then translate. Forwarding between pods and services: this
# namespace's own sysctls, not the host's.
ip route add "$service_cidr" dev lo src "$node_ip"
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1

log "Credentials: service-account keys, tokens"
pki="$scratch/pki"
mkdir -p "$pki"
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
# Static tokens: the administrator (kubectl, helm, the controller manager, the scheduler,
# kube-proxy) and the kubelet, as the Node authorizer expects a node to authenticate.
admin_token=$(openssl rand -hex 24)
node_token=$(openssl rand -hex 24)
{
  echo "$admin_token,e2e-admin,e2e-admin,\"system:masters\""
  echo "$node_token,system:node:$node_name,system:node:$node_name,\"system:nodes\""
} >"$pki/tokens.csv"
chmod 600 "$pki/tokens.csv"

log "containerd (starts while the apiserver does)"
mkdir -p "$scratch/cni/net.d" "$scratch/containerd"
cat >"$scratch/cni/net.d/10-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "e2e",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$pod_cidr" }]], "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": "$scratch/cni/ipam" } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
# restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc fails to lower a container's
# oom_score_adj below its own; runc, not crun (crun refuses this host's hybrid cgroup layout).
cat >"$scratch/containerd/config.toml" <<EOF
version = 2
root = "$scratch/containerd/root"
state = "$scratch/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$sock"
# Its "opt" folder (containerd makes /opt/containerd/{bin,lib} at start) under the scratch folder.
[plugins."io.containerd.internal.v1.opt"]
  path = "$scratch/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$scratch/cni/net.d"
EOF
start_component containerd containerd --config "$scratch/containerd/config.toml"
log "etcd, kube-apiserver"
start_component etcd etcd --data-dir="$scratch/etcd" \
  --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
  --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
  --initial-cluster=default=http://127.0.0.1:2380 --unsafe-no-fsync --log-level=warn
start_component kube-apiserver kube-apiserver \
  --etcd-servers=http://127.0.0.1:2379 \
  --cert-dir="$pki/apiserver" --secure-port=$api_port --bind-address=0.0.0.0 --advertise-address=$node_ip \
  --authorization-mode=Node,RBAC --token-auth-file="$pki/tokens.csv" \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=$service_cidr --allow-privileged=false --profiling=false \
  --kubelet-preferred-address-types=InternalIP
# kube-apiserver writes its self-signed serving certificate (and its CA) at start; it names the
# kubernetes Service's ClusterIP and kubernetes.default.svc, which pods connect to.
wait_for 60 "the apiserver's certificate" test -s "$pki/apiserver/apiserver.crt"
ca="$pki/apiserver/apiserver.crt"
kubeconfig() { # <file> <user> <token>
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{ name: e2e, cluster: { server: "https://$node_ip:$api_port", certificate-authority-data: "$(base64 -w0 <"$ca")" } }]
users: [{ name: $2, user: { token: "$3" } }]
contexts: [{ name: e2e, context: { cluster: e2e, user: $2 } }]
current-context: e2e
EOF
  chmod 600 "$1"
}
kubeconfig "$pki/admin.kubeconfig" e2e-admin "$admin_token"
kubeconfig "$pki/kubelet.kubeconfig" "system:node:$node_name" "$node_token"
export KUBECONFIG="$pki/admin.kubeconfig"
wait_for 60 "kube-apiserver /readyz" kubectl get --raw /readyz

log "kube-controller-manager, kube-scheduler"
# --flex-volume-plugin-dir: by default it creates /usr/libexec/kubernetes on the host.
start_component kube-controller-manager kube-controller-manager --kubeconfig="$KUBECONFIG" \
  --controllers='*' --leader-elect=false --bind-address=127.0.0.1 --cert-dir="$scratch/kcm-certs" \
  --root-ca-file="$ca" --service-account-private-key-file="$pki/sa.key" --use-service-account-credentials=true \
  --flex-volume-plugin-dir="$scratch/flexvolume" --allocate-node-cidrs=false
start_component kube-scheduler kube-scheduler --kubeconfig="$KUBECONFIG" --leader-elect=false \
  --bind-address=127.0.0.1 --cert-dir="$scratch/scheduler-certs"

log "containerd: images (imported while the kubelet starts)"
wait_for 30 "containerd" ctr --address "$sock" version
(
  for archive in "$pause_archive" "$operator_archive"; do
    ctr --address "$sock" -n k8s.io images import "$archive" >/dev/null
  done
  # The second tag of scenario 5 (helm upgrade): the same image under another name.
  ctr --address "$sock" -n k8s.io images tag "$image" "$image2" >/dev/null
) >"$logs/import.log" 2>&1 &
import_pid=$!
log "kubelet, kube-proxy"
cat >"$scratch/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
# This run's own cgroup subtree (run.sh made it and removes it): pods never land in a /kubepods
# that another node on this machine (another e2e run) uses too.
cgroupRoot: /$E2E_CGROUP
# This host: swap may be on, and its cgroups are v1 (1.35 refuses v1 unless told).
failSwapOn: false
failCgroupV1: false
address: $node_ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# The apiserver reaches the kubelet (logs, exec, port-forward) inside this network namespace only.
authentication: { anonymous: { enabled: true }, webhook: { enabled: false } }
authorization: { mode: AlwaysAllow }
volumePluginDir: $scratch/kubelet-plugins
podLogsDir: /var/log/pods
resolvConf: /etc/resolv.conf
# A shared machine: never evict the e2e's pods because other work fills the disk.
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%" }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Report the node's status every 2 s, not 10: Ready is seen as soon as the runtime's network is up.
nodeStatusUpdateFrequency: 2s
EOF
start_component kubelet kubelet --config="$scratch/kubelet.yaml" --kubeconfig="$pki/kubelet.kubeconfig" \
  --hostname-override=$node_name --node-ip=$node_ip --root-dir=/var/lib/kubelet --cert-dir="$scratch/kubelet-certs"
cat >"$scratch/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: { kubeconfig: "$KUBECONFIG" }
hostnameOverride: $node_name
clusterCIDR: 10.244.0.0/16
bindAddress: 127.0.0.1
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Zero: kube-proxy leaves the conntrack sysctls alone (nf_conntrack_max is host-wide).
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
EOF
start_component kube-proxy kube-proxy --config="$scratch/kube-proxy.yaml"
wait_for "$timeout_s" "Node $node_name Ready" \
  sh -c "kubectl get node $node_name -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
echo "node Ready after $(elapsed)"
wait "$import_pid" || { cat "$logs/import.log" >&2; fail "importing the images into containerd failed"; }
ctr --address "$sock" -n k8s.io images ls -q | grep -E 'neon-key-operator|pause' | sed 's/^/  /'
echo "images imported after $(elapsed)"
# The kubelet rewrote host-wide sysctls at start (vm.overcommit_memory, kernel.panic,
# kernel.panic_on_oops): back to the values run.sh saved, now that it is past that point.
[ -f "$scratch/sysctls.saved" ] && sysctl -q -p "$scratch/sysctls.saved" >/dev/null
kubectl get nodes -o wide

# The scenarios, shared with test/e2e/kind.sh. How this node kills a container outright: SIGKILL
# to its task through containerd, as an OOM kill or a crash would end it.
kill_container() { # <containerd container id>
  ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$1"
}
export E2E_IMAGE=$image E2E_IMAGE2=$image2
# shellcheck source=../scenarios.sh
source "$root/test/e2e/scenarios.sh"
run_scenarios
echo "e2e on the real node passed in $(elapsed)"
