#!/bin/bash
# Conversion benchmark (part of `make bench`): imager convert against
# virt-v2v -i disk -o local, side by side on copies of the same test guest
# (tests/guest/debian12.sh: a Debian 12 "physical" machine without virtio in
# its initramfs), both forced to TCG as everything here must be.
#
#   imager convert COPY1                      the fast way (appended archive)
#   imager convert COPY2 --rebuild-initramfs  the full way (shown, no target)
#   virt-v2v -i disk COPY3 -o local -os DIR -of qcow2
#
# Each converted disk is then booted under qemu (TCG) on virtio-blk with a
# virtio NIC, and whether it reaches userspace is shown.  Target: imager's
# fast way takes at most 0.2 of virt-v2v's time.
#
# Then the same pair (imager's fast way, virt-v2v) on each family's guest:
# RHEL-like (tests/guest/debian12-rhel.sh: UEFI, XFS root on LVM, dracut
# hostonly), SUSE-like (debian12-suse.sh: BIOS, btrfs subvolumes, dracut
# hostonly), Ubuntu-like (debian12-uefi.sh: UEFI, initramfs-tools, root
# named /dev/sda2) and systemd-boot (debian12-bls.sh: a BLS entry and the
# initramfs on the ESP), each booted (OVMF for the UEFI ones); the same
# target for each.
#
# Environment: IMAGER (default build/imager), BENCH_WORK (scratch space).
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
WORK=${BENCH_WORK:-/var/tmp/imager-bench/work}/convert
export TESTS_LIB=$ROOT/tests/lib
# One KVM-or-TCG decision, the product's, for imager and the libguestfs tools.
# shellcheck source=../lib/guestfs.sh
. "$TESTS_LIB/guestfs.sh"
guestfs_decide
# shellcheck source=../lib/guestboot.sh
. "$TESTS_LIB/guestboot.sh"

[ "$(id -u)" = 0 ] || { echo "bench-convert: needs root (the test guest is built with loop devices): skipped"; exit 0; }
command -v virt-v2v >/dev/null || { echo "bench-convert: virt-v2v missing (make bench installs it)"; exit 1; }
GUEST=$(guest_image) || { echo "bench-convert: the test guest could not be built"; exit 1; }
# VARIANT:FIRMWARE:what it is
FAMILIES=("rhel:uefi:RHEL-like" "suse:bios:SUSE-like" "uefi:uefi:Ubuntu-like" "bls:uefi:systemd-boot")
rm -rf "$WORK"
mkdir -p "$WORK/v2v"
for n in 1 2 3; do
	qemu-img convert -O qcow2 "$GUEST" "$WORK/copy$n.qcow2"
done
for f in "${FAMILIES[@]}"; do
	v=${f%%:*}
	img=$(guest_image "$v") || { echo "bench-convert: the ${f##*:} guest could not be built"; exit 1; }
	mkdir -p "$WORK/v2v-$v"
	for n in 1 2; do
		qemu-img convert -O qcow2 "$img" "$WORK/$v$n.qcow2"
	done
done

