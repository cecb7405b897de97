#!/bin/bash
# Builds the UEFI variant of the Debian 12 test guest, and prints the path of
# its cached qcow2 image on stdout (the last line; progress on stderr).
#
# The boot chain of an Ubuntu-like machine that booted UEFI: a GPT disk
# with an EFI system partition (FAT32) on sda1 and the root (ext4) on sda2;
# /etc/fstab names the root /dev/sda2 (not by UUID) and the ESP by its
# UUID, mounted on /boot/efi; the ESP holds the distribution's folder only,
# \EFI\debian with shim (shimx64.efi, signed for the Microsoft keys), the
# signed GRUB (grubx64.efi), MokManager and GRUB's stub grub.cfg (which
# finds the root by UUID and reads /boot/grub/grub.cfg), laid out as
# grub-install --uefi-secure-boot lays it out, with no removable-media
# loader (\EFI\BOOT\BOOTX64.EFI): Debian's default, so that the machine
# booted only from its firmware's boot entry, which a new VM's NVRAM does
# not have.  grub.cfg boots root=/dev/sda2; the initramfs is the base
# guest's (initramfs-tools, SATA/IDE drivers, no virtio).
#
# Made from the base guest (tests/guest/debian12.sh, built first when
# needed) on the host: the root by mke2fs -d from the base guest's root
# mounted read-only, /etc/fstab and grub.cfg (the guest's own update-grub in
# a chroot) written into it; the ESP by mkfs.fat and mtools (this kernel
# does not mount FAT), its loaders the host's shim-signed and
# grub-efi-amd64-signed files, the versions Debian 12 installs.  (The
# guest's package database keeps grub-pc: imager does not run the guest's
# boot loader installer.)
#
# A build boots the result once under OVMF on SATA, as the machine it
# stands for would: a fresh variable store has no boot entry for
# \EFI\debian\shimx64.efi, so the entry is played by OVMF's shell, which
# runs a startup.nsh that starts it; the file is removed again after the
# boot.  The build fails unless the marker says root=/dev/sda2.
#
# Cached as $IMAGER_TEST_CACHE/debian12-uefi-KEY.qcow2, KEY from the sha256
# of this script, of tests/lib/buildtree.sh and of the base guest's image
# name (variant_start).  Needs root, loop
# devices, mtools, dosfstools, OVMF, shim-signed and grub-efi-amd64-signed;
# exits 77 without root.  With IMAGER_TEST_NO_BUILD set (in a test, not a
# fixture) a missing image is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
SHIM=/usr/lib/shim
GRUBEFI=/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed

