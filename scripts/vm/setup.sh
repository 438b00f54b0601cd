#!/bin/bash
# setup.sh - prepare the cgroup v2 test VM that run.sh boots (docs/testing.md).
#
# Needs root (apt) and Debian's package archive. Installs qemu-system-x86
# (software emulation: no KVM needed) and busybox-static, fetches Debian
# bookworm's cloud kernel package with `apt-get download` (nothing is
# installed into /boot), checks that the kernel has what the tests need, and
# packs the guest's base initramfs (static busybox + scripts/vm/init).
# Everything lands in the lab folder, scripts/vm/lab/ (gitignored).
#
# Idempotent: a second run downloads and installs nothing and only repacks
# the initramfs if init or busybox changed.
#
# Env:
#   POOLAGENT_VM_LAB         lab folder (default: scripts/vm/lab)
#   POOLAGENT_VM_KERNEL_PKG  kernel meta package (default linux-image-cloud-amd64);
#                            resolved to the versioned image package it depends on
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lab=${POOLAGENT_VM_LAB:-$here/lab}
meta=${POOLAGENT_VM_KERNEL_PKG:-linux-image-cloud-amd64}
export DEBIAN_FRONTEND=noninteractive
say() { echo "vm setup: $*"; }
die() { echo "vm setup: $*" >&2; exit 1; }

# -- host packages ---------------------------------------------------------
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
missing=()
for p in qemu-system-x86 busybox-static; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "needs root to install ${missing[*]} (apt-get install ${missing[*]})"
	say "installing ${missing[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
busybox=$(command -v busybox) || die "busybox-static is installed but busybox is not on PATH"
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' ||
	ldd "$busybox" 2>&1 | grep -q 'not a dynamic executable' ||
	die "$busybox is not static; it has to run as the guest's init without a libc"

# -- kernel ----------------------------------------------------------------
# The meta package depends on exactly one versioned image package, e.g.
# linux-image-6.1.0-48-cloud-amd64.
image=$(apt-cache depends "$meta" 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
if [ -z "$image" ]; then
	[ "$(id -u)" = 0 ] || die "cannot resolve $meta and cannot run apt-get update without root"
	apt-get update -qq
	image=$(apt-cache depends "$meta" | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
fi
[ -n "$image" ] || die "cannot resolve $meta to a versioned linux-image package (apt-cache depends $meta)"
# NOTE: the 6.12 cloud kernel from bookworm-backports crashed in slab code in
# about one boot in four under this qemu (7.2, TCG); bookworm's 6.1 boots
# reliably. Take another kernel only on purpose.
case $image in
linux-image-6.1.*) ;;
*) [ -n "${POOLAGENT_VM_KERNEL_PKG:-}" ] || die "$meta resolves to $image, not bookworm's 6.1; set POOLAGENT_VM_KERNEL_PKG to use it anyway" ;;
esac

kdir=$lab/kernel/$image
# fuse.ko: the FUSE module (Debian builds FUSE as a module), which run.sh
# puts in the guest at /lib/modules/fuse.ko for the tests that mount a
# FUSE filesystem (kerneltest.FUSE loads it). A lab made before it was
# kept gets it on the next run.
if [ ! -s "$kdir/vmlinuz" ] || [ ! -s "$kdir/config" ] || [ ! -s "$kdir/fuse.ko" ]; then
	say "downloading $image"
	mkdir -p "$lab/kernel"
	dl=$(mktemp -d "$lab/kernel/.download.XXXXXX")
	trap 'rm -rf "$dl"' EXIT
	chmod 755 "$dl"
	chown _apt "$dl" 2>/dev/null || true # apt's download sandbox writes as _apt
	(cd "$dl" && apt-get download -qq "$image")
	deb=$(ls "$dl"/*.deb)
	mkdir -p "$dl/x"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dl/x" --wildcards './boot/vmlinuz-*' './boot/config-*' './lib/modules/*/kernel/fs/fuse/fuse.ko'
	mkdir -p "$dl/out"
	cp "$dl"/x/boot/vmlinuz-* "$dl/out/vmlinuz"
	cp "$dl"/x/boot/config-* "$dl/out/config"
	cp "$dl"/x/lib/modules/*/kernel/fs/fuse/fuse.ko "$dl/out/fuse.ko"
	rm -rf "$kdir"
	mv "$dl/out" "$kdir"
	rm -rf "$dl"
	trap - EXIT
fi
# What the tests rely on: CPU bandwidth control (cpu.max, cpu.max.burst),
# group scheduling (cpu.weight), the memory and cpuset controllers, PSI (cpu.pressure),
# and booting from an initramfs with a serial console.
for opt in CONFIG_CGROUPS CONFIG_CGROUP_SCHED CONFIG_FAIR_GROUP_SCHED CONFIG_CFS_BANDWIDTH \
	CONFIG_MEMCG CONFIG_CPUSETS CONFIG_PSI CONFIG_BLK_DEV_INITRD CONFIG_RD_GZIP CONFIG_DEVTMPFS \
	CONFIG_SERIAL_8250 CONFIG_SERIAL_8250_CONSOLE; do
	grep -qx "$opt=y" "$kdir/config" || die "$image lacks $opt=y"
done
grep -qx 'CONFIG_PSI_DEFAULT_DISABLED=y' "$kdir/config" && die "$image has PSI off by default (CONFIG_PSI_DEFAULT_DISABLED=y)"
ln -sfn "$image" "$lab/kernel/current"

# -- base initramfs --------------------------------------------------------
# Rebuilt only when init or busybox changed. Gzipped: run.sh puts each job's
# uncompressed archive in front of it, because the kernel refuses an
# uncompressed archive that follows a compressed one.
want=$(cat "$here/init" "$busybox" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$lab/base.sha256" 2>/dev/null)" != "$want" ] || [ ! -s "$lab/base.cpio.gz" ]; then
	say "packing the base initramfs"
	tree=$(mktemp -d)
	trap 'rm -rf "$tree"' EXIT
	mkdir -p "$tree"/{bin,dev,proc,sys,tmp,job}
	cp "$busybox" "$tree/bin/busybox"
	cp "$here/init" "$tree/init"
	chmod 755 "$tree/init" "$tree/bin/busybox"
	(cd "$tree" && find . | sort | "$busybox" cpio -o -H newc 2>/dev/null) | gzip -6 >"$lab/base.cpio.gz.tmp"
	mv "$lab/base.cpio.gz.tmp" "$lab/base.cpio.gz"
	echo "$want" >"$lab/base.sha256"
	rm -rf "$tree"
	trap - EXIT
fi
say "ready: $image, $(du -h "$kdir/vmlinuz" | cut -f1) kernel, $(du -h "$lab/base.cpio.gz" | cut -f1) base initramfs in $lab"
