#!/bin/bash
# install.sh - build poolagent and install it as a systemd service, with
# the slim query client poolagent-run and the OCI runtime poolagent-oci
# beside it.
usage() {
	cat <<'USAGE'
Usage: scripts/install.sh [--no-start | --no-service | --help]

  (no flag)     build, install, verify the unit, enable and start the service
  --no-start    the same, but only enable the service
  --no-service  build and install the three binaries (with their manual pages
                and bash/zsh completion) only: no unit, no pool file, no systemd
                needed (to try poolagent by hand)
  --help        show this help

Run it as root (sudo scripts/install.sh when you are not). It installs
PREFIX/bin/poolagent, PREFIX/bin/poolagent-run and PREFIX/bin/poolagent-oci
(the OCI runtime for containers in pools: docs/containers.md; PREFIX defaults to
/usr/local), the manual pages PREFIX/share/man/man1/poolagent.1,
poolagent-run.1 and poolagent-oci.1, the bash and zsh completion below PREFIX/share, the
Prometheus rules and Grafana dashboard in PREFIX/share/poolagent, the units /etc/systemd/system/poolagent.service and
poolagent.socket (systemd holds the socket across restarts), and
/etc/poolagent/pools.sql when there is none yet (an existing pool file is
never overwritten). It checks the unit with systemd-analyze verify and the
pool file with poolagent check before it starts anything.

Environment:
  PREFIX=DIR            install the binaries in DIR/bin (default /usr/local)
  DESTDIR=DIR           stage every file below DIR and stop there (no root,
                        no systemctl): DESTDIR=/tmp/stage scripts/install.sh
  POOLAGENT_BINARY=F, POOLAGENT_RUN_BINARY=F, POOLAGENT_OCI_BINARY=F
                        install these binaries instead of building them
  VERSION=V             stamp the binaries it builds with V (poolagent
                        --version) instead of `git describe`

Before it writes anything it checks what it needs (root, Go, and for the
service systemctl) and says what is missing. Where systemd is installed but
not running (a container or an image being built) the units are installed
and enabled, and start at the next boot with systemd. Run it again to
upgrade: running queries keep running and the new daemon adopts them.
Tested on Debian 12 (systemd 252); scripts/uninstall.sh removes it.
USAGE
}
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
start=1
service=1
for arg in "$@"; do
	case $arg in
	--no-start) start=0 ;;
	--no-service) service=0 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "install.sh: unknown argument $arg (accepted: --no-start, --no-service, --help)" >&2; exit 2 ;;
	esac
done

# Preflight: say everything that is missing before writing anything.
# sudo's PATH often lacks Go's own directory.
gobin=$(command -v go || echo /usr/local/go/bin/go)
missing=()
if [ -z "$DESTDIR" ] && [ "$(id -u)" != 0 ]; then
	missing+=("root: run it as root, with sudo, or set DESTDIR=DIR to stage the files")
fi
if { [ -z "${POOLAGENT_BINARY:-}" ] || [ -z "${POOLAGENT_RUN_BINARY:-}" ] || [ -z "${POOLAGENT_OCI_BINARY:-}" ]; } && [ ! -x "$gobin" ]; then
	missing+=("go: Go 1.26 in PATH or /usr/local/go/bin (or POOLAGENT_BINARY, POOLAGENT_RUN_BINARY and POOLAGENT_OCI_BINARY)")
fi
if [ -z "$DESTDIR" ] && [ "$service" = 1 ] && ! command -v systemctl >/dev/null; then
	missing+=("systemctl (systemd): without systemd use --no-service")
fi
if [ ${#missing[@]} -gt 0 ]; then
	echo "install.sh: cannot install, nothing written; missing:" >&2
	printf '  %s\n' "${missing[@]}" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --version says which commit the binaries were built from, also where the
# toolchain records no VCS information (GOFLAGS=-buildvcs=false).
described=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || true)}
ldflags="-X github.com/poolagent/poolagent/internal/version.described=$described"
if [ -n "${POOLAGENT_BINARY:-}" ]; then
	cp "$POOLAGENT_BINARY" "$tmp/poolagent"
