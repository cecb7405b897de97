#!/bin/bash
# Other filesystems (part of `make bench`): imager against Clonezilla's
# pipeline on one sample of each of NTFS, XFS, btrfs and LVM with an XFS LV.
#
# The samples: an 8 GiB filesystem each (BENCH_FS_SIZE_MIB), whose whole
# space was first written with pseudo-random bytes (AES-CTR of zeros, one
# seed per sample: the "old data" of a used disk, never compressible, and no
# holes: each sample file is checked fully allocated after it is filled, so
# neither mkfs (run with its discard off) nor the mount (nodiscard) made the
# free space zeros), then filled with about 2 GiB (BENCH_FS_DATA_MIB) of
# real files, copies of /usr/lib and /usr/share (a third of it) in a stable
# order, by the filesystem's own driver:
#   ntfs   mkntfs -f (no zeroing) on the file, filled through ntfs-3g (FUSE)
#   xfs    mkfs.xfs -K on a loop device, filled through the kernel's XFS
#   btrfs  mkfs.btrfs -K on a loop device, filled through the kernel's btrfs
#          (mounted nodiscard: the kernel's default is discard=async)
#   lvm    a PV of the size plus 8 MiB (pvcreate, vgcreate, then an LV of
#          the size made with lvcreate -an -Zn: never activated, there is no
#          device-mapper here); the LV's XFS made and filled through a loop
#          device on the PV's bytes at the LV's offset
# and checked by the filesystem's checker (ntfsfix -n, xfs_repair -n, btrfs
# check).  They are built once and kept in BENCH_WORK/fs/samples-KEY, KEY
# being this script's hash with the sizes (about 4 x 8 GiB of disk; other
# keys' samples are removed).  Under `make bench`, BENCH_WORK is the bench's
# scratch folder, emptied at its end: the samples are built once per run.
#
# Timed side by side, runs interleaved in alternating order, the page cache
# dropped before each run and a sync inside the timing, BENCH_FS_RUNS
# (default 3) runs of each, medians shown with each run's time and spread:
#   imager save SRC DIR --no-progress              (its default level, 3)
#   partclone.FS -c -s SRC -o - | zstd -T0 -3 > FILE
# SRC is a read-only loop device on the sample.  For LVM, imager reads the
# whole PV (its LVM plugin finds the LV and reads its XFS), and partclone.xfs
# reads the LV's bytes through a read-only loop device at the LV's offset in
# the PV (what Clonezilla does with an activated LV).
# Beside the wall times, the CPU seconds (user + sys, a pipeline's processes
# added up) of each run, and the load average: the machine may be shared.
# Both sides mostly compress (zstd -3 on every core); when both are bound by
# the CPU, the ratio of CPU seconds is about what the wall-time ratio would
# be with the cores to themselves.
# Then each result is checked: `imager verify DIR`, and partclone.chkimg on
# the decompressed partclone image.
#
# Targets: image size imager / partclone+zstd <= 1.02; save time
# imager / partclone+zstd <= 0.50.  Exit status: 0 when every result is
# sound (targets missed are reported, not fatal), 1 when a tool failed or a
# result does not check.
#
# Environment: IMAGER (default build/imager), BENCH_WORK (scratch space,
# default /var/tmp/imager-bench/work), BENCH_FS_RUNS, BENCH_FS_SIZE_MIB
# (default 8192, a multiple of 4), BENCH_FS_DATA_MIB (default 2048),
# BENCH_FS_LIST (default "ntfs xfs btrfs lvm").
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
WORK=${BENCH_WORK:-/var/tmp/imager-bench/work}/fs
RUNS=${BENCH_FS_RUNS:-3}
SIZE_MIB=${BENCH_FS_SIZE_MIB:-8192}
DATA_MIB=${BENCH_FS_DATA_MIB:-2048}
read -ra FSES <<<"${BENCH_FS_LIST:-ntfs xfs btrfs lvm}"
KEY=$(sha256sum "$0" | cut -c1-12)-$SIZE_MIB-$DATA_MIB
SAMPLES=$WORK/samples-$KEY
RUN=$WORK/run
SIZE=$((SIZE_MIB * 1024 * 1024))
PV_SIZE=$((SIZE + 8 * 1024 * 1024))
T0=$(date +%s.%N)

fail() { echo "bench-fs: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench-fs: needs root (loop devices, mounts): skipped"; exit 0; }
if [ $((SIZE_MIB % 4)) != 0 ] || [ "$SIZE_MIB" -lt 512 ]; then
	fail "BENCH_FS_SIZE_MIB must be a multiple of 4, at least 512"
