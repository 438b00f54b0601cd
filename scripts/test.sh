#!/bin/bash
# test.sh - the project's whole test run; the README's test command, and
# what CI runs (.ci/run). Needs root and Debian's apt for the real-kernel
# parts (docs/testing.md); it waits up to 5 minutes for another apt's lock.
#
#   1. gofmt, go vet and a tidy go.mod
#   2. unit tests
#   3. real-kernel tests (TestKernel*) against this host's cgroups
#      (cgroup v1 cpu on the project's hybrid hosts)
#   4. the same real-kernel tests under cgroup v2, in a qemu VM (scripts/vm)
#   5. a check that every TestKernel* test passed in step 3 or step 4
#   (4 also runs the GOMAXPROCS test again in a VM with 4 vCPUs, and the
#   task limit tests in a boot of the VM with cgroup v1 hierarchies, whose
#   pids hierarchy, unlike the host's, is the tests' to use)
#   6. the operator's lifecycle on a real systemd host: install, socket
#      activation, restarts with queries running, watchdog, uninstall, in
#      a Debian 12 VM with systemd 252 as PID 1 (scripts/vm/systemd); the
#      .deb and .rpm (lintian and rpmlint on the host; apt install,
#      upgrade, remove and purge in another boot of the VM); then the
#      real-kernel tests of daemon, cgroupfs, pooltree and systemd in a
#      subtree systemd delegated there
#
# POOLAGENT_REQUIRE_KERNEL=1 makes a real-kernel test that cannot run fail
# instead of skipping; step 5 catches a test that skipped in both runs any
# other way. So real-kernel tests can never silently stop running.
#
# A failing step does not stop the later ones (CI shows every failure at
# once); the script fails at the end if any step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
# sudo's PATH often lacks Go: look where go.dev's instructions put it, as
# scripts/install.sh and scripts/poolagent do.
command -v go >/dev/null || PATH=/usr/local/go/bin:$PATH
export POOLAGENT_REQUIRE_KERNEL=1
kernel='^TestKernel'
# Real-kernel tests that boot the VM on their own (below).
ownboot='^(TestKernelOOMToldOnStuckFile|TestKernelMemoryGuarantee)$'
logs=$(mktemp -d)

# favour runs this script, and all it starts (go, the tests, the VMs),
# in a cgroup of its own at the top of the v1 cpu hierarchy with 256
# times an ordinary task's CPU share, where the host has one (hybrid
# hosts): other work on a busy host then delays the run little, and the
# timing-judging tests see the CPU they need (docs/testing.md, "Timing on
# a busy machine"). On the way out the script goes back where it came
# from and the cgroup is removed. Without a v1 cpu hierarchy, or not as
# root, it does nothing.
favoured=
favour() {
	[ "$(id -u)" = 0 ] || return 0
	local mnt rel
	mnt=$(awk '{ for (i = 7; i <= NF && $i != "-"; i++); }
		$(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)cpu(,|$)/ { print $5; exit }' /proc/self/mountinfo)
	rel=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3; exit }' /proc/self/cgroup)
	[ -n "$mnt" ] && [ -n "$rel" ] || return 0
	home=$mnt${rel%/}
	favoured=$mnt/poolagent-test-run-$$
	if mkdir "$favoured" && echo 262144 >"$favoured/cpu.shares" && echo $$ >"$favoured/cgroup.procs"; then
		echo "== this run is favoured in $favoured (cpu.shares 262144)"
	else
		echo "   could not favour this run in $favoured; running at the host's ordinary share" >&2
		echo $$ >"$home/cgroup.procs" 2>/dev/null || true
		rmdir "$favoured" 2>/dev/null || true
		favoured=
	fi
}
unfavour() {
	[ -n "$favoured" ] || return 0
	echo $$ >"$home/cgroup.procs" 2>/dev/null || true
	# Children that outlived the run (none, as a rule) keep it a moment.
	for _ in 1 2 3 4 5; do rmdir "$favoured" 2>/dev/null && return 0; sleep 1; done
	echo "could not remove $favoured: $(wc -l <"$favoured/cgroup.procs") processes still in it" >&2
}
trap 'unfavour; rm -rf "$logs"' EXIT
favour

# terse drops go test -v's progress lines and keeps results and test logs
# (the real-kernel tests log the counters they measured).
terse() { sed -e '/^=== \(RUN\|PAUSE\|CONT\|NAME\)/d'; }

