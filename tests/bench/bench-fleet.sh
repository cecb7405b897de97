#!/bin/bash
# Fleets (part "fleet" of `make bench`).
#
# plan: four machines moved onto two libvirt hosts by one `imager migrate`
# plan (--per-host 2, convert false) against the same four moved by
# `imager p2v` one after the other (two onto each host), page caches
# dropped before each side.  The hosts are two libvirtd instances of the
# bench's own (tests/lib/libvirtd-private.sh), one dir pool each.  The
# sample: a 2 GiB disk (GPT, one ext4 filled by mke2fs -d with
# BENCH_FLEET_MIB MiB of real files from /usr, default 768).  Two kinds of
# sources, each timed both ways:
#   network  each machine's disk an NBD export (nbdkit, each read delayed
#            BENCH_FLEET_RDELAY, default 20ms: the round trips of machines
#            that report in over a network); target: the plan at most 0.6x
#            the four jobs in a row;
#   folder   each machine's disk the image folder the sample was saved to:
#            no target (here both hosts share this machine's cores and
#            disk, and one restore already keeps every core busy
#            decompressing: only separate hosts would run them side by side).
# multicast: bench_fleet_multicast below: the sample's image sent once to
# three receivers against sent to each alone, three times.
#
# Environment: IMAGER, BENCH_WORK (scratch space), BENCH_FLEET_MIB,
# BENCH_FLEET_RDELAY, BENCH_FLEET_KEEP=1 (keep the work folder).
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
WORK=${BENCH_WORK:-/var/tmp/imager-bench/work}/fleet
DATA_MIB=${BENCH_FLEET_MIB:-768}
RDELAY=${BENCH_FLEET_RDELAY:-20ms}
export TESTS_LIB=$ROOT/tests/lib
BENCH_NAME=bench-fleet
# shellcheck source=timing.sh
. "$ROOT/tests/bench/timing.sh"
# shellcheck source=../lib/libvirtd-private.sh
. "$TESTS_LIB/libvirtd-private.sh"

