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
