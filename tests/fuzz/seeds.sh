#!/bin/bash
# seeds.sh: (re)make the seed corpora in tests/fuzz/corpus/NAME/ from real
# tools, as committed: small filesystems and disks (as sparse images,
# fuzz.h), a qcow2, an image folder's manifest and index, partclone
# streams, LVM metadata text, and the texts conversion edits.  Needs root
# for nothing; needs mke2fs, mkfs.fat, mkntfs, mkswap, mkfs.exfat, mkfs.btrfs,
# mkfs.f2fs, sfdisk, qemu-img, partclone.extfs, pvcreate, jq and build/imager.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
imager=${IMAGER:-$root/build/imager}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
c=$here/corpus
# (regress-* are inputs that once crashed a harness: kept as committed)
[ -d "$c" ] && find "$c" -type f ! -name 'regress-*' -delete
mkdir -p "$c"/{fuzz-fs,fuzz-ptable,fuzz-qcow2,fuzz-manifest,fuzz-index,fuzz-partclone,fuzz-lvmtext,fuzz-convtext,fuzz-clonezilla,fuzz-frames,fuzz-journals,fuzz-initrd,fuzz-ovf,fuzz-vmx,fuzz-vmdkdesc,fuzz-ova}
sp() { python3 "$here/sparse.py" "$1" "$2"; }
mkdir -p "$t/tree/d"
echo hello >"$t/tree/a.txt"
seq 1 2000 >"$t/tree/d/n.txt"

# filesystems
mke2fs -q -F -t ext4 -b 1024 -d "$t/tree" -L fz "$t/ext4" 2M && sp "$t/ext4" "$c/fuzz-fs/ext4"
mke2fs -q -F -t ext2 -d "$t/tree" "$t/ext2" 1M && sp "$t/ext2" "$c/fuzz-fs/ext2"
for spec in 12:2048 16:16384 32:40000; do
	b=${spec%:*}
	rm -f "$t/fat$b"
	mkfs.fat -C -F "$b" -s 1 -n FZ "$t/fat$b" "${spec#*:}" >/dev/null
	MTOOLS_SKIP_CHECK=1 mcopy -s -i "$t/fat$b" "$t/tree/a.txt" "$t/tree/d" ::/
	sp "$t/fat$b" "$c/fuzz-fs/fat$b"
done
truncate -s 2M "$t/ntfs" && mkntfs -q -F -f "$t/ntfs" >/dev/null 2>&1 && sp "$t/ntfs" "$c/fuzz-fs/ntfs"
truncate -s 1M "$t/swap" && mkswap -q -L fz "$t/swap" && sp "$t/swap" "$c/fuzz-fs/swap"
truncate -s 4M "$t/exfat" && mkfs.exfat "$t/exfat" >/dev/null 2>&1 && sp "$t/exfat" "$c/fuzz-fs/exfat"
truncate -s 128M "$t/btrfs" && mkfs.btrfs -q -f -r "$t/tree" "$t/btrfs" >/dev/null 2>&1 && sp "$t/btrfs" "$c/fuzz-fs/btrfs"
truncate -s 64M "$t/f2fs" && mkfs.f2fs -q -f "$t/f2fs" >/dev/null 2>&1 && sp "$t/f2fs" "$c/fuzz-fs/f2fs"
# an LVM PV header (private configuration: no device-mapper)
mkdir -p "$t/lvm"
printf '%s\n' 'global { activation = 0 }' 'backup { backup = 0 archive = 0 }' >"$t/lvm/lvm.conf"
truncate -s 16M "$t/pv"
pvdev=$(losetup -f --show "$t/pv" 2>/dev/null || true)
if [ -n "$pvdev" ]; then
	f="devices { filter = [ \"a|^$pvdev\$|\", \"r|.*|\" ] }"
	LVM_SYSTEM_DIR=$t/lvm pvcreate -q --config "$f" "$pvdev" >/dev/null 2>&1 &&
		LVM_SYSTEM_DIR=$t/lvm vgcreate -q --config "$f" fzvg "$pvdev" >/dev/null 2>&1 &&
		LVM_SYSTEM_DIR=$t/lvm lvcreate -q --config "$f" -an -Zn -L 4M -n root fzvg >/dev/null 2>&1 &&
		LVM_SYSTEM_DIR=$t/lvm lvcreate -q --config "$f" -an -Zn -L 4M -n swap fzvg >/dev/null 2>&1 || true
	losetup -d "$pvdev"
	head -c 1M "$t/pv" >"$t/pvhead" && sp "$t/pvhead" "$c/fuzz-fs/lvm-pv"
	# its metadata text, for fuzz-lvmtext
	strings -n 1 "$t/pvhead" | sed -n '/^fzvg {/,$p' >"$c/fuzz-lvmtext/vg.txt" || true
