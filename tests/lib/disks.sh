# Sample disks for the tests, built at test time by the real tools (no mount):
# sfdisk for the tables, mke2fs -d, mkfs.fat + mcopy and mkswap for the
# filesystems, each made in a file of its own and then written into its
# partition's place in the disk image with dd.  Then the checks that compare a
# restored disk with its source by the real checkers (e2fsck, fsck.fat, blkid).
# Sourced after common.sh.
#
# UUIDs, labels and table ids are fixed so that outputs are stable enough to be
# compared with expected files; file contents are random.

# ---- fixed identities ----
MBR_LABEL_ID=0x1a2b3c4d
GPT_LABEL_ID=5A0B1C2D-0000-4000-8000-000000000001
UUID_EXT4=5a0b1c2d-0000-4000-8000-0000000000e4
UUID_EXT2=5a0b1c2d-0000-4000-8000-0000000000e2
UUID_EXT3=5a0b1c2d-0000-4000-8000-0000000000e3
UUID_WHOLE=5a0b1c2d-0000-4000-8000-0000000000e0
UUID_SWAP=5a0b1c2d-0000-4000-8000-0000000000f1
SWAP_LABEL=testswap
FAT16_ID=1234AB16
FAT32_ID=1234AB32
FAT12_ID=1234AB12

GPT_BIOS_BOOT=21686148-6449-6E6F-744E-656564454649
GPT_LINUX=0FC63DAF-8483-4772-8E79-3D69D8477DE4
GPT_BASIC_DATA=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7
GPT_SWAP=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F

# ---- file trees ----
# make_tree DIR [MIB]: what a real root filesystem has: large random files
# (about MIB MiB in all), hundreds of small files in nested folders, a
# compressible text file, hard links, symbolic links (one dangling), a sparse
# file with data between holes, an empty file, an empty folder, odd names.
make_tree() {
	local d=$1 mib=${2:-6} i
	mkdir -p "$d"/big "$d"/links "$d"/sparse "$d"/empty-dir "$d"/deep/a/b/c/d/e/f
	for i in 1 2 3; do
		head -c $((mib * MiB / 3)) /dev/urandom >"$d/big/random$i.bin"
	done
	seq 1 150000 >"$d/big/numbers.txt"
	_small_files "$d/small" 300
	: >"$d/small/empty"
	echo "spaces" >"$d/small/name with spaces.txt"
	echo "utf8" >"$d/small/ünïcödé-名前.txt"
	echo deep >"$d/deep/a/b/c/d/e/f/leaf.txt"
	ln "$d/big/random1.bin" "$d/links/hard-to-random1"
	ln "$d/small/d0/file0.txt" "$d/links/hard-to-small"
	ln -s ../big/random2.bin "$d/links/sym-relative"
	ln -s /nonexistent/target "$d/links/sym-dangling"
	ln -s ../deep/a/b "$d/links/sym-dir"
	# Holes around a little data: the filesystem stores only the data blocks.
	truncate -s 24M "$d/sparse/holes.img"
	echo "data in the middle" | dd of="$d/sparse/holes.img" bs=1 seek=$((10 * MiB)) conv=notrunc status=none
	head -c 70000 /dev/urandom | dd of="$d/sparse/holes.img" bs=64K seek=$((20 * MiB)) oflag=seek_bytes conv=notrunc status=none
	truncate -s 8M "$d/sparse/all-hole.img"
}

# make_fat_tree DIR [MIB]: the FAT-compatible part (no links, no holes).
make_fat_tree() {
	local d=$1 mib=${2:-3} i
	mkdir -p "$d"/big "$d"/EFI/BOOT "$d"/empty-dir
	for i in 1 2; do
		head -c $((mib * MiB / 2)) /dev/urandom >"$d/big/random$i.bin"
	done
	head -c 200000 /dev/urandom >"$d/EFI/BOOT/BOOTX64.EFI"
	_small_files "$d/small" 120
	echo "long name" >"$d/small/A long file name with spaces.txt"
	: >"$d/small/empty"
}

# make_tiny_fat_tree DIR: fits in a FAT12 of a few MiB.
make_tiny_fat_tree() {
	mkdir -p "$1/sub"
	head -c 300000 /dev/urandom >"$1/random.bin"
	_small_files "$1/sub" 20
}

