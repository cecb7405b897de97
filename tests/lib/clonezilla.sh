# Authentic Clonezilla images for the tests, made by Clonezilla's own
# ocs-sr in batch mode from loop devices, cached by this script's hash (as
# the test guest is), so that they are made once per version of this file.
#
#   cz_image NAME    sets CZ_DIR (the image folder) and CZ_SRC (the source
#                    disk it was saved from), building both on first use:
#     gpt-gz-split   GPT, 160 MiB: ext4 (64 MiB, 24 MiB of files), vfat
#                    (32 MiB, labelled, files), swap (16 MiB, labelled);
#                    gzip (-z1p), split at 1 MB (-i 1), MD5SUMS (-gm)
#     mbr-zst        MBR, 128 MiB: ext4 (48 MiB, files) and NTFS (60 MiB,
#                    files put with ntfscp), hidden data after the MBR;
#                    zstd (-z9p), not split; and saveparts of the NTFS
#                    alone (CZ_PARTS_DIR)
#     mbr-logical-xz MBR, 256 MiB: ext4 (32 MiB, bootable), then an extended
#                    partition holding swap (16 MiB, labelled), btrfs
#                    (160 MiB, files put with mkfs.btrfs -r) and 8 MiB of
#                    bytes no tool knows (ocs-sr saves it with
#                    partclone.dd); boot code in the first EBR; xz (-z5p)
#     mbr-lvm        MBR, 704 MiB: ext4 /boot (64 MiB), then an LVM PV of VG
#                    czvg holding root (ext4, 512 MiB, files, written by
#                    offset over old data: room to shrink), swap (32 MiB)
#                    and 23 free extents; zstd.  ocs-sr
#                    saves the PV's VG (lvm_vg_dev.list, lvm_czvg.conf) but
#                    cannot open the LVs here (no device-mapper) and calls
#                    the image broken; the LVs' streams are then made as
#                    ocs-sr makes them: partclone.extfs -c of the root LV's
#                    bytes | zstd into czvg-root.ext4-ptcl-img.zst, and
#                    swappt-czvg-swap.info
#     gpt-xfs-uncomp GPT, 400 MiB: XFS (360 MiB, files, made over old data);
#                    not compressed (-z0)
#     debian12       the Debian test guest ($GUEST, from need_guest: MBR,
#                    GRUB in the gap after the MBR, ext4 root, swap), zstd;
#                    cached beside that guest's own hash
# The source disks held pseudo-random bytes before mkfs (old data in the
# free space), so a restore equals its source only on the used blocks: the
# tests compare tables, checkers and files.
# Needs root, loop devices with partx, ocs-sr (clonezilla), and the mkfs
# tools; cz_image skips (77) without them.

CZ_CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}

# _cz_ocs_sr DIR DISK ARG...: ocs-sr ARG... in a mount namespace of its
# own, as on a machine whose only disk is DISK (a loop device): there
# Clonezilla's configuration (/etc/drbl/drbl-ocs.conf) turns off its
# device-list cache, and /proc/partitions lists DISK and its partitions
# alone.  ocs-sr walks every disk and partition /proc/partitions names,
# several times per run, at about a second of bash each (ocs-get-dev-info),
# so on the whole machine it also walked the host's disk and every loop
# device of the other lane's tests (with the cache on, ocs-prep-cache
# probed them all too, into one shared /tmp/ocs-cache).  Its partclone
# runs with -f 0: partclone's progress thread otherwise sleeps 2 s at the
# end of every run (the image is the same).
_cz_ocs_sr() {
	local d=$1 disk=$2
	shift 2
	{ cat /etc/drbl/drbl-ocs.conf && printf '%s\n' 'use_dev_list_cache="no"' "dev_list_cache_dir=\"$d/ocs-cache/\"" \
		"PARTCLONE_SAVE_OPT_INIT=\"\$PARTCLONE_SAVE_OPT_INIT -f 0\""; } \
		>"$d/drbl-ocs.conf" || return 1
	awk -v d="$disk" 'NR <= 2 || $4 ~ ("^" d "(p[0-9]+)?$")' /proc/partitions >"$d/partitions" || return 1
	grep -qw "$disk" "$d/partitions" || { echo "_cz_ocs_sr: $disk is not in /proc/partitions" >&2; return 1; }
	unshare -m --propagation private sh -c \
		'mount --bind "$0" /etc/drbl/drbl-ocs.conf && mount --bind "$1" /proc/partitions && shift && exec ocs-sr "$@"' \
		"$d/drbl-ocs.conf" "$d/partitions" "$@"
}

