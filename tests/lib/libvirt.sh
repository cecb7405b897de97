# Helpers for suites that talk to a libvirt daemon (pools, define, p2v).
# Sourced after common.sh:
#   . "$TESTS_LIB/common.sh"
#   . "$TESTS_LIB/libvirt.sh"
#
#   libvirt_up            makes sure virtlogd and libvirtd answer on
#                         qemu:///system.  A daemon that already answers is
#                         used and left running; one this test starts is
#                         stopped at its end (after everything registered
#                         later, which on_exit runs first).  Skips (77) when
#                         not root or the daemons are not installed; fails
#                         when libvirtd does not answer within 20 s.
#                         The daemons start in tests/run's mount
#                         namespace, not this test's own ("Mounts"): they
#                         outlive the test, and their guests' namespaces
#                         are copies of theirs.
#   lv ARGS...            virsh -q on $LIBVIRT_URI (qemu:///system)
#   libvirt_pool_dir NAME DIR
#                         defines, builds and starts a dir pool on DIR
#                         (created); destroyed and undefined at the end
#   libvirt_cleanup_pool NAME
#   libvirt_cleanup_domain NAME
#   libvirt_cleanup_volume POOL VOLUME
#                         register removal at the end: pool-destroy +
#                         pool-undefine; destroy + undefine (--nvram when it
#                         has one); vol-delete
#
# Every pool, domain and volume a test makes is named "imager-test-..." so
# that leftovers of a killed run are recognisable (libvirt_pool_dir and
# libvirt_cleanup_domain refuse other names); a leftover with the same name
# is removed before the name is used again.
#
# Daemons here run without systemd and, killed, stay zombies: whether one
# runs is always asked of its socket, never of its pid.

LIBVIRT_URI=${LIBVIRT_URI:-qemu:///system}
LIBVIRT_WAIT=${LIBVIRT_WAIT:-20}
_libvirt_started_libvirtd=0
_libvirt_started_virtlogd=0

lv() { virsh -q -c "$LIBVIRT_URI" "$@"; }

libvirt_answers() { virsh -q -c "$LIBVIRT_URI" version >/dev/null 2>&1; }

# Whether something accepts connections on a unix socket (virtlogd has no
# client of its own to ask).
_socket_answers() {
	[ -S "$1" ] || return 1
	python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])' "$1" 2>/dev/null
}
_virtlogd_sock=/run/libvirt/virtlogd-sock

# _wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 on timeout.
_wait_for() {
	local end=$((SECONDS + $1))
	shift
	while ! "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}
_not() { ! "$@"; }

# _host_ns CMD...: CMD in the mount namespace tests/run itself runs in
# (IMAGER_TEST_HOST_NS, its /proc/PID/ns/mnt; PID 1's may not be open to
# us), as is when that is ours or unknown.
_host_ns() {
	local ns=${IMAGER_TEST_HOST_NS-}
	if [ -n "$ns" ] && [ "$(readlink "$ns")" != "$(readlink /proc/self/ns/mnt)" ]; then
		nsenter --mount="$ns" -- "$@"
	else
		"$@"
	fi
}

libvirt_up() {
	need_cmd virsh
	if libvirt_answers; then
		note "libvirtd already answers on $LIBVIRT_URI: using it"
		return 0
	fi
	need_root "to start libvirtd"
	need_cmd libvirtd virtlogd python3
	on_exit _libvirt_down
	if ! _socket_answers "$_virtlogd_sock"; then
		_host_ns virtlogd -d || fail "virtlogd -d failed"
		_libvirt_started_virtlogd=1
		_wait_for "$LIBVIRT_WAIT" _socket_answers "$_virtlogd_sock" ||
			fail "virtlogd does not answer on $_virtlogd_sock after ${LIBVIRT_WAIT}s"
	fi
	_host_ns libvirtd -d || fail "libvirtd -d failed"
	_libvirt_started_libvirtd=1
	_wait_for "$LIBVIRT_WAIT" libvirt_answers ||
		fail "libvirtd does not answer on $LIBVIRT_URI after ${LIBVIRT_WAIT}s"
	note "started libvirtd (and virtlogd) for this test"
}

# Stop what libvirt_up started: the pid from the daemon's pid file, then
# wait until its socket stops answering.
_libvirt_stop() { # PIDFILE ANSWERS-COMMAND...
	local pidfile=$1 pid
	shift
	pid=$(cat "$pidfile" 2>/dev/null) || return 0
	case $pid in '' | *[!0-9]*) return 0 ;; esac
	# (only the daemon: a stale pid file's PID may be another process's now)
	case $(cat "/proc/$pid/comm" 2>/dev/null) in libvirtd | virtlogd) ;; *) return 0 ;; esac
	kill "$pid" 2>/dev/null
	_wait_for "$LIBVIRT_WAIT" _not "$@" || kill -9 "$pid" 2>/dev/null
}
_libvirt_down() {
	if [ "$_libvirt_started_libvirtd" = 1 ]; then
		_libvirt_stop /run/libvirtd.pid libvirt_answers
		_libvirt_started_libvirtd=0
	fi
	if [ "$_libvirt_started_virtlogd" = 1 ]; then
		_libvirt_stop /run/virtlogd.pid _socket_answers "$_virtlogd_sock"
		_libvirt_started_virtlogd=0
	fi
}

_libvirt_test_name() {
	case $1 in
	imager-test-?*) ;;
	*) fail "libvirt objects made by tests are named imager-test-...: '$1'" ;;
	esac
}

_libvirt_pool_remove() {
	lv pool-destroy "$1" >/dev/null 2>&1
	lv pool-undefine "$1" >/dev/null 2>&1
}
libvirt_cleanup_pool() { _libvirt_test_name "$1"; on_exit _libvirt_pool_remove "$1"; }

_libvirt_domain_remove() {
	lv destroy "$1" >/dev/null 2>&1
	lv undefine --nvram "$1" >/dev/null 2>&1 || lv undefine "$1" >/dev/null 2>&1
}
libvirt_cleanup_domain() {
	_libvirt_test_name "$1"
	_libvirt_domain_remove "$1"     # a leftover of a killed run
	on_exit _libvirt_domain_remove "$1"
}

libvirt_cleanup_volume() { # POOL VOLUME
	on_exit "lv vol-delete --pool '$1' '$2'"
}

libvirt_pool_dir() { # NAME DIR
	local name=$1 dir=$2
	_libvirt_test_name "$name"
	_libvirt_pool_remove "$name"    # a leftover of a killed run
	mkdir -p "$dir" || fail "mkdir $dir"
	lv pool-define-as "$name" dir --target "$dir" >/dev/null || fail "pool-define-as $name"
	on_exit _libvirt_pool_remove "$name"
	lv pool-build "$name" >/dev/null || fail "pool-build $name"
	lv pool-start "$name" >/dev/null || fail "pool-start $name"
	note "pool $name on $dir"
}
