#!/bin/bash
# run.sh BINARY [ARG...] - run a static Linux binary as root inside a fresh
# cgroup v2 VM and exit with its status (docs/testing.md). Made to be a
# go test runner:
#
#	CGO_ENABLED=0 go test -exec "$PWD/scripts/vm/run.sh" -run '^TestKernel' ./observe
#
# The guest is Debian's cloud kernel under qemu's software emulation (TCG)
# with cgroup2 at /sys/fs/cgroup and "+cpu +memory" in the root's
# cgroup.subtree_control. The binary runs in the guest's copy of the
# package's folder, so ./testdata and the module's testdata/ are where tests
# expect them. Its stdout and stderr stream to ours.
#
# A guest whose heartbeat (init writes its uptime every second) stops for
# POOLAGENT_VM_STALL seconds has frozen: the VM is stopped, its console
# tail printed, and it is booted again, POOLAGENT_VM_BOOTS times in all.
# A pause of POOLAGENT_VM_PAUSE seconds or more between heartbeats is
# reported; a job that failed in a guest that paused so is run again
# too, since its timeouts may have run out while the guest stood still.
# A job that failed in a guest that ran on, or that ran past its time,
# reports as it is.
#
# Exit status: the binary's; 124 the VM hit its time limit, or froze on
# its last boot; 125 the VM ended without reporting a status (the console
# log is printed to stderr); 126 the guest could not set up cgroup2 with
# the cpu and memory controllers (or, booted with POOLAGENT_VM_CGROUP=v1,
# its v1 cpu,cpuacct and pids hierarchies).
#
# Env:
#   POOLAGENT_VM_TIMEOUT   seconds before the VM is stopped (default: the
#                          binary's -test.timeout plus 30 s, so its own
#                          goroutine dump comes first; else 900)
#   POOLAGENT_VM_STALL     seconds without a heartbeat that mean the guest
#                          froze (default 60)
#   POOLAGENT_VM_PAUSE     seconds between heartbeats that count as a
#                          stall (default 5)
#   POOLAGENT_VM_BOOTS     boots in all when the guest freezes, or a job
#                          fails after a stall (default 2)
#   POOLAGENT_VM_CPUS      guest vCPUs (default 2)
#   POOLAGENT_VM_MEM_MIB   guest memory (default 1024)
#   POOLAGENT_VM_CGROUP    v2 (default) or v1: boot the guest with cgroup v1
#                          hierarchies instead of cgroup2, as a legacy host
#                          has them (init says which); POOLAGENT_KERNEL_MODE
#                          then defaults to v1
#   POOLAGENT_VM_ENV       extra variable names to pass into the guest
#   POOLAGENT_VM_FILES     more host files the job runs (absolute paths, not
#                          below /tmp), copied into the guest at the same
#                          paths, links followed
#   POOLAGENT_VM_CONSOLE=1 print the guest's console log to stderr afterwards
#   POOLAGENT_VM_APPEND    extra kernel command line (e.g. loglevel=7 to debug boots)
#   POOLAGENT_VM_TIMING=1  print one line to stderr: boot, job and wall seconds
#   POOLAGENT_VM_LAB       setup.sh's lab folder (default: scripts/vm/lab)
# Always passed into the guest: POOLAGENT_REQUIRE_KERNEL, POOLAGENT_KERNEL_MODE
# (set to POOLAGENT_VM_CGROUP's mode when unset) and GOTRACEBACK when set.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
lab=${POOLAGENT_VM_LAB:-$here/lab}
die() { echo "vm run: $*" >&2; exit 125; }