_cz_build() { # NAME DIR: the source disk DIR/src.img and the image DIR/image
	local name=$1 d=$2 dev t files
	t=$d/work
	mkdir -p "$t" "$d/repo"
	case $name in
	debian12)
		qemu-img convert -O raw "$GUEST" "$d/src.img" || return 1
		;;
	gpt-gz-split)
		head -c $((160 * MiB)) /dev/urandom >"$d/src.img"
		sfdisk -q "$d/src.img" <<-EOF || return 1
			label: gpt
			start=2048, size=64MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"
			size=32MiB, type=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7, name="data"
			size=16MiB, type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F, name="swap"
		EOF
		;;
	mbr-zst)
		head -c $((128 * MiB)) /dev/urandom >"$d/src.img"
		sfdisk -q "$d/src.img" <<-EOF || return 1
			label: dos
			start=2048, size=48MiB, type=83
			size=60MiB, type=7
		EOF
		;;
	mbr-logical-xz)
		head -c $((256 * MiB)) /dev/urandom >"$d/src.img"
		sfdisk -q "$d/src.img" <<-EOF || return 1
			label: dos
			start=2048, size=32MiB, type=83, bootable
			size=200MiB, type=5
			$d/src.img5 : size=16MiB, type=82
			$d/src.img6 : size=160MiB, type=83
			$d/src.img7 : size=8MiB, type=da
		EOF
		;;
	gpt-xfs-uncomp)
		head -c $((400 * MiB)) /dev/urandom >"$d/src.img"
		sfdisk -q "$d/src.img" <<-EOF || return 1
			label: gpt
			start=2048, size=360MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="data"
		EOF
		;;
	mbr-lvm)
		head -c $((704 * MiB)) /dev/urandom >"$d/src.img"
		sfdisk -q "$d/src.img" <<-EOF || return 1
			label: dos
			start=2048, size=64MiB, type=83, bootable
			type=8e
		EOF
		;;
	esac
	dev=$(losetup -f --show "$d/src.img") || return 1
	partx -d "$dev" 2>/dev/null
	partx -a "$dev" 2>/dev/null
	mkdir -p "$t/files/sub"
	[ "$name" = debian12 ] || head -c $((20 * MiB)) /dev/urandom >"$t/files/random.bin"
	seq 1 200000 >"$t/files/sub/numbers.txt"
	cp -r /usr/share/doc/util-linux "$t/files/doc" 2>/dev/null || true
	case $name in
	gpt-gz-split)
		mke2fs -q -F -t ext4 -L cz-root -d "$t/files" "${dev}p1" &&
			mkfs.fat -n CZDATA "${dev}p2" >/dev/null &&
			MTOOLS_SKIP_CHECK=1 mcopy -s -i "${dev}p2" "$t/files/sub" ::/ &&
			mkswap -L cz-swap "${dev}p3" >/dev/null
		;;
	mbr-zst)
		# GRUB-like bytes in the gap after the MBR: "hidden data" to keep
		head -c 4096 /dev/urandom | dd of="$dev" bs=512 seek=1 conv=notrunc status=none
		head -c 446 /dev/urandom | dd of="$dev" bs=1 conv=notrunc status=none
		rm -rf "$t/files/random.bin"
		head -c $((8 * MiB)) /dev/urandom >"$t/files/random.bin"
		mke2fs -q -F -t ext4 -L cz-boot -d "$t/files" "${dev}p1" &&
			mkntfs -q -f -L CZNTFS "${dev}p2" &&
			ntfscp -q "${dev}p2" "$t/files/random.bin" random.bin &&
			ntfscp -q "${dev}p2" "$t/files/sub/numbers.txt" numbers.txt
		;;
	mbr-logical-xz)
		# boot code in the first EBR (ocs-sr keeps its first 446 bytes)
		head -c 446 /dev/urandom | dd of="${dev}p2" bs=446 count=1 conv=notrunc status=none
		rm -rf "$t/files/random.bin"
		head -c $((6 * MiB)) /dev/urandom >"$t/files/random.bin"
		mke2fs -q -F -t ext4 -L cz-boot -d "$t/files/sub" "${dev}p1" &&
			mkswap -L cz-lswap "${dev}p5" >/dev/null &&
			mkfs.btrfs -q -f -L cz-btrfs -r "$t/files" "${dev}p6" >/dev/null
		;;
	gpt-xfs-uncomp)
		mkfs.xfs -q -f -L czxfs "${dev}p1" && mkdir -p "$t/mnt" && mount "${dev}p1" "$t/mnt" &&
			cp -r "$t/files/." "$t/mnt/" && umount "$t/mnt"
		;;
	mbr-lvm)
		# LVM without device-mapper (FACTS.md): a private configuration,
		# the LVs never activated, their bytes written by offset
		mkdir -p "$t/lvm"
		printf '%s\n' 'global { activation = 0 }' 'backup { backup = 0 archive = 0 }' \
			'devices { obtain_device_list_from_udev = 0 }' >"$t/lvm/lvm.conf"
		local f="devices { filter = [ \"a|^${dev}p2\$|\", \"r|.*|\" ] }"
		mke2fs -q -F -t ext4 -L cz-boot -d "$t/files/sub" "${dev}p1" &&
			LVM_SYSTEM_DIR=$t/lvm pvcreate -q --config "$f" "${dev}p2" 2>/dev/null &&
			LVM_SYSTEM_DIR=$t/lvm vgcreate -q --config "$f" czvg "${dev}p2" 2>/dev/null &&
			LVM_SYSTEM_DIR=$t/lvm lvcreate -q --config "$f" -an -Zn -L 512M -n root czvg 2>/dev/null &&
			LVM_SYSTEM_DIR=$t/lvm lvcreate -q --config "$f" -an -Zn -L 32M -n swap czvg 2>/dev/null || false
		[ $? = 0 ] || { losetup -d "$dev"; return 1; }
		# root at the first extent, swap after it (1 MiB pe_start, 4 MiB
		# extents: checked)
		[ "$(LVM_SYSTEM_DIR=$t/lvm lvs --config "$f" --noheadings -o seg_pe_ranges czvg/swap 2>/dev/null | tr -d ' ')" = "${dev}p2:128-135" ] ||
			{ losetup -d "$dev"; return 1; }
		rm -rf "$t/files/random.bin"
		head -c $((6 * MiB)) /dev/urandom >"$t/files/random.bin"
		head -c $((512 * MiB)) /dev/urandom >"$t/root.img"
		mke2fs -q -F -t ext4 -L cz-root -E nodiscard -d "$t/files" "$t/root.img" &&
			dd if="$t/root.img" of="${dev}p2" bs=1M seek=1 conv=notrunc status=none &&
			truncate -s 32M "$t/swap.img" && mkswap -q -L cz-lvswap "$t/swap.img" &&
			dd if="$t/swap.img" of="${dev}p2" bs=1M seek=513 conv=notrunc status=none
		;;
	esac || { losetup -d "$dev"; return 1; }
	sync
	files=$(basename "$dev")
	case $name in
	gpt-gz-split) set -- -z1p -i 1 -gm ;;
	mbr-zst | debian12) set -- -z9p -i 0 ;;
	mbr-logical-xz) set -- -z5p -i 0 ;;
	mbr-lvm) set -- -z9p -i 0 ;;
	gpt-xfs-uncomp) set -- -z0 -i 0 ;;
	esac
	# (-scs: no "is it restorable" pass after saving, partclone.chkimg over
	# every stream: the files are the same, and the tests restore them)
	_cz_ocs_sr "$d" "$files" -b -q2 -j2 "$@" -sfsck -scs -senc -nogui -p true -or "$d/repo" savedisk image "$files" \
		>"$d/ocs-sr.log" 2>&1
	local rc=$?
	# mbr-zst also as a partition image: saveparts of its NTFS alone
	if [ "$rc" = 0 ] && [ "$name" = mbr-zst ]; then
		_cz_ocs_sr "$d" "$files" -b -q2 -j2 "$@" -sfsck -scs -senc -nogui -p true -or "$d/repo" saveparts parts \
			"${files}p2" >>"$d/ocs-sr.log" 2>&1 || rc=$?
		[ "$rc" = 0 ] && mv "$d/repo/parts" "$d/parts-image"
	fi
	partx -d "$dev" 2>/dev/null
	losetup -d "$dev"
	if [ "$name" = mbr-lvm ]; then
		# broken for ocs-sr (the LVs could not be read), the VG saved
		[ -s "$d/repo/image/lvm_czvg.conf" ] || { tail -n 20 "$d/ocs-sr.log" >&2; return 1; }
		rm -f /etc/lvm/backup/czvg /etc/lvm/archive/czvg_*
		partclone.extfs -f 0 -q -c -s "$t/root.img" -o - 2>/dev/null | zstd -q -3 -c \
			>"$d/repo/image/czvg-root.ext4-ptcl-img.zst" || return 1
		printf 'UUID="%s"\nLABEL="%s"\n' "$(blkid -p -o value -s UUID "$t/swap.img")" cz-lvswap \
			>"$d/repo/image/swappt-czvg-swap.info"
		rc=0
	fi
	[ "$rc" = 0 ] || { tail -n 20 "$d/ocs-sr.log" >&2; return 1; }
	mv "$d/repo/image" "$d/image" && rm -rf "$d/repo" "$t" "$d/drbl-ocs.conf" "$d/partitions" "$d/ocs-cache"
	# (the guest's raw copy is not kept: the guest itself is)
	[ "$name" != debian12 ] || rm -f "$d/src.img"
}

