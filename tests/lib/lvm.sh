# LVM2 without device-mapper (FACTS.md): physical volumes, volume groups and
# logical volumes made by the real LVM tools on loop devices, never
# activated; the LVs' contents written by offset.  Sourced after common.sh.
#
#   lvm_setup             a private LVM configuration for this test
#                         (LVM_SYSTEM_DIR=$T/lvm: no backup or archive under
#                         /etc/lvm, activation off, only loop devices
#                         scanned); needs root and loop devices
#   lvm DEVICE... -- CMD ARGS...
#                         runs an LVM command that may see only DEVICEs
#   lv_offset DEV VG LV   the byte offset, in the PV DEV, of the LV's first
#                         extent (its first segment on DEV)
#   lv_put DEV VG LV FILE writes FILE (a filesystem image) at the LV's place
#                         (the LV must be linear on DEV and as large)
#   lv_get DEV VG LV FILE reads the LV's bytes from DEV into FILE
export LVM_SUPPRESS_FD_WARNINGS=1

lvm_setup() {
	need_loop
	need_cmd pvcreate vgcreate lvcreate lvs pvs vgs pvck vgck
	mkdir -p "$T/lvm"
	cat >"$T/lvm/lvm.conf" <<-'CONF'
		global { activation = 0 }
		backup { backup = 0 archive = 0 }
		devices { obtain_device_list_from_udev = 0 scan = [ "/dev" ] }
		activation { udev_sync = 0 udev_rules = 0 monitoring = 0 }
	CONF
	export LVM_SYSTEM_DIR=$T/lvm
}

# lvm DEVICE... -- CMD ARGS...: only the named devices are seen.
lvm() {
	local devs=() f d
	while [ "$1" != -- ]; do
		devs+=("$1")
		shift
	done
	shift
	f='devices { filter = ['
	for d in "${devs[@]}"; do f+=" \"a|^$d\$|\","; done
	f+=' "r|.*|" ] }'
	"$@" --config "$f"
}

# The first PE of the LV's first segment on DEV, and the extent size.
_lv_geometry() { # DEV VG LV -> "pe_start extent_bytes first_pe"
	local dev=$1 vg=$2 lv=$3 pe_start ext ranges first
	pe_start=$(lvm "$dev" -- pvs --noheadings --nosuffix --units b -o pe_start "$dev" | tr -d ' ')
	ext=$(lvm "$dev" -- vgs --noheadings --nosuffix --units b -o vg_extent_size "$vg" | tr -d ' ')
	ranges=$(lvm "$dev" -- lvs --noheadings -o seg_pe_ranges "$vg/$lv" | head -n 1 | tr -d ' ')
	first=${ranges#*:}
	first=${first%%-*}
	[ -n "$pe_start" ] && [ -n "$ext" ] && [ -n "$first" ] || fail "no geometry for $vg/$lv on $dev"
	echo "$pe_start $ext $first"
}
lv_offset() {
	local geo g
	# (fail inside $(...) prints into the capture and ends only the subshell)
	geo=$(_lv_geometry "$@") || fail "${geo#FAIL: }"
	read -ra g <<<"$geo"
	echo $((g[0] + g[2] * g[1]))
}
lv_put() { # DEV VG LV FILE
	local off
	off=$(lv_offset "$1" "$2" "$3") || fail "${off#FAIL: }"
	dd if="$4" of="$1" bs=1M seek="$off" oflag=seek_bytes conv=notrunc status=none ||
		fail "writing $4 into $2/$3"
}
lv_get() { # DEV VG LV FILE
	local off size
	off=$(lv_offset "$1" "$2" "$3") || fail "${off#FAIL: }"
	size=$(lvm "$1" -- lvs --noheadings --nosuffix --units b -o lv_size "$2/$3" | tr -d ' ')
	dd if="$1" of="$4" bs=1M skip="$off" count="$size" iflag=skip_bytes,count_bytes status=none ||
		fail "reading $2/$3"
}
