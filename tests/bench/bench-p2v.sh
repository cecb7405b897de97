#!/bin/bash
# P2V benchmark (part of `make bench`): the whole move of the test guest
# (tests/guest/debian12.sh, a Debian 12 "physical" machine on SATA) onto the
# local libvirtd, side by side:
#
#   imager p2v GUEST --connect qemu:///system --pool P --start
#       volume created by libvirt (qcow2, metadata), written, converted,
#       defined, started; the guest must reach its marker
#   virt-v2v -i disk COPY -o libvirt -os P -of qcow2
#       its volume and definition in the same pool
#
# Shown: wall time of each job (imager's without the boot), the ratio, the
# disk and NIC settings of each definition as libvirt holds them, and
# whether virt-v2v's disk boots on virtio (under qemu, TCG).  Target:
# imager's job takes at most 0.25 of virt-v2v's, and its guest boots.
#
# With BENCH_P2V_INPUT=ova (the bench's part v2v), the test guest is
# moved off VMware instead: packed as ESXi exports it (tests/lib/ova.sh: a
# streamOptimized VMDK in an OVA with its OVF and manifest), and the pair
# is `imager p2v guest.ova` against `virt-v2v -i ova guest.ova -o
# libvirt`.  Target: at most 0.2 of virt-v2v's time, and the guest boots.
#
# Environment: IMAGER (default build/imager), BENCH_WORK (scratch space),
# BENCH_P2V_INPUT (disk, the default, or ova).
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
INPUT=${BENCH_P2V_INPUT:-disk}
case $INPUT in disk | ova) ;; *) echo "bench-p2v: BENCH_P2V_INPUT is disk or ova" >&2; exit 1 ;; esac
WORK=${BENCH_WORK:-/var/tmp/imager-bench/work}/p2v-$INPUT
export TESTS_LIB=$ROOT/tests/lib
# One KVM-or-TCG decision, the product's, for imager and the libguestfs tools.
# shellcheck source=../lib/guestfs.sh
. "$TESTS_LIB/guestfs.sh"
guestfs_decide
# shellcheck source=../lib/guestboot.sh
. "$TESTS_LIB/guestboot.sh"

[ "$(id -u)" = 0 ] || { echo "bench-p2v: needs root (libvirtd, the test guest): skipped"; exit 0; }
command -v virt-v2v >/dev/null || { echo "bench-p2v: virt-v2v missing (make bench installs it)"; exit 1; }
GUEST=$(guest_image) || { echo "bench-p2v: the test guest could not be built"; exit 1; }
URI=qemu:///system
lv() { virsh -q -c "$URI" "$@"; }

started=0
if ! lv version >/dev/null 2>&1; then
	virtlogd -d 2>/dev/null || true
	libvirtd -d
	for _ in $(seq 100); do lv version >/dev/null 2>&1 && break; sleep 0.2; done
	started=1
fi
POOL=imager-bench-pool
IDOM=imager-bench-p2v
VDOM=imager-bench-v2v
BENCH_NAME=bench-p2v
# shellcheck source=timing.sh
. "$ROOT/tests/bench/timing.sh"
leftovers() {
	libvirt_drop $POOL $IDOM $VDOM
	rm -rf "$WORK"
}
cleanup() {
	leftovers
	if [ $started = 1 ]; then
		kill "$(cat /run/libvirtd.pid 2>/dev/null)" 2>/dev/null || true
	fi
}
trap cleanup EXIT
# (a bench stopped by a signal cleans up too: its pool left defined became
# a second pool on this machine, beside the tests' own)
trap 'exit 130' INT
trap 'exit 143' TERM
leftovers
mkdir -p "$WORK/pool"
chmod 755 "$WORK" "$WORK/pool"
lv pool-define-as $POOL dir --target "$WORK/pool" >/dev/null
lv pool-start $POOL >/dev/null
if [ "$INPUT" = ova ]; then
	# shellcheck source=../lib/ova.sh
	. "$TESTS_LIB/ova.sh"
	make_ova "$GUEST" "$WORK/guest.ova" name=guest memory=2048 vcpus=2 mac=00:50:56:01:02:03
	ISOURCE=$WORK/guest.ova
	VINPUT=(-i ova "$WORK/guest.ova")
	TARGET=0.2
