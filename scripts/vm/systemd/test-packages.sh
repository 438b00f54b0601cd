#!/bin/bash
# test-packages.sh - poolagent's packages, checked as a distribution would
# and then installed on a real systemd host. It builds them with
# scripts/package.sh twice (the checkout's version, and a higher one for
# the upgrade), and here on the host, where lintian runs at native speed
# (in the emulated guest it took 4.5 minutes):
#   - the .deb's and the .rpm's files against those scripts/install.sh
#     stages (DESTDIR), where each package puts them;
#   - lintian and rpmlint: no error, every warning named in docs/operate.md;
#   - the .rpm's %config file and scriptlets (rpm -qp --scripts).
# Then it boots the systemd VM (run.sh) to run packages.sh on a clean
# image: apt install, upgrade, remove, purge. Needs
# setup.sh run first (scripts/test.sh does), and lintian, rpm and rpmlint
# (Debian's apt has them; scripts/test.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
missing=()
for tool in lintian rpm rpmlint dpkg-deb; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "test-packages.sh: missing ${missing[*]} (apt-get install lintian rpm rpmlint)" >&2
	exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# check WHAT COMMAND...: run the command, stop with WHAT when it fails.
check() {
	local what=$1
	shift
	"$@" || { echo "FAIL: $what (command: $*)"; exit 1; }
	echo "   ok: $what"
}
# documented TAG...: every tag is named in docs/operate.md.
documented() {
	local tag
	for tag in "$@"; do
		grep -q "\`$tag\`" docs/operate.md || { echo "   $tag is not in docs/operate.md"; return 1; }
	done
}
# expected PACKAGER: the files install.sh staged (its default PREFIX,
# /usr/local) where the package puts them, and what only a package holds.
expected() {
	local unitdir=/lib/systemd/system
	[ "$1" = rpm ] && unitdir=/usr/lib/systemd/system
	{
		sed -e 's#^/usr/local/#/usr/#' -e "s#^/etc/systemd/system/#$unitdir/#" -e 's#^\(/usr/share/man/.*\.[1-8]\)$#\1.gz#' "$stage/installsh.list"
		if [ "$1" = deb ]; then
			printf '%s\n' /usr/share/doc/poolagent/changelog.Debian.gz /usr/share/doc/poolagent/copyright /usr/share/lintian/overrides/poolagent
		fi
	} | sort
}
# in_scriptlet NAME REGEXP: a line of the scriptlet NAME in rpm -qp
# --scripts matches REGEXP (grep -x).
in_scriptlet() { sed -n "/^$1 scriptlet/,/^[a-z]* scriptlet/p" "$stage/rpm.scripts" | grep -qx "$2"; }

DIST="$stage/dist" scripts/package.sh
deb=$(ls "$stage"/dist/poolagent_*_amd64.deb)
rpm=$(ls "$stage"/dist/poolagent-*.x86_64.rpm)
version=${deb##*/poolagent_}
version=${version%-1_amd64.deb}
# A higher version of the same tree: dpkg orders 1.2.0+x.1 after 1.2.0+x.
mkdir "$stage/next"
echo "$version.1" >"$stage/next/VERSION"
DIST="$stage/next" VERSION="$version.1" scripts/package.sh

echo "== scripts/install.sh, staged: the files it installs"
DESTDIR="$stage/installsh" scripts/install.sh --no-start >/dev/null
(cd "$stage/installsh" && find . -type f -printf '/%P\n' | sort) >"$stage/installsh.list"
rm -rf "$stage/installsh"
sed 's/^/   /' "$stage/installsh.list"

echo "== the packages' files"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | sort >"$stage/deb.files"
rpm -qlp "$rpm" >"$stage/rpm.files"
check "the .deb's are install.sh's, the units in /lib/systemd/system" diff <(expected deb) "$stage/deb.files"
check "the .rpm's are install.sh's, the units in /usr/lib/systemd/system" diff <(expected rpm) "$stage/rpm.files"

echo "== lintian $(lintian --version | awk '{ print $2 }') $(basename "$deb")"
t=$SECONDS
set +e
lintian "$deb" >"$stage/lintian" 2>&1
rc=$?
set -e
sed 's/^/   | /' "$stage/lintian"
check "lintian exits 0 and reports no error ($((SECONDS - t))s)" sh -c "[ $rc = 0 ] && ! grep -q '^E:' '$stage/lintian'"
check "every warning is documented" documented $(awk '/^W:/ { print $3 }' "$stage/lintian" | sort -u)
check "no hardening warning: the daemon is a PIE with RELRO (install.sh)" sh -c "! grep -q ' hardening-' '$stage/lintian'"

echo "== rpm -qp $(basename "$rpm")"
check "/etc/poolagent/pools.sql is its only %config file" test "$(rpm -qp --configfiles "$rpm")" = /etc/poolagent/pools.sql
rpm -qp --scripts "$rpm" >"$stage/rpm.scripts"
grep -E 'scriptlet|systemctl|release_pools_scope$' "$stage/rpm.scripts" | sed 's/^/   | /'
check "postinstall enables the units on a first install" in_scriptlet postinstall '.*systemctl --no-reload enable poolagent.socket poolagent.service.*'
check "preuninstall disables and stops them on removal" in_scriptlet preuninstall '.*systemctl --no-reload disable --now poolagent.socket poolagent.service.*'
check "preuninstall lets the pools go" in_scriptlet preuninstall '[[:space:]]*release_pools_scope'
check "postuninstall restarts the daemon after an upgrade" in_scriptlet postuninstall '.*systemctl try-restart poolagent.service.*'
t=$SECONDS
set +e
rpmlint -c scripts/package/rpmlint.toml "$rpm" >"$stage/rpmlint" 2>&1
rc=$?
set -e
sed 's/^/   | /' "$stage/rpmlint"
check "rpmlint exits 0 and reports 0 errors ($((SECONDS - t))s)" sh -c "[ $rc = 0 ] && grep -q ' 0 errors' '$stage/rpmlint'"
check "every warning is documented" documented $(awk '$2 == "W:" { print $3 }' "$stage/rpmlint" | sort -u)

# The guest gets the two .debs and the file list it checks dpkg -L against.
mkdir "$stage/vm" "$stage/vm/dist" "$stage/vm/next"
cp "$deb" "$stage/vm/dist/"
cp "$stage"/next/poolagent_*_amd64.deb "$stage/next/VERSION" "$stage/vm/next/"
cp "$stage/deb.files" "$here/packages.sh" "$here/steps.sh" "$stage/vm/"
POOLAGENT_VM_TIMING=1 POOLAGENT_VM_TIMEOUT=${POOLAGENT_VM_TIMEOUT:-1800} "$here/run.sh" "$stage/vm" ./packages.sh
