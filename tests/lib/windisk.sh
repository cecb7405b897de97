# Synthetic Windows disks, fake virtio-win media and registry comparisons for
# the Windows conversion tests.  Sourced after common.sh:
#   . "$TESTS_LIB/windisk.sh"
#
#   windisk_need          skips unless guestfish, hivexregedit, python3 and a
#                         kernel libguestfs can boot are here
#   win_disk OUT KIND     OUT: a 128 MiB sparse raw disk (MBR, one NTFS
#                         partition) that libguestfs inspects as Windows; KIND
#                         is win7 (6.1, current control set ControlSet002) or
#                         win10 (10.0, ControlSet001).  Sets and exports
#                         WINDISK_CONTROLSET to the current control set's name.
#   win_disk_seen KIND OUTDIR
#                         what libguestfs saw of the KIND disk in the session
#                         that built it (cached beside it): OUTDIR/answers
#                         ("NAME" and answer lines: roots, type, product,
#                         major, minor, arch, controlset, systemroot, variant,
#                         vfs, filearch, file), OUTDIR/SYSTEM and
#                         OUTDIR/SOFTWARE (downloaded), OUTDIR/files.find0
#                         (find0 /) and OUTDIR/sums.raw (checksums-out md5 /)
#   win_hives KIND OUTDIR OUTDIR/SYSTEM and OUTDIR/SOFTWARE: the hives win_disk
#                         puts on a KIND disk, made without an appliance (the
#                         "before" side of a reg_diff)
#   virtio_win_tree DIR LAYOUT [OS...]
#                         a fake virtio-win folder of one-line placeholder
#                         files; LAYOUT "iso" (DRV/OS/ARCH/FILE, as on the
#                         virtio-win ISO) or "by-os" (drivers/by-os/ARCH/OS/FILE,
#                         as in the virtio-win RPM)
#   virtio_win_iso ISO DIR
#                         an ISO 9660 image of DIR (Joliet and Rock Ridge),
#                         volume id virtio-win-0.1.262
#   win_extract DISK OUTDIR
#                         reads DISK (raw or qcow2) on the host, read-only,
#                         without an appliance: OUTDIR/SYSTEM and
#                         OUTDIR/SOFTWARE (the hives), OUTDIR/files.txt (every
#                         path, sorted) and OUTDIR/sums.txt (md5sum lines for
#                         every regular file outside /Windows/System32/config),
#                         and OUTDIR/firstboot.cmd when imager's first-boot
#                         script is there
#   win_fetch DISK PATH LOCAL
#                         copies the file PATH of DISK's NTFS partition to
#                         LOCAL (ntfscat, read-only)
#   win_plant DISK LOCAL PATH
#                         writes LOCAL as the file PATH of raw DISK's NTFS
#                         partition, replacing one that is there (ntfscp)
#   reg_flat HIVE [PREFIX]
#                         the hive as sorted lines KEY<TAB>NAME<TAB>TYPE<TAB>DATA,
#                         plus KEY<TAB><TAB>key<TAB> for every key; NAME "@" is
#                         the default value; DATA: dword 0x%08x, strings as
#                         text, multi_sz joined with "|", others as hex bytes
#   reg_diff BEFORE AFTER lines "- ..." (only before) and "+ ..." (only after)
#                         of the two hives' reg_flat, sorted by key and value
#                         name, a changed value's "-" line before its "+" line
#
# A disk is built once per version of what makes it, with one guestfish
# session that also checks that inspection sees the Windows it should (and
# keeps what it saw: win_disk_seen), and cached as
# $IMAGER_TEST_CACHE/windisk-KIND-KEY.raw, what libguestfs saw beside it in
# windisk-KIND-KEY.seen/ (default /var/cache/imager-tests, KEY the first 16
# hex digits of the sha256 of this file's part from "where minimal.hive is"
# to "the cache of built disks", of minimal.hive and of guestfish's
# version); each call copies it.  The hives grow from minimal.hive of
# the shared test data (IMAGER_TESTDATA, else ../shared/testdata beside the
# repository, else /work/shared/testdata).
#
# libguestfs runs its appliance as tests/lib/guestfs.sh decided (TCG here: a
# launch costs 25-35 s): only the build launches one.  Everything that reads
# or writes a disk afterwards does it on the host, in well under a second:
# the NTFS partition (found in the MBR) on a loop device with an offset, read
# through a read-only ntfs-3g mount or ntfscat, written by ntfscp.  The
# appliance's ntfs-3g is this host's (supermin builds the appliance from the
# host's packages), so the host sees the files exactly as libguestfs does.

