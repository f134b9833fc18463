#!/usr/bin/env bash
# Writes the tools-only module that builds another Kubernetes version's control plane for
# `npm run test:k8s` (test/controlplane/versions/<major.minor>/go.mod and go.sum), from the Go module
# proxy: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with folders of
# its own tree, so outside that tree each one is mapped to the published v0.<minor>.<patch>.
# Usage: test/controlplane/add-version.sh 1.30.14
set -euo pipefail

version=${1:?usage: add-version.sh <kubernetes version, e.g. 1.30.14>}
version=${version#v}
[[ $version =~ ^1\.[0-9]+\.[0-9]+$ ]] || { echo "add-version.sh: '$version' is not a Kubernetes release (1.MINOR.PATCH)" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="/usr/local/go/bin:$PATH" GOFLAGS=-mod=mod GOTOOLCHAIN=local
dir="$here/versions/${version%.*}"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# k8s.io/kubernetes's own go.mod: its go version and the staging modules it replaces.
(cd "$tmp" && go mod init probe >/dev/null 2>&1 && go mod download -json "k8s.io/kubernetes@v$version") > "$tmp/download.json"
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "$tmp/download.json")
[ -f "$gomod" ] || { echo "add-version.sh: k8s.io/kubernetes@v$version is not served by the Go module proxy" >&2; exit 1; }
go_version=$(awk '$1 == "go" { print $2; exit }' "$gomod")
# The tool directive needs go 1.24 or later in the go.mod that holds it.
printf '%s\n%s\n' "$go_version" 1.24.0 | sort -V | tail -1 > "$tmp/go"
staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$gomod")

{
  echo "// Tools-only module: builds kube-apiserver, kube-controller-manager and kubectl v$version for"
  echo "// npm run test:k8s (test/controlplane/k8s.sh). Written by test/controlplane/add-version.sh."
  echo "module neon-key-operator/test/controlplane/versions/${version%.*}"
  echo
  echo "go $(cat "$tmp/go")"
  echo
  echo "require k8s.io/kubernetes v$version"
  echo
  echo "replace ("
  for module in $staging; do echo "	$module => $module v0.${version#1.}"; done
  echo ")"
  echo
  echo "tool ("
  echo "	k8s.io/kubernetes/cmd/kube-apiserver"
  echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
  echo "	k8s.io/kubernetes/cmd/kubectl"
  echo ")"
} > "$dir/go.mod"
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy)
echo "$dir"
