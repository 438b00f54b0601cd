#!/bin/bash
# uninstall.sh - stop and remove what scripts/install.sh installed.
usage() {
	cat <<'USAGE'
Usage: scripts/uninstall.sh [--purge | --help]

  (no flag)  stop and disable the service, remove the units, the binaries,
             the manual pages, the completion and the monitoring files;
             keep /etc/poolagent and /var/lib/poolagent
  --purge    remove those two too
  --help     show this help

Run it as root. It works with and without systemd running (without it,
the units are disabled on the files alone) and may be run again: what is
already gone is skipped. Queries still running keep running in
poolagent-pools.scope until they end; then systemd removes the scope and
its pool cgroups (`systemd-cgls -u poolagent-pools.scope` shows them).

Environment:
  PREFIX=DIR   where install.sh put the binaries (default /usr/local)
  DESTDIR=DIR  remove what install.sh staged below DIR (no root, no systemctl)
USAGE
}
set -euo pipefail

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
purge=0
for arg in "$@"; do
	case $arg in
	--purge) purge=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "uninstall.sh: unknown argument $arg (accepted: --purge, --help)" >&2; exit 2 ;;
	esac
done
if [ -z "$DESTDIR" ] && [ "$(id -u)" != 0 ]; then
	echo "uninstall.sh: run as root (or set DESTDIR)" >&2
	exit 1
fi

units=/etc/systemd/system
running=0
if [ -z "$DESTDIR" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	running=1
fi
if [ -z "$DESTDIR" ] && command -v systemctl >/dev/null && [ -e "$units/poolagent.service" ]; then
	if [ "$running" = 1 ]; then
		systemctl disable --now poolagent.socket poolagent.service
	else
		systemctl disable poolagent.socket poolagent.service
	fi
fi
# The pools scope ends with its last process: stop its keeper, and the
# scope goes when the last query has ended (at once when none runs).
if [ "$running" = 1 ]; then
	. "$(dirname "$0")/pools-scope.sh"
	release_pools_scope
fi
share=$DESTDIR$PREFIX/share
rm -f "$DESTDIR$units/poolagent.service" "$DESTDIR$units/poolagent.socket" \
	"$DESTDIR$PREFIX/bin/poolagent" "$DESTDIR$PREFIX/bin/poolagent-run" "$DESTDIR$PREFIX/bin/poolagent-oci" \
	"$share/man/man1/poolagent.1" "$share/man/man1/poolagent-run.1" "$share/man/man1/poolagent-oci.1" \
	"$share/bash-completion/completions/poolagent" "$share/zsh/site-functions/_poolagent" \
	"$share/poolagent/poolagent.rules.yml" "$share/poolagent/poolagent.dashboard.json"
# The directories install.sh made, when nothing else is in them.
for d in "$share/poolagent" "$share/man/man1" "$share/bash-completion/completions" "$share/bash-completion" \
	"$share/zsh/site-functions" "$share/zsh"; do
	[ -d "$d" ] && rmdir --ignore-fail-on-non-empty "$d"
done
if [ "$running" = 1 ]; then
	systemctl daemon-reload
fi
# The socket's directory (RuntimeDirectoryPreserve=yes kept it across
# restarts; nothing listens there any more).
rm -rf "$DESTDIR/run/poolagent"
if [ "$purge" = 1 ]; then
	rm -rf "$DESTDIR/etc/poolagent" "$DESTDIR/var/lib/poolagent"
fi
echo "removed poolagent${DESTDIR:+ from $DESTDIR}"
