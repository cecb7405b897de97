#!/bin/bash
# Builds the encrypted variant of the Debian 12 test guest, and prints the
# path of its cached qcow2 image on stdout (the last line; progress on
# stderr).
#
# A machine installed with an encrypted root, as Debian's and RHEL's
# installers lay it out: MBR, /boot (ext4) on sda1 in the clear, a LUKS2
# volume on sda2 holding the root (ext4); /etc/crypttab opens it as
# luks-UUID (RHEL's name for it), /etc/fstab mounts
# /dev/mapper/luks-UUID on / and names /boot /dev/sda1.  The passphrase is
# in LUKS_PASSPHRASE below (the tests give it to imager with --key and
# --key-file).
#
# Made from the base guest (tests/guest/debian12.sh) on the host and in
# libguestfs's appliance (this host has no device-mapper: FACTS.md): the
# base guest's root and /boot packed by tar on the host, the table made by
# sfdisk; then guestfish makes /boot, formats the LUKS volume (cryptsetup
# in the appliance), opens it, makes the root inside and unpacks both.  It is not booted: its initramfs has no cryptsetup to
# ask for the passphrase (the tests convert it and read the result).
#
# Cached as $IMAGER_TEST_CACHE/debian12-luks-KEY.qcow2 (variant_start).
# Needs root, loop devices and libguestfs's appliance; exits 77 without
# root.  With IMAGER_TEST_NO_BUILD set (in a test, not a fixture) a
# missing image is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
LUKS_PASSPHRASE=imager-test-luks-passphrase

say() { printf 'debian12-luks: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v guestfish >/dev/null || die "guestfish is missing (libguestfs-tools)"
# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-luks "$SELF"
# (the libguestfs tools under a time bound, KVM or TCG as the product decides)
IMAGER=${IMAGER:-$HERE/../../build/imager}
# shellcheck source=/dev/null
. "$LIB/guestfs.sh"
guestfs_decide >&2
[ -z "${GUESTFS_PROBLEM:-}" ] || die "libguestfs's appliance cannot start here: $GUESTFS_PROBLEM"

phase "the base guest's files, packed on the host"
R=$BUILD/rootdir
variant_base_files "$R"
tar -C "$R/boot" -cf "$BUILD/boot.tar" . || die "tar of /boot"
rm -rf "${R:?}/boot" && mkdir -m 755 "$R/boot"
tar -C "$R" -cf "$BUILD/root.tar" . || die "tar of the root"
rm -rf "$R"

phase "the disk: /boot on sda1, LUKS2 on sda2 (in the appliance)"
truncate -s 3G "$BUILD/disk.raw"
sfdisk -q "$BUILD/disk.raw" <<'TABLE' || die "sfdisk"
label: dos
start=2048, size=1048576, type=83, bootable
start=1050624, type=83
TABLE
printf '%s\n' "$LUKS_PASSPHRASE" >"$BUILD/keys"
# fish COMMAND...: guestfish runs the commands (':' between them) on the
# disk, the passphrase on its stdin whenever one asks for it (a function:
# quietly gives commands /dev/null for stdin; and guestfish -f would not
# read the keys from stdin)
fish() { guestfish --keys-from-stdin -a "$BUILD/disk.raw" "$@" <"$BUILD/keys"; }
quietly guestfish-format fish run : mkfs ext4 /dev/sda1 label:boot : luks-format /dev/sda2 0
[ "$(blkid -p -s TYPE -o value --offset $((1050624 * 512)) "$BUILD/disk.raw")" = crypto_LUKS ] ||
	die "sda2 is not a LUKS volume"
UUID=$(blkid -p -s UUID -o value --offset $((1050624 * 512)) "$BUILD/disk.raw") || die "the LUKS volume has no UUID"
MAP=luks-$UUID

phase "the root inside it, /boot, fstab and crypttab (in the appliance)"
cat >"$BUILD/fstab" <<FSTAB
# <file system>                                  <mount point> <type> <options>          <dump> <pass>
/dev/mapper/$MAP  /             ext4   errors=remount-ro  0      1
/dev/sda1                                        /boot         ext4   defaults           0      2
FSTAB
printf '%s UUID=%s none luks,discard\n' "$MAP" "$UUID" >"$BUILD/crypttab"
quietly guestfish-fill fish run : cryptsetup-open /dev/sda2 "$MAP" : \
	mkfs ext4 "/dev/mapper/$MAP" label:root : mount "/dev/mapper/$MAP" / : \
	tar-in "$BUILD/root.tar" / : mount /dev/sda1 /boot : tar-in "$BUILD/boot.tar" /boot : \
	upload "$BUILD/fstab" /etc/fstab : upload "$BUILD/crypttab" /etc/crypttab : \
	command "sed -i s#root=/dev/sda1#root=/dev/mapper/$MAP# /boot/grub/grub.cfg" : \
	fstrim /boot : umount-all : cryptsetup-close "/dev/mapper/$MAP"
rm -f "$BUILD/root.tar" "$BUILD/boot.tar" "$BUILD/keys"
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/luks.qcow2"
rm -f "$BUILD/disk.raw"
: >"$BUILD/boot.log"   # (not booted: variant_finish keeps an empty log)
variant_finish debian12-luks "$BUILD/luks.qcow2" "$BUILD/boot.log"
