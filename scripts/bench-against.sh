#!/bin/bash
# bench-against.sh REV - this tree's start latency, admissions per second
# and daemon memory against those of git revision REV, measured in one run
# with the two interleaved (docs/performance.md, "Against an earlier tree"):
#
#   1. `poolagent run -- /bin/true` and `poolagent-run -- /bin/true`, each
#      tree's clients through a real daemon of the same tree, each daemon on
#      its own pool root and state directory; both trees' ways alternate
#      within every round (scripts/benchstart -base);
#   2. BenchmarkAdmissions of both trees' daemon packages (queries admitted
#      per second, 16 clients, the default pool), the trees alternating
#      round by round, in turn first;
#   3. BenchmarkQueuedRSS likewise (the daemon's resident memory with 100
#      pools, 100 running and 1,000 queued clients).
#
# Every figure is this tree over REV's, round by round: minimum, median and
# maximum (< 1: this tree is faster or smaller; for admissions/s > 1 is
# faster). Needs root (real cgroups below the host's cpu hierarchy; each
# benchmark makes and removes its own subtree), Go, and libcgroup's cgexec
# for scale (Debian's cgroup-tools, installed with apt when missing). Env: RUNS (start
# rounds, default 40), ROUNDS (benchmark rounds of each tree, default 5),
# ADMISSIONS (admissions per round, default 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-against.sh: needs root (it creates cgroups)" >&2; exit 1; }
[ $# = 1 ] || { echo "usage: bench-against.sh REV (a git revision: the tree to compare this one with)" >&2; exit 2; }
rev=$(git rev-parse --short "$1^{commit}") || { echo "bench-against.sh: $1 is not a revision of this repository" >&2; exit 2; }
rounds=${ROUNDS:-5}
if ! command -v cgexec >/dev/null; then
	apt-get install -y cgroup-tools >/dev/null || { apt-get update >/dev/null && apt-get install -y cgroup-tools >/dev/null; }
fi

tmp=$(mktemp -d)
cleanup() {
	if [ -d "$tmp/tree" ]; then git worktree remove --force "$tmp/tree"; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
chmod 755 "$tmp"
git worktree add -q --detach "$tmp/tree" "$rev"
# daemondir TREE names TREE's daemon package: internal/daemon, or daemon
# in a tree from before the program's packages moved under internal/.
daemondir() {
	if [ -d "$1/internal/daemon" ]; then echo internal/daemon; else echo daemon; fi
}
# build DIR TREE builds TREE's binaries and daemon benchmarks into DIR.
build() {
	mkdir -p "$1"
	(cd "$2" && CGO_ENABLED=0 go build -o "$1/poolagent" ./cmd/poolagent &&
		CGO_ENABLED=0 go build -o "$1/poolagent-run" ./cmd/poolagent-run &&
		go test -c -o "$1/daemon.test" "./$(daemondir "$2")")
}
build "$tmp/this" "$PWD"
build "$tmp/base" "$tmp/tree"
go build -o "$tmp/this/benchstart" ./scripts/benchstart
go build -o "$tmp/this/goexec" ./scripts/benchstart/goexec

echo "== $(nproc) CPUs, $(uname -r), $(go version | cut -d' ' -f3); this tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + changes'), base $rev; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 1. starting /bin/true in a query, ${RUNS:-40} rounds"
"$tmp/this/benchstart" -bin "$tmp/this" -base "$tmp/base" -cgexec "$(command -v cgexec)" -cmd "$(readlink -f /bin/true)" -runs "${RUNS:-40}"

# bench TREE BENCHMARK BENCHTIME UNIT prints the figure in UNIT that TREE's
# BENCHMARK reports. The benchmark builds the daemon of its own tree: it
# runs in that tree's internal/daemon folder.
bench() {
	local src=$PWD
	[ "$1" = base ] && src=$tmp/tree
	(cd "$src/$(daemondir "$src")" && POOLAGENT_REQUIRE_KERNEL=1 "$tmp/$1/daemon.test" -test.run '^$' -test.bench "^$2\$" -test.benchtime "$3") |
		awk -v unit="$4" '/^Benchmark/ { for (i = 2; i <= NF; i++) if ($i == unit) { print $(i - 1); found = 1 } } END { if (!found) exit 1 }'
}
# compare BENCHMARK BENCHTIME UNIT runs BENCHMARK in both trees, ROUNDS
# times each, alternating which goes first, and prints both medians and
# the ratios this/base.
compare() {
	local pairs=
	for ((i = 0; i < rounds; i++)); do
		if ((i % 2 == 0)); then
			a=$(bench this "$@"); b=$(bench base "$@")
		else
			b=$(bench base "$@"); a=$(bench this "$@")
		fi
		echo "   round $((i + 1)): this $a, base $b $3" >&2
		pairs="$pairs$a $b"$'\n'
	done
	printf '%s' "$pairs" | awk -v unit="$3" '
		function median(v, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t } return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
		{ n++; a[n] = $1; b[n] = $2; r[n] = $1 / $2 }
		END {
			ma = median(a, n); mb = median(b, n); mr = median(r, n)
			printf "this %.1f, base %.1f %s (medians of %d rounds); this/base min %.3f, median %.3f, max %.3f\n", ma, mb, unit, n, r[1], mr, r[n]
		}'
}
echo "== 2. admissions per second, default pool, 16 clients, ${ADMISSIONS:-20000} per round, $rounds rounds of each tree"
compare BenchmarkAdmissions "${ADMISSIONS:-20000}x" admissions/s
echo "== 3. daemon RSS, 100 pools, 100 running and 1,000 queued clients, $rounds rounds of each tree"
compare BenchmarkQueuedRSS 1x MB-daemon-rss
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
