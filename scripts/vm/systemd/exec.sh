#!/bin/bash
# exec.sh BINARY [ARG...] - run a static test binary as root in the systemd
# VM (run.sh), inside a scope with Delegate=yes, with its cgroup subtree
# as the tests' parent (POOLAGENT_KERNEL_PARENT): the real-kernel tests then
# meet cgroup v2 as a service does under systemd, not with the whole
# hierarchy to themselves. Made to be a go test runner:
#
#	CGO_ENABLED=0 POOLAGENT_KERNEL_MODE=v2 go test -exec "$PWD/scripts/vm/systemd/exec.sh" -run '^TestKernel' ./internal/daemon
#
# The binary runs in the guest's copy of the package's folder, so testdata
# resolves as on the host. Exit status: the binary's, or run.sh's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BINARY [ARG...]" >&2; exit 2; }
bin=$1
shift
if ! head -c 4 "$bin" | grep -q ELF || ldd "$bin" >/dev/null 2>&1; then
	echo "vm systemd exec: $bin is not a static Linux binary; build it with CGO_ENABLED=0" >&2
	exit 125
fi
mod=$PWD
while [ "$mod" != / ] && [ ! -f "$mod/go.mod" ]; do mod=$(dirname "$mod"); done
rel=${PWD#"$mod"}
rel=${rel#/}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/src/$rel"
cp "$bin" "$stage/test"
[ -d "$mod/testdata" ] && cp -r "$mod/testdata" "$stage/src/testdata"
[ -n "$rel" ] && [ -d testdata ] && cp -r testdata "$stage/src/$rel/testdata"
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
{
	echo '#!/bin/sh'
	echo '# In poolagent-tests.scope: the test binary in the leaf runner/, the tests'"'"' cgroups beside it.'
	echo 'set -e'
	echo 'd=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)'
	echo 'mkdir "$d/runner"'
	echo 'echo $$ >"$d/runner/cgroup.procs"'
	echo 'for c in cpu memory cpuset; do grep -qw $c "$d/cgroup.controllers" && echo +$c >"$d/cgroup.subtree_control"; done'
	echo 'export POOLAGENT_KERNEL_PARENT="$d"'
	for name in POOLAGENT_REQUIRE_KERNEL POOLAGENT_KERNEL_MODE GOTRACEBACK; do
		[ -n "${!name+set}" ] && echo "export $name=$(quote "${!name}")"
	done
	echo "cd $(quote "/job/src/$rel")"
	printf 'exec /job/test'
	for a in "$@"; do printf ' %s' "$(quote "$a")"; done
	echo
} >"$stage/delegated.sh"
chmod 755 "$stage/delegated.sh"
# go test stops a runner that outlives its -timeout with SIGQUIT: run.sh
# then stops the VM and says what the guest was doing, so the signal is
# passed on rather than leaving it running, as SIGTERM (a command started
# with & ignores SIGINT and SIGQUIT, and cannot trap them).
"$here/run.sh" "$stage" systemd-run --scope --quiet --unit=poolagent-tests.scope --property=Delegate=yes -- /job/delegated.sh &
child=$!
for sig in INT TERM QUIT; do
	trap "kill -TERM $child 2>/dev/null" "$sig"
done
set +e
wait "$child"
rc=$?
while kill -0 "$child" 2>/dev/null; do
	wait "$child"
	rc=$?
done
exit "$rc"
