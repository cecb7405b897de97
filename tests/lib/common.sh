# Shared helpers for the test scripts under tests/ts/.  Sourced, not run:
#   . "$TESTS_LIB/common.sh"
#
# The harness (tests/run) exports:
#   IMAGER     the binary under test (absolute path)
#   TESTS_LIB  this folder
#   T          a fresh, empty temporary folder, also the working directory
#   TEST_DIR   the folder holding the running script (expected outputs live there)
#   TEST_NAME  "suite/test"
# A test exits 0 to pass, 77 to skip (after saying why, see skip()), anything
# else to fail.  Everything it prints goes to build/test-logs/SUITE/TEST.log.

set -u
set -o pipefail

: "${IMAGER:?IMAGER is not set (run the tests through tests/run)}"
: "${T:?T is not set (run the tests through tests/run)}"
TEST_DIR=${TEST_DIR:-$(cd "$(dirname "$0")" && pwd)}
TEST_NAME=${TEST_NAME:-$(basename "$TEST_DIR")/$(basename "$0")}
export MTOOLS_SKIP_CHECK=1
export LC_ALL=C

MiB=$((1024 * 1024))

# ---- cleanup: functions registered with on_exit run in reverse order ----
_cleanups=()
on_exit() { _cleanups+=("$*"); }
# (and a test that passed with parts skipped ends as a skip: see skip_part)
_run_cleanups() {
	local rc=$? i
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do
		eval "${_cleanups[i]}" >/dev/null 2>&1 || true
	done
	_cleanups=()
	if [ "$rc" = 0 ] && [ ${#_skipped_parts[@]} -gt 0 ]; then
		local all
		all=$(printf '%s; ' "${_skipped_parts[@]}")
		printf 'skip: the rest passed, but not all of it ran: %s\n' "${all%; }"
		exit 77
	fi
}
trap _run_cleanups EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Killing what a test started, safely.  pid_max is 32768 here, so the PID of
# a process that has ended soon belongs to another one, maybe another
# test's: a cleanup must kill only the process it started, still the same
# one (its start time unchanged; a zombie is harmless to signal).
# proc_start PID: the process's start time (clock ticks since boot), "" when gone.
proc_start() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	# shellcheck disable=SC2086
	set -- $s
	echo "${20}"
}
# kill_same PID START [SIGNAL]: kill PID if it started at START.
kill_same() {
	[ -n "$2" ] && [ "$(proc_start "$1")" = "$2" ] && kill -s "${3:-TERM}" "$1" 2>/dev/null
	return 0
}
# on_exit_kill PID [SIGNAL]: at exit, kill PID if it is still the same process.
on_exit_kill() {
	local st
	st=$(proc_start "$1")
	[ -n "$st" ] && on_exit "kill_same $1 $st ${2:-TERM}"
	return 0
}
# kill_named PID NAME [SIGNAL]: kill PID if its command is NAME (for PIDs
# read from a daemon's pid file, which may be stale).
kill_named() {
	[ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && kill -s "${3:-TERM}" "$1" 2>/dev/null
	return 0
}

# ---- outcomes ----
# Steps are announced so that a log reads as a story.
step() { printf '== %s (at %ss)\n' "$*" "$SECONDS"; }
note() { printf '   %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
# Skipping always says why; the harness shows the last "skip:" line.
skip() { printf 'skip: %s\n' "$*"; exit 77; }
# skip_part REASON: a part of the test cannot run here; the rest goes on,
# and a test that would have passed ends as a skip (77) naming the parts
# (never a PASS with a note).
_skipped_parts=()
skip_part() { note "skipped: $*"; _skipped_parts+=("$*"); }

# fastest_ms N OUT CMD...: CMD run N times, OUT (its target, a file or a
# folder) removed before each run and after the last; prints the fastest
# run's milliseconds, or returns 1 when a run fails.  The kill tests aim
# their random delays at what the job takes when it runs freely: one
# timing can land on a moment the other lane was busy, and then most
# delays come after the job has ended (REPEAT=20 found a run where 9 of 20
# kills landed, with a reference of 871 ms for clones that took 400).
fastest_ms() {
	local n=$1 out=$2 best='' t0 ms i
	shift 2
	for ((i = 0; i < n; i++)); do
		rm -rf "$out" "$out.imager-resume"
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1 || return 1
		ms=$((($(date +%s%N) - t0) / 1000000))
		if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
	done
	rm -rf "$out" "$out.imager-resume"
	echo "$best"
}

# filtered PATTERN CMD...: CMD run with its output (stdout and stderr
# together) captured, then printed without the lines matching the extended
# regex PATTERN (a tool's known chatter), and CMD's own exit status
# returned: `CMD | grep -v PATTERN || true` would return grep's status (1
# when every line was filtered) and, with the `|| true` it then needs, hide
# CMD's failure.  CMD runs in a subshell (a shell function's fail or
# on_exit there ends only the subshell): use it for programs.
filtered() {
	local pat=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	[ -z "$out" ] || printf '%s\n' "$out" | awk -v p="$pat" '$0 !~ p'
	return "$rc"
}

need_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "needs $c (make deps installs it)"
	done
}
need_root() { [ "$(id -u)" = 0 ] || skip "needs root ${1:-for loop devices}"; }
# Root, plus a working loop driver (containers often have neither).
need_loop() {
	need_root "for loop devices"
	need_cmd losetup partx
	losetup -f >/dev/null 2>&1 || skip "no free loop device (loop driver missing?)"
}

[ -x "$IMAGER" ] || fail "imager binary not found at $IMAGER (run make)"

# The libguestfs tools run bounded; need_guestfs.
. "$TESTS_LIB/guestfs.sh"

# ---- running imager ----
# run_imager EXPECTED_RC ARGS...  runs "$IMAGER ARGS", stdout to $T/out and
# stderr to $T/err (both also echoed to the log), and fails the test unless the
# exit status is EXPECTED_RC (a number, or a list "3|7").  A crash (signal,
# sanitizer report) or an internal error (8) fails whatever was expected.
run_imager() {
	local want=$1 rc
	shift
	printf '$ imager %s\n' "$*"
	rc=0
	"$IMAGER" "$@" >"$T/out" 2>"$T/err" || rc=$?
	_show_outputs
	printf '   exit %d\n' "$rc"
	_check_no_crash "$rc" "imager $*"
	case "|$want|" in
	*"|$rc|"*) ;;
	*) fail "imager $*: exit $rc, expected $want" ;;
	esac
	LAST_RC=$rc
}
_show_outputs() {
	if [ -s "$T/out" ]; then
		head -c 4000 "$T/out" | sed 's/^/   out| /'
		echo
	fi
	if [ -s "$T/err" ]; then
		tail -c 4000 "$T/err" | sed 's/^/   err| /'
		echo
	fi
}
_check_no_crash() {
	local rc=$1 what=$2
	[ "$rc" -lt 128 ] || fail "$what: killed by signal $((rc - 128))"
	[ "$rc" != 8 ] || fail "$what: internal error (exit 8)"
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:|Segmentation fault|core dumped' \
		"$T/err" 2>/dev/null; then
		fail "$what: sanitizer or crash report on stderr"
	fi
}
imager_ok() { run_imager 0 "$@"; }

