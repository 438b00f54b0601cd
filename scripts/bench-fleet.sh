#!/bin/bash
# bench-fleet.sh - the fleet mode figures of docs/performance.md "Fleet
# mode" and docs/fleet.md, in one run against a 3-member etcd cluster of
# separate etcd-member processes on loopback, fsync on (package fleet's
# benchmarks):
#
#   1. admission latency, single host (admission.Controller) and fleet (one
#      etcd transaction), interleaved: p50, p99 and what etcd adds;
#   2. admissions per second across 3 nodes with 96 concurrent clients,
#      with C = 32 (most queue) and C = 1000 (none do);
#   3. slot hand-over: a query ends on node A, the one waiting on node B
#      starts: p50, p99;
#   4. the same cluster's own write rate with 96 clients, the ceiling;
#   5. as root (real daemons in cgroups below the host's cgroup v1 cpu
#      hierarchy): 30 loops of `poolagent run -- /bin/true` through 3
#      fleet nodes on 3 fsync members against one daemon without etcd, in
#      alternating phases (admissions/s, p50/p99, CPU per admission), and
#      a free pool's start beside a saturated limited pool with etcd 25 ms
#      away (BenchmarkFleetEndToEnd, BenchmarkFreePoolBesideEtcd);
#   6. 3, 10 and 50 node processes against the same members, 100 clients
#      spread over them (BenchmarkFleetNodes, docs/fleet.md "Fifty nodes").
#
# Env: N (default 2000) iterations of 1-4, E (default 2) rounds of 5,
# POOLAGENT_FLEET_BENCH_SECONDS (default 10) the load of each size of 6.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/etcd-member" ./internal/etcdtest/etcd-member
export POOLAGENT_ETCD_MEMBER=$bin/etcd-member
echo "== host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
go test -count=1 -run '^$' -bench '^Benchmark(AdmitLatency|ClusterAdmissions|HandOver|EtcdWrites)$' \
	-benchtime "${N:-2000}x" ./internal/fleet/ 2>&1 | grep -E '^(Benchmark|FAIL|---)|_test\.go'
if [ "$(id -u)" = 0 ]; then
	go test -count=1 -run '^$' -bench '^Benchmark(FleetEndToEnd|FreePoolBesideEtcd)$' \
		-benchtime "${E:-2}x" -timeout 20m ./internal/fleet/ 2>&1 | grep -E '^(Benchmark|FAIL|---)|_test\.go'
else
	echo "== not root: the end-to-end benchmarks (real daemons in cgroups) skipped"
fi
go test -count=1 -run '^$' -bench '^BenchmarkFleetNodes$' -benchtime 1x -timeout 20m \
	./internal/fleet/ 2>&1 | grep -E '^(Benchmark|FAIL|---)|_test\.go'
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
