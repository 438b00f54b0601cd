# units.sh - services and timers in a pool, written the way an operator
# writes them (docs/operate.md "Services and timers in a pool"). Sourced by
# lifecycle.sh while the daemon runs, with its step, check, quote and
# until_ helpers; leaves no unit, pool or process behind.

# pool_col POOL FIELD: a number of POOL's row in `poolagent pools --format
# json` (the table has empty cells, which whitespace cannot count).
pool_col() {
	poolagent pools --format json | tr -d ' \n' | tr '{},' '\n\n\n' |
		awk -v p="\"Name\":\"$1\"" -v c="\"$2\":" '$0 == p { f = 1; next } /^"Name":/ { f = 0 } f && index($0, c) == 1 { print substr($0, length(c) + 1); exit }'
}
# unit_query UNIT: the state of the query of UNIT's main process in
# `poolagent queries` (RUNNING, QUEUED), nothing when it has none.
unit_query() {
	local pid
	pid=$(systemctl show -P MainPID "$1")
	[ "$pid" != 0 ] && poolagent queries | awk -v pid="$pid" 'NR > 1 { for (i = 4; i <= 8; i++) if ($i == pid) { print $3; exit } }'
}
# etl_queries: the lines of `poolagent queries` in pool etl.
etl_queries() { poolagent queries | awk '$0 ~ /(^| )etl( |$)/' || true; }
# alive PIDFILE: the process named in PIDFILE exists.
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
in_etl() { grep -q "^0::/system.slice/poolagent-pools.scope/pools/etl/" "/proc/$1/cgroup"; }
export -f alive pool_col unit_query

step "services and timers in a pool: a service whose ExecStart= is poolagent-run, with a child"
cp /etc/poolagent/pools.sql /tmp/pools.units
echo 'CREATE RESOURCE POOL etl WITH (CONCURRENT_QUERY_LIMIT = 1, QUEUE_SIZE = 4);' >>/etc/poolagent/pools.sql
systemctl reload poolagent.service
check "pool etl exists" until_ 10 test -d "$pools/etl"
# The job: a shell that starts a child and waits for it, as many jobs do.
cat >/usr/local/bin/etl-job <<'SH'
#!/bin/sh
echo $$ >/run/etl-job.pid
sleep 600 &
echo $! >/run/etl-child.pid
wait
SH
chmod 755 /usr/local/bin/etl-job
cat >/etc/systemd/system/etl.service <<'UNIT'
[Unit]
Description=ETL job in pool etl
[Service]
ExecStart=/usr/local/bin/poolagent-run --pool etl -- /usr/local/bin/etl-job
Restart=on-failure
RestartSec=1
UNIT
systemctl daemon-reload
rm -f /run/etl-job.pid /run/etl-child.pid
systemctl start etl.service
check "the job and its child run" until_ 20 alive /run/etl-child.pid
job=$(cat /run/etl-job.pid)
child=$(cat /run/etl-child.pid)
main=$(systemctl show -P MainPID etl.service)
check "the unit's main process is poolagent-run, in the unit's cgroup" \
	sh -c "[ \"\$(cat /proc/$main/comm)\" = poolagent-run ] && grep -qx '0::/system.slice/etl.service' /proc/$main/cgroup"
check "the job and its child run in pool etl" sh -c "grep -q /pools/etl/ /proc/$job/cgroup && grep -q /pools/etl/ /proc/$child/cgroup"
quote systemctl status etl.service --no-pager --lines=3 --full
check "systemctl status shows the main process and where the job runs" \
	sh -c "systemctl status etl.service --no-pager --lines=5 --full | grep -q 'Main PID: $main (poolagent-run)' &&
		systemctl status etl.service --no-pager --lines=5 --full | grep -q 'runs in cgroup /system.slice/poolagent-pools.scope/pools/etl/'"
quote poolagent queries
check "poolagent queries lists the query" sh -c "poolagent queries | grep -q etl"

step "Restart=on-failure: the job killed by a signal is restarted, its child ended"
kill -KILL "$job"
check "the child went with it" until_ 20 sh -c "! kill -0 $child"
check "systemd restarted the unit" until_ 20 sh -c '[ "$(systemctl show -P NRestarts etl.service)" = 1 ] && systemctl is-active --quiet etl.service'
check "the restarted job and its child run" until_ 20 bash -c "alive /run/etl-child.pid && [ \"\$(cat /run/etl-child.pid)\" != $child ]"
child=$(cat /run/etl-child.pid)
check "in pool etl" in_etl "$child"