# Each file ends in a newline: a file whose last block held only a few random
# bytes could otherwise be all zeros now and then (1 in 256 for the 1-byte
# file), and an all-zero block is not stored, so the stored byte counts that
# tests compare with expected outputs would change from run to run.
_small_files() { # DIR COUNT: small files of varied sizes in 10 folders
	local d=$1 n=$2 i
	for ((i = 0; i < n; i++)); do
		mkdir -p "$d/d$((i % 10))"
		{ head -c $(((i * 997) % 9000)) /dev/urandom; echo; } >"$d/d$((i % 10))/file$i.txt"
	done
}

# ---- filesystems in files ----
# mk_ext FILE MIB TYPE TREE UUID LABEL [mke2fs options...]
mk_ext() {
	local f=$1 mib=$2 type=$3 tree=$4 uuid=$5 label=$6
	shift 6
	rm -f "$f"
	filtered '^Creating regular file' mke2fs -q -F -t "$type" -d "$tree" -U "$uuid" -L "$label" \
		-E root_owner=0:0 "$@" "$f" "${mib}M" || fail "mke2fs $f"
	[ -s "$f" ] || fail "mke2fs $f"
	e2fsck -fn "$f" >/dev/null 2>&1 || fail "the new $type in $f is not clean"
}
# mk_fat FILE MIB BITS TREE VOLID LABEL [mkfs.fat options...]
mk_fat() {
	local f=$1 mib=$2 bits=$3 tree=$4 id=$5 label=$6
	shift 6
	rm -f "$f"
	truncate -s "${mib}M" "$f"
	mkfs.fat -F "$bits" -i "$id" -n "$label" "$@" "$f" >/dev/null || fail "mkfs.fat -F $bits $f"
	if [ -n "$tree" ]; then
		mcopy -s -Q -i "$f" "$tree"/* ::/ || fail "mcopy into $f"
	fi
	fsck.fat -n "$f" >/dev/null || fail "the new FAT$bits in $f is not clean"
}
# mk_swap FILE MIB UUID LABEL
mk_swap() {
	rm -f "$1"
	truncate -s "${2}M" "$1"
	mkswap -U "$3" -L "$4" "$1" >/dev/null 2>&1 || fail "mkswap $1"
}
# put_fs FSFILE DISK OFFSET: write a filesystem into its place in a disk,
# keeping both sparse.
put_fs() {
	dd if="$1" of="$2" bs=1M seek="$3" oflag=seek_bytes conv=notrunc,sparse status=none ||
		fail "dd $1 into $2 at $3"
}
# put_bitlocker DISK OFFSET: the start of a BitLocker volume at OFFSET, by
# hand (no tool makes one on Linux), as libbde's and libblkid's format
# notes describe the Windows 7 layout: the boot sector's jump and
# "-FVE-FS-", the FVE metadata's offset (64 KiB) at byte 176, the 0x55AA
# mark; at 64 KiB the metadata block's "-FVE-FS-", its size and version 2
# (16-bit little-endian).  libblkid must then call it BitLocker.
put_bitlocker() {
	local at bytes
	for at in '0 \xeb\x58\x90-FVE-FS-' '176 \x00\x00\x01\x00\x00\x00\x00\x00' '510 \x55\xaa' \
		'65536 -FVE-FS-\x00\x00\x02\x00'; do
		bytes=${at#* }
		# shellcheck disable=SC2059  # the bytes are printf escapes
		printf -- "$bytes" | dd of="$1" bs=1 seek=$(($2 + ${at%% *})) conv=notrunc status=none ||
			fail "dd into $1"
	done
	[ "$(blkid -p -s TYPE -o value --offset "$2" "$1")" = BitLocker ] ||
		fail "libblkid does not take the hand-made header in $1 for BitLocker"
}
# random_bytes DISK OFFSET LENGTH: boot code, GRUB core and the like.
random_bytes() {
	head -c "$3" /dev/urandom |
		dd of="$1" bs=64K seek="$2" oflag=seek_bytes conv=notrunc status=none
}

# ---- partition geometry, in bytes ----
_sfdisk_field() { # DISK N FIELD
	sfdisk --json "$1" | jq -r --arg n "$2" --arg f "$3" \
		'.partitiontable.partitions[] | select(.node | test("[^0-9]" + $n + "$")) | .[$f]'
}
part_start() { echo $(($(_sfdisk_field "$1" "$2" start) * 512)); }
part_size() { echo $(($(_sfdisk_field "$1" "$2" size) * 512)); }
# extract_part DISK N OUT: a partition's bytes into a file of its own.
extract_part() {
	local start size
	start=$(part_start "$1" "$2") size=$(part_size "$1" "$2")
	[ "$size" -gt 0 ] || fail "no partition $2 on $1"
	rm -f "$3"
	dd if="$1" of="$3" bs=1M skip="$start" count="$size" iflag=skip_bytes,count_bytes \
		conv=sparse status=none || fail "dd partition $2 out of $1"
	truncate -s "$size" "$3"
}

# ---- sample disks ----
# Each builder takes the disk file to create and reads the trees it fills the
# filesystems with from $T/tree, $T/fattree and $T/tinyfat (made on first use).
ensure_trees() {
	[ -d "$T/tree" ] || make_tree "$T/tree"
	[ -d "$T/fattree" ] || make_fat_tree "$T/fattree"
	[ -d "$T/tinyfat" ] || make_tiny_fat_tree "$T/tinyfat"
}

# MBR: boot code, a primary ext4 (4 KiB blocks), and an extended partition
# with logical ext2, ext3 (1 KiB blocks), FAT16 and swap.  Random bytes in
# the MBR's boot code and in the gap before the first partition (GRUB's
# core.img lives there on MBR disks).
#   1 ext4  2 extended  5 ext2  6 ext3  7 FAT16  8 swap
build_mbr_disk() {
	local disk=$1 fs=$T/fs
	ensure_trees
	mkdir -p "$fs"
	rm -f "$disk"
	truncate -s 192M "$disk"
	sfdisk -q "$disk" <<-EOF || fail "sfdisk $disk"
		label: dos
		label-id: $MBR_LABEL_ID
		start=2048, size=48MiB, type=83, bootable
		size=+, type=5
		size=32MiB, type=83
		size=32MiB, type=83
		size=32MiB, type=e
		size=16MiB, type=82
	EOF
	mk_ext "$fs/p1" 48 ext4 "$T/tree" "$UUID_EXT4" root -b 4096
	mk_ext "$fs/p5" 32 ext2 "$T/tree" "$UUID_EXT2" old
	mk_ext "$fs/p6" 32 ext3 "$T/tree" "$UUID_EXT3" journaled
	mk_fat "$fs/p7" 32 16 "$T/fattree" "$FAT16_ID" FAT16DATA
	mk_swap "$fs/p8" 16 "$UUID_SWAP" "$SWAP_LABEL"
	local n
	for n in 1 5 6 7 8; do
		put_fs "$fs/p$n" "$disk" "$(part_start "$disk" $n)"
	done
	random_bytes "$disk" 0 440
	random_bytes "$disk" 512 $((2047 * 512))
	rm -rf "$fs"
}

# GPT: a BIOS boot partition full of random bytes (as GRUB's core.img),
# random bytes in the protective MBR's boot code and in the gap between the
# partition entries and the first partition (sectors 34..2047), an ext4, a
# FAT32 and a small FAT12.
#   1 BIOS boot  2 ext4  3 FAT32  4 FAT12
build_gpt_disk() {
	local disk=$1 fs=$T/fs
	ensure_trees
	mkdir -p "$fs"
	rm -f "$disk"
	truncate -s 160M "$disk"
	sfdisk -q "$disk" <<-EOF || fail "sfdisk $disk"
		label: gpt
		label-id: $GPT_LABEL_ID
		start=2048, size=1MiB, type=$GPT_BIOS_BOOT, uuid=5A0B1C2D-0000-4000-8000-000000000011, name="bios boot"
		size=64MiB, type=$GPT_LINUX, uuid=5A0B1C2D-0000-4000-8000-000000000012, name="root"
		size=40MiB, type=$GPT_BASIC_DATA, uuid=5A0B1C2D-0000-4000-8000-000000000013, name="data"
		size=4MiB, type=$GPT_BASIC_DATA, uuid=5A0B1C2D-0000-4000-8000-000000000014, name="small"
	EOF
	mk_ext "$fs/p2" 64 ext4 "$T/tree" "$UUID_EXT4" root
	mk_fat "$fs/p3" 40 32 "$T/fattree" "$FAT32_ID" FAT32DATA -s 1
	mk_fat "$fs/p4" 4 12 "$T/tinyfat" "$FAT12_ID" SMALL
	local n
	for n in 2 3 4; do
		put_fs "$fs/p$n" "$disk" "$(part_start "$disk" $n)"
	done
	random_bytes "$disk" "$(part_start "$disk" 1)" "$(part_size "$disk" 1)"
	random_bytes "$disk" 0 440
	random_bytes "$disk" $((34 * 512)) $(((2048 - 34) * 512))
	sfdisk --verify "$disk" >/dev/null || fail "the new GPT on $disk does not verify"
	rm -rf "$fs"
}

# A whole-disk ext4 (no partition table), 4 KiB blocks.
build_whole_ext4() {
	ensure_trees
	mk_ext "$1" 96 ext4 "$T/tree" "$UUID_WHOLE" whole -b 4096
}

# ---- checks on a restored disk ----
# sfdisk_dump DISK: the table as sfdisk prints it, with the file name replaced.
sfdisk_dump() {
	sfdisk -d "$1" | sed -e "s|$1|DISK|g"
}
# same_tables SRC DST [extra sed script]: identical sfdisk -d, after the
# optional filter (for a target of another size: drop last-lba).
same_tables() {
	local filter=${3:-}
	sfdisk_dump "$1" | sed -e "$filter" >"$T/table.src"
	sfdisk_dump "$2" | sed -e "$filter" >"$T/table.dst"
	diff -u "$T/table.src" "$T/table.dst" || fail "partition tables differ"
	note "partition tables match"
}
# same_bytes A B OFFSET LENGTH WHAT: byte ranges equal (same offset in both).
same_bytes() {
	local out
	out=$(cmp -n "$4" -i "$3:$3" "$1" "$2" 2>&1) ||
		fail "$5 differs ($out; range $3+$4)"
	note "$5 identical ($4 bytes at $3)"
}
# same_bytes_at A AOFF B BOFF LENGTH WHAT
same_bytes_at() {
	local out
	out=$(cmp -n "$5" -i "$2:$4" "$1" "$3" 2>&1) ||
		fail "$6 differs ($out)"
	note "$6 identical ($5 bytes)"
}
# is_zero FILE OFFSET LENGTH WHAT
is_zero() {
	local out
	out=$(cmp -n "$3" -i "$2:0" "$1" /dev/zero 2>&1) || fail "$4 is not all zeros ($out)"
	note "$4 is all zeros"
}

# check_ext FSFILE TREE [REF_FSFILE]: fsck clean, every file identical to
# TREE, and (when a reference is given) the same metadata as it, group by
# group, as dumpe2fs prints it.
check_ext() {
	local f=$1 tree=$2 ref=${3:-} out
	out=$(e2fsck -fn "$f" 2>&1) || { echo "$out"; fail "e2fsck -fn $f is not clean"; }
	rm -rf "$T/rdump" && mkdir "$T/rdump"
	debugfs -R "rdump / $T/rdump" "$f" >/dev/null 2>"$T/rdump.err" || fail "debugfs rdump $f"
	diff -r --no-dereference -x lost+found "$tree" "$T/rdump" || fail "files in $f differ from $tree"
	if [ -n "$ref" ]; then
		dumpe2fs "$ref" 2>/dev/null >"$T/dumpe2fs.src"
		dumpe2fs "$f" 2>/dev/null >"$T/dumpe2fs.dst"
		diff -u "$T/dumpe2fs.src" "$T/dumpe2fs.dst" || fail "dumpe2fs $f differs from its source"
	fi
	rm -rf "$T/rdump"
	note "${CHECK_LABEL:-$(basename "$f")}: e2fsck clean, files identical"
}
# check_fat FSFILE TREE: fsck.fat clean and every file identical.
check_fat() {
	local f=$1 tree=$2 out
	out=$(fsck.fat -n "$f" 2>&1) || { echo "$out"; fail "fsck.fat -n $f is not clean"; }
	rm -rf "$T/mout" && mkdir "$T/mout"
	mcopy -s -n -i "$f" '::*' "$T/mout/" || fail "mcopy out of $f"
	diff -r "$tree" "$T/mout" || fail "files in $f differ from $tree"
	rm -rf "$T/mout"
	note "${CHECK_LABEL:-$(basename "$f")}: fsck.fat clean, files identical"
}
# check_swap FSFILE UUID LABEL
check_swap() {
	local got
	got=$(blkid -p -o export "$1" | grep -E '^(TYPE|UUID|LABEL)=' | sort | tr '\n' ' ')
	assert_eq "$got" "LABEL=$3 TYPE=swap UUID=$2 " "swap signature of $1"
	note "${CHECK_LABEL:-$(basename "$1")}: swap UUID and label kept"
}

# ---- saving and restoring ----
# save_image SOURCE DIR [options]: imager save must succeed, and the folder
# must then verify.
save_image() {
	local src=$1 dir=$2
	shift 2
	imager_ok save "$src" "$dir" --no-progress "$@"
	[ -f "$dir/manifest.json" ] || fail "no manifest.json after a successful save"
	json_valid "$dir/manifest.json"
	imager_ok verify "$dir"
}
restore_image() { # DIR TARGET [options]
	local dir=$1 dst=$2
	shift 2
	imager_ok restore "$dir" "$dst" --no-progress "$@"
	[ -f "$dst" ] || [ -b "$dst" ] || fail "restore reported success but $dst does not exist"
}
# A JSON field of the manifest.
manifest() { jq -r "$2" "$1/manifest.json"; }

# check_manifest DIR SOURCE: the manifest describes SOURCE and the folder.
# Sizes, offsets and hashes of the files it lists are checked against the
# files themselves; boot areas against the source's bytes; partitions
# against sfdisk's view of the source.
check_manifest() {
	local dir=$1 src=$2 m=$1/manifest.json n i f len off start size
	json_is "$m" '.format == "imager-image" and .format_version == 1'
	json_is "$m" ".disk.size == $(file_size "$src")"
	json_is "$m" '.disk.logical_sector_size == 512'
	# Boot areas: plain copies of the source's bytes.
	n=$(jq '.boot_areas | length' "$m")
	for ((i = 0; i < n; i++)); do
		f=$(jq -r ".boot_areas[$i].file" "$m")
		off=$(jq -r ".boot_areas[$i].offset" "$m")
		len=$(jq -r ".boot_areas[$i].length" "$m")
		[ -f "$dir/$f" ] || fail "boot area file $f is missing"
		assert_eq "$(file_size "$dir/$f")" "$len" "size of $f"
		same_bytes_at "$dir/$f" 0 "$src" "$off" "$len" "boot area $f"
		_check_xxh3 "$dir/$f" "$(jq -r ".boot_areas[$i].xxh3" "$m")"
	done
	# Partitions: where the table says, with their files as described.
	n=$(jq '.partitions | length' "$m")
	[ "$n" -ge 1 ] || fail "no partitions in the manifest"
	for ((i = 0; i < n; i++)); do
		local p=".partitions[$i]" num
		num=$(jq -r "$p.number" "$m")
		if [ "$num" != 0 ]; then
			start=$(part_start "$src" "$num") size=$(part_size "$src" "$num")
			json_is "$m" "$p.start == $start and $p.size == $size"
		else
			json_is "$m" "$p.start == 0 and $p.size == $(file_size "$src")"
		fi
		json_is "$m" "$p.block_size > 0 and $p.block_size * $p.block_count <= $p.size"
		json_is "$m" "$p.used_blocks <= $p.block_count and $p.zero_blocks <= $p.used_blocks"
		json_is "$m" "$p.data_bytes <= $p.used_blocks * $p.block_size"
		for f in stream index; do
			local name
			name=$(jq -r "$p.$f" "$m")
			[ -f "$dir/$name" ] || fail "partition $num: $f file $name is missing"
			assert_eq "$(file_size "$dir/$name")" "$(jq -r "$p.${f}_size" "$m")" "size of $name"
			_check_xxh3 "$dir/$name" "$(jq -r "$p.${f}_xxh3" "$m")"
		done
	done
	note "manifest agrees with the source and the folder ($n partitions)"
}
_check_xxh3() { # FILE HEX: only when xxhsum (package xxhash) is there
	command -v xxhsum >/dev/null || return 0
	local got
	got=$(xxhsum -H3 "$1" | awk '{ print $NF }')
	assert_eq "$got" "$2" "XXH3 of $(basename "$1")"
}
# The manifest's view of partition N, as "filesystem plugin" (for checks).
manifest_fs() { jq -r ".partitions[] | select(.number == $2) | \"\(.filesystem) \(.plugin)\"" "$1/manifest.json"; }
# check_ext_blocks DIR N FSFILE: the ext plugin kept every allocated block.
check_ext_blocks() {
	local m=$1/manifest.json p=".partitions[] | select(.number == $2)" count free bs
	count=$(dumpe2fs -h "$3" 2>/dev/null | sed -n 's/^Block count: *//p')
	free=$(dumpe2fs -h "$3" 2>/dev/null | sed -n 's/^Free blocks: *//p')
	bs=$(dumpe2fs -h "$3" 2>/dev/null | sed -n 's/^Block size: *//p')
	json_is "$m" "($p | .block_size == $bs and .block_count == $count)"
	# Allocated blocks, plus at most the boot block before the first group.
	json_is "$m" "($p | .used_blocks >= $count - $free and .used_blocks <= $count - $free + 1)"
	note "partition $2: $((count - free)) of $count blocks in use, as the manifest says"
}