# passed reads go test -v output and prints "PACKAGE TEST" for each
# top-level test that passed (skipped prints those that skipped). go test
# prints each package's output in one piece, ending with its "ok PACKAGE"
# or "FAIL PACKAGE" line.
passed() { outcome PASS "$@"; }

# reasons reads go test output (with or without -v) and prints one line
# per test that ended with the outcome given (FAIL or SKIP), "PACKAGE
# TEST: the last line it logged before it ended" (its error or its
# reason to skip, as a rule); for FAIL also one per package that failed
# without a failed test (a build error, a timeout). failures is the FAIL
# list: the run's last lines give it, so the reason of a failure is not
# hundreds of lines above the end.
reasons() {
	awk -v want="$1" '
	function flush(pkg, failed,   i) {
		for (i = 1; i <= n; i++) printf "  %s %s: %s\n", pkg, names[i], (reasons[i] != "" ? reasons[i] : "(a subtest failed, or see its output)")
		if (n == 0 && failed && want == "FAIL") printf "  %s: failed without a failed test (build error, panic or timeout; see its output)\n", pkg
		n = 0; pending = ""; after = 0
	}
	# A line ending in " log:" heads a log a test prints when it ends
	# failed ("daemon log:"): it names a failure only when nothing else does.
	function reason(line,   dump) {
		sub(/^ +/, "", line)
		dump = (line ~ / log:$/)
		if (length(line) > 200) line = substr(line, 1, 200) "…"
		if (after > 0) { if (!dump || reasons[after] == "") reasons[after] = line }   # without -v: the lines after --- FAIL
		else if (!dump || pending == "") pending = line                              # with -v: the lines before it
	}
	/^=== RUN/ { pending = ""; after = 0; next }
	/^ +[^ ]+\.go:[0-9]+: / || /^panic: / { reason($0); next }
	$1 == "---" && $2 == want ":" {
		names[++n] = $3; reasons[n] = pending
		# With -v a subtest logs before its parent fails: the parent and
		# the subtest share the reason.
		if (pending == "" && $0 ~ /^ +---/ && n > 1 && fromPending[n-1]) reasons[n] = reasons[n-1]
		fromPending[n] = (pending != "")
		after = (reasons[n] == "" ? n : 0); pending = ""; next
	}
	/^(FAIL|ok)[ \t]+[^ \t]+([ \t]|$)/ { flush($2, $1 == "FAIL"); next }
	' "${@:2}"
}
failures() { reasons FAIL "$@"; }
skipped() { outcome SKIP "$@"; }
outcome() {
	local want=$1
	shift
	awk -v want="--- $want:" 'index($0, want) == 1 { names[++n] = $3 }
		/^(ok|FAIL)[ \t]/ && NF >= 2 { for (i = 1; i <= n; i++) print $2, names[i]; n = 0 }' "$@"
}

# stalls reads a kernel log and prints the lines in which the kernel
# reports that it stalled: a soft or workqueue lockup, an RCU stall, a
# task blocked for minutes. kernelstalls prints those of this host's log
# since a time ("2026-12-06 10:20:00"), none when the log is not readable.
stalls() {
	grep -E 'BUG: (soft|workqueue) lockup|hard LOCKUP|detected stalls? on CPU|self-detected stall|blocked for more than [0-9]+ seconds' || true
}
kernelstalls() { dmesg --since "$1" 2>/dev/null | stalls; }

# failedpkgs reads go test output and prints each package that failed,
# once; without prints go test output without the lines of the packages
# named (go test prints each package's output in one piece, ending with
# its "ok" or "FAIL" line, as passed reads it).
failedpkgs() { failures "$@" | awk '{ sub(/:$/, "", $1); print $1 }' | sort -u; }
without() {
	awk -v drop="$1" 'BEGIN { n = split(drop, d, " "); for (i = 1; i <= n; i++) skip[d[i]] = 1 }
		{ buf = buf $0 "\n" }
		/^(FAIL|ok)[ \t]+[^ \t]+([ \t]|$)/ { if (!($2 in skip)) printf "%s", buf; buf = "" }
		END { printf "%s", buf }' "${@:2}"
}