fi

# partition tables
truncate -s 16M "$t/mbr"
# (sfdisk takes logical partitions by their node names)
sfdisk -q "$t/mbr" <<-EOF2
	label: dos
	$t/mbr1 : start=2048, size=2048, type=83, bootable
	$t/mbr2 : start=4096, size=20480, type=5
	$t/mbr5 : start=6144, size=2048, type=82
	$t/mbr6 : start=10240, size=4096, type=83
EOF2
sp "$t/mbr" "$c/fuzz-ptable/mbr-logical"
truncate -s 8M "$t/gpt"
sfdisk -q "$t/gpt" <<-EOF2
	label: gpt
	start=2048, size=2048, type=21686148-6449-6E6F-744E-656564454649, name="bios"
	size=4096, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"
	size=2048, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="esp"
EOF2
sp "$t/gpt" "$c/fuzz-ptable/gpt"
cp "$t/mbr" "$t/mbrfs" && dd if="$t/ext2" of="$t/mbrfs" bs=512 seek=2048 conv=notrunc status=none
sp "$t/mbrfs" "$c/fuzz-ptable/mbr-ext2"

# qcow2: data, a zero cluster, a compressed cluster
qemu-img convert -q -c -O qcow2 "$t/ext2" "$t/c.qcow2" && sp "$t/c.qcow2" "$c/fuzz-qcow2/compressed"
qemu-img convert -q -O qcow2 -o cluster_size=4096 "$t/ext4" "$t/e.qcow2" && sp "$t/e.qcow2" "$c/fuzz-qcow2/small-clusters"
qemu-img create -q -f qcow2 -o compat=0.10 "$t/v2.qcow2" 1M && sp "$t/v2.qcow2" "$c/fuzz-qcow2/v2-empty"

# an image folder (manifest and index)
"$imager" -q save "$t/gpt" "$t/img" --no-progress >/dev/null 2>&1 || true
"$imager" -q save "$t/ext4" "$t/img2" --no-progress >/dev/null 2>&1
[ -f "$t/img/manifest.json" ] && cp "$t/img/manifest.json" "$c/fuzz-manifest/gpt.json"
cp "$t/img2/manifest.json" "$c/fuzz-manifest/ext4.json"
# a manifest with unreadable areas: save --rescue through nbdkit's ddrescue
# filter, two of the ext4's sectors bad
printf '# Mapfile\n0x0     +     1\n0x00000000  0x00000800  +\n0x00000800  0x00000200  -\n0x00000A00  0x00001600  +\n0x00002000  0x00000200  -\n0x00002200  0x%08X  +\n' \
	$(($(stat -c %s "$t/ext4") - 0x2200)) >"$t/bad.map"
nbdkit -U "$t/r.sock" -P "$t/r.pid" -r --filter=ddrescue file "$t/ext4" ddrescue-mapfile="$t/bad.map" &&
	sleep 0.5 && "$imager" -q save --rescue "nbd+unix:///?socket=$t/r.sock" "$t/img3" --no-progress >/dev/null 2>&1
[ -f "$t/r.pid" ] && kill "$(cat "$t/r.pid")"
[ -f "$t/img3/manifest.json" ] && cp "$t/img3/manifest.json" "$c/fuzz-manifest/rescued.json"
# ... and with the files its ranges hit, as a save from a local source
# records them (debugfs)
[ -f "$c/fuzz-manifest/rescued.json" ] &&
	jq '.unreadable.list[0] += {files: ["/dir/a b", "<inode 8: the journal>"], no_file_blocks: 1,
	    files_partial: true} | .unreadable.list[1] += {files: []}' \
		"$c/fuzz-manifest/rescued.json" >"$c/fuzz-manifest/rescued-files.json"
{ printf '\x03'; cat "$t/img2"/part*.idx; } >"$c/fuzz-index/ext4-idx"
# the frame reader: block-count byte, u16 index length (without its
# trailer), the index, the stream (fuzz-frames.c)
python3 - "$t/img2" "$c/fuzz-frames/ext4" <<'PY'
import glob, struct, sys
idx = open(glob.glob(sys.argv[1] + "/part*.idx")[0], "rb").read()[:-8]
zst = open(glob.glob(sys.argv[1] + "/part*.zst")[0], "rb").read()
open(sys.argv[2], "wb").write(b"\x03" + struct.pack("<H", len(idx)) + idx + zst)
PY

