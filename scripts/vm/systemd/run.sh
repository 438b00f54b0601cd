#!/bin/bash
# run.sh STAGE COMMAND [ARG...] - boot the systemd flavour of the test VM
# (setup.sh: Debian bookworm, systemd 252 as PID 1, cgroup v2) with the
# directory STAGE copied to /job, run COMMAND in /job as root as the last
# step of the boot, and exit with its status (docs/testing.md).
#
# COMMAND runs in a oneshot unit, poolagent-vm-job.service, ordered after
# multi-user.target, so the system is up (journald, D-Bus, logind) and
# systemctl works as on a host; the unit then powers the guest off.
#
# Serial ports, as in the busybox flavour:
#   ttyS0  the kernel's and systemd's console (a log file on the host)
#   ttyS1  the job's stdout and stderr (run.sh's stdout)
#   ttyS2  the job's exit status, one decimal line
#   ttyS3  the guest's uptime every second, its heartbeat
#
# A guest whose heartbeat, once begun (systemd starts it early in the
# boot), stops for POOLAGENT_VM_STALL seconds before the job has reported
# a status has frozen: the VM is stopped, its console tail
# printed, and it is booted again, POOLAGENT_VM_BOOTS times in all.
#
# Exit status: the command's; 124 the VM hit its time limit, froze on its
# last boot, or was stopped by SIGINT, SIGTERM or SIGQUIT; 125 the VM
# ended without reporting a status (the console tail is printed).
#
# Env:
#   POOLAGENT_VM_TIMEOUT   seconds before the VM is stopped (default 900)
#   POOLAGENT_VM_STALL     seconds without a heartbeat that mean the guest
#                          froze (default 60)
#   POOLAGENT_VM_BOOTS     boots in all when the guest freezes (default 2)
#   POOLAGENT_VM_CPUS      guest vCPUs (default 2)
#   POOLAGENT_VM_MEM_MIB   guest memory (default 2048)
#   POOLAGENT_VM_CONSOLE=1 print the guest's console log to stderr afterwards
#   POOLAGENT_VM_TIMING=1  print one line to stderr: boot, job and wall seconds
#   POOLAGENT_VM_LAB       the lab folder (default: scripts/vm/lab)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
lab=${POOLAGENT_VM_LAB:-$here/../lab}
die() { echo "vm systemd run: $*" >&2; exit 125; }

[ $# -ge 2 ] || { echo "usage: $0 STAGE COMMAND [ARG...]" >&2; exit 2; }
stage=$1
shift
[ -d "$stage" ] || die "no such directory: $stage"
kernel=$lab/kernel/current/vmlinuz
[ -s "$kernel" ] || die "no kernel in $lab: run scripts/vm/setup.sh first"
. "$here/image.sh"
sources=$(image_sources) || die "no apt sources at /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
base=$(image_cpio "$lab" "$sources")
[ -s "$base" ] || die "no root file system $base (of this checkout's package list): run scripts/vm/systemd/setup.sh first"
touch "$base"

work=$(mktemp -d "${TMPDIR:-/tmp}/poolagent-vm-systemd.XXXXXX")
vm=
cleanup() {
	[ -n "$vm" ] && kill -KILL "$vm" 2>/dev/null && wait "$vm" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
# go test stops a runner that outlives its -timeout with SIGQUIT (exec.sh
# passes it on as SIGTERM): say what the guest was doing, and stop it.
interrupted() {
	if [ -n "$vm" ]; then
		kill -KILL "$vm" 2>/dev/null
		wait "$vm" 2>/dev/null || true
	fi
	vm=
	echo "vm systemd run: stopped by SIG$1; console tail:" >&2
	tail -30 "$work/console.log" >&2 2>/dev/null
	exit 124
}
for sig in INT TERM QUIT; do
	trap "interrupted $sig" "$sig"
done
root=$work/root
mkdir -p "$root/job" "$root/etc/systemd/system/multi-user.target.wants"
cp -a "$stage/." "$root/job/"

quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
	echo '#!/bin/sh'
	echo '# The job of poolagent-vm-job.service: written by scripts/vm/systemd/run.sh.'
	echo 'stty -F /dev/ttyS1 raw -echo'
	echo 'echo "poolagent-vm: booted in $(cut -d" " -f1 /proc/uptime)s, $(uname -r), $(systemctl --version | head -1)" >/dev/ttyS0'
	printf 'cd /job && '
	for a in "$@"; do printf '%s ' "$(quote "$a")"; done
	echo '>/dev/ttyS1 2>&1'
	echo 'status=$?'
	echo 'echo "poolagent-vm: job exited with status $status at $(cut -d" " -f1 /proc/uptime)s" >/dev/ttyS0'
	echo 'echo "$status" >/dev/ttyS2'
	echo 'sync'
	echo 'systemctl poweroff -ff'
} >"$root/job/.vm-job"
chmod 755 "$root/job/.vm-job"
cat >"$root/etc/systemd/system/poolagent-vm-job.service" <<'UNIT'
[Unit]
Description=poolagent VM job (scripts/vm/systemd/run.sh)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/job/.vm-job
TimeoutStartSec=infinity
StandardOutput=journal
StandardError=journal
UNIT
ln -s ../poolagent-vm-job.service "$root/etc/systemd/system/multi-user.target.wants/poolagent-vm-job.service"
# The heartbeat: the guest's uptime on ttyS3 every second from early in
# the boot, so a guest that froze (an emulator hiccup on a loaded host) is
# told from a job that runs long.
mkdir -p "$root/etc/systemd/system/sysinit.target.wants"
cat >"$root/etc/systemd/system/poolagent-vm-heartbeat.service" <<'UNIT'
[Unit]
Description=poolagent VM heartbeat (scripts/vm/systemd/run.sh)
DefaultDependencies=no

[Service]
ExecStart=/bin/sh -c 'while :; do cut -d" " -f1 /proc/uptime >/dev/ttyS3; sleep 1; done'
UNIT
ln -s ../poolagent-vm-heartbeat.service "$root/etc/systemd/system/sysinit.target.wants/poolagent-vm-heartbeat.service"
# The job's archive follows the base: the kernel unpacks both into one
# root file system, later files over earlier ones.
cp "$base" "$work/initrd"
(cd "$root" && find . | cpio -o -H newc --quiet) >>"$work/initrd"

timeout=${POOLAGENT_VM_TIMEOUT:-900}
stall=${POOLAGENT_VM_STALL:-60}
boots=${POOLAGENT_VM_BOOTS:-2}
started=$(date +%s.%N)

# boot runs the VM once (vm_boot); the heartbeat starts with systemd's
# units, some seconds into the boot. No udev in the image: without the
# mask systemd waits 90 s for dev-ttyS0.device before the console's getty.
boot() {
	vm_boot 2048 "console=ttyS0 loglevel=3 rdinit=/sbin/init panic=-1 tsc=reliable mitigations=off systemd.show_status=0 systemd.mask=serial-getty@ttyS0.service" first-beat
}


for ((n = 1; ; n++)); do
	boot
	if [ "$stopped" != froze ] || [ -n "$status" ]; then
		break
	fi
	echo "vm systemd run: the guest froze: no heartbeat for ${stall}s (last guest uptime: $(tail -1 "$work/heartbeat" | tr -dc 0-9.)s); console tail:" >&2
	tail -30 "$work/console.log" >&2
	[ "$n" -lt "$boots" ] || exit 124
	echo "vm systemd run: booting again ($((n + 1)) of $boots)" >&2
done
vm_finish "vm systemd run" "vm systemd run" POOLAGENT_VM_TIMEOUT ""