# stalledAgain runs again, once, the packages that failed in go test's
# output LOG when the host's kernel said it stalled since SINCE (a
# lockup, an RCU stall: its CPUs ran nothing else for seconds or
# minutes), which may have run out a test's time, or the package's 5
# minutes, with no fault of the code. It prints the kernel's lines, puts
# the second run's output in LOG in place of the first's for those
# packages, counts each as a rerun, and returns the second run's status;
# it returns 1 with nothing run when the kernel did not stall or no
# package failed. The command to run them again (go test and its flags)
# follows WHAT the step is called (docs/testing.md, "Timing on a busy
# machine").
stalledAgain() {
	local log=$1 since=$2 what=$3 stalled again
	shift 3
	stalled=$(kernelstalls "$since")
	again=$(failedpkgs "$log")
	[ -n "$stalled" ] && [ -n "$again" ] || return 1
	again=$(echo $again)
	echo "== the host's kernel stalled while the $what ran; its log says ($(echo "$stalled" | wc -l) lines, the first of each kind):"
	echo "$stalled" | sed 's/^\[[^]]*\] *//' | awk '!seen[$0]++' | head -8 | sed 's/^/  /'
	echo "== so the packages that failed run once more: $again"
	mv "$log" "$log.stalled"
	without "$again" "$log.stalled" >"$log"
	for pkg in $again; do echo "  $pkg ($what, the kernel stalled): 1"; done >>"$logs/stalled"
	"$@" $again 2>&1 | tee -a "$log" | terse
}

# aptget runs apt-get, waiting up to 5 minutes for another apt or dpkg
# (an unattended upgrade, a second test run) to release its lock.
aptget() {
	local waited=0
	until apt-get -o DPkg::Lock::Timeout=30 "$@" 2>"$logs/apt"; do
		if ! grep -q 'lock' "$logs/apt" || [ "$waited" -ge 300 ]; then
			cat "$logs/apt" >&2
			return 1
		fi
		echo "   apt is locked by another apt or dpkg; waiting ($waited s of at most 300 s)"
		sleep 10
		waited=$((waited + 40))
	done
}

failed=()

# Tools the tests run that a fresh machine may lack: systemd-analyze
# checks the unit (internal/systemd/unit_test.go), curl scrapes the metrics
# endpoint as an operator would (internal/metrics/metrics_test.go), chromium
# renders compare's HTML report for a screenshot
# (internal/compare/html_browser_test.go), promtool (package prometheus) checks the
# exposition and the rules in monitoring/ (internal/metrics/promtool_test.go), zsh
# checks its completion script and groff renders the manual pages
# (cmd/poolagent/completion_test.go). Only what is missing is installed.
tools=()
command -v systemd-analyze >/dev/null || tools+=(systemd)
command -v curl >/dev/null || tools+=(curl)
command -v chromium >/dev/null || tools+=(chromium)
command -v promtool >/dev/null || tools+=(prometheus)
command -v zsh >/dev/null || tools+=(zsh)
command -v groff >/dev/null || tools+=(groff-base)
# lintian, rpm and rpmlint check the packages (scripts/vm/systemd/test-packages.sh).
for tool in lintian rpm rpmlint; do
	command -v $tool >/dev/null || tools+=($tool)
