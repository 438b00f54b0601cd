# pools-scope.sh - how poolagent lets its pools go when it is removed:
# sourced by scripts/uninstall.sh, and written into the packages' removal
# scripts by scripts/package.sh. POSIX sh: dpkg and rpm run those with
# /bin/sh.

# release_pools_scope stops the keeper of poolagent-pools.scope, the
# process that keeps the scope alive while no query runs: systemd then
# ends the scope, with every pool cgroup below it, once the last query
# running there has ended (at once when none runs). No query is killed.
# Without systemd as PID 1 there is no scope, and it does nothing.
release_pools_scope() {
	[ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1 || return 0
	cg=$(systemctl show -P ControlGroup poolagent-pools.scope 2>/dev/null || true)
	[ -n "$cg" ] || return 0
	for procs in /sys/fs/cgroup"$cg"/keep/cgroup.procs /sys/fs/cgroup/unified"$cg"/keep/cgroup.procs; do
		[ -f "$procs" ] || continue
		for pid in $(cat "$procs"); do kill "$pid" 2>/dev/null || true; done
	done
}
