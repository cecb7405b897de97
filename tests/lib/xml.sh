# XML checks for the VM definition suites.  Sourced after common.sh.
#
#   xp FILE XPATH               prints the string value of XPATH in FILE
#                               (xmllint; the imager: prefix is bound to
#                               imager's metadata namespace)
#   assert_xp FILE XPATH WANT   fails unless the value is WANT
#   valid_domain FILE           fails unless virt-xml-validate accepts FILE
#                               as a libvirt domain
need_cmd xmllint virt-xml-validate
# shellcheck source=/dev/null
. "$TESTS_LIB/qemuwatch.sh"

xp() {
	xmllint --nonet --xpath "string($2)" "$1" 2>/dev/null
}
# Namespaced paths go through local-name() (xmllint's shell binds no prefix).
assert_xp() { # FILE XPATH WANT
	local got
	got=$(xp "$1" "$2")
	[ "$got" = "$3" ] || fail "$(basename "$1"): $2 is '$got', expected '$3'"
}
valid_domain() {
	virt-xml-validate "$1" domain >"$T/validate.out" 2>&1 ||
		fail "virt-xml-validate rejects $(basename "$1"): $(cat "$T/validate.out")"
}

# wait_marker LOG DOMAIN SECONDS: waits until the test guest's marker line
# is in the serial log LOG (libvirt's <serial><log file=.../>) and the
# domain has powered itself off; fails with the log's tail otherwise, and
# after QEMU_SILENT_SECONDS of an empty log with what the guest shows.
wait_marker() {
	local log=$1 dom=$2 end=$((SECONDS + $3)) start=$SECONDS
	while [ $SECONDS -lt $end ]; do
		# (the boot watchdog of qemuwatch.sh, through libvirt)
		if qemu_watch_silent "$log" "$start"; then
			QEMU_WATCH_SOCK=virsh:${LIBVIRT_URI:-qemu:///system}:$dom qemu_watch_evidence "$TEST_NAME-$dom"
			fail "$dom: nothing on its serial console after $((SECONDS - start)) s (above: what it shows)"
		fi
		if grep -aq IMAGER-GUEST-UP "$log" 2>/dev/null; then
			while [ $SECONDS -lt $end ]; do
				[ "$(virsh -q -c "${LIBVIRT_URI:-qemu:///system}" domstate "$dom" 2>/dev/null)" = "shut off" ] && return 0
				sleep 1
			done
			fail "$dom reached its marker but did not power off"
		fi
		case $(virsh -q -c "${LIBVIRT_URI:-qemu:///system}" domstate "$dom" 2>/dev/null) in
		"shut off" | crashed) fail "$dom stopped before its marker: $(tail -c 1500 "$log" 2>/dev/null)" ;;
		esac
		sleep 1
	done
	fail "$dom: no marker after $3 s: $(tail -c 1500 "$log" 2>/dev/null)"
}
