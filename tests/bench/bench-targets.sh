#!/bin/bash
# Virtual disk targets: imager against the usual route to a qcow2 VM disk.
#
#   (a) restore to qcow2
#       imager restore IMG_DIR A.qcow2 --format qcow2 --preallocation metadata
#       vs  a fresh raw file of the disk's size with the source's table (the
#           bytes before the partition and after it, copied from PART_SRC),
#           zstd -dc PC_IMG | partclone.extfs -r -s - -O R.raw -E PART_OFFSET,
#           qemu-img convert -O qcow2 -o preallocation=metadata R.raw R.qcow2
#   (b) clone to qcow2
#       imager clone PART_SRC C.qcow2 --preallocation metadata
#       vs  qemu-img convert -O qcow2 -o preallocation=metadata PART_SRC Q.qcow2
#
# Each timed run starts with cold caches when allowed (else warm for both)
# and ends with a sync inside the timing (imager fsyncs its target; the
# route's tools may not).  Results are checked with qemu-img compare: (a)'s
# two qcow2 files must be identical, (b)'s too, and (b)'s must equal PART_SRC.
# Targets: (a) imager / route <= 0.25, (b) imager / qemu-img <= 1.0.
#
# Environment (as set by bench.sh):
#   IMAGER       the binary (default build/imager)
#   PART_SRC     the source disk: a raw file with an ext4 partition
#   IMG_DIR      an imager image folder saved from it (the whole disk, or
#                only the partition: then the targets are partition-sized)
#   PC_IMG       partclone.extfs -c of the same partition, piped to zstd
#   PART_OFFSET  the partition's offset in PART_SRC, in bytes
#   PART_SIZE    the partition's size, in bytes
#   WORK         scratch folder (emptied of this script's files at the end)
#   BENCH_RUNS   runs of each measurement, interleaved, the median is shown
#                (default 1)
# Without PART_SRC, a sample is built in WORK (default a temporary folder):
# a GPT disk of BENCH_TARGETS_DISK (default 1G) whose ext4 holds
# BENCH_TARGETS_MIB (default 300) MiB of files from /usr/lib, saved with
# imager (the whole disk) and with partclone (the partition).
# Exit status: 0 when both results are correct (targets missed are
# reported, not fatal), 1 when a result is wrong or a tool failed.
set -euo pipefail
export LC_ALL=C

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
RUNS=${BENCH_RUNS:-1}

die() { echo "bench-targets: $*" >&2; exit 1; }
for c in "$IMAGER" partclone.extfs zstd qemu-img jq sfdisk; do
	command -v "$c" >/dev/null || [ -x "$c" ] || die "needs $c (make deps)"
done

OWN_WORK=0
if [ -z "${WORK:-}" ]; then
	WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/bench-targets.XXXXXX")
	OWN_WORK=1
fi
mkdir -p "$WORK"
BT=$WORK/targets
rm -rf "$BT"
mkdir -p "$BT"
SAMPLE=0
cleanup() {
	rm -rf "$BT"
	[ "$SAMPLE" = 0 ] || rm -rf "$WORK"/sample-*
	[ "$OWN_WORK" = 0 ] || rm -rf "$WORK"
}
trap cleanup EXIT

# ---- a sample, when bench.sh did not give one ----
build_sample() {
	local mib=${BENCH_TARGETS_MIB:-300} stage=$WORK/sample-stage list=$WORK/sample-files
	PART_SRC=$WORK/sample-disk.img
	local dsize=${BENCH_TARGETS_DISK:-1G}
	echo "building a sample: $dsize GPT disk, ext4 with $mib MiB of /usr/lib files"
	rm -rf "$stage" "$PART_SRC"
	mkdir -p "$stage"
	find /usr/lib -xdev -type f -readable -printf '%s\t%P\n' 2>/dev/null | sort -t$'\t' -k2 >"$list.all" || true
	awk -F'\t' -v cap=$((mib * 1024 * 1024)) '{ t += $1; if (t > cap) exit; print $2 }' "$list.all" >"$list"
	rm -f "$list.all"
	(cd /usr/lib && xargs -d '\n' cp -a --parents -t "$stage" <"$list")
	truncate -s "$dsize" "$PART_SRC"
	printf 'label: gpt\nstart=2048, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"\n' | sfdisk -q "$PART_SRC"
	PART_OFFSET=$(sfdisk --json "$PART_SRC" | jq '.partitiontable.partitions[0].start * 512')
	PART_SIZE=$(sfdisk --json "$PART_SRC" | jq '.partitiontable.partitions[0].size * 512')
	mke2fs -q -F -t ext4 -d "$stage" -E offset="$PART_OFFSET" -L sample "$PART_SRC" $((PART_SIZE / 1024))k
	rm -rf "$stage" "$list"
	IMG_DIR=$WORK/sample-image
	rm -rf "$IMG_DIR"
	"$IMAGER" -q save "$PART_SRC" "$IMG_DIR" --no-progress >/dev/null
	PC_IMG=$WORK/sample-partclone.zst
	dd if="$PART_SRC" of="$WORK/sample-part.img" bs=4M skip="$PART_OFFSET" count="$PART_SIZE" \
		iflag=skip_bytes,count_bytes conv=sparse status=none
	partclone.extfs -q -c -s "$WORK/sample-part.img" -o - 2>/dev/null | zstd -q -T0 -3 >"$PC_IMG"
	rm -f "$WORK/sample-part.img"
}
if [ -z "${PART_SRC:-}" ]; then
	SAMPLE=1
	build_sample
