# Timing helpers shared by the comparison benchmarks (bench-convert.sh,
# bench-p2v.sh, bench-windows.sh).  Sourced after WORK is set and BENCH_NAME
# names the script in messages.
#   now                 seconds since the epoch, with nanoseconds
#   calc EXPR           awk arithmetic, three decimals
#   timed NAME CMD...   runs CMD with its output in $WORK/NAME.log; stores
#                       the wall time in T[NAME] and prints it; on failure
#                       prints the log's tail and exits 1
declare -A T
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
