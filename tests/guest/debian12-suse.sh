#!/bin/bash
# Builds the SUSE-like variant of the Debian 12 test guest, and prints the
# path of its cached qcow2 image on stdout (the last line; progress on
# stderr).
#
# The boot chain of a SUSE (SLES, openSUSE Leap) machine on BIOS, made of
# Debian 12 packages:
#   - GPT: a BIOS boot partition on sda1 (GRUB's core image; no ESP), the
#     root filesystem (btrfs) on sda2, swap on sda3.
#   - btrfs with SUSE's subvolumes: @ (the root, set as the filesystem's
#     default subvolume), @/home and @/var nested in it and mounted by
#     fstab with subvol=/@/home and subvol=/@/var, as SUSE's installer
#     writes them; fstab names the btrfs by UUID and the swap /dev/sda3.
#   - GRUB on BIOS (grub-pc), its grub.cfg from the guest's own update-grub,
#     which reads /boot inside the subvolume (/@/boot/...) and puts
#     rootflags=subvol=@ on the command line itself; the command line is
#     root=/dev/sda2 rootflags=subvol=@ resume=/dev/sda3 (disk names, as
#     older SUSE releases wrote them) with rd.shell=0 rd.emergency=reboot:
#     a root that never comes ends the boot (qemu -no-reboot).
#   - dracut in hostonly mode (SUSE's 01-dist.conf says hostonly="yes"),
#     set up by variant_dracut (tests/lib/buildtree.sh), which also adds
#     imager-initramfs.service: when /boot/imager-rebuild-initramfs exists
#     the machine rebuilds its own initramfs (`dracut -f`) and says so on
#     ttyS0.
#   - imager-mounts.service says on ttyS0, before the marker, where /home
#     and /var came from:
#       IMAGER-MOUNTS home=/dev/sda2[/@/home] var=/dev/sda2[/@/var]
#
# Made from the base guest (tests/guest/debian12.sh) on the host: its files
# copied, dracut and btrfs-progs installed by apt in a chroot, the btrfs
# made by mkfs.btrfs and `btrfs subvolume` on a loop device and filled
# through a loop mount of @, GRUB installed (grub-install --target=i386-pc)
# and configured in a chroot, a generic (not hostonly) dracut image for the
# first boot.  The build then boots it on SATA with an e1000 NIC (no
# virtio device at all); that boot must mount its root from /dev/sda2's
# subvolume @ and leave a hostonly image that holds the SATA drivers and
# btrfs and no virtio module (listed with lsinitramfs).
#
# Cached as $IMAGER_TEST_CACHE/debian12-suse-KEY.qcow2 (variant_start),
# its initramfs listing beside it (debian12-suse-KEY.initramfs.txt).  Needs
# root, loop devices, btrfs-progs and the network to Debian's mirror; exits
# 77 without root.  With IMAGER_TEST_NO_BUILD set (in a test, not a
# fixture) a missing image is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}

