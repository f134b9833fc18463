#!/usr/bin/env bash
# Builds promtool and the Prometheus server from the Go module github.com/prometheus/prometheus
# into .cache/prometheus/<version>-<stamp>/bin. The stamp is a hash of this script and the Go
# version, so a warm cache is reused. Prints the bin folder on stdout.
#
# The server is built without the `builtinassets` tag: its web UI is then absent (the pages answer
# 404s), which the tests do not need; its HTTP API (/api/v1/...) is whole. `remove_all_sd` leaves
# out every service discovery but the static one (Kubernetes, clouds, Consul, ...): the tests
# scrape a static target, and their SDKs were most of the build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl); none on PATH" >&2; exit 1; }
# shellcheck source=../go-binary.sh
source "$here/../go-binary.sh"

# The module's v0.x tags are Prometheus 3.x releases (v0.316.0 is Prometheus 3.16.0).
version=v0.316.0

build_lock "$root/.cache/prometheus/build.lock"
stamp=$( (cat "$here/build.sh"; go version) | sha256sum | cut -c1-16)
out="$root/.cache/prometheus/$version-$stamp"
bin="$out/bin"
if [ -x "$bin/promtool" ] && [ -x "$bin/prometheus" ]; then
  echo "$bin"
  exit 0
fi

log() { echo "prometheus/build.sh: $*" >&2; }
mkdir -p "$bin.partial"
bin_partial=$(cd "$bin.partial" && pwd)
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=
start=$(date +%s)

log "building promtool and prometheus $version (a cold build takes a few minutes on 2 cores)"
for cmd in promtool prometheus; do
  go_binary "$bin_partial/$cmd" -trimpath -tags remove_all_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v}" \
    "github.com/prometheus/prometheus/cmd/$cmd@$version"
done

rm -rf "$bin" && mv "$bin.partial" "$bin"
log "built in $(( $(date +%s) - start ))s into $bin"
echo "$bin"