# The fixture that builds an image (tests/ts/fixtures/): in a test
# (IMAGER_TEST_NO_BUILD set) cz_image only finds images.
_cz_fixture() { [ "$1" = debian12 ] && echo clonezilla-debian12 || echo clonezilla; }
CZ_IMAGES="gpt-gz-split mbr-zst mbr-logical-xz mbr-lvm gpt-xfs-uncomp"

cz_image() { # NAME
	local key dir lock
	need_root "for loop devices and ocs-sr"
	need_cmd ocs-sr unshare partclone.extfs partclone.vfat partclone.ntfs partclone.btrfs partclone.dd \
		losetup partx sfdisk mke2fs mkfs.fat mcopy mkswap mkntfs ntfscp mkfs.btrfs \
		pvcreate vgcreate lvcreate lvs zstd blkid mkfs.xfs partclone.xfs mount
	key=$(sha256sum < "$TESTS_LIB/clonezilla.sh" | cut -c1-16)
	dir=$CZ_CACHE/clonezilla-$key/$1
	[ "$1" = debian12 ] && dir=$dir-$(basename "${GUEST:?need_guest first}" .qcow2)
	mkdir -p "$CZ_CACHE"
	lock=$CZ_CACHE/clonezilla.lock
	exec {_czfd}>"$lock"
	flock "$_czfd"
	if [ ! -d "$dir/image" ] && [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
		exec {_czfd}>&-
		fail "the Clonezilla image $1 is not in $CZ_CACHE: fixtures/$(_cz_fixture "$1") failed or did not run"
	fi
	if [ ! -d "$dir/image" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		note "building the Clonezilla image $1 with ocs-sr (cached in $dir)"
		_cz_build "$1" "$dir" || { rm -rf "$dir"; exec {_czfd}>&-; fail "ocs-sr could not make $1"; }
		# old versions of this script's images go, and images of older guests
		find "$CZ_CACHE" -maxdepth 1 -name 'clonezilla-*' ! -name "clonezilla-$key" -exec rm -rf {} +
		[ "$1" = debian12 ] && find "$(dirname "$dir")" -maxdepth 1 -name 'debian12-*' ! -path "$dir" -exec rm -rf {} +
	fi
	exec {_czfd}>&-
	CZ_DIR=$dir/image
	CZ_PARTS_DIR=$dir/parts-image
	CZ_SRC=$dir/src.img
}
