# The watchdog of every guest boot in the tests (guest_boot in guestboot.sh,
# live_qemu in live.sh).  Sourced (defines functions only).
#
#   qemu_watch_start      makes a QMP socket path and sets QEMU_WATCH_ARGS,
#                         the qemu options that open it (no wait for a client)
#   qemu_watch_silent LOG START
#                         true when LOG (the serial console) is still empty
#                         QEMU_SILENT_SECONDS (default 90) after START (a
#                         $SECONDS value): a boot that stopped before the
#                         kernel's console (firmware, GRUB, qemu itself)
#   qemu_watch_evidence NAME
#                         prints what the guest shows: `info status`, `info
#                         registers`, the VGA text screen as text; saves the
#                         screen as a PNG in $IMAGER_TEST_EVIDENCE (tests/run
#                         sets it under build/test-logs/evidence; else /tmp)
#                         and says where
#   qemu_watch_stop       removes the socket
#
# Why: an empty serial log says only that the guest printed nothing.  Before
# this watchdog, such boots ran to their 600 s limit twice; now they end
# after 90 s, with what the screen showed and where the vCPU was.

QEMU_SILENT_SECONDS=${QEMU_SILENT_SECONDS:-90}

qemu_watch_start() {
	# (a short path: a Unix socket's name is at most 107 bytes)
	QEMU_WATCH_SOCK=$(mktemp -u /tmp/imager-qmp.XXXXXXXX)
	QEMU_WATCH_ARGS=(-qmp "unix:$QEMU_WATCH_SOCK,server=on,wait=off")
}

qemu_watch_silent() { # LOG START
	[ ! -s "$1" ] && [ $((SECONDS - $2)) -ge "$QEMU_SILENT_SECONDS" ]
}

qemu_watch_evidence() { # NAME
	local dir=${IMAGER_TEST_EVIDENCE:-/tmp} prefix
	mkdir -p "$dir"
	prefix=$dir/$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')-$(date +%H%M%S)
	printf '   ---- what the guest shows after %ss of a silent serial console\n' "$QEMU_SILENT_SECONDS"
	python3 "${TESTS_LIB:-$(dirname "${BASH_SOURCE[0]}")}/qmp.py" "$QEMU_WATCH_SOCK" evidence "$prefix" 2>&1 |
		sed 's/^/   | /'
	printf '   ---- host load: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
}

qemu_watch_stop() {
	[ -n "${QEMU_WATCH_SOCK:-}" ] && rm -f "$QEMU_WATCH_SOCK"
	return 0
}
