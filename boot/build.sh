#!/bin/bash
# boot/build.sh: build imager's live medium (README "Live media").
#
#   boot/build.sh [--append "PARAMS"] [--ssh-key FILE] [--unsigned]
#                 [--kernel VERSION] [--timeout SECONDS] [--iso-only]
#                 IMAGER IMAGER_LIVE OUTDIR
#
# Offline, from what Debian 12's packages installed on this machine (the
# Makefile's DEB_BOOT list; `make boot` installs it and calls this):
#   OUTDIR/vmlinuz         Debian's signed kernel, unmodified
#   OUTDIR/initrd.img      the whole system, zstd: busybox, kmod, imager and
#                          imager-live with the libraries ldd names, the
#                          tools imager runs, ssh, sshfs, nbdkit, dialog,
#                          keyboard layouts, and the
#                          module closure for storage, USB and network
#                          hardware (copied unmodified: still signed), with
#                          depmod's indexes
#   OUTDIR/imager-live.iso hybrid: CD or USB stick, BIOS (GRUB, El Torito
#                          and an MBR) or UEFI (shim signed by Microsoft,
#                          GRUB signed by Debian, MokManager), so it boots
#                          with Secure Boot on
#   OUTDIR/pxe/            vmlinuz, initrd.img and boot.ipxe
# --append adds kernel parameters to every boot entry (a medium that always
#   runs one job: --append 'imager.repo=... imager.run="..."');
# --ssh-key bakes a private key in (/etc/imager/id_key), used for
#   imager.server and ssh:// repositories when no imager.key is given;
# --unsigned puts the unsigned shim in (a negative control for tests:
#   Secure Boot must refuse it);
# --timeout is GRUB's menu timeout (default 5);
# --iso-only reuses OUTDIR/vmlinuz and OUTDIR/initrd.img (a variant ISO).
set -euo pipefail

APPEND="" SSH_KEY="" UNSIGNED=0 KVER="" ISO_ONLY=0 TIMEOUT=5
while [ $# -gt 3 ]; do
	case $1 in
	--append) APPEND=$2; shift 2 ;;
	--ssh-key) SSH_KEY=$2; shift 2 ;;
	--unsigned) UNSIGNED=1; shift ;;
	--kernel) KVER=$2; shift 2 ;;
	--iso-only) ISO_ONLY=1; shift ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	*) echo "boot/build.sh: unknown option $1" >&2; exit 1 ;;
	esac
done
[ $# = 3 ] || { sed -n '2,30p' "$0" >&2; exit 1; }
IMAGER=$1 IMAGER_LIVE=$2 OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
case $TIMEOUT in '' | *[!0-9]*) echo "boot/build.sh: --timeout takes seconds" >&2; exit 1 ;; esac
case $APPEND in *[[:cntrl:]]*) echo "boot/build.sh: --append has a control character" >&2; exit 1 ;; esac

