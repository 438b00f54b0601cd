#!/bin/bash
# bench-start.sh - what starting a short command in a cgroup costs, five
# ways interleaved (docs/performance.md "Starting a query"):
# `poolagent-run -- /bin/true`, `poolagent run -- /bin/true` (against a real
# `poolagent daemon` on a fresh pool root), libcgroup's
# `cgexec -g cpu:G /bin/true` (Debian's cgroup-tools, installed with apt when
# missing), `/bin/true` alone, and `goexec /bin/true`, a Go program that
# only execs its argument (the floor of any Go client): medians and each
# one's ratio to cgexec.
# Runs on this host's cpu hierarchy (cgroup v1 or v2) and then, unless
# NO_VM=1, in the cgroup v2 VM (scripts/vm/setup.sh first). Needs root, Go
# and Debian's apt. Env: RUNS (rounds, default 40), VM_RUNS (rounds in the VM,
# default RUNS), NO_VM=1.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-start.sh: needs root (it creates cgroups)" >&2; exit 1; }
runs=${RUNS:-40}

if ! command -v cgexec >/dev/null; then
	apt-get install -y cgroup-tools >/dev/null || { apt-get update >/dev/null && apt-get install -y cgroup-tools >/dev/null; }
fi
cgexec=$(command -v cgexec)
true_bin=$(readlink -f /bin/true)

# Not below /tmp: the VM mounts a tmpfs there.
mkdir -p scripts/vm/lab
bin=$(mktemp -d "$PWD/scripts/vm/lab/bench-start.XXXXXX")
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
export CGO_ENABLED=0
go build -o "$bin/poolagent" ./cmd/poolagent
go build -o "$bin/poolagent-run" ./cmd/poolagent-run
go build -o "$bin/benchstart" ./scripts/benchstart
go build -o "$bin/goexec" ./scripts/benchstart/goexec

echo "== host: $(nproc) CPUs"
"$bin/benchstart" -bin "$bin" -cgexec "$cgexec" -cmd "$true_bin" -runs "$runs"

[ "${NO_VM:-}" = 1 ] && exit 0
[ "${VM_RUNS:-}" ] && runs=$VM_RUNS
echo "== VM: cgroup v2"
# cgexec and true are dynamically linked: the guest gets them with their
# libraries and loader, at the paths the host has them.
files="$bin/poolagent $bin/poolagent-run $bin/goexec $cgexec $true_bin"
for f in "$cgexec" "$true_bin"; do
	files="$files $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')"
done
POOLAGENT_VM_FILES="$files" POOLAGENT_VM_TIMEOUT=${POOLAGENT_VM_TIMEOUT:-1800} scripts/vm/run.sh "$bin/benchstart" -bin "$bin" -cgexec "$cgexec" -cmd "$true_bin" -runs "$runs"