# ---- multicast: one image to three receivers against three unicast
# restores ----
# The sender in a network namespace of its own with a bridge; three
# receivers, each `imager restore multicast:` into a raw file, in
# namespaces of their own on veths of that bridge.  The sender's link is
# capped at BENCH_FLEET_RATE (udp-sender --max-bitrate, default 300m): the
# network is what a fleet's restore waits for, not these two cores.  The
# anchor: the same image to one receiver at a time, three times, at the
# same cap: what three unicast restores from the repository put on the
# wire.  Measured: bytes the sender's bridge sent (tx_bytes) and the wall
# time until every receiver finished.  Targets: multicast bytes at most
# 1.1x the image once, time at most 0.5x the three unicast restores.
bench_fleet_multicast() {
	local ns=imager-bench-mc i t0 t1 b0 b1 rate=${BENCH_FLEET_RATE:-300m} img=$WORK/image
	[ "$(id -u)" = 0 ] || { echo "multicast: needs root (network namespaces): skipped"; return 0; }
	[ -d "$img" ] || { echo "multicast: no sample image (the plan half makes it): skipped"; return 0; }
	for c in udp-sender udp-receiver ip; do
		command -v $c >/dev/null || { echo "multicast: needs $c (make deps)"; return 1; }
	done
	mc_cleanup() {
		local n
		for n in "$ns-r1" "$ns-r2" "$ns-r3" "$ns"; do
			if ip netns list | grep -q "^$n\b"; then ip netns del "$n"; fi
		done
		rm -f "$WORK"/mc-r*.raw
	}
	mc_cleanup
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip -n "$ns" link add br0 type bridge
	ip -n "$ns" addr add 10.78.0.1/24 brd + dev br0
	ip -n "$ns" link set br0 up
	ip -n "$ns" route add default dev br0
	for i in 1 2 3; do
		ip netns add "$ns-r$i"
		ip link add "bmc$i" type veth peer name "bmc${i}r"
		ip link set "bmc$i" netns "$ns"
		ip link set "bmc${i}r" netns "$ns-r$i"
		ip -n "$ns" link set "bmc$i" master br0
		ip -n "$ns" link set "bmc$i" up
		ip -n "$ns-r$i" link set lo up
		ip -n "$ns-r$i" addr add "10.78.0.1$i/24" brd + dev "bmc${i}r"
		ip -n "$ns-r$i" link set "bmc${i}r" up
		ip -n "$ns-r$i" route add default dev "bmc${i}r"
	done
	local image_bytes
	image_bytes=$(du -cb "$img"/* | tail -n 1 | cut -f1)
	txb() { ip netns exec "$ns" cat /sys/class/net/br0/statistics/tx_bytes; }
	# send N RECEIVER...: one transfer to those receivers; its seconds
	send() {
		local n=$1 pids=() r s0
		shift
		rm -f "$WORK"/mc-r*.raw
		for r in "$@"; do
			ip netns exec "$ns-r$r" "$IMAGER" restore multicast:9600 "$WORK/mc-r$r.raw" --no-progress \
				>"$WORK/mc-r$r.log" 2>&1 &
			pids+=($!)
		done
		s0=$(now)
		ip netns exec "$ns" "$IMAGER" multicast "$img" --portbase 9600 --min-receivers "$n" \
			--max-wait 60 --max-bitrate "$rate" --no-progress >"$WORK/mc-sender.log" 2>&1 ||
			{ echo "multicast: the sender failed:"; tail -n 8 "$WORK/mc-sender.log"; return 1; }
		for r in "${pids[@]}"; do
			wait "$r" || { echo "multicast: a receiver failed"; tail -n 3 "$WORK"/mc-r*.log; return 1; }
		done
		calc "$(now) - $s0"
	}
	echo "multicast: the sample's image ($((image_bytes / 1048576)) MiB) to 3 receivers, the sender capped at $rate"
	sync
	b0=$(txb)
	t1=$(send 3 1 2 3) || { mc_cleanup; return 1; }
	b1=$(txb)
	cmp -s "$WORK/mc-r1.raw" "$WORK/disk.raw" && cmp -s "$WORK/mc-r3.raw" "$WORK/disk.raw" ||
		{ echo "multicast: a receiver's disk differs from the sample"; mc_cleanup; return 1; }
	local mb=$((b1 - b0)) ub=0 ut=0 x
	for i in 1 2 3; do
		b0=$(txb)
		x=$(send 1 "$i") || { mc_cleanup; return 1; }
		ut=$(calc "$ut + $x")
		ub=$((ub + $(txb) - b0))
	done
	local rb rt
	rb=$(calc "$mb / $image_bytes")
	rt=$(calc "$t1 / $ut")
	echo "  multicast:        $mb bytes on the wire, ${t1} s"
	echo "  3 unicast in a row: $ub bytes on the wire, ${ut} s"
	echo "  bytes: ${rb}x the image once (target <= 1.1) $(awk "BEGIN { exit !($rb <= 1.1) }" && echo met || echo MISSED)"
	echo "  time:  ${rt}x the three unicast restores (target <= 0.5) $(awk "BEGIN { exit !($rt <= 0.5) }" && echo met || echo MISSED)"
	mc_cleanup
}

# ---- plan: a migrate plan against the p2v jobs in a row ----
bench_fleet_plan() {
	local A B i
	[ "$(id -u)" = 0 ] || { echo "plan: needs root (libvirtd instances, page caches): skipped"; return 0; }
	for c in libvirtd virsh unshare mke2fs sfdisk python3 nbdkit; do
		command -v $c >/dev/null || { echo "plan: needs $c (make deps)"; return 1; }
	done
	drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
	cleanup() {
		kill_nbdkit
		lvd_private_stop "$WORK/lvA"
		lvd_private_stop "$WORK/lvB"
		[ -n "${BENCH_FLEET_KEEP:-}" ] || rm -rf "$WORK"
	}
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	rm -rf "$WORK"
	mkdir -p "$WORK/tree" "$WORK/poolA" "$WORK/poolB"
	lvd_private_start "$WORK/lvA" || { echo "plan: libvirtd A does not answer"; return 1; }
	lvd_private_start "$WORK/lvB" || { echo "plan: libvirtd B does not answer"; return 1; }
	A=$(lvd_private_uri "$WORK/lvA")
	B=$(lvd_private_uri "$WORK/lvB")
	virsh -q -c "$A" pool-define-as pa dir --target "$WORK/poolA" >/dev/null
	virsh -q -c "$A" pool-start pa >/dev/null
	virsh -q -c "$B" pool-define-as pb dir --target "$WORK/poolB" >/dev/null
	virsh -q -c "$B" pool-start pb >/dev/null

	# the source: real files from /usr, up to DATA_MIB
	local budget=$((DATA_MIB * 1024 * 1024)) size f
	while IFS= read -r -d '' f; do
		size=$(stat -c %s "$f")
		[ "$size" -lt "$budget" ] || break
		budget=$((budget - size))
		mkdir -p "$WORK/tree/$(dirname "$f")"
		cp "$f" "$WORK/tree/$f"
	done < <(find /usr/lib /usr/share -xdev -type f -size +4k -print0 2>/dev/null)
	truncate -s 2G "$WORK/disk.raw"
	printf 'label: gpt\nstart=2048, type=linux\n' | sfdisk -q "$WORK/disk.raw"
	mke2fs -q -F -t ext4 -d "$WORK/tree" "$WORK/p1.fs" $((2048 - 2))M >/dev/null 2>&1
	dd if="$WORK/p1.fs" of="$WORK/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
	rm -rf "$WORK/tree" "$WORK/p1.fs"
	"$IMAGER" save "$WORK/disk.raw" "$WORK/image" --no-progress >/dev/null
	nbdkit --unix "$WORK/nbd.sock" --pidfile "$WORK/nbdkit.pid" -r --filter=delay \
		file "$WORK/disk.raw" rdelay="$RDELAY"
	for _ in $(seq 100); do [ -S "$WORK/nbd.sock" ] && break; sleep 0.1; done
	echo "plan: four machines onto two hosts; the sample holds $DATA_MIB MiB of files," \
		"its image folder $(du -sm "$WORK/image" | cut -f1) MiB"

	seq_jobs() { # SOURCE NAME
		for i in 1 2 3 4; do
			if [ $i -le 2 ]; then uri=$A pool=pa; else uri=$B pool=pb; fi
			"$IMAGER" p2v "$1" --name "$2-seq-$i" --connect "$uri" --pool $pool \
				--no-convert --memory 256M --vcpus 1 --no-progress || return 1
		done
	}
	plan_json() { # SOURCE NAME
		printf '{ "hosts": [ { "uri": "%s", "pools": ["pa"] }, { "uri": "%s", "pools": ["pb"] } ],\n' "$A" "$B"
		printf '  "probe_seconds": 0, "machines": [\n'
		for i in 1 2 3 4; do
			printf '    { "name": "%s-plan-%s", "sources": ["%s"], "convert": false, "memory_mib": 256, "vcpus": 1 }%s\n' \
				"$2" $i "$1" "$([ $i = 4 ] || echo ,)"
		done
		printf '] }\n'
	}
	plan_run() { "$IMAGER" migrate "$WORK/$1.json" --per-host 2; }
	compare() { # KIND SOURCE TARGET
		local r
		plan_json "$2" "$1" >"$WORK/$1.json"
		echo "$1:"
		drop
		timed "$1-seq" seq_jobs "$2" "$1"
		drop
		timed "$1-plan" plan_run "$1"
		r=$(calc "${T[$1-plan]} / ${T[$1-seq]}")
		if [ "$3" = none ]; then
			echo "  the plan against the four jobs in a row: ${r}x (no target: see the header)"
		else
			echo "  the plan against the four jobs in a row: ${r}x (target <= $3)" \
				"$(awk "BEGIN { exit !($r <= $3) }" && echo met || echo MISSED)"
		fi
	}
	compare network "nbd+unix:///?socket=$WORK/nbd.sock" 0.6
	compare folder "$WORK/image" none
}

kill_nbdkit() {
	local pid
	pid=$(cat "$WORK/nbdkit.pid" 2>/dev/null) || return 0
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = nbdkit ] && kill "$pid" 2>/dev/null
	return 0
}

bench_fleet_plan
bench_fleet_multicast
