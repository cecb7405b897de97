#!/bin/sh
# Run unit test binaries; each prints its own lines and exits non-zero on failure.
rc=0
for t in "$@"; do
	"$t" || { echo "FAIL: $t"; rc=1; }
done
exit $rc
