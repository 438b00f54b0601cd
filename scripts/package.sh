#!/bin/bash
# package.sh - build poolagent's release into dist/: the Debian package,
# the RPM, a tarball of the binaries with the docs, and their SHA256SUMS.
usage() {
	cat <<'USAGE'
Usage: scripts/package.sh [--help]

Builds, in dist/ (VERSION as below):
  poolagent_VERSION-1_amd64.deb      Debian, Ubuntu (units in /lib/systemd/system)
  poolagent-VERSION-1.x86_64.rpm     Fedora, RHEL (units in /usr/lib/systemd/system)
  poolagent-VERSION-linux-amd64.tar.gz
                                     the binaries, README.md and docs/
  SHA256SUMS                         of the three (sha256sum -c SHA256SUMS)

The packages hold exactly what scripts/install.sh installs with
PREFIX=/usr: the files come from an install.sh staged below a temporary
directory (DESTDIR), so the two cannot drift apart. Only the unit
directory differs (the distribution's instead of /etc/systemd/system),
/etc/poolagent/pools.sql is a conffile, and the .deb adds
/usr/share/doc/poolagent/copyright and changelog.gz. The packages are
made by nfpm, a Go tool dependency of the module in scripts/package
(go tool nfpm: nothing but the Go module proxy is needed). docs/operate.md
says what the maintainer scripts do.

Environment:
  VERSION=V   the version (default: `git describe --tags --always
              --dirty`); the binaries' --version says V. A leading v is
              dropped in the packages' version, a describe suffix
              -N-gHASH becomes +gitN.gHASH, and a checkout without tags
              gives 0.0.0+gitCOUNT.gHASH.
  DIST=DIR    write into DIR instead of dist/
USAGE
}
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
	case $arg in
	-h | --help) usage; exit 0 ;;
	*) echo "package.sh: unknown argument $arg (accepted: --help)" >&2; exit 2 ;;
	esac
done
die() { echo "package.sh: $*" >&2; exit 1; }

described=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || true)}
[ -n "$described" ] || die "no version: this is not a git checkout with history; set VERSION="
# A tag (v1.2.0, 1.2.0, with -N-gHASH after it) or VERSION= is a version;
# a bare commit hash (no tag yet), even one that begins with a digit, is not.
if [ -n "${VERSION:-}" ] || [[ $described =~ ^v?[0-9]+\. ]]; then
	version=$(echo "${described#v}" | sed -E 's/-([0-9]+)-g([0-9a-f]+)/+git\1.g\2/; s/-dirty$/.dirty/')
else
	count=$(git rev-list --count HEAD 2>/dev/null) || die "git cannot count the commits before $described; set VERSION=1.2.3"
	version=$(echo "0.0.0+git$count.g$described" | sed 's/-dirty$/.dirty/')
