#!/bin/bash
# bench-replay.sh - how the cost of replaying a stream of queries grows
# with its length, in both host models: BenchmarkQueryStream of
# ./simulate/ (a pool of 4 CPUs on 8, a group per query, n bursty
# multi-threaded queries over n seconds) for n = 60 ... 3,600, the sizes of
# queryStreamSizes. With a git revision BASE, the kernel model of BASE's
# simulate package runs too, size by size beside this tree's, so the
# before and after figures come from one run; BASE_MAX_N (default 600)
# leaves BASE out of the larger sizes, where an engine whose cost grows
# with the square of the queries would run for hours. BASE must have
# BenchmarkQueryStream (f9baa93 or later). Measure under the kernel lock:
#
#   flock /tmp/poolagent-kernel.lock scripts/bench-replay.sh f9baa93
#
# Each figure is go test's ns/op with -benchtime ${BENCHTIME:-1s}: at
# least one replay, as many as fit in that time.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:-}
base_max=${BASE_MAX_N:-600}
tmp=$(mktemp -d)
cleanup() {
	if [ -d "$tmp/base" ]; then git worktree remove --force "$tmp/base"; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

go test -c -o "$tmp/after.test" ./simulate/
if [ -n "$base" ]; then
	git worktree add -q --detach "$tmp/base" "$base"
	(cd "$tmp/base" && go test -c -o "$tmp/before.test" ./simulate/)
fi

# bench BINARY N MODEL prints the ns/op of BenchmarkQueryStream/n=N/MODEL.
bench() {
	"$1" -test.run '^$' -test.bench "^BenchmarkQueryStream\$/^n=$2\$/^$3\$" -test.benchtime "${BENCHTIME:-1s}" |
		awk '/^BenchmarkQueryStream/ { print $3; found = 1 } END { if (!found) exit 1 }'
}
# ms prints nanoseconds as milliseconds, or "-" for none.
ms() {
	if [ "$1" = - ]; then echo -; else awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e6 }'; fi
}

echo "host: $(uname -r), $(nproc) CPUs, $(go version | cut -d' ' -f3), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before: ${base:-(not measured)}, after: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- simulate || echo ' + changes')"
echo
echo "| queries (= simulated s) | RunKernel before, ms | RunKernel after, ms | speed-up | RunKernel after, µs/query | RunHost, ms |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 60 240 600 1800 3600; do
	before=-
	if [ -n "$base" ] && [ "$n" -le "$base_max" ]; then
		before=$(bench "$tmp/before.test" "$n" kernel)
	fi
	after=$(bench "$tmp/after.test" "$n" kernel)
	host=$(bench "$tmp/after.test" "$n" host)
	speedup=-
	if [ "$before" != - ]; then speedup=$(awk -v b="$before" -v a="$after" 'BEGIN { printf "%.0fx", b / a }'); fi
	perquery=$(awk -v a="$after" -v n="$n" 'BEGIN { printf "%.1f", a / n / 1e3 }')
	echo "| $n | $(ms "$before") | $(ms "$after") | $speedup | $perquery | $(ms "$host") |"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