fi
for v in PART_SRC IMG_DIR PC_IMG PART_OFFSET PART_SIZE; do
	[ -n "${!v:-}" ] || die "$v is not set"
done
[ -f "$PART_SRC" ] || die "PART_SRC $PART_SRC is not a file"
[ -f "$IMG_DIR/manifest.json" ] || die "IMG_DIR $IMG_DIR has no manifest"
[ -f "$PC_IMG" ] || die "PC_IMG $PC_IMG is missing"

# What the image holds decides what both routes build: a whole disk (with
# its table, the partition at PART_OFFSET) or the partition alone.
if jq -e '.table.type == "none" or .table.type == null' "$IMG_DIR/manifest.json" >/dev/null; then
	KIND=partition
	DISK_SIZE=$(jq '.disk.size' "$IMG_DIR/manifest.json")
	OFF=0
	[ "$DISK_SIZE" = "$PART_SIZE" ] || die "the image holds $DISK_SIZE bytes, the partition $PART_SIZE"
else
	KIND=disk
	DISK_SIZE=$(jq '.disk.size' "$IMG_DIR/manifest.json")
	OFF=$PART_OFFSET
	[ "$DISK_SIZE" = "$(stat -c %s "$PART_SRC")" ] || die "the image holds a disk of $DISK_SIZE bytes, PART_SRC has $(stat -c %s "$PART_SRC")"
fi

