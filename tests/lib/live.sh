# The live medium in the tests (boot/, README "Live media").  Sourced after
# common.sh.
#
# need_live: root, qemu and the medium; LIVE is then a folder holding
#   vmlinuz, initrd.img, imager-live.iso and pxe/, built by boot/build.sh
#   from $IMAGER once per version of its inputs (the binaries and boot/),
#   into $IMAGER_TEST_CACHE/live (default /var/cache/imager-tests), shared
#   by the live tests (about 15 s to build), always without a network
#   (unshare -n) and checked to be under 48 MiB.
# live_iso_variant DIR ARGS...: an ISO of the same kernel and initrd with
#   other boot/build.sh options (--append, --unsigned) in DIR.
# live_qemu NAME TIMEOUT UNTIL QEMU_ARGS...: boots a machine under TCG with
#   its serial console in $T/NAME.log; returns when qemu exits (its status),
#   when the log matches the extended regex UNTIL (0, qemu killed; an empty
#   UNTIL waits for the exit), or after TIMEOUT seconds (124), or sooner
#   when the serial console stays empty (qemuwatch.sh: what the machine
#   shows is printed, then 124).  Prints the time.
# live_result LOG: the medium's last "result:" line.

LIVE_ROOT=$(cd "$TESTS_LIB/../.." && pwd)
# shellcheck source=/dev/null
. "$TESTS_LIB/qemuwatch.sh"

need_live() {
	need_root "to build the medium (cpio owner root) and boot it"
	need_cmd qemu-system-x86_64 cpio zstd xorriso grub-mkimage mcopy mkfs.msdos flock unshare
	[ -x "$(dirname "$IMAGER")/imager-live" ] || fail "imager-live is not built next to $IMAGER"
	[ -e /usr/lib/shim/shimx64.efi.signed ] || skip "needs shim-signed (make deps installs it)"
	local key cache
	key=$(cat "$IMAGER" "$(dirname "$IMAGER")/imager-live" "$LIVE_ROOT"/boot/* | sha256sum | cut -c1-16)
	# (the shared test cache: a fresh clone of the same tree builds the same
	# binaries, so CI's clone finds the medium an earlier run built)
	cache=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}/live
	mkdir -p "$cache"
	LIVE=$cache/$key
	(
		flock 9
		if [ ! -f "$LIVE/imager-live.iso" ] && [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
			echo "the live medium is not in $cache: fixtures/live failed or did not run"
			exit 1
		fi
		if [ ! -f "$LIVE/imager-live.iso" ]; then
			rm -rf "$cache"/*/ "$LIVE.tmp"
			# Offline, as make boot must be: a network namespace of its own.
			step "building the live medium (boot/build.sh, no network)"
			unshare -n bash "$LIVE_ROOT/boot/build.sh" "$IMAGER" "$(dirname "$IMAGER")/imager-live" \
				"$LIVE.tmp" || exit 1
			mv "$LIVE.tmp" "$LIVE"
		fi
	) 9>"$cache/.lock" || fail "no live medium (above)"
	[ "$(stat -c %s "$LIVE/initrd.img")" -lt $((48 * 1024 * 1024)) ] ||
		fail "the initrd is $(stat -c %s "$LIVE/initrd.img") bytes: over 48 MiB"
}

live_iso_variant() {
	local dir=$1
	shift
	mkdir -p "$dir"
	cp "$LIVE/vmlinuz" "$LIVE/initrd.img" "$dir/"
	bash "$LIVE_ROOT/boot/build.sh" --iso-only "$@" "$IMAGER" "$(dirname "$IMAGER")/imager-live" "$dir" >/dev/null ||
		fail "boot/build.sh --iso-only $*"
}

