#!/bin/bash
# Builds the systemd-boot variant of the Debian 12 test guest, and prints
# the path of its cached qcow2 image on stdout (the last line; progress on
# stderr).
#
# A machine that boots through Boot Loader Specification type 1 entries
# read by systemd-boot, laid out as Debian's systemd-boot package and
# kernel-install lay it out:
#   - GPT: the ESP (FAT32, 256 MiB) on sda1, mounted on /boot/efi; the root
#     (ext4) on sda2; swap on sda3.  fstab names the root /dev/sda2 and the
#     swap /dev/sda3 (disk names), the ESP by UUID.
#   - The ESP: systemd-boot as \EFI\systemd\systemd-bootx64.efi and as the
#     removable-media loader \EFI\BOOT\BOOTX64.EFI (what bootctl install
#     copies; a new VM's empty NVRAM boots it), loader\loader.conf (no
#     menu), and the kernel and its initramfs copied beside the entry as
#     kernel-install does, \MACHINE-ID\VERSION\linux and
#     \MACHINE-ID\VERSION\initrd.img-VERSION: systemd-boot reads nothing
#     but the ESP, so the initramfs that boots is that copy, not /boot's.
#   - The entry, loader\entries\MACHINE-ID-VERSION.conf, with
#       options root=/dev/sda2 ro console=ttyS0,115200 panic=5 resume=/dev/sda3
#     (also in /etc/kernel/cmdline, where kernel-install takes it from).
#   - The base guest's initramfs (initramfs-tools, SATA/IDE drivers only).
# The loader is the host's systemd-boot-efi file, the version Debian 12
# installs (not signed: the guest boots with Secure Boot off).
#
# Made from the base guest (tests/guest/debian12.sh) on the host: the root
# by mke2fs -d from the base guest's files, the ESP by mkfs.fat and mtools
# (this kernel does not mount FAT).  A build boots it once under OVMF with
# a fresh variable store on SATA, through \EFI\BOOT\BOOTX64.EFI and the
# entry; the build fails unless the marker says root=/dev/sda2.
#
# Cached as $IMAGER_TEST_CACHE/debian12-bls-KEY.qcow2 (variant_start).
# Needs root, loop devices, mtools, dosfstools, OVMF and systemd-boot-efi;
# exits 77 without root.  With IMAGER_TEST_NO_BUILD set (in a test, not a
# fixture) a missing image is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
SDBOOT=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
# The machine id is fixed: the entry's name and the ESP's folder carry it.
MID=b15e0c7d9b3f4e21a8c6d0f2b4e6a8c2
OPTIONS="root=/dev/sda2 ro console=ttyS0,115200 panic=5 resume=/dev/sda3"

say() { printf 'debian12-bls: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

for f in "$SDBOOT" /usr/share/OVMF/OVMF_CODE_4M.fd; do
	[ -f "$f" ] || die "$f is missing (packages systemd-boot-efi, ovmf)"
done
for c in mkfs.fat mcopy mdir mke2fs; do
	command -v "$c" >/dev/null || die "$c is missing (dosfstools, mtools, e2fsprogs)"
done
# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-bls "$SELF"
export MTOOLS_SKIP_CHECK=1

phase "the base guest's files, on the host"
R=$BUILD/rootdir
variant_base_files "$R"
KVERS=("$R"/lib/modules/*)
[ ${#KVERS[@]} = 1 ] && [ -d "${KVERS[0]}" ] || die "expected one kernel, found: ${KVERS[*]}"
KVER=${KVERS[0]##*/}
[ -f "$R/boot/vmlinuz-$KVER" ] && [ -f "$R/boot/initrd.img-$KVER" ] || die "no kernel or initramfs in /boot"
echo "$MID" >"$R/etc/machine-id"
mkdir -p "$R/etc/kernel" "$R/boot/efi"
echo "$OPTIONS" >"$R/etc/kernel/cmdline"
cat >"$R/etc/fstab" <<'FSTAB'
# <file system> <mount point>   <type>  <options>          <dump>  <pass>
/dev/sda2       /               ext4    errors=remount-ro  0       1
ESP-UUID  /boot/efi       vfat    umask=0077         0       1
/dev/sda3       none            swap    sw                 0       0
FSTAB

phase "the disk: ESP sda1 (256 MiB), root sda2 (ext4 by mke2fs -d), swap sda3"
truncate -s 3G "$BUILD/disk.raw"
sfdisk -q "$BUILD/disk.raw" <<'TABLE' || die "sfdisk"
label: gpt
start=2048, size=524288, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System Partition"
start=526336, size=5242880, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4, name="root"
start=5769216, type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F, name="swap"
TABLE
LOOP=$(attach "$BUILD/disk.raw")
ESPID=B1E5
quietly mkfs-esp mkfs.fat -F 32 -n EFI -i "${ESPID}C0DE" "${LOOP}p1"
sed -i "s/^ESP-UUID /UUID=$ESPID-C0DE/" "$R/etc/fstab"
quietly mkswap mkswap -L swap "${LOOP}p3"
quietly mkfs-root mke2fs -q -F -t ext4 -L root -d "$R" "${LOOP}p2"
quietly e2fsck-root e2fsck -fn "${LOOP}p2"

phase "the ESP: systemd-boot, loader.conf, the entry, the kernel and its initramfs (kernel-install's layout)"
E=$BUILD/esp
mkdir -p "$E/EFI/systemd" "$E/EFI/BOOT" "$E/loader/entries" "$E/$MID/$KVER"
cp "$SDBOOT" "$E/EFI/systemd/systemd-bootx64.efi"
cp "$SDBOOT" "$E/EFI/BOOT/BOOTX64.EFI"
printf 'timeout 0\n' >"$E/loader/loader.conf"
cat >"$E/loader/entries/$MID-$KVER.conf" <<ENTRY
title      Debian GNU/Linux 12 (bookworm)
version    $KVER
machine-id $MID
sort-key   debian
options    $OPTIONS
linux      /$MID/$KVER/linux
initrd     /$MID/$KVER/initrd.img-$KVER
ENTRY
cp "$R/boot/vmlinuz-$KVER" "$E/$MID/$KVER/linux"
cp "$R/boot/initrd.img-$KVER" "$E/$MID/$KVER/initrd.img-$KVER"
rm -rf "$R"
quietly mcopy-esp mcopy -s -i "${LOOP}p1" "$E/EFI" "$E/loader" "$E/$MID" ::/
rm -rf "$E"
quietly fsck-esp fsck.fat -n "${LOOP}p1"
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"

phase "booting it under OVMF on SATA (fresh variables: \\EFI\\BOOT\\BOOTX64.EFI, systemd-boot, the entry)"
variant_boot_overlay uefi /dev/sda2 "systemd-boot guest"
# (on the file, not through a pipe: grep -q leaving early would make the
# writer's SIGPIPE a failure under pipefail)
grep -a -q "Command line: .*$OPTIONS" "$BUILD/boot.log" ||
	die "the kernel's command line is not the entry's options (the boot did not go through the entry)"
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/bls.qcow2"
rm -f "$BUILD/disk.raw"
variant_finish debian12-bls "$BUILD/bls.qcow2" "$BUILD/boot.log"
