#!/bin/bash
# lifecycle.sh - the operator's lifecycle of poolagent on a systemd host,
# run as root inside the systemd VM (scripts/vm/systemd/test.sh stages it
# with the binaries and the scripts). Each step does what an operator
# would and asserts what they would check; the first failed check stops
# the run with the journal's tail. Every step prints its time.
set -Eeuo pipefail
cd "$(dirname "$0")"
export SYSTEMD_PAGER= SYSTEMD_COLORS=0 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

. ./steps.sh

scope=/sys/fs/cgroup/system.slice/poolagent-pools.scope
pools=$scope/pools
install_env=(POOLAGENT_BINARY="$PWD/bin/poolagent" POOLAGENT_RUN_BINARY="$PWD/bin/poolagent-run" POOLAGENT_OCI_BINARY="$PWD/bin/poolagent-oci")
snapshot() {
	{ find /usr/local /etc/systemd/system /etc/poolagent /var/lib/poolagent /run/poolagent -xdev 2>/dev/null || true; } |
		{ grep -v '^/etc/systemd/system/.*poolagent-vm-job' || true; } | sort
}
main_pid() { systemctl show -P MainPID poolagent.service; }
# query_pid USER: the pid of USER's running query (its `sleep`).
query_pid() { pgrep -u "$1" -x sleep | head -1; }
pool_files() {
	local d
	for d in "$pools" "$pools"/*/; do
		printf '%s cpu.max=%s cpu.weight=%s\n' "${d#"$scope"/}" "$(cat "$d/cpu.max")" "$(cat "$d/cpu.weight")"
	done
}

step "the host before: systemd $(systemctl --version | awk 'NR == 1 { print $2 }'), $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup, booted $(cut -d' ' -f1 /proc/uptime)s ago"
snapshot >/tmp/before
check "install.sh --help exits 0" sh -c 'scripts/install.sh --help >/dev/null'
check "uninstall.sh --help exits 0" sh -c 'scripts/uninstall.sh --help >/dev/null'


step "install as the README says: scripts/install.sh (the guest has no Go: the binaries are given)"
quote env "${install_env[@]}" scripts/install.sh
for f in /usr/local/bin/poolagent /usr/local/bin/poolagent-run /usr/local/share/man/man1/poolagent.1 \
	/usr/local/share/bash-completion/completions/poolagent /etc/systemd/system/poolagent.service \
	/etc/systemd/system/poolagent.socket /etc/poolagent/pools.sql; do
	check "installed $f" test -s "$f"
done
check "poolagent.socket and poolagent.service are active" systemctl is-active --quiet poolagent.socket poolagent.service
quote systemctl status poolagent.service --lines=0
check "systemctl status shows the daemon's STATUS= line" sh -c 'systemctl status poolagent.service --lines=0 | grep -q "Status: \"[0-9]* pools"'

step "pools and grants for two real users (useradd), applied with systemctl reload"
useradd -m alice
useradd -m bob
cat >/etc/poolagent/pools.sql <<'SQL'
CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 4, TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50);
CREATE RESOURCE POOL batch WITH (CONCURRENT_QUERY_LIMIT = 4, TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 30);
CREATE RESOURCE POOL CLASSIFIER alice_olap WITH (RESOURCE_POOL = 'olap', MEMBER_NAME = 'alice');
CREATE RESOURCE POOL CLASSIFIER bob_batch WITH (RESOURCE_POOL = 'batch', MEMBER_NAME = 'bob');
GRANT USE ON RESOURCE POOL olap TO alice;
GRANT USE ON RESOURCE POOL batch TO bob;
SQL
systemctl reload poolagent.service
check "the pools are below the scope: olap's cpu.max is 50% of 2 CPUs" until_ 10 grep -qx '100000 100000' "$pools/olap/cpu.max"

step "systemd's view agrees: the daemon alone in its unit, the pools in poolagent-pools.scope"
quote systemctl show -p ControlGroup poolagent.service poolagent-pools.scope
check "the service's cgroup is /system.slice/poolagent.service" test "$(systemctl show -P ControlGroup poolagent.service)" = /system.slice/poolagent.service
check "the service's cgroup holds only the daemon" test "$(cat /sys/fs/cgroup/system.slice/poolagent.service/cgroup.procs)" = "$(main_pid)"
check "the scope is active" test "$(systemctl show -P ActiveState poolagent-pools.scope)" = active
check "the scope has Delegate=yes" test "$(systemctl show -P Delegate poolagent-pools.scope)" = yes
check "the scope's keeper is alone in keep/" test "$(wc -l <"$scope/keep/cgroup.procs")" = 1
quote systemd-cgls --no-pager -u poolagent-pools.scope

step "daemon-reload and set-property CPUWeight= leave the pool files alone"
pool_files >/tmp/pools.before
quote cat /tmp/pools.before
systemctl daemon-reload
systemctl set-property --runtime poolagent.service CPUWeight=50
systemctl set-property --runtime poolagent-pools.scope CPUWeight=200
pool_files >/tmp/pools.after
check "every pool's cpu.max and cpu.weight unchanged" cmp /tmp/pools.before /tmp/pools.after
check "the daemon's own weight is 50" test "$(cat /sys/fs/cgroup/system.slice/poolagent.service/cpu.weight)" = 50
check "the scope's own weight is 200" test "$(cat "$scope/cpu.weight")" = 200

step "queries from login sessions (su -l): moved from the session scope into the pool"
su -l alice -c 'echo "session: $(cat /proc/self/cgroup)"; exec poolagent-run -- sh -c "echo limit=\$POOLAGENT_CPU_LIMIT; exec sleep 3600"' >/tmp/alice.out 2>&1 &
su -l bob -c 'exec poolagent run -- sleep 3600' >/tmp/bob.out 2>&1 &
check "alice's query runs" until_ 20 query_pid alice
check "bob's query runs" until_ 20 query_pid bob
quote cat /tmp/alice.out
check "alice's login was a logind session" grep -q 'session: 0::/user.slice/user-[0-9]*.slice/session-[^/]*\.scope' /tmp/alice.out
qa=$(query_pid alice)
qb=$(query_pid bob)
check "alice's query is in pool olap" grep -q "^0::/system.slice/poolagent-pools.scope/pools/olap/" "/proc/$qa/cgroup"
check "bob's query is in pool batch" grep -q "^0::/system.slice/poolagent-pools.scope/pools/batch/" "/proc/$qb/cgroup"
quote poolagent queries
check "poolagent queries names both users" sh -c 'poolagent queries | grep -q alice && poolagent queries | grep -q bob'

step "reload with a good file: the limits change on disk"
sed -i 's/TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50/TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 25/' /etc/poolagent/pools.sql
systemctl reload poolagent.service
check "olap's cpu.max is 25% of 2 CPUs" until_ 10 grep -qx '50000 100000' "$pools/olap/cpu.max"

step "reload with a bad file: refused, the running limits kept, status and journal say why"
cp /etc/poolagent/pools.sql /tmp/pools.good
echo 'CREATE RESOURCE POOL broken WITH (NO_SUCH_SETTING = 1);' >>/etc/poolagent/pools.sql
systemctl reload poolagent.service
check "systemctl status says the reload was refused" until_ 10 sh -c 'systemctl status poolagent.service --lines=0 | grep -q "reload refused"'
quote sh -c 'systemctl status poolagent.service --lines=0 | grep Status:'
check "olap's cpu.max is still 25%" grep -qx '50000 100000' "$pools/olap/cpu.max"
check "the journal at warning says why" sh -c 'journalctl -u poolagent.service -p warning --no-pager -o cat | grep -q NO_SUCH_SETTING'
cp /tmp/pools.good /etc/poolagent/pools.sql
systemctl reload poolagent.service

step "restart with queries running: they keep running, the new daemon adopts them"
old=$(main_pid)
quote systemctl restart poolagent.service
check "the service is active again" systemctl is-active --quiet poolagent.service
check "a new daemon" test "$(main_pid)" != "$old"
check "alice's query still runs in olap" grep -q "/pools/olap/" "/proc/$qa/cgroup"
check "bob's query still runs in batch" grep -q "/pools/batch/" "/proc/$qb/cgroup"
check "the adopted queries are counted" until_ 10 sh -c 'systemctl status poolagent.service --lines=0 | grep -q "2 queries running"'
quote sh -c 'journalctl -u poolagent.service --no-pager -o cat -n 200 | grep -iE "left-over|219|delegated scope" | tail -3'

step "stop, then start: the same"
systemctl stop poolagent.service
check "the socket stays active while the service is stopped" systemctl is-active --quiet poolagent.socket
check "the queries run on without a daemon" kill -0 "$qa" "$qb"
systemctl start poolagent.service
check "the adopted queries are counted after a start" until_ 10 sh -c 'systemctl status poolagent.service --lines=0 | grep -q "2 queries running"'

step "socket activation: with the service stopped, a client's first connection starts it"
systemctl stop poolagent.service
check "the service is inactive" sh -c '! systemctl is-active --quiet poolagent.service'
check "a client connecting to the socket is answered" su -l bob -c 'poolagent-run -- true'
check "the connection started the service" systemctl is-active --quiet poolagent.service

step "watchdog: a stopped daemon (kill -STOP) is restarted within WatchdogSec plus a margin"
old=$(main_pid)
wd=$(systemctl show -P WatchdogUSec poolagent.service)
t=$SECONDS
kill -STOP "$old"
check "a new daemon within $wd, the abort timeout and a margin" until_ 120 sh -c "[ \"\$(systemctl show -P MainPID poolagent.service)\" != $old ] && systemctl is-active --quiet poolagent.service"
echo "   restarted after $((SECONDS - t))s"
quote sh -c 'journalctl -u poolagent.service --no-pager -o cat | grep -i watchdog | tail -2'
check "the queries survived" kill -0 "$qa" "$qb"

step "journald: -p warning shows warnings and errors only"
check "info lines are in the journal" sh -c 'journalctl -u poolagent.service -p info --no-pager -o cat | grep -q "level=INFO"'
check "no info line at -p warning" sh -c '! journalctl -u poolagent.service -p warning --no-pager -o cat | grep -q "level=INFO"'
check "the refused reload is there at -p err" sh -c 'journalctl -u poolagent.service -p err --no-pager -o cat | grep -q "reload refused"'

step "metrics scraped with curl; poolagent stat reads the live tree"
mkdir -p /etc/systemd/system/poolagent.service.d
printf '[Service]\nExecStart=\nExecStart=%s --metrics-listen 127.0.0.1:9561\n' \
	"$(systemctl show -P ExecStart poolagent.service | sed -n 's/.*argv\[\]=\([^;]*\) ;.*/\1/p' | sed 's/ *$//')" \
	>/etc/systemd/system/poolagent.service.d/metrics.conf
systemctl daemon-reload
systemctl restart poolagent.service
check "the metrics endpoint answers" until_ 20 curl -fsS -o /tmp/metrics http://127.0.0.1:9561/metrics
check "the metrics name pool olap" grep -q 'olap' /tmp/metrics
quote poolagent stat --root "$pools"
check "poolagent stat shows olap" sh -c "poolagent stat --root $pools | grep -q olap"
rm -r /etc/systemd/system/poolagent.service.d
systemctl daemon-reload
systemctl restart poolagent.service

step "upgrade: install over the running service with queries running, on a host without man-db"
# man hidden in a mount namespace of its own: systemd-analyze verify would
# fail on the units' Documentation=man: lines without --man=no.
quote unshare -m sh -c 'mount --bind /dev/null "$(command -v man)" && exec env '"${install_env[*]}"' scripts/install.sh'
check "man was hidden there" sh -c '! unshare -m sh -c "mount --bind /dev/null \$(command -v man) && man -w systemd.socket" >/dev/null 2>&1'

check "the service is active" systemctl is-active --quiet poolagent.service
check "the queries survived the upgrade" kill -0 "$qa" "$qb"
check "the adopted queries are counted" until_ 10 sh -c 'systemctl status poolagent.service --lines=0 | grep -q "2 queries running"'

step "a login session ending (loginctl terminate-session) ends the query its su started"
su -l alice -c 'exec poolagent-run -- sleep 301' >/tmp/alice2.out 2>&1 &
su=$!
check "alice's second query runs" until_ 20 pgrep -u alice -f '^sleep 301$'
q3=$(pgrep -u alice -f '^sleep 301$')
check "it runs in pool olap, out of the session's scope" grep -q "/pools/olap/" "/proc/$q3/cgroup"
sess=$(sed -n 's|^0::.*/session-\(.*\)\.scope$|\1|p' "/proc/$su/cgroup")
check "su is in a session scope" test -n "$sess"
loginctl terminate-session "$sess"
# systemd kills the session scope's processes (su); su passes the SIGTERM
# on to its command, the query, which the scope no longer holds.
check "the query ended with the session" until_ 20 sh -c "! kill -0 $q3"
check "the other session's query runs on" kill -0 "$qa"
check "its slot is freed" until_ 10 sh -c 'systemctl status poolagent.service --lines=0 | grep -q "2 queries running"'

. ./units.sh

step "uninstall with queries running: the service goes, the queries run on, the scope ends with them"
quote scripts/uninstall.sh --purge
check "the units are gone" sh -c '! systemctl cat poolagent.service >/dev/null 2>&1'
check "the queries still run" kill -0 "$qa" "$qb"
kill "$qa" "$qb"
check "the scope ends once the last query ended" until_ 20 sh -c '! test -d '"$scope"
check "uninstall again: nothing left to do, exit 0" scripts/uninstall.sh --purge
userdel -r alice 2>/dev/null || true
userdel -r bob 2>/dev/null || true
snapshot >/tmp/after
check "the host is as before" diff /tmp/before /tmp/after

step "install and uninstall where systemd is not PID 1 (/run/systemd hidden in a mount namespace)"
quote unshare -m sh -c 'mount -t tmpfs tmpfs /run/systemd && env '"${install_env[*]}"' scripts/install.sh'
check "the units are enabled on the files alone" test -L /etc/systemd/system/multi-user.target.wants/poolagent.service
quote unshare -m sh -c 'mount -t tmpfs tmpfs /run/systemd && scripts/uninstall.sh --purge'
systemctl daemon-reload
snapshot >/tmp/after
check "the host is as before" diff /tmp/before /tmp/after

step "done"
awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "lifecycle passed in %.1fs\n", b - a }'
