#!/bin/bash
# `make bench`: imager against Clonezilla's pipeline on one sample disk.
#
# The disk: an 8 GiB sparse file, GPT, one ext4 partition filled by
# mke2fs -d with up to 1.5 GiB of real files (from /usr/lib), cached under
# /var/tmp/imager-bench keyed by this script's hash (BENCH_CACHE overrides).
#
# Timed side by side, on the same input (the partition through a loop device
# when root, else the partition copied out to a file):
#   save     imager save PART DIR --level 3
#            partclone.extfs -c -s PART -o - | zstd -T0 -3 > FILE
#   restore  imager restore DIR TARGET            (fsyncs its target itself)
#            zstd -dc FILE | partclone.extfs -r -s - -O TARGET
#            both into fresh files, each followed by sync, inside the timing
# and the ceilings, measured as imager's runs are (the same used data, cold
# caches, $(nproc) threads, the output written and synced inside the time):
#   compress    zstd -3 -T$(nproc) of partclone's stream of the used blocks
#   decompress  zstd -d of partclone's image, to /dev/null
#   write       dd of as many bytes as are in use, conv=fsync
# save is compared with the first, restore with the lesser of the other
# two.  Growth: the same files on a disk eight times as large (64 GiB,
# cached too), saved and restored, against the 8 GiB disk's times.  Page
# caches are dropped before each run when allowed.
#
# Environment: IMAGER (default build/imager), BENCH_CACHE, BENCH_WORK
# (scratch space, default the cache folder), BENCH_DATA_MIB (default 1536),
# BENCH_RUNS (runs of each measurement, the median is shown with every run;
# default 1), BENCH_GROW (0: no growth case),
# BENCH_PARTS (which parts run, default all: "imaging clonezilla convert
# windows p2v fs"; imaging is the ext4 sample with the virtual disk
# targets, clonezilla an ocs-sr image of it restored into a qcow2).
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
DATA_MIB=${BENCH_DATA_MIB:-1536}
KEY=$(sha256sum "$0" | cut -c1-12)-$DATA_MIB
CACHE=${BENCH_CACHE:-/var/tmp/imager-bench}
WORK=${BENCH_WORK:-$CACHE/work}
DISK=$CACHE/disk-$KEY.img
DISK8=$CACHE/disk-$KEY-x8.img
GROW=${BENCH_GROW:-1}
NPROC=$(nproc)
RUNS=${BENCH_RUNS:-1}
PARTS=" ${BENCH_PARTS:-imaging clonezilla convert windows p2v fs} "
part() { [[ $PARTS == *" $1 "* ]]; }
for p in $PARTS; do
	case $p in imaging | clonezilla | convert | windows | p2v | fs) ;; *) echo "bench: unknown part '$p' in BENCH_PARTS" >&2; exit 1 ;; esac
done

die() { echo "bench: $*" >&2; exit 1; }
for c in "$IMAGER" partclone.extfs zstd mke2fs sfdisk /usr/bin/time jq e2fsck; do
	command -v "$c" >/dev/null || [ -x "$c" ] || die "needs $c (make deps)"
done

