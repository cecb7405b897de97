#!/bin/bash
# `make bench`: imager against Clonezilla's pipeline on one sample disk.
#
# The disk: an 8 GiB sparse file, GPT, one ext4 partition filled by
# mke2fs -d with up to 1.5 GiB of real files (from /usr/lib), cached under
# /var/tmp/imager-bench keyed by the hash of the function that builds it
# (BENCH_CACHE overrides).
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
#   write       dd of as many bytes as are in use, the faster of conv=fsync
#               (through the page cache) and oflag=direct
#   both        the image decompressed into dd oflag=direct, synced: what a
#               restore does, shown beside it without a target
# save is compared with the first, restore with the slower of the other
# two.  Save is also timed warm (the source in the page cache) against
# zstd's own in-memory benchmark, zstd -b3 -T$(nproc) of the same data: the
# compressor's speed on this CPU with no I/O at all.  Growth: the same files on a disk eight times as large (64 GiB,
# cached too), saved and restored, against the 8 GiB disk's times.  Page
# caches are dropped before each run when allowed.  The runs of a group
# (the saves, their ceiling and the growth case's; the restores and
# theirs) take turns, and each ratio is the median of the ratios within a
# round, so that both sides of a ratio see the machine in the same state
# (this machine's disk speed drifts from minute to minute).
#
# Environment: IMAGER (default build/imager), BENCH_CACHE, BENCH_WORK
# (scratch space, default the cache folder), BENCH_DATA_MIB (default 1536),
# BENCH_RUNS (runs of each measurement, the median is shown with every run;
# default 1), BENCH_GROW (0: no growth case),
# BENCH_PARTS (which parts run, default all: "imaging clonezilla convert
# windows p2v v2v fs open fleet"; open is an image served without a restore and
# a guest started at once from it (bench-open.sh); fleet is a migrate plan
# of four machines on two hosts against the four p2v jobs in a row, and
# multicast (bench-fleet.sh); imaging is the ext4 sample with the virtual disk
# targets, clonezilla an ocs-sr image of it restored into a qcow2, v2v the
# test guest as an OVA moved onto libvirt against virt-v2v -i ova).
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
DATA_MIB=${BENCH_DATA_MIB:-1536}
CACHE=${BENCH_CACHE:-/var/tmp/imager-bench}
WORK=${BENCH_WORK:-$CACHE/work}
GROW=${BENCH_GROW:-1}
NPROC=$(nproc)
RUNS=${BENCH_RUNS:-1}
PARTS=" ${BENCH_PARTS:-imaging clonezilla convert windows p2v v2v fs open fleet} "
part() { [[ $PARTS == *" $1 "* ]]; }
for p in $PARTS; do
	case $p in imaging | clonezilla | convert | windows | p2v | v2v | fs | open | fleet) ;; *) echo "bench: unknown part '$p' in BENCH_PARTS" >&2; exit 1 ;; esac
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
KEY=$(declare -f build_disk | sha256sum | cut -c1-12)-$DATA_MIB
DISK=$CACHE/disk-$KEY.img
DISK8=$CACHE/disk-$KEY-x8.img
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
# A group of measurements (side_by_side NAME...): RUNS rounds, each running
# every NAME once, in turn, in the given order and then reversed on the
# next round (so that what is compared runs side by side, and neither side
# always runs first or right after the heavy anchors, which go last).  A
# run removes the previous run's output (CLEAN[NAME]), drops the caches and
# lets the disk settle for a second, then times the function NAME plus a
# sync.  WALL[NAME]: the median; RAW[NAME]: every run; MEM[NAME]: the
# largest peak RSS (KiB), where a pipeline's processes (timed with TIMED)
# run together, so their peaks add up.
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
declare -A WALL MEM RUNLIST RAW CLEAN
run_once() { # NAME
	local name=$1 t0 t1 m=0 f
	rm -rf "$WORK"/time.* "${CLEAN[$name]}"
	drop
	sleep 1
	t0=$(now)
	"$name"
	sync
	t1=$(now)
	RAW[$name]+="$(calc "$t1 - $t0") "
	for f in "$WORK"/time.*; do
		[ -f "$f" ] && m=$((m + $(tail -n 1 "$f")))
	done
	[ "$m" -gt "${MEM[$name]:-0}" ] && MEM[$name]=$m
	return 0
}
side_by_side() { # NAME...
	local i k n=$# names=("$@")
	for ((i = 0; i < RUNS; i++)); do
		for ((k = 0; k < n; k++)); do
			if ((i % 2 == 0)); then run_once "${names[k]}"; else run_once "${names[n - 1 - k]}"; fi
		done
	done
	for k in "${names[@]}"; do
		# shellcheck disable=SC2086 # a list of numbers
		WALL[$k]=$(median ${RAW[$k]})
		# shellcheck disable=SC2086
		RUNLIST[$k]=$(printf '%.2f ' ${RAW[$k]})
	done
}
# per_run EXPR NAME...: EXPR (awk, $1.. the NAMEs' times in one round) for
# each round; the median of them.
per_run() {
	local expr=$1 i vals=() rows
	shift
	# one line per round, the NAMEs' times side by side
	rows=$(for k in "$@"; do echo "${RAW[$k]}"; done |
		awk '{ for (i = 1; i <= NF; i++) v[i] = v[i] (NR > 1 ? " " : "") $i; if (NF > n) n = NF }
		     END { for (i = 1; i <= n; i++) print v[i] }')
	while read -r line; do
		vals+=("$(echo "$line" | awk "{ printf \"%.6f\", $expr }")")
	done <<<"$rows"
	median "${vals[@]}"
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

# The ceilings' input: the same used data as a stream (partclone's, read
# from the same disk), compressed at the same level with as many threads as
# imager uses, written and synced; the image decompressed; the used bytes
# written durably, through the page cache and direct.
partclone.extfs -q -L "$WORK/partclone.log" -c -s "$PART" -o "$WORK/partclone.raw" 2>/dev/null
ceil_c() { zstd -q -3 -T"$NPROC" -f "$WORK/partclone.raw" -o "$WORK/ceiling.zst"; }
ceil_d() { zstd -q -dc "$WORK/partclone.zst" >/dev/null; }
ceil_w() { dd if=/dev/zero of="$WORK/floor" bs=4M count=$((USED / 4194304)) conv=fsync status=none; }
ceil_wd() { dd if=/dev/zero of="$WORK/floor" bs=4M count=$((USED / 4194304)) oflag=direct conv=fsync status=none; }
# Both at once, as a restore must: the image decompressed straight into a
# durable write (dd drops O_DIRECT for a short last block).
ceil_dw() {
	zstd -q -dc "$WORK/partclone.zst" |
		dd of="$WORK/floor" bs=4M iflag=fullblock oflag=direct conv=fsync status=none
}
CLEAN=([imager_save]=$WORK/image [pc_save]=$WORK/partclone.zst [ceil_c]=$WORK/ceiling.zst
	[imager_restore]=$WORK/imager-target.img [pc_restore]=$WORK/partclone-target.img
	[ceil_d]=$WORK/none [ceil_w]=$WORK/floor [ceil_wd]=$WORK/floor [ceil_dw]=$WORK/floor
	[save8]=$WORK/image8 [restore8]=$WORK/imager-target8.img)
SAVES=(imager_save ceil_c pc_save)
RESTORES=(imager_restore ceil_wd ceil_d ceil_w ceil_dw pc_restore)
if [ "$GROW" != 0 ]; then
	# The same files on a 64 GiB disk, in the same rounds.
	[ -f "$DISK8" ] || build_disk "$DISK8" 64G
	input "$DISK8" "$WORK/part8.img"
	PART8=$INPUT_PART
	save8() { TIMED imager "$IMAGER" save "$PART8" "$WORK/image8" --level 3 --no-progress >"$WORK/imager-save8.log"; }
	restore8() { TIMED imager "$IMAGER" restore "$WORK/image8" "$WORK/imager-target8.img" --no-progress >"$WORK/imager-restore8.log"; }
	SAVES=(save8 "${SAVES[@]}")
	RESTORES=(restore8 "${RESTORES[@]}")
fi

echo "saving, rounds of: ${SAVES[*]}"
side_by_side "${SAVES[@]}"
echo "restoring, rounds of: ${RESTORES[*]}"
side_by_side "${RESTORES[@]}"

echo "checking the restores..."
e2fsck -fn "$WORK/partclone-target.img" >/dev/null 2>&1 || echo "WARNING: the partclone restore is not clean"
e2fsck -fn "$WORK/imager-target.img" >/dev/null 2>&1 || echo "WARNING: the imager restore is not clean (e2fsck -fn)"
# Warm, as zstd's own benchmark is: in each round the source is read into
# the page cache first, then imager saves it (and syncs the image), and
# `zstd -b3 -T$NPROC` compresses the same used data in memory (its
# compression speed, no I/O at all: the compressor's ceiling on this CPU).
echo "saving warm, rounds of: imager_save_warm, zstd -b"
WARM=() ZBS=()
for ((i = 0; i < RUNS; i++)); do
	cat "$PART" "$WORK/partclone.raw" >/dev/null
	rm -rf "$WORK/image-warm"
	t0=$(now)
	"$IMAGER" save "$PART" "$WORK/image-warm" --level 3 --no-progress >/dev/null
	sync
	t1=$(now)
	WARM+=("$(calc "$t1 - $t0")")
	# (its last line: "... (x4.807),  574.7 MB/s, 1764.1 MB/s", compression first)
	ZBS+=("$(zstd -b3 -T"$NPROC" -i1 "$WORK/partclone.raw" 2>&1 | tr '\r' '\n' | grep 'MB/s' | tail -n 1 |
		grep -o '[0-9.]* MB/s' | head -n 1 | cut -d' ' -f1)")
done
rm -rf "$WORK/image-warm"
RAW[imager_save_warm]="${WARM[*]}"
# zstd -b's speed as the seconds it would take for the used data
RAW[zstd_b]=$(for z in "${ZBS[@]}"; do calc "$USED / 1000000 / $z"; echo; done | tr '\n' ' ')
for k in imager_save_warm zstd_b; do
	# shellcheck disable=SC2086 # a list of numbers
	WALL[$k]=$(median ${RAW[$k]})
	# shellcheck disable=SC2086
	RUNLIST[$k]=$(printf '%.2f ' ${RAW[$k]})
done
rm -f "$WORK/partclone.raw" "$WORK/ceiling.zst" "$WORK/floor"
if [ "$GROW" != 0 ]; then
	e2fsck -fn "$WORK/imager-target8.img" >/dev/null 2>&1 || echo "WARNING: the 64 GiB restore is not clean (e2fsck -fn)"
	B8=$(jq '.partitions[0].block_count' "$WORK/image8/manifest.json" 2>/dev/null || echo 0)
	rm -rf "$WORK/image8" "$WORK/imager-target8.img" "$WORK/part8.img"
fi

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
printf '%-34s %8.2f %10.0f\n' "imager save --level 3, warm" "${WALL[imager_save_warm]}" "$(mbs "${WALL[imager_save_warm]}")"
printf '%-34s %8.2f %10.0f  (%s)\n' "ceiling: zstd -b3 -T$NPROC, in memory" "${WALL[zstd_b]}" "$(mbs "${WALL[zstd_b]}")" "compress, warm"
printf '%-34s %8.2f %10.0f  (%s)\n' "ceiling: zstd -d to /dev/null" "${WALL[ceil_d]}" "$(mbs "${WALL[ceil_d]}")" "decompress"
printf '%-34s %8.2f %10.0f  (%s)\n' "floor: dd of the used bytes, fsync" "${WALL[ceil_w]}" "$(mbs "${WALL[ceil_w]}")" "durable write"
printf '%-34s %8.2f %10.0f  (%s)\n' "floor: dd of the used bytes, direct" "${WALL[ceil_wd]}" "$(mbs "${WALL[ceil_wd]}")" "durable write"
printf '%-34s %8.2f %10.0f  (%s)\n' "both: zstd -d | dd direct, fsync" "${WALL[ceil_dw]}" "$(mbs "${WALL[ceil_dw]}")" "decompress + durable write"
if [ "$RUNS" -gt 1 ]; then
	echo "every run (s), by round:"
	for n in "${SAVES[@]}" imager_save_warm zstd_b "${RESTORES[@]}"; do
		printf '  %-16s %s\n' "$n" "${RUNLIST[$n]}"
	done
fi
echo

verdict() { # VALUE TARGET: "ok" when VALUE <= TARGET
	if awk "BEGIN { exit !($1 <= $2) }"; then echo "ok"; else echo "MISSED"; fi
}
# Ratios: the median of each round's ratio.
rs=$(per_run '$1 / $2' imager_save pc_save)
rz=$(calc "$IMG_SIZE / $PC_SIZE")
rr=$(per_run '$1 / $2' imager_restore pc_restore)
mem=$(calc "${MEM[imager_save]} / 1024")
memr=$(calc "${MEM[imager_restore]} / 1024")
memt=$(calc "100 + $BITMAP_MIB")
atleast() { # VALUE TARGET: "ok" when VALUE >= TARGET
	if awk "BEGIN { exit !($1 >= $2) }"; then echo "ok"; else echo "MISSED"; fi
}
# Shares of the ceilings: imager's used-data speed over the ceiling's; for
# restore the ceiling is the slower of decompression and the faster write.
sc=$(per_run '100 * $1 / $2' ceil_c imager_save)
sw=$(per_run '100 * $1 / $2' zstd_b imager_save_warm)
rc=$(per_run '100 * ($1 > ($2 < $3 ? $2 : $3) ? $1 : ($2 < $3 ? $2 : $3)) / $4' ceil_d ceil_w ceil_wd imager_restore)
rb=$(per_run '100 * $1 / $2' ceil_dw imager_restore)
echo "imager / partclone (the median of the rounds' ratios):"
printf '  save time     %5.2f  (target <= 0.50) %s\n' "$rs" "$(verdict "$rs" 0.5)"
printf '  image size    %5.3f  (target <= 1.02) %s\n' "$rz" "$(verdict "$rz" 1.02)"
printf '  restore time  %5.2f  (target <= 0.40) %s\n' "$rr" "$(verdict "$rr" 0.4)"
echo "imager / its ceiling (the median of the rounds' shares):"
printf '  save, cold    %5.1f%% of the compress ceiling (target >= 90%%) %s\n' "$sc" "$(atleast "$sc" 90)"
printf '  save, warm    %5.1f%% of zstd -b in memory (target >= 90%%) %s\n' "$sw" "$(atleast "$sw" 90)"
printf '  restore       %5.1f%% of min(decompress, durable write) (target >= 90%%) %s\n' "$rc" "$(atleast "$rc" 90)"
printf '  restore       %5.1f%% of zstd -d | dd, both at once (no target: shown because here the\n' "$rb"
printf '                writes take the CPUs the decompression needs, so the two do not overlap)\n'
printf '  imager peak memory: save %.1f MiB, restore %.1f MiB (target < 100 MiB + bitmap %.2f MiB) %s\n' \
	"$mem" "$memr" "$BITMAP_MIB" "$(verdict "$(calc "($mem > $memr) ? $mem : $memr")" "$memt")"

# ---- growth: the same files on a disk eight times as large ----
if [ "$GROW" != 0 ]; then
	echo
	echo "growth (the same files on a 64 GiB disk; the median of the rounds' ratios):"
	B8_MIB=$(calc "$B8 / 8 / 1048576")
	g1=$(per_run '$1 / $2' save8 imager_save)
	g2=$(per_run '$1 / $2' restore8 imager_restore)
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

# ---- a VM off VMware: imager p2v guest.ova against virt-v2v -i ova -o libvirt ----
if part v2v; then
echo
echo "an OVA onto libvirt (tests/bench/bench-p2v.sh, BENCH_P2V_INPUT=ova):"
IMAGER=$IMAGER BENCH_WORK=$WORK BENCH_P2V_INPUT=ova bash "$ROOT/tests/bench/bench-p2v.sh"
fi

# ---- other filesystems: NTFS, XFS, btrfs, LVM+XFS against partclone + zstd ----
if part fs; then
echo
echo "other filesystems (tests/bench/bench-fs.sh):"
IMAGER=$IMAGER BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-fs.sh"
fi

# ---- an image opened without a restore: imager serve, p2v --instant ----
if part open; then
[ -f "$DISK" ] || build_disk
echo
echo "an image opened without a restore (tests/bench/bench-open.sh):"
IMAGER=$IMAGER DISK=$DISK BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-open.sh"
fi

# ---- fleets: a migrate plan against p2v jobs in a row; multicast ----
if part fleet; then
echo
echo "fleets (tests/bench/bench-fleet.sh):"
IMAGER=$IMAGER BENCH_WORK=$WORK bash "$ROOT/tests/bench/bench-fleet.sh"
fi
