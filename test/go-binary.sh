#!/usr/bin/env bash
# Sourced by the scripts that build test infrastructure from Go modules (test/controlplane,
# test/node, test/prometheus, test/e2e/kind).
#
#   go_binary <out> [go build flags...] <package or package@version>
#
# Writes the program <package> to <out> (an absolute path) as `go build -o` would, through
# `go run -exec cp`: Go keeps the executables `go run` links in its build cache (Go 1.24 and later),
# keyed by the package, its dependencies and the flags, and `cp` copies the one it would run. A
# fresh clone on a machine whose build cache is warm (CI's warm case) then copies each program
# instead of linking it again: kube-apiserver 1.6 s against 19 s on 2 cores.
go_binary() {
  local out=$1
  shift
  case "$out" in /*) ;; *) echo "go_binary: <out> must be an absolute path, not '$out'" >&2; return 2 ;; esac
  go run -exec cp "$@" "$out"
}

# build_lock <lock file>: holds the lock until the calling script exits. A build script takes it
# before it looks for its programs, so two runs of one script in a checkout (CI builds ahead while
# `npm test` runs, .ci/run) never write one folder at once: the second waits, then finds the
# programs built.
build_lock() {
  mkdir -p "$(dirname "$1")"
  exec {build_lock_fd}>"$1"
  flock "$build_lock_fd"
}
