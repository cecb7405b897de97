#!/bin/bash
# Builds the LVM variant of the Debian 12 test guest, and prints the path of
# its cached qcow2 image on stdout (the last line; progress on stderr).
#
# The layout of a RHEL-like machine: an MBR disk with /boot (ext4) on sda1
# and an LVM PV on sda2, VG vg0 holding the root (ext4, LV root) and swap
# (LV swap); /etc/fstab names /dev/mapper/vg0-root, /dev/sda1 and
# /dev/mapper/vg0-swap; GRUB on the MBR boots root=/dev/mapper/vg0-root; the
# initramfs has LVM and the SATA/IDE drivers but no virtio, as the base
# guest's.  It is made from the base guest (tests/guest/debian12.sh, built
# first when needed) on the host, with no device-mapper (FACTS.md): the PV,
# VG and LVs by the real LVM tools with activation off, the filesystems by
# mke2fs -d from the base guest's files (owners, modes, links, xattrs
# kept), the root's written into its LV by offset, GRUB by the guest's own
# grub-install and update-grub in a chroot.  The base guest's files are
# copied as they are, so the marker service (IMAGER-GUEST-UP root=...) is
# the same; a build boots the result once on IDE and fails unless the
# marker says root=/dev/mapper/vg0-root.  (It was made inside one
# libguestfs appliance, its files copied under TCG: 90 s alone, 200-250 s
# beside the other lane, and one such session stalled for 7 minutes.)
#
# Cached as $IMAGER_TEST_CACHE/debian12-lvm-KEY.qcow2, KEY from the sha256
# of this script, of tests/lib/buildtree.sh and of the base guest's image
# name (variant_start: a new base guest makes a new variant).  Needs root, loop devices and the LVM tools; exits
# 77 without root.
# With IMAGER_TEST_NO_BUILD set (in a test, not a fixture) a missing image
# is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}

say() { printf 'debian12-lvm: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-lvm "$SELF"

phase "the base guest's files, on the host"
qemu-img convert -O raw "$BASE" "$BUILD/base.raw" || die "qemu-img convert of the base guest"
BL=$(attach "$BUILD/base.raw" -r)
mkdir -p "$BUILD/base" "$BUILD/rootdir"
mount -o ro "${BL}p1" "$BUILD/base" || die "mount the base guest's root"
cp -a "$BUILD/base/." "$BUILD/rootdir/" || die "copy the base guest's files"
umount "$BUILD/base"
partx -d "$BL" 2>/dev/null || true
losetup -d "$BL"
rm -f "$BUILD/base.raw"
# /boot becomes a partition of its own; lost+found is mke2fs's
mv "$BUILD/rootdir/boot" "$BUILD/bootdir" && mkdir -m 755 "$BUILD/rootdir/boot" || die "move /boot's files"
rm -rf "$BUILD/rootdir/lost+found" "$BUILD/bootdir/lost+found"
cat >"$BUILD/rootdir/etc/fstab" <<'FSTAB'
# <file system>         <mount point>   <type>  <options>          <dump>  <pass>
/dev/mapper/vg0-root    /               ext4    errors=remount-ro  0       1
/dev/sda1               /boot           ext4    defaults           0       2
/dev/mapper/vg0-swap    none            swap    sw                 0       0
FSTAB

phase "the disk: /boot on sda1, PV of vg0 on sda2 (swap, root)"
truncate -s 3G "$BUILD/disk.raw"
sfdisk -q "$BUILD/disk.raw" <<'TABLE' || die "sfdisk"
label: dos
start=2048, size=614400, type=83, bootable
start=616448, size=5672960, type=8e
TABLE
LOOP=$(attach "$BUILD/disk.raw")
PV=${LOOP}p2
# LVM without device-mapper: a private configuration, the LVs never
# activated (created with -an -Zn), only this PV seen
mkdir -p "$BUILD/lvm"
printf '%s\n' 'global { activation = 0 }' 'backup { backup = 0 archive = 0 }' \
	'devices { obtain_device_list_from_udev = 0 }' \
	'activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }' >"$BUILD/lvm/lvm.conf"
LVMF="devices { filter = [ \"a|^$PV\$|\", \"r|.*|\" ] }"
lv() { LVM_SYSTEM_DIR=$BUILD/lvm LVM_SUPPRESS_FD_WARNINGS=1 "$@" --config "$LVMF"; }
quietly pvcreate lv pvcreate -q "$PV"
quietly vgcreate lv vgcreate -q vg0 "$PV"
quietly lvcreate-swap lv lvcreate -q -an -Zn -L 256M -n swap vg0
quietly lvcreate-root lv lvcreate -q -an -Zn -l 100%FREE -n root vg0
geometry() { # LV -> "offset size" in bytes, in the PV (one linear segment)
	local pe ext ranges first size
	pe=$(lv pvs --noheadings --nosuffix --units b -o pe_start "$PV" 2>/dev/null | tr -d ' ')
	ext=$(lv vgs --noheadings --nosuffix --units b -o vg_extent_size vg0 2>/dev/null | tr -d ' ')
	ranges=$(lv lvs --noheadings -o seg_pe_ranges "vg0/$1" 2>/dev/null | tr -d ' ')
	size=$(lv lvs --noheadings --nosuffix --units b -o lv_size "vg0/$1" 2>/dev/null | tr -d ' ')
	case $ranges in "$PV":*-*) ;; *) die "vg0/$1 is not one segment on $PV: '$ranges'" ;; esac
	first=${ranges#*:}
	first=${first%-*}
	echo "$((pe + first * ext)) $size"
}
read -r swap_off swap_size <<<"$(geometry swap)"
read -r root_off root_size <<<"$(geometry root)"
say "vg0/swap: $((swap_size / 1048576)) MiB at $swap_off; vg0/root: $((root_size / 1048576)) MiB at $root_off"

