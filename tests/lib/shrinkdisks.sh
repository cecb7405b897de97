# The source disks of the shrink suite, made by the real tools over old
# data (random bytes), built once per version of what makes them (this
# file and the helpers of disks.sh and lvm.sh it calls: _sd_key) into the
# shared cache by tests/ts/fixtures/shrink-disks: making them (GiBs of
# random bytes, mke2fs -d, mkntfs and ntfs-3g, LVM on a loop device,
# sload.f2fs, mcopy) took 10 to 95 s per test, set-up and not what the
# tests prove.  Sourced after common.sh and disks.sh (it sources lvm.sh
# itself when it is not yet).
#
#   shrink_disk NAME   sets SD: NAME's folder in the cache, holding src.raw
#                      (the source disk, which the tests only read), the
#                      trees its filesystems were filled from and, for lvm,
#                      facts (shell assignments); built on first use by the
#                      fixture, while a test (IMAGER_TEST_NO_BUILD set)
#                      fails at once when it is missing.
#     gpt-ext4   8 GiB GPT: EFI (FAT32, 100 MiB, efitree, label EFI, id
#                1234abcd), root (ext4, 6 GiB, tree: 1 GiB of files,
#                $UUID_EXT4, label root) over 1.5 GiB of old data, recovery
#                (ext4, 500 MiB, rectree, $UUID_EXT3, label recovery)
#     lvm        4 GiB MBR: /boot (ext4, 256 MiB, boottree, $UUID_EXT2,
#                bootable), then a PV of VG vg0 holding root (ext4, 3 GiB,
#                tree: 400 MiB of files, $UUID_EXT4, made over 1 GiB of old
#                data), swap (256 MiB, $UUID_SWAP) and free extents; facts:
#                pe_count (the PV's extents) and swap_size (bytes)
#     mbr-ntfs   4 GiB MBR, signature 0x5ca1ab1e, boot code: System Reserved
#                (NTFS, 100 MiB, active, sys), Windows (NTFS, 3300 MiB, win,
#                made over 1 GiB of old data), Recovery (NTFS, 500 MiB, type
#                27, rec); each mkntfs'd with its start as hidden sectors
#     mbr-logical 3 GiB MBR: root (ext4, 2000 MiB, tree, $UUID_EXT4,
#                bootable), an extended partition (1000 MiB) holding swap
#                (300 MiB, $UUID_SWAP, label swap) and home (ext4, the rest,
#                home, $UUID_EXT3)
#     other-fs   2600 MiB GPT: F2FS (1400 MiB, tree, label DATA, over 400 MiB
#                of old data), XFS (512 MiB, label xdata), btrfs (600 MiB,
#                btree, label bdata)
#     fat        1200 MiB MBR of old data: FAT32 (1 GiB, type c, tree, id
#                1234ABCD, label BIGDATA, a hidden+system and a read-only
#                file; attrs.src and mdir.src: mattrib's and mdir's listings
#                of it), FAT16 (100 MiB, small, id 5678EF01, label SMALL)
SHRINK_DISKS="gpt-ext4 lvm mbr-ntfs mbr-logical other-fs fat"
# (the key hashes lvm.sh's helpers: every caller has them)
declare -F lv_put >/dev/null || . "$TESTS_LIB/lvm.sh"

# The cache key: this file, and the helpers of disks.sh and lvm.sh the
# builders call with the identities they write (not the whole of those
# files: a change to another helper there does not make the disks again).
_sd_key() {
	{
		cat "$TESTS_LIB/shrinkdisks.sh" &&
			declare -f make_tree make_fat_tree _small_files mk_ext mk_fat mk_swap put_fs random_bytes \
				extract_part part_start part_size _sfdisk_field lvm lv_offset _lv_geometry &&
			declare -p UUID_EXT4 UUID_EXT3 UUID_EXT2 UUID_SWAP SWAP_LABEL
	} | sha256sum | cut -c1-16
}

