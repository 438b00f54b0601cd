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
# and the model's error per workload class. With -w, the table, with the
# date, each kernel and the load, is also written between the accuracy
# run's markers of docs/accuracy.md, and the error per class to
# internal/accuracy/measured.go, the table `poolagent advise` takes its
# margin from; both from every report in OUT, so a host pass and a VM pass
# into the same OUT make one table.
#
# Prints a progress line per scenario and machine on stderr: its place,
# the time it took, the load after it and compare's verdict.
#
# Usage: scripts/accuracy.sh [-n RUNS] [-o OUT] [-w] [host|vm|both] [SCENARIO...]
# SCENARIO is a compare scenario's name or file (compare-placement or
# testdata/scenarios/compare-placement.scn); none means every one, as -w
# needs. Needs root; the VM needs scripts/vm/setup.sh to have run once.
# Measures CPU time: run it alone, e.g. under flock /tmp/poolagent-kernel.lock.
# A benchmark, not a test: scripts/test.sh does not run it.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 [-n RUNS] [-o OUT] [-w] [host|vm|both] [SCENARIO...]" >&2; exit 2; }
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
[ $# -gt 0 ] && shift
scenarios=()
for s in "$@"; do
	f=testdata/scenarios/$(basename "$s" .scn).scn
	[ -f "$f" ] || { echo "accuracy.sh: no scenario $s (accepted: a name or file of testdata/scenarios/compare-*.scn)" >&2; exit 2; }
	scenarios+=("$f")
done
if [ ${#scenarios[@]} -eq 0 ]; then
	scenarios=(testdata/scenarios/compare-*.scn)
elif [ -n "$write" ]; then
	echo "accuracy.sh: -w writes the whole table: give no SCENARIO" >&2
	exit 2
fi
[ "$(id -u)" = 0 ] || { echo "accuracy.sh: needs root to create cgroups" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
json=${out:-$tmp/json}
mkdir -p "$json"
bin=$tmp/poolagent
CGO_ENABLED=0 go build -o "$bin" ./cmd/poolagent
go build -o "$tmp/gen" ./internal/accuracy/gen

date=$(date -u +%F)
echo "$date $(date -u +%T) UTC; host: Linux $(uname -r), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "runs per scenario: $runs; scenarios: ${#scenarios[@]}; on: $modes"
echo
# measure runs one scenario on one machine (host or vm) into its report
# and prints its progress line.
measure() {
	local f=$1 where=$2 i=$3 name start report
	name=$(basename "$f" .scn)
	report=$json/$name.$where.json
	start=$(date +%s)
	if [ "$where" = host ]; then
		"$bin" compare -q -s "$f" --repeat "$runs" --format json >"$report"
	else
		scripts/vm/run.sh "$bin" compare -q -s "$f" --repeat "$runs" --format json >"$report"
	fi
	echo "[$i/${#scenarios[@]}] $where $name: $(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg); $("$tmp/gen" -line "$report")" >&2
}
i=0
for f in "${scenarios[@]}"; do
	i=$((i + 1))
	[ "$modes" = vm ] || measure "$f" host $i
	[ "$modes" = host ] || measure "$f" vm $i
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# The table holds the scenarios of this run, on both machines when OUT
# has the other's reports of them from an earlier run (-w host, then -w
# vm); any other report in OUT is not this table's.
reports=()
for f in "${scenarios[@]}"; do
	for where in host vm; do
		report=$json/$(basename "$f" .scn).$where.json
		[ ! -f "$report" ] || reports+=("$report")
	done
done
if [ -n "$write" ]; then
	"$tmp/gen" -md -o internal/accuracy/measured.go -doc docs/accuracy.md -date "$date" "${reports[@]}"
	echo
	echo "wrote internal/accuracy/measured.go and docs/accuracy.md's accuracy run"
else
	"$tmp/gen" -md "${reports[@]}"
fi
[ -z "$out" ] || echo "JSON reports: $out"