WINDISK_SELF=$(readlink -f "${BASH_SOURCE[0]}")

windisk_need() {
	need_cmd guestfish hivexregedit python3 iconv od flock
	# (a kernel libguestfs can read, among the rest)
	need_guestfs
	# win_extract, win_fetch, win_plant: the partition on the host
	need_loop
	need_cmd ntfs-3g ntfscat ntfscp qemu-img mountpoint
	[ -c /dev/fuse ] || skip "needs /dev/fuse (ntfs-3g mounts the disks' NTFS read-only)"
}

# ---- where minimal.hive is ----
# Sets _wd_hive (not in a subshell: skip must end the test).
_wd_find_hive() {
	local top
	if [ -n "${IMAGER_TESTDATA:-}" ]; then
		[ -f "$IMAGER_TESTDATA/minimal.hive" ] ||
			skip "IMAGER_TESTDATA=$IMAGER_TESTDATA holds no minimal.hive"
		_wd_hive=$IMAGER_TESTDATA/minimal.hive
		return 0
	fi
	top=$(git -C "${TESTS_LIB:-$(dirname "$WINDISK_SELF")}" rev-parse --show-toplevel 2>/dev/null) || top=
	if [ -n "$top" ] && [ -f "$top/../shared/testdata/minimal.hive" ]; then
		_wd_hive=$top/../shared/testdata/minimal.hive
	elif [ -f /work/shared/testdata/minimal.hive ]; then
		_wd_hive=/work/shared/testdata/minimal.hive
	else
		skip "no minimal.hive: set IMAGER_TESTDATA to the shared testdata folder (../shared/testdata beside the repository)"
	fi
}

