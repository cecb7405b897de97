#!/bin/bash
# Opening an image without restoring it (part "open" of `make bench`).
#
# serve: the bench's sample disk (DISK: 8 GiB, GPT, ext4 with 1.5 GiB of
# real files) saved by imager, then
#   first byte   from `imager serve DIR --socket S` started to the first
#                4 KiB read back (qemu-io), page caches dropped
#   random 4K    qemu-io reading 200 random 4 KiB blocks inside the used
#                data, on a fresh server (cold frame cache): the mean
#                latency, and the same blocks read again (warm)
#   sequential   nbdcopy of the whole export to null: against `imager
#                restore DIR FILE` of the same image (sparse, synced), the
#                time ratio (target: none; the restore also writes)
# instant: the test guest (tests/guest/debian12.sh) saved into an image
# folder, then moved onto the local libvirtd twice, each timed from the
# command to the guest's marker on its serial console:
#   imager p2v DIR --connect qemu:///system --pool P --start
#   imager run DIR --pool P                    (p2v --instant)
# and the guest's own boot (virsh start of the p2v guest to its marker).
# Target: instant <= its own boot + 15 s.
#
# Environment: IMAGER, DISK (the sample disk; part serve skipped without
# it), BENCH_WORK (scratch space).
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
IMAGER=${IMAGER:-$ROOT/build/imager}
WORK=${BENCH_WORK:-/var/tmp/imager-bench/work}/open
export TESTS_LIB=$ROOT/tests/lib
BENCH_NAME=bench-open
# shellcheck source=timing.sh
. "$ROOT/tests/bench/timing.sh"
[ "$(id -u)" = 0 ] || { echo "bench-open: needs root (libvirtd, page caches): skipped"; exit 0; }
for c in nbdkit qemu-io nbdcopy; do
	command -v $c >/dev/null || { echo "bench-open: needs $c (make deps)"; exit 1; }
done
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
SRV=
stop_server() {
	if [ -n "$SRV" ]; then
		kill "$SRV" 2>/dev/null || true
		wait "$SRV" 2>/dev/null || true
		SRV=
	fi
	rm -f "$WORK/sock"
}
URI=qemu:///system
POOL=imager-bench-open-pool
lv() { virsh -q -c "$URI" "$@"; }
leftovers() { libvirt_drop $POOL imager-bench-open-p2v imager-bench-open-run; }
cleanup() { stop_server; leftovers; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rm -rf "$WORK"
mkdir -p "$WORK"
chmod 755 "$WORK"

# serve_up [--cache SIZE]: a server of $WORK/image on $WORK/sock; prints
# nothing, sets SRV.
serve_up() {
	"$IMAGER" serve "$WORK/image" --socket "$WORK/sock" "$@" >"$WORK/serve.log" 2>&1 &
	SRV=$!
}
# first_byte: FB, seconds from the server's start to a 4 KiB read answered.
first_byte() {
	local t0 t1
	t0=$(now)
	serve_up
	until qemu-io -r -f raw -c 'read 0 4k' "nbd+unix:///?socket=$WORK/sock" >/dev/null 2>&1; do
		kill -0 "$SRV" 2>/dev/null || { echo "bench-open: the server stopped: $(cat "$WORK/serve.log")"; exit 1; }
		sleep 0.01
	done
	t1=$(now)
	FB=$(calc "$t1 - $t0")
}
# mean_latency FILE: the mean of qemu-io's per-read times (ms).
mean_latency() {
	awk '/ops; / { split($0, a, "ops; "); split(a[2], b, " "); t = b[1]; n = split(t, p, ":");
		s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; sum += s; k++ }
		END { if (k) printf "%.3f", sum / k * 1000; else print "?" }' "$1"
}

