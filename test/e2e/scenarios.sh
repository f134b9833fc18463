# The e2e scenarios, written once for every cluster they run on: test/e2e/node/session.sh (a real
# node of this machine, `npm run e2e`) and test/e2e/kind.sh (kind, where Docker is). Sourced; the
# caller has a cluster in $KUBECONFIG (or kubectl's current context) whose runtime holds the
# operator image under two names, and defines how to kill a container outright:
#
#   E2E_IMAGE, E2E_IMAGE2       the image, and a second tag of it for the upgrade (scenario 5)
#   kill_container <id>         SIGKILL a container through the runtime (id without the containerd:// scheme)
#   run_scenarios               runs them all; fails (exit) at the first broken expectation, with diagnostics
#
# Knobs: E2E_KEYS (200, scenario 5), E2E_FAILOVER_KEYS (20, scenario 4), E2E_TIMEOUT (180 s per wait),
# E2E_EMULATOR_LOCAL_PORT (18080). Needs kubectl, helm (v3), curl, node.
# shellcheck shell=bash

e2e_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
e2e_timeout=${E2E_TIMEOUT:-180}
e2e_keys=${E2E_KEYS:-200}
e2e_failover_keys=${E2E_FAILOVER_KEYS:-20}
e2e_local_port=${E2E_EMULATOR_LOCAL_PORT:-18080}
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

# The emulator's admin API answers loopback clients only: a port-forward connects from the pod's
# own loopback. Kept up in the background, restarted should it drop.
port_forward() {
  (
    while true; do
      kubectl -n "$emulator_ns" port-forward service/emulator "$e2e_local_port:8080" >>"$e2e_work/port-forward.log" 2>&1
      sleep 0.5
    done
  ) &
  e2e_pids+=($!)
}

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
  port_forward
  api="http://127.0.0.1:$e2e_local_port/api/v2"
  until_true 60 "the emulator through the port-forward" curl -fsS -o /dev/null --max-time 2 -H "Authorization: Bearer $admin_key" "$api/projects/$project_id"
  echo "platform $platform_url; project $project_id in organization $org_id"

  restricted_namespace "$app_ns"
  kubectl -n "$app_ns" create secret generic neon-admin --from-literal=apiKey="$admin_key" >/dev/null
}

# Scenario 1: helm install with the chart's defaults; only the image, its pull policy and the
# platform URL set (plain http to the in-cluster emulator, which the operator needs allowed explicitly).
scenario_helm_install() {
  say "1. helm install (chart defaults; image, pull policy, platform URL)"
  restricted_namespace "$helm_ns"
  helm install neon-key-operator "$e2e_root/deploy/helm/neon-key-operator" --namespace "$helm_ns" \
    --set image.repository="${E2E_IMAGE%:*}" --set image.tag="${E2E_IMAGE##*:}" --set image.pullPolicy=Never \
    --set platformUrl="$platform_url" --set platformAllowInsecureHttp=true --wait --timeout "${e2e_timeout}s" >/dev/null
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
  done
  # The kubelet ran the chart's probes: its own counters (prober_probe_total) for the operator
  # container, liveness and readiness, successful.
  local node
  node=$(kubectl -n "$helm_ns" get pods -l app.kubernetes.io/name=neon-key-operator -o jsonpath='{.items[0].spec.nodeName}')
  for probe in Liveness Readiness; do
    until_true 60 "a successful $probe probe of the operator by the kubelet" probed "$node" "$probe"
  done
  echo "uid 65532, no capabilities, no_new_privs, seccomp filter, read-only root, /tmp writable; liveness and readiness probed by the kubelet"
}

project_api_key() { # <name> <keyName>: a ProjectApiKey document
  cat <<EOF
---
apiVersion: keys.neon.dev/v1alpha1
kind: ProjectApiKey
metadata: { name: $1 }
spec:
  organizationId: $org_id
  projectId: $project_id
  keyName: $2
  credentialsSecretRef: { name: neon-admin, key: apiKey }
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
  say "2. kubectl apply -f crds/ && kubectl apply -k deploy/base"
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
  kubectl apply -f "$e2e_root/crds/" >/dev/null
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

run_scenarios() {
  setup_emulator
  scenario_helm_install
  scenario_pod_security
  scenario_consumer
  scenario_rotation
  # From here to the end, twice a second: no resource ever has two live keys.
  start_sampling "$e2e_work/keys.jsonl"
  scenario_failover
  scenario_upgrade
  failover_converged
  helm uninstall neon-key-operator --namespace "$helm_ns" --wait --timeout "${e2e_timeout}s" >/dev/null
  scenario_kustomize
  stop_sampling
  say "no resource ever had two live keys"
  node "$e2e_root/test/e2e/check-keys.ts" samples e2e- "$e2e_work/keys.jsonl" || e2e_fail "a resource had two live keys at once"
  say "all scenarios passed"
}
