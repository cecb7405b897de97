#!/bin/bash
# Builds the RHEL-like variant of the Debian 12 test guest, and prints the
# path of its cached qcow2 image on stdout (the last line; progress on
# stderr).
#
# The boot chain of a RHEL 9 (Rocky, Alma) machine, made of Debian 12
# packages:
#   - GPT: the ESP (FAT32, 128 MiB) on sda1, /boot (XFS) on sda2, an LVM PV
#     on sda3; VG vg0 holds the root (XFS, LV root) and swap (LV swap);
#     fstab names /dev/mapper/vg0-root and -swap, /boot and the ESP by UUID.
#   - UEFI with shim and GRUB laid out as RHEL's shim-x64 and grub2-efi-x64
#     packages lay them out: \EFI\redhat holds shimx64.efi, grubx64.efi,
#     mmx64.efi, BOOTX64.CSV and the stub grub.cfg (which finds /boot by
#     UUID); \EFI\BOOT holds BOOTX64.EFI (shim) and fbx64.efi, shim's
#     fallback, which on a new machine's empty NVRAM creates the boot entry
#     from BOOTX64.CSV and starts it (no reset: there is no TPM).  The
#     loaders are the host's shim-signed and grub-efi-amd64-signed files.
#   - dracut, with RHEL's hostonly="yes" (dracut.conf.d/01-dist.conf): the
#     initramfs holds only the drivers of the machine it was built on.
#     dracut replaced initramfs-tools as on a Debian machine switched to
#     it: initramfs-tools-core stays, with /etc/initramfs-tools and
#     mkinitramfs, so the programs alone would name the wrong tool.
#   - kernel command line root=/dev/mapper/vg0-root rd.lvm.lv=vg0/root
#     rd.lvm.lv=vg0/swap resume=/dev/mapper/vg0-swap, in GRUB's grub.cfg
#     (update-grub), in /etc/kernel/cmdline and in a Boot Loader
#     Specification entry, /boot/loader/entries/MACHINE-ID-KVER.conf, as
#     RHEL keeps it (Debian's GRUB does not read those entries: the boot
#     goes through grub.cfg).  rd.shell=0 rd.emergency=reboot: a root that
#     never comes ends the boot (qemu -no-reboot) instead of a shell.
#   - imager-initramfs.service (tests/lib/buildtree.sh, variant_dracut):
#     when /boot/imager-rebuild-initramfs exists, the machine rebuilds its
#     own initramfs with `dracut -f` and says so on ttyS0.  The build puts
#     the file there, so the build's boot makes the hostonly image of a
#     SATA machine; a test puts it there after a conversion.
#
# Made from the base guest (tests/guest/debian12.sh) on the host: its files
# copied, dracut and xfsprogs installed by apt in a chroot (from the mirror
# of the base guest's sources.list), the LVM made by the real LVM tools with
# activation off (no device-mapper here: FACTS.md) and the root written
# into its LV by offset, /boot and the root made by mkfs.xfs and filled
# through loop mounts, update-grub in a chroot, a generic (not hostonly)
# dracut image for the first boot.  The build then boots it under OVMF on
# SATA with an e1000 NIC (no virtio device at all); that boot must come up
# with root=/dev/mapper/vg0-root through shim's fallback, and leave a
# hostonly image that holds the SATA drivers and no virtio module
# (listed with lsinitramfs).
#
# Cached as $IMAGER_TEST_CACHE/debian12-rhel-KEY.qcow2, KEY from the sha256
# of this script, of tests/lib/buildtree.sh and of the base guest's image
# name (variant_start); its initramfs listing beside it
# (debian12-rhel-KEY.initramfs.txt).  Needs root, loop devices, the LVM
# tools, xfsprogs, mtools, dosfstools, OVMF, shim-signed,
# grub-efi-amd64-signed and the network to Debian's mirror; exits 77
# without root.  With IMAGER_TEST_NO_BUILD set (in a test, not a fixture)
# a missing image is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
SHIM=/usr/lib/shim
GRUBEFI=/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed
# RHEL's machine id is fixed at install; the BLS entry's name carries it.
MID=5e1a0c7d9b3f4e21a8c6d0f2b4e6a8c1

