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
# first when needed) in one libguestfs session: this host has no
# device-mapper, the appliance does.  The base guest's files are copied
# over as they are, so the marker service (IMAGER-GUEST-UP root=...) is the
# same; a build boots the result once on IDE and fails unless the marker
# says root=/dev/mapper/vg0-root.
#
# Cached as $IMAGER_TEST_CACHE/debian12-lvm-KEY.qcow2, KEY from the sha256
# of this script and of the base guest's image name (so a new base guest
# makes a new variant).  Needs root and libguestfs; exits 77 without root.
# With IMAGER_TEST_NO_BUILD set (in a test, not a fixture) a missing image
# is an error, not a build.
# The libguestfs environment (LIBGUESTFS_BACKEND, _SETTINGS) is the
# caller's: tests/lib/guestfs.sh decides KVM or TCG.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}

say() { printf 'debian12-lvm: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ "$(id -u)" != 0 ]; then
	say "building the test guest needs root"
	exit 77
fi
BASE=$(bash "$HERE/debian12.sh" | tail -n 1) || exit $?
[ -f "$BASE" ] || die "the base guest was not built"
KEY=$( (sha256sum "$SELF" | cut -c1-64; basename "$BASE") | sha256sum | cut -c1-16)
IMAGE=$CACHE/debian12-lvm-$KEY.qcow2
BOOTLOG=$CACHE/debian12-lvm-$KEY.boot.log
if [ -f "$IMAGE" ]; then
	echo "$IMAGE"
	exit 0
fi
if [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
	say "the LVM guest is not in $CACHE: fixtures/debian12-lvm failed or did not run"
	exit 1
fi

exec 9>"$CACHE/debian12-lvm.lock"
flock 9
if [ -f "$IMAGE" ]; then
	echo "$IMAGE"
	exit 0
fi
BUILD=$(mktemp -d "$CACHE/debian12-lvm-$KEY.build.XXXXXX")
trap 'rm -rf "$BUILD"' EXIT
START=$SECONDS
phase() { say "[$((SECONDS - START))s] $*"; }
export LIBGUESTFS_BACKEND=${LIBGUESTFS_BACKEND:-direct}
# guestfish under a time limit, booting the product's quick kernel when the
# caller's guestfs_decide found one (tests/lib/guestfs.sh)
# shellcheck source=/dev/null
. "$LIB/guestfs.sh"

# (the files are copied inside the appliance, disk to disk, with cp -a:
# owners, modes, links and xattrs kept; no copy of them goes through the
# host)
phase "copying the base guest into an LVM layout (one libguestfs appliance)"
cat >"$BUILD/fstab" <<'FSTAB'
# <file system>         <mount point>   <type>  <options>          <dump>  <pass>
/dev/mapper/vg0-root    /               ext4    errors=remount-ro  0       1
/dev/sda1               /boot           ext4    defaults           0       2
/dev/mapper/vg0-swap    none            swap    sw                 0       0
FSTAB
# The base guest's initramfs already holds LVM (lvm2's hook adds lvm,
# dmsetup and dm-mod whatever the root is), and SATA/IDE but no virtio:
# it stays.  GRUB goes onto the new disk, and its menu is made anew for
# /boot on sda1 and root=/dev/mapper/vg0-root.
#
# GRUB goes onto the disk that holds /boot, found from the mount, never by
# the name /dev/sda: inside the appliance the kernel probes its SCSI disks
# asynchronously, so its sdX names need not follow the order the disks were
# added in.  libguestfs's own calls translate its names (/dev/sda: the first
# disk added) to the kernel's, but a shell command inside the guest sees the
# kernel's.  Named /dev/sda, grub-install once went to the appliance's own
# root disk ("File system `ext2' doesn't support embedding": a CI try of
# this stop) and, before, to the base guest's throwaway overlay: the build
# then passed with no boot code on the new disk, and its sanity boot sat
# silent at "No bootable device" for 600 s, twice (issue 32).  device.map
# names that disk while GRUB is installed, then /dev/sda again (the name
# the machine itself gives its disk).
cat >"$BUILD/grub" <<'SH'
#!/bin/sh
set -e
part=$(findmnt -n -o SOURCE /boot)
disk=/dev/$(lsblk -n -d -o PKNAME "$part")
[ -b "$disk" ] || { echo "imager-grub: no disk for /boot ($part)" >&2; exit 1; }
echo "imager-grub: /boot is $part, on $disk"
echo "(hd0) $disk" >/boot/grub/device.map
grub-install --target=i386-pc "$disk"
update-grub
echo "(hd0) /dev/sda" >/boot/grub/device.map
SH
# sda: the new disk; sdb: the base guest, read-only.
cat >"$BUILD/build.gf" <<EOF
add $BUILD/disk.raw format:raw discard:besteffort
add $BASE format:qcow2 readonly:true
run
part-init /dev/sda mbr
part-add /dev/sda p 2048 616447
part-add /dev/sda p 616448 6289407
part-set-bootable /dev/sda 1 true
part-set-mbr-id /dev/sda 2 0x8e
pvcreate /dev/sda2
vgcreate vg0 /dev/sda2
lvcreate swap vg0 256
lvcreate-free root vg0 100
mkfs ext4 /dev/sda1 label:boot
mkfs ext4 /dev/vg0/root label:root
mkswap /dev/vg0/swap label:swap
mount /dev/vg0/root /
mkdir /boot
mount /dev/sda1 /boot
mkdir /old
mount-ro /dev/sdb1 /old
cp-a /old/. /
umount /old
rmdir /old
upload $BUILD/fstab /etc/fstab
upload $BUILD/grub /tmp/imager-grub
sh "sh /tmp/imager-grub"
rm /tmp/imager-grub
download /boot/grub/grub.cfg $BUILD/grub.cfg
sh "lsinitramfs /boot/initrd.img-* > /tmp/initramfs.txt"
download /tmp/initramfs.txt $BUILD/initramfs.txt
rm /tmp/initramfs.txt
fstrim /
fstrim /boot
EOF
# One session, traced (each call and its return in guestfish.log, so that
# a stall shows the call it stopped in).  Alone it takes ~90 s, ~250 s
# beside two busy cores; a session that stops moving ends after 600 s
# with its trace, and runs once more (one stalled for 7 minutes, its qemu
# idle, in a cold make check of this stop: the only one seen in dozens).
session() {
	rm -f "$BUILD/disk.raw" && truncate -s 3G "$BUILD/disk.raw" &&
		LIBGUESTFS_TRACE=1 GUESTFS_TOOL_SECONDS=600 guestfish --rw <"$BUILD/build.gf" >"$BUILD/guestfish.log" 2>&1
}
rc=0
session || rc=$?
if [ "$rc" = 124 ]; then
	tail -n 30 "$BUILD/guestfish.log" >&2
	phase "the appliance stalled (its trace above): once more"
	rc=0
	session || rc=$?
fi
[ "$rc" = 0 ] || { tail -n 40 "$BUILD/guestfish.log" >&2; die "guestfish failed"; }
sed -n '/imager-grub:/p' "$BUILD/guestfish.log" >&2
# (GRUB's boot.img carries the word GRUB; without it in this disk's MBR the
# machine would not boot, however well the rest was built)
head -c 440 "$BUILD/disk.raw" | grep -aq GRUB || die "the new disk's MBR holds no GRUB boot code"
grep -q 'root=/dev/mapper/vg0-root' "$BUILD/grub.cfg" || die "grub.cfg does not boot root=/dev/mapper/vg0-root"
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
tr -d '\r' <"$BUILD/boot.log" >"$BOOTLOG"
mv "$BUILD/lvm.qcow2" "$IMAGE"
for old in "$CACHE"/debian12-lvm-*.qcow2 "$CACHE"/debian12-lvm-*.boot.log; do
	case $old in "$IMAGE" | "$BOOTLOG") continue ;; esac
	rm -f "$old"
done
phase "built $IMAGE ($(du -h "$IMAGE" | cut -f1))"
echo "$IMAGE"