step "systemctl restart, then stop: every process of the job ends, the unit stops cleanly"
systemctl restart etl.service
check "the old child is gone" until_ 20 sh -c "! kill -0 $child"
check "a new child runs" until_ 20 bash -c "alive /run/etl-child.pid && [ \"\$(cat /run/etl-child.pid)\" != $child ]"
child=$(cat /run/etl-child.pid)
job=$(cat /run/etl-job.pid)
systemctl stop etl.service
check "no process of the job survived the stop" until_ 10 sh -c "! kill -0 $child 2>/dev/null && ! kill -0 $job 2>/dev/null"
check "the unit is inactive, not failed" test "$(systemctl show -P ActiveState etl.service)" = inactive
check "the slot is free" until_ 10 bash -c '[ "$(pool_col etl RunningQueries)" = 0 ]'

step "systemctl kill: SIGTERM reaches the child; SIGKILL of the client ends the query too"
systemctl start etl.service
check "the job runs" until_ 20 bash -c "alive /run/etl-child.pid && [ \"\$(cat /run/etl-child.pid)\" != $child ]"
child=$(cat /run/etl-child.pid)
systemctl kill etl.service
check "the child is gone after systemctl kill" until_ 20 sh -c "! kill -0 $child"
check "the unit ended by the signal, without a restart" until_ 20 sh -c '[ "$(systemctl show -P ActiveState etl.service)" = inactive ]'
systemctl start etl.service
check "the job runs again" until_ 20 bash -c "alive /run/etl-child.pid && [ \"\$(cat /run/etl-child.pid)\" != $child ]"
child=$(cat /run/etl-child.pid)
systemctl kill --signal=SIGKILL etl.service
check "the child is gone after SIGKILL of the unit's processes" until_ 20 sh -c "! kill -0 $child"
systemctl stop etl.service
quote sh -c 'journalctl -u poolagent.service --no-pager -o cat | grep -E "signal passed|bound query" | tail -3'

step "a unit stopped while its job waits in the queue leaves no place behind"
check "no query in pool etl before" until_ 20 bash -c '[ "$(pool_col etl RunningQueries)$(pool_col etl QueuedQueries)" = 00 ]'
systemd-run --quiet --unit=etl-holder /usr/local/bin/poolagent-run --pool etl -- sleep 600
check "the holder runs" until_ 20 bash -c '[ "$(unit_query etl-holder.service)" = RUNNING ]'
systemd-run --quiet --unit=etl-queued /usr/local/bin/poolagent-run --pool etl -- sleep 600
until_ 20 bash -c '[ "$(unit_query etl-queued.service)" = QUEUED ]' || {
	quote poolagent pools
	quote poolagent queries
	quote systemctl status etl-holder.service etl-queued.service --no-pager --full
}
check "the second unit's job is queued" bash -c '[ "$(unit_query etl-queued.service)" = QUEUED ]'
check "the pool counts it" test "$(pool_col etl QueuedQueries)" = 1
quote poolagent queries
systemctl stop etl-queued.service
check "its queue place is gone" until_ 10 bash -c '[ "$(pool_col etl QueuedQueries)" = 0 ]'
check "the stopped unit is inactive" sh -c '! systemctl is-active --quiet etl-queued.service'
systemctl stop etl-holder.service
check "the holder's slot is free" until_ 10 bash -c '[ "$(pool_col etl RunningQueries)" = 0 ]'

step "a timer's job (systemd-run --on-active): it runs in the pool, and again at its next run"
rm -f /run/etl-timer.out
systemd-run --quiet --unit=etl-timer --on-active=1 --on-unit-inactive=2 \
	/usr/local/bin/poolagent-run --pool etl -- sh -c 'cat /proc/self/cgroup >>/run/etl-timer.out'
check "the timer's job ran twice" until_ 60 sh -c '[ "$(wc -l </run/etl-timer.out 2>/dev/null)" -ge 2 ]'
check "the timer's service ended well" test "$(systemctl show -P Result etl-timer.service)" = success
systemctl stop etl-timer.timer
quote cat /run/etl-timer.out
check "each run was in pool etl" sh -c '! grep -v "^0::/system.slice/poolagent-pools.scope/pools/etl/" /run/etl-timer.out'

step "nothing left: no query, no slot, no process, no query cgroup"
quote poolagent queries
check "poolagent queries shows nothing in pool etl" test -z "$(etl_queries)"
check "pool etl runs nothing" test "$(pool_col etl RunningQueries)" = 0
check "and queues nothing" test "$(pool_col etl QueuedQueries)" = 0
check "no query cgroup left in pool etl" test -z "$(find "$pools/etl" -mindepth 1 -type d)"
check "no process of the jobs left" sh -c '! pgrep -f "^sleep 600$"'
rm -f /etc/systemd/system/etl.service /usr/local/bin/etl-job /run/etl-*.pid /run/etl-timer.out
systemctl daemon-reload
cp /tmp/pools.units /etc/poolagent/pools.sql
systemctl reload poolagent.service
