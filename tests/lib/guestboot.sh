# Booting the Debian 12 test guest (tests/guest/debian12.sh) under qemu.
# Sourced (defines functions only):
#   . "$TESTS_LIB/guestboot.sh"
#
#   guest_image [VARIANT]            builds or finds the cached guest image
#                                    (VARIANT: tests/guest/debian12-VARIANT.sh,
#                                    uefi, rhel, suse, luks, bls or
#                                    vmware)
#                                    and prints its path; returns 77 (after a
#                                    "skip: REASON" line on stderr) when it
#                                    cannot be built here, 1 on failure.
#   guest_boot IMAGE FORMAT BUS LOG [TIMEOUT]
#                                    boots IMAGE with its disk on BUS
#                                    (virtio-blk, virtio-scsi, ide, sata), the
#                                    serial console in LOG; returns 0 and
#                                    prints the marker line once the guest
#                                    reached userspace, 1 otherwise (with the
#                                    end of LOG).  Sets GUEST_BOOT_RESULT to
#                                    marker (seen), exited (qemu ended without
#                                    it), silent (the serial console stayed
#                                    empty: the watchdog of qemuwatch.sh
#                                    printed what the guest showed and
#                                    ended qemu) or timeout, and
#                                    GUEST_BOOT_SECONDS.
#                                    A boot that ran to TIMEOUT (a stalled
#                                    TCG guest: seen now and then on this
#                                    loaded 2-core machine, an RCU stall or
#                                    a kernel task trace, then nothing) is
#                                    booted once more, its log kept as
#                                    LOG.first; an early end (a panic, a
#                                    power-off without the marker) is not.
#                                    GUEST_FIRMWARE=uefi boots it under
#                                    OVMF (machine q35, a fresh copy of the
#                                    firmware's variables beside LOG: no boot
#                                    entry, as a new VM has); uefi-secure
#                                    the same with Secure Boot on and the
#                                    Microsoft keys enrolled (SMM); the
#                                    default, bios, is SeaBIOS on machine pc.
#                                    Under UEFI the NIC has no option ROM
#                                    (no PXE attempts before the disk).
#                                    GUEST_NIC=e1000 gives the guest an
#                                    Intel NIC instead of virtio-net (a
#                                    "physical" machine's boot, with no
#                                    virtio device at all).
#   guest_marker_field LOG FIELD     prints a field (root, net, virtio) of the
#                                    marker line in LOG.
#
# qemu always runs with -accel tcg (KVM does not run stock kernels here) and
# one vCPU: with two, a guest on the loaded 2-core machine now and then
# stalled for minutes (an RCU stall report while the other vCPU idled in its
# halt, as if a wakeup between vCPUs was lost); one vCPU boots as fast
# (47-53 s) and leaves a host core to the other lane of tests.  Also
# -no-reboot (a guest that panics or reboots ends qemu) and a virtio-net NIC
# on user networking, so the marker's net= shows whether virtio_net came up.

GUEST_MARKER=IMAGER-GUEST-UP
# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/qemuwatch.sh"