if [ -w /proc/sys/vm/drop_caches ] && (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
	CACHES="dropped before each run"
	drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
else
	CACHES="NOT dropped (not allowed): warm for both, after a warm-up read"
	drop() { :; }
	cat "$PART_SRC" "$PC_IMG" >/dev/null
	cat "$IMG_DIR"/* >/dev/null
fi

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
declare -A WALL RATIO
# once CLEAN COMMAND...: the wall time of COMMAND + sync, cold caches.
once() {
	local clean=$1 t0 t1
	shift
	# shellcheck disable=SC2086 # CLEAN lists paths
	rm -rf $clean
	drop
	t0=$(now)
	"$@"
	sync
	t1=$(now)
	calc "$t1 - $t0"
}
# pair NAME1 CLEAN1 FN1 NAME2 CLEAN2 FN2: RUNS runs of each, interleaved in
# alternating order (so that neither always runs first), the medians into
# WALL[NAME1] and WALL[NAME2], and the median of the rounds' ratios
# NAME1/NAME2 into RATIO[NAME1] (both sides of a round see the machine in
# the same state; its disk speed drifts).
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
pair() {
	local i a=() b=()
	for ((i = 0; i < RUNS; i++)); do
		if ((i % 2 == 0)); then
			a+=("$(once "$2" "$3")")
			b+=("$(once "$5" "$6")")
		else
			b+=("$(once "$5" "$6")")
			a+=("$(once "$2" "$3")")
		fi
	done
	WALL[$1]=$(median "${a[@]}")
	WALL[$4]=$(median "${b[@]}")
	local q=()
	for ((i = 0; i < RUNS; i++)); do q+=("$(calc "${a[i]} / ${b[i]}")"); done
	RATIO[$1]=$(median "${q[@]}")
	printf '  %-28s %8.2f s   (runs: %s)\n' "$1" "${WALL[$1]}" "$(printf '%.2f ' "${a[@]}")"
	printf '  %-28s %8.2f s   (runs: %s)\n' "$4" "${WALL[$4]}" "$(printf '%.2f ' "${b[@]}")"
}

# ---- (a) restore to qcow2 ----
imager_restore_qcow2() {
	"$IMAGER" restore "$IMG_DIR" "$BT/A.qcow2" --format qcow2 --preallocation metadata --no-progress >"$BT/a.log"
}
route_restore_qcow2() {
	local end=$((OFF + PART_SIZE))
	truncate -s "$DISK_SIZE" "$BT/R.raw"
	if [ "$KIND" = disk ]; then
		# The table and whatever precedes the partition (boot code, gap),
		# and what follows it (a GPT backup), from the source disk.
		dd if="$PART_SRC" of="$BT/R.raw" bs=1M count="$OFF" iflag=count_bytes \
			conv=notrunc,sparse status=none
		[ "$end" -ge "$DISK_SIZE" ] ||
			dd if="$PART_SRC" of="$BT/R.raw" bs=1M skip="$end" seek="$end" iflag=skip_bytes \
				oflag=seek_bytes conv=notrunc,sparse status=none
	fi
	zstd -q -dc "$PC_IMG" |
		partclone.extfs -q -L "$BT/partclone.log" -r -s - -O "$BT/R.raw" -E "$OFF" 2>"$BT/partclone.err"
	qemu-img convert -O qcow2 -o preallocation=metadata "$BT/R.raw" "$BT/R.qcow2"
}
# ---- (b) clone to qcow2 ----
imager_clone_qcow2() {
	"$IMAGER" clone "$PART_SRC" "$BT/C.qcow2" --preallocation metadata --no-progress >"$BT/b.log"
}
qemu_convert_qcow2() {
	qemu-img convert -O qcow2 -o preallocation=metadata "$PART_SRC" "$BT/Q.qcow2"
}

USED=$(jq '[.partitions[] | .used_blocks * .block_size] | add' "$IMG_DIR/manifest.json")
echo "source: $PART_SRC ($((DISK_SIZE / 1000000)) MB $KIND image; $((USED / 1000000)) MB in use)"
echo "page caches: $CACHES; runs: $RUNS (median)"
echo "(a) restore to qcow2 (preallocation metadata):"
pair imager_restore "$BT/A.qcow2" imager_restore_qcow2 route_restore "$BT/R.raw $BT/R.qcow2" route_restore_qcow2
echo "(b) clone to qcow2 (preallocation metadata):"
pair imager_clone "$BT/C.qcow2" imager_clone_qcow2 qemu_convert "$BT/Q.qcow2" qemu_convert_qcow2

echo "checking..."
bad=0
check() { # WHAT COMMAND...
	local what=$1
	shift
	if "$@" >"$BT/check.log" 2>&1; then
		echo "  ok: $what"
	else
		echo "  WRONG: $what: $(tail -n 2 "$BT/check.log" | tr '\n' ' ')"
		bad=1
	fi
}
check "A.qcow2 (imager restore) = R.qcow2 (partclone + qemu-img)" qemu-img compare "$BT/A.qcow2" "$BT/R.qcow2"
check "C.qcow2 (imager clone) = Q.qcow2 (qemu-img convert)" qemu-img compare "$BT/C.qcow2" "$BT/Q.qcow2"
check "C.qcow2 = the source disk" qemu-img compare "$PART_SRC" "$BT/C.qcow2"
for f in A C R Q; do
	check "qemu-img check $f.qcow2" qemu-img check "$BT/$f.qcow2"
done

ra=${RATIO[imager_restore]}
rb=${RATIO[imager_clone]}
verdict() { if awk "BEGIN { exit !($1 <= $2) }"; then echo ok; else echo MISSED; fi; }
echo
printf '%-52s %8s\n' "" "wall s"
printf '%-52s %8.2f\n' "imager restore -> qcow2 (+sync)" "${WALL[imager_restore]}"
printf '%-52s %8.2f\n' "zstd | partclone -r -> raw, qemu-img convert (+sync)" "${WALL[route_restore]}"
printf '%-52s %8.2f\n' "imager clone -> qcow2 (+sync)" "${WALL[imager_clone]}"
printf '%-52s %8.2f\n' "qemu-img convert -> qcow2 (+sync)" "${WALL[qemu_convert]}"
echo
echo "imager / usual route (the median of the rounds' ratios):"
printf '  restore to qcow2  %5.2f  (target <= 0.25) %s\n' "$ra" "$(verdict "$ra" 0.25)"
printf '  clone to qcow2    %5.2f  (target <= 0.80, imager / qemu-img convert) %s\n' "$rb" "$(verdict "$rb" 0.8)"
printf '  on disk: A.qcow2 %s MiB, R.qcow2 %s MiB, C.qcow2 %s MiB, Q.qcow2 %s MiB\n' \
	$(($(du -sB1 "$BT/A.qcow2" | cut -f1) / 1048576)) $(($(du -sB1 "$BT/R.qcow2" | cut -f1) / 1048576)) \
	$(($(du -sB1 "$BT/C.qcow2" | cut -f1) / 1048576)) $(($(du -sB1 "$BT/Q.qcow2" | cut -f1) / 1048576))
[ "$bad" = 0 ] || { echo "bench-targets: a result is WRONG (see above)"; exit 1; }