fi
# What both dpkg and rpm accept as a version: a digit first, then letters,
# digits and . + ~ (no -, which both use to separate the release).
if ! [[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
	die "VERSION=$described gives the package version $version; accepted: a digit, then letters, digits and . + ~ (such as 1.2.0 or 1.2.0~rc1)"
fi

dist=$(mkdir -p "${DIST:-dist}" && cd "${DIST:-dist}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
echo "== scripts/install.sh, staged (PREFIX=/usr DESTDIR=$root VERSION=$described)"
VERSION=$described PREFIX=/usr DESTDIR=$root scripts/install.sh --no-start | sed 's/^/   /'

# Debian's policy (and rpm's own build scripts) compress manual pages.
gzip -9n "$root"/usr/share/man/man1/*.1

# The maintainer scripts, each with release_pools_scope (scripts/pools-scope.sh)
# defined after its first line.
for s in scripts/package/deb/* scripts/package/rpm/*; do
	out=$tmp/scripts/${s#scripts/package/}
	mkdir -p "$(dirname "$out")"
	{ head -n 1 "$s"; cat scripts/pools-scope.sh; tail -n +2 "$s"; } >"$out"
done

# The changelog of this one version, in the form nfpm turns into the
# .deb's changelog.Debian.gz and the .rpm's %changelog.
maintainer="poolagent maintainers <poolagent@users.noreply.github.com>"
built=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
cat >"$tmp/changelog.yaml" <<YAML
- semver: "$version-1"
  deb: {urgency: medium, distributions: [unstable]}
  date: "$(date -u -d "@$built" +%Y-%m-%dT%H:%M:%SZ)"
  packager: "$maintainer"
  changes:
    - note: "Release $version, built from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
YAML

# Debian's policy (and rpm's build scripts) strip what they ship: the
# symbol table and DWARF; a panic's stack trace stays (Go keeps pclntab).
strip --strip-unneeded "$root"/usr/bin/*

# A cgo build (install.sh's, where a C compiler is: users and groups
# through NSS) links the C library; a static one needs nothing.
deb_depends= rpm_depends=
if ldd "$root/usr/bin/poolagent" >/dev/null 2>&1; then
	deb_depends=libc6 rpm_depends=glibc
fi
{
	cat <<YAML
name: poolagent
arch: amd64
platform: linux
version: "$version"
version_schema: none
release: "1"
changelog: $tmp/changelog.yaml
section: admin
priority: optional
maintainer: "$maintainer"
description: |-
  YDB-style resource pools for Linux hosts
  poolagent brings resource pools to a Linux host: concurrency limits,
  queues, CPU-load admission, weighted CPU shares and classifiers, enforced
  with cgroup CPU bandwidth (cpu.max, cpu.weight, memory.max). A systemd
  service with socket activation; poolagent-run is its slim query client.
vendor: poolagent
rpm:
  group: System Environment/Daemons
homepage: https://github.com/poolagent/poolagent
license: LicenseRef-unspecified
scripts:
  postinstall: $tmp/scripts/deb/postinst
  preremove: $tmp/scripts/deb/prerm
  postremove: $tmp/scripts/deb/postrm
overrides:
  deb:
    depends: [$deb_depends]
  rpm:
    depends: [$rpm_depends]
    scripts:
      postinstall: $tmp/scripts/rpm/post
      preremove: $tmp/scripts/rpm/preun
      postremove: $tmp/scripts/rpm/postun
YAML
	echo "contents:"
	(cd "$root" && find . -type f | sort) | while read -r f; do
		path=${f#.}
		mode=$(stat -c %a "$root$path")
		case $path in
		/etc/systemd/system/*)
			name=${path##*/}
			printf '  - {src: "%s", dst: "/lib/systemd/system/%s", packager: deb, file_info: {mode: 0%s}}\n' "$root$path" "$name" "$mode"
			printf '  - {src: "%s", dst: "/usr/lib/systemd/system/%s", packager: rpm, file_info: {mode: 0%s}}\n' "$root$path" "$name" "$mode"
			;;
		/usr/share/man/*)
			# rpm lists them as documentation (nfpm's .deb leaves such out).
			printf '  - {src: "%s", dst: "%s", packager: deb, file_info: {mode: 0%s}}\n' "$root$path" "$path" "$mode"
			printf '  - {src: "%s", dst: "%s", packager: rpm, type: doc, file_info: {mode: 0%s}}\n' "$root$path" "$path" "$mode"
			;;
		/etc/poolagent/pools.sql)
			printf '  - {src: "%s", dst: "%s", type: "config|noreplace", file_info: {mode: 0%s}}\n' "$root$path" "$path" "$mode"
			;;
		*)
			printf '  - {src: "%s", dst: "%s", file_info: {mode: 0%s}}\n' "$root$path" "$path" "$mode"
			;;
		esac
	done
	printf '  - {src: "%s", dst: "/usr/share/doc/poolagent/copyright", packager: deb, file_info: {mode: 0644}}\n' "$PWD/scripts/package/copyright"
	printf '  - {src: "%s", dst: "/usr/share/lintian/overrides/poolagent", packager: deb, file_info: {mode: 0644}}\n' "$PWD/scripts/package/lintian-overrides"
} >"$tmp/nfpm.yaml"

mkdir -p "$dist"
deb=poolagent_$version-1_amd64.deb
rpm=poolagent-$version-1.x86_64.rpm
tarball=poolagent-$version-linux-amd64.tar.gz
echo "== go tool nfpm (scripts/package/go.mod)"
for packager in deb rpm; do
	target=$deb && [ $packager = rpm ] && target=$rpm
	go -C scripts/package tool nfpm package --config "$tmp/nfpm.yaml" --packager $packager --target "$dist/$target" | sed 's/^/   /'
done

# The tarball: the binaries, README.md and docs/, below one directory.
tree=$tmp/tar/poolagent-$version
mkdir -p "$tree"
cp "$root"/usr/bin/* "$tree/"
cp -r README.md docs "$tree/"
tar -C "$tmp/tar" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}" \
	-czf "$dist/$tarball" "poolagent-$version"
(cd "$dist" && sha256sum "$deb" "$rpm" "$tarball" >SHA256SUMS)
echo "== $dist"
(cd "$dist" && ls -l "$deb" "$rpm" "$tarball" SHA256SUMS | sed 's/^/   /')
