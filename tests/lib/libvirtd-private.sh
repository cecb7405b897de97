# libvirtd instances of a test's (or a bench's) own, beside the system's:
# each in a mount namespace of its own where its folders DIR/run, DIR/etc,
# DIR/lib and DIR/cache are /run/libvirt, /etc/libvirt, /var/lib/libvirt and
# /var/cache/libvirt (a copy of libvirtd.conf and qemu.conf, and of qemu's
# capabilities cache when the system daemon made one), reached by
# qemu+unix:///system?socket=DIR/run/libvirt-sock.  No network, no pool,
# no domain but what the caller defines; everything goes with DIR.  The
# namespace is a copy of the caller's: what is mounted before the start
# (a tmpfs for a small pool) is seen by the daemon.  Needs root.
#   lvd_private_start DIR   start it; 1 when it does not answer within 20 s
#   lvd_private_stop DIR    stop it (TERM, then KILL), until its socket is dead
#   lvd_private_uri DIR     its URI
# Killed daemons may stay zombies here: whether one runs is asked of its
# socket, never of its pid.  Needs TESTS_LIB; nothing of common.sh.

lvd_private_uri() { echo "qemu+unix:///system?socket=$1/run/libvirt-sock"; }

# (libvirt.sh's _socket_answers; its other helpers need common.sh)
# shellcheck source=libvirt.sh
. "$TESTS_LIB/libvirt.sh"
_lvd_answers() { _socket_answers "$1/run/libvirt-sock"; }

lvd_private_start() {
	local d=$1 i
	mkdir -p "$d/run" "$d/etc" "$d/lib" "$d/cache"
	cp /etc/libvirt/libvirtd.conf /etc/libvirt/qemu.conf "$d/etc/" 2>/dev/null
	cp -a /var/cache/libvirt/qemu "$d/cache/" 2>/dev/null
	unshare -m --propagation private sh -c '
		mkdir -p /run/libvirt /etc/libvirt /var/lib/libvirt /var/cache/libvirt &&
		mount --bind "$1/run" /run/libvirt && mount --bind "$1/etc" /etc/libvirt &&
		mount --bind "$1/lib" /var/lib/libvirt && mount --bind "$1/cache" /var/cache/libvirt &&
		exec libvirtd -d -p "$1/libvirtd.pid"' sh "$d" || return 1
	for ((i = 0; i < 200; i++)); do
		virsh -q -c "$(lvd_private_uri "$d")" version >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

_lvd_signal() { # DIR SIGNAL: the daemon of DIR's pid file, if it is still libvirtd
	local pid
	pid=$(cat "$1/libvirtd.pid" 2>/dev/null) || return 0
	case $pid in '' | *[!0-9]*) return 0 ;; esac
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = libvirtd ] && kill -s "$2" "$pid" 2>/dev/null
	return 0
}

lvd_private_stop() {
	local d=$1 i
	_lvd_signal "$d" TERM
	for ((i = 0; i < 100; i++)); do
		_lvd_answers "$d" || return 0
		sleep 0.1
	done
	_lvd_signal "$d" KILL
}
