#!/bin/bash
# bench-start.sh ROUNDS - the start of a query on the reference host, run as
# root inside the systemd VM (scripts/bench-start.sh stages and boots it):
# poolagent installed as the service it is on a host (scripts/install.sh:
# the unit, its socket, the pools in poolagent-pools.scope), then
# benchstart's ways from a scope against that service's socket, with
# Debian's own cgexec (cgroup-tools, in the image) into a cgroup of its
# own (docs/performance.md "Starting a query").
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
env POOLAGENT_BINARY="$PWD/bin/poolagent" POOLAGENT_RUN_BINARY="$PWD/bin/poolagent-run" POOLAGENT_OCI_BINARY="$PWD/bin/poolagent-oci" \
	scripts/install.sh >/dev/null
# In a scope, as a login session's commands run: this job is a service's,
# where poolagent-run stays the unit's main process (the gate path of
# --stats) rather than running the query in place.
systemd-run --scope --quiet --unit=poolagent-bench-start.scope -- env -u INVOCATION_ID \
	bin/benchstart -bin "$PWD/bin" -socket /run/poolagent/agent.sock -cgexec "$(command -v cgexec)" \
	-cmd "$(readlink -f /bin/true)" -runs "${1:-40}" -label "systemd VM"