# ---- whole restored disks ----
# check_restored KIND SRC DST [MODE]
#   KIND  mbr | gpt | whole (the sample disks above)
#   MODE  exact   a fresh target: byte-identical to the source (the source's
#                 free space is zeros, as it was made fresh)
#         larger  a fresh, larger target: identical up to the source's size
#                 (GPT: but for its headers) and zeros beyond
#         dirty   the target held garbage: tables, boot areas and every
#                 filesystem must be right; free space is not compared
check_restored() {
	local kind=$1 src=$2 dst=$3 mode=${4:-exact} ssize dsize
	ssize=$(file_size "$src") dsize=$(file_size "$dst")
	case $mode in
	larger) [ "$dsize" -gt "$ssize" ] || fail "target is not larger ($dsize <= $ssize)" ;;
	*) assert_eq "$dsize" "$ssize" "size of the restored disk" ;;
	esac
	case $kind in
	mbr)
		same_tables "$src" "$dst"
		same_bytes "$src" "$dst" 0 "$MiB" "MBR, boot code and the gap before partition 1"
		_check_parts "$src" "$dst" ext:1:tree ext:5:tree ext:6:tree fat:7:fattree swap:8
		;;
	gpt)
		if [ "$mode" = larger ]; then
			same_tables "$src" "$dst" '/^last-lba:/d'
			local last
			last=$(sfdisk_dump "$dst" | sed -n 's/^last-lba: *//p')
			assert_eq "$last" $((dsize / 512 - 34)) "last usable LBA of the larger disk"
			same_bytes "$src" "$dst" 0 446 "protective MBR boot code"
			same_bytes "$src" "$dst" 1024 $((MiB - 1024)) "GPT entries and the gap before partition 1"
			same_bytes_at "$src" $((ssize - 33 * 512)) "$dst" $((dsize - 33 * 512)) $((32 * 512)) \
				"backup GPT entries, moved to the end"
		else
			same_tables "$src" "$dst"
			same_bytes "$src" "$dst" 0 "$MiB" "protective MBR, GPT and the gap before partition 1"
			same_bytes "$src" "$dst" $((ssize - 33 * 512)) $((33 * 512)) "backup GPT"
		fi
		local out
		out=$(sfdisk --verify "$dst" 2>&1) || { echo "$out"; fail "sfdisk --verify $dst"; }
		same_bytes "$src" "$dst" "$(part_start "$src" 1)" "$(part_size "$src" 1)" "BIOS boot partition"
		_check_parts "$src" "$dst" ext:2:tree fat:3:fattree fat:4:tinyfat
		;;
	whole)
		check_ext "$dst" "$T/tree" "$src"
		;;
	*) fail "check_restored: unknown kind $kind" ;;
	esac
	case $mode in
	exact)
		same_bytes "$src" "$dst" 0 "$ssize" "the whole disk"
		;;
	larger)
		if [ "$kind" = gpt ]; then
			same_bytes "$src" "$dst" "$MiB" $((ssize - MiB - 33 * 512)) "the disk up to the old backup GPT"
			is_zero "$dst" $((ssize - 33 * 512)) $((dsize - ssize)) "the space added at the end"
		else
			same_bytes "$src" "$dst" 0 "$ssize" "the disk up to the source's size"
			is_zero "$dst" "$ssize" $((dsize - ssize)) "the space added at the end"
		fi
		;;
	esac
}
# _check_parts SRC DST TYPE:N[:TREE]...: extract each partition of both
# disks and check the restored one against the source one.
_check_parts() {
	local src=$1 dst=$2 spec type n tree
	shift 2
	for spec in "$@"; do
		IFS=: read -r type n tree <<<"$spec"
		local CHECK_LABEL="partition $n"
		extract_part "$dst" "$n" "$T/check.dst"
		case $type in
		ext)
			extract_part "$src" "$n" "$T/check.src"
			check_ext "$T/check.dst" "$T/$tree" "$T/check.src"
			;;
		fat) check_fat "$T/check.dst" "$T/$tree" ;;
		swap) check_swap "$T/check.dst" "$UUID_SWAP" "$SWAP_LABEL" ;;
		esac
		rm -f "$T/check.dst" "$T/check.src"
	done
}