# The last run must have explained itself, with words matching an extended
# regex (case-insensitive): an error on stderr, or verify's report on stdout.
expect_message() {
	[ -s "$T/err" ] || [ -s "$T/out" ] || fail "no message at all"
	# Not through a pipe: grep -q leaves early, and under pipefail the
	# writer's SIGPIPE would turn a match into a failure.
	grep -qiE -e "$1" "$T/err" "$T/out" 2>/dev/null || fail "the message does not mention /$1/"
}

# ---- assertions ----
assert_eq() { [ "$1" = "$2" ] || fail "${3:-values differ}: got '$1', expected '$2'"; }
assert_file_absent() { [ ! -e "$1" ] || fail "${2:-$1 should not exist}"; }
json_valid() { jq -e . "$1" >/dev/null 2>&1 || fail "${2:-$1}: not valid JSON: $(head -c 300 "$1")"; }
# json_is FILE JQ_EXPR: the jq boolean expression must hold.
json_is() {
	jq -e "$2" "$1" >/dev/null 2>&1 || fail "JSON check failed: $2 on $(head -c 600 "$1")"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }

# The size in bytes of a file (apparent) and of the space it takes.
file_size() { stat -c %s "$1"; }
disk_usage() { du -sB1 "$1" | cut -f1; }

# compare_expected NAME FILE: FILE must equal $TEST_DIR/NAME (an expected
# output kept beside the script).  REGEN=1 rewrites the reference instead.
compare_expected() {
	local ref=$TEST_DIR/$1 got=$2
	if [ "${REGEN:-0}" = 1 ]; then
		cp "$got" "$ref"
		note "regenerated $ref"
		return 0
	fi
	[ -f "$ref" ] || fail "no expected output $ref (run with REGEN=1 to create it)"
	diff -u "$ref" "$got" || fail "output differs from $1 (REGEN=1 rewrites it)"
}