# ---- regedit text ----
# Keys go through _wd_key, which writes every missing ancestor first
# (hivexregedit --merge cannot create a key whose parent does not exist).
declare -A _wd_keys_written=()
_wd_prefix=
_wd_reg_begin() { # PREFIX
	_wd_prefix=$1
	_wd_keys_written=()
	printf 'Windows Registry Editor Version 5.00\n'
}
_wd_key() { # PATH (below the prefix, no leading backslash)
	local path=$1 parent
	[ -n "${_wd_keys_written[$path]:-}" ] && return 0
	case $path in *\\*)
		parent=${path%\\*}
		_wd_key "$parent"
		;;
	esac
	_wd_keys_written[$path]=1
	printf '\n[%s\\%s]\n' "$_wd_prefix" "$path"
}
_wd_quote() { # TEXT: a regedit quoted string
	local s=${1//\\/\\\\}
	printf '"%s"' "${s//\"/\\\"}"
}
# UTF-16LE bytes of each argument, each with its terminating NUL, as "aa,bb,..".
_wd_utf16_hex() {
	local s
	for s in "$@"; do printf '%s\0' "$s"; done |
		iconv -f UTF-8 -t UTF-16LE | od -An -tx1 -v | tr -s ' \n' ',,' | sed 's/^,//; s/,$//'
}
_wd_name() { if [ "$1" = @ ]; then printf @; else _wd_quote "$1"; fi; }
_wd_sz() { printf '%s=%s\n' "$(_wd_name "$1")" "$(_wd_quote "$2")"; }
_wd_dword() { printf '%s=dword:%08x\n' "$(_wd_quote "$1")" "$2"; }
_wd_expand() { printf '%s=hex(2):%s\n' "$(_wd_quote "$1")" "$(_wd_utf16_hex "$2")"; }
_wd_multi() { # NAME STRING... (the list ends with one more NUL)
	local name=$1
	shift
	printf '%s=hex(7):%s,00,00\n' "$(_wd_quote "$name")" "$(_wd_utf16_hex "$@")"
}

_wd_service() { # CS NAME TYPE START [GROUP [IMAGEPATH]]
	_wd_key "$1\\Services\\$2"
	_wd_dword Type "$3"
	_wd_dword Start "$4"
	_wd_dword ErrorControl 1
	[ -n "${5:-}" ] && _wd_sz Group "$5"
	[ -n "${6:-}" ] && _wd_expand ImagePath "$6"
	return 0
}

_wd_controlset() { # KIND CONTROLSET
	local kind=$1 cs=$2 class=$2\\Control\\Class
	_wd_key "$cs\\Control\\ComputerName\\ComputerName"
	_wd_sz ComputerName "SYNTH-${kind^^}"
	_wd_key "$class\\{4D36E97B-E325-11CE-BFC1-08002BE10318}"
	_wd_sz @ "Storage controllers"
	_wd_sz Class SCSIAdapter
	_wd_key "$class\\{4d36e967-e325-11ce-bfc1-08002be10318}"
	_wd_sz @ "Disk drives"
	_wd_sz Class DiskDrive
	_wd_multi UpperFilters PartMgr xenfilt
	_wd_key "$class\\{4d36e97d-e325-11ce-bfc1-08002be10318}"
	_wd_sz @ "System devices"
	_wd_sz Class System
	[ "$kind" = win10 ] && _wd_multi UpperFilters xenfilt
	if [ "$kind" = win7 ]; then
		_wd_key "$cs\\Control\\CriticalDeviceDatabase\\pci#ven_8086&dev_7111"
		_wd_sz Service atapi
		_wd_sz ClassGUID "{4D36E96A-E325-11CE-BFC1-08002BE10318}"
	fi
	# Ordinary services.
	_wd_service "$cs" disk 1 0 "SCSI Class" 'system32\drivers\disk.sys'
	_wd_service "$cs" atapi 1 0 "SCSI miniport"
	# Leftovers of the platforms the machine came from.
	_wd_service "$cs" VMTools 16 2
	_wd_service "$cs" vmci 1 0
	_wd_service "$cs" pvscsi 1 0 "SCSI miniport"
	_wd_service "$cs" vmxnet3ndis6 1 3
	_wd_service "$cs" xenfilt 1 0
	if [ "$kind" = win7 ]; then
		_wd_service "$cs" VBoxService 16 2
	else
		_wd_service "$cs" vmicheartbeat 32 3
	fi
	_wd_service "$cs" vmmouse 1 4 # already disabled
}

_wd_system_reg() { # KIND
	local kind=$1 current lkg
	if [ "$kind" = win7 ]; then current=2 lkg=1; else current=1 lkg=2; fi
	_wd_reg_begin 'HKEY_LOCAL_MACHINE\SYSTEM'
	_wd_key Select
	_wd_dword Current $current
	_wd_dword Default $current
	_wd_dword LastKnownGood $lkg
	_wd_dword Failed 0
	# The current set and an older copy beside it.
	_wd_controlset "$kind" ControlSet001
	_wd_controlset "$kind" ControlSet002
	if [ "$kind" = win10 ]; then # Windows 8 and later; Windows 7 has none
		_wd_key 'DriverDatabase\DriverInfFiles'
		_wd_key 'DriverDatabase\DeviceIds\PCI'
		_wd_key 'DriverDatabase\DriverPackages'
	fi
}

_wd_software_reg() { # KIND
	local kind=$1
	_wd_reg_begin 'HKEY_LOCAL_MACHINE\SOFTWARE'
	_wd_key 'Microsoft\Windows NT\CurrentVersion'
	if [ "$kind" = win7 ]; then
		_wd_sz ProductName "Windows 7 Professional"
		_wd_sz CurrentVersion 6.1
		_wd_sz CurrentBuildNumber 7601
		_wd_sz CurrentBuild 7601
	else
		_wd_sz ProductName "Windows 10 Pro"
		_wd_sz CurrentVersion 6.3
		_wd_dword CurrentMajorVersionNumber 10
		_wd_dword CurrentMinorVersionNumber 0
		_wd_sz CurrentBuildNumber 19045
		_wd_sz CurrentBuild 19045
	fi
	_wd_sz EditionID Professional
	_wd_sz InstallationType Client
	_wd_sz SystemRoot 'C:\Windows'
	_wd_sz PathName 'C:\Windows'
	_wd_key 'Microsoft\Windows\CurrentVersion'
	_wd_expand DevicePath '%SystemRoot%\inf'
	_wd_sz ProgramFilesDir 'C:\Program Files'
}

win_hives() { # KIND OUTDIR
	local kind=$1 dir=$2
	case $kind in win7 | win10) ;; *) fail "win_hives: unknown kind '$kind' (win7 or win10)" ;; esac
	need_cmd hivexregedit iconv od
	_wd_find_hive
	mkdir -p "$dir" || fail "mkdir $dir"
	rm -f "$dir/SYSTEM" "$dir/SOFTWARE"
	cp "$_wd_hive" "$dir/SYSTEM" || fail "cannot copy $_wd_hive"
	cp "$_wd_hive" "$dir/SOFTWARE" || fail "cannot copy $_wd_hive"
	chmod u+w "$dir/SYSTEM" "$dir/SOFTWARE"
	_wd_system_reg "$kind" >"$dir/system.reg"
	_wd_software_reg "$kind" >"$dir/software.reg"
	hivexregedit --merge --prefix 'HKEY_LOCAL_MACHINE\SYSTEM' "$dir/SYSTEM" "$dir/system.reg" ||
		fail "hivexregedit --merge SYSTEM ($dir/system.reg)"
	hivexregedit --merge --prefix 'HKEY_LOCAL_MACHINE\SOFTWARE' "$dir/SOFTWARE" "$dir/software.reg" ||
		fail "hivexregedit --merge SOFTWARE ($dir/software.reg)"
	rm -f "$dir/system.reg" "$dir/software.reg"
}

