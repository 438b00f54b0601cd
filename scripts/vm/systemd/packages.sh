#!/bin/bash
# packages.sh - poolagent's packages on a clean Debian 12 with systemd 252
# as PID 1, run as root inside the systemd VM (test-packages.sh lints the
# packages on the host, then stages this with the .deb of two versions).
# What an operator does with dpkg and apt, and what they would check,
# step by step: dpkg -i in a chroot (an image being built), install, an
# upgrade with two queries running and the pool file changed on both
# sides, remove with the queries still running, and purge. Every step
# prints its time; the first failed check stops the run with the
# journal's tail.
set -Eeuo pipefail
cd "$(dirname "$0")"
export SYSTEMD_PAGER= SYSTEMD_COLORS=0 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive
. ./steps.sh

deb=$(ls "$PWD"/dist/poolagent_*_amd64.deb)
next=$(ls "$PWD"/next/poolagent_*_amd64.deb)
next_version=$(cat next/VERSION)
work=$PWD/work
mkdir -p "$work"
scope=/sys/fs/cgroup/system.slice/poolagent-pools.scope
main_pid() { systemctl show -P MainPID poolagent.service; }
# named: everything on the host whose name says poolagent, apart from this
# job (its units are poolagent-vm-*, its files in /job).
named() {
	find / /run /sys/fs/cgroup -xdev \( -path /proc -o -path /job -o -path /dev \) -prune -o -name '*poolagent*' -print 2>/dev/null |
		{ grep -v 'poolagent-vm-' || true; } | sort -u
}
# man-db's trigger rebuilds the index of every manual page after each
# dpkg run: minutes in the emulated guest, and nothing this test checks.
echo 'man-db man-db/auto-update boolean false' | debconf-set-selections

step "the image before: systemd $(systemctl --version | awk 'NR == 1 { print $2 }'), nothing named poolagent"
named >"$work/named.before"
quote cat "$work/named.before"
cat /etc/passwd /etc/group /etc/shadow /etc/gshadow >"$work/users.before"
check "no poolagent cgroup" sh -c '! ls -d /sys/fs/cgroup/system.slice/poolagent.service /sys/fs/cgroup/system.slice/poolagent-pools.scope 2>/dev/null'

step "dpkg -i, -r and -P in a chroot, where no systemd runs (an image being built)"
# The guest's root is one in-memory file system without overlayfs: the
# chroot shares /usr's files by hard links (dpkg never writes into an
# installed file, it renames a new one over it) and copies /etc and
# dpkg's and debconf's databases.
image=/srv/image
mkdir -p "$image"
for l in bin sbin lib lib32 lib64 libx32; do [ ! -L "/$l" ] || cp -a "/$l" "$image/"; done
cp -al /usr "$image/usr"
cp -a /etc "$image/"
mkdir -p "$image/var/cache" "$image/var/log" "$image/var/tmp" "$image/tmp" "$image/run" "$image/proc" "$image/dev" "$image/root"
cp -a /var/lib "$image/var/"
cp -a /var/cache/debconf "$image/var/cache/"
chmod 1777 "$image/tmp"
cp "$deb" "$image/tmp/package.deb"
in_image() { chroot "$image" "$@"; }
# dpkg_in_image ARG...: dpkg in the chroot, its output quoted and kept.
dpkg_in_image() {
	local rc=0
	in_image dpkg "$@" >"$work/image.out" 2>&1 || rc=$?
	quote cat "$work/image.out"
	return $rc
}
# said_nothing_failed: the maintainer scripts' commands end in || true,
# so a failure shows only in what they said.
said_nothing_failed() { ! grep -Eiq 'error|warn|fail|denied|not found|no such|cannot|unable' "$work/image.out"; }
check "dpkg -i exits 0" dpkg_in_image -i /tmp/package.deb
check "the maintainer scripts said nothing failed" said_nothing_failed
check "dpkg counts it installed" test "$(in_image dpkg-query -W -f='${Status}' poolagent)" = "install ok installed"
check "the units are enabled on the files alone" test -L "$image/etc/systemd/system/sockets.target.wants/poolagent.socket" -a -L "$image/etc/systemd/system/multi-user.target.wants/poolagent.service"
check "the guest's systemd knows nothing of it: no unit, no socket, no pools" \
	sh -c "[ \"\$(systemctl show -P LoadState poolagent.service)\" = not-found ] && [ ! -e /run/poolagent ] && [ ! -e $scope ]"
check "dpkg -r exits 0" dpkg_in_image -r poolagent
check "the maintainer scripts said nothing failed" said_nothing_failed
check "dpkg -P exits 0" dpkg_in_image -P poolagent
check "the maintainer scripts said nothing failed" said_nothing_failed
check "nothing named poolagent is left in the chroot but the VM's own units" \
	test -z "$(find "$image" -xdev -name '*poolagent*' ! -name 'poolagent-vm-*')"
rm -rf "$image"

step "apt install ./$(basename "$deb") on the clean image"
quote apt-get install -y "$deb"
check "poolagent.socket and poolagent.service are enabled" systemctl is-enabled --quiet poolagent.socket poolagent.service
check "poolagent.socket and poolagent.service are active" systemctl is-active --quiet poolagent.socket poolagent.service
quote ss -xl src /run/poolagent/agent.sock
check "the socket listens" sh -c 'ss -xlH src /run/poolagent/agent.sock | grep -q LISTEN'
quote poolagent pools
check "poolagent pools answers with the default pool" sh -c 'poolagent pools | grep -qw default'
dpkg -L poolagent >"$work/dpkg-L"
check "dpkg -L lists the files test-packages.sh compared with install.sh's" diff deb.files <(while read -r f; do [ -d "$f" ] || echo "$f"; done <"$work/dpkg-L" | sort)
check "/etc/poolagent/pools.sql is a conffile" sh -c 'dpkg-query -W -f="\${Conffiles}" poolagent | grep -q "/etc/poolagent/pools.sql"'