else
	echo "== $gobin build ./cmd/poolagent"
	# With a C compiler (cgo) the daemon looks users and groups up through
	# the C library's NSS, so directory users (LDAP, sssd) and their groups
	# classify and administer like local ones; without one Go builds a
	# static binary that reads /etc/passwd and /etc/group only.
	# A cgo build links the C library anyway, so it is also a
	# position-independent executable with read-only relocations (PIE,
	# RELRO: the hardening Debian's and Fedora's packages carry,
	# docs/operate.md "Lint"); a static build stays static.
	buildmode=
	[ "$("$gobin" env CGO_ENABLED)" != 1 ] || buildmode=-buildmode=pie
	"$gobin" build -trimpath $buildmode -ldflags "$ldflags" -o "$tmp/poolagent" ./cmd/poolagent
	if [ -z "$buildmode" ]; then
		echo "   no C compiler, so a static build: the daemon knows the users and groups of /etc/passwd and /etc/group only, not directory (LDAP, sssd) ones; install gcc and run this again to have them" >&2
	fi
fi
if [ -n "${POOLAGENT_RUN_BINARY:-}" ]; then
	cp "$POOLAGENT_RUN_BINARY" "$tmp/poolagent-run"
else
	# The client looks nobody up (the daemon takes the caller from the
	# socket), so it is a static binary either way.
	echo "== $gobin build ./cmd/poolagent-run"
	"$gobin" build -trimpath -ldflags "$ldflags" -o "$tmp/poolagent-run" ./cmd/poolagent-run
fi
if [ -n "${POOLAGENT_OCI_BINARY:-}" ]; then
	cp "$POOLAGENT_OCI_BINARY" "$tmp/poolagent-oci"
else
	# Static for the same reason: the daemon identifies the caller.
	echo "== $gobin build ./cmd/poolagent-oci"
	"$gobin" build -trimpath -ldflags "$ldflags" -o "$tmp/poolagent-oci" ./cmd/poolagent-oci
fi

# path_note says what to add to PATH when PREFIX/bin is not on it (as
# under PREFIX=/opt/poolagent), so `poolagent` is found.
path_note() {
	[ -z "$DESTDIR" ] || return 0
	case ":$PATH:" in
	*":$PREFIX/bin:"*) ;;
	*) echo "$PREFIX/bin is not on PATH: add it to run poolagent by name, e.g. in ~/.profile: export PATH=\"$PREFIX/bin:\$PATH\"" ;;
	esac
}
bin="$PREFIX/bin/poolagent"
unit=/etc/systemd/system/poolagent.service
install -d -m 0755 "$DESTDIR$PREFIX/bin"
install -m 0755 "$tmp/poolagent" "$DESTDIR$bin"
install -m 0755 "$tmp/poolagent-run" "$DESTDIR$PREFIX/bin/poolagent-run"
install -m 0755 "$tmp/poolagent-oci" "$DESTDIR$PREFIX/bin/poolagent-oci"
# The manual pages and the shell completions come from the binary's own
# help text, in the directories man, bash-completion and zsh search below
# PREFIX.
install -d -m 0755 "$DESTDIR$PREFIX/share/man/man1" "$DESTDIR$PREFIX/share/bash-completion/completions" \
	"$DESTDIR$PREFIX/share/zsh/site-functions" "$DESTDIR$PREFIX/share/poolagent"