done
if [ ${#tools[@]} -gt 0 ]; then
	echo "== installing ${tools[*]}"
	aptget update -qq && aptget install -y -qq --no-install-recommends "${tools[@]}" >/dev/null ||
		failed+=("installing ${tools[*]}")
fi

echo "== gofmt, go vet and go mod tidy"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" && echo "$unformatted" | sed 's/^/  /'
	failed+=("gofmt")
fi
go vet ./... || failed+=("go vet")
# go.mod lists what the code imports, direct dependencies as direct.
# The packaging tool (nfpm) is a module of its own, scripts/package, so
# its requirements stay out of the library's (docs/operate.md, Packages).
for mod in . scripts/package; do
	if ! untidy=$(go -C "$mod" mod tidy -diff); then
		echo "go mod tidy would change $mod/go.mod or go.sum:" && echo "$untidy" | sed 's/^/  /'
		failed+=("go mod tidy ($mod)")
	fi
done

# The fleet tests run real etcd clusters: members are separate processes
# of a small command embedding the etcd server (internal/etcdtest), built
# once here rather than by each test binary.
echo "== etcd member for the fleet tests"
export POOLAGENT_ETCD_MEMBER="$logs/etcd-member"
go build -o "$POOLAGENT_ETCD_MEMBER" ./internal/etcdtest/etcd-member || failed+=("building etcd-member")

echo "== unit tests"
: >"$logs/stalled"
since=$(date '+%F %T')
go test -count=1 -timeout 5m -skip "$kernel" ./... 2>&1 | tee "$logs/unit" ||
	stalledAgain "$logs/unit" "$since" "unit tests" go test -count=1 -timeout 5m -skip "$kernel" ||
	failed+=("unit tests")

echo "== real-kernel tests: which packages have them"
go test -list "$kernel" ./... >"$logs/list" || failed+=("listing real-kernel tests")
awk '/^Test/ { names[++n] = $1 } /^ok / { for (i = 1; i <= n; i++) print $2, names[i]; n = 0 }' \
	"$logs/list" | sort >"$logs/want"
pkgs=$(cut -d' ' -f1 "$logs/want" | sort -u)
[ -n "$pkgs" ] || { echo "no $kernel tests found" >&2; exit 1; }
sed 's/^/  /' "$logs/want"

# One package at a time: the tests measure CPU time and must not compete
# with each other for the two CPUs. No package needs a minute; -timeout 5m
# turns a hang into a goroutine dump and a failure within minutes.
echo "== real-kernel tests on this host"
since=$(date '+%F %T')
go test -count=1 -p 1 -v -timeout 5m -run "$kernel" $pkgs 2>&1 | tee "$logs/host" | terse ||
	stalledAgain "$logs/host" "$since" "real-kernel tests on this host" go test -count=1 -p 1 -v -timeout 5m -run "$kernel" ||
	failed+=("real-kernel tests on this host")

echo "== real-kernel tests under cgroup v2 (qemu VM, one boot per package)"
: >"$logs/vm"
if scripts/vm/setup.sh; then
	CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 POOLAGENT_VM_TIMING=1 \
		go test -count=1 -p 1 -v -timeout 5m -exec "$PWD/scripts/vm/run.sh" -run "$kernel" -skip "$ownboot" $pkgs 2>&1 |
		tee "$logs/vm" | terse || failed+=("real-kernel tests under cgroup v2")
	# 200 queries killed at their memory limit take about two minutes
	# under emulation: a boot of their own, so the package's keeps its 5 m.
	echo "== OOM messages on a stderr that never takes a write, cgroup v2 VM"
	(cd internal/daemon && CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 \
		go test -count=1 -v -timeout 8m -exec "$PWD/../../scripts/vm/run.sh" -run "$ownboot" . 2>&1) |
		tee -a "$logs/vm" | terse || failed+=("OOM messages on a stuck stderr")
	# The memory guarantee test fills the guest's memory, which under
	# emulation costs time in proportion to it: a boot of its own with
	# 512 MiB, so the package's keeps its 5 m.
	echo "== memory guarantees under memory pressure, cgroup v2 VM with 512 MiB"
	(cd cgroupfs && CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 POOLAGENT_VM_MEM_MIB=512 \
		go test -count=1 -v -timeout 5m -exec "$PWD/../scripts/vm/run.sh" -run '^TestKernelMemoryGuarantee$' . 2>&1) |
		tee -a "$logs/vm" | terse || failed+=("memory guarantees in a 512 MiB VM")
	# With 2 vCPUs Go's floor of 2 hides GOMAXPROCS following a query's
	# limit; 4 vCPUs show it change (docs/pools.md, "Per query").
	echo "== a Go program's GOMAXPROCS in a query, cgroup v2 VM with 4 vCPUs"
	(cd internal/daemon && CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 POOLAGENT_VM_CPUS=4 \
		go test -count=1 -v -timeout 5m -exec "$PWD/../../scripts/vm/run.sh" -run '^TestKernelQueryCPULimitVisible$' . 2>&1) |
		tee "$logs/vm4" | terse || failed+=("GOMAXPROCS in a 4-vCPU VM")
	# The host's own v1 pids hierarchy is not the tests' to use (they skip
	# there); the VM booted with v1 hierarchies has one of its own.
	echo "== real-kernel process limits under cgroup v1 (VM)"
	CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v1 POOLAGENT_VM_CGROUP=v1 \
		go test -count=1 -p 1 -v -timeout 3m -exec "$PWD/scripts/vm/run.sh" -run '^(TestKernelPidsLimits|TestKernelForkBomb)$' \
		./cgroupfs ./internal/daemon 2>&1 | tee "$logs/vm1" | terse || failed+=("process limits under cgroup v1 (VM)")
	# A guest that did not say its v1 hierarchies are its own would make
	# the tests skip as on the host: only a pass counts.
	for test in TestKernelPidsLimits TestKernelForkBomb; do
		grep -q "^--- PASS: $test " "$logs/vm1" || failed+=("process limits under cgroup v1 (VM): $test did not pass")
	done
else
	failed+=("VM setup")
fi

echo "== every real-kernel test passed in at least one mode"
passed "$logs/host" "$logs/vm" | sort -u >"$logs/passed"
missing=$(comm -23 "$logs/want" "$logs/passed")
if [ -n "$missing" ]; then
	echo "passed neither on the host nor in the VM:"
	echo "$missing" | sed 's/^/  /'
	failed+=("real-kernel coverage")
fi
echo "$(wc -l <"$logs/want") real-kernel tests; passed on the host: $(passed "$logs/host" | wc -l), in the VM (v2): $(passed "$logs/vm" | wc -l)"
# A test that needs the other cgroup mode skips in one run and passes in
# the other: a mode split, not a gap. Say which skip is which.
for run in host vm; do
	other=vm && [ $run = vm ] && other=host
	skipped "$logs/$run" | sort -u | while read -r pkg test; do
		# Each reader reads its input whole: one that stops early (grep -q,
		# awk's exit) would fail the pipe under pipefail.
		why=$(reasons SKIP "$logs/$run" | awk -v k="  $pkg $test: " 'index($0, k) == 1 && !found { found = substr($0, length(k) + 1) } END { print found }')
		if passed "$logs/$other" | grep -x "$pkg $test" >/dev/null; then
			echo "  SKIP on the $run: $pkg $test (passed in the $other run): $why"
		else
			echo "  SKIP on the $run: $pkg $test (not covered by the $other run either): $why"
		fi
	done
done

# Its own step: a setup that cannot build the root file system fails the
# run, as a skipped real-kernel test would.
echo "== the operator's lifecycle under systemd 252 as PID 1 (qemu VM)"
if scripts/vm/setup.sh >/dev/null && scripts/vm/systemd/setup.sh; then
	scripts/vm/systemd/test.sh || failed+=("the lifecycle under systemd")
	# The .deb and .rpm of scripts/package.sh: lintian and rpmlint here,
	# then apt install, upgrade, remove and purge in the VM.
	echo "== the packages under systemd 252 as PID 1 (qemu VM)"
	scripts/vm/systemd/test-packages.sh || failed+=("the packages under systemd")
	# The real-kernel tests that run as the daemon does, in a subtree
	# systemd delegated (one boot per package).
	echo "== real-kernel tests in a subtree delegated by systemd 252 (qemu VM)"
	CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 POOLAGENT_VM_TIMING=1 \
		go test -count=1 -p 1 -v -timeout 10m -exec "$PWD/scripts/vm/systemd/exec.sh" -run "$kernel" -skip "$ownboot" \
		./internal/daemon ./cgroupfs ./internal/pooltree ./internal/systemd 2>&1 | tee "$logs/delegated" | terse ||
		failed+=("real-kernel tests under systemd's delegation")
else
	failed+=("systemd VM setup")
fi

# A timing-judging test reruns an attempt that a starved machine spoiled
# (kerneltest.Root.Retry, docs/testing.md), and a package that failed
# while the host's kernel stalled ran again: say how often, and which.
echo "== attempts rerun because the machine was starved, and packages because its kernel stalled"
for run in host vm vm4 vm1 delegated; do
	[ -s "$logs/$run" ] || continue
	awk -v run="$run" '/^=== RUN/ { name = $3 } /starved, running it again/ { n[name]++ }
		END { for (t in n) printf "  %s (%s): %d\n", t, run, n[t] }' "$logs/$run"
done | cat - "$logs/stalled" | sort | tee "$logs/reruns"
echo "$(awk -F': ' '{ s += $NF } END { print s + 0 }' "$logs/reruns") reruns; this run took $((SECONDS / 60)) min $((SECONDS % 60)) s"

if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[@]}" >&2
	for run in unit host vm vm4 vm1 delegated; do
		[ -s "$logs/$run" ] || continue
		list=$(failures "$logs/$run")
		[ -z "$list" ] && continue
		case $run in
		unit) echo "failed unit tests:" ;;
		host) echo "failed real-kernel tests on this host:" ;;
		vm) echo "failed real-kernel tests under cgroup v2 (VM):" ;;
		vm4) echo "failed in the 4-vCPU VM:" ;;
		vm1) echo "failed real-kernel tests under cgroup v1 (VM):" ;;
		delegated) echo "failed real-kernel tests under systemd's delegation (VM):" ;;
		esac
		echo "$list"
	done >&2
	exit 1
fi
echo "all passed"