# An 8 GiB sparse disk, GPT with one ext4 (4 KiB blocks) over all of it,
# holding the usual tree (about 9 MiB): a mostly empty disk.  The ext4 is
# made in place (mke2fs -E offset), so nothing reads or writes 8 GiB.
#   1 ext4
build_sparse_disk() {
	local disk=$1 start size
	ensure_trees
	rm -f "$disk"
	truncate -s 8G "$disk"
	sfdisk -q "$disk" <<-EOF || fail "sfdisk $disk"
		label: gpt
		label-id: $GPT_LABEL_ID
		start=2048, type=$GPT_LINUX, uuid=5A0B1C2D-0000-4000-8000-000000000021, name="root"
	EOF
	start=$(part_start "$disk" 1) size=$(part_size "$disk" 1)
	mke2fs -q -F -t ext4 -b 4096 -d "$T/tree" -U "$UUID_EXT4" -L sparse -E root_owner=0:0,offset="$start" \
		"$disk" $((size / 1024))k || fail "mke2fs in $disk"
	e2fsck -fn "$disk?offset=$start" >/dev/null 2>&1 || fail "the new ext4 in $disk is not clean"
}
# ext_used_bytes FS: bytes in allocated blocks (FS may be "disk?offset=N").
ext_used_bytes() {
	dumpe2fs -h "$1" 2>/dev/null | awk -F: '
		/^Block count/ { c = $2 } /^Free blocks/ { f = $2 } /^Block size/ { b = $2 }
		END { printf "%d\n", (c - f) * b }'
}

