#!/bin/bash
# bench-admission.sh - the admission figures of docs/performance.md
# "Admission": the real `poolagent daemon` binary on real cgroups below a
# fresh test root (removed afterwards). Needs root.
#
#   1. `poolagent run -- /bin/true` and the slim `poolagent-run -- /bin/true`
#      against `/bin/true` alone, interleaved: wall-clock medians and each
#      client's overhead, the difference of medians (with the query cgroup
#      created, the process moved, the cgroup found empty and removed,
#      statistics read), plus CPU time per run of each client (with its
#      children, the gate and the command) and per query of the daemon;
#   2. queries admitted per second in the unlimited default pool, over the
#      socket, 16 clients at once;
#   3. the daemon's resident memory with 100 pools and 1,000 queued clients;
#   4. `poolagent-run -- /bin/true` while 8 running queries flood the socket
#      with `exited` messages, against the same without them (docs/security.md);
#   5. a pool of one slot draining 1,000 queries queued by 100 uids, under
#      QUEUE_POLICY='fair' against FIFO: admissions per second and the
#      daemon's RSS with the queue full, and their ratios (docs/pools.md).
#
# Then, for scale, what starting each client binary costs here (their help
# text) beside an empty Go program, /bin/true, and the gate's shell running
# /bin/true (perf stat, when installed). Env: RUNS (default 300), ADMISSIONS (default
# 20000), SPAM_RUNS (default 100), FAIR_ROUNDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-admission.sh: needs root (it creates cgroups)" >&2; exit 1; }

echo "== host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
bench() {
	go test -count=1 -run '^$' -bench "^$1\$" -benchtime "$2" ./internal/daemon/ | grep -E '^Benchmark'
}
echo "== poolagent run -- /bin/true vs poolagent-run -- /bin/true vs /bin/true (${RUNS:-300} runs each, interleaved)"
bench BenchmarkRunTrue "${RUNS:-300}x"
echo "== admissions per second, default pool, over the socket"
bench BenchmarkAdmissions "${ADMISSIONS:-20000}x"
echo "== daemon RSS, 100 pools, 1,000 queued clients"
bench BenchmarkQueuedRSS 3x
echo "== poolagent-run -- /bin/true with 8 clients spamming exited, against without (${SPAM_RUNS:-100} runs each, interleaved)"
bench BenchmarkExitedSpam "${SPAM_RUNS:-100}x"
echo "== fair queue against FIFO, 1,000 queries of 100 uids draining through one slot (${FAIR_ROUNDS:-3} rounds of each)"
bench BenchmarkFairQueue "${FAIR_ROUNDS:-3}x"

if command -v perf >/dev/null; then
	bin=$(mktemp -d)
	trap 'rm -rf "$bin"' EXIT
	go build -o "$bin/poolagent" ./cmd/poolagent
	go build -o "$bin/poolagent-run" ./cmd/poolagent-run
	printf 'package main\n\nfunc main() {}\n' > "$bin/empty.go"
	go build -o "$bin/empty-go" "$bin/empty.go"
	echo "== for scale: starting each binary (help text), an empty Go program, /bin/true and the gate's shell, perf stat -r 50"
	perfstat() { # LABEL ARGV...
		printf '%-36s' "$1"
		shift
		perf stat -r 50 "$@" 2>&1 >/dev/null | awk '/task-clock/ { printf " %s ms CPU,", $1 } /elapsed/ { printf " %.2f ms wall\n", $1 * 1000 }'
	}
	perfstat "poolagent --help" "$bin/poolagent" --help
	perfstat "poolagent-run --help" "$bin/poolagent-run" --help
	perfstat "empty Go program" "$bin/empty-go"
	perfstat "/bin/true" /bin/true
	perfstat "gate: sh -c 'exec \"\$@\"' /bin/true" /bin/sh -c 'exec "$@"' gate /bin/true
fi
