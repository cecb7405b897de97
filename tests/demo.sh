#!/bin/bash
# `make demo`: imager's main job on a small sample disk, start to end.
# Builds build/demo/disk.img (GPT: BIOS boot, ext4 with files, FAT32, swap;
# 256 MiB), describes it, saves it, verifies the image, restores it into
# build/demo/restored.img and checks the copy with sfdisk and e2fsck.
set -euo pipefail
export LC_ALL=C MTOOLS_SKIP_CHECK=1

ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
DEMO=$ROOT/build/demo
[ -x "$IMAGER" ] || { echo "demo: no $IMAGER (run make)" >&2; exit 1; }

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
# Paths relative to the repository read better.
rel() { sed "s|$ROOT/||g"; }

# ---- the sample disk ----
say "Building a sample disk: build/demo/disk.img"
rm -rf "$DEMO"
mkdir -p "$DEMO/files/etc" "$DEMO/files/home/demo" "$DEMO/efi/EFI/BOOT"
cp /etc/os-release "$DEMO/files/etc/"
seq 1 200000 >"$DEMO/files/home/demo/numbers.txt"
head -c 8M /dev/urandom >"$DEMO/files/home/demo/random.bin"
cp -r /usr/share/doc/e2fsprogs "$DEMO/files/home/demo/docs" 2>/dev/null || true
ln -s numbers.txt "$DEMO/files/home/demo/link-to-numbers"
head -c 300K /dev/urandom >"$DEMO/efi/EFI/BOOT/BOOTX64.EFI"

DISK=$DEMO/disk.img
truncate -s 256M "$DISK"
sfdisk -q "$DISK" <<'EOF'
label: gpt
start=2048, size=1MiB, type=21686148-6449-6E6F-744E-656564454649, name="bios"
size=160MiB, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"
size=48MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="efi"
type=0657FD6D-A4AB-43C4-84E5-0933C84B4F4F, name="swap"
EOF
offset() { sfdisk --json "$DISK" | jq ".partitiontable.partitions[$1 - 1].$2 * 512"; }
head -c 1M /dev/urandom | dd of="$DISK" bs=1M seek="$(offset 1 start)" oflag=seek_bytes conv=notrunc status=none
mke2fs -q -F -t ext4 -L root -d "$DEMO/files" -E offset="$(offset 2 start)" "$DISK" \
	$(($(offset 2 size) / 1024))k
truncate -s "$(offset 3 size)" "$DEMO/efi.fat"
mkfs.fat -F 32 -s 1 -n EFI "$DEMO/efi.fat" >/dev/null
mcopy -s -i "$DEMO/efi.fat" "$DEMO/efi/EFI" ::/
dd if="$DEMO/efi.fat" of="$DISK" bs=1M seek="$(offset 3 start)" oflag=seek_bytes conv=notrunc,sparse status=none
truncate -s "$(offset 4 size)" "$DEMO/swap"
mkswap -L swap "$DEMO/swap" >/dev/null 2>&1
dd if="$DEMO/swap" of="$DISK" bs=1M seek="$(offset 4 start)" oflag=seek_bytes conv=notrunc,sparse status=none
rm -rf "$DEMO/files" "$DEMO/efi" "$DEMO/efi.fat" "$DEMO/swap"
echo "GPT disk, 256 MiB: BIOS boot (random bytes, as GRUB's core), ext4 with files, FAT32, swap."

say "What imager sees on it"
run "$IMAGER" info "$DISK" 2>&1 | rel

say "Saving it"
run "$IMAGER" save "$DISK" "$DEMO/image" 2>&1 | rel
echo
run ls -l "$DEMO/image" | rel
printf 'disk: %s MiB allocated of 256 MiB; image: %s MiB\n' \
	"$(($(du -sk "$DISK" | cut -f1) / 1024))" "$(($(du -sk "$DEMO/image" | cut -f1) / 1024))"

say "The image"
run "$IMAGER" info "$DEMO/image" 2>&1 | rel

say "Verifying it"
run "$IMAGER" verify "$DEMO/image" 2>&1 | rel

say "Restoring it into build/demo/restored.img"
run "$IMAGER" restore "$DEMO/image" "$DEMO/restored.img" 2>&1 | rel

say "Checking the copy"
if diff <(sfdisk -d "$DISK" | sed "s|$DISK|DISK|") <(sfdisk -d "$DEMO/restored.img" | sed "s|$DEMO/restored.img|DISK|"); then
	echo "sfdisk -d: the partition tables match"
else
	echo "sfdisk -d: the partition tables DIFFER"; exit 1
fi
start=$(sfdisk --json "$DEMO/restored.img" | jq '.partitiontable.partitions[1].start * 512')
if e2fsck -fn "$DEMO/restored.img?offset=$start" >/dev/null 2>&1; then
	echo "e2fsck -fn: the restored ext4 is clean"
else
	echo "e2fsck -fn: the restored ext4 has ERRORS"; exit 1
fi
if cmp -s "$DISK" "$DEMO/restored.img"; then
	echo "cmp: the restored disk is byte-identical to the original"
else
	echo "cmp: the restored disk differs from the original in unused space"
fi

say "A libvirt definition for the restored disk (imager define; no daemon needed)"
run "$IMAGER" define "$DEMO/restored.img" --name imager-demo --no-inspect --domain-type qemu \
	--output "$DEMO/imager-demo.xml" --force 2>&1 | rel
grep -E '<driver|<target|<model|<cpu' "$DEMO/imager-demo.xml" | sed 's/^ */  /'
if command -v virt-xml-validate >/dev/null && virt-xml-validate "$DEMO/imager-demo.xml" domain >/dev/null 2>&1; then
	echo "virt-xml-validate: the definition is a valid libvirt domain"
else
	echo "virt-xml-validate: the definition is NOT valid"; exit 1
fi