shrink_disk() { # NAME
	local name=$1 cache=${IMAGER_TEST_CACHE:-/var/cache/imager-tests} key dir lock start
	case " $SHRINK_DISKS " in *" $name "*) ;; *) fail "shrink_disk: unknown disk '$name'" ;; esac
	key=$(_sd_key) || fail "cannot hash what makes the shrink disks"
	dir=$cache/shrink-$name-$key
	if [ ! -f "$dir/src.raw" ] && [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
		fail "the shrink source disk $name is not in $cache: fixtures/shrink-disks failed or did not run"
	fi
	if [ ! -f "$dir/src.raw" ]; then
		mkdir -p "$cache" || fail "cannot create the cache folder $cache"
		# One build at a time; a second caller waits, then finds the disk.
		exec {lock}>"$cache/shrink-$name.lock" || fail "cannot lock in $cache"
		flock "$lock"
		if [ ! -f "$dir/src.raw" ]; then
			start=$SECONDS
			# (builds killed before the rename left these)
			rm -rf "$cache"/shrink-"$name"-*.tmp.*
			on_exit "rm -rf $(printf %q "$dir.tmp.$$")"
			mkdir -p "$dir.tmp.$$" || fail "mkdir in $cache"
			"_sd_$name" "$dir.tmp.$$"
			# (one rename: the folder appears whole)
			rm -rf "$dir"
			mv "$dir.tmp.$$" "$dir" || fail "mv into $cache"
			note "cached $dir ($((SECONDS - start)) s)"
			# older versions go
			find "$cache" -maxdepth 1 -name "shrink-$name-*" ! -name "${dir##*/}" -exec rm -rf {} +
		fi
		exec {lock}>&-
	fi
	SD=$dir
}

# _sd_gpt-ext4 DIR
_sd_gpt-ext4() {
	local d=$1 p2 p3
	need_cmd sfdisk mke2fs e2fsck mkfs.fat fsck.fat mcopy
	make_tree "$d/tree" 1000
	mkdir -p "$d/efitree/EFI/debian" "$d/rectree"
	head -c 300000 /dev/urandom >"$d/efitree/EFI/debian/grubx64.efi"
	echo "timeout 5" >"$d/efitree/EFI/debian/grub.cfg"
	cp -r "$d/tree/small" "$d/rectree/"
	truncate -s 8G "$d/src.raw"
	sfdisk -q "$d/src.raw" <<-EOF2 || fail "sfdisk"
		label: gpt
		start=2048, size=100MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI"
		size=6GiB, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4, name="root"
		size=500MiB, type=DE94BBA4-06D1-4D40-A16A-BFD50179D6AC, name="recovery"
	EOF2
	p2=$(part_start "$d/src.raw" 2) p3=$(part_start "$d/src.raw" 3)
	# What a disk that was used has in its free space.
	head -c $((1536 * MiB)) /dev/urandom |
		dd of="$d/src.raw" bs=1M seek="$p2" oflag=seek_bytes conv=notrunc status=none
	mk_fat "$T/efi.img" 100 32 "$d/efitree" 1234abcd EFI
	mk_ext "$T/root.img" 6144 ext4 "$d/tree" "$UUID_EXT4" root
	mk_ext "$T/rec.img" 500 ext4 "$d/rectree" "$UUID_EXT3" recovery
	put_fs "$T/efi.img" "$d/src.raw" $((MiB))
	put_fs "$T/root.img" "$d/src.raw" "$p2"
	put_fs "$T/rec.img" "$d/src.raw" "$p3"
	rm -f "$T/efi.img" "$T/root.img" "$T/rec.img"
}

