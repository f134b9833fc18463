# The e2e scenarios, written once for every cluster they run on: test/e2e/node/session.sh (a real
# node of this machine, `npm run e2e`) and test/e2e/kind.sh (kind, where Docker is). Sourced; the
# caller has a cluster in $KUBECONFIG (or kubectl's current context) whose runtime holds the
# operator image under two names, and defines how to kill a container outright:
#
#   E2E_IMAGE, E2E_IMAGE2       the image, and a second tag of it for the upgrade (scenario 5)
#   kill_container <id>         SIGKILL a container through the runtime (id without the containerd:// scheme)
#   run_scenarios               runs them all; fails (exit) at the first broken expectation, with diagnostics
#   E2E_PROMETHEUS              optional: a prometheus binary for scenario 10; by default the one
#                               test/prometheus/build.sh builds from the Go module (needs Go; cached)
#
# Knobs: E2E_KEYS (200, scenario 5), E2E_FAILOVER_KEYS (20, scenario 4), E2E_TIMEOUT (180 s per wait),
# E2E_EMULATOR_LOCAL_PORT (18080), E2E_METRICS_LOCAL_PORT (18091 and the next one: the operator
# pods' /metrics for Prometheus), E2E_PROMETHEUS_PORT (19090, on loopback). Needs kubectl, helm (v3),
# curl, node, and the repository's node_modules (test/e2e/chart-variants.ts reads YAML).
# shellcheck shell=bash

e2e_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
e2e_timeout=${E2E_TIMEOUT:-180}
e2e_keys=${E2E_KEYS:-200}
e2e_failover_keys=${E2E_FAILOVER_KEYS:-20}
e2e_local_port=${E2E_EMULATOR_LOCAL_PORT:-18080}
e2e_metrics_port=${E2E_METRICS_LOCAL_PORT:-18091}
e2e_prometheus_port=${E2E_PROMETHEUS_PORT:-19090}
chart="$e2e_root/deploy/helm/neon-key-operator"
e2e_work=$(mktemp -d)
e2e_pids=()
helm_ns=nko-helm
kustomize_ns=neon-key-operator-system
emulator_ns=neon-emulator
app_ns=e2e
lease=neon-key-operator

e2e_started=$(date +%s)
say() { printf '\n\033[1m==> %s\033[0m (at %ss)\n' "$*" "$(( $(date +%s) - e2e_started ))"; }
e2e_fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# Waits until "$@" succeeds, at most $1 seconds (a condition, never a fixed sleep).
until_true() {
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || e2e_fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}

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

e2e_diagnostics() {
  echo "--- diagnostics ---" >&2
  kubectl get nodes -o wide >&2
  kubectl get pods -A -o wide >&2
  kubectl get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -40 >&2
  for ns in "$helm_ns" "$kustomize_ns"; do
    kubectl -n "$ns" get lease "$lease" -o yaml 2>/dev/null | grep -E 'holderIdentity|renewTime|leaseTransitions' >&2
    kubectl -n "$ns" logs -l app.kubernetes.io/name=neon-key-operator --tail=60 --prefix 2>/dev/null >&2
  done
  kubectl -n "$app_ns" get projectapikeys 2>/dev/null | awk 'NR == 1 || $2 != "True"' | head -30 >&2
  kubectl get clusterkeyissuers -o wide 2>/dev/null >&2
  kubectl -n "$team_ns" get projectapikeys -o wide 2>/dev/null >&2
  # Not the emulator's log: its first line is the bootstrap record, with the administrator's key.
}

# The caller's exit trap calls this with the exit status: diagnostics on failure, then the
# background port-forward and sampler (and their children) stopped.
scenarios_cleanup() {
  local status=$1 pid child
  [ "$status" -ne 0 ] && e2e_diagnostics
  for pid in "${e2e_pids[@]}"; do
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do kill "$child" 2>/dev/null; done
    kill "$pid" 2>/dev/null
  done
  rm -rf "$e2e_work"
  return 0
}

# Restricted pod security, enforced by the apiserver's PodSecurity admission: a pod that asks for
# root, a capability, privilege escalation or no seccomp profile is refused, so every pod that runs
# (operator, emulator, consumer) passed it.
restricted_namespace() {
  kubectl create namespace "$1" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl label namespace "$1" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
}