# partclone streams: v2 with CRC32 (default), and with XXH64 when the
# installed partclone writes it; the first byte picks the reader (fuzz-partclone.c)
partclone.extfs -f 0 -q -c -s "$t/ext2" -o "$t/p.pcl" >/dev/null 2>&1
{ printf '\x00'; cat "$t/p.pcl"; } >"$c/fuzz-partclone/v2-crc32"
{ printf '\x01'; cat "$t/p.pcl"; } >"$c/fuzz-partclone/v2-crc32-marked"

# a Clonezilla folder (fuzz-clonezilla.c: its files joined by NUL bytes):
# disk sda, an ext2 and an LVM PV of VG czvg (the PV text above, renamed),
# its swap LV's info, the ext2's partclone stream
python3 - "$t" "$c/fuzz-clonezilla/mbr-lvm" "$c/fuzz-lvmtext/vg.txt" <<-'PY'
	import re, sys
	t, out, vgtxt = sys.argv[1:4]
	try:
	    text = open(vgtxt, 'rb').read().replace(b'fzvg', b'czvg')
	except OSError:
	    text = b''
	m = re.search(rb'pv0 \{\s*id = "([^"]+)"', text)
	uuid = m.group(1) if m else b'AAAAAA-AAAA-AAAA-AAAA-AAAA-AAAA-AAAAAA'
	sf = (b'label: dos\nlabel-id: 0x12345678\ndevice: /dev/sda\nunit: sectors\nsector-size: 512\n\n'
	      b'/dev/sda1 : start=        2048, size=        2048, type=83, bootable\n'
	      b'/dev/sda2 : start=        4096, size=       32768, type=8e\n')
	files = [b'sda\n', b'sda1 sda2\n', sf, bytes(446) + bytes(64) + b'\x55\xaa',
	         b'czvg /dev/sda2 ' + uuid + b'\n', text,
	         b'UUID="a75aa0af-f3d0-47c6-a5fd-e613ff657d3b"\nLABEL="cz-lvswap"\n',
	         open(t + '/p.pcl', 'rb').read()]
	open(out, 'wb').write(b'\0'.join(files))
PY