# _sd_lvm DIR (lvm_setup first)
_sd_lvm() {
	local d=$1 dev pv lv off
	need_cmd sfdisk mke2fs e2fsck mkswap
	make_tree "$d/tree" 400
	mkdir -p "$d/boottree"
	head -c 5000000 /dev/urandom >"$d/boottree/vmlinuz"
	truncate -s 4G "$d/src.raw"
	sfdisk -q "$d/src.raw" <<-EOF2 || fail "sfdisk"
		label: dos
		start=2048, size=256MiB, type=83, bootable
		type=8e
	EOF2
	mk_ext "$T/boot.img" 256 ext4 "$d/boottree" "$UUID_EXT2" boot
	put_fs "$T/boot.img" "$d/src.raw" "$(part_start "$d/src.raw" 1)"
	rm -f "$T/boot.img"
	dev=$(loop_attach "$d/src.raw" --partitions) || fail "${dev#FAIL: }"
	pv=${dev}p2
	lvm "$pv" -- pvcreate -q "$pv" || fail "pvcreate"
	lvm "$pv" -- vgcreate -q vg0 "$pv" || fail "vgcreate"
	for lv in root:3G swap:256M; do
		filtered WARNING lvm "$pv" -- lvcreate -q -an -Zn -L "${lv#*:}" -n "${lv%%:*}" vg0 || fail "lvcreate ${lv%%:*}"
	done
	# root's ext4 over old data (its first GiB: where the files go), as on
	# a used disk
	head -c $((1024 * MiB)) /dev/urandom >"$T/root.img"
	truncate -s 3G "$T/root.img"
	filtered '^Creating regular file' mke2fs -q -F -t ext4 -d "$d/tree" -U "$UUID_EXT4" -L root -E root_owner=0:0,nodiscard "$T/root.img" ||
		fail "mke2fs of the root"
	e2fsck -fn "$T/root.img" >/dev/null 2>&1 || fail "the new root is not clean"
	mk_swap "$T/swap.img" 256 "$UUID_SWAP" "$SWAP_LABEL"
	# (lv_put's bytes, written into the disk file by offset and sparse: the
	# cached disk holds no GiBs of zeros)
	for lv in root swap; do
		off=$(lv_offset "$pv" vg0 $lv) || fail "${off#FAIL: }"
		put_fs "$T/$lv.img" "$d/src.raw" $(($(part_start "$d/src.raw" 2) + off))
	done
	rm -f "$T/root.img" "$T/swap.img"
	lvm "$pv" -- lvs -o lv_name,lv_size,seg_pe_ranges vg0
	{
		echo "pe_count=$(lvm "$pv" -- pvs --noheadings -o pv_pe_count "$pv" | tr -d ' ')"
		echo "swap_size=$(lvm "$pv" -- lvs --noheadings --nosuffix --units b -o lv_size vg0/swap | tr -d ' ')"
	} >"$d/facts"
	partx -d "$dev"
	loop_detach "$dev" "$d/src.raw"
}

# _sd_mk_ntfs FILE MIB START LABEL TREE: mkntfs over what FILE holds, with
# the partition's start sector as hidden sectors, then TREE copied in.
_sd_mk_ntfs() {
	truncate -s "${2}M" "$1"
	mkntfs -F -f -q -p $(($3 / 512)) -H 255 -S 63 -L "$4" "$1" >/dev/null 2>&1 || fail "mkntfs $1"
	mkdir -p "$T/mnt"
	ntfs-3g "$1" "$T/mnt" || fail "ntfs-3g $1"
	cp -r "$5"/. "$T/mnt/" || { umount "$T/mnt"; fail "cp into $1"; }
	umount "$T/mnt" || fail "umount"
}