if [ -n "${DISK:-}" ] && [ -f "$DISK" ]; then
	echo "serving the sample disk's image (imager serve, nbdkit):"
	timed save "$IMAGER" save "$DISK" "$WORK/image" --no-progress
	drop
	timed restore "$IMAGER" restore "$WORK/image" "$WORK/restored.img" --no-progress
	rm -f "$WORK/restored.img"
	# The used data's extents: random reads fall inside them.
	drop
	first_byte
	echo "  first byte: $FB s (the server started, the folder checked, cold caches)"
	nbdinfo --map "nbd+unix:///?socket=$WORK/sock" | awk '$3 == 0 { print $1, $2 }' >"$WORK/data.map"
	stop_server
	awk -v seed=7 'BEGIN { srand(seed) } { off[NR] = $1; len[NR] = $2 }
		END { for (i = 0; i < 200; i++) { r = int(rand() * NR) + 1; o = off[r] + int(rand() * (len[r] / 4096)) * 4096;
		if (o + 4096 > off[r] + len[r]) o = off[r]; printf "-c\nread %d 4k\n", o } }' "$WORK/data.map" >"$WORK/reads"
	mapfile -t READS <"$WORK/reads"
	drop
	serve_up
	until [ -S "$WORK/sock" ]; do sleep 0.01; done
	qemu-io -r -f raw "${READS[@]}" "nbd+unix:///?socket=$WORK/sock" >"$WORK/cold.txt"
	qemu-io -r -f raw "${READS[@]}" "nbd+unix:///?socket=$WORK/sock" >"$WORK/warm.txt"
	cold=$(mean_latency "$WORK/cold.txt")
	warm=$(mean_latency "$WORK/warm.txt")
	echo "  random 4 KiB reads (200): cold cache $cold ms, warm $warm ms (mean)"
	stop_server
	drop
	serve_up
	until [ -S "$WORK/sock" ]; do sleep 0.01; done
	timed sequential nbdcopy "nbd+unix:///?socket=$WORK/sock" null:
	stop_server
	rs=$(calc "${T[sequential]} / ${T[restore]}")
	printf '  sequential read of the export %.2f s against a restore %.2f s: %.2f\n' \
		"${T[sequential]}" "${T[restore]}" "$rs"
	rm -rf "$WORK/image"
else
	echo "serve: no sample disk (DISK): skipped"
fi

# ---- instant ----
# shellcheck source=../lib/guestfs.sh
. "$TESTS_LIB/guestfs.sh"
guestfs_decide
# shellcheck source=../lib/guestboot.sh
. "$TESTS_LIB/guestboot.sh"
GUEST=$(guest_image) || { echo "bench-open: the test guest could not be built"; exit 1; }
if ! lv version >/dev/null 2>&1; then
	virtlogd -d 2>/dev/null || true
	libvirtd -d
	for _ in $(seq 100); do lv version >/dev/null 2>&1 && break; sleep 0.2; done
fi
leftovers
mkdir -p "$WORK/pool"
chmod 755 "$WORK/pool"
lv pool-define-as $POOL dir --target "$WORK/pool" >/dev/null
lv pool-start $POOL >/dev/null
export IMAGER_INSTANT_DIR=$WORK/instant
"$IMAGER" save "$GUEST" "$WORK/guest" --no-progress >/dev/null

# to_marker NAME LOG CMD...: seconds from CMD's start to the marker in LOG.
to_marker() {
	local name=$1 log=$2 t0 pid
	shift 2
	t0=$(now)
	"$@" >"$WORK/$name.log" 2>&1 &
	pid=$!
	for _ in $(seq 3000); do
		grep -aq IMAGER-GUEST-UP "$log" 2>/dev/null && break
		sleep 0.2
	done
	grep -aq IMAGER-GUEST-UP "$log" || { echo "bench-open: $name: no marker"; tail -n 5 "$WORK/$name.log"; exit 1; }
	T[$name]=$(calc "$(now) - $t0")
	wait "$pid" || { echo "bench-open: $name failed:"; tail -n 5 "$WORK/$name.log"; exit 1; }
	echo "  $name: ${T[$name]} s to the marker"
}
echo "the test guest's image onto $URI, to its marker (TCG):"
to_marker p2v "$WORK/p2v.serial" "$IMAGER" p2v "$WORK/guest" --name imager-bench-open-p2v \
	--connect $URI --pool $POOL --serial-log "$WORK/p2v.serial" --start --no-progress
to_marker instant "$WORK/run.serial" "$IMAGER" run "$WORK/guest" --name imager-bench-open-run \
	--pool $POOL --serial-log "$WORK/run.serial" --no-progress
for _ in $(seq 300); do [ "$(lv domstate imager-bench-open-p2v)" = "shut off" ] && break; sleep 1; done
: >"$WORK/p2v.serial"
to_marker boot "$WORK/p2v.serial" virsh -q -c $URI start imager-bench-open-p2v
limit=$(calc "${T[boot]} + 15")
ok=ok
awk "BEGIN { exit !(${T[instant]} <= $limit) }" || ok=MISSED
printf '  p2v --instant to the marker %.1f s, p2v %.1f s: %.2f; the boot alone %.1f s\n' \
	"${T[instant]}" "${T[p2v]}" "$(calc "${T[instant]} / ${T[p2v]}")" "${T[boot]}"
printf '  instant <= its boot + 15 s (%.1f s) %s\n' "$limit" "$ok"
