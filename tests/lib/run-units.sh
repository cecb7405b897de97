#!/bin/sh
# Run unit test binaries; each prints its own lines and exits 0 (passed),
# 77 (a part could not run here: its SKIP lines say why) or else (failed).
rc=0
for t in "$@"; do
	st=0
	"$t" || st=$?
	case $st in
	0) ;;
	77) echo "SKIPPED (in part): $t" ;;
	*) echo "FAIL: $t"; rc=1 ;;
	esac
done
exit $rc
