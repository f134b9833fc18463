#!/usr/bin/env bash
# npm run test:k8s -- <version>...: the integration suites that depend most on the apiserver's
# behaviour, against another Kubernetes version's control plane (built by build-version.sh from
# test/controlplane/versions/<major.minor>). With no version, every version that has a module there.
# Arguments after `--` go to jest: npm run test:k8s -- 1.30.14 -- -t 'rotation'.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

# The subset, by what it proves on that version:
suites=(
  test/controlplane/smoke.test.ts     # the apiserver behaviours the operator relies on, and its version
  test/deploy/apply.test.ts           # the CRDs and the chart admitted (server-side dry run, Pod Security), helm install, RBAC
  test/deploy/tenant-roles.test.ts    # the tenant roles aggregated into the built-in edit and view
  test/operator/lifecycle.test.ts     # create -> Ready -> delete, drift, recovery
  test/operator/rotation.test.ts      # rotation, restarts of consenting Deployments
  test/operator/hostile-tenant.test.ts # a tenant writing anything in its namespace
)

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  [[ ${1#v} =~ ^1\.[0-9]+\.[0-9]+$ ]] || { echo "test:k8s: '$1' is not a Kubernetes release (1.MINOR.PATCH); the ones with a module: $(ls "$here/versions" | tr '\n' ' ')" >&2; exit 2; }
  versions+=("${1#v}")
  shift
done
[ "${1:-}" = "--" ] && shift
if [ ${#versions[@]} -eq 0 ]; then
  for module in "$here"/versions/*/go.mod; do
    versions+=("$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print substr($2, 2); exit }' "$module")")
  done
fi

for version in "${versions[@]}"; do
  echo "== Kubernetes $version: ${suites[*]}" >&2
  # Built here rather than in jest's global setup, so that the build's progress shows as it goes.
  bash "$here/build-version.sh" "$version" >/dev/null
  start=$(date +%s)
  TEST_K8S_VERSION=$version node --experimental-vm-modules node_modules/jest/bin/jest.js "${suites[@]}" "$@"
  echo "== Kubernetes $version: passed in $(( $(date +%s) - start ))s" >&2
done