say() { printf 'debian12-uefi: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

for f in "$SHIM/shimx64.efi.signed" "$SHIM/mmx64.efi.signed" "$GRUBEFI" /usr/share/OVMF/OVMF_CODE_4M.fd; do
	[ -f "$f" ] || die "$f is missing (packages shim-signed, grub-efi-amd64-signed, ovmf)"
done
# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-uefi "$SELF"
export MTOOLS_SKIP_CHECK=1

phase "the disk: ESP on sda1 (128 MiB), root on sda2"
truncate -s 3G "$BUILD/disk.raw"
sfdisk -q "$BUILD/disk.raw" <<'TABLE' || die "sfdisk"
label: gpt
start=2048, size=262144, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System Partition"
start=264192, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4, name="root"
TABLE
LOOP=$(attach "$BUILD/disk.raw")

phase "the root: mke2fs -d from the base guest's root (read-only)"
qemu-img convert -O raw "$BASE" "$BUILD/base.raw" || die "qemu-img convert of the base guest"
BL=$(attach "$BUILD/base.raw" -r)
mkdir -p "$BUILD/base"
mount -o ro "${BL}p1" "$BUILD/base" || die "mount the base guest's root"
quietly mkfs-root mke2fs -q -F -t ext4 -L root -d "$BUILD/base" "${LOOP}p2"
umount "$BUILD/base"
partx -d "$BL" 2>/dev/null || true
losetup -d "$BL"
rm -f "$BUILD/base.raw"

phase "the ESP: FAT32, \\EFI\\debian (shim, signed GRUB, MokManager, stub grub.cfg)"
ESPID=1EF1
quietly mkfs-esp mkfs.fat -F 32 -n EFI -i "${ESPID}C0DE" "${LOOP}p1"
ESPUUID=$ESPID-C0DE
ROOTUUID=$(blkid -p -s UUID -o value "${LOOP}p2") || die "the new root has no UUID"
mkdir -p "$BUILD/esp/EFI/debian"
cp "$SHIM/shimx64.efi.signed" "$BUILD/esp/EFI/debian/shimx64.efi"
cp "$SHIM/mmx64.efi.signed" "$BUILD/esp/EFI/debian/mmx64.efi"
cp "$GRUBEFI" "$BUILD/esp/EFI/debian/grubx64.efi"
cat >"$BUILD/esp/EFI/debian/grub.cfg" <<CFG
search.fs_uuid $ROOTUUID root hd0,gpt2
set prefix=(\$root)'/boot/grub'
configfile \$prefix/grub.cfg
CFG
# OVMF's shell plays the machine's boot entry for the sanity boot (removed after it)
printf 'fs0:\\EFI\\debian\\shimx64.efi\r\n' >"$BUILD/esp/startup.nsh"
quietly mcopy-esp mcopy -s -i "${LOOP}p1" "$BUILD/esp/EFI" "$BUILD/esp/startup.nsh" ::/
rm -rf "$BUILD/esp"

phase "fstab, GRUB's configuration (update-grub in a chroot)"
R=$BUILD/root
mkdir -p "$R"
mount "${LOOP}p2" "$R" || die "mount the new root"
cat >"$R/etc/fstab" <<FSTAB
# <file system> <mount point>   <type>  <options>          <dump>  <pass>
/dev/sda2       /               ext4    errors=remount-ro  0       1
UUID=$ESPUUID  /boot/efi       vfat    umask=0077         0       1
FSTAB
mkdir -p "$R/boot/efi"
for fs in dev proc sys; do mount --bind "/$fs" "$R/$fs"; done
echo "(hd0) $LOOP" >"$R/boot/grub/device.map"
IN_ROOT=(env LC_ALL=C LANGUAGE=C LANG=C PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$R")
quietly update-grub "${IN_ROOT[@]}" update-grub
sed -i "s#root=${LOOP}p2 #root=/dev/sda2 #g" "$R/boot/grub/grub.cfg"
echo "(hd0) /dev/sda" >"$R/boot/grub/device.map"
cp "$R/boot/grub/grub.cfg" "$BUILD/grub.cfg"
for fs in sys proc dev; do umount "$R/$fs"; done
fstrim "$R" >/dev/null 2>&1 || true
umount "$R"
quietly e2fsck-root e2fsck -fn "${LOOP}p2"
quietly fsck-esp fsck.fat -n "${LOOP}p1"
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"
if grep -n 'loop' "$BUILD/grub.cfg" >&2; then
	die "grub.cfg still names a loop device (above)"
fi
grep -q 'root=/dev/sda2 ' "$BUILD/grub.cfg" || { grep -n 'linux' "$BUILD/grub.cfg" >&2; die "grub.cfg does not boot root=/dev/sda2 (its linux lines above)"; }

phase "booting it under OVMF on SATA (its boot entry played by the shell's startup.nsh)"
# (an overlay over the raw disk: the boot's writes stay out of it, and the
# disk is converted to qcow2 once, after startup.nsh is gone)
variant_boot_overlay uefi /dev/sda2 "UEFI guest"
# The machine's boot entry goes with the machine: startup.nsh out of the ESP.
LOOP=$(attach "$BUILD/disk.raw")
quietly mdel-startup mdel -i "${LOOP}p1" ::/startup.nsh
mdir -i "${LOOP}p1" -/ -b :: >"$BUILD/esp.txt" 2>&1 || die "mdir of the ESP"
quietly fsck-esp2 fsck.fat -n "${LOOP}p1"
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"
if grep -i -e 'startup.nsh' -e '/EFI/BOOT' "$BUILD/esp.txt" >&2; then
	die "the ESP still holds a startup.nsh or \\EFI\\BOOT (above)"
fi
grep -qi '::/EFI/debian/shimx64.efi' "$BUILD/esp.txt" || { cat "$BUILD/esp.txt" >&2; die "the ESP has no \\EFI\\debian\\shimx64.efi"; }
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/uefi.qcow2"
rm -f "$BUILD/disk.raw"
variant_finish debian12-uefi "$BUILD/uefi.qcow2" "$BUILD/boot.log"