live_qemu() {
	local name=$1 limit=$2 until=$3 log pid start rc
	shift 3
	log=$T/$name.log
	start=$SECONDS
	qemu_watch_start
	qemu-system-x86_64 -accel tcg -m 512 -nographic -no-reboot -monitor none \
		"${QEMU_WATCH_ARGS[@]}" "$@" </dev/null >"$log" 2>&1 &
	pid=$!
	on_exit_kill "$pid" KILL
	rc=124
	while [ $((SECONDS - start)) -lt "$limit" ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			rc=$?
			break
		fi
		if [ -n "$until" ] && grep -a -q -E "$until" "$log"; then
			kill -9 "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			rc=0
			break
		fi
		if qemu_watch_silent "$log" "$start"; then
			qemu_watch_evidence "$TEST_NAME-$name"
			break
		fi
		sleep 1
	done
	qemu_watch_stop
	if [ "$rc" = 124 ]; then
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	note "$name: qemu ended after $((SECONDS - start)) s (status $rc)"
	return "$rc"
}

live_result() { grep -a '^imager-live: result: ' "$1" | tail -n 1; }

# live_show LOG: the medium's own lines, for the test's log.
live_show() { grep -a -E '^imager-live:' "$1" | sed 's/^/   | /'; }

# OVMF firmware: live_ovmf VARS [secboot]: sets OVMF_ARGS (q35, and for
# secboot SMM, the Secure Boot code and a copy of the Microsoft-keys
# variables in VARS).
live_ovmf() {
	local vars=$1 mode=${2:-}
	if [ "$mode" = secboot ]; then
		cp /usr/share/OVMF/OVMF_VARS_4M.ms.fd "$vars"
		OVMF_ARGS=(-machine q35,smm=on -global driver=cfi.pflash01,property=secure,value=on
			-drive if=pflash,format=raw,unit=0,file=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd,readonly=on
			-drive if=pflash,format=raw,unit=1,file="$vars")
	else
		cp /usr/share/OVMF/OVMF_VARS_4M.fd "$vars"
		OVMF_ARGS=(-machine q35
			-drive if=pflash,format=raw,unit=0,file=/usr/share/OVMF/OVMF_CODE_4M.fd,readonly=on
			-drive if=pflash,format=raw,unit=1,file="$vars")
	fi
}

# live_server_env: the head of a FORCECOMMAND script for live_sshd.  The
# sessions sshd starts do not inherit this test's environment: it brings
# imager into PATH and the libguestfs decision along.
live_server_env() {
	echo '#!/bin/bash'
	echo "export PATH=$(dirname "$IMAGER"):/usr/sbin:/usr/bin:/sbin:/bin"
	export -p | grep -E ' (IMAGER_[A-Z_]*|LIBGUESTFS_[A-Z_]*|TMPDIR)='
}

# live_sshd [FORCECOMMAND]: an sshd on 127.0.0.1 at a free high port (the
# live machine reaches it as 10.0.2.2 through qemu's user network), which
# lets in the key $T/id_ed25519 (made here) for root, sftp included;
# FORCECOMMAND, when given, runs instead of what the client asks (it finds
# that in SSH_ORIGINAL_COMMAND).  Sets SSHD_PORT; logs to $T/sshd.log;
# stopped at exit.  $T/keys.img: a FAT disk labelled KEYS holding the key,
# for imager.key=dev:LABEL=KEYS:/id_ed25519.
# With LIVE_SSHD_PASSWORD set, root may also log in with that password:
# sshd then runs in a mount namespace of its own where /etc/shadow is a
# copy giving root that password (this machine's own is not touched).
live_sshd() {
	local p try hash sshd_cmd
	[ -x /usr/sbin/sshd ] || skip "needs sshd (openssh-server; make deps installs it)"
	need_cmd ssh-keygen mkfs.fat mcopy
	ssh-keygen -q -t ed25519 -N '' -f "$T/hostkey" || fail "ssh-keygen"
	ssh-keygen -q -t ed25519 -N '' -f "$T/id_ed25519" -C imager-live-test || fail "ssh-keygen"
	cp "$T/id_ed25519.pub" "$T/authorized_keys"
	mkdir -p /run/sshd
	SSHD_PORT=""
	for try in 1 2 3 4 5; do
		p=$((20000 + RANDOM % 20000))
		{
			echo "Port $p"
			echo "ListenAddress 127.0.0.1"
			echo "HostKey $T/hostkey"
			echo "PidFile $T/sshd.pid"
			echo "AuthorizedKeysFile $T/authorized_keys"
			echo "StrictModes no"
			if [ -n "${LIVE_SSHD_PASSWORD:-}" ]; then
				echo "PermitRootLogin yes"
				echo "PasswordAuthentication yes"
			else
				echo "PermitRootLogin prohibit-password"
				echo "PasswordAuthentication no"
			fi
			echo "KbdInteractiveAuthentication no"
			echo "UsePAM no"
			echo "AllowStreamLocalForwarding yes"
			echo "Subsystem sftp internal-sftp"
			[ -n "${1:-}" ] && echo "ForceCommand $1"
		} >"$T/sshd_config"
		rm -f "$T/sshd.pid"
		if [ -n "${LIVE_SSHD_PASSWORD:-}" ]; then
			[ -f "$T/shadow" ] || {
				hash=$(openssl passwd -6 "$LIVE_SSHD_PASSWORD") || fail "openssl passwd"
				awk -F: -v OFS=: -v h="$hash" '$1 == "root" { $2 = h } { print }' /etc/shadow >"$T/shadow"
				chmod 600 "$T/shadow"
			}
			sshd_cmd=(unshare -m --propagation private sh -c
				'mount --bind "$1" /etc/shadow && exec /usr/sbin/sshd -f "$2" -E "$3"' sh
				"$T/shadow" "$T/sshd_config" "$T/sshd.log")
		else
			sshd_cmd=(/usr/sbin/sshd -f "$T/sshd_config" -E "$T/sshd.log")
		fi
		if "${sshd_cmd[@]}"; then
			sleep 1
			[ -s "$T/sshd.pid" ] && { SSHD_PORT=$p; break; }
		fi
	done
	[ -n "$SSHD_PORT" ] || fail "sshd did not start: $(tail -n 3 "$T/sshd.log")"
	on_exit "kill_named \$(cat '$T/sshd.pid') sshd"
	note "sshd on port $SSHD_PORT"
	mkfs.fat -C -n KEYS "$T/keys.img" 2048 >/dev/null || fail "mkfs.fat keys"
	mcopy -i "$T/keys.img" "$T/id_ed25519" ::/id_ed25519 || fail "mcopy key"
}
