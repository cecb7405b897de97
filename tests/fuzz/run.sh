#!/bin/sh
# run.sh SECONDS FUZZER...: each libFuzzer harness for SECONDS (or, with
# FUZZ_RUNS=N set, for N inputs from seed 1: the same run every time) from its seed
# corpus (tests/fuzz/corpus/NAME, copied: the seeds stay as committed; what
# the run finds is kept in build/fuzz/corpus/NAME for the next run; its log
# in build/fuzz/logs/NAME.log), with a
# 10 s limit per input and 2 GiB of memory.  Prints, per harness, the
# executions and the coverage (edges, libFuzzer's "cov") it reached; exits 1
# when one finds a crash, a leak, a sanitizer report or a timeout (the
# input is kept in build/fuzz/crashes/NAME/).
set -u
secs=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# (libparted's own constructor reads past a buffer with strchr: the Makefile, unit-san)
export ASAN_OPTIONS=detect_leaks=1:intercept_strchr=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
rc=0
for f in "$@"; do
	name=$(basename "$f")
	dir=$(dirname "$f")
	corpus=$dir/corpus/$name
	crashes=$dir/crashes/$name
	mkdir -p "$corpus" "$crashes"
	[ -d "$here/corpus/$name" ] && cp -n "$here/corpus/$name"/* "$corpus/" 2>/dev/null
	mkdir -p "$dir/logs"
	log=$dir/logs/$name.log
	if [ -n "${FUZZ_RUNS:-}" ]; then
		# a fixed count of inputs from a fixed seed, over a fresh copy of
		# the committed seeds: the same run every time (make check)
		corpus=$dir/corpus-fixed/$name
		rm -rf "$corpus" && mkdir -p "$corpus"
		[ -d "$here/corpus/$name" ] && cp "$here/corpus/$name"/* "$corpus/" 2>/dev/null
		limit="-runs=$FUZZ_RUNS -seed=1"
	else
		limit="-max_total_time=$secs"
	fi
	# shellcheck disable=SC2086
	"$f" $limit -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1
	r=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
	printf '%-16s %10s executions  %6s edges  %s\n' "$name" "${runs:-?}" "${cov:-?}" \
		"$([ "$r" = 0 ] && echo ok || echo "FAILED (exit $r): see $log and $crashes/")"
	if [ "$r" != 0 ]; then
		grep -m 1 -A 12 'ERROR: \|runtime error\|Timeout\|out-of-memory' "$log" | sed 's/^/    /'
		rc=1
	fi
done
exit $rc