# _sd_mbr-ntfs DIR
_sd_mbr-ntfs() {
	local d=$1 p1 p2 p3
	need_root "for ntfs-3g (FUSE) mounts"
	need_cmd sfdisk mkntfs ntfs-3g
	[ -c /dev/fuse ] || skip "needs /dev/fuse for ntfs-3g"
	mkdir -p "$d/sys/Boot" "$d/rec/Recovery"
	head -c 400000 /dev/urandom >"$d/sys/bootmgr"
	head -c 30000 /dev/urandom >"$d/sys/Boot/BCD"
	make_tree "$d/win" 300
	rm -rf "$d/win/links" "$d/win/sparse"   # (what NTFS through ntfs-3g keeps as they are is tested elsewhere)
	head -c 20000000 /dev/urandom >"$d/rec/Recovery/winre.wim"
	truncate -s 4G "$d/src.raw"
	sfdisk -q "$d/src.raw" <<-EOF2 || fail "sfdisk"
		label: dos
		label-id: 0x5ca1ab1e
		start=2048, size=100MiB, type=7, bootable
		size=3300MiB, type=7
		size=500MiB, type=27
	EOF2
	random_bytes "$d/src.raw" 0 440
	p1=$(part_start "$d/src.raw" 1) p2=$(part_start "$d/src.raw" 2) p3=$(part_start "$d/src.raw" 3)
	head -c $((1024 * MiB)) /dev/urandom |
		dd of="$d/src.raw" bs=1M seek="$p2" oflag=seek_bytes conv=notrunc status=none
	extract_part "$d/src.raw" 2 "$T/c.img"   # (old data in its free space)
	_sd_mk_ntfs "$T/s.img" 100 "$p1" "System Reserved" "$d/sys"
	_sd_mk_ntfs "$T/c.img" 3300 "$p2" "Windows" "$d/win"
	_sd_mk_ntfs "$T/r.img" 500 "$p3" "Recovery" "$d/rec"
	put_fs "$T/s.img" "$d/src.raw" "$p1"
	put_fs "$T/c.img" "$d/src.raw" "$p2"
	put_fs "$T/r.img" "$d/src.raw" "$p3"
	rm -f "$T/s.img" "$T/c.img" "$T/r.img"
}

# _sd_mbr-logical DIR
_sd_mbr-logical() {
	local d=$1 p1 p5 p6
	need_cmd sfdisk mke2fs e2fsck mkswap
	make_tree "$d/tree" 60
	mkdir -p "$d/home"
	cp -r "$d/tree/small" "$d/home/"
	truncate -s 3G "$d/src.raw"
	sfdisk -q "$d/src.raw" <<-EOF2 || fail "sfdisk"
		label: dos
		start=2048, size=2000MiB, type=83, bootable
		size=1000MiB, type=5
		$d/src.raw5 : size=300MiB, type=82
		$d/src.raw6 : type=83
	EOF2
	p1=$(part_start "$d/src.raw" 1) p5=$(part_start "$d/src.raw" 5) p6=$(part_start "$d/src.raw" 6)
	mk_ext "$T/root.img" 2000 ext4 "$d/tree" "$UUID_EXT4" root
	mk_swap "$T/swap.img" 300 "$UUID_SWAP" swap
	mk_ext "$T/home.img" $(($(part_size "$d/src.raw" 6) / MiB)) ext4 "$d/home" "$UUID_EXT3" home
	put_fs "$T/root.img" "$d/src.raw" "$p1"
	put_fs "$T/swap.img" "$d/src.raw" "$p5"
	put_fs "$T/home.img" "$d/src.raw" "$p6"
	rm -f "$T/root.img" "$T/swap.img" "$T/home.img"
}

