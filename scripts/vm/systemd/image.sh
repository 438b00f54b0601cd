# image.sh - sourced by setup.sh and run.sh: the packages of the systemd
# VM's root file system and the file it is cached in, named by a hash of
# the package list and the apt sources, so that run.sh boots exactly the
# image its checkout's setup.sh built, and checkouts whose package lists
# differ can share one lab folder.
#
# What the lifecycle script needs: systemd as PID 1 with its tools, D-Bus
# for logind (login sessions), real users (passwd, login for su -l), ps and
# ip, curl for the metrics endpoint, man-db for systemd-analyze's man: check;
# for containers.sh, the container engines and runtimes poolagent-oci runs
# under (podman, containerd's ctr, crun, runc) and a static busybox for the
# containers' root file system (no registry is reachable from the guest);
# for scripts/bench-start.sh, libcgroup's cgexec (cgroup-tools), the
# yardstick of a query's start.
image_packages=systemd,systemd-sysv,dbus,libpam-systemd,util-linux,procps,iproute2,passwd,login,curl,man-db,coreutils,kmod,podman,crun,runc,containerd,busybox-static,cgroup-tools

# image_sources prints the apt sources file the image is built from.
image_sources() {
	local sources=/etc/apt/sources.list.d/debian.sources
	[ -f "$sources" ] || sources=/etc/apt/sources.list
	[ -f "$sources" ] || return 1
	echo "$sources"
}

# image_cpio LAB SOURCES prints the path of the image's cpio in the lab
# folder LAB, built from the apt sources file SOURCES.
image_cpio() {
	local hash
	hash=$(printf '%s\n%s\n' "$image_packages" "$(cat "$2")" | sha256sum | cut -c1-16)
	echo "$1/systemd/rootfs-$hash.cpio"
}
