#!/bin/bash
# test.sh - the operator's lifecycle on a real systemd host: builds the three
# binaries, stages them with scripts/install.sh, uninstall.sh, the units,
# lifecycle.sh and containers.sh, and boots the systemd VM (run.sh) to run
# lifecycle.sh and then containers.sh (containers in pools through
# poolagent-oci) as the last step of its boot. Needs setup.sh run first
# (scripts/test.sh does). Prints the boot's and every step's time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/scripts"
# Static: the guest's Debian has no Go, and the client is static anyway.
CGO_ENABLED=0 go build -trimpath -o "$stage/bin/poolagent" ./cmd/poolagent
CGO_ENABLED=0 go build -trimpath -o "$stage/bin/poolagent-run" ./cmd/poolagent-run
CGO_ENABLED=0 go build -trimpath -o "$stage/bin/poolagent-oci" ./cmd/poolagent-oci
cp scripts/install.sh scripts/uninstall.sh scripts/pools-scope.sh scripts/poolagent.service scripts/poolagent.socket "$stage/scripts/"
cp -r monitoring "$stage/"
cp "$here/steps.sh" "$here/lifecycle.sh" "$here/units.sh" "$here/containers.sh" "$stage/"
# A loaded CI machine slows the guest down: the lifecycle took 7 to 11
# minutes on 2 shared cores, 14 at the worst; the containers add 3 to 12 (3.2 at a load of 8, 8.5 at 18).
POOLAGENT_VM_TIMING=1 POOLAGENT_VM_TIMEOUT=${POOLAGENT_VM_TIMEOUT:-2700} "$here/run.sh" "$stage" sh -c './lifecycle.sh && ./containers.sh'
