#!/bin/bash
# fleet-demo.sh - a fleet of three nodes on one machine (docs/fleet.md):
# a 3-member etcd cluster on loopback (internal/etcdtest/etcd-member, the
# etcd server embedded, built here and never part of poolagent), three
# `poolagent daemon --etcd` as nodes n0, n1 and n2 with their own pool
# roots, sockets and state, sharing one pool olap with
# CONCURRENT_QUERY_LIMIT=4 and QUEUE_SIZE=6 for the whole cluster. It sends
# a burst of 30 queries (`sleep 2`) through all three nodes at once, shows
# the cluster's view while they run, and what each client got: 4 run at a
# time across the cluster, 6 wait, 20 are refused with the cluster's
# figures. Needs root (the pool roots are cgroups) and Go.
#
# Everything it makes is below a uniquely named temporary directory and a
# uniquely named cgroup subtree (poolagent-fleet-demo.PID under the host's
# cgroup v1 cpu hierarchy, or under /sys/fs/cgroup on a cgroup v2 host);
# both are removed when it exits, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "fleet-demo.sh: needs root (each node's pools are cgroups)" >&2; exit 1; }

# The subtree, and on cgroup v1 its twin in the cpuacct hierarchy when
# that is mounted apart from cpu (the daemon reads usage there).
name=poolagent-fleet-demo.$$
if [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
	cg=/sys/fs/cgroup/cpu/$name
	cgs=("$cg")
	if [ -d /sys/fs/cgroup/cpuacct ] && ! [ /sys/fs/cgroup/cpuacct -ef /sys/fs/cgroup/cpu ]; then
		cgs+=("/sys/fs/cgroup/cpuacct/$name")
	fi
else
	cg=/sys/fs/cgroup/$name
	cgs=("$cg")
fi
dir=$(mktemp -d /tmp/poolagent-fleet-demo.XXXXXX)
pids=()
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	# Daemons first (they end their queries' waits), then the members.
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	for d in "${cgs[@]}"; do
		[ -d "$d" ] || continue
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[ -d "$d" ] && echo "fleet-demo.sh: could not remove $d" >&2
	done
	rm -rf "$dir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== building poolagent, poolagent-run and etcd-member into $dir"
go build -o "$dir/poolagent" ./cmd/poolagent
go build -o "$dir/poolagent-run" ./cmd/poolagent-run
go build -o "$dir/etcd-member" ./internal/etcdtest/etcd-member

# Six loopback ports no one listens on now.
ports=()
while [ ${#ports[@]} -lt 6 ]; do
	p=$((20000 + RANDOM % 30000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && [[ ! " ${ports[*]} " =~ " $p " ]]; then
		ports+=("$p")
	fi
done
initial="m0=http://127.0.0.1:${ports[1]},m1=http://127.0.0.1:${ports[3]},m2=http://127.0.0.1:${ports[5]}"
endpoints="http://127.0.0.1:${ports[0]},http://127.0.0.1:${ports[2]},http://127.0.0.1:${ports[4]}"

echo "== etcd: 3 members on $endpoints"
for i in 0 1 2; do
	"$dir/etcd-member" -name "m$i" -data-dir "$dir/m$i" \
		-client-url "http://127.0.0.1:${ports[$((2 * i))]}" -peer-url "http://127.0.0.1:${ports[$((2 * i + 1))]}" \
		-initial-cluster "$initial" >"$dir/m$i.out" 2>"$dir/m$i.log" &
	pids+=($!)
done
for i in 0 1 2; do
	# A member is ready once the cluster has a leader; on a loaded machine
	# that can take a while (etcd-member gives up after a minute).
	for _ in $(seq 900); do
		grep -q ready "$dir/m$i.out" && break
		kill -0 "${pids[$i]}" 2>/dev/null || break
		sleep 0.1
	done
	grep -q ready "$dir/m$i.out" || { echo "etcd member m$i not ready:" >&2; cat "$dir/m$i.log" >&2; exit 1; }
done

cat >"$dir/pools.sql" <<'SQL'
-- At most 4 queries run and 6 wait across the whole cluster.
CREATE RESOURCE POOL olap WITH (
    CONCURRENT_QUERY_LIMIT = 4,
    QUEUE_SIZE = 6
);
SQL
mkdir "${cgs[@]}"
echo "== 3 nodes: poolagent daemon --etcd ... --cluster demo --node nI, pools below $cg/nI"
for i in 0 1 2; do
	mkdir "$dir/state$i"
	"$dir/poolagent" daemon --pools "$dir/pools.sql" --root "$cg/n$i" --socket "$dir/n$i.sock" \
		--state-dir "$dir/state$i" --etcd "$endpoints" --cluster demo --node "n$i" \
		--log-level warn 2>"$dir/n$i.log" &
	pids+=($!)
done
for i in 0 1 2; do
	for _ in $(seq 300); do
		[ -S "$dir/n$i.sock" ] && break
		sleep 0.1
	done
	[ -S "$dir/n$i.sock" ] || { echo "node n$i did not start:" >&2; cat "$dir/n$i.log" >&2; exit 1; }
done

echo "== a burst of 30 queries (sleep 2) in pool olap, 10 through each node at once"
for q in $(seq 0 29); do
	i=$((q % 3))
	timeout 60 "$dir/poolagent-run" --socket "$dir/n$i.sock" --pool olap -- sleep 2 \
		>/dev/null 2>"$dir/q$q.err" </dev/null &
	echo $! >"$dir/q$q.pid"
done
sleep 1
for i in 0 2; do
	echo "-- poolagent pools, asked of node n$i: olap's counts are the cluster's (Node *)"
	"$dir/poolagent" pools --socket "$dir/n$i.sock" | grep -E '^(Name|olap)' || true
done
echo "-- poolagent pools and poolagent pools --local, asked of node n1"
"$dir/poolagent" pools --socket "$dir/n1.sock" || true
"$dir/poolagent" pools --local --socket "$dir/n1.sock" || true
echo "-- poolagent queries, asked of node n1: every node's queries of olap"
"$dir/poolagent" queries --socket "$dir/n1.sock" || true

ran=0 refused=0 stuck=0
for q in $(seq 0 29); do
	status=0
	wait "$(cat "$dir/q$q.pid")" || status=$?
	case $status in
	0) ran=$((ran + 1)) ;;
	124) stuck=$((stuck + 1)) ;;
	*)
		refused=$((refused + 1))
		[ "$refused" = 1 ] && { echo "-- the first refusal:"; cat "$dir/q$q.err"; }
		;;
	esac
done
echo "== $ran queries ran (4 at a time across the cluster), $refused were refused"
[ "$stuck" = 0 ] || { echo "fleet-demo.sh: $stuck queries did not end within 60 s" >&2; exit 1; }
for i in 0 1 2; do
	echo "-- node n$i after the burst"
	"$dir/poolagent" pools --socket "$dir/n$i.sock" | grep -E '^(Name|olap)' || true
done
