# lib.sh - sourced by scripts/vm/run.sh and scripts/vm/systemd/run.sh: how
# both boot their VM and watch its heartbeat, and what they do once it has
# stopped.

# vm_boot MEM_MIB APPEND [FROM] runs the VM once with the caller's $kernel
# and $work/initrd: MEM_MIB of memory unless POOLAGENT_VM_MEM_MIB, the
# kernel command line APPEND, serial ports ttyS0 $work/console.log, ttyS1
# our stdout, ttyS2 $work/status, ttyS3 $work/heartbeat. It sets vm while
# the VM runs, then qemu (its exit status), stopped ("timeout", "froze" or
# empty) and status (the job's, or empty). The VM is stopped after the
# caller's $timeout seconds, or when the heartbeat is silent for $stall
# seconds: counted from the boot's start, or with FROM=first-beat from the
# first heartbeat (a guest whose heartbeat starts late in its boot).
vm_boot() {
	local mem=$1 append=$2 from=${3:-start}
	: >"$work/status"
	: >"$work/heartbeat"
	: >"$work/console.log"
	qemu-system-x86_64 \
		-nodefaults -no-user-config -machine pc -accel tcg,thread=multi -cpu max \
		-smp "${POOLAGENT_VM_CPUS:-2}" -m "${POOLAGENT_VM_MEM_MIB:-$mem}" \
		-kernel "$kernel" -initrd "$work/initrd" -append "$append" \
		-display none -monitor none -no-reboot \
		-serial "file:$work/console.log" -serial stdio -serial "file:$work/status" \
		-serial "file:$work/heartbeat" \
		</dev/null &
	vm=$!
	local begun=$SECONDS beat=$SECONDS last=0 size state
	stopped=
	# A zombie is not running: kill -0 cannot tell an exited child that is
	# not yet waited for.
	while read -r _ _ state _ 2>/dev/null <"/proc/$vm/stat" && [ "$state" != Z ]; do
		sleep 0.2
		size=$(stat -c %s "$work/heartbeat")
		if [ "$size" -gt "$last" ]; then
			last=$size beat=$SECONDS
		elif { [ "$from" != first-beat ] || [ "$last" -gt 0 ]; } && ((SECONDS - beat >= stall)); then
			stopped=froze
		fi
		((SECONDS - begun < timeout)) || stopped=timeout
		if [ -n "$stopped" ]; then
			kill -KILL "$vm" 2>/dev/null
			break
		fi
	done
	set +e
	{ wait "$vm"; } 2>/dev/null # not bash's own "Killed" line
	qemu=$?
	set -e
	vm=
	status=$(tr -dc 0-9 <"$work/status")
}

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
