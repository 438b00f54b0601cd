# steps.sh - the step and check helpers of the scripts run in the systemd VM
# (lifecycle.sh, containers.sh), sourced by them. Each step prints its time;
# the first failed check stops the run with the daemon's status, its
# queries and the journal's tail. STEPS_NAME names the script in the lines.
began=$(date +%s.%N)
last=$began
n=0
step() {
	local now
	now=$(date +%s.%N)
	[ "$n" = 0 ] || awk -v a="$last" -v b="$now" -v n="$n" 'BEGIN { printf "   step %d took %.1fs\n", n, b - a }'
	last=$now
	n=$((n + 1))
	echo "== ${STEPS_NAME:+$STEPS_NAME }$n. $*"
}
fail() {
	echo "FAIL (${STEPS_NAME:+$STEPS_NAME }step $n): $*"
	echo "--- systemctl status poolagent.service poolagent-pools.scope"
	systemctl status --no-pager --lines=0 poolagent.service poolagent-pools.scope 2>&1 | head -30 || true
	if command -v poolagent >/dev/null; then
		echo "--- poolagent queries"
		poolagent queries 2>&1 || true
	fi
	echo "--- journalctl -u poolagent (tail)"
	journalctl --no-pager -u poolagent -n 40 -o short-monotonic 2>&1 || true
	exit 1
}
# check DESCRIPTION COMMAND...: run the command, fail with the description.
check() {
	local what=$1
	shift
	"$@" || fail "$what (command: $*)"
	echo "   ok: $what"
}
trap 'fail "unexpected failure at line $LINENO: $BASH_COMMAND"' ERR
# quote prints a command's output indented: what systemd said, for the log.
quote() { "$@" 2>&1 | sed 's/^/   | /'; }
# until_ SECONDS COMMAND...: wait for the command to succeed.
until_() {
	local limit=$1 t=0
	shift
	until "$@" >/dev/null 2>&1; do
		sleep 0.5
		t=$((t + 1))
		[ "$t" -lt $((limit * 2)) ] || return 1
	done
}