# _sd_other-fs DIR
_sd_other-fs() {
	local d=$1 p1 p2 p3
	need_cmd sfdisk mkfs.btrfs mkfs.f2fs sload.f2fs mkfs.xfs
	make_fat_tree "$d/tree" 30
	_small_files "$d/tree/more" 200
	truncate -s 2600M "$d/src.raw"
	sfdisk -q "$d/src.raw" <<-EOF2 || fail "sfdisk"
		label: gpt
		start=2048, size=1400MiB, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4, name="f2fs"
		size=512MiB, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4, name="xfs"
		size=600MiB, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4, name="btrfs"
	EOF2
	p1=$(part_start "$d/src.raw" 1) p2=$(part_start "$d/src.raw" 2) p3=$(part_start "$d/src.raw" 3)
	mkdir -p "$d/btree"
	cp -r "$d/tree/more" "$d/btree/"
	head -c $((8 * MiB)) /dev/urandom >"$d/btree/blob.bin"
	truncate -s 600M "$T/btrfs.img"
	mkfs.btrfs -q -f -L bdata --rootdir "$d/btree" "$T/btrfs.img" >/dev/null || fail "mkfs.btrfs"
	put_fs "$T/btrfs.img" "$d/src.raw" "$p3"
	rm -f "$T/btrfs.img"
	head -c $((400 * MiB)) /dev/urandom >"$T/f2fs.img"
	truncate -s 1400M "$T/f2fs.img"
	mkfs.f2fs -q -f -t 0 -l DATA "$T/f2fs.img" >/dev/null || fail "mkfs.f2fs"
	sload.f2fs -f "$d/tree" "$T/f2fs.img" >"$T/sload.log" 2>&1 || { tail -n 5 "$T/sload.log"; fail "sload.f2fs"; }
	truncate -s 512M "$T/xfs.img"
	mkfs.xfs -q -f -L xdata "$T/xfs.img" || fail "mkfs.xfs"
	dd if="$T/f2fs.img" of="$d/src.raw" bs=1M seek="$p1" oflag=seek_bytes conv=notrunc status=none
	put_fs "$T/xfs.img" "$d/src.raw" "$p2"
	rm -f "$T/f2fs.img" "$T/xfs.img"
}

# _sd_fat DIR
_sd_fat() {
	local d=$1 p1 p2 f
	need_cmd sfdisk mkfs.fat fsck.fat mcopy mattrib mdir
	make_fat_tree "$d/tree" 40
	mkdir -p "$d/tree/A folder with a long name/deeper"
	echo "boot entry" >"$d/tree/A folder with a long name/deeper/Some Long File Name.cfg"
	mkdir -p "$d/small"
	echo "data" >"$d/small/DATA.TXT"
	head -c $((1200 * MiB)) /dev/urandom >"$d/src.raw"
	sfdisk -q "$d/src.raw" <<-EOF2 || fail "sfdisk"
		label: dos
		start=2048, size=1024MiB, type=c
		size=100MiB, type=6
	EOF2
	p1=$(part_start "$d/src.raw" 1) p2=$(part_start "$d/src.raw" 2)
	# FAT32 over old data: mkfs.fat on the disk's own bytes (no discard)
	extract_part "$d/src.raw" 1 "$T/fat32.img"
	mkfs.fat -F 32 -i 1234ABCD -n BIGDATA -h $((p1 / 512)) "$T/fat32.img" >/dev/null || fail "mkfs.fat"
	mcopy -s -m -i "$T/fat32.img" "$d/tree"/* ::/ || fail "mcopy"
	mattrib -i "$T/fat32.img" +h +s "::/A folder with a long name/deeper/Some Long File Name.cfg"
	f=$(cd "$d/tree" && find . -type f | sort | sed -n 3p)
	mattrib -i "$T/fat32.img" +r "::/${f#./}"
	fsck.fat -n "$T/fat32.img" >/dev/null || fail "the source FAT32 is not clean"
	dd if="$T/fat32.img" of="$d/src.raw" bs=1M seek="$p1" oflag=seek_bytes conv=notrunc status=none
	mk_fat "$T/fat16.img" 100 16 "$d/small" 5678EF01 SMALL
	put_fs "$T/fat16.img" "$d/src.raw" "$p2"
	mattrib -/ -i "$T/fat32.img" ::/ >"$d/attrs.src"
	mdir -/ -i "$T/fat32.img" ::/ | grep -v 'Volume\|bytes free' >"$d/mdir.src"
	rm -f "$T/fat32.img" "$T/fat16.img"
}
