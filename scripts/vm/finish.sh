# finish.sh - sourced by scripts/vm/run.sh and scripts/vm/systemd/run.sh:
# what both do once their VM has stopped.

# vm_finish LABEL TIMING_LABEL TIMEOUT_NOTE NO_STATUS_NOTE prints the
# boot, job and wall seconds (POOLAGENT_VM_TIMING=1, from the guest's
# "poolagent-vm: booted in Bs" and "job exited ... at Es" console lines)
# and the console log (POOLAGENT_VM_CONSOLE=1), then exits with the job's
# status: 124 when the VM was stopped at its time limit before it reported
# one, 125 when it ended without one (on ttyS2 or the console), each with
# the console tail. It reads the caller's $work (console.log), $started,
# $stopped, $timeout and $status.
vm_finish() {
	local label=$1 timing=$2 timeout_note=$3 no_status_note=$4
	if [ "${POOLAGENT_VM_TIMING:-0}" = 1 ]; then
		awk -v label="$timing" -v wall="$(echo "$(date +%s.%N) $started" | awk '{printf "%.1f", $1-$2}')" '
			/poolagent-vm: booted in/ { b = $4; sub(/s,?$/, "", b) }
			/poolagent-vm: job exited/ { e = $NF; sub(/s$/, "", e) }
			END { printf "%s: boot %.1fs, job %.1fs, wall %ss\n", label, b, e - b, wall }
		' "$work/console.log" >&2
	fi
	[ "${POOLAGENT_VM_CONSOLE:-0}" = 1 ] && cat "$work/console.log" >&2
	# The status line on ttyS2 can be lost when the guest powers off
	# before the emulated UART has passed it on; the console's "job exited
	# with status N" line, written just before it, then stands in.
	[ -n "$status" ] || status=$(sed -n 's/^poolagent-vm: job exited with status \([0-9]*\) .*/\1/p' "$work/console.log" | tail -1)
	if [ "$stopped" = timeout ] && [ -z "$status" ]; then
		echo "$label: stopped after ${timeout}s ($timeout_note); console tail:" >&2
		tail -30 "$work/console.log" >&2
		exit 124
	fi
	if [ -z "$status" ]; then
		echo "$label: the VM ended without an exit status$no_status_note; console tail:" >&2
		tail -30 "$work/console.log" >&2
		exit 125
	fi
	exit "$status"
}
