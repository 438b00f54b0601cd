#!/bin/bash
# bench-oci.sh - what poolagent-oci adds to a container's start, run as root
# inside the systemd VM (scripts/bench-oci.sh stages and boots it): `podman
# run --rm --network none --rootfs DIR true` with plain crun and runc, and
# with poolagent-oci in front of each, ROUNDS times, interleaved so that a
# slow moment of the host falls on every kind alike. Prints each kind's
# median wall time and poolagent-oci's ratio to the plain runtime, in one
# run (docs/containers.md "Cost").
set -euo pipefail
cd "$(dirname "$0")"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
rounds=${1:-15}
rootfs=/var/lib/poolagent-bench/rootfs
mkdir -p /etc/containers "$rootfs/bin" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/etc"
printf '[storage]\ndriver = "vfs"\nrunroot = "/run/containers/storage"\ngraphroot = "/var/lib/containers/storage"\n' >/etc/containers/storage.conf
printf '[engine]\nno_pivot_root = true\n' >/etc/containers/containers.conf
cp /bin/busybox "$rootfs/bin/busybox"
chroot "$rootfs" /bin/busybox --install -s /bin
env POOLAGENT_BINARY="$PWD/bin/poolagent" POOLAGENT_RUN_BINARY="$PWD/bin/poolagent-run" POOLAGENT_OCI_BINARY="$PWD/bin/poolagent-oci" \
	scripts/install.sh >/dev/null
echo 'CREATE RESOURCE POOL bench WITH (CONCURRENT_QUERY_LIMIT = 4);' >/etc/poolagent/pools.sql
systemctl reload poolagent.service
sleep 2

# one KIND: the wall time of one container's run, in ms.
one() {
	local args=()
	case $1 in
	crun) args=(--runtime /usr/bin/crun) ;;
	runc) args=(--runtime /usr/bin/runc) ;;
	oci-crun) args=(--runtime /usr/local/bin/poolagent-oci --runtime-flag runtime-path=/usr/bin/crun --annotation io.poolagent.pool=bench) ;;
	oci-runc) args=(--runtime /usr/local/bin/poolagent-oci --runtime-flag runtime-path=/usr/bin/runc --annotation io.poolagent.pool=bench) ;;
	esac
	local t0 t1
	t0=$(date +%s%N)
	podman run --rm --network none "${args[@]}" --rootfs "$rootfs" /bin/true
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
kinds=(crun oci-crun runc oci-runc)
for k in "${kinds[@]}"; do one "$k" >/dev/null; done # warm up
for ((i = 0; i < rounds; i++)); do
	for k in "${kinds[@]}"; do one "$k" >>"/tmp/bench.$k"; done
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "podman run --rm --network none --rootfs DIR /bin/true, $rounds rounds, median wall ms:"
for k in "${kinds[@]}"; do printf '  %-9s %s\n' "$k" "$(median "/tmp/bench.$k")"; done
for r in crun runc; do
	awk -v a="$(median "/tmp/bench.oci-$r")" -v b="$(median "/tmp/bench.$r")" -v r="$r" \
		'BEGIN { printf "  ratio poolagent-oci over %s: %.3f (%+d ms)\n", r, a / b, a - b }'
done
scripts/uninstall.sh --purge >/dev/null