guest_image() { # [VARIANT]
	local lib script out errf rc=0
	lib=${TESTS_LIB:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
	script=$lib/../guest/debian12${1:+-$1}.sh
	errf=$(mktemp)
	# stdout (the path) is captured; stderr goes on to ours and to errf;
	# the status is the script's, whether or not pipefail is set.
	out=$({
		bash "$script" 2>&1 1>&3 3>&- | tee "$errf" >&2 3>&-
		exit "${PIPESTATUS[0]}"
	} 3>&1) || rc=$?
	if [ "$rc" = 77 ]; then
		echo "skip: the test guest cannot be built here: $(tail -n 1 "$errf" | sed 's/^debian12[a-z-]*: //')" >&2
		rm -f "$errf"
		return 77
	fi
	rm -f "$errf"
	out=$(printf '%s\n' "$out" | tail -n 1)
	if [ "$rc" != 0 ] || [ ! -f "$out" ]; then
		echo "guest_image: ${script#"$lib"/../} failed (exit $rc)" >&2
		return 1
	fi
	echo "$out"
}

# The marker line of LOG, without the serial console's carriage returns.
_guest_marker_line() {
	grep -a -o "$GUEST_MARKER root=.*" "$1" 2>/dev/null | tr -d '\r' | tail -n 1
}

guest_marker_field() { # LOG FIELD
	_guest_marker_line "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# Kills the qemu of a boot whose pidfile is PIDFILE, if it still runs.
_guest_kill() {
	local pid
	[ -s "$1" ] || return 0
	pid=$(cat "$1" 2>/dev/null) || return 0
	# (only a qemu: a stale pid file's PID may be another process's now)
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = qemu-system-x86 ] &&
		kill "$pid" 2>/dev/null
	rm -f "$1"
}

guest_boot() { # IMAGE FORMAT BUS LOG [TIMEOUT]
	local rc=0
	_guest_boot_once "$@" || rc=$?
	[ "$rc" = 1 ] && [ "$GUEST_BOOT_SECONDS" -ge "${5:-300}" ] || return "$rc"
	printf 'guest_boot: ran to the limit (%ss; a stalled TCG boot?): booting once more\n' "$GUEST_BOOT_SECONDS"
	mv "$4" "$4.first"
	_guest_boot_once "$@"
}

_guest_boot_once() { # IMAGE FORMAT BUS LOG [TIMEOUT]
	local image=$1 format=$2 bus=$3 log=$4 limit=${5:-300}
	local pidf=$4.pid rcf=$4.qemu-rc errf=$4.qemu-stderr sub start line
	local -a disk
	# shellcheck disable=SC2054  # commas inside qemu's -device arguments
	case $bus in
	virtio-blk) disk=(-device virtio-blk-pci,drive=d0,bootindex=0) ;;
	virtio-scsi) disk=(-device virtio-scsi-pci,id=scsi0
		-device scsi-hd,bus=scsi0.0,drive=d0,bootindex=0) ;;
	ide) disk=(-device ide-hd,bus=ide.0,drive=d0,bootindex=0) ;;
	sata) disk=(-device ahci,id=ahci0 -device ide-hd,bus=ahci0.0,drive=d0,bootindex=0) ;;
	*)
		echo "guest_boot: unknown bus '$bus' (virtio-blk, virtio-scsi, ide, sata)" >&2
		return 2
		;;
	esac
	local -a fw=(-machine pc) nic
	local nicdev=virtio-net-pci
	case ${GUEST_NIC:-virtio} in
	virtio) ;;
	e1000) nicdev=e1000 ;;
	*)
		echo "guest_boot: unknown GUEST_NIC '$GUEST_NIC' (virtio, e1000)" >&2
		return 2
		;;
	esac
	nic=(-nic "user,model=$nicdev")
	local code=/usr/share/OVMF/OVMF_CODE_4M.fd vars=/usr/share/OVMF/OVMF_VARS_4M.fd
	case ${GUEST_FIRMWARE:-bios} in
	bios) ;;
	uefi | uefi-secure)
		fw=(-machine q35)
		if [ "$GUEST_FIRMWARE" = uefi-secure ]; then
			code=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd vars=/usr/share/OVMF/OVMF_VARS_4M.ms.fd
			fw=(-machine q35,smm=on -global driver=cfi.pflash01,property=secure,value=on)
		fi
		cp "$vars" "$log.vars.fd" || return 2
		fw+=(-drive "if=pflash,format=raw,unit=0,file=$code,readonly=on"
			-drive "if=pflash,format=raw,unit=1,file=$log.vars.fd")
		nic=(-netdev user,id=n0 -device "$nicdev,netdev=n0,romfile=")
		;;
	*)
		echo "guest_boot: unknown GUEST_FIRMWARE '$GUEST_FIRMWARE' (bios, uefi, uefi-secure)" >&2
		return 2
		;;
	esac
	[ "${GUEST_FIRMWARE:-bios}" != bios ] && [ "$bus" = ide ] &&
		{ echo "guest_boot: no IDE on q35 (UEFI): use sata" >&2; return 2; }
	rm -f "$pidf" "$rcf" "$errf"
	: >"$log"
	qemu_watch_start
	# If the caller dies first (a test killed by its timeout), its cleanup
	# kills qemu; `timeout` bounds it anyway.
	declare -F on_exit >/dev/null && on_exit "_guest_kill '$pidf'"

	printf 'guest_boot: %s (%s) on %s, serial log %s, at most %ss\n' \
		"$image" "$format" "$bus" "$log" "$limit"
	start=$SECONDS
	# qemu runs in a subshell of ours that records its exit status in rcf
	# when it ends: that file, not `ps` or `kill -0` (a killed process may
	# stay a zombie, PID 1 reaps nothing here), tells whether it still runs.
	(
		rc=0
		timeout -k 10 "$limit" qemu-system-x86_64 -accel tcg "${fw[@]}" \
			-m 1024 -smp 1 -display none -no-reboot -no-user-config \
			-serial "file:$log" -pidfile "$pidf" "${QEMU_WATCH_ARGS[@]}" \
			"${nic[@]}" \
			-drive "file=$image,format=$format,if=none,id=d0,cache=unsafe" \
			"${disk[@]}" </dev/null >"$errf" 2>&1 || rc=$?
		echo "$rc" >"$rcf.tmp" && mv "$rcf.tmp" "$rcf"
	) &
	sub=$!

	GUEST_BOOT_RESULT=timeout
	while [ $((SECONDS - start)) -lt $((limit + 15)) ]; do
		if [ -n "$(_guest_marker_line "$log")" ]; then
			GUEST_BOOT_RESULT=marker
			break
		fi
		if [ -f "$rcf" ]; then
			GUEST_BOOT_RESULT=exited
			# The last words may land in the log just as qemu ends.
			[ -n "$(_guest_marker_line "$log")" ] && GUEST_BOOT_RESULT=marker
			break
		fi
		if qemu_watch_silent "$log" "$start"; then
			GUEST_BOOT_RESULT=silent
			qemu_watch_evidence "$(basename "$image")-$bus"
			break
		fi
		sleep 1
	done
	GUEST_BOOT_SECONDS=$((SECONDS - start))
	# After the marker the guest powers itself off: give it a minute, so
	# the disk is no longer in use when we return.
	if [ "$GUEST_BOOT_RESULT" = marker ]; then
		local i
		for ((i = 0; i < 60; i++)); do
			[ -f "$rcf" ] && break
			sleep 1
		done
	fi
	[ -f "$rcf" ] || _guest_kill "$pidf"
	wait "$sub" 2>/dev/null || true
	rm -f "$pidf" "$rcf"
	qemu_watch_stop

	if [ "$GUEST_BOOT_RESULT" = marker ]; then
		line=$(_guest_marker_line "$log")
		printf 'guest_boot: up after %ss: %s\n' "$GUEST_BOOT_SECONDS" "$line"
		echo "$line"
		return 0
	fi
	if [ "$GUEST_BOOT_RESULT" = exited ]; then
		printf 'guest_boot: qemu ended after %ss without the marker\n' "$GUEST_BOOT_SECONDS"
	elif [ "$GUEST_BOOT_RESULT" = silent ]; then
		printf 'guest_boot: nothing on the serial console after %ss; qemu killed\n' "$GUEST_BOOT_SECONDS"
	else
		printf 'guest_boot: no marker after %ss; qemu killed\n' "$GUEST_BOOT_SECONDS"
	fi
	[ -s "$errf" ] && sed 's/^/   qemu| /' "$errf"
	echo "   last lines of $log:"
	tr -d '\r' <"$log" | tail -n 15 | sed 's/^/   | /'
	return 1
}
