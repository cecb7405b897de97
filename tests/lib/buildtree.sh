# The build folders of the test guests (tests/guest/*.sh): sourced by
# them, after they define say().
#
# release DIR: unmount everything mounted under DIR (deepest first), detach
# the loop devices backed by files under DIR (their partitions first), and
# remove DIR, never crossing into a mount left behind.
release() {
	local dir=$1 mnt dev back
	[ -d "$dir" ] || return 0
	awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
		while read -r mnt; do
			umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
		done
	losetup -n -l -O NAME,BACK-FILE 2>/dev/null | while read -r dev back; do
		case $back in "$dir"/*)
			partx -d "$dev" 2>/dev/null || true
			losetup -d "$dev" 2>/dev/null || true ;;
		esac
	done
	if awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
		say "warning: something is still mounted under $dir; not removing it"
		return 0
	fi
	rm -rf --one-file-system "$dir"
}

# ---- variants of the base guest (tests/guest/debian12-NAME.sh) ----
# Sourced by a variant after it defines say(), die() and CACHE.
#
# variant_start NAME SCRIPT: the start every variant shares.  Exits 77
# without root; builds (or finds) the base guest, BASE; KEY from the sha256
# of SCRIPT, of this file and of the base guest's image name (a new base
# makes a new variant), IMAGE=$CACHE/NAME-KEY.qcow2 and BOOTLOG beside it;
# a cached IMAGE is printed and the script ends (0); with
# IMAGER_TEST_NO_BUILD set (a test, not a fixture) a missing one ends it
# (1).  Else one build at a time (a lock), the unfinished builds of killed
# runs removed, BUILD made, and the cleanup set for every way out: the
# step still running stopped with its process group, the sanity boot's
# qemu killed, BUILD released.
variant_start() {
	local name=$1 self=$2 old
	if [ "$(id -u)" != 0 ]; then
		say "building the test guest needs root"
		exit 77
	fi
	BASE=$(bash "$(dirname "$self")/debian12.sh" | tail -n 1) || exit $?
	[ -f "$BASE" ] || die "the base guest was not built"
	KEY=$( (sha256sum "$self" "${BASH_SOURCE[0]}" | cut -c1-64; basename "$BASE") | sha256sum | cut -c1-16)
	IMAGE=$CACHE/$name-$KEY.qcow2
	BOOTLOG=$CACHE/$name-$KEY.boot.log
	if [ -f "$IMAGE" ]; then
		echo "$IMAGE"
		exit 0
	fi
	if [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
		say "the guest is not in $CACHE: fixtures/$name failed or did not run"
		exit 1
	fi
	exec 9>"$CACHE/$name.lock"
	flock 9
	if [ -f "$IMAGE" ]; then
		echo "$IMAGE"
		exit 0
	fi
	# (builds killed without a chance to clean up: SIGKILL, power loss)
	for old in "$CACHE/$name"-*.build.*; do
		[ -d "$old" ] || continue
		say "removing the unfinished build $old"
		release "$old"
	done
	BUILD=$(mktemp -d "$CACHE/$name-$KEY.build.XXXXXX")
	CHILD=
	trap _variant_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	START=$SECONDS
}
_variant_cleanup() {
	local rc=$?
	set +e
	if [ -n "${CHILD:-}" ]; then
		kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null
		sleep 1
		kill -KILL -- "-$CHILD" 2>/dev/null || kill -KILL "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	declare -F _guest_kill >/dev/null && _guest_kill "$BUILD/boot.log.pid"
	release "$BUILD"
	[ "$rc" = 0 ] || say "build failed (exit $rc); nothing was cached"
	exit "$rc"
}
phase() { say "[$((SECONDS - START))s] $*"; }
# quietly NAME CMD...: CMD's output in $BUILD/NAME.log, its end shown when
# it fails; CMD in a process group of its own, waited for in the
# background, so that a signal reaches the trap at once and the cleanup
# stops CMD with its children.
quietly() {
	local name=$1 rc=0
	shift
	# (a shell function cannot be setsid's: it runs in a subshell, stopped alone)
	if [ "$(type -t "$1")" = function ]; then
		("$@") >"$BUILD/$name.log" 2>&1 </dev/null &
	else
		setsid "$@" >"$BUILD/$name.log" 2>&1 </dev/null &
	fi
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=
	[ "$rc" = 0 ] || { tail -n 30 "$BUILD/$name.log" | sed 's/^/  | /' >&2; die "$name failed (exit $rc)"; }
}
# attach FILE [-r]: a loop device with its partitions (partx: the kernel
# does not scan loop devices), printed
attach() {
	local dev
	dev=$(losetup -f --show ${2:+"$2"} "$1") || die "losetup $1"
	partx -a "$dev" 2>/dev/null || true
	for _ in $(seq 50); do [ -b "${dev}p1" ] && break; sleep 0.1; done
	[ -b "${dev}p1" ] || die "no partitions on $dev ($1)"
	echo "$dev"
}
# variant_finish NAME QCOW2 BOOTLOG-OF-THE-BUILD: the image into the cache
# (by rename: it appears only whole) with its boot log; older keys removed.
variant_finish() {
	local name=$1 old
	tr -d '\r' <"$3" >"$BOOTLOG"
	mv "$2" "$IMAGE"
	for old in "$CACHE/$name"-*.qcow2 "$CACHE/$name"-*.boot.log; do
		case $old in "$IMAGE" | "$BOOTLOG") continue ;; esac
		rm -f "$old"
	done
	phase "built $IMAGE ($(du -h "$IMAGE" | cut -f1))"
	echo "$IMAGE"
}
