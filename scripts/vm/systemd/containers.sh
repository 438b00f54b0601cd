#!/bin/bash
# containers.sh - containers in pools through poolagent-oci on a real
# systemd host, run as root inside the systemd VM (scripts/vm/systemd/test.sh
# stages it with the binaries and the scripts, and runs it after
# lifecycle.sh). podman, containerd's ctr, crun and runc come from Debian 12's
# apt (setup.sh); no registry is reachable, so every container's root is a
# directory holding a static busybox. Each step asserts what an operator
# would check; the first failed check stops the run with the journal's tail.
set -Eeuo pipefail
cd "$(dirname "$0")"
export SYSTEMD_PAGER= SYSTEMD_COLORS=0 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

STEPS_NAME=containers
. ./steps.sh

pools=/sys/fs/cgroup/system.slice/poolagent-pools.scope/pools
oci=/usr/local/bin/poolagent-oci
rootfs=/var/lib/poolagent-test/rootfs
shared=/var/lib/poolagent-test/shared
# A container of pool ctr through poolagent-oci: NAME [PODMAN-OPTION...] -- COMMAND...
prun() {
	local name=$1 opts=()
	shift
	while [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	podman run --rm --name "$name" --network none --runtime "$oci" --annotation io.poolagent.pool=ctr \
		-v "$shared:/shared" "${opts[@]}" --rootfs "$rootfs" "$@"
}
# running [POOL]: how many queries of the pool (ctr) `poolagent queries` lists as running.
running() { poolagent queries 2>/dev/null | awk -v p="${1:-ctr}" '$2 == p && $3 == "RUNNING"' | wc -l; }
# running_is N [POOL]: whether N queries of the pool (ctr) run; read at
# each try of until_, not once before it.
running_is() { test "$(running "${2:-ctr}")" = "$1"; }

step "engines: podman $(podman --version | awk '{print $3}'), crun $(crun --version | awk 'NR == 1 {print $3}'), runc $(runc --version | awk 'NR == 1 {print $3}'), containerd $(containerd --version | awk '{print $3}')"
# The initramfs root: podman's overlay storage cannot sit on tmpfs, and
# pivot_root cannot leave the initramfs (the systemd-vm recipe's step 6).
mkdir -p /etc/containers "$rootfs/bin" "$rootfs/etc" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$shared"
cat >/etc/containers/storage.conf <<'CONF'
[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
CONF
printf '[engine]\nno_pivot_root = true\n' >/etc/containers/containers.conf
cp /bin/busybox "$rootfs/bin/busybox"
chroot "$rootfs" /bin/busybox --install -s /bin
echo 'root:x:0:0:root:/:/bin/sh' >"$rootfs/etc/passwd"
check "podman runs a container with plain crun" sh -c "podman run --rm --network none --rootfs $rootfs /bin/echo hi | grep -qx hi"

step "install poolagent with poolagent-oci; pool ctr: CONCURRENT_QUERY_LIMIT=2, QUEUE_SIZE=1"
quote env POOLAGENT_BINARY="$PWD/bin/poolagent" POOLAGENT_RUN_BINARY="$PWD/bin/poolagent-run" POOLAGENT_OCI_BINARY="$PWD/bin/poolagent-oci" scripts/install.sh
check "installed $oci" test -x "$oci"
cat >/etc/poolagent/pools.sql <<'SQL'
CREATE RESOURCE POOL ctr WITH (CONCURRENT_QUERY_LIMIT = 2, QUEUE_SIZE = 1,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 25,
    QUERY_MEMORY_LIMIT_PERCENT_PER_NODE = 5);
CREATE RESOURCE POOL ctrd WITH (CONCURRENT_QUERY_LIMIT = 1, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 10);
CREATE RESOURCE POOL CLASSIFIER ctr_c1 WITH (RESOURCE_POOL = 'ctrd', HAS_APP_NAME = 'ctrd-c1');
-- A classifier places a query only in a pool its member may use: root,
-- which runs the runtimes, too.
GRANT USE ON RESOURCE POOL ctrd TO root;
SQL
mkdir -p /etc/systemd/system/poolagent.service.d
printf '[Service]\nExecStart=\nExecStart=%s --metrics-listen 127.0.0.1:9561\n' \
	"$(systemctl show -P ExecStart poolagent.service | sed -n 's/.*argv\[\]=\([^;]*\) ;.*/\1/p' | sed 's/ *$//')" \
	>/etc/systemd/system/poolagent.service.d/metrics.conf
systemctl daemon-reload
systemctl restart poolagent.service
check "pool ctr's cgroup is there" until_ 10 test -d "$pools/ctr"

step "a malformed bundle and an unknown annotation are refused at once, nothing started"
bad=$(mktemp -d)
echo '{"ociVersion": "1.0.2", "process": ' >"$bad/config.json"
status=0
"$oci" create --bundle "$bad" bad1 >/tmp/bad.out 2>&1 || status=$?
quote cat /tmp/bad.out
check "poolagent-oci create exits non-zero" test "$status" != 0
check "the error names the file and the place" grep -q 'config.json is not an OCI runtime config.*line' /tmp/bad.out
status=0
prun badann --annotation io.poolagent.pol=ctr -- /bin/true >/tmp/badann.out 2>&1 || status=$?
quote cat /tmp/badann.out
check "podman shows the unknown annotation" grep -q 'unknown annotation io.poolagent.pol' /tmp/badann.out
check "and fails" test "$status" != 0
check "no query ran" test "$(running)" = 0

step "four containers into pool ctr at once: two run, one waits, one is refused"
rm -f "$shared"/*
for i in 1 2 3 4; do
	# The ERR trap is the script's, not the refused container's.
	(
		trap - ERR
		prun "four$i" -- sh -c "echo \$(cut -d' ' -f1 /proc/uptime) >/shared/four$i.start; sleep 6; echo \$(cut -d' ' -f1 /proc/uptime) >/shared/four$i.end"
	) >"/tmp/four$i.out" 2>&1 &
	eval "four$i=\$!"
done
statuses=()
for i in 1 2 3 4; do
	eval "pid=\$four$i"
	if wait "$pid"; then statuses+=("$i:0"); else statuses+=("$i:$?"); fi
done
echo "   exit statuses: ${statuses[*]}"
for i in 1 2 3 4; do quote cat "/tmp/four$i.out"; done
ran=$(ls "$shared"/*.end 2>/dev/null | wc -l)
check "three containers ran" test "$ran" = 3
refused=$(grep -l 'Query failed during adding/waiting in workload pool ctr' /tmp/four?.out | wc -l)
check "one was refused with YDB's text, shown by podman" test "$refused" = 1
for f in "$shared"/*.start; do
	printf '%s %s\n' "$(cat "$f")" "$(cat "${f%.start}.end")"
done >/tmp/intervals
quote cat /tmp/intervals
most=$(awk '{ print $1, 1; print $2, -1 }' /tmp/intervals | sort -k1,1n -k2,2n | awk '{ c += $2; if (c > m) m = c } END { print m }')
check "at most two ran at once, measured inside the containers (most: $most)" test "$most" -le 2
check "one started after another ended (it waited)" awk 'NR == FNR { end[NR] = $2; next } { for (i in end) if ($1 >= end[i]) found = 1 } END { exit !found }' /tmp/intervals /tmp/intervals

step "inside, a container sees its query's cpu.max and memory.max and POOLAGENT_CPU_LIMIT"
rm -f "$shared"/*
prun limits -d -- sh -c 'cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max >/shared/limits; echo "$POOLAGENT_CPU_LIMIT" >/shared/cpulimit; sleep 120' >/dev/null
check "the container wrote what it sees" until_ 30 test -s "$shared/cpulimit"
q=$(ls -d "$pools"/ctr/q* | head -1)
quote cat "$shared/limits" "$shared/cpulimit"
check "its query cgroup holds its cgroup (leaf: container)" test -d "$q/container"
check "cpu.max inside is the query's ($(cat "$q/cpu.max"))" test "$(sed -n 1p "$shared/limits")" = "$(cat "$q/cpu.max")"
check "memory.max inside is the query's ($(cat "$q/memory.max"))" test "$(sed -n 2p "$shared/limits")" = "$(cat "$q/memory.max")"
check "POOLAGENT_CPU_LIMIT is 25% of the pool's 1 CPU" test "$(cat "$shared/cpulimit")" = 0.25

step "poolagent queries lists the running container; stat and the metrics count it"
quote poolagent queries
check "poolagent queries lists it in pool ctr" test "$(running)" = 1
check "the metrics count it" sh -c 'curl -fsS http://127.0.0.1:9561/metrics | grep -q "^poolagent_pool_running_queries{pool=\"ctr\"} 1"'
quote sh -c "poolagent stat --root $pools | head -20"
check "poolagent stat shows pool ctr" sh -c "poolagent stat --root $pools | grep -q ctr"

step "restart the daemon while containers run: they are adopted"
prun adopt2 -d -- sleep 60 >/dev/null
check "two containers run" until_ 30 running_is 2
old=$(systemctl show -P MainPID poolagent.service)
systemctl restart poolagent.service
check "a new daemon" test "$(systemctl show -P MainPID poolagent.service)" != "$old"
check "the new daemon counts both containers" until_ 20 running_is 2
quote poolagent queries
(
	trap - ERR
	prun adopt3 -- /bin/true
) >/tmp/adopt3.out 2>&1 &
a3=$!
check "a third waits in the queue behind the two adopted" until_ 30 sh -c 'poolagent queries | grep -q QUEUED'
status=0
prun adopt4 -- /bin/true >/tmp/adopt4.out 2>&1 || status=$?
quote cat /tmp/adopt4.out
check "a fourth is refused: the adopted count against the limit" grep -q 'Query failed during adding/waiting in workload pool ctr' /tmp/adopt4.out
for c in limits adopt2; do podman kill "$c" >/dev/null 2>&1 || true; done
check "once the adopted end, the queued one runs" wait "$a3"
check "and every slot is free" until_ 30 running_is 0

step "a container over its memory limit: the daemon logs its query's OOM kill"
# podman creates, then starts: the runtime's create has returned before
# the container runs, so the kill is told where the query ends, in the
# daemon's log (docs/containers.md "Memory").
# tail keeps what it reads until it has its last lines: of /dev/zero, no
# line ever ends, so it grows until a memory limit stops it.
eat='exec tail /dev/zero'
status=0
prun oom -- sh -c "$eat" >/tmp/oom.out 2>&1 || status=$?
quote cat /tmp/oom.out
check "the container did not survive (status $status)" test "$status" != 0
# oomlog: the daemon's lines on OOM kills at pool ctr's query memory limit.
oomlog() { journalctl -u poolagent.service --no-pager -o cat | grep "OOM killer at a memory limit" | grep "pool=ctr" | grep "limit=query"; }
check "the daemon's log says its query was OOM-killed at the query's memory limit" until_ 30 oomlog
quote oomlog
check "its slot was freed" until_ 20 running_is 0

step "runc run without --detach through poolagent-oci: the OOM kill is told on its standard error too"
bundle=/var/lib/poolagent-test/bundle
mkdir -p "$bundle"
rm -f "$bundle/config.json"
(cd "$bundle" && runc spec)
printf '#!/bin/sh\n%s\n' "$eat" >"$rootfs/bin/eat"
chmod 755 "$rootfs/bin/eat"
# runc's template runs sh on a terminal in ./rootfs: the job is /bin/eat,
# without one, in the busybox root, in pool ctr.
sed -i -e 's/"terminal": true/"terminal": false/' -e 's|^\(\s*\)"sh"$|\1"/bin/eat"|' -e "s|\"path\": \"rootfs\"|\"path\": \"$rootfs\"|" \
	-e 's|"ociVersion": "\([^"]*\)",|"ociVersion": "\1", "annotations": {"io.poolagent.pool": "ctr"},|' "$bundle/config.json"
status=0
"$oci" --runtime-path /usr/bin/runc run --no-pivot --bundle "$bundle" oomrun >/tmp/oomrun.out 2>&1 </dev/null || status=$?
quote cat /tmp/oomrun.out
check "runc run exits non-zero (status $status)" test "$status" != 0
check "its standard error says the query was OOM-killed at the query's memory limit" grep -q "poolagent-oci: query .* in pool ctr was killed by the kernel's OOM killer: the query's memory limit" /tmp/oomrun.out
check "its slot was freed" until_ 20 running_is 0

step "containerd: ctr run --runc-binary poolagent-oci, classified by the container's name"
# ctr mounts no cgroup file system in a container run on a bare
# --rootfs: inside, it is told its CPU cap by POOLAGENT_CPU_LIMIT.
# The guest's root is its initramfs, which pivot_root cannot leave, and
# ctr's --no-pivot would replace the shim's options, --runc-binary with
# them (containerd 1.6 takes a task's options over its runtime's): so
# containerd finds, first on its PATH, a runc that adds --no-pivot to
# create, and poolagent-oci runs that runc.
nopivot=/var/lib/poolagent-test/nopivot
mkdir -p "$nopivot" /etc/systemd/system/containerd.service.d
cat >"$nopivot/runc" <<'SH'
#!/bin/sh
n=$#
for a in "$@"; do
	set -- "$@" "$a"
	[ "$a" = create ] && set -- "$@" --no-pivot
done
shift "$n"
exec /usr/bin/runc "$@"
SH
chmod 755 "$nopivot/runc"
printf '[Service]\nEnvironment=PATH=%s:%s\n' "$nopivot" "$PATH" >/etc/systemd/system/containerd.service.d/nopivot.conf
systemctl daemon-reload
# Debian starts containerd at boot: a restart takes the new PATH.
systemctl restart containerd
check "containerd is up" until_ 60 ctr version
rm -f "$shared"/*
(
	trap - ERR
	ctr run --rm --runc-binary "$oci" --mount "type=bind,src=$shared,dst=/shared,options=rbind:rw" --rootfs "$rootfs" ctrd-c1 \
		/bin/sh -c 'cat /proc/self/cgroup >/shared/cgroup; echo "$POOLAGENT_CPU_LIMIT" >/shared/cpulimit; sleep 30'
) >/tmp/ctr.out 2>&1 &
c1=$!
check "the container runs as a query of pool ctrd, chosen by its name" until_ 60 running_is 1 ctrd
quote poolagent queries
check "it wrote what it sees" until_ 30 test -s "$shared/cpulimit"
quote cat "$shared/cgroup" "$shared/cpulimit"
check "its cgroup is its query's leaf" grep -q "^0::/system.slice/poolagent-pools.scope/pools/ctrd/q.*/container\$" "$shared/cgroup"
cg=/sys/fs/cgroup$(cut -d: -f3 "$shared/cgroup")
check "its query cgroup's cpu.max is pool ctrd's (10% of 2 CPUs)" grep -qx '20000 100000' "$(dirname "$cg")/cpu.max"
check "and POOLAGENT_CPU_LIMIT 0.2" test "$(cat "$shared/cpulimit")" = 0.2
# A reload compares the pool tree with the plan (reconcile) while the
# container's leaf and its runtime's controllers are there: the last
# step checks that nothing was taken for drift.
systemctl reload poolagent.service
check "ctr run exits 0" wait "$c1"
quote cat /tmp/ctr.out
check "its slot was freed" until_ 30 running_is 0 ctrd
systemctl stop containerd
rm -r /etc/systemd/system/containerd.service.d
systemctl daemon-reload

step "the runtimes' cgroup writes (runc and crun enable every controller in the query cgroup's ancestors) did not disturb the daemon"
quote sh -c "cat $pools/cgroup.subtree_control $pools/ctr/cgroup.subtree_control"
# A reload compares the pool tree with the plan (reconcile), as the
# daemon does every 30 s while the containers above ran.
systemctl reload poolagent.service
check "the reload is done (its STATUS=)" until_ 30 sh -c 'systemctl show -P StatusText poolagent.service | grep -q "^reloaded:"'
check "no drift repaired and no error in the daemon's log since containers.sh began" \
	sh -c "! journalctl -u poolagent.service --since @${began%.*} --no-pager -o cat | grep -E 'drifted|level=ERROR'"

step "clean up"
rm -r /etc/systemd/system/poolagent.service.d
quote scripts/uninstall.sh --purge
awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "containers passed in %.1fs\n", b - a }'