phase "the filesystems (mke2fs -d), swap"
quietly mkfs-boot mke2fs -q -F -t ext4 -L boot -d "$BUILD/bootdir" "${LOOP}p1"
# The root is made in the one partition of a disk of its own, written
# into its LV afterwards: grub-mkconfig (10_linux) writes no entry for a
# root on a whole loop device (/dev/loopN names a file to it), and the LV
# cannot be opened here.
truncate -s $((root_size + 1048576)) "$BUILD/root.img"
printf 'label: dos\nstart=2048, size=%s, type=83\n' $((root_size / 512)) | sfdisk -q "$BUILD/root.img" ||
	die "sfdisk root.img"
RL=$(attach "$BUILD/root.img")
quietly mkfs-root mke2fs -q -F -t ext4 -L root -d "$BUILD/rootdir" "${RL}p1"
rm -rf "$BUILD/rootdir" "$BUILD/bootdir"
truncate -s "$swap_size" "$BUILD/swap.img"
quietly mkswap mkswap -L swap "$BUILD/swap.img"

# GRUB on the MBR by the guest's own tools, in a chroot of the new root
# with the new /boot (update-grub finds the root on a loop device, which
# the machine itself calls /dev/mapper/vg0-root: the name goes in after,
# as the base guest's build does for /dev/sda1).
phase "GRUB (grub-install, update-grub in a chroot)"
R=$BUILD/root
mkdir -p "$R"
mount "${RL}p1" "$R" || die "mount the new root"
mount "${LOOP}p1" "$R/boot" || die "mount the new /boot"
for fs in dev proc sys; do mount --bind "/$fs" "$R/$fs"; done
echo "(hd0) $LOOP" >"$R/boot/grub/device.map"
IN_ROOT=(env LC_ALL=C LANGUAGE=C LANG=C PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$R")
quietly grub-install "${IN_ROOT[@]}" grub-install --target=i386-pc "$LOOP"
quietly update-grub "${IN_ROOT[@]}" update-grub
sed -i "s#root=${RL}p1 #root=/dev/mapper/vg0-root #g" "$R/boot/grub/grub.cfg"
echo "(hd0) /dev/sda" >"$R/boot/grub/device.map"
cp "$R/boot/grub/grub.cfg" "$BUILD/grub.cfg"
lsinitramfs "$R"/boot/initrd.img-* >"$BUILD/initramfs.txt" || die "lsinitramfs"
for fs in sys proc dev boot; do umount "$R/$fs"; done
fstrim "$R" >/dev/null 2>&1 || true
umount "$R"
quietly e2fsck-root e2fsck -fn "${RL}p1"
quietly e2fsck-boot e2fsck -fn "${LOOP}p1"
if grep -n 'loop' "$BUILD/grub.cfg" >&2; then
	die "grub.cfg still names a loop device (above)"
fi

phase "the LVs' bytes by offset"
partx -d "$RL" 2>/dev/null || true
losetup -d "$RL"
# (from the file, whose holes read as nothing, not from the loop device)
dd if="$BUILD/root.img" of="$PV" bs=1M skip=1048576 count="$root_size" seek="$root_off" \
	iflag=skip_bytes,count_bytes oflag=seek_bytes conv=notrunc,sparse status=none ||
	die "writing the root into vg0/root"
dd if="$BUILD/swap.img" of="$PV" bs=1M seek="$swap_off" oflag=seek_bytes conv=notrunc status=none ||
	die "writing the swap into vg0/swap"
rm -f "$BUILD/root.img" "$BUILD/swap.img"
quietly vgck lv vgck vg0
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"
# (GRUB's boot.img carries the word GRUB; without it in this disk's MBR the
# machine would not boot, however well the rest was built)
head -c 440 "$BUILD/disk.raw" | grep -aq GRUB || die "the new disk's MBR holds no GRUB boot code"
grep -q 'root=/dev/mapper/vg0-root ' "$BUILD/grub.cfg" || { grep -n 'linux' "$BUILD/grub.cfg" >&2; die "grub.cfg does not boot root=/dev/mapper/vg0-root (its linux lines above)"; }
grep -q '/dm-mod\.ko' "$BUILD/initramfs.txt" || die "the initramfs lacks dm-mod"
grep -qE '(^|/)s?bin/lvm$' "$BUILD/initramfs.txt" || die "the initramfs lacks lvm"
if grep -E '/virtio(_blk|_pci|_scsi|_net)?\.ko' "$BUILD/initramfs.txt" >&2; then
	die "the initramfs holds virtio modules (above)"
fi
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/lvm.qcow2"
rm -f "$BUILD/disk.raw"

phase "booting it on IDE (about a minute under TCG)"
# shellcheck source=/dev/null
. "$LIB/guestboot.sh"
qemu-img create -q -f qcow2 -b "$BUILD/lvm.qcow2" -F qcow2 "$BUILD/sanity.qcow2"
guest_boot "$BUILD/sanity.qcow2" qcow2 ide "$BUILD/boot.log" 600 >&2 ||
	die "the LVM guest did not come up on IDE (see above)"
root=$(guest_marker_field "$BUILD/boot.log" root)
[ "$root" = /dev/mapper/vg0-root ] || die "the guest came up with root=$root, not /dev/mapper/vg0-root"
rm -f "$BUILD/sanity.qcow2"
variant_finish debian12-lvm "$BUILD/lvm.qcow2" "$BUILD/boot.log"