[ $# -ge 1 ] || { echo "usage: $0 BINARY [ARG...]" >&2; exit 2; }
bin=$1
shift
[ -f "$bin" ] || die "no such file: $bin"
cgroup=${POOLAGENT_VM_CGROUP:-v2}
case $cgroup in
v1) cgroup_append=poolagent.cgroup=v1 ;;
v2) cgroup_append= ;;
*) die "POOLAGENT_VM_CGROUP=$cgroup: want v1 or v2" ;;
esac
kernel=$lab/kernel/current/vmlinuz
[ -s "$kernel" ] && [ -s "$lab/base.cpio.gz" ] || die "no VM in $lab: run scripts/vm/setup.sh first"
[ "$(cat "$here/init" "$(command -v busybox)" | sha256sum | cut -d' ' -f1)" = "$(cat "$lab/base.sha256")" ] ||
	die "scripts/vm/init changed since the base initramfs was packed: run scripts/vm/setup.sh"
if ! head -c 4 "$bin" | grep -q ELF || ldd "$bin" >/dev/null 2>&1; then
	die "$bin is not a static Linux binary; build it with CGO_ENABLED=0"
fi

# Where the binary runs: the package folder's path inside the module, so
# "testdata" and "../testdata" resolve as on the host.
mod=$PWD
while [ "$mod" != / ] && [ ! -f "$mod/go.mod" ]; do mod=$(dirname "$mod"); done
[ -f "$mod/go.mod" ] || mod=$PWD
rel=${PWD#"$mod"}
rel=${rel#/}

work=$(mktemp -d "${TMPDIR:-/tmp}/poolagent-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
mkdir -p "$stage/job" "$stage/src/$rel"
cp "$bin" "$stage/job/bin"
chmod 755 "$stage/job/bin"
[ -d "$mod/testdata" ] && cp -r "$mod/testdata" "$stage/src/testdata"
[ -n "$rel" ] && [ -d testdata ] && cp -r testdata "$stage/src/$rel/testdata"
# The FUSE module setup.sh kept, for the tests that mount a FUSE
# filesystem (kerneltest.FUSE loads it).
if [ -s "$lab/kernel/current/fuse.ko" ]; then
	mkdir -p "$stage/lib/modules"
	cp "$lab/kernel/current/fuse.ko" "$stage/lib/modules/fuse.ko"
fi
for f in ${POOLAGENT_VM_FILES:-}; do
	case $f in
	/tmp/*) die "POOLAGENT_VM_FILES: $f is below /tmp, which the guest mounts a tmpfs over" ;;
	/*) ;;
	*) die "POOLAGENT_VM_FILES: $f is not an absolute path" ;;
	esac
	[ -e "$f" ] || die "POOLAGENT_VM_FILES: no such file: $f"
	mkdir -p "$stage$(dirname "$f")"
	cp -L "$f" "$stage$f"
done

quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
: "${POOLAGENT_KERNEL_MODE:=$cgroup}"
export POOLAGENT_KERNEL_MODE
{
	echo "cd $(quote "/src/$rel") || exit 125"
	for name in POOLAGENT_REQUIRE_KERNEL POOLAGENT_KERNEL_MODE GOTRACEBACK ${POOLAGENT_VM_ENV:-}; do
		[ -n "${!name+set}" ] && echo "export $name=$(quote "${!name}")"
	done
	printf 'exec /job/bin'
	for a in "$@"; do printf ' %s' "$(quote "$a")"; done
	echo
} >"$stage/job/run.sh"

# The job's archive goes first and uncompressed: the kernel unpacks both
# into one rootfs, but refuses an uncompressed archive after a gzipped one.
(cd "$stage" && find ./* | sed 's|^\./||' | busybox cpio -o -H newc 2>/dev/null) >"$work/initrd"
cat "$lab/base.cpio.gz" >>"$work/initrd"

# seconds DURATION: a Go duration ("10m0s", "90s", "1h0m0s") in whole
# seconds.
seconds() {
	awk -v d="$1" 'BEGIN {
		while (match(d, /^[0-9.]+(h|m|s|ms|us|µs|ns)/)) {
			tok = substr(d, 1, RLENGTH); d = substr(d, RLENGTH + 1)
			n = tok + 0; u = tok; sub(/^[0-9.]+/, "", u)
			s += n * (u == "h" ? 3600 : u == "m" ? 60 : u == "s" ? 1 : 0)
		}
		printf "%d", s
	}'
}
timeout=${POOLAGENT_VM_TIMEOUT:-}
if [ -z "$timeout" ]; then
	timeout=900
	prev=
	for a in "$@"; do
		case $a in
		-test.timeout=* | --test.timeout=*) d=${a#*=} ;;
		*) [ "$prev" = -test.timeout ] || [ "$prev" = --test.timeout ] && d=$a || d= ;;
		esac
		prev=$a
		if [ -n "$d" ] && [ "$(seconds "$d")" -gt 0 ]; then
			timeout=$(($(seconds "$d") + 30))
		fi
	done
fi
stall=${POOLAGENT_VM_STALL:-60}
pausing=${POOLAGENT_VM_PAUSE:-5}
boots=${POOLAGENT_VM_BOOTS:-2}

# boot runs the VM once (vm_boot).
#
# tsc=reliable: TCG's TSC follows the host clock and is the same on every
# vCPU; without it the guest falls back to a slow clocksource and every
# time read becomes a trap, which scatters the throttling figures.
# mitigations=off: nothing to protect in a throwaway VM, and faster under TCG.
# panic=-1 with -no-reboot: a kernel panic ends qemu at once.
vm=
boot() {
	vm_boot 1024 "console=ttyS0 loglevel=4 panic=-1 tsc=reliable mitigations=off $cgroup_append ${POOLAGENT_VM_APPEND:-}"
}

# go test stops a runner that outlives its -timeout with SIGQUIT: say what
# the guest was doing, and stop it.
interrupted() {
	if [ -n "$vm" ]; then
		kill -KILL "$vm" 2>/dev/null
		{ wait "$vm"; } 2>/dev/null
	fi
	echo "vm run: stopped by SIG$1; console tail:" >&2
	tail -30 "$work/console.log" >&2
	exit 124
}
for sig in INT TERM QUIT; do
	trap "interrupted $sig" "$sig"
done

# pause prints the longest gap between two heartbeats and the guest's
# uptime when it began, in seconds: a guest whose vCPUs did not run for a
# while (an overloaded host, an emulator hiccup) shows one, and a test's
# timeouts may have run out in it.
pause() {
	tr -d '\r' <"$work/heartbeat" |
		awk 'NR > 1 && $1 - prev > gap { gap = $1 - prev; at = prev } { prev = $1 } END { printf "%.1f %.1f\n", gap, at }'
}
started=$(date +%s.%N)
for ((n = 1; ; n++)); do
	boot
	read -r gap at <<<"$(pause)"
	paused=
	if awk -v g="$gap" -v p="$pausing" 'BEGIN { exit !(g >= p) }'; then
		paused=1
		echo "vm run: the guest stalled: no heartbeat for ${gap}s from its uptime ${at}s" >&2
		grep -E 'lockup|stall|hung|BUG|WARNING' "$work/console.log" | tail -5 >&2 || true
	fi
	if [ "$stopped" = froze ] && [ -z "$status" ]; then
		echo "vm run: the guest froze: no heartbeat for ${stall}s (last guest uptime: $(tail -1 "$work/heartbeat" | tr -dc 0-9.)s); console tail:" >&2
		tail -30 "$work/console.log" >&2
		[ "$n" -lt "$boots" ] || exit 124
	elif [ -n "$paused" ] && [ -n "$status" ] && [ "$status" != 0 ] && [ "$status" != 126 ]; then
		echo "vm run: the job failed (status $status) in a guest that stalled" >&2
		[ "$n" -lt "$boots" ] || break
	else
		break
	fi
	echo "vm run: booting again ($((n + 1)) of $boots)" >&2
done
[ "$status" = 126 ] && { echo "vm run: the guest could not set up its cgroups ($cgroup); console tail:" >&2; tail -30 "$work/console.log" >&2; }
vm_finish "vm run" "vm run: ${bin##*/}" "POOLAGENT_VM_TIMEOUT, or the binary's -test.timeout plus 30 s" " (qemu status $qemu)"
