#!/bin/bash
# bench-simulate.sh - measures the simulator's event engine (simulate.Run)
# against the chapter's per-tick reference loop on the workloads of
# BenchmarkRun, in one go test run, and prints per workload how many times
# faster the event engine is. The per-tick 10^9-tick case alone takes
# seconds. Extra arguments go to go test (e.g. -benchtime=3x); with
# -count above 1 the table shows the last figures of each benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."

out=$(go test -run '^$' -bench '^BenchmarkRun$' -benchmem "$@" ./simulate/)
echo "$out"
echo
echo "$out" | awk '
	/^BenchmarkRun\// {
		split($1, part, "/")
		workload = part[2]
		engine = part[3]
		sub(/-[0-9]+$/, "", engine)
		for (i = 2; i < NF; i++) {
			if ($(i + 1) == "ns/op") ns[workload, engine] = $i
			if ($(i + 1) == "B/op") bytes[workload, engine] = $i
			if ($(i + 1) == "allocs/op") allocs[workload, engine] = $i
		}
		if (!(workload in seen)) { seen[workload] = 1; order[++n] = workload }
	}
	END {
		printf "%-20s %12s %14s %9s %10s %10s %12s %11s\n", "workload", "event ns/op", "per-tick ns/op", "speed-up", "event B/op", "tick B/op", "event allocs", "tick allocs"
		for (k = 1; k <= n; k++) {
			w = order[k]
			printf "%-20s %12.0f %14.0f %8.0fx %10.0f %10.0f %12.0f %11.0f\n", w, ns[w, "event"], ns[w, "tick"], ns[w, "tick"] / ns[w, "event"], bytes[w, "event"], bytes[w, "tick"], allocs[w, "event"], allocs[w, "tick"]
		}
	}'
