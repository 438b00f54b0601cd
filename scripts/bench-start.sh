#!/bin/bash
# bench-start.sh - what starting a short command in a cgroup costs, five
# ways interleaved (docs/performance.md "Starting a query"):
# `poolagent-run -- /bin/true`, `poolagent run -- /bin/true` (against a real
# `poolagent daemon`), libcgroup's `cgexec -g cpu:G /bin/true`, `/bin/true`
# alone, and `goexec /bin/true`, a Go program that only execs its argument
# (the floor of any Go client): medians, 90th percentiles and each one's
# ratio to cgexec, in three places:
#
#   host        this host's cpu hierarchy (cgroup v1 or v2), a daemon that
#               benchstart starts on a fresh pool root; cgexec from Debian's
#               cgroup-tools, installed with apt when missing;
#   vm          the cgroup v2 busybox VM (scripts/vm/run.sh), likewise, with
#               the host's cgexec and true copied in;
#   systemd-vm  the reference host: the systemd VM (Debian 12, systemd 252 as
#               PID 1; scripts/vm/systemd/run.sh), poolagent installed as its
#               service with scripts/install.sh and timed through the
#               service's socket, and Debian's own cgexec.
#
# Each place prints its table as it ends; then one table of all of them.
# Needs root, Go and Debian's apt; the VMs need scripts/vm/setup.sh and
# scripts/vm/systemd/setup.sh run first (scripts/test.sh runs them).
# Env: RUNS (rounds, default 40), VM_RUNS (rounds in each VM, default RUNS),
# WHERE (the places, default "host vm systemd-vm"), NO_VM=1 (the host only).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-start.sh: needs root (it creates cgroups)" >&2; exit 1; }
runs=${RUNS:-40}
vm_runs=${VM_RUNS:-$runs}
where=${WHERE:-host vm systemd-vm}
[ "${NO_VM:-}" = 1 ] && where=host
for w in $where; do
	case $w in
	host | vm | systemd-vm) ;;
	*) echo "bench-start.sh: WHERE names $w (accepted: host, vm, systemd-vm)" >&2; exit 2 ;;
	esac
done

if ! command -v cgexec >/dev/null; then
	apt-get install -y cgroup-tools >/dev/null || { apt-get update >/dev/null && apt-get install -y cgroup-tools >/dev/null; }
fi
cgexec=$(command -v cgexec)
true_bin=$(readlink -f /bin/true)

# Not below /tmp: the VM mounts a tmpfs there.
mkdir -p scripts/vm/lab
bin=$(mktemp -d "$PWD/scripts/vm/lab/bench-start.XXXXXX")
trap 'rm -rf "$bin"' EXIT
chmod 755 "$bin"
export CGO_ENABLED=0
cmds="poolagent poolagent-run"
# install.sh installs the OCI runtime too.
[[ " $where " == *" systemd-vm "* ]] && cmds="$cmds poolagent-oci"
for c in $cmds; do
	go build -o "$bin/$c" "./cmd/$c"
done
go build -o "$bin/benchstart" ./scripts/benchstart
go build -o "$bin/goexec" ./scripts/benchstart/goexec
out=$bin/out
mkdir "$out"

# show NAME: a place's output as it comes, without the rows kept in
# $out/NAME for the table at the end.
show() { tee "$out/$1" | grep -v '^benchstart-row' || true; }

for w in $where; do
	case $w in
	host)
		echo "== host: $(nproc) CPUs"
		"$bin/benchstart" -bin "$bin" -cgexec "$cgexec" -cmd "$true_bin" -runs "$runs" -label host | show host
		;;
	vm)
		echo "== VM: cgroup v2, busybox ($vm_runs rounds; qemu boots first)"
		# cgexec and true are dynamically linked: the guest gets them with
		# their libraries and loader, at the paths the host has them.
		files="$bin/poolagent $bin/poolagent-run $bin/goexec $cgexec $true_bin"
		for f in "$cgexec" "$true_bin"; do
			files="$files $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')"
		done
		POOLAGENT_VM_FILES="$files" POOLAGENT_VM_TIMEOUT=${POOLAGENT_VM_TIMEOUT:-1800} \
			scripts/vm/run.sh "$bin/benchstart" -bin "$bin" -cgexec "$cgexec" -cmd "$true_bin" -runs "$vm_runs" -label VM | show vm
		;;
	systemd-vm)
		echo "== systemd VM: Debian 12, systemd 252 as PID 1, poolagent installed as its service ($vm_runs rounds; qemu boots first)"
		stage=$bin/systemd
		mkdir -p "$stage/bin" "$stage/scripts"
		cp "$bin/poolagent" "$bin/poolagent-run" "$bin/poolagent-oci" "$bin/benchstart" "$bin/goexec" "$stage/bin/"
		cp scripts/install.sh scripts/uninstall.sh scripts/pools-scope.sh scripts/poolagent.service scripts/poolagent.socket "$stage/scripts/"
		cp -r monitoring "$stage/"
		cp scripts/vm/systemd/bench-start.sh "$stage/"
		POOLAGENT_VM_TIMEOUT=${POOLAGENT_VM_TIMEOUT:-1800} scripts/vm/systemd/run.sh "$stage" ./bench-start.sh "$vm_runs" | show systemd-vm
		;;
	esac
done

echo "== every place: the median and 90th percentile of each way's wall time in ms; ratio: median over cgexec's median; paired: median of the ratios to cgexec within each round"
for w in $where; do cat "$out/$w"; done | awk -F'\t' '
	$1 == "benchstart-row" {
		if (!n++) printf "%-12s %-10s %-36s %9s %8s %7s %7s\n", "place", "hierarchy", "way", "median", "p90", "ratio", "paired"
		printf "%-12s %-10s %-36s %9s %8s %7s %7s\n", $2, $3, $4, $5, $6, $7, $8
		if ($4 ~ /^poolagent-run /) run = run sprintf("%s%s (%s) %s", run == "" ? "" : ", ", $2, $3, $7)
	}
	END { if (run != "") print "poolagent-run over cgexec: " run }'
