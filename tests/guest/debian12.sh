#!/bin/bash
# Builds the Debian 12 test guest used by the P2V tests, and prints the path
# of the cached qcow2 image on stdout (the last line; progress on stderr).
#
# (lvm2 is installed, unused here: the RHEL-like variant,
# tests/guest/debian12-rhel.sh, puts this guest's root on LVM.)
# The guest is configured like a physical SATA/IDE machine: an MBR disk with
# an ext4 root on sda1 and swap on sda2, GRUB on the MBR, /etc/fstab and
# grub.cfg naming /dev/sda1, and an initramfs holding the SATA/IDE drivers but
# no virtio driver at all.  So it boots on IDE or SATA, and on virtio it can
# not find its root (until `imager convert` fixes it).  Once userspace has
# mounted the local filesystems and udev's coldplug has run (not the rest of
# multi-user.target), the unit imager-marker.service prints one line on ttyS0,
#   IMAGER-GUEST-UP root=/dev/sda1 net=ens3 virtio=virtio,virtio_net,...
# (net: the network interfaces but lo; virtio: the loaded modules whose
# name starts with virtio; both comma separated, maybe empty), then powers
# the machine off (forced: services not stopped one by one).
#
# The image is cached as $IMAGER_TEST_CACHE/debian12-KEY.qcow2 (default
# /var/cache/imager-tests), KEY being the first 16 hex digits of this
# script's sha256: editing the script builds a new guest, and a later run
# only prints the path.  Beside it, debian12-KEY.initramfs.txt is the
# `lsinitramfs` listing of the guest's initramfs, and debian12-KEY.boot.log
# the serial log of the build's boot.  A build boots the image once
# on IDE (tests/lib/guestboot.sh) and fails unless the marker says
# root=/dev/sda1, so a cached image is known to be sound.
#
# Needs root (loop devices, mounts, chroot); exits 77 without it.  With
# IMAGER_TEST_NO_BUILD set (tests/run sets it in every test but the
# fixtures) a missing image is an error, not a build.  Missing
# host packages are installed with tests/lib/deps.sh.  A build takes about
# 2-4 minutes (mmdebstrap, then a boot under TCG).
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
LIB=$HERE/../lib
CACHE=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
KEY=$(sha256sum "$SELF" | cut -c1-16)
IMAGE=$CACHE/debian12-$KEY.qcow2
LISTING=$CACHE/debian12-$KEY.initramfs.txt
BOOTLOG=$CACHE/debian12-$KEY.boot.log

