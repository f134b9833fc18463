#!/usr/bin/env bash
# End-to-end on a kind cluster, for machines with Docker: build the image, load it into kind,
# run the platform emulator in the cluster (the same image, node dist/emulator/main.js), install
# the operator with the Helm chart pointed at it, issue a ProjectApiKey, check its Secret and that
# the key works, delete the resource and check the key is revoked. Tears everything down on exit.
#
#   test/e2e/kind.sh                     # KEEP_CLUSTER=1 keeps the cluster for a look afterwards
#
# Needs: docker, kind, kubectl, helm (v3), curl, node (any; used only to read JSON).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=${KIND_CLUSTER:-nko-e2e}
image=${IMAGE:-neon-key-operator:e2e}
timeout=${TIMEOUT:-180s}
operator_ns=neon-key-operator-system
emulator_ns=neon-emulator
app_ns=e2e
local_port=${EMULATOR_LOCAL_PORT:-18080}
work=$(mktemp -d)
created_cluster=false
port_forward_pid=""

log() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

cleanup() {
  local status=$?
  if [ -n "$port_forward_pid" ]; then kill "$port_forward_pid" 2>/dev/null || true; fi
  if [ "$status" -ne 0 ] && [ "$created_cluster" = true ]; then
    echo "--- diagnostics (exit $status) ---" >&2
    kubectl get pods -A -o wide >&2 || true
    kubectl -n "$operator_ns" logs -l app.kubernetes.io/name=neon-key-operator --tail=100 --prefix >&2 || true
    kubectl -n "$app_ns" describe projectapikeys >&2 || true
    kubectl -n "$app_ns" get events --sort-by=.lastTimestamp >&2 || true
  fi
  if [ "$created_cluster" = true ] && [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    kind delete cluster --name "$cluster" || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A value from the JSON document on stdin, as a JavaScript expression of it, d: json 'd.projects[0].id'.
# Fails when the value is undefined or null.
json() {
  # shellcheck disable=SC2016 # the ${...} is JavaScript's template literal, not the shell's
  node -e '
    let text = ""; process.stdin.on("data", (c) => { text += c; }).on("end", () => {
      const value = new Function("d", `return (${process.argv[1]})`)(JSON.parse(text));
      if (value === undefined || value === null) process.exit(1);
      console.log(typeof value === "object" ? JSON.stringify(value) : String(value));
    });' "$1"
}

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

log "Running the platform emulator in namespace $emulator_ns (same image)"
kubectl create namespace "$emulator_ns"
kubectl apply -n "$emulator_ns" -f - <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: emulator
  labels: { app.kubernetes.io/name: neon-emulator }
spec:
  replicas: 1
  selector:
    matchLabels: { app.kubernetes.io/name: neon-emulator }
  template:
    metadata:
      labels: { app.kubernetes.io/name: neon-emulator }
    spec:
      securityContext:
        runAsNonRoot: true
        seccompProfile: { type: RuntimeDefault }
      containers:
        - name: emulator
          image: $image
          imagePullPolicy: Never
          command: [/usr/bin/tini, --, node, dist/emulator/main.js]
          args: [--host=0.0.0.0, --port=8080, --db=:memory:]
          ports:
            - { name: http, containerPort: 8080 }
          readinessProbe:
            tcpSocket: { port: http }
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: { drop: [ALL] }
          volumeMounts:
            - { name: tmp, mountPath: /tmp }
      volumes:
        - name: tmp
          emptyDir: {}
---
apiVersion: v1
kind: Service
metadata:
  name: emulator
spec:
  selector: { app.kubernetes.io/name: neon-emulator }
  ports:
    - { name: http, port: 8080, targetPort: http }
EOF
kubectl -n "$emulator_ns" rollout status deployment/emulator --timeout="$timeout"
platform_url="http://emulator.$emulator_ns.svc.cluster.local:8080/api/v2"

# The emulator prints its bootstrap record as one JSON line on stdout (src/emulator/main.ts): the
# seed's organizations, projects and the users' first personal keys, as the platform's console
# would hand them out. The organization administrator's key is the credentials of the operator.
bootstrap=""
for _ in $(seq 1 30); do
  bootstrap=$(kubectl -n "$emulator_ns" logs deployment/emulator | grep -m 1 '^{"baseUrl"' || true)
  [ -n "$bootstrap" ] && break
  sleep 1
done
[ -n "$bootstrap" ] || fail "no bootstrap record in the emulator's log"
admin_js='d.users.find((u) => u.personalKey && Object.values(u.orgRoles).includes("admin"))'
admin_key=$(json "$admin_js.personalKey" <<<"$bootstrap") || fail "the bootstrap record has no organization administrator with a key"
org_id=$(json "Object.entries($admin_js.orgRoles).find(([, role]) => role === \"admin\")[0]" <<<"$bootstrap")
project_id=$(json "d.projects.find((p) => p.organizationId === '$org_id').id" <<<"$bootstrap") \
  || fail "organization $org_id has no project in the bootstrap record"

# The admin API (GET /admin/keys) answers loopback clients only: a port-forward connects from the
# pod's own loopback.
kubectl -n "$emulator_ns" port-forward service/emulator "$local_port:8080" >"$work/port-forward.log" 2>&1 &
port_forward_pid=$!
api="http://127.0.0.1:$local_port/api/v2"
for _ in $(seq 1 30); do
  curl -fsS -o /dev/null -H "Authorization: Bearer $admin_key" "$api/projects/$project_id" && break
  sleep 1
done
echo "project $project_id in organization $org_id"

log "Installing the operator with Helm (platform URL $platform_url)"
helm install neon-key-operator "$root/deploy/helm/neon-key-operator" \
  --namespace "$operator_ns" --create-namespace \
  --set image.repository="${image%:*}" --set image.tag="${image##*:}" --set image.pullPolicy=Never \
  --set platformUrl="$platform_url" --set platformAllowInsecureHttp=true --set logLevel=debug \
  --wait --timeout "$timeout"
kubectl -n "$operator_ns" get pods -o wide
holder=$(kubectl -n "$operator_ns" get lease -o jsonpath='{.items[0].spec.holderIdentity}')
[ -n "$holder" ] || fail "no replica holds the leader-election Lease"
echo "leader: $holder"

log "Issuing a ProjectApiKey in namespace $app_ns"
kubectl create namespace "$app_ns"
kubectl -n "$app_ns" create secret generic neon-admin --from-literal=apiKey="$admin_key"
kubectl apply -n "$app_ns" -f - <<EOF
apiVersion: keys.neon.dev/v1alpha1
kind: ProjectApiKey
metadata:
  name: e2e-deployer
spec:
  organizationId: $org_id
  projectId: $project_id
  keyName: e2e-deployer
  credentialsSecretRef: { name: neon-admin, key: apiKey }
  secret: { name: e2e-deployer-neon, key: apiKey }
  deletionPolicy: Revoke
EOF
kubectl -n "$app_ns" wait --for=condition=Ready projectapikey/e2e-deployer --timeout="$timeout"
kubectl -n "$app_ns" get neon -o wide

log "Checking the Secret and the key"
key_id=$(kubectl -n "$app_ns" get projectapikey e2e-deployer -o jsonpath='{.status.keyId}')
[ -n "$key_id" ] || fail "status.keyId is empty"
managed_by=$(kubectl -n "$app_ns" get secret e2e-deployer-neon -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')
[ "$managed_by" = neon-key-operator ] || fail "the Secret is not labelled managed-by=neon-key-operator (got '$managed_by')"
secret_key_id=$(kubectl -n "$app_ns" get secret e2e-deployer-neon -o jsonpath='{.metadata.annotations.keys\.neon\.dev/key-id}')
[ "$secret_key_id" = "$key_id" ] || fail "the Secret records key $secret_key_id, the status $key_id"
issued=$(kubectl -n "$app_ns" get secret e2e-deployer-neon -o jsonpath='{.data.apiKey}' | base64 -d)
[ "${#issued}" -eq 64 ] || fail "the Secret does not hold a 64-character key"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $issued" "$api/projects/$project_id")
[ "$code" = 200 ] || fail "the issued key reads its project with HTTP $code, not 200"
echo "key $key_id works on project $project_id"
if kubectl -n "$operator_ns" logs -l app.kubernetes.io/name=neon-key-operator --tail=-1 | grep -qF "$issued"; then
  fail "the key's secret appears in the operator's log"
fi

log "Deleting the ProjectApiKey: the key is revoked"
kubectl -n "$app_ns" delete projectapikey e2e-deployer --timeout="$timeout"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $issued" "$api/projects/$project_id")
[ "$code" = 401 ] || fail "the revoked key still gets HTTP $code, not 401"
# The emulator's admin view of every key (not part of the platform API).
admin_keys=$(curl -fsS "http://127.0.0.1:$local_port/admin/keys")
revoked=$(json "(Array.isArray(d) ? d : d.keys).find((k) => String(k.id) === '$key_id')?.revoked" <<<"$admin_keys") \
  || fail "key $key_id is not in GET /admin/keys: $admin_keys"
[ "$revoked" = true ] || fail "GET /admin/keys shows key $key_id with revoked=$revoked"
echo "key $key_id revoked"
kubectl -n "$app_ns" wait --for=delete secret/e2e-deployer-neon --timeout=60s

log "Uninstalling"
helm uninstall neon-key-operator --namespace "$operator_ns" --wait --timeout "$timeout"
echo "e2e passed"