BENCH_NAME=bench-convert
# shellcheck source=timing.sh
. "$ROOT/tests/bench/timing.sh"
declare -A T B
# One launch first, untimed: libguestfs builds its cached appliance anew on
# the first launch after the host's packages (or the cache) changed, and
# whichever tool ran first would pay for that.
guestfish -a /dev/null run >/dev/null 2>&1 || echo "  (the warm-up launch failed; timing anyway)"
echo "converting (TCG; a libguestfs launch alone takes ~25 s here):"
timed imager_fast "$IMAGER" convert "$WORK/copy1.qcow2"
timed imager_rebuild "$IMAGER" convert "$WORK/copy2.qcow2" --rebuild-initramfs
timed virt_v2v virt-v2v -i disk "$WORK/copy3.qcow2" -o local -os "$WORK/v2v" -of qcow2 -on v2vguest
declare -A FW
pairs=("imager_fast:$WORK/copy1.qcow2" "imager_rebuild:$WORK/copy2.qcow2")
for f in "${FAMILIES[@]}"; do
	v=${f%%:*} fw=${f#*:} fw=${fw%%:*}
	echo "converting the ${f##*:} guest:"
	timed "${v}_imager" "$IMAGER" convert "$WORK/${v}1.qcow2"
	FW[${v}_imager]=$fw FW[${v}_v2v]=$fw
	pairs+=("${v}_imager:$WORK/${v}1.qcow2")
	if timed_try "${v}_v2v" virt-v2v -i disk "$WORK/${v}2.qcow2" -o local -os "$WORK/v2v-$v" -of qcow2 -on "v2v$v"; then
		pairs+=("${v}_v2v:$(ls "$WORK/v2v-$v/v2v$v"-sd* | head -n 1)")
	else
		B[${v}_v2v]="virt-v2v FAILED (${FAILED[${v}_v2v]})"
	fi
done

pairs+=("virt_v2v:$(ls "$WORK"/v2v/v2vguest-sd* | head -n 1)")
echo "booting each on virtio-blk (TCG; the UEFI ones under OVMF):"
for pair in "${pairs[@]}"; do
	name=${pair%%:*} disk=${pair#*:} fw=${FW[${pair%%:*}]:-bios}
	if GUEST_FIRMWARE=$fw guest_boot "$disk" qcow2 virtio-blk "$WORK/boot-$name.log" 420 >/dev/null 2>&1; then
		B[$name]="boots (root=$(guest_marker_field "$WORK/boot-$name.log" root), ${GUEST_BOOT_SECONDS} s)"
	else
		B[$name]="DOES NOT BOOT ($GUEST_BOOT_RESULT)"
		echo "  $name: the end of its serial console:"
		tr -d '\r' <"$WORK/boot-$name.log" | grep -a -v '^$' | tail -n 12 | sed 's/^/    | /'
	fi
	echo "  $name: ${B[$name]}"
done

r=$(calc "${T[imager_fast]} / ${T[virt_v2v]}")
rr=$(calc "${T[imager_rebuild]} / ${T[virt_v2v]}")
echo
printf '%-44s %8s  %s\n' "" "wall s" "converted guest"
printf '%-44s %8.1f  %s\n' "imager convert (appended initramfs archive)" "${T[imager_fast]}" "${B[imager_fast]}"
printf '%-44s %8.1f  %s\n' "imager convert --rebuild-initramfs" "${T[imager_rebuild]}" "${B[imager_rebuild]}"
printf '%-44s %8.1f  %s\n' "virt-v2v -i disk -o local" "${T[virt_v2v]}" "${B[virt_v2v]}"
for f in "${FAMILIES[@]}"; do
	v=${f%%:*}
	printf '%-44s %8.1f  %s\n' "${f##*:}: imager convert" "${T[${v}_imager]}" "${B[${v}_imager]}"
	printf '%-44s %8.1f  %s\n' "${f##*:}: virt-v2v -i disk -o local" "${T[${v}_v2v]}" "${B[${v}_v2v]}"
done
echo
ok=ok
awk "BEGIN { exit !($r <= 0.2) }" || ok=MISSED
case ${B[imager_fast]} in boots*) ;; *) ok=MISSED ;; esac
echo "imager / virt-v2v:"
printf '  convert (fast way)     %5.2f  (target <= 0.20, and the guest boots) %s\n' "$r" "$ok"
printf '  convert (rebuild)      %5.2f  (shown for comparison)\n' "$rr"
for f in "${FAMILIES[@]}"; do
	v=${f%%:*}
	rv=$(calc "${T[${v}_imager]} / ${T[${v}_v2v]}")
	okv=ok
	awk "BEGIN { exit !($rv <= 0.2) }" || okv=MISSED
	case ${B[${v}_imager]} in boots*) ;; *) okv=MISSED ;; esac
	if [ -n "${FAILED[${v}_v2v]:-}" ]; then
		# (no ratio against a conversion that did not happen)
		case ${B[${v}_imager]} in boots*) okv="ok (virt-v2v cannot convert it)" ;; esac
		printf '  convert %-14s   n/a  (virt-v2v failed after %.1f s; imager'"'"'s guest: %s) %s\n' \
			"${f##*:}" "${T[${v}_v2v]}" "${B[${v}_imager]}" "$okv"
		continue
	fi
	printf '  convert %-14s %5.2f  (target <= 0.20, and the guest boots) %s\n' "${f##*:}" "$rv" "$okv"
done