# ---- loop devices (root) ----
# loop_detach DEV [FILE]: detach DEV (its partitions first) only while it is
# still backed by a file of this test (under $T, or FILE): tests run side by
# side, and a number freed here may already be another test's device.
loop_detach() {
	local back
	back=$(losetup -n -O BACK-FILE "$1" 2>/dev/null | sed 's/ (deleted)$//') || return 0
	[ -n "$back" ] || return 0
	case $back in
	"$T"/* | "${2:-/nonexistent/}") ;;
	*) return 0 ;;
	esac
	partx -d "$1" 2>/dev/null || true
	losetup -d "$1"
}
# loop_attach FILE [--partitions] [--read-only]: prints the device.  Used
# as dev=$(loop_attach ...) || fail "${dev#FAIL: }" (its own fail ends only
# the subshell), it cannot register an on_exit (the subshell's would be
# lost): the device is detached by loop_detach, image_umount, or at the
# test's end by tests/run's release (every loop device backed by a file
# under $T).
# Never an unguarded `partx -d DEV` at exit: when the test freed DEV
# earlier, the number may be another test's by then (fs/ntfs's exit removed
# the partitions of fs/lvm's new PV that way: "device not found").
loop_attach() {
	local file=$1 dev parts= ro=
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--partitions) parts=1 ;;
		--read-only) ro=-r ;;
		*) fail "loop_attach: unknown option $1" ;;
		esac
		shift
	done
	dev=$(losetup $ro -f --show "$file") || fail "losetup $file"
	if [ -n "$parts" ]; then
		loop_partitions "$dev" || { losetup -d "$dev"; fail "partx -a $file: its partitions were not added"; }
	fi
	echo "$dev"
}
# loop_partitions DEV: the partitions of the table on DEV (a loop device)
# added as DEVpN; returns 1 when partx cannot add them (no table, or a
# bad one).  The host kernel does not scan tables on loop devices by
# itself; partitions a program left on this loop number when it detached
# it without partx -d go first (they would keep their old sizes: removing
# none is no error).
loop_partitions() {
	partx -d "$1" 2>/dev/null
	partx -a "$1" || return 1
	udev_settle_parts "$1"
}
# Wait briefly for partition nodes to appear (devtmpfs, no udev).
udev_settle_parts() {
	local i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		ls "$1"p* >/dev/null 2>&1 && return 0
		sleep 0.1
	done
}
mount_tmp() { # mount_tmp DEV DIR
	mkdir -p "$2"
	mount "$1" "$2" || fail "mount $1"
	on_exit "umount -l $2"
}

# ---- a partition of a disk image, mounted on the host (root) ----
# image_mount IMAGE FORMAT PART DIR [rw]: partition PART of IMAGE (raw or
# qcow2, an overlay too) mounted on DIR, read-only unless rw.  The image is
# served as a file by qemu-storage-daemon's FUSE export, with a loop device
# over it: what a test reads or plants in a guest's files costs a fraction
# of a second, where a libguestfs appliance launch costs 25 s of TCG.  For
# the filesystems the host mounts (ext4, XFS, btrfs).  Undone at exit, or by
# image_umount DIR, after which the writes are in IMAGE.  image_dev DIR
# prints the loop device of the whole disk (its other partitions as
# ${dev}pN, for the filesystems the host does not mount: FAT through mtools).
_img_n=0
declare -A _img_of=()
image_mount() {
	local img=$1 fmt=$2 part=$3 dir=$4 rw=${5:-ro} n exp pidf dev ro=on wr=off opts=ro
	need_loop
	need_cmd qemu-storage-daemon
	[ "$rw" = rw ] && ro=off wr=on opts=rw
	_img_n=$((_img_n + 1))
	n=$_img_n exp=$T/.image-export.$_img_n pidf=$T/.image-qsd.$_img_n.pid
	: >"$exp"
	qemu-storage-daemon \
		--blockdev "driver=file,node-name=file,filename=$img,read-only=$ro" \
		--blockdev "driver=$fmt,node-name=disk,file=file,read-only=$ro" \
		--export "type=fuse,id=export,node-name=disk,mountpoint=$exp,writable=$wr" \
		--daemonize --pidfile "$pidf" || fail "qemu-storage-daemon could not serve $img"
	on_exit "_image_stop $n"
	if [ "$rw" = rw ]; then
		dev=$(loop_attach "$exp" --partitions) || fail "${dev#FAIL: }"
	else
		dev=$(loop_attach "$exp" --partitions --read-only) || fail "${dev#FAIL: }"
	fi
	[ -b "${dev}p$part" ] || fail "$img has no partition $part"
	mkdir -p "$dir"
	mount -o "$opts" "${dev}p$part" "$dir" || fail "mount partition $part of $img"
	on_exit "umount $dir"
	_img_of[$dir]="$n $dev"
}
# _image_stop N: the daemon's export unmounted, the daemon stopped and gone
# (a zombie here: PID 1 does not reap), so that the image is unlocked.
_image_stop() {
	local exp=$T/.image-export.$1 pid i st
	pid=$(cat "$T/.image-qsd.$1.pid" 2>/dev/null) || return 0
	kill_named "$pid" qemu-storage-da   # (comm: 15 characters)
	for i in $(seq 100); do
		st=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
		[ -z "$st" ] || [ "$st" = Z ] && break
		sleep 0.1
	done
	umount "$exp" 2>/dev/null
	rm -f "$T/.image-qsd.$1.pid" "$exp"
}
# image_umount DIR: undoes image_mount DIR now.
image_dev() {
	local n dev
	read -r n dev <<<"${_img_of[$1]:-}"
	[ -n "$dev" ] || fail "image_dev $1: not mounted by image_mount"
	echo "$dev"
}
image_umount() {
	local n dev
	read -r n dev <<<"${_img_of[$1]:-}"
	[ -n "$n" ] || fail "image_umount $1: not mounted by image_mount"
	umount "$1" || fail "umount $1"
	loop_detach "$dev"
	_image_stop "$n"
	unset "_img_of[$1]"
}
