# Timing helpers shared by the comparison benchmarks (bench-convert.sh,
# bench-p2v.sh, bench-windows.sh).  Sourced after WORK is set and BENCH_NAME
# names the script in messages.
#   now                 seconds since the epoch, with nanoseconds
#   calc EXPR           awk arithmetic, three decimals
#   timed NAME CMD...   runs CMD with its output in $WORK/NAME.log; stores
#                       the wall time in T[NAME] and prints it; on failure
#                       prints the log's tail and exits 1
#   timed_try NAME CMD...  the same for an anchor that may fail on a guest
#                       (virt-v2v on a layout it does not know): on failure
#                       T[NAME] is the time it took to fail, FAILED[NAME]
#                       its first error line, and it returns 1
#   libvirt_drop POOL DOMAIN...  the bench's domains destroyed and
#                       undefined, the pool's volumes deleted, the pool
#                       destroyed and undefined (through lv, the caller's
#                       virsh); what is not there is no error
declare -A T FAILED
libvirt_drop() {
	local pool=$1 d
	shift
	for d in "$@"; do
		lv destroy "$d" >/dev/null 2>&1 || true
		lv undefine --nvram "$d" >/dev/null 2>&1 || lv undefine "$d" >/dev/null 2>&1 || true
	done
	lv vol-list "$pool" 2>/dev/null | awk '{ print $1 }' | while read -r v; do
		lv vol-delete --pool "$pool" "$v" >/dev/null 2>&1 || true
	done || true
	lv pool-destroy "$pool" >/dev/null 2>&1 || true
	lv pool-undefine "$pool" >/dev/null 2>&1 || true
}
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }
timed() {
	local t0 t1 name=$1
	shift
	t0=$(now)
	if "$@" >"$WORK/$name.log" 2>&1; then :; else
		echo "$BENCH_NAME: $name failed:"; tail -n 20 "$WORK/$name.log"; exit 1
	fi
	t1=$(now)
	T[$name]=$(calc "$t1 - $t0")
	echo "  $name: ${T[$name]} s"
}
timed_try() {
	local t0 t1 name=$1 rc=0
	shift
	t0=$(now)
	"$@" >"$WORK/$name.log" 2>&1 || rc=$?
	t1=$(now)
	T[$name]=$(calc "$t1 - $t0")
	if [ "$rc" != 0 ]; then
		FAILED[$name]=$(grep -m 1 -i 'error' "$WORK/$name.log" || tail -n 1 "$WORK/$name.log")
		echo "  $name: failed after ${T[$name]} s: ${FAILED[$name]}"
		return 1
	fi
	echo "  $name: ${T[$name]} s"
}