say() { printf 'debian12-suse: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

for c in mkfs.btrfs btrfs lsinitramfs; do
	command -v "$c" >/dev/null || die "$c is missing (btrfs-progs, initramfs-tools-core)"
done
# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-suse "$SELF"

phase "the base guest's files, on the host"
R=$BUILD/rootdir
variant_base_files "$R"

phase "dracut and btrfs-progs into the guest (apt in a chroot)"
variant_apt "$R" dracut btrfs-progs
KVERS=("$R"/lib/modules/*)
[ ${#KVERS[@]} = 1 ] && [ -d "${KVERS[0]}" ] || die "expected one kernel, found: ${KVERS[*]}"
KVER=${KVERS[0]##*/}

phase "SUSE's settings: dracut hostonly, kernel command line"
variant_dracut "$R"
# (GRUB adds root=, ro and rootflags=subvol=@ itself: its variable holds the rest)
ARGS="resume=/dev/sda3 rd.shell=0 rd.emergency=reboot console=ttyS0,115200 panic=5"
sed -i -e "s|^GRUB_CMDLINE_LINUX=.*|GRUB_CMDLINE_LINUX=\"$ARGS\"|" "$R/etc/default/grub"
grep -q 'resume=/dev/sda3' "$R/etc/default/grub" || die "GRUB_CMDLINE_LINUX was not set"
# Where /home and /var came from, on ttyS0 before the base guest's marker:
#   IMAGER-MOUNTS home=/dev/sda2[/@/home] var=/dev/sda2[/@/var]
cat >"$R/usr/local/sbin/imager-mounts" <<'SCRIPT'
#!/bin/sh
printf '\r\nIMAGER-MOUNTS home=%s var=%s\r\n' "$(findmnt -n -o SOURCE /home)" "$(findmnt -n -o SOURCE /var)" >/dev/ttyS0
SCRIPT
chmod 755 "$R/usr/local/sbin/imager-mounts"
cat >"$R/etc/systemd/system/imager-mounts.service" <<'UNIT'
[Unit]
Description=Tell the imager tests where /home and /var came from
DefaultDependencies=no
After=local-fs.target
Before=imager-marker.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/imager-mounts

[Install]
WantedBy=sysinit.target
UNIT
binds "$R"
in_chroot "$R" systemctl enable imager-mounts.service >/dev/null 2>&1 || die "systemctl enable imager-mounts"
unbinds "$R"

phase "the disk: BIOS boot sda1, btrfs sda2 (@, @/home, @/var), swap sda3"
truncate -s 4G "$BUILD/disk.raw"
sfdisk -q "$BUILD/disk.raw" <<'TABLE' || die "sfdisk"
label: gpt
start=2048, size=2048, type=21686148-6449-6E6F-744E-656564454649, name="BIOS boot"
start=4096, size=7856128, type=0FC63DAF-8483-4772-8E79-3D8D7DB1A3E4
start=7860224, type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F
TABLE
LOOP=$(attach "$BUILD/disk.raw")
quietly mkfs-root mkfs.btrfs -q -f -L root "${LOOP}p2"
quietly mkswap mkswap -L swap "${LOOP}p3"
UUID=$(blkid -p -s UUID -o value "${LOOP}p2") || die "the btrfs has no UUID"
T=$BUILD/top
mkdir -p "$T"
mount "${LOOP}p2" "$T" || die "mount the btrfs"
for v in @ @/home @/var; do
	quietly "subvolume-${v//\//-}" btrfs subvolume create "$T/$v"
done
quietly set-default btrfs subvolume set-default "$T/@"
umount "$T"

M=$BUILD/root
mkdir -p "$M"
mount -o subvol=@ "${LOOP}p2" "$M" || die "mount the subvolume @"
[ "$(btrfs subvolume get-default "$M" | awk '{ print $NF }')" = @ ] || die "the default subvolume is not @"
cp -a "$R/." "$M/" || die "copy the root's files"
rm -rf "$R"
cat >"$M/etc/fstab" <<FSTAB
# <file system>                            <mount point>  <type>  <options>         <dump> <pass>
UUID=$UUID  /              btrfs   defaults          0      0
UUID=$UUID  /home          btrfs   subvol=/@/home    0      0
UUID=$UUID  /var           btrfs   subvol=/@/var     0      0
/dev/sda3                                  swap           swap    defaults          0      0
FSTAB
: >"$M/boot/imager-rebuild-initramfs"

phase "GRUB on the BIOS boot partition, its configuration and a generic dracut image (in a chroot)"
binds "$M"
quietly grub-install in_chroot "$M" grub-install --target=i386-pc "$LOOP"
# Not hostonly: the build host's devices (virtio) are not the machine's.
# The machine's first boot replaces it with its own hostonly image.
quietly dracut-generic in_chroot "$M" dracut --no-hostonly --no-hostonly-cmdline --force \
	"/boot/initrd.img-$KVER" "$KVER"
quietly update-grub in_chroot "$M" update-grub
unbinds "$M"
# Without udev, grub-mkconfig names the loop device as root=; the physical
# machine's kernel sees its disk as /dev/sda.
sed -i "s#root=${LOOP}p2 #root=/dev/sda2 #g" "$M/boot/grub/grub.cfg"
echo "(hd0) /dev/sda" >"$M/boot/grub/device.map"
cp "$M/boot/grub/grub.cfg" "$BUILD/grub.cfg"
generic=$(lsinitramfs "$M/boot/initrd.img-$KVER" | grep -c '\.ko') || die "lsinitramfs of the generic image"
sync
fstrim "$M" >/dev/null 2>&1 || true
umount "$M"
quietly btrfs-check btrfs check --readonly "${LOOP}p2"
if grep -n 'loop' "$BUILD/grub.cfg" >&2; then
	die "grub.cfg still names a loop device (above)"
fi
grep -q "linux[[:space:]]*/@/boot/vmlinuz-$KVER root=/dev/sda2 ro rootflags=subvol=@ resume=/dev/sda3" "$BUILD/grub.cfg" ||
	{ grep -n 'linux' "$BUILD/grub.cfg" >&2; die "grub.cfg does not boot /@/boot's kernel with root=/dev/sda2 rootflags=subvol=@ (its linux lines above)"; }
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"

phase "booting it on SATA with an e1000 NIC (BIOS)"
# shellcheck source=/dev/null
. "$LIB/guestboot.sh"
# (on the raw disk itself: the hostonly image this boot makes is the machine's)
GUEST_NIC=e1000 guest_boot "$BUILD/disk.raw" raw sata "$BUILD/boot.log" 900 >&2 ||
	die "the SUSE-like guest did not come up on SATA (see above)"
root=$(guest_marker_field "$BUILD/boot.log" root)
[ "$root" = "/dev/sda2[/@]" ] || die "the guest came up with root=$root, not /dev/sda2[/@]"
mounts=$(tr -d '\r' <"$BUILD/boot.log" | grep -a -o 'IMAGER-MOUNTS .*' | tail -n 1)
[ "$mounts" = "IMAGER-MOUNTS home=/dev/sda2[/@/home] var=/dev/sda2[/@/var]" ] ||
	die "/home and /var did not come from their subvolumes: '${mounts:-no line}'"
variant_build_rebuilt "$BUILD/boot.log"

phase "the hostonly image: SATA drivers and btrfs, no virtio (lsinitramfs)"
LOOP=$(attach "$BUILD/disk.raw")
mount -o ro,subvol=@ "${LOOP}p2" "$M" || die "mount @ after the boot"
lsinitramfs "$M/boot/initrd.img-$KVER" >"$BUILD/initramfs.txt" || die "lsinitramfs"
[ ! -e "$M/boot/imager-rebuild-initramfs" ] || die "the boot left /boot/imager-rebuild-initramfs"
umount "$M"
quietly btrfs-check2 btrfs check --readonly "${LOOP}p2"
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"
grep -qE '(^|/)s?bin/btrfs$' "$BUILD/initramfs.txt" || die "the hostonly image lacks btrfs"
variant_hostonly "$BUILD/initramfs.txt" "$generic" ahci sd_mod btrfs
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/suse.qcow2"
rm -f "$BUILD/disk.raw"
variant_finish debian12-suse "$BUILD/suse.qcow2" "$BUILD/boot.log" "$BUILD/initramfs.txt"