die() { echo "boot/build.sh: $*" >&2; exit 1; }
need() { for f in "$@"; do [ -e "$f" ] || die "$f is missing (make boot installs DEB_BOOT)"; done; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/.work
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

# ---- the kernel: the newest one with both its image and its modules ----
if [ -z "$KVER" ]; then
	for v in $(ls /lib/modules 2>/dev/null | sort -V); do
		[ -f "/boot/vmlinuz-$v" ] && KVER=$v
	done
fi
[ -n "$KVER" ] || die "no kernel in /boot with modules in /lib/modules (install linux-image-amd64)"
MODDIR=/lib/modules/$KVER

if [ "$ISO_ONLY" = 0 ]; then
	need "$IMAGER" "$IMAGER_LIVE" /bin/busybox /usr/bin/kmod "/boot/vmlinuz-$KVER" \
		/usr/bin/ssh /usr/bin/sshfs /usr/bin/dialog /usr/bin/nbdkit /usr/bin/loadkeys
	R=$WORK/root
	mkdir -p "$R"/usr/bin "$R"/usr/sbin "$R"/usr/lib "$R"/usr/lib64 \
		"$R"/dev "$R"/proc "$R"/sys "$R"/run "$R"/tmp "$R"/images "$R"/root \
		"$R"/etc/imager "$R"/var/log "$R"/mnt "$R"/usr/share/imager-live
	for d in bin sbin lib lib64; do ln -s "usr/$d" "$R/$d"; done

	# copy_prog FILE...: the files and every library ldd names, at the
	# paths the loader looks for them (cp -L: a soname link becomes the file).
	copy_prog() {
		local f lib
		for f in "$@"; do
			cp -L --parents "$f" "$R"
			{ ldd "$f" 2>/dev/null || true; } | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' |
				while read -r lib; do
					[ -e "$R$lib" ] || cp -L --parents "$lib" "$R"
				done
		done
	}
	copy_prog /bin/busybox
	for a in $(/bin/busybox --list); do
		case $a in
		modprobe | insmod | rmmod | lsmod | depmod | modinfo | busybox) ;;
		*) [ -e "$R/usr/bin/$a" ] || ln -s busybox "$R/usr/bin/$a" ;;
		esac
	done
	copy_prog /usr/bin/kmod
	for a in modprobe insmod rmmod lsmod depmod modinfo; do ln -sf ../bin/kmod "$R/usr/sbin/$a"; done
	install -m 755 "$IMAGER" "$R/usr/bin/imager"
	install -m 755 "$IMAGER_LIVE" "$R/usr/bin/imager-live"
	copy_prog "$R/usr/bin/imager" "$R/usr/bin/imager-live"
	# What imager runs (growing filesystems after a restore), the ssh
	# client and sshfs (repositories over ssh), dialog (the menu), blkid.
	# nbdkit and its file plugin export disks read-only for P2V to a server.
	# udpcast's receiver (restore multicast:) and sender (imager multicast
	# from this machine's repository).
	for p in /usr/bin/udp-receiver /usr/bin/udp-sender /sbin/e2fsck /sbin/resize2fs /usr/sbin/ntfsresize /usr/sbin/xfs_growfs \
		/bin/btrfs /usr/bin/ssh /usr/bin/sshfs /usr/bin/dialog /sbin/blkid /usr/bin/nbdkit \
		/usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-file-plugin.so; do
		[ -e "$p" ] && copy_prog "$p"
	done
	# Terminals: the screen's (linux) and a serial console's (vt100,
	# vt220, xterm, screen: what a terminal program or a BMC's
	# serial-over-LAN says it is).
	for t in l/linux v/vt100 v/vt220 x/xterm s/screen; do
		mkdir -p "$R/usr/share/terminfo/${t%/*}"
		cp -L "/lib/terminfo/$t" "$R/usr/share/terminfo/$t" 2>/dev/null ||
			cp -L "/usr/share/terminfo/$t" "$R/usr/share/terminfo/$t"
	done
	# Keyboard layouts for the screen's keyboard (imager.keymap=, the
	# menu): kbd's loadkeys turns console-data's keymaps into busybox
	# loadkmap's binary form here, at build time.
	mkdir -p "$R/usr/share/imager-live/keymaps"
	for k in us:qwerty/us uk:qwerty/uk de:qwertz/de-latin1 fr:azerty/fr-latin9 es:qwerty/es \
		it:qwerty/it pt:qwerty/pt-latin1 be:azerty/be-latin1 ch:qwertz/fr_CH-latin1; do
		src=/usr/share/keymaps/i386/${k#*:}.kmap.gz
		need "$src"
		loadkeys -b "$src" >"$R/usr/share/imager-live/keymaps/${k%%:*}.bmap" </dev/null ||
			die "loadkeys cannot compile $src"
	done

	# ---- modules: the closure of the list, unmodified, with depmod's indexes ----
	# Storage (virtio, NVMe, SATA/IDE, SCSI HBAs of real servers, USB
	# sticks, SD cards, Xen), USB hosts and keyboards, network cards (virtio
	# and the common server and desktop ones), and filesystems (the
	# repository's, the CD's, FUSE for sshfs, NBD), and the crypto SMB3
	# signing and encryption ask for at mount time (cifs names it only as
	# soft dependencies, which --show-depends leaves out).
	MODS="virtio_pci virtio_blk virtio_scsi virtio_net virtio_console
	nvme ahci ata_piix ata_generic sd_mod sr_mod sg
	mptsas mptspi mpt3sas megaraid_sas hpsa aacraid vmw_pvscsi xen_blkfront
	mmc_block sdhci_pci sdhci_acpi
	usb_storage uas xhci_pci xhci_hcd ehci_pci ehci_hcd ohci_pci uhci_hcd usbhid hid_generic
	e1000 e1000e igb ixgbe r8169 tg3 bnx2 vmxnet3 i40e
	ext4 vfat isofs xfs btrfs nls_cp437 nls_ascii nls_iso8859_1 nls_utf8 fuse nbd cifs nfs nfsv3 nfsv4
	cmac sha512_generic ccm gcm ctr ghash_generic seqiv ecb crc32c_intel"
	mkdir -p "$R$MODDIR"
	for m in $MODS; do
		modprobe -S "$KVER" --show-depends "$m" 2>/dev/null || true
	done | awk '$1 == "insmod" { print $2 }' | sort -u | while read -r ko; do
		cp --parents "$ko" "$R"
	done
	cp "$MODDIR"/modules.order "$MODDIR"/modules.builtin "$MODDIR"/modules.builtin.modinfo "$R$MODDIR/"
	depmod -b "$R" "$KVER"
	# Every listed module is in (a name that modprobe cannot resolve
	# must not drop out silently).
	for m in $MODS; do
		modprobe -S "$KVER" -d "$R" --show-depends "$m" >/dev/null 2>&1 ||
			grep -q "/${m//_/[_-]}.ko" "$MODDIR/modules.builtin" ||
			die "module $m is neither in the medium nor built into $KVER"
	done

	# ---- the system ----
	install -m 755 "$HERE/init" "$R/init"
	install -m 755 "$HERE/udhcpc.script" "$R/usr/share/imager-live/udhcpc.script"
	install -m 755 "$HERE/menu.sh" "$R/usr/share/imager-live/menu.sh"
	install -m 644 "$HERE/lib.sh" "$R/usr/share/imager-live/lib.sh"
	install -m 755 "$HERE/askpass" "$R/usr/share/imager-live/askpass"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$R/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
	printf '127.0.0.1 localhost\n::1 localhost\n' >"$R/etc/hosts"
	printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$R/etc/nsswitch.conf"
	echo "imager-live" >"$R/etc/hostname"
	"$IMAGER" --version >"$R/etc/imager/version" 2>/dev/null || echo "imager" >"$R/etc/imager/version"
	echo "$KVER" >>"$R/etc/imager/version"
	if [ -n "$SSH_KEY" ]; then
		install -m 600 "$SSH_KEY" "$R/etc/imager/id_key"
	fi

	# The archive's order matters on a machine short of memory: the kernel
	# unpacks into a tmpfs of half the RAM and stops at the first file that
	# does not fit.  So /init and the static busybox come first, and
	# etc/imager/complete last: init finds it missing and says why.
	: >"$R/etc/imager/complete"
	(cd "$R" && {
		printf '%s\n' ./dev ./proc ./sys ./run ./tmp ./var ./var/log ./etc ./etc/imager \
			./bin ./sbin ./lib ./lib64 ./usr ./usr/bin ./usr/bin/busybox ./init
		find ./usr/bin -type l -lname busybox | LC_ALL=C sort
		find . -mindepth 1 ! -path ./etc/imager/complete | LC_ALL=C sort
		echo ./etc/imager/complete
	} | awk '!seen[$0]++' | cpio -o -H newc -R 0:0 --quiet) |
		zstd -q -T0 -15 >"$WORK/initrd.img"
	mv "$WORK/initrd.img" "$OUT/initrd.img"
	cp "/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
fi
need "$OUT/vmlinuz" "$OUT/initrd.img"

# ---- the ISO ----
need /usr/lib/grub/i386-pc/boot_hybrid.img /usr/lib/grub/i386-pc/cdboot.img \
	/usr/lib/shim/shimx64.efi.signed /usr/lib/shim/mmx64.efi.signed \
	/usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed
I=$WORK/iso
mkdir -p "$I/live" "$I/boot/grub/i386-pc" "$I/.disk"
cp "$OUT/vmlinuz" "$OUT/initrd.img" "$I/live/"
echo "imager live $("$IMAGER" --version 2>/dev/null | head -n 1)" >"$I/.disk/info"
# The kernel's console: serial first, the screen last (/dev/console, where
# the menu runs); init writes its own messages to both.
cat >"$I/boot/grub/grub.cfg" <<EOF
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
set timeout=$TIMEOUT
set default=0
menuentry "imager live" {
	linux /live/vmlinuz console=ttyS0,115200 console=tty0 $APPEND
	initrd /live/initrd.img
}
menuentry "imager live: list the disks, then a shell" {
	linux /live/vmlinuz console=ttyS0,115200 console=tty0 imager.run=list imager.post=shell
	initrd /live/initrd.img
}
EOF
# BIOS: GRUB's El Torito image, its modules built in (the ISO carries none).
grub-mkimage -O i386-pc-eltorito -p /boot/grub -o "$I/boot/grub/i386-pc/eltorito.img" \
	biosdisk iso9660 part_msdos part_gpt normal linux configfile search search_fs_file \
	echo test serial terminal
# UEFI: an EFI system partition image with shim, GRUB (the CD build, which
# finds the ISO by /.disk/info and reads /boot/grub/grub.cfg) and MokManager.
EFI=$WORK/efi.img
rm -f "$EFI"
kib=$(du -kc /usr/lib/shim/shimx64.efi.signed /usr/lib/shim/mmx64.efi.signed \
	/usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed | tail -n 1 | cut -f1)
mkfs.msdos -C -n IMAGER_EFI "$EFI" $(((kib + 1024) / 1024 * 1024 + 1024)) >/dev/null
mmd -i "$EFI" ::/EFI ::/EFI/BOOT
if [ "$UNSIGNED" = 1 ]; then
	mcopy -i "$EFI" /usr/lib/shim/shimx64.efi ::/EFI/BOOT/BOOTX64.EFI
else
	mcopy -i "$EFI" /usr/lib/shim/shimx64.efi.signed ::/EFI/BOOT/BOOTX64.EFI
fi
mcopy -i "$EFI" /usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed ::/EFI/BOOT/grubx64.efi
mcopy -i "$EFI" /usr/lib/shim/mmx64.efi.signed ::/EFI/BOOT/mmx64.efi
xorriso -as mkisofs -quiet -o "$WORK/imager-live.iso" -V IMAGER_LIVE -r -J -joliet-long \
	--grub2-mbr /usr/lib/grub/i386-pc/boot_hybrid.img \
	-partition_offset 16 --mbr-force-bootable \
	-append_partition 2 0xef "$EFI" -appended_part_as_gpt \
	-c boot/boot.cat \
	-b boot/grub/i386-pc/eltorito.img -no-emul-boot -boot-load-size 4 -boot-info-table \
	--grub2-boot-info \
	-eltorito-alt-boot -e --interval:appended_partition_2:all:: -no-emul-boot \
	"$I" 2>"$WORK/xorriso.log" || { cat "$WORK/xorriso.log" >&2; die "xorriso failed"; }
mv "$WORK/imager-live.iso" "$OUT/imager-live.iso"

# ---- PXE ----
mkdir -p "$OUT/pxe"
cp "$OUT/vmlinuz" "$OUT/initrd.img" "$OUT/pxe/"
cat >"$OUT/pxe/boot.ipxe" <<EOF
#!ipxe
kernel vmlinuz console=ttyS0,115200 console=tty0 $APPEND
initrd initrd.img
boot
EOF
echo "boot: $OUT: vmlinuz ($KVER), initrd.img $(($(stat -c %s "$OUT/initrd.img") / 1048576)) MiB, imager-live.iso, pxe/"
