#!/bin/bash
# accuracy.sh - how well the kernel-faithful model predicts the kernel.
#
# Runs every shipped compare scenario (testdata/scenarios/compare-*.scn)
# RUNS times (default 5) for real with `poolagent compare`: on this host's
# cgroup cpu controller (v1 on the hybrid development host) and in the
# project's cgroup v2 VM (scripts/vm/run.sh). Keeps each scenario's JSON
# report (in OUT with -o) and prints the accuracy table of
# docs/accuracy.md from them (go run ./internal/accuracy/gen -md): one markdown row
# per pool or query with a quota, the kernel model's mean prediction
# beside the measured mean and the runs' range, the error, the target and
# whether it was met, or met only within the runs' range; then a summary
# and the model's error per workload class. With -w, the error per class
# is also written to internal/accuracy/measured.go, the table `poolagent advise`
# takes its margin from.
#
# Usage: scripts/accuracy.sh [-n RUNS] [-o OUT] [-w] [host|vm|both]
# Needs root; the VM needs scripts/vm/setup.sh to have run once. Measures
# CPU time: run it alone, e.g. under flock /tmp/poolagent-kernel.lock.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 [-n RUNS] [-o OUT] [-w] [host|vm|both]" >&2; exit 2; }
runs=5
out=
write=
while getopts "n:o:w" opt; do
	case $opt in
	n) runs=$OPTARG ;;
	o) out=$OPTARG ;;
	w) write=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
modes=${1:-both}
case $modes in
host | vm | both) ;;
*) usage ;;
esac
[ "$(id -u)" = 0 ] || { echo "accuracy.sh: needs root to create cgroups" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
json=${out:-$tmp/json}
mkdir -p "$json"
bin=$tmp/poolagent
CGO_ENABLED=0 go build -o "$bin" ./cmd/poolagent
go build -o "$tmp/gen" ./internal/accuracy/gen

echo "host: $(uname -r), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "runs per scenario: $runs"
echo
for f in testdata/scenarios/compare-*.scn; do
	name=$(basename "$f" .scn)
	if [ "$modes" != vm ]; then
		"$bin" compare -q -s "$f" --repeat "$runs" --format json >"$json/$name.host.json"
	fi
	if [ "$modes" != host ]; then
		scripts/vm/run.sh "$bin" compare -q -s "$f" --repeat "$runs" --format json >"$json/$name.vm.json"
	fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
reports=("$json"/*.json)
if [ -n "$write" ]; then
	"$tmp/gen" -md -o internal/accuracy/measured.go "${reports[@]}"
	echo
	echo "wrote internal/accuracy/measured.go"
else
	"$tmp/gen" -md "${reports[@]}"
fi
[ -z "$out" ] || echo "JSON reports: $out"