fi
need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null || [ -x "$c" ] || fail "needs $c (make deps)"
	done
}
need_loop() { losetup -f >/dev/null 2>&1 || fail "no free loop device"; }
need_cmd "$IMAGER" zstd jq openssl losetup mountpoint partclone.chkimg
for fs in "${FSES[@]}"; do
	case $fs in
	ntfs) need_cmd mkntfs ntfs-3g ntfsfix partclone.ntfs ;;
	xfs) need_cmd mkfs.xfs xfs_repair partclone.xfs ;;
	btrfs) need_cmd mkfs.btrfs btrfs partclone.btrfs ;;
	lvm) need_cmd mkfs.xfs xfs_repair partclone.xfs pvcreate vgcreate lvcreate ;;
	*) fail "unknown filesystem $fs (BENCH_FS_LIST: ntfs xfs btrfs lvm)" ;;
	esac
done

mkdir -p "$WORK"
# A private LVM configuration (tests/lib/lvm.sh): no backups under /etc/lvm,
# activation off, only the devices named to each command.
# shellcheck disable=SC2034 # lvm.sh's folder
T=$WORK
# shellcheck source=../lib/lvm.sh
. "$ROOT/tests/lib/lvm.sh"
lvm_setup

# ---- our loop devices and mounts, and nothing else, undone at the end ----
LOOPS=() MOUNTS=() FUSE_PID=
LOOP=
attach() { # attach [losetup options] FILE: the new device in LOOP
	LOOP=$(losetup -f --show "$@") || fail "losetup $*"
	LOOPS+=("$LOOP")
}
detach() {
	local d keep=()
	losetup -d "$1" || true
	for d in "${LOOPS[@]}"; do [ "$d" = "$1" ] || keep+=("$d"); done
	LOOPS=("${keep[@]}")
}
cleanup() {
	local m d
	for m in "${MOUNTS[@]}"; do mountpoint -q "$m" && umount "$m" 2>/dev/null; done
	[ -z "$FUSE_PID" ] || wait "$FUSE_PID" 2>/dev/null || true
	for d in "${LOOPS[@]}"; do losetup -d "$d" 2>/dev/null || true; done
	rm -rf "$RUN" "$SAMPLES"/*.tmp
	[ ! -d "$SAMPLES/mnt" ] || rmdir "$SAMPLES/mnt" 2>/dev/null || true
}
trap cleanup EXIT

# ---- the samples (cached) ----
# fill FILE BYTES SEED: pseudo-random bytes, fully allocated.
fill() {
	{ openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:$3" -in /dev/zero 2>/dev/null || true; } |
		head -c "$2" >"$1"
	[ "$(stat -c %s "$1")" = "$2" ] || fail "filling $1"
	allocated "$1"
}
# allocated FILE: every byte of FILE is allocated (no hole reads as zeros).
allocated() {
	local a s
	a=$(($(stat -c '%b * %B' "$1")))
	s=$(stat -c %s "$1")
	[ "$a" -ge "$s" ] || fail "$1 has holes ($a of $s bytes allocated): its free space would read as zeros"
}
# The files: a stable list of paths under /usr, a third from /usr/share.
file_list() {
	local out=$1 cap=$((DATA_MIB * 1024 * 1024)) share
	share=$((cap / 3))
	{
		find /usr/share -xdev -type f -readable -printf '%s\tshare/%P\n' 2>/dev/null | sort -t$'\t' -k2 |
			awk -F'\t' -v cap=$share '{ t += $1; if (t > cap) exit; print }' || true
	} >"$out.share"
	{
		find /usr/lib -xdev -type f -readable -printf '%s\tlib/%P\n' 2>/dev/null | sort -t$'\t' -k2 |
			awk -F'\t' -v cap=$((cap - $(awk -F'\t' '{ t += $1 } END { print t + 0 }' "$out.share"))) \
				'{ t += $1; if (t > cap) exit; print }' || true
	} >"$out.lib"
	cat "$out.share" "$out.lib" | cut -f2- >"$out"
	awk -F'\t' '{ t += $1 } END { print t + 0 }' "$out.share" "$out.lib" >"$out.bytes"
	rm -f "$out.share" "$out.lib"
}
# copy_in DIR [cp options]: the listed files into a mounted filesystem.
# A file that vanished meanwhile (a package upgrade) is only counted.
copy_in() {
	local dir=$1 n
	shift
	(cd /usr && xargs -d '\n' cp --parents "$@" -t "$dir" <"$SAMPLES/files") 2>"$SAMPLES/cp.err" || true
	n=$(grep -c . "$SAMPLES/cp.err" || true)
	[ "$n" = 0 ] || echo "  ($n files not copied: $(head -n 1 "$SAMPLES/cp.err"))"
	[ "$n" -lt 100 ] || fail "copying into $dir: $n errors"
}
mnt_kernel() { # DEV TYPE: mounted on SAMPLES/mnt
	mkdir -p "$SAMPLES/mnt"
	MOUNTS+=("$SAMPLES/mnt")
	mount -t "$2" -o nodiscard "$1" "$SAMPLES/mnt" || fail "mount $2 $1"
}
unmnt() {
	umount "$SAMPLES/mnt" || fail "umount $SAMPLES/mnt"
	MOUNTS=()
}

build_ntfs() { # FILE
	fill "$1" "$SIZE" ntfs
	mkntfs -F -f -q -L bench "$1" >"$SAMPLES/mkfs.log" 2>&1 || fail "mkntfs: $(tail -n 3 "$SAMPLES/mkfs.log")"
	mkdir -p "$SAMPLES/mnt"
	MOUNTS+=("$SAMPLES/mnt")
	ntfs-3g -o no_detach,big_writes "$1" "$SAMPLES/mnt" >"$SAMPLES/ntfs-3g.log" 2>&1 &
	FUSE_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do mountpoint -q "$SAMPLES/mnt" && break; sleep 0.1; done
	mountpoint -q "$SAMPLES/mnt" || fail "ntfs-3g did not mount $1: $(tail -n 3 "$SAMPLES/ntfs-3g.log")"
	copy_in "$SAMPLES/mnt" --preserve=timestamps
	unmnt
	wait "$FUSE_PID" || fail "ntfs-3g: $(tail -n 3 "$SAMPLES/ntfs-3g.log")"
	FUSE_PID=
	ntfsfix -n "$1" >"$SAMPLES/check.log" 2>&1 || fail "ntfsfix -n: $(tail -n 3 "$SAMPLES/check.log")"
}
build_xfs() { # FILE (or DEVICE: then already filled)
	[ -b "$1" ] || { fill "$1" "$SIZE" xfs; attach "$1"; set -- "$LOOP" "$1"; }
	mkfs.xfs -q -K -L bench "$1" || fail "mkfs.xfs"
	mnt_kernel "$1" xfs
	copy_in "$SAMPLES/mnt" -a
	unmnt
	xfs_repair -n "$1" >"$SAMPLES/check.log" 2>&1 || fail "xfs_repair -n: $(tail -n 3 "$SAMPLES/check.log")"
	[ -z "${2:-}" ] || detach "$1"
}
build_btrfs() { # FILE
	fill "$1" "$SIZE" btrfs
	attach "$1"
	mkfs.btrfs -q -K -L bench "$LOOP" >/dev/null || fail "mkfs.btrfs"
	mnt_kernel "$LOOP" btrfs
	copy_in "$SAMPLES/mnt" -a
	unmnt
	btrfs check --readonly "$LOOP" >"$SAMPLES/check.log" 2>&1 || fail "btrfs check: $(tail -n 3 "$SAMPLES/check.log")"
	detach "$LOOP"
}
build_lvm() { # FILE: a PV of VG bbench, LV data holding an XFS
	local pv off
	fill "$1" "$PV_SIZE" lvm
	attach "$1"
	pv=$LOOP
	{
		lvm "$pv" -- pvcreate -q "$pv" &&
			lvm "$pv" -- vgcreate -q bbench "$pv" &&
			lvm "$pv" -- lvcreate -q -an -Zn -L "${SIZE_MIB}m" -n data bbench
	} >"$SAMPLES/lvm.log" 2>&1 || fail "LVM: $(grep -v WARNING "$SAMPLES/lvm.log" | tail -n 3)"
	off=$(lv_offset "$pv" bbench data 2>>"$SAMPLES/lvm.log")
	detach "$pv"
	echo "$off" >"$SAMPLES/lvm.offset"
	attach -o "$off" --sizelimit "$SIZE" "$1"
	build_xfs "$LOOP"
	detach "$LOOP"
}

sample() { # FS: the sample's file, built when missing
	local f=$SAMPLES/$1.img t0
	if [ ! -f "$f" ]; then
		echo "building the $1 sample (once): $f"
		t0=$(date +%s)
		rm -f "$f.tmp"
		"build_$1" "$f.tmp"
		allocated "$f.tmp"
		mv "$f.tmp" "$f"
		echo "  built in $(($(date +%s) - t0)) s"
	fi
}

mkdir -p "$SAMPLES"
for d in "$WORK"/samples-*; do [ "$d" = "$SAMPLES" ] || rm -rf "$d"; done
rm -rf "$SAMPLES"/*.tmp "$RUN"
missing=0
for fs in "${FSES[@]}"; do [ -f "$SAMPLES/$fs.img" ] || missing=$((missing + 1)); done
if [ "$missing" -gt 0 ]; then
	need=$((missing * PV_SIZE / 1048576 + 4096))
	free=$(($(df -P -k "$WORK" | awk 'NR == 2 { print $4 }') / 1024))
	[ "$free" -ge "$need" ] || fail "needs $need MiB free in $WORK for the samples and images, has $free"
	[ -s "$SAMPLES/files" ] || file_list "$SAMPLES/files"
fi
for fs in "${FSES[@]}"; do sample "$fs"; done
T_BUILT=$(date +%s.%N)

# ---- measuring ----
mkdir -p "$RUN"
if (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
	CACHES="page caches dropped before each run"
	drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
else
	CACHES="page caches NOT dropped (not allowed): the second and later runs read warm"
	drop() { sync; }
fi
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# spread VALUES...: (largest - smallest) / median, in percent
spread() {
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]; printf "%.1f", (m > 0) ? 100 * (v[NR] - v[1]) / m : 0 }'
}
# The CPU seconds (user + sys) of this shell's finished children so far:
# bash's times, run here (in a subshell it would count nothing).
cpu_children() {
	times >"$RUN/times"
	awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { v = $i; sub(/s$/, "", v); split(v, p, "m"); t += p[1] * 60 + p[2] }
		printf "%.6f\n", t }' "$RUN/times"
}
# once CLEAN FN: the wall time of FN + sync, cold caches, into SECS, and the
# CPU seconds of its processes (a pipeline's added up) into CPU.
SECS='' CPU=''
once() {
	local t0 t1
	rm -rf "$1"
	drop
	cpu_children >"$RUN/cpu0"
	t0=$(now)
	"$2" || { echo "bench-fs: $2 failed on $FS:"; tail -n 20 "$RUN"/*.log "$RUN"/*.err 2>/dev/null; exit 1; }
	sync
	t1=$(now)
	cpu_children >"$RUN/cpu1"
	SECS=$(calc "$t1 - $t0")
	CPU=$(calc "$(cat "$RUN/cpu1") - $(cat "$RUN/cpu0")")
}
imager_save() { "$IMAGER" save "$SRC" "$RUN/image" --no-progress >"$RUN/imager.log" 2>&1; }
pc_save() {
	"partclone.$PCFS" -q -L "$RUN/partclone.log" -c -s "$PCSRC" -o - 2>"$RUN/partclone.err" |
		zstd -q -T0 -3 >"$RUN/partclone.zst"
}

echo "samples: ${SIZE_MIB} MiB filesystems (free space: old pseudo-random data), $(($(cat "$SAMPLES/files.bytes") / 1000000)) MB of /usr files in each; $(nproc) cores"
echo "$CACHES; $RUNS runs of each, interleaved (median, spread = (max - min) / median)"
echo "load average (1 min) before the runs: $(cut -d' ' -f1 /proc/loadavg) (other work on this machine shares its cores)"
declare -A USED ISIZE PSIZE IT PT IC PC LOAD IRUNS PRUNS IVAR PVAR CHECK
for FS in "${FSES[@]}"; do
	f=$SAMPLES/$FS.img
	attach -r "$f"
	SRC=$LOOP
	case $FS in
	lvm)
		off=$(cat "$SAMPLES/lvm.offset")
		attach -r -o "$off" --sizelimit "$SIZE" "$f"
		PCSRC=$LOOP PCFS=xfs
		echo "$FS: imager reads the PV $SRC; partclone.xfs the LV's bytes, $PCSRC (offset $off of the PV)"
		;;
	*)
		PCSRC=$SRC PCFS=$FS
		echo "$FS: both read $SRC (read-only loop device on the sample)"
		;;
	esac
	a=() b=() ac=() bc=()
	for ((i = 0; i < RUNS; i++)); do
		if ((i % 2 == 0)); then
			once "$RUN/image" imager_save
			a+=("$SECS") ac+=("$CPU")
			once "$RUN/partclone.zst" pc_save
			b+=("$SECS") bc+=("$CPU")
		else
			once "$RUN/partclone.zst" pc_save
			b+=("$SECS") bc+=("$CPU")
			once "$RUN/image" imager_save
			a+=("$SECS") ac+=("$CPU")
		fi
	done
	IT[$FS]=$(median "${a[@]}") PT[$FS]=$(median "${b[@]}")
	IC[$FS]=$(median "${ac[@]}") PC[$FS]=$(median "${bc[@]}")
	LOAD[$FS]=$(cut -d' ' -f1 /proc/loadavg)
	IRUNS[$FS]=$(printf '%.1f ' "${a[@]}") PRUNS[$FS]=$(printf '%.1f ' "${b[@]}")
	IVAR[$FS]=$(spread "${a[@]}") PVAR[$FS]=$(spread "${b[@]}")
	ISIZE[$FS]=$(du -sb "$RUN/image" | cut -f1)
	PSIZE[$FS]=$(stat -c %s "$RUN/partclone.zst")
	USED[$FS]=$(jq '[.partitions[] | .used_blocks * .block_size] | add' "$RUN/image/manifest.json")
	printf '  imager save      %6.1f s  (runs: %s) CPU %5.1f s\n' "${IT[$FS]}" "${IRUNS[$FS]}" "${IC[$FS]}"
	printf '  partclone | zstd %6.1f s  (runs: %s) CPU %5.1f s\n' "${PT[$FS]}" "${PRUNS[$FS]}" "${PC[$FS]}"
	echo "  load average (1 min) after the runs: ${LOAD[$FS]}"
	CHECK[$FS]=sound
	if ! "$IMAGER" verify "$RUN/image" >"$RUN/verify.out" 2>&1; then
		CHECK[$FS]="IMAGE DOES NOT VERIFY"
		echo "  imager verify: $(tail -n 3 "$RUN/verify.out")"
	fi
	if ! zstd -q -dc "$RUN/partclone.zst" | partclone.chkimg -L "$RUN/chkimg.log" -s - >/dev/null 2>&1; then
		[ "${CHECK[$FS]}" = sound ] && CHECK[$FS]="PARTCLONE IMAGE DOES NOT CHECK" ||
			CHECK[$FS]+=", PARTCLONE IMAGE DOES NOT CHECK"
		echo "  partclone.chkimg: $(tail -n 3 "$RUN/chkimg.log")"
	fi
	echo "  imager verify: $(head -n 1 "$RUN/verify.out"); partclone.chkimg: $(grep -q 'successfully checked' "$RUN/chkimg.log" && echo ok || echo FAILED)"
	rm -rf "${RUN:?}"/*
	[ "$FS" != lvm ] || detach "$PCSRC"
	detach "$SRC"
done
T_END=$(date +%s.%N)

# ---- the table ----
verdict() { if awk "BEGIN { exit !($1 <= $2) }"; then echo ok; else echo MISSED; fi; }
mb() { calc "$1 / 1000000" | awk '{ printf "%.0f", $1 }'; }
echo
printf '%-8s %8s %9s %9s %8s %8s %8s %7s %8s %8s  %s\n' filesys "used MB" "imager" "pc+zstd" "size" \
	"imager" "pc+zstd" "time" "imager" "pc+zstd" "results"
printf '%-8s %8s %9s %9s %8s %8s %8s %7s %8s %8s  %s\n' "" "" "MB" "MB" "ratio" "s" "s" "ratio" \
	"spread" "spread" ""
bad=0 rows=()
for FS in "${FSES[@]}"; do
	rz=$(calc "${ISIZE[$FS]} / ${PSIZE[$FS]}")
	rt=$(calc "${IT[$FS]} / ${PT[$FS]}")
	name=$FS
	[ "$FS" != lvm ] || name=lvm+xfs
	printf '%-8s %8s %9s %9s %8.3f %8.1f %8.1f %7.2f %7s%% %7s%%  %s\n' "$name" "$(mb "${USED[$FS]}")" \
		"$(mb "${ISIZE[$FS]}")" "$(mb "${PSIZE[$FS]}")" "$rz" "${IT[$FS]}" "${PT[$FS]}" "$rt" \
		"${IVAR[$FS]}" "${PVAR[$FS]}" "${CHECK[$FS]}"
	rows+=("$(printf '  %-8s size %.3f (target <= 1.02) %s, time %.2f (target <= 0.50) %s; CPU %.2f' "$name" \
		"$rz" "$(verdict "$rz" 1.02)" "$rt" "$(verdict "$rt" 0.5)" "$(calc "${IC[$FS]} / ${PC[$FS]}")")")
	[ "${CHECK[$FS]}" = sound ] || bad=1
done
echo
echo "imager / partclone + zstd -3 (CPU: user + sys seconds, median; not a target):"
printf '%s\n' "${rows[@]}"
printf 'wall time: %.0f s (samples %.0f s, timed runs and checks %.0f s)\n' "$(calc "$T_END - $T0")" \
	"$(calc "$T_BUILT - $T0")" "$(calc "$T_END - $T_BUILT")"
exit "$bad"
