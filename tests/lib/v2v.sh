# virt-v2v's conversion of the synthetic Windows disks (windisk.sh), the
# reference windows/virt-v2v-compare holds imager's against.  Sourced after
# common.sh and windisk.sh.
#
#   v2v_need              skips unless virt-v2v-in-place or virt-v2v is
#                         there; sets V2V to the one used
#   v2v_show_log LOG      virt-v2v's progress, warnings and errors from LOG
#   v2v_extract KIND DIR  DIR: win_extract's files (SYSTEM, SOFTWARE,
#                         files.txt, sums.txt...) of the KIND disk (win10 or
#                         win7) as virt-v2v converts it, with the fake
#                         virtio-win tree (virtio_win_tree, ISO layout) and
#                         its log as DIR/v2v.log.  From the shared cache,
#                         where the fixture fixtures/windows-v2v puts it
#                         (about 45 s of TCG per disk); a test
#                         (IMAGER_TEST_NO_BUILD) fails at once when it is
#                         missing, naming the fixture.
#
# How virt-v2v 2.2.0 converts the synthetic disk (found by running it):
#   VIRTIO_WIN=TREE_OR_ISO VIRT_TOOLS_DATA_DIR=DIR \
#       virt-v2v-in-place -i disk -if raw DISK
#   (or, without virt-v2v-in-place: virt-v2v -i disk -if raw DISK -o local
#   -os OUTDIR -of raw -on NAME, which leaves DISK alone and writes
#   OUTDIR/NAME-sda).
#   - DIR must hold rhsrvany.exe (or pvvxsvc.exe); any placeholder file does,
#     virt-v2v only copies it into the guest.  Without one it stops after
#     inspection with "One of rhsrvany.exe or pvvxsvc.exe is missing in
#     /usr/share/virt-tools.  One of them is required in order to install
#     Windows firstboot scripts."  Nothing else is needed: the synthetic disk
#     inspects as Windows, has room, and the tree's DRV/OS/ARCH layout is the
#     ISO's (virt-v2v matches the w7 or w10 folder and amd64).
#   - An ISO works as well as a folder but costs a second appliance (about
#     135 s for win7 instead of 45 s): the folder is used.

v2v_need() {
	if command -v virt-v2v-in-place >/dev/null 2>&1; then
		V2V=virt-v2v-in-place
	elif command -v virt-v2v >/dev/null 2>&1; then
		V2V=virt-v2v
	else
		skip "needs virt-v2v-in-place or virt-v2v (Debian package virt-v2v)"
	fi
}

# v2v_show_log LOG: virt-v2v's progress lines ("[  12.3] Converting ..."),
# warnings and errors, indented.
v2v_show_log() {
	grep -aE '^\[ *[0-9.]+\] |warning|error|virtio' "$1" | tr -d '\r' | sed 's/^/   v2v| /'
}

# _v2v_convert DISK WORK: converts DISK in place with virt-v2v, the tree and
# the placeholder in WORK (log: DISK.v2v.log).
_v2v_convert() {
	local disk=$1 work=$2 log=$1.v2v.log rc=0 start=$SECONDS
	virtio_win_tree "$work/virtio-win" iso
	mkdir -p "$work/virt-tools"
	echo "rhsrvany.exe placeholder (virt-v2v only copies it)" >"$work/virt-tools/rhsrvany.exe"
	if [ "$V2V" = virt-v2v-in-place ]; then
		printf '$ VIRTIO_WIN=%s VIRT_TOOLS_DATA_DIR=%s virt-v2v-in-place -i disk -if raw %s\n' \
			"$work/virtio-win" "$work/virt-tools" "$disk"
		VIRTIO_WIN=$work/virtio-win VIRT_TOOLS_DATA_DIR=$work/virt-tools \
			virt-v2v-in-place -i disk -if raw "$disk" >"$log" 2>&1 || rc=$?
	else
		printf '$ VIRTIO_WIN=%s VIRT_TOOLS_DATA_DIR=%s virt-v2v -i disk -if raw %s -o local -os %s -of raw -on v2v\n' \
			"$work/virtio-win" "$work/virt-tools" "$disk" "$work/v2v-out"
		rm -rf "$work/v2v-out" && mkdir -p "$work/v2v-out"
		VIRTIO_WIN=$work/virtio-win VIRT_TOOLS_DATA_DIR=$work/virt-tools \
			virt-v2v -i disk -if raw "$disk" -o local -os "$work/v2v-out" -of raw -on v2v >"$log" 2>&1 || rc=$?
		[ "$rc" = 0 ] && { mv "$work/v2v-out/v2v-sda" "$disk" || rc=1; }
	fi
	v2v_show_log "$log"
	[ "$rc" = 0 ] || fail "$V2V failed (exit $rc); see above and $log"
	note "$V2V took $((SECONDS - start)) s"
}

# The cache key: the disk's (windisk.sh), virt-v2v's version, and how the
# conversion is made (this file's functions and the fake tree's).
_v2v_key() {
	local disk_key
	disk_key=$(_wd_cache_key) || return 1
	{
		echo "$disk_key"
		"$V2V" --version 2>&1 | head -n 1
		declare -f _v2v_convert virtio_win_tree _wd_driver_base
		echo "$WINDISK_VIRTIO_DRIVERS / $WINDISK_VIRTIO_OSES"
	} | sha256sum | cut -c1-16
}

v2v_extract() { # KIND DIR
	local kind=$1 dir=$2 cache key entry work lock
	[ -n "${V2V:-}" ] || v2v_need
	_wd_find_hive
	cache=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
	key=$(_v2v_key) || fail "cannot hash what makes virt-v2v's conversion"
	entry=$cache/v2v-$kind-$key
	if [ ! -d "$entry" ] && [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
		fail "virt-v2v's conversion of the $kind disk is not in $cache: fixtures/windows-v2v failed or did not run"
	fi
	if [ ! -d "$entry" ]; then
		mkdir -p "$cache" || fail "cannot create the cache folder $cache"
		exec {lock}>"$cache/v2v-$kind.lock" || fail "cannot lock in $cache"
		flock "$lock"
		if [ ! -d "$entry" ]; then
			work=$T/.v2v-$kind
			rm -rf "$work" "$cache"/v2v-"$kind"-*.tmp.*
			mkdir -p "$work" || fail "mkdir $work"
			win_disk "$work/disk.raw" "$kind"
			_v2v_convert "$work/disk.raw" "$work"
			on_exit "rm -rf $(printf %q "$entry.tmp.$$")"
			win_extract "$work/disk.raw" "$entry.tmp.$$"
			cp "$work/disk.raw.v2v.log" "$entry.tmp.$$/v2v.log" || fail "cp the log"
			mv "$entry.tmp.$$" "$entry" || fail "mv into $cache"
			rm -rf "$work"
			note "cached $entry"
			# (other versions' stay a month: checkouts share the cache)
			find "$cache" -maxdepth 1 -name "v2v-$kind-*" ! -name "${entry##*/}" -mtime +30 \
				-exec rm -rf {} + -print 2>/dev/null | sed 's/^/   removed unused /'
		fi
		exec {lock}>&-
	fi
	touch "$entry" 2>/dev/null || true
	rm -rf "$dir"
	cp -r "$entry" "$dir" || fail "cp $entry $dir"
}