# A 312-byte stand-in for cmd.exe: MZ header, e_lfanew -> "PE\0\0", machine
# 0x8664, no sections, and a PE32+ optional header (magic 0x20b, console
# subsystem, 14 data directories).  file(1) calls it "PE32+ executable
# (console) x86-64", which is all libguestfs looks at to tell the arch.
_wd_cmd_exe() { # OUT
	python3 - "$1" <<'PY'
import struct, sys
b = bytearray(312)
b[0:2] = b'MZ'
struct.pack_into('<I', b, 0x3c, 0x40)                  # e_lfanew
b[0x40:0x44] = b'PE\0\0'
struct.pack_into('<HHIIIHH', b, 0x44, 0x8664, 0, 0, 0, 0, 224, 0x0022)
o = 0x58                                               # optional header
struct.pack_into('<HBB', b, o, 0x20b, 14, 0)
struct.pack_into('<Q', b, o + 24, 0x140000000)         # ImageBase
struct.pack_into('<II', b, o + 32, 0x1000, 0x200)      # alignments
struct.pack_into('<HHHHHH', b, o + 40, 10, 0, 10, 0, 10, 0)
struct.pack_into('<II', b, o + 56, 0x1000, 0x200)      # SizeOfImage, SizeOfHeaders
struct.pack_into('<HH', b, o + 68, 3, 0x8160)          # console; DllCharacteristics
struct.pack_into('<I', b, o + 108, 14)                 # NumberOfRvaAndSizes
open(sys.argv[1], 'wb').write(b)
PY
}

# _wd_build KIND IMAGE SEEN: builds and checks the disk (one appliance
# launch), and keeps what libguestfs saw of it in the folder SEEN.
_wd_build() {
	local kind=$1 image=$2 seen=$3 build major minor cs out rc=0
	local -A answer=()
	build=$(mktemp -d "${TMPDIR:-/tmp}/windisk-build.XXXXXX") || fail "mktemp"
	win_hives "$kind" "$build"
	_wd_cmd_exe "$build/cmd.exe" || fail "cannot write cmd.exe"
	echo "disk.sys placeholder (synthetic $kind)" >"$build/disk.sys"
	rm -f "$image"
	truncate -s 128M "$image" || fail "truncate $image"

	guestfish --format=raw -a "$image" >"$build/gf.out" 2>"$build/gf.err" <<-GF || rc=$?
		run
		part-init /dev/sda mbr
		part-add /dev/sda p 2048 -1
		part-set-mbr-id /dev/sda 1 0x7
		part-set-bootable /dev/sda 1 true
		mkfs ntfs /dev/sda1
		set-label /dev/sda1 SYNTH-${kind^^}
		mount /dev/sda1 /
		mkdir-p /Windows/System32/config
		mkdir-p /Windows/System32/drivers
		mkdir-p /Windows/INF
		mkdir-p /Windows/Temp
		mkdir-p "/Program Files"
		mkdir-p /Users
		upload "$build/cmd.exe" /Windows/System32/cmd.exe
		upload "$build/disk.sys" /Windows/System32/drivers/disk.sys
		upload "$build/SYSTEM" /Windows/System32/config/SYSTEM
		upload "$build/SOFTWARE" /Windows/System32/config/SOFTWARE
		umount-all
		echo roots
		inspect-os
		echo type
		inspect-get-type /dev/sda1
		echo product
		inspect-get-product-name /dev/sda1
		echo major
		inspect-get-major-version /dev/sda1
		echo minor
		inspect-get-minor-version /dev/sda1
		echo arch
		inspect-get-arch /dev/sda1
		echo controlset
		inspect-get-windows-current-control-set /dev/sda1
		echo systemroot
		inspect-get-windows-systemroot /dev/sda1
		echo variant
		inspect-get-product-variant /dev/sda1
		echo vfs
		vfs-type /dev/sda1
		mount-ro /dev/sda1 /
		echo filearch
		file-architecture /Windows/System32/cmd.exe
		echo file
		file /Windows/System32/cmd.exe
		download /Windows/System32/config/SYSTEM "$seen/SYSTEM"
		download /Windows/System32/config/SOFTWARE "$seen/SOFTWARE"
		find0 / "$seen/files.find0"
		checksums-out md5 / "$seen/sums.raw"
	GF
	if [ "$rc" != 0 ]; then
		cat "$build/gf.out" "$build/gf.err"
		rm -rf "$build" "$image"
		fail "guestfish could not build the $kind disk (exit $rc)"
	fi
	# "echo NAME" lines are followed by the answer.
	while read -r key && read -r value; do answer[$key]=$value; done <"$build/gf.out"
	note "built $kind: ${answer[product]:-?} ${answer[major]:-?}.${answer[minor]:-?} ${answer[arch]:-?}" \
		"${answer[controlset]:-?} ${answer[systemroot]:-?}"
	if [ "$kind" = win7 ]; then major=6 minor=1 cs=ControlSet002; else major=10 minor=0 cs=ControlSet001; fi
	out="${answer[roots]:-} ${answer[type]:-} ${answer[major]:-} ${answer[minor]:-} ${answer[arch]:-} ${answer[controlset]:-} ${answer[systemroot]:-}"
	if [ "$out" != "/dev/sda1 windows $major $minor x86_64 $cs /Windows" ]; then
		cat "$build/gf.out" "$build/gf.err"
		rm -rf "$build" "$image"
		fail "the synthetic $kind disk does not inspect as it should: got '$out'," \
			"expected '/dev/sda1 windows $major $minor x86_64 $cs /Windows'"
	fi
	cp "$build/gf.out" "$seen/answers" || fail "cp the answers"
	rm -rf "$build"
}

