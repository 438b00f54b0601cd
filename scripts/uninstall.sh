#!/bin/bash
# uninstall.sh - stop and remove the poolagent service.
#
#   sudo scripts/uninstall.sh          remove the unit and the binaries; keep
#                                      /etc/poolagent and /var/lib/poolagent
#   sudo scripts/uninstall.sh --purge  remove those too
#   DESTDIR=/tmp/stage scripts/uninstall.sh
#                                      remove what install.sh staged there
#
# Queries still running keep running (the unit stops only the daemon) in the
# unit's cgroup until they end; `systemd-cgls -u poolagent.service` shows them.
set -euo pipefail

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
purge=0
for arg in "$@"; do
	case $arg in
	--purge) purge=1 ;;
	*) echo "uninstall.sh: unknown argument $arg (accepted: --purge)" >&2; exit 2 ;;
	esac
done
if [ -z "$DESTDIR" ] && [ "$(id -u)" != 0 ]; then
	echo "uninstall.sh: run as root (or set DESTDIR)" >&2
	exit 1
fi

unit=/etc/systemd/system/poolagent.service
if [ -z "$DESTDIR" ] && [ -e "$unit" ]; then
	systemctl disable --now poolagent.socket poolagent.service || true
fi
rm -f "$DESTDIR$unit" "$DESTDIR/etc/systemd/system/poolagent.socket" "$DESTDIR$PREFIX/bin/poolagent" "$DESTDIR$PREFIX/bin/poolagent-run" \
	"$DESTDIR$PREFIX/share/man/man1/poolagent.1" "$DESTDIR$PREFIX/share/man/man1/poolagent-run.1" "$DESTDIR$PREFIX/share/bash-completion/completions/poolagent" \
	"$DESTDIR$PREFIX/share/zsh/site-functions/_poolagent"
if [ -z "$DESTDIR" ]; then
	systemctl daemon-reload
fi
if [ "$purge" = 1 ]; then
	rm -rf "$DESTDIR/etc/poolagent" "$DESTDIR/var/lib/poolagent"
fi
echo "removed poolagent${DESTDIR:+ from $DESTDIR}"
