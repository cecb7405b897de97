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
# Then the same pair (imager's fast way, virt-v2v) on the RHEL-like guest
# (tests/guest/debian12-rhel.sh: UEFI, XFS root on LVM, dracut hostonly),
# each booted under OVMF; the same target.
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
RHEL=$(guest_image rhel) || { echo "bench-convert: the RHEL-like guest could not be built"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK/v2v" "$WORK/v2v-rhel"
for n in 1 2 3; do
	qemu-img convert -O qcow2 "$GUEST" "$WORK/copy$n.qcow2"
done
for n in 1 2; do
	qemu-img convert -O qcow2 "$RHEL" "$WORK/rhel$n.qcow2"
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
echo "converting the RHEL-like guest:"
timed rhel_imager "$IMAGER" convert "$WORK/rhel1.qcow2"
timed rhel_v2v virt-v2v -i disk "$WORK/rhel2.qcow2" -o local -os "$WORK/v2v-rhel" -of qcow2 -on v2vrhel

v2vdisk=$(ls "$WORK"/v2v/v2vguest-sd* | head -n 1)
v2vrhel=$(ls "$WORK"/v2v-rhel/v2vrhel-sd* | head -n 1)
echo "booting each on virtio-blk (TCG; the RHEL-like ones under OVMF):"
for pair in "imager_fast:$WORK/copy1.qcow2" "imager_rebuild:$WORK/copy2.qcow2" "virt_v2v:$v2vdisk" \
	"rhel_imager:$WORK/rhel1.qcow2" "rhel_v2v:$v2vrhel"; do
	name=${pair%%:*} disk=${pair#*:} fw=bios
	case $name in rhel_*) fw=uefi ;; esac
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
printf '%-44s %8.1f  %s\n' "RHEL-like: imager convert" "${T[rhel_imager]}" "${B[rhel_imager]}"
printf '%-44s %8.1f  %s\n' "RHEL-like: virt-v2v -i disk -o local" "${T[rhel_v2v]}" "${B[rhel_v2v]}"
echo
ok=ok
awk "BEGIN { exit !($r <= 0.2) }" || ok=MISSED
case ${B[imager_fast]} in boots*) ;; *) ok=MISSED ;; esac
echo "imager / virt-v2v:"
printf '  convert (fast way)     %5.2f  (target <= 0.20, and the guest boots) %s\n' "$r" "$ok"
printf '  convert (rebuild)      %5.2f  (shown for comparison)\n' "$rr"
rh=$(calc "${T[rhel_imager]} / ${T[rhel_v2v]}")
okr=ok
awk "BEGIN { exit !($rh <= 0.2) }" || okr=MISSED
case ${B[rhel_imager]} in boots*) ;; *) okr=MISSED ;; esac
printf '  convert RHEL-like      %5.2f  (target <= 0.20, and the guest boots) %s\n' "$rh" "$okr"
