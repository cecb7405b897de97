# Helpers for the virtual-disk suites (targets, sources, clone, grow): qcow2
# files checked by qemu-img, NBD exports served by nbdkit, and checks on
# grown disks.  Sourced after common.sh and disks.sh:
#   . "$TESTS_LIB/common.sh"
#   . "$TESTS_LIB/disks.sh"
#   . "$TESTS_LIB/vdisk.sh"

# ---- qemu-img ----
# qinfo FILE JQ: a field of `qemu-img info --output=json`.
qinfo() {
	qemu-img info --output=json "$1" | jq -r "$2"
}
# qcow2_check_clean FILE: `qemu-img check` finds no error, no corruption and
# no leaked cluster (its exit status is 0 only then).
qcow2_check_clean() {
	local rc=0
	qemu-img check --output=json "$1" >"$T/qcheck.json" 2>"$T/qcheck.err" || rc=$?
	if [ "$rc" != 0 ]; then
		qemu-img check "$1" 2>&1 | head -n 40
		fail "qemu-img check $1: exit $rc"
	fi
	json_is "$T/qcheck.json" '(."check-errors" // 0) == 0 and (.corruptions // 0) == 0 and (.leaks // 0) == 0'
	note "qemu-img check $(basename "$1"): clean ($(jq -r '."allocated-clusters"' "$T/qcheck.json") of $(jq -r '."total-clusters"' "$T/qcheck.json") clusters allocated)"
}
# same_image A B: the same virtual size and identical guest contents
# (qemu-img compare, which reads either format).
same_image() {
	local out sa sb
	sa=$(qinfo "$1" '."virtual-size"') sb=$(qinfo "$2" '."virtual-size"')
	assert_eq "$sb" "$sa" "virtual size of $(basename "$2") against $(basename "$1")"
	out=$(qemu-img compare "$1" "$2" 2>&1) || { echo "$out"; fail "qemu-img compare: $(basename "$1") and $(basename "$2") differ"; }
	note "qemu-img compare: $(basename "$1") = $(basename "$2")"
}
# assert_qcow2_v3 FILE SIZE [CLUSTER]: format qcow2, compat 1.1, this
# virtual size and cluster size, not marked corrupt or dirty.
assert_qcow2_v3() {
	local f=$1 size=$2 cl=${3:-65536}
	qemu-img info --output=json "$f" >"$T/qinfo.json" || fail "qemu-img info $f"
	json_is "$T/qinfo.json" ".format == \"qcow2\" and .\"virtual-size\" == $size and .\"cluster-size\" == $cl"
	json_is "$T/qinfo.json" '."format-specific".data.compat == "1.1" and ."format-specific".data.corrupt == false'
	json_is "$T/qinfo.json" '(."dirty-flag" // false) == false'
	note "$(basename "$f"): qcow2, compat 1.1, virtual size $size, cluster size $cl"
}
# assert_raw FILE SIZE: qemu-img sees a raw file of SIZE bytes.
assert_raw() {
	qemu-img info --output=json "$1" >"$T/qinfo.json" || fail "qemu-img info $1"
	json_is "$T/qinfo.json" ".format == \"raw\" and .\"virtual-size\" == $2"
	note "$(basename "$1"): raw, $2 bytes"
}
# qcow2_map FILE: `qemu-img map --output=json` into $T/map.json.
qcow2_map() {
	qemu-img map --output=json "$1" >"$T/map.json" || fail "qemu-img map $1"
}
# assert_map_fully_allocated FILE SIZE: every guest byte maps to a host
# cluster (data: true, an offset), the entries cover 0..SIZE without a gap,
# and host offsets grow with guest offsets (the clusters are laid out in the
# guest's order, none shared).
assert_map_fully_allocated() {
	qcow2_map "$1"
	json_is "$T/map.json" '[.[] | .data == true and .present == true and (.offset != null)] | all'
	json_is "$T/map.json" ".[0].start == 0 and (.[-1].start + .[-1].length) == $2"
	json_is "$T/map.json" '[range(1; length) as $i | .[$i].start == .[$i - 1].start + .[$i - 1].length] | all'
	json_is "$T/map.json" '[range(1; length) as $i | .[$i].offset >= .[$i - 1].offset + .[$i - 1].length] | all'
	note "qemu-img map $(basename "$1"): every cluster of $2 bytes allocated, host offsets in guest order ($(jq length "$T/map.json") extents)"
}
# assert_map_in_order FILE [IMAGE_DIR]: the allocated data clusters are
# laid out in the guest's order.  With IMAGE_DIR, the clusters that restore
# writes last on purpose (the boot areas of the manifest, and the first
# 64 KiB of every partition: an interrupted restore must not look complete)
# are exempt from the order but must come after every other data cluster.
assert_map_in_order() {
	local f=$1 dir=${2:-} cl deferred='[]'
	qcow2_map "$f"
	cl=$(qinfo "$f" '."cluster-size"')
	[ -n "$dir" ] && deferred=$(jq -c '[(.boot_areas[] | [.offset, .offset + .length]),
		(.partitions[] | [.start, .start + 65536])]' "$dir/manifest.json")
	# One [guest, host, deferred] triple per data cluster.
	jq -c --argjson cl "$cl" --argjson d "$deferred" '[.[] | select(.data == true) as $e |
		range(0; $e.length; $cl) as $o | ($e.start + $o) as $g |
		[$g, $e.offset + $o, ([$d[] | $g < .[1] and $g + $cl > .[0]] | any)]]' "$T/map.json" >"$T/map.clusters.json"
	json_is "$T/map.clusters.json" '[.[] | select(.[2] | not)] as $n |
		[range(1; $n | length) as $i | $n[$i][1] > $n[$i - 1][1]] | all'
	json_is "$T/map.clusters.json" '([.[] | select(.[2] | not) | .[1]] | max // -1) as $m |
		[.[] | select(.[2]) | .[1] > $m] | all'
	note "qemu-img map $(basename "$f"): $(jq length "$T/map.clusters.json") data clusters in guest order ($(jq '[.[] | select(.[2])] | length' "$T/map.clusters.json") written last, after them)"
}
# to_raw QCOW2 RAW: a raw copy, for the tools that only read raw files.
to_raw() {
	rm -f "$2"
	qemu-img convert -O raw "$1" "$2" || fail "qemu-img convert $1 to raw"
}