else
	qemu-img convert -O qcow2 "$GUEST" "$WORK/copy.qcow2"
	ISOURCE=$GUEST
	VINPUT=(-i disk "$WORK/copy.qcow2")
	TARGET=0.25
fi

echo "moving the test guest onto $URI, pool $POOL (TCG):"
timed imager "$IMAGER" p2v "$ISOURCE" --name $IDOM --connect $URI --pool $POOL --format qcow2 \
	--preallocation metadata --serial-log "$WORK/serial.log" --no-progress --start
timed virt_v2v virt-v2v "${VINPUT[@]}" -o libvirt -oc $URI -os $POOL -of qcow2 -on $VDOM

echo "imager's guest, started by p2v:"
iboot="DOES NOT BOOT"
for _ in $(seq 200); do
	if grep -aq IMAGER-GUEST-UP "$WORK/serial.log" 2>/dev/null; then
		iboot="boots (root=$(guest_marker_field "$WORK/serial.log" root), net=$(guest_marker_field "$WORK/serial.log" net))"
		break
	fi
	sleep 3
done
echo "  $iboot"
if ! lv dominfo $VDOM >/dev/null 2>&1; then
	echo "virt-v2v did not define $VDOM; what it said:"
	grep -iE 'warning|error|xml' "$WORK/virt_v2v.log" | head -n 8 | sed 's/^/    | /'
	VXML=$(grep -oE '/[^ ]*\.xml' "$WORK/virt_v2v.log" | head -n 1 || true)
	if [ -n "$VXML" ] && [ -f "$VXML" ]; then
		echo "  defining its XML ($VXML) as type qemu, to compare the settings"
		sed "s/type='kvm'/type='qemu'/" "$VXML" >"$WORK/v2v-qemu.xml"
		lv define "$WORK/v2v-qemu.xml" >/dev/null || true
	fi
fi
echo "virt-v2v's disk, booted on virtio-blk under qemu:"
vdisk=$(lv vol-list $POOL | awk '$1 ~ /^'$VDOM'/ { print $2; exit }')
if guest_boot "$vdisk" qcow2 virtio-blk "$WORK/boot-v2v.log" 420 >/dev/null 2>&1; then
	vboot="boots (root=$(guest_marker_field "$WORK/boot-v2v.log" root))"
else
	vboot="DOES NOT BOOT ($GUEST_BOOT_RESULT)"
	tr -d '\r' <"$WORK/boot-v2v.log" | grep -a -v '^$' | tail -n 6 | sed 's/^/    | /'
fi
echo "  $vboot"

settings() { # DOMAIN
	lv dumpxml "$1" >"$WORK/$1.xml" 2>/dev/null || { printf 'not defined'; return; }
	printf 'disk %s bus=%s cache=%s io=%s discard=%s; nic %s; cpu %s; machine %s' \
		"$(xmllint --xpath 'string(/domain/devices/disk[1]/driver/@type)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/devices/disk[1]/target/@bus)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/devices/disk[1]/driver/@cache)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/devices/disk[1]/driver/@io)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/devices/disk[1]/driver/@discard)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/devices/interface[1]/model/@type)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/cpu/@mode)' "$WORK/$1.xml")" \
		"$(xmllint --xpath 'string(/domain/os/type/@machine)' "$WORK/$1.xml")"
}
r=$(calc "${T[imager]} / ${T[virt_v2v]}")
echo
printf '%-26s %8s  %s\n' "" "wall s" "guest"
printf '%-26s %8.1f  %s\n' "imager p2v --connect" "${T[imager]}" "$iboot"
printf '%-26s %8.1f  %s\n' "virt-v2v -o libvirt" "${T[virt_v2v]}" "$vboot"
echo "definitions as libvirt holds them:"
echo "  imager:   $(settings $IDOM)"
echo "  virt-v2v: $(settings $VDOM)"
ok=ok
awk "BEGIN { exit !($r <= $TARGET) }" || ok=MISSED
case $iboot in boots*) ;; *) ok=MISSED ;; esac
echo "imager / virt-v2v:"
printf '  p2v (%s) onto libvirt  %5.2f  (target <= %s, and the guest boots) %s\n' "$INPUT" "$r" \
	"$TARGET" "$ok"