# ---- damaging files on purpose ----
# flip_byte FILE OFFSET: invert every bit of one byte.
flip_byte() {
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	[ -n "$b" ] || fail "flip_byte: $1 has no byte at $2"
	patch_le "$1" "$2" 1 $((b ^ 0xff))
}
# patch_le FILE OFFSET NBYTES VALUE: write VALUE as a little-endian integer.
patch_le() {
	local f=$1 off=$2 n=$3 v=$4 i esc bytes=""
	for ((i = 0; i < n; i++)); do
		printf -v esc '\\x%02x' $(((v >> (8 * i)) & 255))
		bytes+=$esc
	done
	# shellcheck disable=SC2059
	printf "$bytes" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none || fail "patch $f at $off"
}
# A copy of an image folder that shares the (read-only) data files: only the
# manifest is replaced by the tests that lie in it.
copy_image() {
	rm -rf "$2"
	cp -al "$1" "$2" || cp -a "$1" "$2"
}
# edit_manifest DIR JQ_PROGRAM: rewrite the manifest (a new file: hard links
# to the original stay intact).
edit_manifest() {
	jq "$2" "$1/manifest.json" >"$1/manifest.new" || fail "jq $2"
	mv "$1/manifest.new" "$1/manifest.json"
}
# prng_bytes SEED COUNT: COUNT pseudo-random bytes, the same for the same
# seed (so a hostile case that fails can be replayed).
prng_bytes() {
	local i esc s=""
	RANDOM=$1
	for ((i = 0; i < $2; i++)); do
		printf -v esc '\\x%02x' $((RANDOM & 255))
		s+=$esc
	done
	# shellcheck disable=SC2059
	printf "$s"
}
