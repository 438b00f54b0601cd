#!/bin/bash
# bench-oci.sh [ROUNDS] - the time poolagent-oci adds to a container's
# start, measured in the systemd VM (podman with crun and runc, with and
# without poolagent-oci in front; scripts/vm/systemd/bench-oci.sh), as
# ratios in one run. Needs scripts/vm/setup.sh and
# scripts/vm/systemd/setup.sh run first (scripts/test.sh runs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/scripts"
for c in poolagent poolagent-run poolagent-oci; do
	CGO_ENABLED=0 go build -trimpath -o "$stage/bin/$c" "./cmd/$c"
done
cp scripts/install.sh scripts/uninstall.sh scripts/pools-scope.sh scripts/poolagent.service scripts/poolagent.socket "$stage/scripts/"
cp -r monitoring "$stage/"
cp scripts/vm/systemd/bench-oci.sh "$stage/"
POOLAGENT_VM_TIMEOUT=${POOLAGENT_VM_TIMEOUT:-1800} scripts/vm/systemd/run.sh "$stage" ./bench-oci.sh "${1:-15}"
