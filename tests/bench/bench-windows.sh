#!/bin/bash
# Windows conversion benchmark (part of `make bench`): imager convert against
# virt-v2v-in-place, side by side on copies of the same synthetic Windows 10
# disk (tests/lib/windisk.sh), drivers from the same fake virtio-win, as a
# folder and as an ISO image, all under TCG.
#
#   imager convert COPY --virtio-win DIR|ISO
#   VIRTIO_WIN=DIR|ISO virt-v2v-in-place -i disk COPY
#     (VIRT_TOOLS_DATA_DIR holds a placeholder rhsrvany.exe: virt-v2v only
#     copies it into the guest, and refuses Windows without one)
#
# Shown: wall time, and what each leaves in the hives that Windows keeps
# after its first boot (virt-v2v's guestor.inf driver-database entries stay;
# imager's are removed by its first-boot step, which cannot run here: no
# real Windows).  Target: imager takes at most 0.5 of virt-v2v's time with
# the ISO (virt-v2v starts a second appliance to read it; imager reads it
# with libarchive) and no more than virt-v2v's with a folder.
#
# Environment: IMAGER (default build/imager), BENCH_WORK (scratch space).
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
WORK=${BENCH_WORK:-/var/tmp/imager-bench/work}/windows
export TESTS_LIB=$ROOT/tests/lib
# One KVM-or-TCG decision, the product's, for imager and the libguestfs tools.
# shellcheck source=../lib/guestfs.sh
. "$TESTS_LIB/guestfs.sh"
guestfs_decide

[ "$(id -u)" = 0 ] || { echo "bench-windows: needs root (libguestfs appliance): skipped"; exit 0; }
command -v virt-v2v-in-place >/dev/null ||
	{ echo "bench-windows: virt-v2v-in-place missing (make bench installs virt-v2v)"; exit 1; }
# windisk.sh speaks the test harness's language
fail() { echo "bench-windows: $*"; exit 1; }
skip() { echo "bench-windows: skipped: $*"; exit 0; }
note() { echo "  $*"; }
need_cmd() { local c; for c in "$@"; do command -v "$c" >/dev/null || skip "needs $c"; done; }
need_loop() { need_cmd losetup partx; losetup -f >/dev/null 2>&1 || skip "no free loop device"; }
# (windisk.sh's loop devices, mounts and temporary files are undone at exit)
_cleanups=()
on_exit() { _cleanups+=("$*"); }
_run_cleanups() { local i; for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[i]}" >/dev/null 2>&1 || true; done; }
trap _run_cleanups EXIT
# shellcheck source=../lib/windisk.sh
. "$TESTS_LIB/windisk.sh"

rm -rf "$WORK"
mkdir -p "$WORK/tools"
# (windisk.sh's mount points go under the harness's per-test folder T)
T=$WORK
win_disk "$WORK/orig.raw" win10
virtio_win_tree "$WORK/vw" iso
virtio_win_iso "$WORK/vw.iso" "$WORK/vw"
echo "placeholder: virt-v2v copies this file into the guest" >"$WORK/tools/rhsrvany.exe"
for n in 1 2 3 4; do cp --sparse=always "$WORK/orig.raw" "$WORK/copy$n.raw"; done

BENCH_NAME=bench-windows
# shellcheck source=timing.sh
. "$ROOT/tests/bench/timing.sh"
echo "converting a synthetic Windows 10 (TCG; a libguestfs launch alone takes ~25 s here):"
timed imager_folder "$IMAGER" convert "$WORK/copy1.raw" --virtio-win "$WORK/vw"
timed imager_iso "$IMAGER" convert "$WORK/copy2.raw" --virtio-win "$WORK/vw.iso"
timed v2v_folder env VIRTIO_WIN="$WORK/vw" VIRT_TOOLS_DATA_DIR="$WORK/tools" \
	virt-v2v-in-place -i disk -if raw "$WORK/copy3.raw"
timed v2v_iso env VIRTIO_WIN="$WORK/vw.iso" VIRT_TOOLS_DATA_DIR="$WORK/tools" \
	virt-v2v-in-place -i disk -if raw "$WORK/copy4.raw"

# What stays in the driver database once Windows has booted: entries of a
# package that is not in the driver store (pnputil /enum-drivers and feature
# upgrades trip over them).  imager's go at first boot (its script says so).
win_extract "$WORK/copy1.raw" "$WORK/x-imager" >/dev/null
win_extract "$WORK/copy3.raw" "$WORK/x-v2v" >/dev/null
stale_v2v=$(reg_flat "$WORK/x-v2v/SYSTEM" | grep -c 'guestor\.inf' || true)
ddb_imager=$(reg_flat "$WORK/x-imager/SYSTEM" | grep -c 'imager_viostor\.inf' || true)
removed=$(tr -d '\r' <"$WORK/x-imager/firstboot.cmd" | grep -c 'reg.exe delete "HKLM\\SYSTEM\\DriverDatabase' || true)
win_hives win10 "$WORK/before" >/dev/null 2>&1 || true
old_imager=$(reg_diff "$WORK/before/SYSTEM" "$WORK/x-imager/SYSTEM" | grep -c '^+ .*Start	dword	0x00000004' || true)
old_v2v=$(reg_diff "$WORK/before/SYSTEM" "$WORK/x-v2v/SYSTEM" | grep -c '^+ .*Start	dword	0x00000004' || true)

r_iso=$(calc "${T[imager_iso]} / ${T[v2v_iso]}")
r_dir=$(calc "${T[imager_folder]} / ${T[v2v_folder]}")
echo
printf '%-40s %8s\n' "" "wall s"
printf '%-40s %8.1f\n' "imager convert, virtio-win folder" "${T[imager_folder]}"
printf '%-40s %8.1f\n' "virt-v2v-in-place, virtio-win folder" "${T[v2v_folder]}"
printf '%-40s %8.1f\n' "imager convert, virtio-win ISO" "${T[imager_iso]}"
printf '%-40s %8.1f\n' "virt-v2v-in-place, virtio-win ISO" "${T[v2v_iso]}"
echo "driver-database keys and values left for good: virt-v2v $stale_v2v (guestor.inf);" \
	"imager none ($ddb_imager temporary ones, removed by $removed first-boot commands)"
echo "old-platform services disabled: imager $old_imager, virt-v2v $old_v2v (of 6 planted)"
ok_iso=ok ok_dir=ok
awk "BEGIN { exit !($r_iso <= 0.5) }" || ok_iso=MISSED
awk "BEGIN { exit !($r_dir <= 1.0) }" || ok_dir=MISSED
echo "imager / virt-v2v:"
printf '  windows, ISO           %5.2f  (target <= 0.50) %s\n' "$r_iso" "$ok_iso"
printf '  windows, folder        %5.2f  (target <= 1.00) %s\n' "$r_dir" "$ok_dir"
