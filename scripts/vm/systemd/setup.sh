#!/bin/bash
# setup.sh - prepare the systemd flavour of the test VM (docs/testing.md):
# a Debian bookworm root file system with systemd 252 as PID 1, built with
# mmdebstrap from this machine's own apt sources and packed as an
# uncompressed cpio that the kernel unpacks as its initramfs. run.sh boots
# it with a job added.
#
# Cached in the lab folder by a hash of the package list: a second run
# fetches nothing. The kernel is the busybox flavour's (scripts/vm/setup.sh,
# run first).
#
# Env:
#   POOLAGENT_VM_LAB  lab folder (default: scripts/vm/lab)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lab=${POOLAGENT_VM_LAB:-$here/../lab}
say() { echo "vm systemd setup: $*"; }
die() { echo "vm systemd setup: $*" >&2; exit 1; }

. "$here/image.sh"
packages=$image_packages
sources=$(image_sources) || die "no apt sources at /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
cpio=$(image_cpio "$lab" "$sources")
dir=$(dirname "$cpio")
if [ -s "$cpio" ]; then
	say "root file system cached: $cpio"
	exit 0
fi
command -v mmdebstrap >/dev/null || {
	[ "$(id -u)" = 0 ] || die "needs mmdebstrap (apt-get install mmdebstrap cpio)"
	apt-get install -y -qq --no-install-recommends mmdebstrap cpio >/dev/null
}
mkdir -p "$dir"
work=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
say "building Debian bookworm with $packages"
started=$SECONDS
mmdebstrap --quiet --variant=apt --include="$packages" --format=tar bookworm "$work/rootfs.tar" "$sources"
mkdir "$work/root"
tar -x -C "$work/root" -f "$work/rootfs.tar"
# A throwaway guest: root without a password on the console, no apt
# timers, a machine id so journald keeps its files in /var/log/journal.
root=$work/root
chroot "$root" passwd -d root >/dev/null
systemd-machine-id-setup --root="$root" >/dev/null 2>&1 || echo 0123456789abcdef0123456789abcdef >"$root/etc/machine-id"
rm -f "$root"/etc/systemd/system/timers.target.wants/*
echo poolagent-vm >"$root/etc/hostname"
(cd "$root" && find . | cpio -o -H newc --quiet) >"$work/rootfs.cpio"
mv "$work/rootfs.cpio" "$cpio"
# Images of other package lists stay while a checkout may still boot them
# (run.sh touches the one it boots): those not booted for a week go.
find "$dir" -maxdepth 1 -name 'rootfs-*.cpio' ! -path "$cpio" -mtime +7 -delete
say "built $cpio ($(du -m "$cpio" | cut -f1) MB) in $((SECONDS - started)) s"