step "upgrade to $next_version with the pool file changed on both sides (--force-confold)"
cat >>/etc/poolagent/pools.sql <<'SQL'
CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 2);
SQL
cp /etc/poolagent/pools.sql "$work/pools.mine"
systemctl reload poolagent.service
check "the operator's pool is there" until_ 30 test -d "$scope/pools/olap"
# Two queries run across the upgrade and the removal, started as an
# operator starts them: a job as a service of its own (systemd-run; its
# client stays the unit's main process) and a command in the background
# of a shell (in a scope, as in a login session; its client becomes the
# command). Each ends with its own status once /run/query.end exists.
cat >"$work/query" <<'SH'
#!/bin/sh
until [ -e /run/query.end ]; do sleep 1; done
exit "$1"
SH
chmod 755 "$work/query"
systemd-run --quiet --unit=query-job poolagent-run --pool olap -- "$work/query" 7
systemd-run --quiet --scope --unit=query-shell poolagent-run --pool olap -- "$work/query" 8 &
shell_client=$!
# running_ids: the ids of the queries RUNNING in pool olap.
running_ids() { poolagent queries | awk '$2 == "olap" && $3 == "RUNNING" { print $1 }' | sort; }
two_running() { [ "$(running_ids | wc -l)" = 2 ]; }
check "both queries run in pool olap" until_ 60 two_running
quote poolagent queries
running_ids >"$work/queries.before"
# clients_run: the service's client and the shell's command both run.
clients_run() { systemctl is-active --quiet query-job.service && kill -0 "$shell_client"; }
adopted() { running_ids | cmp -s - "$work/queries.before"; }
# The next package's own pools.sql differs too, so dpkg has to choose.
dpkg-deb -R "$next" "$work/next"
echo '-- A line the next version added to the default pool file.' >>"$work/next/etc/poolagent/pools.sql"
(cd "$work/next" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | sort | xargs md5sum >DEBIAN/md5sums)
dpkg-deb -b -Zgzip -z1 --root-owner-group "$work/next" "$work/next.deb" >/dev/null
old=$(main_pid)
quote apt-get install -y -o Dpkg::Options::=--force-confold "$work/next.deb"
check "the service is active" systemctl is-active --quiet poolagent.service
check "a new daemon" test "$(main_pid)" != "$old"
check "poolagent --version names $next_version" sh -c "poolagent --version | grep -qF '$next_version'"
quote poolagent --version
check "both queries survived the upgrade" clients_run
check "the new daemon adopted both (the same ids, running)" until_ 60 adopted
quote poolagent queries
check "the operator's pool file is kept" cmp /etc/poolagent/pools.sql "$work/pools.mine"
check "the package's is beside it as pools.sql.dpkg-dist" grep -q 'the next version added' /etc/poolagent/pools.sql.dpkg-dist
rm /etc/poolagent/pools.sql.dpkg-dist
step "apt remove with the two queries running: the service stops, the pools go once idle"
quote apt-get remove -y poolagent
check "poolagent.service is stopped" sh -c '! systemctl is-active --quiet poolagent.service'
check "poolagent.socket is stopped" sh -c '! systemctl is-active --quiet poolagent.socket'
check "the binary is gone" test ! -e /usr/bin/poolagent
check "the pool file stays (a conffile)" cmp /etc/poolagent/pools.sql "$work/pools.mine"
check "both queries run on" clients_run
check "their pool's cgroups stay while they run" sh -c "[ \"\$(ls -d $scope/pools/olap/*/ | wc -l)\" = 2 ]"
touch /run/query.end
status=0
wait "$shell_client" || status=$?
check "the shell's client exits with its command's status (8)" test "$status" = 8
check "the service's client exits with its command's status (7)" \
	until_ 30 sh -c '! systemctl is-active --quiet query-job.service && [ "$(systemctl show -P ExecMainStatus query-job.service)" = 7 ]'
quote journalctl --no-pager -o cat -u query-job.service
systemctl reset-failed query-job.service
rm /run/query.end
check "the scope and every pool cgroup are gone" until_ 60 test ! -d "$scope"

step "apt purge: nothing of poolagent left"
quote cat "$work/dpkg-L"
quote apt-get purge -y poolagent
check "dpkg knows no poolagent" sh -c '! dpkg-query -W poolagent 2>/dev/null'
gone() {
	local f
	while read -r f; do
		case $f in /usr/share/doc/* | *poolagent*) [ ! -e "$f" ] || { echo "   left: $f"; return 1; } ;; esac
		[ -d "$f" ] || [ ! -e "$f" ] || { echo "   left: $f"; return 1; }
	done <"$work/dpkg-L"
}
check "no file and no directory of its own that dpkg -L listed is left" gone
named >"$work/named.after"
quote cat "$work/named.after"
check "find names nothing poolagent that was not there before (files, units, state, cgroups)" diff "$work/named.before" "$work/named.after"
check "no user or group was added" cmp "$work/users.before" <(cat /etc/passwd /etc/group /etc/shadow /etc/gshadow)

step "done"
awk -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "packages passed in %.1fs\n", b - a }'