# ---- the cache of built disks ----
# What a disk holds follows from the part of this file above (from "where
# minimal.hive is") and from minimal.hive.  Other versions' disks stay
# beside this one (checkouts of other versions share the cache: evicting
# each other's would rebuild at every switch); one unused for 30 days goes
# when a disk of its kind is built.
_wd_cache_key() {
	local part
	part=$(sed -n '/^# ---- where minimal.hive is ----$/,/^# ---- the cache of built disks ----$/p' "$WINDISK_SELF")
	[ -n "$part" ] || return 1
	{ printf '%s\n' "$part"; cat "$_wd_hive"; guestfish --version; } | sha256sum | cut -c1-16
}

win_disk() { # OUT KIND
	local out=$1 kind=$2 image
	case $kind in
	win7) WINDISK_CONTROLSET=ControlSet002 ;;
	win10) WINDISK_CONTROLSET=ControlSet001 ;;
	*) fail "win_disk: unknown kind '$kind' (win7 or win10)" ;;
	esac
	_wd_cached "$kind"
	image=$_wd_entry.raw
	cp --sparse=always "$image" "$out" || fail "cp $image $out"
	export WINDISK_CONTROLSET
}
win_disk_seen() { # KIND OUTDIR
	_wd_cached "$1"
	rm -rf "$2"
	cp -r "$_wd_entry.seen" "$2" || fail "cp $_wd_entry.seen $2"
}
# _wd_cached KIND: _wd_entry, the cache's path of the KIND disk without its
# suffix (.raw: the disk, .seen: what libguestfs saw), built if missing.
_wd_cached() {
	local kind=$1 cache key image seen
	windisk_need
	cache=${IMAGER_TEST_CACHE:-/var/cache/imager-tests}
	_wd_find_hive
	key=$(_wd_cache_key) || fail "cannot hash what makes the disks"
	_wd_entry=$cache/windisk-$kind-$key
	image=$_wd_entry.raw seen=$_wd_entry.seen
	if [ ! -f "$image" ] && [ -n "${IMAGER_TEST_NO_BUILD:-}" ]; then
		fail "the $kind disk is not in $cache: fixtures/windows failed or did not run"
	fi
	if [ ! -f "$image" ]; then
		mkdir -p "$cache" || fail "cannot create the cache folder $cache"
		# One build at a time; a second caller waits, then finds the image.
		exec {_wd_lock}>"$cache/windisk-$kind.lock" || fail "cannot lock in $cache"
		flock "$_wd_lock"
		if [ ! -f "$image" ]; then
			local start=$SECONDS
			# Builds killed before the rename left these.
			rm -rf "$cache"/windisk-"$kind"-*.tmp.* "$seen"
			on_exit "rm -rf $(printf %q "$image.tmp.$$") $(printf %q "$seen.tmp.$$")"
			mkdir -p "$seen.tmp.$$" || fail "mkdir in $cache"
			_wd_build "$kind" "$image.tmp.$$" "$seen.tmp.$$"
			# (the disk last: it says the entry is whole)
			mv "$seen.tmp.$$" "$seen" && mv "$image.tmp.$$" "$image" || fail "mv into $cache"
			note "cached $image ($((SECONDS - start)) s)"
			find "$cache" -maxdepth 1 -name "windisk-$kind-*" ! -name "${image##*/}" \
				! -name "${seen##*/}" -mtime +30 -print -exec rm -rf {} + 2>/dev/null |
				sed 's/^/   removed unused /'
		fi
		exec {_wd_lock}>&-
	fi
	# used now: its mtime says so to the eviction above
	touch "$image" "$seen" 2>/dev/null || true
}

