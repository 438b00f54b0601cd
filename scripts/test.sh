#!/bin/bash
# test.sh - the project's whole test run: vet, unit tests, and the real-kernel
# tests (host cgroup v1 where present). A real-kernel test that cannot run
# fails here instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
export POOLAGENT_REQUIRE_KERNEL=1

echo "== go vet"
go vet ./...
echo "== go test (host)"
go test -count=1 ./...
