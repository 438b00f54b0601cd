#!/bin/bash
# accuracy.sh - how well the kernel-faithful model predicts the kernel.
#
# Runs every shipped compare scenario (testdata/scenarios/compare-*.scn)
# RUNS times (default 3) for real with `poolagent compare`: on this host's
# cgroup cpu controller (v1 on the hybrid development host) and in the
# project's cgroup v2 VM (scripts/vm/run.sh). Prints one markdown row per
# pool or query with a quota: the measured spread of nr_throttled and
# throttled_usec, the kernel model's error against the measured mean (and
# the simple model's for throttled_usec), usage, and whether the target of
# docs/accuracy.md was met. With -o, the host runs' JSON reports go to OUT.
#
# Usage: sudo scripts/accuracy.sh [-n RUNS] [-o OUT] [host|vm|both]
# Needs root; the VM needs scripts/vm/setup.sh to have run once.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
out=
while getopts "n:o:" opt; do
	case $opt in
	n) runs=$OPTARG ;;
	o) out=$OPTARG ;;
	*) echo "usage: $0 [-n RUNS] [-o OUT] [host|vm|both]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
modes=${1:-both}
case $modes in
host | vm | both) ;;
*) echo "usage: $0 [-n RUNS] [-o OUT] [host|vm|both]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "accuracy.sh: needs root to create cgroups" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -z "$out" ] || mkdir -p "$out"
bin=$tmp/poolagent
CGO_ENABLED=0 go build -o "$bin" ./cmd/poolagent

echo "host: $(uname -r), $(nproc) CPUs, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "runs per scenario: $runs"
echo
# rows prints one run's table; only the first keeps the header.
rows() {
	if [ -e "$tmp/header" ]; then tail -n +3 "$1"; else cat "$1"; touch "$tmp/header"; fi
}
for f in testdata/scenarios/compare-*.scn; do
	name=$(basename "$f" .scn)
	if [ "$modes" != vm ]; then
		json=()
		[ -z "$out" ] || json=(--json "$out/$name.host.json")
		"$bin" compare -q -s "$f" --repeat "$runs" --format markdown "${json[@]}" >"$tmp/rows"
		rows "$tmp/rows"
	fi
	if [ "$modes" != host ]; then
		scripts/vm/run.sh "$bin" compare -q -s "$f" --repeat "$runs" --format markdown >"$tmp/rows"
		rows "$tmp/rows"
	fi
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$out" ] || [ "$modes" = vm ] || echo "host JSON reports: $out"