# texts conversion edits (the first byte picks the editor)
{ printf '\x08'; printf '/dev/sda1 / ext4 defaults 0 1\n/dev/sda2 none swap sw 0 0\n# /dev/sdb1\nUUID=1234 /home ext4 defaults 0 2\n/dev/nvme0n1p3 /srv xfs defaults 0 0\n'; } >"$c/fuzz-convtext/fstab"
{ printf '\x01'; printf 'set default="1>0"\nmenuentry "Debian" --id debian {\n linux /boot/vmlinuz-6.1.0-13-amd64 root=/dev/sda1\n}\nsubmenu "Advanced" --id adv {\n menuentry "old" --id old {\n  linux /boot/vmlinuz-6.1.0-12-amd64\n }\n}\n'; } >"$c/fuzz-convtext/grub.cfg"
{ printf '\x06'; printf 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="root=/dev/sda1"\n'; } >"$c/fuzz-convtext/default-grub"
{ printf '\x03'; printf 'kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio.ko:\nkernel/drivers/virtio/virtio_ring.ko:\nkernel/drivers/scsi/virtio_scsi.ko.xz: kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_pci.ko\n'; } >"$c/fuzz-convtext/modules.dep"
# the journals of --resume (fuzz-journals.c): a save journal of two frames
# over its stream, and a restore's and a clone's target journal record
python3 - "$c/fuzz-journals" <<-'PY'
	import struct, sys, os
	out = sys.argv[1]
	def rec(off, comp, raw, exts):
	    r = struct.pack('<QIIII', off, len(comp), raw, len(exts), 0) + bytes(16)
	    for s_, n, fl in exts:
	        r += struct.pack('<QII', s_, n, fl)
	    return r + bytes(8)   # (checksums made right by the harness)
	c1, c2 = os.urandom(100), os.urandom(60)
	j = rec(0, c1, 2 * 4096, [(0, 2, 0)]) + rec(100, c2, 4096, [(2, 1, 0), (3, 4, 1)])
	hdr = bytes([2, 3]) + struct.pack('<H', 99) + bytes([0]) + struct.pack('<I', len(j))
	open(out + '/save-two-frames', 'wb').write(hdr + j + c1 + c2)
	hdr = bytes([2, 3]) + struct.pack('<H', 4000) + bytes([3]) + struct.pack('<I', len(j))
	open(out + '/save-sparse-bitmap', 'wb').write(hdr + j + c1 + c2)
	for name, b0, magic in (('restore', 1 | 2 | 8, b'IMGRJNL\x01'), ('clone', 1 | 2 | 4 | 8, b'IMGCJNL\x01')):
	    r = magic + struct.pack('<QQIIQQQQ', 0x1234, 300 << 20, 1, 0, 5, 20 << 20, 0, 0)
	    open(out + '/' + name, 'wb').write(bytes([b0, 2]) + r)
PY
# initramfs images (first byte 0): an early archive, then the main one
# packed by each compressor; and a package database (first byte 1)
mkdir -p "$t/early/kernel/x86/microcode" "$t/main/conf" "$t/main/usr/lib/dracut"
echo 1 >"$t/early/early_cpio"
echo x >"$t/main/conf/initramfs.conf"
(cd "$t/early" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$t/early.cpio"
(cd "$t/main" && find . -path ./usr -prune -o -print | LC_ALL=C sort | cpio -o -H newc --quiet) >"$t/itools.cpio"
(cd "$t/main" && find ./usr | LC_ALL=C sort | cpio -o -H newc --quiet) >"$t/dracut.cpio"
{ printf '\x00'; cat "$t/early.cpio" "$t/itools.cpio"; } >"$c/fuzz-initrd/itools-plain"
{ printf '\x00'; cat "$t/early.cpio"; zstd -q -c "$t/itools.cpio"; } >"$c/fuzz-initrd/itools-zstd"
{ printf '\x00'; gzip -n -c "$t/dracut.cpio"; } >"$c/fuzz-initrd/dracut-gzip"
{ printf '\x00'; cat "$t/early.cpio"; xz -c --check=crc32 "$t/dracut.cpio"; } >"$c/fuzz-initrd/dracut-xz"
{ printf '\x00'; lz4 -l -c "$t/itools.cpio"; } >"$c/fuzz-initrd/itools-lz4"
{ printf '\x01'; printf 'Package: dracut\nStatus: install ok installed\n\nPackage: initramfs-tools\nStatus: deinstall ok config-files\n'; } >"$c/fuzz-initrd/dpkg-status"
# virtual machines' descriptions: the committed samples (tests/data/vm),
# and the VMDK descriptors qemu-img writes, text and embedded (cut at the
# first NUL, as vmdk_check() cuts it)
cp "$root"/tests/data/vm/*.ovf "$c/fuzz-ovf/"
cp "$root"/tests/data/vm/*.vmx "$c/fuzz-vmx/"
for s in monolithicFlat twoGbMaxExtentSparse twoGbMaxExtentFlat; do
	qemu-img create -q -f vmdk -o subformat=$s "$t/$s.vmdk" 3G && cp "$t/$s.vmdk" "$c/fuzz-vmdkdesc/$s"
done
qemu-img create -q -f vmdk -o subformat=streamOptimized "$t/so.vmdk" 64M &&
	dd if="$t/so.vmdk" bs=512 skip=1 count=1 status=none | tr -d '\000' >"$c/fuzz-vmdkdesc/streamOptimized"
qemu-img create -q -f vmdk "$t/base.vmdk" 64M && (cd "$t" && qemu-img create -q -f vmdk -b base.vmdk -F vmdk child.vmdk) &&
	dd if="$t/child.vmdk" bs=512 skip=1 count=1 status=none | tr -d '\000' >"$c/fuzz-vmdkdesc/delta"
# an OVA: the ESXi sample, its manifest and a small disk, as GNU tar packs it
mkdir -p "$t/ova"
cp "$root/tests/data/vm/esxi-debian12.ovf" "$t/ova/debian12.ovf"
head -c 1500 /dev/urandom >"$t/ova/debian12-disk1.vmdk"
(cd "$t/ova" && sha256sum --tag debian12.ovf debian12-disk1.vmdk >debian12.mf &&
	tar --format=ustar -cf "$c/fuzz-ova/esxi.ova" debian12.ovf debian12.mf debian12-disk1.vmdk)
du -sh "$c"/* | sed 's|'"$c"'/||'
