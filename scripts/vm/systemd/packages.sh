#!/bin/bash
# packages.sh - poolagent's packages on a clean Debian 12 with systemd 252
# as PID 1, run as root inside the systemd VM (test-packages.sh lints the
# packages on the host, then stages this with the .deb of two versions).
# What an operator does with apt, and what they would check, step by step:
# install, an upgrade with the pool file changed on both sides, remove
# and purge. Every step prints its time; the first failed
# check stops the run with the journal's tail.
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
check "the operator's pool file is kept" cmp /etc/poolagent/pools.sql "$work/pools.mine"
check "the package's is beside it as pools.sql.dpkg-dist" grep -q 'the next version added' /etc/poolagent/pools.sql.dpkg-dist
rm /etc/poolagent/pools.sql.dpkg-dist
step "apt remove: the service stops, the pools go"
quote apt-get remove -y poolagent
check "poolagent.service is stopped" sh -c '! systemctl is-active --quiet poolagent.service'
check "poolagent.socket is stopped" sh -c '! systemctl is-active --quiet poolagent.socket'
check "the binary is gone" test ! -e /usr/bin/poolagent
check "the pool file stays (a conffile)" cmp /etc/poolagent/pools.sql "$work/pools.mine"
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