# ---- fake virtio-win ----
WINDISK_VIRTIO_DRIVERS="viostor vioscsi NetKVM Balloon vioserial viorng qxldod pvpanic"
WINDISK_VIRTIO_OSES="xp 2k3 2k8 w7 2k8r2 w8 2k12 w8.1 2k12r2 w10 w11 2k16 2k19 2k22 2k25"

_wd_driver_base() { # DRV: the file name the driver's files share
	case $1 in
	vioserial) echo vioser ;;
	*) echo "${1,,}" ;;
	esac
}

virtio_win_tree() { # DIR LAYOUT [OS...]
	local dir=$1 layout=$2 drv os arch ext base folder
	shift 2
	local -a oses=("$@")
	[ ${#oses[@]} = 0 ] && read -r -a oses <<<"$WINDISK_VIRTIO_OSES"
	case $layout in iso | by-os) ;; *) fail "virtio_win_tree: unknown layout '$layout' (iso or by-os)" ;; esac
	for drv in $WINDISK_VIRTIO_DRIVERS; do
		base=$(_wd_driver_base "$drv")
		for os in "${oses[@]}"; do
			for arch in amd64 x86; do
				if [ "$layout" = iso ]; then
					folder=$dir/$drv/$os/$arch
				else
					folder=$dir/drivers/by-os/$arch/$os
				fi
				mkdir -p "$folder" || fail "mkdir $folder"
				for ext in sys inf cat pdb; do
					echo "virtio-win placeholder $drv $os $arch $base.$ext" >"$folder/$base.$ext"
				done
			done
		done
	done
	mkdir -p "$dir/guest-agent"
	echo "virtio-win placeholder guest-agent qemu-ga-x86_64.msi" >"$dir/guest-agent/qemu-ga-x86_64.msi"
	echo "virtio-win placeholder guest-agent qemu-ga-i386.msi" >"$dir/guest-agent/qemu-ga-i386.msi"
	echo "virtio-win placeholder license" >"$dir/virtio-win_license.txt"
}

virtio_win_iso() { # ISO DIR
	local -a mk
	if command -v genisoimage >/dev/null 2>&1; then
		mk=(genisoimage)
	elif command -v xorriso >/dev/null 2>&1; then
		mk=(xorriso -as mkisofs)
	else
		skip "needs genisoimage or xorriso"
	fi
	"${mk[@]}" -quiet -input-charset utf-8 -J -joliet-long -R -V virtio-win-0.1.262 \
		-o "$1" "$2" || fail "${mk[0]} could not make $1"
}

# ---- the NTFS partition on the host ----
# A loop device over the partition's bytes (the host kernel reads no
# partition table on a loop device: -o/--sizelimit instead of partx) and
# ntfs-3g's FUSE mount or offline tools on it.  Each call detaches what it
# attached; the on_exit net (for a test stopped half-way) touches a device
# only while it is still backed by this test's file, never one reused since.

# _wd_raw DISK: sets _wd_rawfile to DISK, or for a qcow2 to a raw copy of it.
_wd_n=0
_wd_raw() {
	local fmt
	fmt=$(qemu-img info -U "$1" 2>/dev/null | sed -n 's/^file format: //p')
	case $fmt in
	raw) _wd_rawfile=$1 ;;
	qcow2)
		_wd_n=$((_wd_n + 1))
		_wd_rawfile=$T/.windisk-raw.$_wd_n
		on_exit "rm -f $(printf %q "$_wd_rawfile")"
		qemu-img convert -U -f qcow2 -O raw "$1" "$_wd_rawfile" || fail "qemu-img convert $1 to raw"
		;;
	*) fail "$1: neither raw nor qcow2 (qemu-img says '${fmt:-nothing}')" ;;
	esac
}