# ---- qcow2 headers (big-endian fields) ----
# be_field FILE OFFSET NBYTES: an unsigned big-endian integer.
be_field() {
	local hex
	hex=$(od -An -tx1 -j "$2" -N "$3" "$1" | tr -d ' \n')
	[ ${#hex} = $(($3 * 2)) ] || fail "be_field: $1 has no $3 bytes at $2"
	echo $((16#$hex))
}
# patch_be FILE OFFSET NBYTES VALUE: write VALUE as a big-endian integer.
patch_be() {
	local f=$1 off=$2 n=$3 v=$4 i esc bytes=""
	for ((i = n - 1; i >= 0; i--)); do
		printf -v esc '\\x%02x' $(((v >> (8 * i)) & 255))
		bytes+=$esc
	done
	# shellcheck disable=SC2059
	printf "$bytes" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none || fail "patch $f at $off"
}

# ---- allocation ----
# assert_sparse FILE WHAT: takes well under half its virtual size (a raw
# file's length, a qcow2's guest size) on disk.
assert_sparse() {
	local size used
	size=$(qinfo "$1" '."virtual-size"') used=$(disk_usage "$1")
	[ "$used" -lt $((size / 2)) ] || fail "$2: $used bytes on disk for $size bytes (expected sparse)"
	note "$2: $((used / MiB)) MiB on disk for $((size / MiB)) MiB (sparse)"
}
# assert_allocated FILE MIN WHAT: at least MIN bytes on disk.
assert_allocated() {
	local used
	used=$(disk_usage "$1")
	[ "$used" -ge "$2" ] || fail "$3: only $used bytes on disk, expected at least $2 (preallocated)"
	note "$3: $((used / MiB)) MiB on disk, at least $(($2 / MiB)) MiB (preallocated)"
}

# ---- NBD (nbdkit) ----
# nbd_uri SOCKET
nbd_uri() { echo "nbd+unix:///?socket=$1"; }
# nbd_alive SOCKET: a server answers on the socket.  Killed servers may stay
# zombies here, so the process table is not trusted: the socket is.
nbd_alive() {
	if command -v nbdinfo >/dev/null 2>&1; then
		nbdinfo --size "$(nbd_uri "$1")" >/dev/null 2>&1
	else
		qemu-img info "$(nbd_uri "$1")" >/dev/null 2>&1
	fi
}
# nbd_start SOCKET PIDFILE NBDKIT_ARGS...: start nbdkit on a unix socket
# (it forks into the background and writes its pid file), wait until it
# answers, and stop it at exit.
nbd_start() {
	local sock=$1 pidfile=$2 i
	shift 2
	rm -f "$sock" "$pidfile"
	nbdkit --unix "$sock" --pidfile "$pidfile" "$@" || fail "nbdkit $*"
	on_exit "nbd_stop $sock $pidfile"
	for ((i = 0; i < 100; i++)); do
		[ -S "$sock" ] && nbd_alive "$sock" && { note "nbdkit up on $sock (pid $(cat "$pidfile"))"; return 0; }
		sleep 0.1
	done
	fail "nbdkit did not answer on $sock"
}
# nbd_stop SOCKET PIDFILE [SIGNAL]: kill the server, wait until the socket
# no longer answers.
nbd_stop() {
	local sock=$1 pidfile=$2 sig=${3:-TERM} i pid
	[ -f "$pidfile" ] || return 0
	pid=$(cat "$pidfile")
	kill_named "$pid" nbdkit "$sig"   # (not a stale PID: common.sh)
	for ((i = 0; i < 50; i++)); do
		nbd_alive "$sock" || break
		sleep 0.1
	done
	rm -f "$pidfile"
}

# ---- sample disk: GPT whose last partition is an ext4 ----
# Like build_gpt_disk, but what grows at the end is a root filesystem:
#   1 BIOS boot  2 FAT32  3 ext4 (4 KiB blocks) up to the end
build_gpt_ext_last() {
	local disk=$1 fs=$T/fs n
	ensure_trees
	mkdir -p "$fs"
	rm -f "$disk"
	truncate -s 160M "$disk"
	sfdisk -q "$disk" <<-EOF || fail "sfdisk $disk"
		label: gpt
		label-id: $GPT_LABEL_ID
		start=2048, size=1MiB, type=$GPT_BIOS_BOOT, uuid=5A0B1C2D-0000-4000-8000-000000000031, name="bios boot"
		size=40MiB, type=$GPT_BASIC_DATA, uuid=5A0B1C2D-0000-4000-8000-000000000032, name="efi"
		size=+, type=$GPT_LINUX, uuid=5A0B1C2D-0000-4000-8000-000000000033, name="root"
	EOF
	mk_fat "$fs/p2" 40 32 "$T/fattree" "$FAT32_ID" FAT32DATA -s 1
	mk_ext "$fs/p3" $(($(part_size "$disk" 3) / MiB)) ext4 "$T/tree" "$UUID_EXT4" root -b 4096
	for n in 2 3; do
		put_fs "$fs/p$n" "$disk" "$(part_start "$disk" $n)"
	done
	random_bytes "$disk" "$(part_start "$disk" 1)" "$(part_size "$disk" 1)"
	random_bytes "$disk" 0 440
	sfdisk --verify "$disk" >/dev/null || fail "the new GPT on $disk does not verify"
	rm -rf "$fs"
}

# ---- grown disks ----
# part_end DISK N: the byte after partition N.
part_end() { echo $(($(part_start "$1" "$2") + $(part_size "$1" "$2"))); }
# verify_table DISK: sfdisk --verify finds nothing wrong.
verify_table() {
	local out
	out=$(sfdisk --verify "$1" 2>&1) || { echo "$out"; fail "sfdisk --verify $1"; }
	grep -q 'No errors detected' <<<"$out" || { echo "$out"; fail "sfdisk --verify $1 does not say: No errors detected"; }
	if echo "$out" | grep -v 'No errors detected' | grep -qiE 'error|overlap|exceed|not aligned|invalid|wrong'; then
		echo "$out"
		fail "sfdisk --verify $1 reports a problem"
	fi
	note "sfdisk --verify $(basename "$1"): no errors"
}
# check_grown_ext DISK N TREE UUID: the ext filesystem of partition N is
# clean, fills its partition (Block count x Block size == partition size,
# to the block), keeps its UUID, and holds TREE.
check_grown_ext() {
	local disk=$1 n=$2 tree=$3 uuid=$4 psize count bs got
	extract_part "$disk" "$n" "$T/grown.fs"
	psize=$(file_size "$T/grown.fs")
	count=$(dumpe2fs -h "$T/grown.fs" 2>/dev/null | sed -n 's/^Block count: *//p')
	bs=$(dumpe2fs -h "$T/grown.fs" 2>/dev/null | sed -n 's/^Block size: *//p')
	[ -n "$count" ] && [ -n "$bs" ] || fail "partition $n: no ext superblock"
	assert_eq "$count" $((psize / bs)) "partition $n: ext block count (partition of $psize bytes, $bs-byte blocks)"
	got=$(blkid -p -o value -s UUID "$T/grown.fs")
	assert_eq "$got" "$uuid" "partition $n: filesystem UUID"
	CHECK_LABEL="partition $n (grown to $((psize / MiB)) MiB, $count blocks)" check_ext "$T/grown.fs" "$tree"
	rm -f "$T/grown.fs"
}
# same_part_prefix SRC N DST M LENGTH WHAT: the first LENGTH bytes of
# partition N of SRC equal those of partition M of DST (a partition that
# moved or grew but whose contents were not touched).
same_part_prefix() {
	same_bytes_at "$1" "$(part_start "$1" "$2")" "$3" "$(part_start "$3" "$4")" "$5" "$6"
}

# ---- damaged sources ----
# qcow2_sample QCOW2: the GPT sample disk ($T/disk.img) converted by
# qemu-img into QCOW2 (v3, 64 KiB clusters).
qcow2_sample() {
	build_gpt_disk "$T/disk.img"
	qemu-img convert -O qcow2 "$T/disk.img" "$1" || fail "qemu-img convert to $1"
	qcow2_check_clean "$1"
}
# expect_source_refused SOURCE RCS REGEX: every command reading SOURCE
# fails with an exit status in RCS ("2|3|7") and a message matching REGEX,
# and leaves nothing behind: save into a new folder (none, or no
# manifest), save into an existing empty folder (still empty), clone to a
# new raw and a new qcow2 file (not created), info (refused too).
expect_source_refused() {
	local src=$1 rcs=$2 re=$3 t
	run_imager "$rcs" save "$src" "$T/refused.image" --no-progress
	expect_message "$re"
	[ ! -e "$T/refused.image/manifest.json" ] || fail "a failed save wrote a manifest"
	[ ! -d "$T/refused.image" ] || [ -z "$(ls -A "$T/refused.image")" ] ||
		fail "a failed save left files: $(ls "$T/refused.image" | tr '\n' ' ')"
	mkdir -p "$T/empty.image"
	run_imager "$rcs" save "$src" "$T/empty.image" --no-progress
	expect_message "$re"
	[ -d "$T/empty.image" ] || fail "a failed save removed the folder it was given"
	[ -z "$(ls -A "$T/empty.image")" ] || fail "a failed save left files in the empty folder it was given: $(ls "$T/empty.image" | tr '\n' ' ')"
	rm -rf "$T/empty.image"
	for t in refused.img refused.qcow2; do
		run_imager "$rcs" clone "$src" "$T/$t" --no-progress
		expect_message "$re"
		assert_file_absent "$T/$t" "a failed clone left its new target $t"
	done
	run_imager "$rcs" clone "$src" "$T/refused-meta.qcow2" --preallocation metadata --no-progress
	assert_file_absent "$T/refused-meta.qcow2" "a failed clone left its new preallocated target"
	run_imager "$rcs" info "$src"
	expect_message "$re"
	note "refused everywhere with a clear message, nothing left behind"
}

# same_place SRC DST N: partition N did not move or change size.
same_place() {
	assert_eq "$(part_start "$2" "$3"):$(part_size "$2" "$3")" "$(part_start "$1" "$3"):$(part_size "$1" "$3")" \
		"partition $3 (start:size) on the grown disk"
}
# aligned_mib DISK N: partition N starts on a MiB boundary.
aligned_mib() {
	[ $(($(part_start "$1" "$2") % MiB)) = 0 ] || fail "partition $2 does not start on a MiB boundary"
}
# check_scaled SRC DST N...: partitions N... (in disk order) were scaled by
# one common factor, the ratio of the spans they cover (first start to last
# end) on DST and SRC: each new size is within 2 MiB of old size x factor
# (starts and sizes are rounded to 1 MiB), the first partition keeps its
# start, every start is MiB-aligned, and the order is kept.
check_scaled() {
	local src=$1 dst=$2 first last n os ns want prev_end=0
	shift 2
	first=$1 last=${!#}
	assert_eq "$(part_start "$dst" "$first")" "$(part_start "$src" "$first")" "start of the first partition"
	local ospan=$(($(part_end "$src" "$last") - $(part_start "$src" "$first")))
	local nspan=$(($(part_end "$dst" "$last") - $(part_start "$dst" "$first")))
	[ "$nspan" -gt "$ospan" ] || fail "the partitions span no more than before ($nspan <= $ospan)"
	for n in "$@"; do
		os=$(part_size "$src" "$n") ns=$(part_size "$dst" "$n")
		want=$(awk -v o="$os" -v a="$nspan" -v b="$ospan" 'BEGIN { printf "%d", o * a / b }')
		[ $((ns - want)) -le $((2 * MiB)) ] && [ $((want - ns)) -le $((2 * MiB)) ] ||
			fail "partition $n: $ns bytes, expected about $want ($os x $nspan / $ospan)"
		[ "$ns" -ge "$os" ] || fail "partition $n shrank ($os -> $ns)"
		aligned_mib "$dst" "$n"
		[ "$(part_start "$dst" "$n")" -ge "$prev_end" ] || fail "partition $n overlaps the one before it"
		prev_end=$(part_end "$dst" "$n")
		note "partition $n: $((os / MiB)) MiB -> $((ns / MiB)) MiB at $(($(part_start "$dst" "$n") / MiB)) MiB"
	done
	note "scaled by $(awk -v a="$nspan" -v b="$ospan" 'BEGIN { printf "%.3f", a / b }') (the span of the partitions)"
}
