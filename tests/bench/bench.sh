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
# and, as bounds: zstd -b3 -T$(nproc) on the partclone stream (the
# compressor's ceiling) and dd of 1 GiB with conv=fsync (the durable-write
# floor).  Page caches are dropped before each run when allowed.
#
# Environment: IMAGER (default build/imager), BENCH_CACHE, BENCH_WORK
# (scratch space, default the cache folder), BENCH_DATA_MIB (default 1536),
# BENCH_RUNS (runs of each measurement, the median is shown; default 1),
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
build_disk() {
	local stage=$CACHE/stage-$KEY list=$CACHE/files-$KEY start size
	echo "building the sample disk (once): $DISK"
	rm -rf "$stage" "$CACHE"/disk-*.img "$CACHE"/stage-* "$CACHE"/files-*
	mkdir -p "$stage"
	# Real files, in a stable order, up to DATA_MIB MiB: hard links into a
	# staging folder when /usr and the cache share a filesystem, else copies.
	find /usr/lib -xdev -type f -readable -printf '%s\t%P\n' 2>/dev/null | sort -t$'\t' -k2 >"$list.all" || true
	awk -F'\t' -v cap=$((DATA_MIB * 1024 * 1024)) '{ t += $1; if (t > cap) exit; print $2 }' "$list.all" >"$list"
	rm -f "$list.all"
	(cd /usr/lib && xargs -d '\n' cp -al --parents -t "$stage" <"$list" 2>/dev/null) ||
		(cd /usr/lib && xargs -d '\n' cp -a --parents -t "$stage" <"$list")
	truncate -s 8G "$DISK.tmp"
	printf 'label: gpt\nstart=2048, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"\n' |
		sfdisk -q "$DISK.tmp"
	start=$(sfdisk --json "$DISK.tmp" | jq '.partitiontable.partitions[0].start * 512')
	size=$(sfdisk --json "$DISK.tmp" | jq '.partitiontable.partitions[0].size * 512')
	mke2fs -q -F -t ext4 -d "$stage" -E offset="$start" -L bench "$DISK.tmp" $((size / 1024))k
	e2fsck -fn "$DISK.tmp?offset=$start" >/dev/null 2>&1 || die "the sample ext4 is not clean"
	mv "$DISK.tmp" "$DISK"
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
if [ "$(id -u)" = 0 ] && losetup -f >/dev/null 2>&1; then
	dev=$(losetup -f --show "$DISK")
	LOOPS+=("$dev")
	partx -a "$dev"
	for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b "${dev}p1" ] && break; sleep 0.1; done
	PART=${dev}p1
	INPUT="partition ${PART} (loop device on the sample disk)"
else
	PART=$WORK/part.img
	dd if="$DISK" of="$PART" bs=4M skip="$START" count="$PSIZE" iflag=skip_bytes,count_bytes \
		conv=sparse status=none
	INPUT="the partition copied out to $PART (not root: no loop device)"
fi

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
declare -A WALL MEM
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

echo "bounds..."
# The compressor's ceiling: zstd alone on the partclone stream (used data).
partclone.extfs -q -L "$WORK/partclone.log" -c -s "$PART" -o "$WORK/partclone.raw" 2>/dev/null
# Its last line reads "3#partclone.raw :IN -> OUT (xRATIO), C MB/s, D MB/s".
ZB=$(zstd -b3 -T"$NPROC" "$WORK/partclone.raw" 2>&1 | tr '\r' '\n' | grep -E 'MB/s' | tail -n 1 |
	sed -E 's/.*\(x([0-9.]+)\), *([0-9.]+ MB\/s), *([0-9.]+ MB\/s).*/compress \2, decompress \3, ratio \1/')
rm -f "$WORK/partclone.raw"
# The durable-write floor.
sync
t0=$(now)
dd if=/dev/zero of="$WORK/floor" bs=1M count=1024 conv=fsync status=none
t1=$(now)
FLOOR=$(calc "1073.741824 / ($t1 - $t0)")
rm -f "$WORK/floor"

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
echo "zstd -b3 -T$NPROC on the partclone stream (ceiling): $ZB"
printf 'dd 1 GiB conv=fsync (durable-write floor): %.0f MB/s\n' "$FLOOR"
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
echo "imager / partclone:"
printf '  save time     %5.2f  (target <= 0.50) %s\n' "$rs" "$(verdict "$rs" 0.5)"
printf '  image size    %5.3f  (target <= 1.02) %s\n' "$rz" "$(verdict "$rz" 1.02)"
printf '  restore time  %5.2f  (target <= 0.40) %s\n' "$rr" "$(verdict "$rr" 0.4)"
printf '  imager peak memory: save %.1f MiB, restore %.1f MiB (target < 100 MiB + bitmap %.2f MiB) %s\n' \
	"$mem" "$memr" "$BITMAP_MIB" "$(verdict "$(calc "($mem > $memr) ? $mem : $memr")" "$memt")"

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