# _wd_attach RAW ro|rw: sets _wd_dev to a loop device over RAW's first NTFS
# (MBR type 07) partition.
_wd_attach() {
	local raw=$1 mode=$2 start sectors
	local -a ro=()
	read -r start sectors < <(partx -g -o START,SECTORS,TYPE "$raw" 2>/dev/null |
		awk '$3 == "0x7" { print $1, $2; exit }') || true
	[ -n "${start:-}" ] || fail "$raw has no NTFS partition (MBR type 07): $(partx -g "$raw" 2>&1)"
	[ "$mode" = ro ] && ro=(-r)
	_wd_dev=$(losetup -f --show "${ro[@]}" -o $((start * 512)) --sizelimit $((sectors * 512)) "$raw") ||
		fail "losetup over the NTFS partition of $raw"
	on_exit "_wd_detach $_wd_dev $(printf %q "$(readlink -f "$raw")")"
}
_wd_detach() { # DEV RAW: only while DEV is still RAW's
	[ "$(losetup -n -O BACK-FILE "$1" 2>/dev/null)" = "$2" ] || return 0
	losetup -d "$1"
}

# _wd_release DISK: detaches _wd_dev, removes a raw copy made of DISK.
_wd_release() {
	_wd_detach "$_wd_dev" "$(readlink -f "$_wd_rawfile")"
	[ "$_wd_rawfile" = "$1" ] || rm -f "$_wd_rawfile"
}

win_fetch() { # DISK PATH LOCAL
	local rc=0
	_wd_raw "$1"
	_wd_attach "$_wd_rawfile" ro
	ntfscat "$_wd_dev" "$2" >"$3" || rc=$?
	_wd_release "$1"
	[ "$rc" = 0 ] || fail "ntfscat $2 from $1 (exit $rc)"
}

win_plant() { # DISK LOCAL PATH
	local rc=0
	_wd_raw "$1"
	[ "$_wd_rawfile" = "$1" ] || fail "win_plant: $1 is no raw disk"
	_wd_attach "$1" rw
	ntfscp "$_wd_dev" "$2" "$3" || rc=$?
	_wd_release "$1"
	[ "$rc" = 0 ] || fail "ntfscp $2 to $3 on $1 (exit $rc)"
}

# ---- reading a converted disk ----
win_extract() { # DISK OUTDIR
	local disk=$1 dir=$2 mnt rc=0
	mkdir -p "$dir" || fail "mkdir $dir"
	rm -f "$dir/SYSTEM" "$dir/SOFTWARE" "$dir/firstboot.cmd"
	_wd_raw "$disk"
	_wd_attach "$_wd_rawfile" ro
	_wd_n=$((_wd_n + 1))
	mnt=$T/.windisk-mnt.$_wd_n
	mkdir -p "$mnt" || fail "mkdir $mnt"
	on_exit "mountpoint -q $(printf %q "$mnt") && umount -l $(printf %q "$mnt")"
	if ! ntfs-3g -o ro "$_wd_dev" "$mnt" 2>"$dir/ntfs-3g.err"; then
		cat "$dir/ntfs-3g.err"
		_wd_release "$disk"
		fail "ntfs-3g cannot mount the NTFS partition of $disk"
	fi
	{
		cp "$mnt/Windows/System32/config/SYSTEM" "$mnt/Windows/System32/config/SOFTWARE" "$dir/" &&
			chmod 0644 "$dir/SYSTEM" "$dir/SOFTWARE" &&
			# the names as guestfish's find0 gives them, the sums as its
			# checksums-out does ("md5  ./path"), both through ntfs-3g
			(cd "$mnt" && find . -mindepth 1 -print0) >"$dir/files.find0" &&
			(cd "$mnt" && find . -type f -print0 | xargs -0r md5sum) >"$dir/sums.raw" &&
			if [ -e "$mnt/Windows/imager-firstboot/firstboot.cmd" ]; then
				cp "$mnt/Windows/imager-firstboot/firstboot.cmd" "$dir/firstboot.cmd" &&
					chmod 0644 "$dir/firstboot.cmd"
			fi
	} || rc=$?
	umount "$mnt" || rc=1
	rmdir "$mnt"
	_wd_release "$disk"
	[ "$rc" = 0 ] || fail "cannot read the files of $disk (exit $rc)"
	# "./path" -> "/path", sorted as the C locale sorts
	tr '\0' '\n' <"$dir/files.find0" | sed 's|^\./||; s|^|/|' | LC_ALL=C sort >"$dir/files.txt"
	sed 's|^\([0-9a-f]*\)  \./|\1  /|' "$dir/sums.raw" | grep -v '^[0-9a-f]*  /Windows/System32/config/' |
		LC_ALL=C sort -k2 >"$dir/sums.txt"
	rm -f "$dir/files.find0" "$dir/sums.raw" "$dir/ntfs-3g.err"
}