holder() { kubectl -n "$1" get lease "$lease" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
ready_replicas() { kubectl -n "$1" get deployment "$2" -o jsonpath='{.status.readyReplicas}'; }
admin_keys() { curl -fsS --max-time 5 "http://127.0.0.1:$e2e_local_port/admin/keys"; }

# A port-forward <namespace> <target> <local port>:<port>, kept up in the background and restarted
# should it drop; its loop's pid in $forward_pid (and in e2e_pids, for the exit).
forward() {
  (
    while true; do
      kubectl -n "$1" port-forward "$2" "$3" >>"$e2e_work/port-forward.log" 2>&1
      sleep 0.5
    done
  ) &
  forward_pid=$!
  e2e_pids+=("$forward_pid")
}
stop_pid() { # <pid>: the process, then its children (a loop killed first starts no other), waited for
  local children child
  children=$(ps -o pid= --ppid "$1" 2>/dev/null) || true
  kill "$1" 2>/dev/null || true
  for child in $children; do kill "$child" 2>/dev/null || true; done
  wait "$1" 2>/dev/null || true
}

# The emulator's admin API answers loopback clients only: a port-forward connects from the pod's
# own loopback.
port_forward() { forward "$emulator_ns" service/emulator "$e2e_local_port:8080"; }

setup_emulator() {
  say "The platform emulator in namespace $emulator_ns (the operator's image, node dist/emulator/main.js)"
  restricted_namespace "$emulator_ns"
  kubectl apply -n "$emulator_ns" -f - >/dev/null <<EOF
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
          image: $E2E_IMAGE
          imagePullPolicy: Never
          command: [/usr/bin/tini, --, node, dist/emulator/main.js]
          args: [--host=0.0.0.0, --port=8080, --db=:memory:]
          ports:
            - { name: http, containerPort: 8080 }
          readinessProbe:
            tcpSocket: { port: http }
            periodSeconds: 2
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
  kubectl -n "$emulator_ns" rollout status deployment/emulator --timeout="${e2e_timeout}s"
  # By ClusterIP, not by name: the real node runs no cluster DNS.
  platform_url="http://$(kubectl -n "$emulator_ns" get service emulator -o jsonpath='{.spec.clusterIP}'):8080/api/v2"

  # The bootstrap record (src/emulator/main.ts), one JSON line on stdout: the seed's organizations,
  # projects and the users' first personal keys. The organization administrator's key is what the
  # resources' credentials Secret holds. Never printed.
  until_true 60 "the emulator's bootstrap record" sh -c "kubectl -n $emulator_ns logs deployment/emulator | grep -q '^{\"baseUrl\"'"
  local bootstrap admin_js
  bootstrap=$(kubectl -n "$emulator_ns" logs deployment/emulator | grep -m 1 '^{"baseUrl"')
  admin_js='d.users.find((u) => u.personalKey && Object.values(u.orgRoles).includes("admin"))'
  admin_key=$(json "$admin_js.personalKey" <<<"$bootstrap") || e2e_fail "the bootstrap record has no organization administrator with a key"
  org_id=$(json "Object.entries($admin_js.orgRoles).find(([, role]) => role === \"admin\")[0]" <<<"$bootstrap")
  project_id=$(json "d.projects.find((p) => p.organizationId === '$org_id').id" <<<"$bootstrap") \
    || e2e_fail "organization $org_id has no project in the bootstrap record"
  other_project_id=$(json "d.projects.find((p) => p.organizationId === '$org_id' && p.id !== '$project_id').id" <<<"$bootstrap") \
    || e2e_fail "organization $org_id has no second project in the bootstrap record (scenario 11's refusal)"
  port_forward
  api="http://127.0.0.1:$e2e_local_port/api/v2"
  until_true 60 "the emulator through the port-forward" curl -fsS -o /dev/null --max-time 2 -H "Authorization: Bearer $admin_key" "$api/projects/$project_id"
  echo "platform $platform_url; project $project_id in organization $org_id"

  restricted_namespace "$app_ns"
  kubectl -n "$app_ns" create secret generic neon-admin --from-literal=apiKey="$admin_key" >/dev/null
}

# Scenario 1: helm install with the chart's defaults; only the image, its pull policy and the
# platform URL set (plain http to the in-cluster emulator, which the operator needs allowed explicitly).
# The release starts with CRDs as an older chart's (no spec.rotation, spec.usage, spec.secret.template):
# scenario 8 upgrades it to this chart's before any resource uses them.
scenario_helm_install() {
  say "1. helm install (chart defaults; image, pull policy, platform URL; CRDs of an older chart)"
  restricted_namespace "$helm_ns"
  release_values=(--set image.repository="${E2E_IMAGE%:*}" --set image.tag="${E2E_IMAGE##*:}" --set image.pullPolicy=Never
    --set platformUrl="$platform_url" --set platformAllowInsecureHttp=true)
  node "$e2e_root/test/e2e/chart-variants.ts" older-crds "$e2e_work/older-chart"
  helm install neon-key-operator "$e2e_work/older-chart" --namespace "$helm_ns" "${release_values[@]}" \
    --wait --timeout "${e2e_timeout}s" >/dev/null
  kubectl -n "$helm_ns" get pods -o wide
  [ "$(ready_replicas "$helm_ns" neon-key-operator)" = 2 ] || e2e_fail "not both replicas Ready"
  until_true 60 "a Lease holder" sh -c "kubectl -n $helm_ns get lease $lease -o jsonpath='{.spec.holderIdentity}' | grep -q ."
  local h
  h=$(holder "$helm_ns")
  kubectl -n "$helm_ns" get pod "$h" >/dev/null 2>&1 || e2e_fail "the Lease holder $h is not a pod of the release"
  echo "both replicas Ready; leader $h"
}

probed() { # <node> <Liveness|Readiness>: the kubelet's count of successful probes of the operator container > 0
  kubectl get --raw "/api/v1/nodes/$1/proxy/metrics/probes" \
    | grep -E "^prober_probe_total\{.*container=\"operator\".*namespace=\"$helm_ns\".*probe_type=\"$2\".*result=\"successful\"" \
    | awk '{ n += $2 } END { exit !(n > 0) }'
}

# Scenario 6: the probes and the security context, as the chart sets them, honoured by the kubelet.
scenario_pod_security() {
  say "6. probes and restricted security context, as run by the kubelet"
  local pod status
  for pod in $(kubectl -n "$helm_ns" get pods -l app.kubernetes.io/name=neon-key-operator -o name); do
    # In the container, as the kubelet and the runtime started it: uid, capabilities, seccomp,
    # no_new_privs of PID 1 (tini, and node under it) and a read-only root.
    status=$(kubectl -n "$helm_ns" exec "$pod" -- cat /proc/1/status)
    grep -qE '^Uid:\s+65532\s' <<<"$status" || e2e_fail "$pod: PID 1 does not run as uid 65532"
    grep -qE '^CapEff:\s+0+$' <<<"$status" || e2e_fail "$pod: PID 1 has capabilities: $(grep CapEff <<<"$status")"
    grep -qE '^CapBnd:\s+0+$' <<<"$status" || e2e_fail "$pod: the bounding set is not empty"
    grep -qE '^NoNewPrivs:\s+1$' <<<"$status" || e2e_fail "$pod: no_new_privs is not set"
    grep -qE '^Seccomp:\s+2$' <<<"$status" || e2e_fail "$pod: no seccomp filter (RuntimeDefault)"
    if kubectl -n "$helm_ns" exec "$pod" -- sh -c 'echo x > /app/written' 2>/dev/null; then e2e_fail "$pod: the root filesystem is writable"; fi
    kubectl -n "$helm_ns" exec "$pod" -- sh -c 'echo x > /tmp/written && rm /tmp/written' || e2e_fail "$pod: /tmp (emptyDir) is not writable"
    # node on the image's malloc (jemalloc, the Dockerfile's LD_PRELOAD): the library mapped into the
    # node process, and not a word from ld.so (a library it could not preload) or from jemalloc (an option it refused).
    # (Node names its main thread MainThread: the process is found by its command line, not its comm.)
    kubectl -n "$helm_ns" exec "$pod" -- sh -c 'for p in /proc/[0-9]*; do case "$({ tr "\0" " " <"$p/cmdline"; } 2>/dev/null)" in "node "*dist/operator/main.js*) grep -q libjemalloc "$p/maps" && exit 0 ;; esac; done; exit 1' \
      || e2e_fail "$pod: node does not run on jemalloc (the image's LD_PRELOAD)"
    if kubectl -n "$helm_ns" logs "$pod" -c operator | grep -E '<jemalloc>|ld\.so'; then e2e_fail "$pod: ld.so or jemalloc complained at start"; fi
  done
  # The kubelet ran the chart's probes: its own counters (prober_probe_total) for the operator
  # container, liveness and readiness, successful.
  local node
  node=$(kubectl -n "$helm_ns" get pods -l app.kubernetes.io/name=neon-key-operator -o jsonpath='{.items[0].spec.nodeName}')
  for probe in Liveness Readiness; do
    until_true 60 "a successful $probe probe of the operator by the kubelet" probed "$node" "$probe"
  done
  echo "uid 65532, no capabilities, no_new_privs, seccomp filter, read-only root, /tmp writable, node on jemalloc; liveness and readiness probed by the kubelet"
}

project_api_key() { # <name> <keyName> [<credentials Secret>, default neon-admin]: a ProjectApiKey document
  cat <<EOF
---
apiVersion: keys.neon.dev/v1alpha1
kind: ProjectApiKey
metadata: { name: $1 }
spec:
  organizationId: $org_id
  projectId: $project_id
  keyName: $2
  credentialsSecretRef: { name: ${3:-neon-admin}, key: apiKey }
  secret: { name: $1-neon, key: apiKey }
  deletionPolicy: Revoke
EOF
}

# A consumer of an issued key: <name> <Secret> <replicas> <path> <interval ms>. Its pods take the
# key from the Secret into their environment (so only a restart moves them to a new key), call
# the platform's <path> with it every <interval> ms and log each answer's status only. It consents
# to restarts when <Secret> rotates (keys.neon.dev/restart-on-rotation): without that annotation a
# rotation never touches a workload.
consumer_deployment() {
  kubectl -n "$app_ns" apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $1
  annotations: { keys.neon.dev/restart-on-rotation: $2 }
spec:
  replicas: $3
  strategy: { type: RollingUpdate, rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }
  selector: { matchLabels: { app: $1 } }
  template:
    metadata: { labels: { app: $1 } }
    spec:
      securityContext: { runAsNonRoot: true, seccompProfile: { type: RuntimeDefault } }
      terminationGracePeriodSeconds: 5
      containers:
        - name: consumer
          image: $E2E_IMAGE
          imagePullPolicy: Never
          command: [/usr/bin/tini, --, node, -e]
          args:
            - |
              const call = async () => {
                try {
                  const res = await fetch(process.env.PLATFORM_URL + process.env.CALL_PATH,
                    { headers: { authorization: 'Bearer ' + process.env.NEON_API_KEY } });
                  await res.arrayBuffer();
                  console.log('call status=' + res.status);
                } catch (error) { console.log('call error=' + error.message); }
              };
              setInterval(call, $5); call();
          env:
            - { name: PLATFORM_URL, value: "$platform_url" }
            - { name: CALL_PATH, value: "$4" }
            - name: NEON_API_KEY
              valueFrom: { secretKeyRef: { name: $2, key: apiKey } }
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: { drop: [ALL] }
EOF
}

# Scenario 3: a Deployment's pod takes the key from the Secret (secretKeyRef) and calls the
# platform with it; deleting the resource revokes the key and the consumer's next call gets 401.
scenario_consumer() {
  say "3. a consumer Deployment uses the issued key; deleting the resource revokes it"
  project_api_key consumer e2e-consumer | kubectl -n "$app_ns" apply -f - >/dev/null
  kubectl -n "$app_ns" wait --for=condition=Ready projectapikey/consumer --timeout="${e2e_timeout}s" >/dev/null
  local key_id
  key_id=$(kubectl -n "$app_ns" get projectapikey consumer -o jsonpath='{.status.keyId}')
  [ "$(kubectl -n "$app_ns" get secret consumer-neon -o jsonpath='{.metadata.labels.app\.kubernetes\.io/managed-by}')" = neon-key-operator ] \
    || e2e_fail "the Secret is not labelled managed-by=neon-key-operator"
  consumer_deployment consumer consumer-neon 1 "/projects/$project_id" 1000
  kubectl -n "$app_ns" rollout status deployment/consumer --timeout="${e2e_timeout}s" >/dev/null
  until_true 60 "the consumer's call to succeed" sh -c "kubectl -n $app_ns logs deployment/consumer --tail=1 | grep -qx 'call status=200'"
  echo "the consumer's calls with key $key_id succeed"
  kubectl -n "$app_ns" delete projectapikey consumer --timeout="${e2e_timeout}s" >/dev/null
  until_true 30 "the consumer's call to get 401" sh -c "kubectl -n $app_ns logs deployment/consumer --tail=1 | grep -qx 'call status=401'"
  local revoked
  revoked=$(admin_keys | json "d.find((k) => String(k.id) === '$key_id')?.revoked") || e2e_fail "key $key_id is not in GET /admin/keys"
  [ "$revoked" = true ] || e2e_fail "key $key_id is not revoked on the platform"
  kubectl -n "$app_ns" wait --for=delete secret/consumer-neon --timeout=60s >/dev/null
  echo "deleted: key $key_id revoked, the consumer's next call got 401, the Secret collected"
  kubectl -n "$app_ns" delete deployment consumer --wait=false >/dev/null
}

# Scenario 11: a team gets a key through a ClusterKeyIssuer, holding no platform credential
# (docs/issuers.md). The platform team keeps the administrator's personal key in a Secret of the
# release's namespace (the default --issuer-secrets-namespace), labels the team's namespace, and
# writes the issuer as a user bound to the chart's issuer-admin ClusterRole only. A developer bound
# to the built-in `edit` role in that namespace and to nothing else (impersonated: kubectl --as)
# can neither read the issuer's Secret nor write an issuer nor relabel the namespace; it declares a
# ProjectApiKey naming the issuer and reads a working key from its Secret. One for a project the
# issuer does not allow is refused (NotAllowed, a Warning) and nothing is minted for it. Deleting the
# namespace revokes the key with the issuer's credentials; the issuer, used no more, is deleted.
# The namespace itself goes when the namespace controller looks again (11-14 s after its keys,
# docs/reliability.md): issuer_namespace_gone checks that at the end, not here.
team_ns=e2e-team
issuer=e2e-team-keys
developer=e2e-developer
platform_team=e2e-platform-team
developer_can() { kubectl auth can-i "$@" --as="$developer" 2>/dev/null || true; } # yes or no (exit status 1)
key_is_revoked() { [ "$(key_revoked "$1")" = true ]; }
team_key() { # <name> <keyName> <project>: a ProjectApiKey naming the issuer, applied by the developer
  kubectl -n "$team_ns" apply --as="$developer" -f - >/dev/null <<EOF
apiVersion: keys.neon.dev/v1alpha1
kind: ProjectApiKey
metadata: { name: $1 }
spec:
  projectId: $3
  keyName: $2
  issuerRef: { name: $issuer }
EOF
}

scenario_issuer() {
  say "11. a key through a ClusterKeyIssuer for a namespace holding no platform credential, declared with edit; a project it does not allow refused"
  kubectl -n "$helm_ns" create secret generic e2e-org-admin --from-file=apiKey=<(printf '%s' "$admin_key") >/dev/null
  restricted_namespace "$team_ns"
  kubectl label namespace "$team_ns" "keys.neon.dev/issuer=$issuer" >/dev/null
  kubectl create clusterrolebinding "$platform_team" --clusterrole=neon-key-operator-issuer-admin --user="$platform_team" >/dev/null
  kubectl -n "$team_ns" create rolebinding developers-edit --clusterrole=edit --user="$developer" >/dev/null
  kubectl apply --as="$platform_team" -f - >/dev/null <<EOF
apiVersion: keys.neon.dev/v1alpha1
kind: ClusterKeyIssuer
metadata: { name: $issuer }
spec:
  organizationId: $org_id
  credentialsSecretRef: { name: e2e-org-admin, key: apiKey }
  allow:
    - namespaces: { selector: { matchLabels: { keys.neon.dev/issuer: $issuer } } }
      kinds: [Project]
      projects: [$project_id]
      maxKeysPerNamespace: 2
EOF
  kubectl wait --for=condition=Ready "clusterkeyissuer/$issuer" --timeout="${e2e_timeout}s" >/dev/null
  echo "issuer $issuer written by $platform_team (the chart's issuer-admin role): Ready" \
    "$(kubectl get clusterkeyissuer "$issuer" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'), credentials of" \
    "$(kubectl get clusterkeyissuer "$issuer" -o jsonpath='{.status.user.email}') in $helm_ns"

  # The edit role takes in the chart's tenant role by aggregation (the controller-manager's, once
  # the chart is installed).
  until_true 60 "edit to grant $developer projectapikeys in $team_ns" sh -c "kubectl auth can-i create projectapikeys -n $team_ns --as=$developer | grep -qx yes"
  [ "$(developer_can get secret/e2e-org-admin -n "$helm_ns")" = no ] || e2e_fail "$developer can read the issuer's Secret"
  [ "$(developer_can create clusterkeyissuers)" = no ] || e2e_fail "$developer can create a ClusterKeyIssuer"
  [ "$(developer_can patch "namespace/$team_ns")" = no ] || e2e_fail "$developer can relabel its Namespace"
  [ -z "$(kubectl -n "$team_ns" get secrets -o name)" ] || e2e_fail "$team_ns holds Secrets before its key: $(kubectl -n "$team_ns" get secrets -o name | tr '\n' ' ')"
  echo "$developer (edit in $team_ns) creates projectapikeys; cannot read secret/e2e-org-admin, write an issuer or relabel $team_ns; $team_ns holds no Secret"

  team_key team-db team-issued "$project_id"
  kubectl -n "$team_ns" wait --for=condition=Ready projectapikey/team-db --timeout="${e2e_timeout}s" >/dev/null
  local key_id status
  key_id=$(kubectl -n "$team_ns" get projectapikey team-db -o jsonpath='{.status.keyId}')
  # The developer reads the key from its namespace's Secret and calls the platform with it (the
  # key goes from kubectl to curl's header in a pipe, never into a variable or the output).
  status=$(kubectl -n "$team_ns" get secret team-db --as="$developer" -o jsonpath='{.data.apiKey}' | base64 -d \
    | sed 's/^/Authorization: Bearer /' | curl -sS -o /dev/null -w '%{http_code}' --max-time 10 -H @- "$api/projects/$project_id")
  [ "$status" = 200 ] || e2e_fail "GET /projects/$project_id with the key the developer read from Secret team-db: $status"
  echo "projectapikey/team-db Ready with key $key_id; the developer reads it from Secret team-db: GET /projects/$project_id -> $status"

  team_key web-db team-refused "$other_project_id"
  until_true "$e2e_timeout" "web-db refused (NotAllowed)" sh -c \
    "[ \"\$(kubectl -n $team_ns get projectapikey web-db -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].reason}')\" = NotAllowed ]"
  until_true 30 "a NotAllowed Warning on web-db" sh -c \
    "kubectl -n $team_ns get events --field-selector involvedObject.name=web-db,reason=NotAllowed,type=Warning -o name | grep -q ."
  local message minted
  message=$(kubectl -n "$team_ns" get projectapikey web-db -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')
  grep -qF "does not allow Project keys of project $other_project_id" <<<"$message" || e2e_fail "web-db's NotAllowed message: $message"
  minted=$(admin_keys | json "d.filter((k) => k.name.startsWith('team-refused')).length")
  [ "$minted" = 0 ] || e2e_fail "$minted key(s) minted for the refused web-db"
  echo "projectapikey/web-db (project $other_project_id): Ready=False NotAllowed, a Warning, no key minted: $message"

  # The namespace deleted with its keys: its one key revoked with the issuer's credentials, its
  # resources gone, so the issuer's finalizer lets it go.
  local t0
  t0=$(date +%s)
  kubectl delete namespace "$team_ns" --wait=false >/dev/null
  until_true "$e2e_timeout" "key $key_id revoked with its namespace" key_is_revoked "$key_id"
  kubectl delete clusterkeyissuer "$issuer" --as="$platform_team" --timeout=60s >/dev/null
  echo "namespace $team_ns deleted: key $key_id revoked $(( $(date +%s) - t0 ))s later, its resources gone; the issuer deleted"
  kubectl delete clusterrolebinding "$platform_team" >/dev/null
  kubectl -n "$helm_ns" delete secret e2e-org-admin >/dev/null
}

issuer_namespace_gone() {
  say "11. (end) the issuer's team namespace gone"
  kubectl wait --for=delete "namespace/$team_ns" --timeout="${e2e_timeout}s" >/dev/null 2>&1 \
    || e2e_fail "namespace $team_ns still there: $(kubectl get namespace "$team_ns" -o jsonpath='{.status.conditions}' 2>&1)"
  echo "gone"
}

# Scenario 7: a rotation without downtime, with running consumers. Two consumer pods take the key
# from the Secret (env, so only a restart moves them) and list projects with it every 250 ms; a
# rotation requested by annotation restarts them (restart.discover; they consent), keeps the old
# key live until their rollout completed and the grace (1m, the CRD's floor) passed, then revokes it. The platform counts every call by
# route and status: the consumers' route (GET /projects, which nothing else calls with a key that
# could be revoked) sees zero 401s, and the old key is never revoked while the rollout is not done.
rollout_done() { # <deployment>: kubectl rollout status's rule, yes or no
  kubectl -n "$app_ns" get deployment "$1" -o json | json "(d.status.observedGeneration ?? 0) >= d.metadata.generation \
    && (d.status.updatedReplicas ?? 0) === d.spec.replicas && (d.status.replicas ?? 0) === d.spec.replicas \
    && (d.status.availableReplicas ?? 0) === d.spec.replicas ? 'yes' : 'no'"
}
list_calls() { # <status>: calls of GET /api/v2/projects answered with that status so far
  curl -fsS --max-time 5 "http://127.0.0.1:$e2e_local_port/admin/requests" \
    | json "d.filter((r) => r.method === 'GET' && r.route === '/api/v2/projects' && r.status === $1).reduce((n, r) => n + r.count, 0)"
}
key_revoked() { # <id>: true, false or absent
  admin_keys | json "String(d.find((k) => String(k.id) === '$1')?.revoked ?? 'absent')"
}
calls_above() { # <status> <count>: more calls with that status than count
  [ "$(list_calls "$1")" -gt "$2" ]
}

scenario_rotation() {
  say "7. a rotation restarts the consumers and revokes the old key after their rollout: zero failed calls"
  kubectl -n "$app_ns" apply -f - >/dev/null <<EOF
apiVersion: keys.neon.dev/v1alpha1
kind: ProjectApiKey
metadata: { name: rotating }
spec:
  organizationId: $org_id
  projectId: $project_id
  keyName: rot-e2e
  credentialsSecretRef: { name: neon-admin, key: apiKey }
  secret: { name: rotating-neon, key: apiKey }
  rotation: { gracePeriod: 1m, maxGracePeriod: 2m, restart: { discover: true } }
EOF
  kubectl -n "$app_ns" wait --for=condition=Ready projectapikey/rotating --timeout="${e2e_timeout}s" >/dev/null
  local old_id new_id token
  old_id=$(kubectl -n "$app_ns" get projectapikey rotating -o jsonpath='{.status.keyId}')
  consumer_deployment rotating-consumer rotating-neon 2 /projects 250
  kubectl -n "$app_ns" rollout status deployment/rotating-consumer --timeout="${e2e_timeout}s" >/dev/null
  until_true 60 "the consumers' calls" calls_above 200 10
  local failed_before ok_before
  failed_before=$(list_calls 401)
  ok_before=$(list_calls 200)
  token=e2e-$(date +%s)
  kubectl -n "$app_ns" annotate projectapikey rotating keys.neon.dev/rotate="$token" --overwrite >/dev/null
  # Until the rotation completed: the old key is never revoked while the restarted rollout is not done.
  local deadline=$(( $(date +%s) + e2e_timeout )) reason=none
  while :; do
    reason=$(kubectl -n "$app_ns" get projectapikey rotating -o json \
      | json "d.status.conditions?.find((c) => c.type === 'Rotating')?.reason ?? 'none'") || reason=none
    if [ "$reason" != RotationComplete ] && [ "$(key_revoked "$old_id")" = true ] && [ "$(rollout_done rotating-consumer)" != yes ]; then
      e2e_fail "key $old_id was revoked while the consumers' rollout was not complete"
    fi
    [ "$reason" = RotationComplete ] && break
    [ "$(date +%s)" -lt "$deadline" ] || e2e_fail "the rotation did not complete in ${e2e_timeout}s (Rotating reason $reason)"
    sleep 0.5
  done
  new_id=$(kubectl -n "$app_ns" get projectapikey rotating -o jsonpath='{.status.keyId}')
  [ "$new_id" != "$old_id" ] || e2e_fail "status.keyId did not change"
  [ "$(key_revoked "$old_id")" = true ] || e2e_fail "the rotation completed but key $old_id is live"
  [ "$(key_revoked "$new_id")" = false ] || e2e_fail "the new key $new_id is not live"
  [ "$(kubectl -n "$app_ns" get deployment rotating-consumer -o jsonpath='{.spec.template.metadata.annotations.keys\.neon\.dev/rotated\.rotating-neon}')" = "$new_id" ] \
    || e2e_fail "the consumers' pod template was not annotated with key $new_id"
  # The restarted pods go on calling, with the new key, after the old one died.
  until_true 30 "calls after the rotation" calls_above 200 "$(( $(list_calls 200) + 8 ))"
  local failed=$(( $(list_calls 401) - failed_before )) ok=$(( $(list_calls 200) - ok_before ))
  [ "$failed" -eq 0 ] || e2e_fail "$failed of the consumers' calls got 401 during the rotation"
  echo "rotated key $old_id -> $new_id: consumers restarted, old key revoked after their rollout; $ok calls succeeded, 0 got 401"
  kubectl -n "$app_ns" delete deployment rotating-consumer --wait=false >/dev/null
  kubectl -n "$app_ns" delete projectapikey rotating --timeout="${e2e_timeout}s" >/dev/null
}

# Snapshots of every key on the platform, twice a second, in the background: the invariant "no
# resource ever has two live keys" holds at every one of them, not only at the end.
start_sampling() { # <file>
  : >"$1"
  (
    while true; do
      if keys=$(admin_keys 2>/dev/null); then printf '%s\n' "$keys" >>"$1"; fi
      sleep 0.5
    done
  ) &
  sampler_pid=$!
  e2e_pids+=("$sampler_pid")
}
stop_sampling() { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; }

apply_keys() { # <name prefix> <count>
  local i
  for i in $(seq -w 1 "$2"); do project_api_key "$1-$i" "$1-$i"; done >"$e2e_work/$1.yaml"
  kubectl -n "$app_ns" apply -f "$e2e_work/$1.yaml" >/dev/null
}

ready_count() { # <keyName prefix>
  kubectl -n "$app_ns" get projectapikeys -o json \
    | json "d.items.filter((r) => r.spec.keyName.startsWith('$1') && r.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length"
}

check_final() { # <keyName prefix>
  kubectl -n "$app_ns" get projectapikeys -o json >"$e2e_work/resources.json"
  kubectl -n "$app_ns" get secrets -o json >"$e2e_work/secrets.json"
  admin_keys >"$e2e_work/keys.json"
  node "$e2e_root/test/e2e/check-keys.ts" final "$1" "$e2e_work/keys.json" "$e2e_work/resources.json" "$e2e_work/secrets.json" "$api" \
    || e2e_fail "keys of $1*: see above"
  rm -f "$e2e_work/secrets.json"
}

wait_all_ready() { # <keyName prefix> <count> <seconds>
  local deadline=$(( $(date +%s) + $3 )) n
  while n=$(ready_count "$1"); [ "$n" != "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || e2e_fail "only $n of $2 $1* resources Ready after $3s"
    sleep 1
  done
}

# Scenario 4: failover. While keys converge, the leader's pod is deleted (SIGTERM: it drains and
# hands the Lease over); then the new leader's container is killed outright (SIGKILL through the
# runtime) and the kubelet restarts it. By default the kill comes once the keys are Ready: a
# process killed between a create intent and its Secret leaves that resource waiting out
# --pending-grace (2 minutes by default) before it is recovered, more than the e2e's budget.
# E2E_KILL_UNDER_LOAD=1 kills while keys are still being created and waits for that recovery.
scenario_failover() {
  say "4. failover: $e2e_failover_keys keys converging, the leader's pod deleted, then its container killed"
  apply_keys e2e-fo "$e2e_failover_keys"
  local first second t0 container restarts
  first=$(holder "$helm_ns")
  t0=$(date +%s%N)
  kubectl -n "$helm_ns" delete pod "$first" --wait=false >/dev/null
  until_true 60 "the Lease to leave $first" sh -c "h=\$(kubectl -n $helm_ns get lease $lease -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$h\" ] && [ \"\$h\" != $first ]"
  second=$(holder "$helm_ns")
  echo "pod $first deleted with $(ready_count e2e-fo-) of $e2e_failover_keys Ready: the Lease moved to $second in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  if [ "${E2E_KILL_UNDER_LOAD:-0}" != 1 ]; then
    wait_all_ready e2e-fo- "$e2e_failover_keys" "$e2e_timeout"
  fi

  container=$(kubectl -n "$helm_ns" get pod "$second" -o jsonpath='{.status.containerStatuses[0].containerID}')
  restarts=$(kubectl -n "$helm_ns" get pod "$second" -o jsonpath='{.status.containerStatuses[0].restartCount}')
  local before_renew
  before_renew=$(kubectl -n "$helm_ns" get lease "$lease" -o jsonpath='{.spec.renewTime}')
  t0=$(date +%s%N)
  echo "killing $second's container with $(ready_count e2e-fo-) of $e2e_failover_keys Ready"
  kill_container "${container#*://}"
  until_true 120 "the kubelet to restart $second's container" sh -c \
    "[ \"\$(kubectl -n $helm_ns get pod $second -o jsonpath='{.status.containerStatuses[0].restartCount}')\" -gt $restarts ]"
  # Leadership resumes in a new process: the standby's (the Lease moves to the other pod) or the
  # restarted container's (same pod name, the identity it campaigns with, so it may take the Lease
  # straight back). Either way, a live Lease is renewed again after the kill, by a Ready pod.
  until_true 90 "a renewed Lease after the kill" sh -c \
    "r=\$(kubectl -n $helm_ns get lease $lease -o jsonpath='{.spec.renewTime}'); h=\$(kubectl -n $helm_ns get lease $lease -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$h\" ] && [ \"\$r\" != '$before_renew' ] && kubectl -n $helm_ns wait --for=condition=Ready pod/\$h --timeout=1s"
  local third
  third=$(holder "$helm_ns")
  echo "container of $second killed: the kubelet restarted it; the Lease is held by $third $( [ "$third" = "$second" ] && echo '(its restarted container)' || echo '(the standby)'), $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill"
  kubectl -n "$helm_ns" rollout status deployment/neon-key-operator --timeout="${e2e_timeout}s" >/dev/null
  failover_done=$(date +%s)
  # The killed process may have died between an intent and its Secret: that resource waits out
  # --pending-grace (2 minutes by default) before it is recovered. The other scenarios run
  # meanwhile; failover_converged checks these keys at the end.
  echo "$(ready_count e2e-fo-) of $e2e_failover_keys Ready so far"
}

failover_converged() {
  say "4. (end) the failover's keys converged"
  wait_all_ready e2e-fo- "$e2e_failover_keys" $(( e2e_timeout + 120 ))
  echo "all $e2e_failover_keys Ready $(( $(date +%s) - failover_done ))s after the failover"
  check_final e2e-fo-
}

# Scenario 5: helm upgrade to a second image tag while $e2e_keys keys converge.
scenario_upgrade() {
  say "5. helm upgrade to $E2E_IMAGE2 while $e2e_keys keys converge"
  local t0 n
  t0=$(date +%s)
  apply_keys e2e-up "$e2e_keys"
  # In the middle of the work: once some, not all, are Ready.
  until_true 120 "the first keys of e2e-up to be Ready" sh -c "[ \"\$(kubectl -n $app_ns get projectapikeys -o jsonpath='{range .items[*]}{.spec.keyName} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' | grep -c '^e2e-up-.* True')\" -ge 5 ]"
  n=$(ready_count e2e-up-)
  echo "upgrading with $n of $e2e_keys Ready"
  helm upgrade neon-key-operator "$e2e_root/deploy/helm/neon-key-operator" --namespace "$helm_ns" --reuse-values \
    --set image.tag="${E2E_IMAGE2##*:}" --wait --timeout "${e2e_timeout}s" >/dev/null
  # helm --wait returns once the new replicas are Ready; the old ones may still be draining.
  until_true 60 "every operator pod to run $E2E_IMAGE2" sh -c "[ \"\$(kubectl -n $helm_ns get pods -l app.kubernetes.io/name=neon-key-operator -o jsonpath='{range .items[*]}{.spec.containers[0].image}{\"\\n\"}{end}' | sort -u)\" = '$E2E_IMAGE2' ]"
  echo "upgraded with $(ready_count e2e-up-) of $e2e_keys Ready; now every replica runs $E2E_IMAGE2"
  wait_all_ready e2e-up- "$e2e_keys" 300
  echo "all $e2e_keys Ready $(( $(date +%s) - t0 ))s after they were applied"
  check_final e2e-up-
}

# Scenario 2: kubectl apply -k deploy/base (plus the CRDs) installs and runs the same way. An
# overlay sets what a user would: the image and the platform URL (and restricted pod security).
scenario_kustomize() {
  say "2. kubectl apply --server-side -f crds/ && kubectl apply -k deploy/base"
  local overlay="$e2e_work/overlay"
  mkdir -p "$overlay"
  cat >"$overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$overlay" "$e2e_root/deploy/base")
images:
  - name: ghcr.io/neon-key-operator/neon-key-operator
    newName: ${E2E_IMAGE%:*}
    newTag: ${E2E_IMAGE##*:}
patches:
  - patch: |-
      apiVersion: v1
      kind: Namespace
      metadata:
        name: $kustomize_ns
        labels: { pod-security.kubernetes.io/enforce: restricted }
  - patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata: { name: neon-key-operator, namespace: $kustomize_ns }
      spec:
        template:
          spec:
            containers:
              - name: operator
                imagePullPolicy: Never
                env:
                  - { name: NEON_API_URL, value: "$platform_url" }
                  # The in-cluster emulator is plain http on a ClusterIP: allowed explicitly.
                  - { name: ALLOW_INSECURE_PLATFORM_URL, value: "true" }
EOF
  kubectl apply --server-side --force-conflicts -f "$e2e_root/crds/" >/dev/null
  kubectl apply -k "$overlay" >/dev/null
  kubectl -n "$kustomize_ns" rollout status deployment/neon-key-operator --timeout="${e2e_timeout}s" >/dev/null
  [ "$(ready_replicas "$kustomize_ns" neon-key-operator)" = 2 ] || e2e_fail "not both replicas Ready"
  until_true 60 "a Lease holder" sh -c "kubectl -n $kustomize_ns get lease $lease -o jsonpath='{.spec.holderIdentity}' | grep -q ."
  echo "both replicas Ready; leader $(holder "$kustomize_ns")"
  project_api_key kustomize e2e-kustomize | kubectl -n "$app_ns" apply -f - >/dev/null
  kubectl -n "$app_ns" wait --for=condition=Ready projectapikey/kustomize --timeout="${e2e_timeout}s" >/dev/null
  check_final e2e-kustomize
  kubectl -n "$app_ns" delete projectapikey kustomize --timeout="${e2e_timeout}s" >/dev/null
  local key_id live
  live=$(admin_keys | json "d.filter((k) => k.name.startsWith('e2e-kustomize') && !k.revoked).length")
  [ "$live" = 0 ] || e2e_fail "$live live e2e-kustomize key(s) after the delete"
  echo "a key issued and revoked by the kustomize install"
  kubectl delete -k "$overlay" --wait=true --timeout="${e2e_timeout}s" >/dev/null
}

# Scenario 8: a release whose CRDs lack fields (scenario 1 installed an older chart's: no
# spec.rotation, spec.usage, spec.secret.template) is `helm upgrade`d to this chart, whose CRDs are
# templates (docs/install.md, Upgrade). Before, the apiserver refuses the fields to a strict client
# and silently prunes them for any other (an older kubectl, a controller, a GitOps tool); after, a
# resource using them keeps them and the operator acts on each: the Secret carries the template's
# label, InUse is reported, the next rotation is scheduled. Scenario 9 finds them still there after
# scenario 5's second upgrade.
crd_spec_fields() { # <plural>: the CRD's spec fields and secret's fields, one line, sorted
  kubectl get crd "$1.keys.neon.dev" -o json | json "(({ properties: p }) => [...Object.keys(p), ...Object.keys(p.secret.properties).map((k) => 'secret.' + k)].sort().join(' '))(d.spec.versions[0].schema.openAPIV3Schema.properties.spec)"
}
crd_upgrade_key() {
  project_api_key crd-upgrade e2e-crd
  cat <<EOF
  rotation: { interval: 720h }
  usage: { unusedAfter: 720h }
EOF
}
crd_upgrade_stored() { # the fields as stored: <rotation.interval> <usage.unusedAfter> <template label>
  kubectl -n "$app_ns" get projectapikey crd-upgrade -o json \
    | json "[d.spec.rotation?.interval ?? '-', d.spec.usage?.unusedAfter ?? '-', d.spec.secret?.template?.labels?.['e2e.neon.dev/template'] ?? '-'].join(' ')"
}
crd_upgrade_manifest() {
  # secret: { name, key } is the last mapping project_api_key writes before deletionPolicy: a template under it.
  crd_upgrade_key | sed 's|^  secret: { name: crd-upgrade-neon, key: apiKey }$|  secret: { name: crd-upgrade-neon, key: apiKey, template: { labels: { e2e.neon.dev/template: applied } } }|'
}

scenario_crd_upgrade() {
  say "8. helm upgrade of a release whose CRDs lack spec.rotation, spec.usage, spec.secret.template: a resource using them keeps them"
  local plural fields out generation key_id
  for plural in apikeys projectapikeys; do
    fields=$(crd_spec_fields "$plural")
    if grep -qwE 'rotation|usage|secret\.template' <<<"$fields"; then e2e_fail "the older CRD $plural already has them: $fields"; fi
  done
  crd_upgrade_manifest | grep -q 'template: { labels' || e2e_fail "the manifest carries no secret.template"
  # Under the older schema: kubectl's strict field validation (its default) refuses the fields...
  if out=$(crd_upgrade_manifest | kubectl -n "$app_ns" apply -f - 2>&1); then e2e_fail "the older CRD accepted spec.rotation"; fi
  grep -q 'unknown field "spec.rotation"' <<<"$out" || e2e_fail "not refused for spec.rotation: $out"
  # ...and a client that does not validate has them pruned, without an error.
  crd_upgrade_manifest | kubectl -n "$app_ns" apply --validate=false -f - >/dev/null 2>&1
  kubectl -n "$app_ns" wait --for=condition=Ready projectapikey/crd-upgrade --timeout="${e2e_timeout}s" >/dev/null
  [ "$(crd_upgrade_stored)" = '- - -' ] || e2e_fail "the older CRD kept the fields: $(crd_upgrade_stored)"
  key_id=$(kubectl -n "$app_ns" get projectapikey crd-upgrade -o jsonpath='{.status.keyId}')
  echo "older CRDs: spec.rotation refused by kubectl's strict validation, pruned without it; key $key_id issued without them"

  generation=$(kubectl -n "$helm_ns" get deployment neon-key-operator -o jsonpath='{.metadata.generation}')
  helm upgrade neon-key-operator "$chart" --namespace "$helm_ns" --reuse-values --wait --timeout "${e2e_timeout}s" >/dev/null
  for plural in apikeys projectapikeys; do
    fields=$(crd_spec_fields "$plural")
    for field in rotation usage secret.template; do
      grep -qw "$field" <<<"$fields" || e2e_fail "after the upgrade, CRD $plural has no spec.$field: $fields"
    done
    [ "$(kubectl get crd "$plural.keys.neon.dev" -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')" = keep ] \
      || e2e_fail "CRD $plural is not annotated helm.sh/resource-policy: keep"
  done
  [ "$(kubectl -n "$helm_ns" get deployment neon-key-operator -o jsonpath='{.metadata.generation}')" = "$generation" ] \
    || e2e_fail "the upgrade changed the Deployment (only the CRDs differ)"
  echo "upgraded: both CRDs have spec.rotation, spec.usage, spec.secret.template; the Deployment untouched"

  crd_upgrade_manifest | kubectl -n "$app_ns" apply -f - >/dev/null
  [ "$(crd_upgrade_stored)" = '720h 720h applied' ] || e2e_fail "the fields were not kept: $(crd_upgrade_stored)"
  until_true 60 "the Secret to carry spec.secret.template's label" sh -c \
    "[ \"\$(kubectl -n $app_ns get secret crd-upgrade-neon -o jsonpath='{.metadata.labels.e2e\.neon\.dev/template}')\" = applied ]"
  until_true 60 "the InUse condition (spec.usage) and the next rotation (spec.rotation) in the status" sh -c \
    "kubectl -n $app_ns get projectapikey crd-upgrade -o json | node -e 'let t=\"\"; process.stdin.on(\"data\", (c) => { t += c; }).on(\"end\", () => { const d = JSON.parse(t); process.exit(d.status?.conditions?.some((c) => c.type === \"InUse\") && d.status?.rotation?.nextRotationAt ? 0 : 1); })'"
  [ "$(kubectl -n "$app_ns" get projectapikey crd-upgrade -o jsonpath='{.status.keyId}')" = "$key_id" ] || e2e_fail "a new key was issued for the template"
  [ "$(crd_upgrade_stored)" = '720h 720h applied' ] || e2e_fail "the fields went after the operator's writes: $(crd_upgrade_stored)"
  echo "re-applied: spec.rotation, spec.usage, spec.secret.template kept; the Secret has the template's label, InUse and the next rotation reported, still key $key_id"
}

# Scenario 9: `helm uninstall` leaves the CRDs (helm.sh/resource-policy: keep), every key resource,
# every Secret and every key live on the platform: deleting a CRD would delete every resource of
# its kind, and their keys with them (docs/install.md, Uninstall).
scenario_uninstall() {
  say "9. helm uninstall leaves the CRDs, every key resource, its Secret and its key"
  kubectl -n "$app_ns" get projectapikeys -o json >"$e2e_work/before-uninstall.json"
  local count out after
  count=$(json 'd.items.length' <"$e2e_work/before-uninstall.json")
  out=$(helm uninstall neon-key-operator --namespace "$helm_ns" --wait --timeout "${e2e_timeout}s")
  grep -q 'kept due to the resource policy' <<<"$out" || e2e_fail "helm kept nothing by resource policy: $out"
  # The operator is gone, so nothing could finish deleting a resource (its finalizer), and a key
  # still live after this is live because nothing asked for its revocation.
  until_true 60 "the operator's pods gone" sh -c "[ -z \"\$(kubectl -n $helm_ns get pods -l app.kubernetes.io/name=neon-key-operator -o name)\" ]"
  for plural in apikeys projectapikeys; do
    kubectl get crd "$plural.keys.neon.dev" -o json | json "d.metadata.deletionTimestamp ? undefined : 'kept'" >/dev/null \
      || e2e_fail "CRD $plural.keys.neon.dev was deleted"
  done
  kubectl -n "$app_ns" get projectapikeys -o json >"$e2e_work/after-uninstall.json"
  after=$(printf '{"before": %s, "after": %s}' "$(cat "$e2e_work/before-uninstall.json")" "$(cat "$e2e_work/after-uninstall.json")" \
    | json "(({ before, after }) => { const id = (r) => r.metadata.uid + '/' + r.status?.keyId; \
        return after.items.some((r) => r.metadata.deletionTimestamp) ? 'being deleted' \
          : before.items.map(id).sort().join() === after.items.map(id).sort().join() ? 'same' : 'changed'; })(d)")
  [ "$after" = same ] || e2e_fail "the key resources changed with the uninstall ($after)"
  [ "$(crd_upgrade_stored)" = '720h 720h applied' ] || e2e_fail "scenario 8's fields went: $(crd_upgrade_stored)"
  # Every resource Ready with one live key, the one it records; its Secret holds it and it authenticates.
  check_final e2e-
  echo "uninstalled: both CRDs kept, $count ProjectApiKeys with the same uids and keys, every Secret's key live"
}

# Scenario 10: the chart installed again finds every resource as the uninstall left it, and a
# Prometheus built from github.com/prometheus/prometheus scrapes it and evaluates the chart's alert
# rules. A resource's credentials are revoked on the platform: NeonKeyOperatorCredentialsRefused
# fires; they are fixed: it resolves.
#
# Short windows, never weaker rules: the rules are the chart's PrometheusRule rendered with
# metrics.prometheusRule.for.NeonKeyOperatorCredentialsRefused=5s (a value the chart offers its
# users) instead of the shipped 10m; chart-variants.ts fails unless every expression, label and
# annotation is the shipped one. The operator checks keys every 5s (driftInterval) and calls a key
# unverified after 5s of refusals (--unverified-after) instead of 5m and 10m. Prometheus listens on
# loopback (on the real node, the node's own network namespace), scrapes each operator pod through a
# port-forward (the same on every cluster; it adds the namespace and pod labels a ServiceMonitor's
# would), and is stopped and its data removed at the end.
prom_api() { curl -fsS --max-time 5 "http://127.0.0.1:$e2e_prometheus_port/api/v1/$1"; }
refused_alert() { # the state of NeonKeyOperatorCredentialsRefused: pending, firing or none
  prom_api alerts | json "d.data.alerts.find((a) => a.labels.alertname === 'NeonKeyOperatorCredentialsRefused')?.state ?? 'none'"
}
ready_reason() { # <ProjectApiKey>
  kubectl -n "$app_ns" get projectapikey "$1" -o json | json "d.status?.conditions?.find((c) => c.type === 'Ready')?.reason ?? 'none'"
}
# A new personal key of the organization administrator, its secret into <file>; prints its id. Not
# named e2e-*: the key checks take those for resources' keys.
personal_key() { # <name> <file>
  local created
  created=$(curl -fsS --max-time 10 -X POST -H "Authorization: Bearer $admin_key" -H 'Content-Type: application/json' \
    -d "{\"key_name\": \"$1\"}" "$api/api_keys") || e2e_fail "could not create personal key $1"
  (umask 077 && json 'd.key' <<<"$created" >"$2")
  json 'd.id' <<<"$created"
}
credentials_secret() { # <name> <file with the key>
  kubectl -n "$app_ns" create secret generic "$1" --from-file=apiKey=<(tr -d '\n' <"$2") --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}
ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

scenario_alerts() {
  say "10. helm install again; Prometheus scrapes it and evaluates the chart's rules: revoked credentials fire NeonKeyOperatorCredentialsRefused, fixed ones resolve it"
  helm install neon-key-operator "$chart" --namespace "$helm_ns" "${release_values[@]}" \
    --set driftInterval=5s --set 'extraArgs={--unverified-after=5s}' --wait --timeout "${e2e_timeout}s" >/dev/null
  until_true 60 "a Lease holder" sh -c "kubectl -n $helm_ns get lease $lease -o jsonpath='{.spec.holderIdentity}' | grep -q ."

  local kube_version prometheus pods pod port i targets
  kube_version=$(kubectl version -o json | json 'd.serverVersion.gitVersion')
  helm template neon-key-operator "$chart" --namespace "$helm_ns" --kube-version "$kube_version" --show-only templates/prometheusrule.yaml \
    --set metrics.prometheusRule.enabled=true --set metrics.prometheusRule.for.NeonKeyOperatorCredentialsRefused=5s >"$e2e_work/prometheusrule.yaml"
  node "$e2e_root/test/e2e/chart-variants.ts" rules "$e2e_work/prometheusrule.yaml" "$e2e_work/rules.yaml" || e2e_fail "the rendered rules"
  read -ra pods <<<"$(kubectl -n "$helm_ns" get pods -l app.kubernetes.io/name=neon-key-operator -o jsonpath='{.items[*].metadata.name}')"
  [ "${#pods[@]}" = 2 ] || e2e_fail "expected 2 operator pods, found ${#pods[@]}"
  local forwards=()
  targets=''
  for i in "${!pods[@]}"; do
    port=$(( e2e_metrics_port + i ))
    forward "$helm_ns" "pod/${pods[$i]}" "$port:8080"
    forwards+=("$forward_pid")
    targets+="
      - targets: ['127.0.0.1:$port']
        labels: { namespace: $helm_ns, pod: ${pods[$i]} }"
  done
  cat >"$e2e_work/prometheus.yaml" <<EOF
global: { scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s }
rule_files: ['$e2e_work/rules.yaml']
scrape_configs:
  - job_name: neon-key-operator
    # As the chart's ServiceMonitor (honorLabels): managed_keys keeps its resource's namespace.
    honor_labels: true
    static_configs:$targets
EOF
  prometheus=${E2E_PROMETHEUS:-$(bash "$e2e_root/test/prometheus/build.sh")/prometheus}
  "$prometheus" --config.file="$e2e_work/prometheus.yaml" --storage.tsdb.path="$e2e_work/prometheus-data" \
    --web.listen-address="127.0.0.1:$e2e_prometheus_port" --log.level=warn >>"$e2e_work/prometheus.log" 2>&1 &
  local prometheus_pid=$!
  e2e_pids+=("$prometheus_pid")
  until_true 60 "Prometheus scraping both operator pods" sh -c \
    "kill -0 $prometheus_pid || exit 0; curl -fsS --max-time 2 http://127.0.0.1:$e2e_prometheus_port/api/v1/targets | grep -o '\"health\":\"up\"' | wc -l | grep -qx 2"
  kill -0 "$prometheus_pid" 2>/dev/null || e2e_fail "Prometheus exited (port $e2e_prometheus_port taken? E2E_PROMETHEUS_PORT): $(tail -5 "$e2e_work/prometheus.log")"
  local loaded shipped
  loaded=$(prom_api rules | json 'd.data.groups.flatMap((g) => g.rules).filter((r) => r.type === "alerting").length')
  shipped=$(grep -c '^ *- alert: ' "$chart/files/prometheus-rules.yaml")
  [ "$loaded" = "$shipped" ] || e2e_fail "Prometheus loaded $loaded alerting rules, the chart ships $shipped"
  until_true 30 "Prometheus seeing a leader" sh -c "curl -fsS --max-time 2 'http://127.0.0.1:$e2e_prometheus_port/api/v1/query?query=max(leader_election_master_status)' | grep -q '\"1\"\\]'"
  echo "Prometheus $("$prometheus" --version 2>&1 | head -1 | awk '{print $3}') on 127.0.0.1:$e2e_prometheus_port: both pods up, $loaded alerting rules loaded"
  # The image's build stamps its version (the Dockerfile's VERSION, package.json's here) into build_info.
  local version stamped
  version=$(node -p 'require(process.argv[1]).version' "$e2e_root/package.json")
  stamped=$(prom_api 'query?query=neon_key_operator_build_info' | json "[...new Set(d.data.result.map((r) => r.metric.version))].join(',')")
  [ "$stamped" = "$version" ] || e2e_fail "build_info says version \"$stamped\", the image was built as $version"
  echo "build_info: version $stamped on both pods"

  local revoked_id fixed_id t_revoked t_refused t_firing t_fixed t_resolved state
  revoked_id=$(personal_key alerts-credentials-1 "$e2e_work/alert-key-1")
  credentials_secret alerts-admin "$e2e_work/alert-key-1"
  project_api_key alert-watch e2e-alert alerts-admin | kubectl -n "$app_ns" apply -f - >/dev/null
  kubectl -n "$app_ns" wait --for=condition=Ready projectapikey/alert-watch --timeout="${e2e_timeout}s" >/dev/null
  until_true 30 "Prometheus seeing alert-watch Ready" sh -c \
    "curl -fsS --max-time 2 'http://127.0.0.1:$e2e_prometheus_port/api/v1/query?query=sum(neon_key_operator_managed_keys%7Bkind%3D%22ProjectApiKey%22%2Ccondition%3D%22Ready%22%2Cstatus%3D%22True%22%7D)' | grep -q '\"$(( $(json 'd.items.length' <"$e2e_work/after-uninstall.json") + 1 ))\"\\]'"
  [ "$(refused_alert)" = none ] || e2e_fail "NeonKeyOperatorCredentialsRefused is $(refused_alert) before any credentials were revoked"

  curl -fsS --max-time 10 -o /dev/null -X DELETE -H "Authorization: Bearer $admin_key" "$api/api_keys/$revoked_id" || e2e_fail "revoking personal key $revoked_id"
  t_revoked=$(ms_now)
  until_true 60 "alert-watch Ready reason CredentialsRefused" sh -c "[ \"\$(kubectl -n $app_ns get projectapikey alert-watch -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].reason}')\" = CredentialsRefused ]"
  t_refused=$(ms_now)
  local deadline=$(( $(date +%s) + 60 ))
  while state=$(refused_alert) && [ "$state" != firing ]; do
    [ "$(date +%s)" -lt "$deadline" ] || e2e_fail "NeonKeyOperatorCredentialsRefused not firing 60s after the condition (state $state)"
    sleep 0.5
  done
  t_firing=$(ms_now)
  # Not before its 5s `for`: seen firing (late, if anything) at least 5 s after Prometheus's own
  # activeAt (when it first found the expression true; the same clock).
  local active_at
  active_at=$(prom_api alerts | json "Date.parse(d.data.alerts.find((a) => a.labels.alertname === 'NeonKeyOperatorCredentialsRefused').activeAt)")
  [ $(( t_firing - active_at )) -ge 5000 ] || e2e_fail "NeonKeyOperatorCredentialsRefused seen firing $(( t_firing - active_at )) ms after it became active, before its 5s for"
  local labels
  labels=$(prom_api alerts | json "(({ labels: l }) => [l.namespace, l.kind, l.reason, l.severity].join(' '))(d.data.alerts.find((a) => a.labels.alertname === 'NeonKeyOperatorCredentialsRefused'))")
  # The resource's namespace (its team's), not the operator's.
  [ "$labels" = "$app_ns ProjectApiKey CredentialsRefused warning" ] || e2e_fail "the alert's labels: $labels"
  echo "revoked the credentials: Ready CredentialsRefused after $(( t_refused - t_revoked )) ms; the alert active after $(( active_at - t_revoked )) ms, firing after $(( t_firing - t_revoked )) ms ($labels)"

  fixed_id=$(personal_key alerts-credentials-2 "$e2e_work/alert-key-2")
  credentials_secret alerts-admin "$e2e_work/alert-key-2"
  t_fixed=$(ms_now)
  until_true 60 "alert-watch Ready again" sh -c "[ \"\$(kubectl -n $app_ns get projectapikey alert-watch -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" = True ]"
  until_true 60 "NeonKeyOperatorCredentialsRefused resolved" sh -c "[ \"\$(curl -fsS --max-time 2 http://127.0.0.1:$e2e_prometheus_port/api/v1/alerts | grep -c NeonKeyOperatorCredentialsRefused)\" = 0 ]"
  t_resolved=$(ms_now)
  echo "fixed the credentials: Ready again, the alert resolved $(( t_resolved - t_fixed )) ms later"

  # No key in what the operator and Prometheus wrote.
  for file in "$e2e_work/alert-key-1" "$e2e_work/alert-key-2"; do
    for pod in "${pods[@]}"; do
      if kubectl -n "$helm_ns" logs "$pod" | grep -qF "$(cat "$file")"; then e2e_fail "a credentials key is in $pod's log"; fi
    done
    if grep -qF "$(cat "$file")" "$e2e_work/prometheus.log"; then e2e_fail "a credentials key is in Prometheus's log"; fi
  done
  stop_pid "$prometheus_pid"
  for pid in "${forwards[@]}"; do stop_pid "$pid"; done
  rm -rf "$e2e_work/prometheus-data" "$e2e_work/alert-key-1" "$e2e_work/alert-key-2"

  kubectl -n "$app_ns" delete projectapikey alert-watch --timeout="${e2e_timeout}s" >/dev/null
  kubectl -n "$app_ns" delete secret alerts-admin >/dev/null
  curl -fsS --max-time 10 -o /dev/null -X DELETE -H "Authorization: Bearer $admin_key" "$api/api_keys/$fixed_id" || e2e_fail "revoking personal key $fixed_id"
  # The reinstalled operator checked every resource several times meanwhile: the same keys.
  kubectl -n "$app_ns" get projectapikeys -o json >"$e2e_work/after-reinstall.json"
  [ "$(printf '{"before": %s, "after": %s}' "$(cat "$e2e_work/after-uninstall.json")" "$(cat "$e2e_work/after-reinstall.json")" \
    | json "(({ before, after }) => { const id = (r) => r.metadata.uid + '/' + r.status?.keyId; return before.items.map(id).sort().join() === after.items.map(id).sort().join() ? 'same' : 'changed'; })(d)")" = same ] \
    || e2e_fail "the reinstalled operator changed the resources' keys"
  check_final e2e-
  echo "the reinstalled operator kept every key; Prometheus stopped, its data removed"
  helm uninstall neon-key-operator --namespace "$helm_ns" --wait --timeout "${e2e_timeout}s" >/dev/null
}

run_scenarios() {
  setup_emulator
  scenario_helm_install
  scenario_crd_upgrade
  scenario_pod_security
  scenario_consumer
  scenario_issuer
  scenario_rotation
  # From here to the end, twice a second: no resource ever has two live keys.
  start_sampling "$e2e_work/keys.jsonl"
  scenario_failover
  scenario_upgrade
  failover_converged
  issuer_namespace_gone
  scenario_uninstall
  scenario_alerts
  scenario_kustomize
  stop_sampling
  # No scenario forges an intent: none is refused. The kustomize install (scenario 2) signs with a
  # key of its own and finds the fulfilled intents the Helm release left on its resources; they
  # name the keys status records, and are no forgery (observe.ts).
  say "no create intent refused (InvalidAnnotation) in any scenario"
  local refused
  refused=$(kubectl get events -A --field-selector reason=InvalidAnnotation -o jsonpath='{range .items[*]}{.involvedObject.namespace}/{.involvedObject.name} {end}')
  [ -z "$refused" ] || e2e_fail "create intents refused: $refused"
  echo "none"
  say "no resource ever had two live keys"
  node "$e2e_root/test/e2e/check-keys.ts" samples e2e- "$e2e_work/keys.jsonl" || e2e_fail "a resource had two live keys at once"
  say "all scenarios passed"
}
