#!/bin/bash
# A Clonezilla image restored into a preallocated qcow2: imager against
# Clonezilla's own route.  The image: ocs-sr savedisk -z9p (zstd) of the
# bench's sample disk (DISK, attached to a loop device).  Timed (page caches
# dropped before each, each followed by sync inside the timing):
#   imager   imager restore CZDIR out.qcow2 --format qcow2 --preallocation metadata
#   anchor   zstd -dc STREAM | partclone.extfs -r -s - -O part.raw, then
#            qemu-img convert -O qcow2 -o preallocation=metadata part.raw out.qcow2
# Target: imager at most 0.3x the anchor.  BENCH_RUNS runs of each
# (default 3), interleaved, medians compared.  Then the two qcow2s' ext4s
# are compared (the anchor's holds the partition alone: compared at its
# offset).
# Environment: IMAGER, DISK, WORK, BENCH_RUNS.  Needs root (loop device) and
# ocs-sr.
set -euo pipefail
BENCH_NAME=bench-clonezilla
. "$(dirname "$0")/timing.sh"
: "${IMAGER:?}" "${DISK:?}" "${WORK:?}"
command -v ocs-sr >/dev/null || { echo "  skipped: needs ocs-sr (clonezilla; make deps)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "  skipped: needs root for a loop device"; exit 0; }
RUNS=${BENCH_RUNS:-3}
mkdir -p "$WORK" "$WORK/repo"
dev=$(losetup -f --show -r "$DISK")
# (|| true: under set -e a failing command in the trap would end it before
# losetup -d, leaking the loop device on every run.)
trap 'partx -d "$dev" 2>/dev/null || true; losetup -d "$dev" || true' EXIT
partx -d "$dev" 2>/dev/null || true
partx -a "$dev"
timed ocs_sr_save ocs-sr -b -q2 -j2 -z9p -i 0 -sfsck -senc -nogui -p true -or "$WORK/repo" \
	savedisk cz "$(basename "$dev")"
partx -d "$dev" 2>/dev/null || true
CZ=$WORK/repo/cz
stream=$(ls "$CZ"/*1.ext4-ptcl-img.zst)
drop() { sync; [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches || true; }

start=$(sfdisk --json "$DISK" | jq '.partitiontable.partitions[0].start * 512')
size=$(sfdisk --json "$DISK" | jq '.partitiontable.partitions[0].size * 512')
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
imager_run() {
	rm -f "$WORK/imager.qcow2"
	drop
	timed imager_restore sh -c "'$IMAGER' restore '$CZ' '$WORK/imager.qcow2' --format qcow2 --preallocation metadata --no-progress && sync"
	I+=("${T[imager_restore]}")
}
anchor_run() {
	rm -f "$WORK/anchor.qcow2" "$WORK/part.raw"
	truncate -s "$size" "$WORK/part.raw"  # (partclone restores onto a partition-sized target)
	drop
	timed anchor_partclone sh -c "zstd -dc '$stream' | partclone.extfs -q -r -s - -O '$WORK/part.raw' && sync"
	timed anchor_convert sh -c "qemu-img convert -O qcow2 -o preallocation=metadata '$WORK/part.raw' '$WORK/anchor.qcow2' && sync"
	A+=("$(calc "${T[anchor_partclone]} + ${T[anchor_convert]}")")
}
# Runs interleaved, in alternating order (neither always first), each with
# cold caches; the medians are compared and each run's time shown.
I=() A=()
for ((k = 0; k < RUNS; k++)); do
	if ((k % 2)); then anchor_run; imager_run; else imager_run; anchor_run; fi
done
imager=$(median "${I[@]}")
anchor=$(median "${A[@]}")
same=identical
qemu-img compare -q --image-opts \
	"driver=raw,offset=$start,size=$size,file.driver=qcow2,file.file.driver=file,file.file.filename=$WORK/imager.qcow2" \
	"driver=qcow2,file.driver=file,file.filename=$WORK/anchor.qcow2" || same=DIFFERENT
echo "  the two partitions: $same"
ratio=$(calc "$imager / $anchor")
verdict=MISSED
awk "BEGIN { exit !($ratio <= 0.3) }" && verdict=ok
printf '  Clonezilla image (zstd) into a preallocated qcow2, median of %d: imager %.2f s (runs: %s), zstd | partclone -r + qemu-img convert %.2f s (runs: %s)\n' \
	"$RUNS" "$imager" "${I[*]}" "$anchor" "${A[*]}"
printf '  ratio %.2f (target <= 0.30) %s\n' "$ratio" "$verdict"
rm -rf "$WORK/repo" "$WORK"/*.qcow2 "$WORK/part.raw"