# ---- registry comparisons ----
_WD_FLAT_PY='
import re, sys
prefix = sys.argv[1] if len(sys.argv) > 1 else ""
TYPES = {0: "none", 1: "sz", 2: "expand_sz", 3: "binary", 4: "dword", 5: "dword_be",
         6: "link", 7: "multi_sz", 8: "resource_list", 9: "full_resource_descriptor",
         10: "resource_requirements_list", 11: "qword"}
def printable(s):
    return "".join(c if c >= " " and c != "\x7f" else "\\x%02x" % ord(c) for c in s)
def hexbytes(b):
    return ",".join("%02x" % x for x in b)
def utf16(b):
    if len(b) % 2:
        return None
    try:
        return b.decode("utf-16-le")
    except UnicodeDecodeError:
        return None
def decode(t, b):
    if t in (1, 2, 6):
        s = utf16(b)
        return hexbytes(b) if s is None else printable(s.rstrip("\0"))
    if t == 7:
        s = utf16(b)
        if s is None:
            return hexbytes(b)
        s = s.rstrip("\0")
        return "|".join(printable(x) for x in s.split("\0")) if s else ""
    if t in (4, 5) and len(b) == 4:
        return "0x%08x" % int.from_bytes(b, "little" if t == 4 else "big")
    if t == 11 and len(b) == 8:
        return "0x%016x" % int.from_bytes(b, "little")
    return hexbytes(b)
def keyname(k):
    if not prefix:
        return k
    return prefix if k == "\\" else prefix.rstrip("\\") + k
out = []
key = None
value = re.compile(r"^(@|\"((?:[^\"\\]|\\.)*)\")=(dword:([0-9a-fA-F]{8})|hex(?:\(([0-9a-fA-F]+)\))?:(.*))$")
for line in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\n"):
    if line.startswith("[") and line.endswith("]"):
        key = keyname(line[1:-1])
        out.append("%s\t\tkey\t" % printable(key))
        continue
    if not line.strip() or line.startswith("Windows Registry Editor"):
        continue
    m = value.match(line)
    if not m or key is None:
        sys.exit("reg_flat: cannot parse: %r" % line)
    name = "@" if m.group(1) == "@" else re.sub(r"\\(.)", r"\1", m.group(2))
    if m.group(4) is not None:
        t, data = 4, bytes.fromhex(m.group(4))[::-1]
    else:
        t = int(m.group(5), 16) if m.group(5) is not None else 3
        data = bytes.fromhex(m.group(6).replace(",", "").replace(" ", ""))
    out.append("%s\t%s\t%s\t%s" % (printable(key), printable(name), TYPES.get(t, "type%d" % t), decode(t, data)))
for line in sorted(out):
    sys.stdout.buffer.write(line.encode("utf-8", "surrogateescape") + b"\n")
'

reg_flat() { # HIVE [PREFIX]
	local -
	set -o pipefail
	[ -f "$1" ] || fail "reg_flat: no hive $1"
	# shellcheck disable=SC1003  # the root key is a lone backslash
	hivexregedit --export "$1" '\' | python3 -c "$_WD_FLAT_PY" "${2:-}" ||
		fail "reg_flat: cannot flatten $1 (hivexregedit --export or the parser failed)"
}

reg_diff() { # BEFORE AFTER
	local a b
	a=$(mktemp) || fail "mktemp"
	b=$(mktemp) || fail "mktemp"
	reg_flat "$1" >"$a"
	reg_flat "$2" >"$b"
	# Sorted on the key (after the sign) and the value name only, and
	# stable: a changed value shows as its "-" line, then its "+" line.
	{
		LC_ALL=C comm -23 "$a" "$b" | sed 's/^/- /'
		LC_ALL=C comm -13 "$a" "$b" | sed 's/^/+ /'
	} | LC_ALL=C sort -s -t "$(printf '\t')" -k1.3,1 -k2,2
	rm -f "$a" "$b"
}
