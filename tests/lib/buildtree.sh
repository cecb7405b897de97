# The build folders of the test guests (tests/guest/*.sh): sourced by
# them, after they define say().
#
# release DIR: unmount everything mounted under DIR (deepest first), detach
# the loop devices backed by files under DIR (their partitions first), and
# remove DIR, never crossing into a mount left behind.
release() {
	local dir=$1 mnt dev back
	[ -d "$dir" ] || return 0
	awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r mnt; do
			umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
		done
	losetup -n -l -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
		case $back in "$dir"/*)
			partx -d "$dev" 2>/dev/null || true
			losetup -d "$dev" 2>/dev/null || true ;;
		esac
	done
	if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		say "warning: something is still mounted under $dir; not removing it"
		return 0
	fi
	rm -rf --one-file-system "$dir"
}

# ---- variants of the base guest (tests/guest/debian12-NAME.sh) ----
# Sourced by a variant after it defines say(), die() and CACHE.
#
# variant_start NAME SCRIPT: the start every variant shares.  Exits 77
# without root; builds (or finds) the base guest, BASE; KEY from the sha256
# of SCRIPT, of this file and of the base guest's image name (a new base
# makes a new variant), IMAGE=$CACHE/NAME-KEY.qcow2 and BOOTLOG beside it;
# a cached IMAGE is printed and the script ends (0); with
# IMAGER_TEST_NO_BUILD set (a test, not a fixture) a missing one ends it
# (1).  Else one build at a time (a lock), the unfinished builds of killed
# runs removed, BUILD made, and the cleanup set for every way out: the
# step still running stopped with its process group, the sanity boot's
# qemu killed, BUILD released.
variant_start() {
	local name=$1 self=$2 old
	if [ "$(id -u)" != 0 ]; then
		say "building the test guest needs root"
		exit 77
	fi
	BASE=$(bash "$(dirname "$self")/debian12.sh" | tail -n 1) || exit $?
	[ -f "$BASE" ] || die "the base guest was not built"
	KEY=$( (sha256sum "$self" "${BASH_SOURCE[0]}" | cut -c1-64; basename "$BASE") | sha256sum | cut -c1-16)
	IMAGE=$CACHE/$name-$KEY.qcow2
	BOOTLOG=$CACHE/$name-$KEY.boot.log
	if [ -f "$IMAGE" ]; then
		echo "$IMAGE"
		exit 0
	fi
	if [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
		say "the guest is not in $CACHE: fixtures/$name failed or did not run"
		exit 1
	fi
	exec 9>"$CACHE/$name.lock"
	flock 9
	if [ -f "$IMAGE" ]; then
		echo "$IMAGE"
		exit 0
	fi
	# (builds killed without a chance to clean up: SIGKILL, power loss)
	for old in "$CACHE/$name"-*.build.*; do
		[ -d "$old" ] || continue
		say "removing the unfinished build $old"
		release "$old"
	done
	BUILD=$(mktemp -d "$CACHE/$name-$KEY.build.XXXXXX")
	CHILD=
	trap _variant_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	START=$SECONDS
}
_variant_cleanup() {
	local rc=$?
	set +e
	if [ -n "${CHILD:-}" ]; then
		kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null
		sleep 1
		kill -KILL -- "-$CHILD" 2>/dev/null || kill -KILL "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	declare -F _guest_kill >/dev/null && _guest_kill "$BUILD/boot.log.pid"
	release "$BUILD"
	[ "$rc" = 0 ] || say "build failed (exit $rc); nothing was cached"
	exit "$rc"
}
phase() { say "[$((SECONDS - START))s] $*"; }
# quietly NAME CMD...: CMD's output in $BUILD/NAME.log, its end shown when
# it fails; CMD in a process group of its own, waited for in the
# background, so that a signal reaches the trap at once and the cleanup
# stops CMD with its children.
quietly() {
	local name=$1 rc=0
	shift
	# (a shell function cannot be setsid's: it runs in a subshell, stopped alone)
	if [ "$(type -t "$1")" = function ]; then
		("$@") >"$BUILD/$name.log" 2>&1 </dev/null &
	else
		setsid "$@" >"$BUILD/$name.log" 2>&1 </dev/null &
	fi
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=
	[ "$rc" = 0 ] || { tail -n 30 "$BUILD/$name.log" | sed 's/^/  | /' >&2; die "$name failed (exit $rc)"; }
}
# attach FILE [-r]: a loop device with its partitions (partx: the kernel
# does not scan loop devices), printed
attach() {
	local dev
	dev=$(losetup -f --show ${2:+"$2"} "$1") || die "losetup $1"
	# (partitions a program left on this loop number when it detached it
	# without partx -d go first: they would keep their old sizes)
	partx -d "$dev" 2>/dev/null || true
	partx -a "$dev" 2>/dev/null || true
	for _ in $(seq 50); do [ -b "${dev}p1" ] && break; sleep 0.1; done
	[ -b "${dev}p1" ] || die "no partitions on $dev ($1)"
	echo "$dev"
}
# ---- what the dracut variants share (debian12-rhel, debian12-suse) ----
# variant_base_files DIR: the base guest's root filesystem, copied into DIR
# on the host (lost+found left out).
variant_base_files() {
	local bl
	qemu-img convert -O raw "$BASE" "$BUILD/base.raw" || die "qemu-img convert of the base guest"
	bl=$(attach "$BUILD/base.raw" -r)
	mkdir -p "$BUILD/base" "$1"
	mount -o ro "${bl}p1" "$BUILD/base" || die "mount the base guest's root"
	cp -a "$BUILD/base/." "$1/" || die "copy the base guest's files"
	umount "$BUILD/base"
	partx -d "$bl" 2>/dev/null || true
	losetup -d "$bl"
	rm -f "$BUILD/base.raw"
	rm -rf "$1/lost+found"
}
# in_chroot ROOT CMD...: CMD in ROOT, non-interactively, the kernel's
# hooks making no initramfs (INITRD=No: the builds make their own).
in_chroot() {
	local root=$1
	shift
	env DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true INITRD=No \
		LC_ALL=C LANGUAGE=C LANG=C PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$root" "$@"
}
binds() { for fs in dev proc sys; do mount --bind "/$fs" "$1/$fs"; done; }
unbinds() { for fs in sys proc dev; do umount "$1/$fs"; done; }
# variant_apt ROOT PACKAGE...: the packages installed in ROOT by its own apt
# (from the mirror of the base guest's sources.list), without recommends;
# apt's lists, the documentation and the build's dpkg setting removed.
variant_apt() {
	local root=$1
	shift
	binds "$root"
	rm -f "$root/etc/resolv.conf"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/99imager-build"
	quietly apt-update in_chroot "$root" apt-get update
	quietly apt-install in_chroot "$root" apt-get install -y --no-install-recommends "$@"
	quietly apt-clean in_chroot "$root" apt-get clean
	rm -f "$root/etc/dpkg/dpkg.cfg.d/99imager-build" "$root/etc/resolv.conf"
	rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
	unbinds "$root"
	for p in "$@"; do
		in_chroot "$root" dpkg-query -W -f '${Status}\n' "$p" | grep -q 'install ok installed' ||
			die "$p is not installed"
	done
}
# variant_dracut ROOT: dracut set up as RHEL and SUSE ship it, and the
# machine's own rebuild when the tests ask:
#   - 01-dist.conf hostonly="yes" (RHEL's and SUSE's own 01-dist.conf): an
#     initramfs for this machine only;
#   - 05-physical.conf leaves out dracut's qemu modules, which put virtio
#     into a hostonly image built inside a VM (systemd-detect-virt); the
#     machine these guests stand for is physical, where they stay out by
#     themselves.  So the image the build's boot makes (in qemu) is a
#     physical machine's, and after conversion only the conversion's
#     dracut.conf.d file can keep virtio in;
#   - 06-compress.conf: gzip -1, the same format as the default gzip -9
#     (15 s of a 43 s build on the host, most of a minute more under TCG,
#     for an image 10% smaller), for the rebuilds the tests run;
#   - imager-initramfs.service (before the base guest's marker): when
#     /boot/imager-rebuild-initramfs exists, the machine rebuilds its own
#     initramfs with `dracut -f`, as an installer or the next kernel update
#     would, removes the file and says on ttyS0
#       IMAGER-INITRAMFS bus=BUS rc=RC seconds=S
#     A build puts the file there, so the build's boot makes the hostonly
#     image of a SATA machine; a test puts it there after a conversion to
#     run the guest's own rebuild, which must keep virtio (dracut.conf.d).
variant_dracut() {
	local root=$1
	printf '%s\n' '# As RHEL'"'"'s and SUSE'"'"'s 01-dist.conf: an initramfs for this machine only.' \
		'hostonly="yes"' >"$root/etc/dracut.conf.d/01-dist.conf"
	printf '%s\n' '# A physical machine: no virtio from dracut'"'"'s qemu modules.' \
		'omit_dracutmodules+=" qemu qemu-net "' >"$root/etc/dracut.conf.d/05-physical.conf"
	echo 'compress="gzip -1"' >"$root/etc/dracut.conf.d/06-compress.conf"
	cat >"$root/usr/local/sbin/imager-initramfs" <<'SCRIPT'
#!/bin/sh
# When /boot/imager-rebuild-initramfs exists (the build puts it there for
# the first boot; a test, for the first boot after a conversion): rebuild
# this machine's initramfs with its own dracut, as its installer or its
# next kernel update would, remove the file, and tell the imager tests on
# the serial port.
flag=/boot/imager-rebuild-initramfs
[ -e "$flag" ] || exit 0
udevadm settle --timeout=60 || true
bus=ata
for d in /sys/block/*; do
	case ${d##*/} in loop* | ram* | dm-* | sr*) continue ;; esac
	case $(readlink -f "$d/device") in
	*virtio*) case ${d##*/} in vd*) bus=virtio-blk ;; *) bus=virtio-scsi ;; esac ;;
	esac
done
start=$(date +%s)
rc=0
dracut -f --kver "$(uname -r)" >/var/log/imager-dracut.log 2>&1 || rc=$?
rm -f "$flag"
sync
printf '\r\nIMAGER-INITRAMFS bus=%s rc=%s seconds=%s\r\n' "$bus" "$rc" $(($(date +%s) - start)) >/dev/ttyS0
[ "$rc" = 0 ] || tail -n 20 /var/log/imager-dracut.log >/dev/ttyS0
exit 0
SCRIPT
	chmod 755 "$root/usr/local/sbin/imager-initramfs"
	cat >"$root/etc/systemd/system/imager-initramfs.service" <<'UNIT'
[Unit]
Description=Rebuild the initramfs when the imager tests ask
DefaultDependencies=no
After=local-fs.target systemd-udev-trigger.service
Wants=systemd-udev-trigger.service
Before=imager-marker.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/imager-initramfs
TimeoutStartSec=600

[Install]
WantedBy=sysinit.target
UNIT
	binds "$root"
	in_chroot "$root" systemctl enable imager-initramfs.service >/dev/null 2>&1 ||
		die "systemctl enable imager-initramfs"
	unbinds "$root"
}
# variant_build_rebuilt LOG: the IMAGER-INITRAMFS line of the build's boot
# must say the machine rebuilt its image on ata; dies with the log's end
# otherwise.
variant_build_rebuilt() {
	local line
	line=$(tr -d '\r' <"$1" | grep -a -o 'IMAGER-INITRAMFS .*' | tail -n 1)
	case $line in
	*"bus=ata rc=0 "*) say "the machine's own hostonly rebuild: $line" ;;
	*) tr -d '\r' <"$1" | tail -n 25 >&2; die "the boot did not rebuild its initramfs on ata: '${line:-no line}'" ;;
	esac
}
# variant_hostonly LISTING GENERIC MODULE...: the lsinitramfs LISTING is
# dracut's, holds MODULE.ko for each MODULE, no virtio module, and fewer
# than half the GENERIC image's modules.
variant_hostonly() {
	local listing=$1 generic=$2 m nko
	shift 2
	grep -q '^usr/lib/dracut' "$listing" || die "the image is not dracut's"
	for m in "$@"; do
		grep -q "/$m\.ko" "$listing" || die "the hostonly image lacks $m"
	done
	if grep -E '/virtio(_blk|_pci|_scsi|_net)?\.ko' "$listing" >&2; then
		die "the hostonly image holds virtio modules (above)"
	fi
	nko=$(grep -c '\.ko' "$listing")
	[ "$nko" -lt $((generic / 2)) ] || die "the image holds $nko modules, the generic one $generic: not hostonly"
	say "hostonly initramfs: $nko modules (the generic image: $generic), no virtio"
}
# variant_boot_overlay FIRMWARE ROOT WHAT: the build's sanity boot of
# $BUILD/disk.raw on SATA (GUEST_FIRMWARE FIRMWARE), through a qcow2
# overlay so that the boot's writes stay out of the disk; the marker must
# say root=ROOT, else the build dies naming WHAT.  Its log: $BUILD/boot.log.
variant_boot_overlay() {
	local root
	# shellcheck source=/dev/null
	. "$(dirname "${BASH_SOURCE[0]}")/guestboot.sh"
	qemu-img create -q -f qcow2 -b "$BUILD/disk.raw" -F raw "$BUILD/sanity.qcow2"
	GUEST_FIRMWARE=$1 guest_boot "$BUILD/sanity.qcow2" qcow2 sata "$BUILD/boot.log" 600 >&2 ||
		die "the $3 did not come up on SATA (see above)"
	root=$(guest_marker_field "$BUILD/boot.log" root)
	[ "$root" = "$2" ] || die "the $3 came up with root=$root, not $2"
	rm -f "$BUILD/sanity.qcow2" "$BUILD/boot.log.vars.fd"
}
# variant_finish NAME QCOW2 BOOTLOG-OF-THE-BUILD [LISTING]: the image into
# the cache (by rename: it appears only whole) with its boot log, and the
# initramfs listing LISTING (lsinitramfs) beside it as
# NAME-KEY.initramfs.txt; older keys removed.
variant_finish() {
	local name=$1 old listing=${IMAGE%.qcow2}.initramfs.txt
	tr -d '\r' <"$3" >"$BOOTLOG"
	[ -z "${4:-}" ] || mv "$4" "$listing"
	mv "$2" "$IMAGE"
	for old in "$CACHE/$name"-*.qcow2 "$CACHE/$name"-*.boot.log "$CACHE/$name"-*.initramfs.txt; do
		case $old in "$IMAGE" | "$BOOTLOG" | "$listing") continue ;; esac
		rm -f "$old"
	done
	phase "built $IMAGE ($(du -h "$IMAGE" | cut -f1))"
	echo "$IMAGE"
}