say() { printf 'debian12: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# The cache hit costs nothing: the image appears (by rename) only once whole.
if [ -f "$IMAGE" ] && [ -f "$LISTING" ]; then
	echo "$IMAGE"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	say "building the test guest needs root (loop devices, mounts, chroot)"
	exit 77
fi
# Inside a test (tests/run): the fixture builds it, never the test.
if [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
	say "the test guest is not in $CACHE: fixtures/debian12 failed or did not run"
	exit 1
fi

mkdir -p "$CACHE"
# One build at a time: a second caller waits here, then finds the image.
exec 9>"$CACHE/debian12.lock"
if ! flock -n 9; then
	say "another build of the test guest is running; waiting for it"
	flock 9
fi
if [ -f "$IMAGE" ] && [ -f "$LISTING" ]; then
	echo "$IMAGE"
	exit 0
fi

# ---- cleanup ----
# shellcheck source=/dev/null
. "$LIB/buildtree.sh"

# Builds killed without a chance to clean up (SIGKILL, power loss).
for old in "$CACHE"/debian12-[0-9a-f]*.build.*; do
	[ -d "$old" ] || continue
	say "removing the unfinished build $old"
	release "$old"
done

BUILD=$(mktemp -d "$CACHE/debian12-$KEY.build.XXXXXX")
ROOT=$BUILD/root
RAW=$BUILD/disk.raw
LOOP=
cleanup() {
	local rc=$?
	set +e
	# A step still running (the build was interrupted): stop its process
	# group, and the qemu of a sanity boot.
	if [ -n "${CHILD:-}" ]; then
		kill -TERM -- "-$CHILD" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			# (zombies do not count: nothing reaps orphans here)
			ps -e -o pgid=,stat= | awk -v g="$CHILD" '$1 == g && $2 !~ /^Z/ { n++ } END { exit !n }' ||
				break
			sleep 1
		done
		kill -KILL -- "-$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	declare -F _guest_kill >/dev/null && _guest_kill "$BUILD/sanity-boot.log.pid"
	release "$BUILD"
	[ "$rc" = 0 ] || say "build failed (exit $rc); nothing was cached"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# quietly LOGNAME CMD...: runs CMD with its output in $BUILD/LOGNAME.log, shown
# (the end of it) only when CMD fails.  CMD runs in its own process group,
# waited for in the background, so that a signal reaches the trap at once
# and cleanup() stops CMD and all its children (dpkg under mmdebstrap...).
CHILD=
quietly() {
	local name=$1 log=$BUILD/$1.log rc=0
	shift
	setsid "$@" >"$log" 2>&1 </dev/null &
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=
	if [ "$rc" != 0 ]; then
		tail -n 40 "$log" | sed 's/^/  | /' >&2
		die "$name failed (exit $rc)"
	fi
}
# "${IN_ROOT[@]}" CMD... (or in_root CMD...): runs CMD in the guest's root,
# non-interactively.
IN_ROOT=(env DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true
	LC_ALL=C LANGUAGE=C LANG=C PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$ROOT")
in_root() { "${IN_ROOT[@]}" "$@"; }

START=$SECONDS
phase() { say "[$((SECONDS - START))s] $*"; }

# ---- host tools ----
phase "checking host packages"
sh "$LIB/deps.sh" mmdebstrap qemu-utils parted e2fsprogs util-linux \
	qemu-system-x86 initramfs-tools-core zstd >&2 ||
	die "could not install the host packages"

# The same Debian mirror as the host's apt sources (first non-security one).
MIRROR=$(
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		grep -v '^[[:space:]]*#' | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -n 1 | tr -d ' '
) || true
MIRROR=${MIRROR:-http://deb.debian.org/debian}
MIRROR=${MIRROR%/}

# ---- the disk: 3 GiB, MBR, ext4 root (bootable) + swap ----
phase "partitioning a 3 GiB disk"
truncate -s 3G "$RAW"
parted -s "$RAW" mklabel msdos \
	mkpart primary ext4 1MiB 2561MiB set 1 boot on \
	mkpart primary linux-swap 2561MiB 100%
LOOP=$(losetup -f --show "$RAW")
# The host kernel does not scan partition tables of loop devices by itself;
# partitions left on this loop number by a program that detached it
# without partx -d go first (they would keep their old sizes).
partx -d "$LOOP" 2>/dev/null || true
partx -a "$LOOP"
for _ in $(seq 50); do
	[ -b "${LOOP}p1" ] && [ -b "${LOOP}p2" ] && break
	sleep 0.1
done
[ -b "${LOOP}p2" ] || die "no partition devices for $LOOP"
quietly mkfs mkfs.ext4 -q -F -L root "${LOOP}p1"
quietly mkswap mkswap -L swap "${LOOP}p2"
mkdir -p "$ROOT"
mount "${LOOP}p1" "$ROOT"

# ---- Debian 12 ----
phase "mmdebstrap bookworm from $MIRROR (under a minute alone; log in $BUILD/mmdebstrap.log)"
# mmdebstrap, not debootstrap: the same minbase (Essential, Priority
# required, apt) with merged /usr as debootstrap makes it (usr-is-merged,
# its merged-usr hook), but apt fetches the packages side by side and
# installs them in a few dpkg calls: 37 s here alone, where debootstrap's
# one-package-at-a-time fetch and unpack took 95 s (117 s beside the other
# lane).  Two things a build needs and a machine does not: dpkg without an
# fsync per file (force-unsafe-io: a crash here only means building again;
# with the fsyncs, debootstrap took 7 minutes beside the other tests), and
# no initramfs from the kernel package's hook (INITRD=No: it would build
# one of every module, which the build replaces with its own below).  The
# dpkg setting goes at the end.  (--skip=check/empty: the root holds
# mkfs's lost+found.)
quietly mmdebstrap env INITRD=No mmdebstrap --variant=minbase --skip=check/empty \
	--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --dpkgopt=force-unsafe-io \
	--include=systemd-sysv,udev,kmod,linux-image-amd64,grub-pc,initramfs-tools,e2fsprogs,iproute2,lvm2 \
	bookworm "$ROOT" "$MIRROR"
[ -f "$ROOT/etc/dpkg/dpkg.cfg.d/99mmdebstrap" ] || die "mmdebstrap left no dpkg.cfg.d/99mmdebstrap"
phase "mmdebstrap done"

for fs in dev proc sys; do
	mountpoint -q "$ROOT/$fs" || mount --bind "/$fs" "$ROOT/$fs"
done

# ---- configured like a physical SATA machine ----
phase "configuring the guest"
echo imager-guest >"$ROOT/etc/hostname"
cat >"$ROOT/etc/hosts" <<'HOSTS'
127.0.0.1	localhost
127.0.1.1	imager-guest
::1		localhost ip6-localhost ip6-loopback
HOSTS
cat >"$ROOT/etc/fstab" <<'FSTAB'
# <file system> <mount point>   <type>  <options>          <dump>  <pass>
/dev/sda1       /               ext4    errors=remount-ro  0       1
/dev/sda2       none            swap    sw                 0       0
FSTAB
cat >"$ROOT/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
SOURCES
# Later package upgrades inside the guest reinstall GRUB on its disk.
echo "grub-pc grub-pc/install_devices multiselect /dev/sda" | in_root debconf-set-selections

# The marker: one line on the serial port once userspace is up, then poweroff.
cat >"$ROOT/usr/local/sbin/imager-marker" <<'MARKER'
#!/bin/sh
# Tells the imager tests (on the serial port) that this guest reached
# userspace, from which device its root came, which network interfaces and
# which virtio modules it has; then powers the machine off.
udevadm settle --timeout=60 || true
root=$(findmnt -n -o SOURCE /)
net=
for i in /sys/class/net/*; do
	i=${i##*/}
	[ "$i" = lo ] || [ "$i" = '*' ] || net=${net:+$net,}$i
done
virtio=$(awk '$1 ~ /^virtio/ { print $1 }' /proc/modules | sort | paste -sd, -)
printf '\r\nIMAGER-GUEST-UP root=%s net=%s virtio=%s\r\n' "$root" "$net" "$virtio" >/dev/ttyS0
# (--force: no orderly stop of the services still starting; processes
# killed, filesystems unmounted, then power off: seconds, not ten)
systemctl --no-block --force poweroff
MARKER
chmod 755 "$ROOT/usr/local/sbin/imager-marker"
cat >"$ROOT/etc/systemd/system/imager-marker.service" <<'UNIT'
[Unit]
Description=Tell the imager tests that the guest is up, then power off
# As soon as what the tests ask about is known: the root and the other
# local filesystems mounted (local-fs), udev's coldplug run (the drivers
# loaded, the NIC named), not the rest of multi-user (about 10 s of TCG).
DefaultDependencies=no
After=local-fs.target systemd-udev-trigger.service
Wants=systemd-udev-trigger.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/imager-marker

[Install]
WantedBy=sysinit.target
UNIT
in_root systemctl enable imager-marker.service >&2
in_root systemctl set-default multi-user.target >&2
# No login prompt on the serial console: nothing logs in, and it keeps the
# serial log quiet.
in_root systemctl mask serial-getty@ttyS0.service >&2

# ---- the initramfs: what a SATA/IDE machine needs, no virtio ----
phase "building the initramfs (SATA/IDE drivers only)"
conf=$ROOT/etc/initramfs-tools
sed -i 's/^MODULES=.*/MODULES=dep/' "$conf/initramfs.conf"
grep -qx 'MODULES=dep' "$conf/initramfs.conf" || die "initramfs.conf has no MODULES line"
# No resume device to wait for (the host has no swap to guess from).
echo "RESUME=none" >"$conf/conf.d/resume"
# MODULES=dep inside a chroot would look at the host's devices (virtio
# here), so build with MODULES=list and an explicit list, then put the
# machine's own configuration (dep, stock modules file) back.  FSTYPE too:
# the fsck hook probes the root device named in fstab, /dev/sda1, which the
# build host lacks, and would leave e2fsck out of the initramfs.
cp -p "$conf/modules" "$BUILD/modules.stock"
grep -qvE '^[[:space:]]*(#|$)' "$BUILD/modules.stock" && die "the stock /etc/initramfs-tools/modules is not comments only"
printf 'MODULES=list\nFSTYPE=ext4\n' >"$conf/conf.d/zz-imager-build"
cat >>"$conf/modules" <<'MODULES'
# SATA (AHCI) and IDE (PIIX, generic) disks
libata
libahci
ahci
ata_piix
ata_generic
scsi_mod
sd_mod
# ext4 root
ext4
jbd2
mbcache
crc16
crc32c_generic
crc32c_intel
MODULES
kvers=("$ROOT"/lib/modules/*)
[ ${#kvers[@]} = 1 ] && [ -d "${kvers[0]}" ] || die "expected one kernel, found: ${kvers[*]}"
quietly update-initramfs "${IN_ROOT[@]}" update-initramfs -c -k "${kvers[0]##*/}"
rm "$conf/conf.d/zz-imager-build"
cp -p "$BUILD/modules.stock" "$conf/modules"
rm -f "$ROOT"/boot/initrd.img-*.bak "$ROOT"/boot/initrd.img-*.old-dkms

initrds=("$ROOT"/boot/initrd.img-*)
if [ ${#initrds[@]} != 1 ] || [ ! -f "${initrds[0]}" ]; then
	die "expected one initramfs, found: ${initrds[*]}"
fi
in_root lsinitramfs "/boot/${initrds[0]##*/}" >"$BUILD/initramfs.txt"
for m in ahci ata_piix sd_mod ext4; do
	grep -q "/$m\.ko" "$BUILD/initramfs.txt" || die "the initramfs lacks $m"
done
grep -qE '(^|/)sbin/e2fsck$' "$BUILD/initramfs.txt" || die "the initramfs lacks e2fsck"
if grep -E '/virtio(_blk|_pci|_scsi|_net)?\.ko' "$BUILD/initramfs.txt" >&2; then
	die "the initramfs holds virtio modules (above)"
fi
say "initramfs: $(grep -c '\.ko' "$BUILD/initramfs.txt") modules, no virtio"

# ---- GRUB on the MBR, naming /dev/sda1 ----
phase "installing GRUB"
cat >"$ROOT/etc/default/grub" <<'GRUB'
# Configured for the imager tests: no menu, serial console, and a reboot
# (panic=) when the initramfs gives up on the root device (after its own
# 30 s of polling), which qemu -no-reboot turns into an exit.  No
# rootdelay=: initramfs-tools sleeps that long on every boot before it
# even looks (init: sleep "$ROOTDELAY"), 20 s of each boot under TCG.
GRUB_DEFAULT=0
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="console=ttyS0,115200 panic=5"
GRUB_DISABLE_LINUX_UUID=true
GRUB_TERMINAL=console
GRUB
quietly grub-install "${IN_ROOT[@]}" grub-install --target=i386-pc "$LOOP"
quietly update-grub "${IN_ROOT[@]}" update-grub
# Without udev, grub-mkconfig names the loop device as root=; the physical
# machine's kernel sees its disk as /dev/sda.
sed -i "s#${LOOP}p1#/dev/sda1#g" "$ROOT/boot/grub/grub.cfg"
if grep -n loop "$ROOT/boot/grub/grub.cfg" >&2; then
	die "grub.cfg still names a loop device (above)"
fi
grep -q 'root=/dev/sda1 ' "$ROOT/boot/grub/grub.cfg" || die "grub.cfg has no root=/dev/sda1"
echo "(hd0) /dev/sda" >"$ROOT/boot/grub/device.map"

# ---- small ----
phase "cleaning up the guest"
in_root apt-get clean
rm "$ROOT/etc/dpkg/dpkg.cfg.d/99mmdebstrap"
rm -rf "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
	"$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*.log "$ROOT"/var/cache/debconf/*-old
find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
: >"$ROOT/etc/machine-id"   # a fresh one on first boot

for fs in sys proc dev; do
	umount "$ROOT/$fs"
done
# Holes in the raw file where deleted files were (the debs mmdebstrap
# fetched, the first initramfs...): fstrim skips blocks freed in a journal
# transaction not yet committed, hence the sync.
sync
fstrim "$ROOT" >/dev/null 2>&1 || true
used=$(df -B1M --output=used "$ROOT" | tail -n 1 | tr -d ' ')
umount "$ROOT"
quietly e2fsck e2fsck -fn "${LOOP}p1"
partx -d "$LOOP"
losetup -d "$LOOP"
LOOP=

phase "converting to qcow2 (${used} MiB used on the root)"
qemu-img convert -O qcow2 "$RAW" "$BUILD/debian12.qcow2"
rm -f "$RAW"

# ---- sanity boot on IDE, on a throwaway overlay ----
phase "booting the guest on IDE (about a minute under TCG)"
# shellcheck source=/dev/null
. "$LIB/guestboot.sh"
qemu-img create -q -f qcow2 -b "$BUILD/debian12.qcow2" -F qcow2 "$BUILD/sanity.qcow2"
boot_start=$SECONDS
guest_boot "$BUILD/sanity.qcow2" qcow2 ide "$BUILD/sanity-boot.log" 600 >&2 ||
	die "the guest did not come up on IDE (see above)"
root=$(guest_marker_field "$BUILD/sanity-boot.log" root)
[ "$root" = /dev/sda1 ] || die "the guest came up with root=$root, not /dev/sda1"
phase "the guest came up on IDE in $((SECONDS - boot_start))s (root=$root)"
rm -f "$BUILD/sanity.qcow2"

# ---- into the cache ----
tr -d '\r' <"$BUILD/sanity-boot.log" >"$BOOTLOG"
mv "$BUILD/initramfs.txt" "$LISTING"
mv "$BUILD/debian12.qcow2" "$IMAGE"
for old in "$CACHE"/debian12-*.qcow2 "$CACHE"/debian12-*.initramfs.txt "$CACHE"/debian12-*.boot.log; do
	case $old in "$IMAGE" | "$LISTING" | "$BOOTLOG") continue ;; esac
	if [ -f "$old" ]; then
		rm -f "$old"
		say "removed the older $old"
	fi
done
phase "built $IMAGE ($(du -h "$IMAGE" | cut -f1))"
echo "$IMAGE"