LOOPS=()
cleanup() {
	local d
	for d in "${LOOPS[@]}"; do
		partx -d "$d" 2>/dev/null || true
		losetup -d "$d" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

# ---- the sample disk (cached) ----
build_disk() { # [TARGET SIZE]: the sample disk, or the same files on a larger one
	local stage=$CACHE/stage-$KEY list=$CACHE/files-$KEY start size out=${1:-$DISK} dsize=${2:-8G}
	echo "building the sample disk (once): $out"
	[ "$out" != "$DISK" ] || rm -rf "$CACHE"/disk-*.img
	rm -rf "$stage" "$CACHE"/stage-* "$CACHE"/files-*
	mkdir -p "$stage"
	# Real files, in a stable order, up to DATA_MIB MiB: hard links into a
	# staging folder when /usr and the cache share a filesystem, else copies.
	find /usr/lib -xdev -type f -readable -printf '%s\t%P\n' 2>/dev/null | sort -t$'\t' -k2 >"$list.all" || true
	awk -F'\t' -v cap=$((DATA_MIB * 1024 * 1024)) '{ t += $1; if (t > cap) exit; print $2 }' "$list.all" >"$list"
	rm -f "$list.all"
	(cd /usr/lib && xargs -d '\n' cp -al --parents -t "$stage" <"$list" 2>/dev/null) ||
		(cd /usr/lib && xargs -d '\n' cp -a --parents -t "$stage" <"$list")
	rm -f "$out.tmp"
	truncate -s "$dsize" "$out.tmp"
	printf 'label: gpt\nstart=2048, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"\n' |
		sfdisk -q "$out.tmp"
	start=$(sfdisk --json "$out.tmp" | jq '.partitiontable.partitions[0].start * 512')
	size=$(sfdisk --json "$out.tmp" | jq '.partitiontable.partitions[0].size * 512')
	mke2fs -q -F -t ext4 -d "$stage" -E offset="$start",lazy_itable_init=1 -L bench "$out.tmp" $((size / 1024))k
	e2fsck -fn "$out.tmp?offset=$start" >/dev/null 2>&1 || die "the sample ext4 is not clean"
	mv "$out.tmp" "$out"
	rm -rf "$stage" "$list"
}
mkdir -p "$CACHE"
if part imaging; then   # (up to the virtual disk targets)
[ -f "$DISK" ] || build_disk
rm -rf "$WORK"
mkdir -p "$WORK"

START=$(sfdisk --json "$DISK" | jq '.partitiontable.partitions[0].start * 512')
PSIZE=$(sfdisk --json "$DISK" | jq '.partitiontable.partitions[0].size * 512')
USED=$(dumpe2fs -h "$DISK?offset=$START" 2>/dev/null | awk -F: '
	/^Block count/ { c = $2 } /^Free blocks/ { f = $2 } /^Block size/ { b = $2 }
	END { printf "%d\n", (c - f) * b }')

# ---- the input both tools read ----
# input DISK COPY: the disk's first partition, as a loop device's partition
# when root, else copied out to COPY; its path in INPUT_PART.
input() {
	local dev start size
	if [ "$(id -u)" = 0 ] && losetup -f >/dev/null 2>&1; then
		dev=$(losetup -f --show "$1")
		LOOPS+=("$dev")
		partx -a "$dev"
		for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b "${dev}p1" ] && break; sleep 0.1; done
		INPUT_PART=${dev}p1
	else
		start=$(sfdisk --json "$1" | jq '.partitiontable.partitions[0].start * 512')
		size=$(sfdisk --json "$1" | jq '.partitiontable.partitions[0].size * 512')
		dd if="$1" of="$2" bs=4M skip="$start" count="$size" iflag=skip_bytes,count_bytes \
			conv=sparse status=none
		INPUT_PART=$2
	fi
}
input "$DISK" "$WORK/part.img"
PART=$INPUT_PART
case $PART in
/dev/*) INPUT="partition ${PART} (loop device on the sample disk)" ;;
*) INPUT="the partition copied out to $PART (not root: no loop device)" ;;
esac

if [ -w /proc/sys/vm/drop_caches ] && (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
	CACHES="dropped before each run"
	drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
else
	CACHES="NOT dropped (not allowed): warm for both, after a warm-up read"
	drop() { :; }
	cat "$PART" >/dev/null
fi

# ---- measuring ----
# measure NAME CLEAN COMMAND...: RUNS times, each after removing the
# previous run's output (CLEAN) and dropping the caches: the median wall
# seconds of COMMAND plus a sync into WALL[NAME], and the largest peak RSS
# (KiB) into MEM[NAME], where a pipeline's processes (timed with TIMED) run
# together, so their peaks add up.
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
declare -A WALL MEM RUNLIST
measure() {
	local name=$1 clean=$2 t0 t1 m f i walls=() peak=0
	shift 2
	for ((i = 0; i < RUNS; i++)); do
		rm -rf "$WORK"/time.* "$clean"
		drop
		t0=$(now)
		"$@"
		sync
		t1=$(now)
		walls+=("$(calc "$t1 - $t0")")
		m=0
		for f in "$WORK"/time.*; do
			[ -f "$f" ] && m=$((m + $(tail -n 1 "$f")))
		done
		[ "$m" -gt "$peak" ] && peak=$m
	done
	WALL[$name]=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	RUNLIST[$name]=$(printf '%.2f ' "${walls[@]}")
	MEM[$name]=$peak
}
TIMED() { # TIMED TAG COMMAND...: run under /usr/bin/time, peak RSS to time.TAG
	local tag=$1
	shift
	/usr/bin/time -f %M -o "$WORK/time.$tag" "$@"
}

imager_save() { TIMED imager "$IMAGER" save "$PART" "$WORK/image" --level 3 --no-progress >"$WORK/imager-save.log"; }
pc_save() {
	TIMED pc partclone.extfs -q -L "$WORK/partclone.log" -c -s "$PART" -o - 2>"$WORK/partclone-save.log" |
		TIMED zstd zstd -q -T0 -3 >"$WORK/partclone.zst"
}
imager_restore() {
	TIMED imager "$IMAGER" restore "$WORK/image" "$WORK/imager-target.img" --no-progress >"$WORK/imager-restore.log"
}
pc_restore() {
	# partclone wants a target as large as the filesystem: a fresh sparse file.
	truncate -s "$PSIZE" "$WORK/partclone-target.img"
	TIMED zstd zstd -q -dc "$WORK/partclone.zst" |
		TIMED pc partclone.extfs -q -L "$WORK/partclone.log" -r -s - -O "$WORK/partclone-target.img" \
			2>"$WORK/partclone-restore.log"
}

echo "input: $INPUT"
echo "data:  $((USED / 1000000)) MB in use on an ext4 of $((PSIZE / 1000000)) MB; $NPROC cores"
echo "page caches: $CACHES"
echo "runs:  $RUNS of each (median wall time, largest peak memory)"
echo

echo "saving..."
measure imager_save "$WORK/image" imager_save
measure pc_save "$WORK/partclone.zst" pc_save
echo "restoring..."
measure imager_restore "$WORK/imager-target.img" imager_restore
measure pc_restore "$WORK/partclone-target.img" pc_restore

echo "checking both restores..."
e2fsck -fn "$WORK/partclone-target.img" >/dev/null 2>&1 || echo "WARNING: the partclone restore is not clean"
e2fsck -fn "$WORK/imager-target.img" >/dev/null 2>&1 || echo "WARNING: the imager restore is not clean (e2fsck -fn)"

echo "ceilings..."
# The same used data as a stream (partclone's, read from the same disk),
# compressed at the same level with as many threads as imager uses, written
# and synced; the image decompressed; the used bytes written durably.
partclone.extfs -q -L "$WORK/partclone.log" -c -s "$PART" -o "$WORK/partclone.raw" 2>/dev/null
ceil_c() { zstd -q -3 -T"$NPROC" -f "$WORK/partclone.raw" -o "$WORK/ceiling.zst"; }
ceil_d() { zstd -q -dc "$WORK/partclone.zst" >/dev/null; }
ceil_w() { dd if=/dev/zero of="$WORK/floor" bs=4M count=$((USED / 4194304)) conv=fsync status=none; }
measure ceil_c "$WORK/ceiling.zst" ceil_c
measure ceil_d "$WORK/none" ceil_d
measure ceil_w "$WORK/floor" ceil_w
rm -f "$WORK/partclone.raw" "$WORK/ceiling.zst" "$WORK/floor"

IMG_SIZE=$(du -sb "$WORK/image" | cut -f1)
PC_SIZE=$(stat -c %s "$WORK/partclone.zst")
BLOCKS=$(jq '.partitions[0].block_count' "$WORK/image/manifest.json" 2>/dev/null || echo 0)
BITMAP_MIB=$(calc "$BLOCKS / 8 / 1048576")

row() { # NAME WALL SIZE MEMKIB
	printf '%-34s %8.2f %10.0f %10s %9.1f\n' "$1" "$2" "$(calc "$USED / 1000000 / $2")" "$3" \
		"$(calc "$4 / 1024")"
}
echo
printf '%-34s %8s %10s %10s %9s\n' "" "wall s" "MB/s used" "image MB" "peak MiB"
row "imager save --level 3" "${WALL[imager_save]}" "$((IMG_SIZE / 1000000))" "${MEM[imager_save]}"
row "partclone | zstd -T0 -3" "${WALL[pc_save]}" "$((PC_SIZE / 1000000))" "${MEM[pc_save]}"
row "imager restore (+sync)" "${WALL[imager_restore]}" "" "${MEM[imager_restore]}"
row "zstd -dc | partclone -r (+sync)" "${WALL[pc_restore]}" "" "${MEM[pc_restore]}"
echo
mbs() { calc "$USED / 1000000 / $1"; }
printf '%-34s %8.2f %10.0f  (%s)\n' "ceiling: zstd -3 -T$NPROC, synced" "${WALL[ceil_c]}" "$(mbs "${WALL[ceil_c]}")" "compress"
printf '%-34s %8.2f %10.0f  (%s)\n' "ceiling: zstd -d to /dev/null" "${WALL[ceil_d]}" "$(mbs "${WALL[ceil_d]}")" "decompress"
printf '%-34s %8.2f %10.0f  (%s)\n' "floor: dd of the used bytes, fsync" "${WALL[ceil_w]}" "$(mbs "${WALL[ceil_w]}")" "durable write"
if [ "$RUNS" -gt 1 ]; then
	echo "every run (s):"
	for n in imager_save pc_save imager_restore pc_restore ceil_c ceil_d ceil_w; do
		printf '  %-16s %s\n' "$n" "${RUNLIST[$n]}"
	done
fi
echo

verdict() { # VALUE TARGET: "ok" when VALUE <= TARGET
	if awk "BEGIN { exit !($1 <= $2) }"; then echo "ok"; else echo "MISSED"; fi
}
rs=$(calc "${WALL[imager_save]} / ${WALL[pc_save]}")
rz=$(calc "$IMG_SIZE / $PC_SIZE")
rr=$(calc "${WALL[imager_restore]} / ${WALL[pc_restore]}")
mem=$(calc "${MEM[imager_save]} / 1024")
memr=$(calc "${MEM[imager_restore]} / 1024")
memt=$(calc "100 + $BITMAP_MIB")
atleast() { # VALUE TARGET: "ok" when VALUE >= TARGET
	if awk "BEGIN { exit !($1 >= $2) }"; then echo "ok"; else echo "MISSED"; fi
}
# Shares of the ceilings: imager's used-data speed over the ceiling's.
sc=$(calc "100 * ${WALL[ceil_c]} / ${WALL[imager_save]}")
bound=$(calc "(${WALL[ceil_d]} > ${WALL[ceil_w]}) ? ${WALL[ceil_d]} : ${WALL[ceil_w]}")
rc=$(calc "100 * $bound / ${WALL[imager_restore]}")
echo "imager / partclone:"
printf '  save time     %5.2f  (target <= 0.50) %s\n' "$rs" "$(verdict "$rs" 0.5)"
printf '  image size    %5.3f  (target <= 1.02) %s\n' "$rz" "$(verdict "$rz" 1.02)"
printf '  restore time  %5.2f  (target <= 0.40) %s\n' "$rr" "$(verdict "$rr" 0.4)"
echo "imager / its ceiling:"
printf '  save          %5.1f%% of the compress ceiling (target >= 90%%) %s\n' "$sc" "$(atleast "$sc" 90)"
printf '  restore       %5.1f%% of min(decompress, durable write) (target >= 90%%) %s\n' "$rc" "$(atleast "$rc" 90)"
printf '  imager peak memory: save %.1f MiB, restore %.1f MiB (target < 100 MiB + bitmap %.2f MiB) %s\n' \
	"$mem" "$memr" "$BITMAP_MIB" "$(verdict "$(calc "($mem > $memr) ? $mem : $memr")" "$memt")"

# ---- growth: the same files on a disk eight times as large ----
if [ "$GROW" != 0 ]; then
	echo
	echo "growth (the same files on a 64 GiB disk):"
	[ -f "$DISK8" ] || build_disk "$DISK8" 64G
	input "$DISK8" "$WORK/part8.img"
	PART8=$INPUT_PART
	save8() { TIMED imager "$IMAGER" save "$PART8" "$WORK/image8" --level 3 --no-progress >"$WORK/imager-save8.log"; }
	restore8() { TIMED imager "$IMAGER" restore "$WORK/image8" "$WORK/imager-target8.img" --no-progress >"$WORK/imager-restore8.log"; }
	measure save8 "$WORK/image8" save8
	measure restore8 "$WORK/imager-target8.img" restore8
	e2fsck -fn "$WORK/imager-target8.img" >/dev/null 2>&1 || echo "WARNING: the 64 GiB restore is not clean (e2fsck -fn)"
	B8=$(jq '.partitions[0].block_count' "$WORK/image8/manifest.json" 2>/dev/null || echo 0)
	B8_MIB=$(calc "$B8 / 8 / 1048576")
	rm -rf "$WORK/image8" "$WORK/imager-target8.img" "$WORK/part8.img"
	g1=$(calc "${WALL[save8]} / ${WALL[imager_save]}")
	g2=$(calc "${WALL[restore8]} / ${WALL[imager_restore]}")
	m8=$(calc "(${MEM[save8]} > ${MEM[restore8]} ? ${MEM[save8]} : ${MEM[restore8]}) / 1024")
	printf '  save      %6.2f s against %6.2f s: %5.2f  (target <= 1.10) %s  runs: %s\n' "${WALL[save8]}" \
		"${WALL[imager_save]}" "$g1" "$(verdict "$g1" 1.1)" "${RUNLIST[save8]}"
	printf '  restore   %6.2f s against %6.2f s: %5.2f  (target <= 1.10) %s  runs: %s\n' "${WALL[restore8]}" \
		"${WALL[imager_restore]}" "$g2" "$(verdict "$g2" 1.1)" "${RUNLIST[restore8]}"
	printf '  peak memory %.1f MiB (target < 100 MiB + bitmap %.2f MiB) %s\n' "$m8" "$B8_MIB" \
		"$(verdict "$m8" "$(calc "100 + $B8_MIB")")"
fi

# ---- virtual disk targets: straight into qcow2, against the usual route ----
echo
echo "virtual disk targets (tests/bench/bench-targets.sh):"
mkdir -p "$WORK/targets"
IMAGER=$IMAGER PART_SRC=$DISK IMG_DIR=$WORK/image PC_IMG=$WORK/partclone.zst PART_OFFSET=$START \
	PART_SIZE=$PSIZE WORK=$WORK/targets BENCH_RUNS=$RUNS bash "$ROOT/tests/bench/bench-targets.sh"
else
	rm -rf "$WORK"
	mkdir -p "$WORK"
fi   # imaging

# ---- a Clonezilla image of the sample into a qcow2, against Clonezilla's route ----
if part clonezilla; then
[ -f "$DISK" ] || build_disk
echo
echo "Clonezilla image into qcow2 (tests/bench/bench-clonezilla.sh):"
IMAGER=$IMAGER DISK=$DISK WORK=$WORK/clonezilla bash "$ROOT/tests/bench/bench-clonezilla.sh"
fi

# ---- guest conversion: imager convert against virt-v2v ----
if part convert; then
echo
echo "guest conversion (tests/bench/bench-convert.sh):"
IMAGER=$IMAGER BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-convert.sh"
fi

# ---- Windows conversion: imager convert against virt-v2v-in-place ----
if part windows; then
echo
echo "Windows conversion (tests/bench/bench-windows.sh):"
IMAGER=$IMAGER BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-windows.sh"
fi

# ---- the whole move onto libvirt: imager p2v against virt-v2v -o libvirt ----
if part p2v; then
echo
echo "p2v onto libvirt (tests/bench/bench-p2v.sh):"
IMAGER=$IMAGER BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-p2v.sh"
fi

# ---- other filesystems: NTFS, XFS, btrfs, LVM+XFS against partclone + zstd ----
if part fs; then
echo
echo "other filesystems (tests/bench/bench-fs.sh):"
IMAGER=$IMAGER BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-fs.sh"
fi