say() { printf 'debian12-rhel: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

for f in "$SHIM/shimx64.efi.signed" "$SHIM/mmx64.efi.signed" "$SHIM/fbx64.efi.signed" "$GRUBEFI" \
	/usr/share/OVMF/OVMF_CODE_4M.fd; do
	[ -f "$f" ] || die "$f is missing (packages shim-signed, grub-efi-amd64-signed, ovmf)"
done
for c in mkfs.xfs xfs_repair mkfs.fat mcopy pvcreate lsinitramfs iconv; do
	command -v "$c" >/dev/null || die "$c is missing (xfsprogs, dosfstools, mtools, lvm2, initramfs-tools-core)"
done
# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-rhel "$SELF"
export MTOOLS_SKIP_CHECK=1

phase "the base guest's files, on the host"
R=$BUILD/rootdir
variant_base_files "$R"

phase "dracut and xfsprogs into the guest (apt in a chroot: initramfs-tools goes, its core stays)"
variant_apt "$R" dracut xfsprogs
if in_chroot "$R" dpkg-query -W -f '${Status}\n' initramfs-tools 2>/dev/null | grep -q 'ok installed'; then
	die "initramfs-tools is still installed"
fi
[ -x "$R/usr/sbin/mkinitramfs" ] && [ -d "$R/etc/initramfs-tools" ] ||
	die "mkinitramfs or /etc/initramfs-tools went with initramfs-tools (the trap this guest sets is gone)"
KVERS=("$R"/lib/modules/*)
[ ${#KVERS[@]} = 1 ] && [ -d "${KVERS[0]}" ] || die "expected one kernel, found: ${KVERS[*]}"
KVER=${KVERS[0]##*/}

phase "RHEL's settings: dracut hostonly, machine id, fstab placeholders, kernel command line, BLS entry"
variant_dracut "$R"
echo "$MID" >"$R/etc/machine-id"
# (GRUB adds root= and ro itself: its variable holds the rest)
ARGS="rd.lvm.lv=vg0/root rd.lvm.lv=vg0/swap resume=/dev/mapper/vg0-swap rd.shell=0 rd.emergency=reboot console=ttyS0,115200 panic=5"
CMDLINE="root=/dev/mapper/vg0-root ro $ARGS"
mkdir -p "$R/etc/kernel"
echo "$CMDLINE" >"$R/etc/kernel/cmdline"
sed -i -e "s|^GRUB_CMDLINE_LINUX=.*|GRUB_CMDLINE_LINUX=\"$ARGS\"|" "$R/etc/default/grub"
echo 'GRUB_ENABLE_BLSCFG=true' >>"$R/etc/default/grub"
grep -q 'rd.lvm.lv=vg0/root' "$R/etc/default/grub" || die "GRUB_CMDLINE_LINUX was not set"
mkdir -p "$R/boot/loader/entries"
cat >"$R/boot/loader/entries/$MID-$KVER.conf" <<BLS
title Debian GNU/Linux ($KVER) 12 (RHEL-like)
version $KVER
linux /vmlinuz-$KVER
initrd /initrd.img-$KVER
options $CMDLINE
grub_users \$grub_users
grub_arg --unrestricted
grub_class debian
BLS

# /boot becomes a partition of its own; the first boot makes the hostonly image
mv "$R/boot" "$BUILD/bootdir" && mkdir -m 755 "$R/boot" || die "move /boot's files"
: >"$BUILD/bootdir/imager-rebuild-initramfs"

phase "the disk: ESP sda1, /boot sda2 (XFS), PV of vg0 on sda3 (swap, root)"
truncate -s 4G "$BUILD/disk.raw"
sfdisk -q "$BUILD/disk.raw" <<'TABLE' || die "sfdisk"
label: gpt
start=2048, size=262144, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System Partition"
start=264192, size=655360, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4
start=919552, type=E6D6D379-F507-44C2-A23C-238F2A3DF928
TABLE
LOOP=$(attach "$BUILD/disk.raw")
PV=${LOOP}p3
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

phase "the filesystems: XFS /boot and root (filled through loop mounts), swap, the ESP"
quietly mkfs-boot mkfs.xfs -q -f -L boot "${LOOP}p2"
BOOTUUID=$(blkid -p -s UUID -o value "${LOOP}p2") || die "/boot has no UUID"
# The root in the one partition of a disk of its own, written into its LV
# afterwards (grub-mkconfig writes no entry for a root on a whole loop
# device; the LV cannot be opened here).
truncate -s $((root_size + 1048576)) "$BUILD/root.img"
printf 'label: dos\nstart=2048, size=%s, type=83\n' $((root_size / 512)) | sfdisk -q "$BUILD/root.img" ||
	die "sfdisk root.img"
RL=$(attach "$BUILD/root.img")
quietly mkfs-root mkfs.xfs -q -f -L root "${RL}p1"
truncate -s "$swap_size" "$BUILD/swap.img"
quietly mkswap mkswap -L swap "$BUILD/swap.img"
ESPID=2EF1
quietly mkfs-esp mkfs.fat -F 32 -n EFI -i "${ESPID}C0DE" "${LOOP}p1"
ESPUUID=$ESPID-C0DE

M=$BUILD/root
mkdir -p "$M"
mount "${RL}p1" "$M" || die "mount the new root"
cp -a "$R/." "$M/" || die "copy the root's files"
mount "${LOOP}p2" "$M/boot" || die "mount the new /boot"
cp -a "$BUILD/bootdir/." "$M/boot/" || die "copy /boot's files"
rm -rf "$R" "$BUILD/bootdir"
cat >"$M/etc/fstab" <<FSTAB
# <file system>          <mount point>  <type>  <options>                   <dump> <pass>
/dev/mapper/vg0-root     /              xfs     defaults                    0      0
UUID=$BOOTUUID /boot          xfs     defaults                    0      0
UUID=$ESPUUID           /boot/efi      vfat    umask=0077,shortname=winnt  0      2
/dev/mapper/vg0-swap     none           swap    defaults                    0      0
FSTAB
mkdir -p "$M/boot/efi"

phase "GRUB's configuration and a generic dracut image (in a chroot)"
binds "$M"
# Not hostonly: the build host's devices (virtio) are not the machine's.
# The machine's first boot replaces it with its own hostonly image.
quietly dracut-generic in_chroot "$M" dracut --no-hostonly --no-hostonly-cmdline --force \
	"/boot/initrd.img-$KVER" "$KVER"
quietly update-grub in_chroot "$M" update-grub
sed -i "s#root=${RL}p1 #root=/dev/mapper/vg0-root #g" "$M/boot/grub/grub.cfg"
cp "$M/boot/grub/grub.cfg" "$BUILD/grub.cfg"
generic=$(lsinitramfs "$M/boot/initrd.img-$KVER" | grep -c '\.ko') || die "lsinitramfs of the generic image"
unbinds "$M"
umount "$M/boot"
fstrim "$M" >/dev/null 2>&1 || true
umount "$M"
quietly xfs-repair-root xfs_repair -n "${RL}p1"
quietly xfs-repair-boot xfs_repair -n "${LOOP}p2"
if grep -n 'loop' "$BUILD/grub.cfg" >&2; then
	die "grub.cfg still names a loop device (above)"
fi
grep -q 'root=/dev/mapper/vg0-root .*rd.lvm.lv=vg0/root' "$BUILD/grub.cfg" ||
	{ grep -n 'linux' "$BUILD/grub.cfg" >&2; die "grub.cfg does not boot root=/dev/mapper/vg0-root with rd.lvm.lv (its linux lines above)"; }

phase "the ESP: \\EFI\\redhat (shim, GRUB, MokManager, BOOTX64.CSV, stub grub.cfg), \\EFI\\BOOT (shim, fallback)"
E=$BUILD/esp
mkdir -p "$E/EFI/redhat" "$E/EFI/BOOT"
cp "$SHIM/shimx64.efi.signed" "$E/EFI/redhat/shimx64.efi"
cp "$SHIM/mmx64.efi.signed" "$E/EFI/redhat/mmx64.efi"
cp "$GRUBEFI" "$E/EFI/redhat/grubx64.efi"
printf 'shimx64.efi,redhat,,This is the boot entry for redhat\n' | iconv -f UTF-8 -t UTF-16LE >"$E/EFI/redhat/BOOTX64.CSV"
cat >"$E/EFI/redhat/grub.cfg" <<CFG
search --no-floppy --fs-uuid --set=dev $BOOTUUID
set prefix=(\$dev)/grub
export \$prefix
configfile \$prefix/grub.cfg
CFG
cp "$SHIM/shimx64.efi.signed" "$E/EFI/BOOT/BOOTX64.EFI"
cp "$SHIM/fbx64.efi.signed" "$E/EFI/BOOT/fbx64.efi"
quietly mcopy-esp mcopy -s -i "${LOOP}p1" "$E/EFI" ::/
rm -rf "$E"
quietly fsck-esp fsck.fat -n "${LOOP}p1"

phase "the LVs' bytes by offset"
partx -d "$RL" 2>/dev/null || true
losetup -d "$RL"
dd if="$BUILD/root.img" of="$PV" bs=1M skip=1048576 count="$root_size" seek="$root_off" \
	iflag=skip_bytes,count_bytes oflag=seek_bytes conv=notrunc,sparse status=none ||
	die "writing the root into vg0/root"
dd if="$BUILD/swap.img" of="$PV" bs=1M seek="$swap_off" oflag=seek_bytes conv=notrunc status=none ||
	die "writing the swap into vg0/swap"
rm -f "$BUILD/root.img" "$BUILD/swap.img"
quietly vgck lv vgck vg0
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"

phase "booting it under OVMF on SATA with an e1000 NIC (fresh NVRAM: shim's fallback makes the entry)"
# shellcheck source=/dev/null
. "$LIB/guestboot.sh"
# (on the raw disk itself: the hostonly image this boot makes is the machine's)
GUEST_NIC=e1000 GUEST_FIRMWARE=uefi guest_boot "$BUILD/disk.raw" raw sata "$BUILD/boot.log" 900 >&2 ||
	die "the RHEL-like guest did not come up on SATA (see above)"
root=$(guest_marker_field "$BUILD/boot.log" root)
[ "$root" = /dev/mapper/vg0-root ] || die "the guest came up with root=$root, not /dev/mapper/vg0-root"
variant_build_rebuilt "$BUILD/boot.log"
rm -f "$BUILD/boot.log.vars.fd"

phase "the hostonly image: SATA drivers, no virtio (lsinitramfs); /boot trimmed"
LOOP=$(attach "$BUILD/disk.raw")
mkdir -p "$BUILD/boot"
mount "${LOOP}p2" "$BUILD/boot" || die "mount /boot after the boot"
lsinitramfs "$BUILD/boot/initrd.img-$KVER" >"$BUILD/initramfs.txt" || die "lsinitramfs"
[ ! -e "$BUILD/boot/imager-rebuild-initramfs" ] || die "the boot left /boot/imager-rebuild-initramfs"
fstrim "$BUILD/boot" >/dev/null 2>&1 || true
umount "$BUILD/boot"
quietly xfs-repair-boot2 xfs_repair -n "${LOOP}p2"
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"
grep -qE '(^|/)s?bin/lvm$' "$BUILD/initramfs.txt" || die "the hostonly image lacks lvm"
variant_hostonly "$BUILD/initramfs.txt" "$generic" ahci sd_mod xfs dm-mod
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/rhel.qcow2"
rm -f "$BUILD/disk.raw"
variant_finish debian12-rhel "$BUILD/rhel.qcow2" "$BUILD/boot.log" "$BUILD/initramfs.txt"
