#!/bin/bash
# Builds the VMware-like variant of the Debian 12 test guest, and prints the
# path of its cached qcow2 image on stdout (the last line; progress on
# stderr).
#
# The base guest (tests/guest/debian12.sh) as it would be on VMware, where
# its administrator installed the guest agent and made sure the VM's
# paravirtual disk controller and NIC are in the initramfs:
#   - the base guest's disk as it is: MBR, ext4 root on sda1, swap on
#     sda2, GRUB on the MBR, fstab and grub.cfg naming /dev/sda1;
#   - open-vm-tools (Debian 12's package) installed, its services enabled
#     as its postinst enables them: open-vm-tools.service in
#     multi-user.target.wants (with its alias vmtoolsd.service),
#     vgauth.service in open-vm-tools.service.requires (RequiredBy=), and
#     the SysV links of /etc/init.d/open-vm-tools in /etc/rc?.d;
#   - /etc/initramfs-tools/modules lists vmw_pvscsi and vmxnet3, and the
#     initramfs is rebuilt with them: it holds the base guest's SATA/IDE
#     drivers, vmw_pvscsi and vmxnet3, and no virtio module (its listing
#     beside the image).
# On qemu the services do not start (ConditionVirtualization=vmware), so
# the guest boots as the base one does.
#
# Made from the base guest on the host: its disk converted to raw and its
# root mounted through a loop device, open-vm-tools installed by apt in a
# chroot (from the mirror of the base guest's sources.list; no service
# started: a policy-rc.d says no while it installs), the initramfs rebuilt
# by the guest's own update-initramfs in the chroot with the base guest's
# module list (read from its initramfs's conf/modules: MODULES=dep in a
# chroot would look at the build host's devices) plus the administrator's
# lines.  The build then boots it once on SATA (BIOS, through an overlay):
# the marker must say root=/dev/sda1.
#
# Cached as $IMAGER_TEST_CACHE/debian12-vmware-KEY.qcow2 (variant_start),
# its initramfs listing beside it (debian12-vmware-KEY.initramfs.txt).
# Needs root, loop devices, initramfs-tools-core (unmkinitramfs,
# lsinitramfs) and the network to Debian's mirror; exits 77 without root.
# With IMAGER_TEST_NO_BUILD set (in a test, not a fixture) a missing image
# is an error, not a build.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
LIB=$(dirname "$SELF")/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}

say() { printf 'debian12-vmware: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# shellcheck source=/dev/null
. "$LIB/buildtree.sh"
variant_start debian12-vmware "$SELF"
# (after the base guest's build, which installs them)
for c in unmkinitramfs lsinitramfs e2fsck; do
	command -v "$c" >/dev/null || die "$c is missing (initramfs-tools-core, e2fsprogs)"
done

phase "the base guest's disk, its root mounted"
qemu-img convert -O raw "$BASE" "$BUILD/disk.raw" || die "qemu-img convert of the base guest"
LOOP=$(attach "$BUILD/disk.raw")
R=$BUILD/root
mkdir -p "$R"
mount "${LOOP}p1" "$R" || die "mount the root"
KVERS=("$R"/lib/modules/*)
[ ${#KVERS[@]} = 1 ] && [ -d "${KVERS[0]}" ] || die "expected one kernel, found: ${KVERS[*]}"
KVER=${KVERS[0]##*/}

phase "open-vm-tools into the guest (apt in a chroot)"
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
chmod 755 "$R/usr/sbin/policy-rc.d"
variant_apt "$R" open-vm-tools
rm -f "$R/usr/sbin/policy-rc.d"
S=$R/etc/systemd/system
for link in multi-user.target.wants/open-vm-tools.service vmtoolsd.service \
	open-vm-tools.service.requires/vgauth.service; do
	[ -L "$S/$link" ] || die "open-vm-tools' postinst did not make /etc/systemd/system/$link"
done
compgen -G "$R/etc/rc2.d/S*open-vm-tools" >/dev/null || die "no SysV start link of open-vm-tools in /etc/rc2.d"

phase "vmw_pvscsi and vmxnet3 in /etc/initramfs-tools/modules, the initramfs rebuilt (in a chroot)"
conf=$R/etc/initramfs-tools
grep -qvE '^[[:space:]]*(#|$)' "$conf/modules" && die "the base guest's /etc/initramfs-tools/modules is not comments only"
cat >>"$conf/modules" <<'MODULES'
# The VM's paravirtual SCSI controller and NIC (VMware)
vmw_pvscsi
vmxnet3
MODULES
# The base guest's own list, as its build gave it (its initramfs's
# conf/modules), for this build only; its FSTYPE too (fstab's /dev/sda1 is
# not this host's).
quietly unmkinitramfs unmkinitramfs "$R/boot/initrd.img-$KVER" "$BUILD/initrd"
list=$(find "$BUILD/initrd" -path '*/conf/modules' -print -quit)
[ -s "$list" ] || die "the base guest's initramfs has no conf/modules"
grep -qE '^ahci([[:space:]]|$)' "$list" || die "the base guest's conf/modules does not list ahci"
cp "$list" "$R/usr/share/initramfs-tools/modules.d/zz-imager-build"
rm -rf "$BUILD/initrd"
printf 'MODULES=list\nFSTYPE=ext4\n' >"$conf/conf.d/zz-imager-build"
binds "$R"
quietly update-initramfs in_chroot "$R" update-initramfs -u -k "$KVER"
unbinds "$R"
rm "$conf/conf.d/zz-imager-build" "$R/usr/share/initramfs-tools/modules.d/zz-imager-build"
rm -f "$R"/boot/initrd.img-*.bak
lsinitramfs "$R/boot/initrd.img-$KVER" >"$BUILD/initramfs.txt" || die "lsinitramfs"
for m in vmw_pvscsi vmxnet3 ahci ata_piix sd_mod ext4; do
	grep -q "/$m\.ko" "$BUILD/initramfs.txt" || die "the initramfs lacks $m"
done
if grep -E '/virtio(_blk|_pci|_scsi|_net)?\.ko' "$BUILD/initramfs.txt" >&2; then
	die "the initramfs holds virtio modules (above)"
fi
say "initramfs: $(grep -c '\.ko' "$BUILD/initramfs.txt") modules with vmw_pvscsi and vmxnet3, no virtio"

phase "the root trimmed and checked"
sync
fstrim "$R" >/dev/null 2>&1 || true
umount "$R"
quietly e2fsck e2fsck -fn "${LOOP}p1"
partx -d "$LOOP" 2>/dev/null || true
losetup -d "$LOOP"

phase "booting it on SATA (BIOS)"
variant_boot_overlay bios /dev/sda1 "VMware-like guest"
qemu-img convert -O qcow2 "$BUILD/disk.raw" "$BUILD/vmware.qcow2"
rm -f "$BUILD/disk.raw"
variant_finish debian12-vmware "$BUILD/vmware.qcow2" "$BUILD/boot.log" "$BUILD/initramfs.txt"