"$DESTDIR$bin" man >"$tmp/poolagent.1"
"$DESTDIR$bin" man poolagent-run >"$tmp/poolagent-run.1"
"$DESTDIR$bin" man poolagent-oci >"$tmp/poolagent-oci.1"
"$DESTDIR$bin" completion bash >"$tmp/poolagent.bash"
"$DESTDIR$bin" completion zsh >"$tmp/_poolagent"
install -m 0644 "$tmp/poolagent.1" "$DESTDIR$PREFIX/share/man/man1/poolagent.1"
install -m 0644 "$tmp/poolagent-run.1" "$DESTDIR$PREFIX/share/man/man1/poolagent-run.1"
install -m 0644 "$tmp/poolagent-oci.1" "$DESTDIR$PREFIX/share/man/man1/poolagent-oci.1"
install -m 0644 "$tmp/poolagent.bash" "$DESTDIR$PREFIX/share/bash-completion/completions/poolagent"
install -m 0644 "$tmp/_poolagent" "$DESTDIR$PREFIX/share/zsh/site-functions/_poolagent"
# The alerting rules and the dashboard (docs/metrics.md), for the
# operator's Prometheus and Grafana.
install -m 0644 monitoring/poolagent.rules.yml monitoring/poolagent.dashboard.json "$DESTDIR$PREFIX/share/poolagent/"
if [ "$service" = 0 ]; then
	"$DESTDIR$PREFIX/bin/poolagent-run" --help >/dev/null
	echo "installed $DESTDIR$bin, $DESTDIR$PREFIX/bin/poolagent-run and $DESTDIR$PREFIX/bin/poolagent-oci, the manual pages, bash/zsh completion and monitoring files (no service)"
	path_note
	exit 0
fi
install -d -m 0755 "$DESTDIR/etc/systemd/system" "$DESTDIR/etc/poolagent"
sed "s#/usr/local/bin/poolagent#$bin#g" scripts/poolagent.service > "$tmp/poolagent.service"
install -m 0644 "$tmp/poolagent.service" "$DESTDIR$unit"
install -m 0644 scripts/poolagent.socket "$DESTDIR/etc/systemd/system/poolagent.socket"
if [ ! -e "$DESTDIR/etc/poolagent/pools.sql" ]; then
	cat > "$tmp/pools.sql" <<'SQL'
-- /etc/poolagent/pools.sql: poolagent's pools, in YDB's DDL (docs/pools.md).
-- The `default` pool always exists. Example:
--
-- CREATE RESOURCE POOL olap WITH (
--     CONCURRENT_QUERY_LIMIT = 10, QUEUE_SIZE = 100,
--     TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 70, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 50);
-- CREATE RESOURCE POOL CLASSIFIER olap_users WITH (
--     RESOURCE_POOL = 'olap', MEMBER_NAME = 'analysts');
--
-- After an edit: systemctl reload poolagent
SQL
	install -m 0644 "$tmp/pools.sql" "$DESTDIR/etc/poolagent/pools.sql"
fi
echo "installed $DESTDIR$bin, $DESTDIR$PREFIX/bin/poolagent-run, $DESTDIR$PREFIX/bin/poolagent-oci and $DESTDIR$unit"
path_note

# systemd-analyze checks that ExecStart= is executable, so a staged unit is
# verified as a copy that points at the staged binary.
if command -v systemd-analyze >/dev/null; then
	mkdir "$tmp/verify"
	sed "s#$bin#$DESTDIR$bin#g" "$DESTDIR$unit" > "$tmp/verify/poolagent.service"
	cp "$DESTDIR/etc/systemd/system/poolagent.socket" "$tmp/verify/"
	# --man=no: the units' Documentation=man: lines are not checked, so a
	# host without man-db (minimal and cloud images) verifies too.
	systemd-analyze verify --man=no "$tmp/verify/poolagent.socket" "$tmp/verify/poolagent.service"
fi
"$DESTDIR$bin" check --pools "$DESTDIR/etc/poolagent/pools.sql"
"$DESTDIR$PREFIX/bin/poolagent-run" --help >/dev/null

if [ -n "$DESTDIR" ]; then
	exit 0
fi
if [ ! -d /run/systemd/system ]; then
	# systemd is not PID 1 here: enable works on the files alone.
	systemctl enable poolagent.socket poolagent.service
	echo "systemd is not running (no /run/systemd/system): the units are installed and enabled and start at the next boot with systemd"
	exit 0
fi
systemctl daemon-reload
systemctl enable poolagent.socket poolagent.service
if [ "$start" = 1 ]; then
	systemctl start poolagent.socket
	systemctl restart poolagent.service
	systemctl --no-pager status poolagent.service | head -n 5
fi
