# virt-v2v's conversion of the synthetic Windows disks (windisk.sh), the
# reference windows/win10 and windows/win7 hold imager's against
# (v2v_compare).  Sourced after common.sh and windisk.sh.
#
#   v2v_have              sets V2V to virt-v2v-in-place or virt-v2v, the one
#                         used; returns 1 when neither is there
#   v2v_need              the same, but skips when neither is there
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
#   v2v_compare KIND CS IMAGER BEFORE TREE
#                         imager's conversion of the KIND disk (IMAGER:
#                         win_extract's files of it, current control set
#                         CS; BEFORE: the disk's before it; TREE: the fake
#                         virtio-win tree imager read, the one virt-v2v read
#                         or an ISO of it) against virt-v2v's (v2v_extract),
#                         on the keys a virtio-blk boot depends on:
#     - every value of CS\Services\viostor; Type, Start, Group,
#       ErrorControl and ImagePath must agree (type and data; strings
#       case-insensitively);
#     - the PCI IDs VEN_1AF4&DEV_1001 (legacy virtio-blk) and DEV_1042
#       (modern): win7 binds them in CS\Control\CriticalDeviceDatabase
#       (Service, ClassGUID), win10 in \DriverDatabase (DeviceIds\PCI\ID
#       names an inf; DriverInfFiles\INF\Active its package; the package's
#       Descriptors\PCI\ID\Configuration a configuration, whose Service is
#       the driver).  Every ID virt-v2v binds must be bound by imager to the
#       same service (and, for win7, ClassGUID), by the same ID or by one of
#       the less specific hardware IDs Windows also tries for that device
#       (VEN&DEV&SUBSYS, VEN&DEV&REV, VEN&DEV); key names compare
#       case-insensitively;
#     - viostor.sys is in /Windows/System32/drivers on both disks, and it is
#       the same file (the placeholder of the guest's OS folder, w7 or w10,
#       amd64).
#                         Every difference is printed with both sides (PROBLEM
#                         lines); the rest of what each tool changed
#                         (SOFTWARE, first-boot machinery, files) is logged
#                         for reference only.  Returns 1 on a boot-critical
#                         difference.  Costs no appliance: virt-v2v's side is
#                         the fixture's.
#
# What virt-v2v 2.2.0 makes of the synthetic disk (found by running it):
#   - What it writes (SYSTEM, current control set CS):
#       CS\Services\viostor: Type=1 Start=0 Group="SCSI miniport"
#         ErrorControl=1 ImagePath=expand_sz "system32\drivers\viostor.sys"
#       win7: CS\Control\CriticalDeviceDatabase\
#         PCI#VEN_1AF4&DEV_1001&SUBSYS_00021AF4&REV_00 and
#         PCI#VEN_1AF4&DEV_1042&SUBSYS_11001AF4&REV_01, each with
#         Service="viostor", ClassGUID="{4D36E97B-E325-11CE-BFC1-08002BE10318}"
#       win10: DriverDatabase\DeviceIds\PCI\<the same two IDs>: binary value
#         "guestor.inf"=01,ff,00,00; DriverInfFiles\guestor.inf: @=multi_sz
#         "guestor.inf_tmp", Active="guestor.inf_tmp",
#         Configurations=multi_sz "guestor_conf"; DriverPackages\
#         guestor.inf_tmp: Version=binary (00,ff,09,00, 4 zero bytes, the
#         SCSIAdapter class GUID, 24 zero bytes), Configurations\guestor_conf:
#         ConfigFlags=0 Service="viostor", Descriptors\PCI\<ID>:
#         Configuration="guestor_conf"
#       CS\Services\firstboot (rhsrvany): Type=0x10 Start=2 ErrorControl=1
#         ObjectName="LocalSystem" DisplayName="Virt tools firstboot service"
#         ImagePath=sz "C:\Program Files\Guestfs\Firstboot\rhsrvany.exe -s
#         firstboot", Parameters: CommandLine=sz 'cmd /c "C:\Program
#         Files\Guestfs\Firstboot\firstboot.bat"', PWD=sz "C:\Program
#         Files\Guestfs\Firstboot"
#     and in SOFTWARE only Microsoft\Windows\CurrentVersion\DevicePath,
#     "%SystemRoot%\inf" -> "%SystemRoot%\inf;%SystemRoot%\Drivers\VirtIO".
#     No RunOnce, nothing in the other control set, and the VMware/Xen/
#     VirtualBox/Hyper-V leftovers and the xenfilt UpperFilters are left as
#     they are (2.2.0 only acts on what the Uninstall keys list).
#   - Files: every driver of the OS folder in /Windows/Drivers/VirtIO,
#     viostor.sys also in /Windows/System32/drivers, /qemu-ga-x86_64.msi (in
#     the root of C:), /Windows/Temp/install-qemu-ga-x86_64.msi.ps1, and
#     /Program Files/Guestfs/Firstboot/{firstboot.bat,rhsrvany.exe,
#     scripts/5000-0001-install-qemu-ga-x86_64-msi-ps1.bat}.
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

v2v_have() {
	if command -v virt-v2v-in-place >/dev/null 2>&1; then
		V2V=virt-v2v-in-place
	elif command -v virt-v2v >/dev/null 2>&1; then
		V2V=virt-v2v
	else
		return 1
	fi
}
v2v_need() {
	v2v_have || skip "needs virt-v2v-in-place or virt-v2v (Debian package virt-v2v)"
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

# ---- imager's conversion against virt-v2v's ----
# (the comparison of the boot-critical keys: prints a report, exits 1 on a
# boot-critical difference)
_V2V_COMPARE_PY='
import re, sys
kind, cs, v2v_flat, im_flat = sys.argv[1:5]

def load(path):
    keys, vals = {}, {}
    for line in open(path, encoding="utf-8", errors="surrogateescape"):
        k, n, t, d = line.rstrip("\n").split("\t", 3)
        if n == "" and t == "key":
            keys[k.lower()] = k
        else:
            vals.setdefault(k.lower(), {})[n.lower()] = (n, t, d)
    return keys, vals

sides = {"virt-v2v": load(v2v_flat), "imager": load(im_flat)}
problems = []

def show(v):
    return "(absent)" if v is None else "%s %s" % (v[1], v[2])

def same(a, b):
    if a is None or b is None:
        return a is b
    if a[1] != b[1]:
        return False
    if a[1] in ("sz", "expand_sz", "multi_sz"):
        return a[2].lower() == b[2].lower()
    return a[2] == b[2]

# ---- Services\viostor ----
svc = ("\\%s\\Services\\viostor" % cs).lower()
print("%s\\Services\\viostor:" % cs)
for side, (keys, vals) in sides.items():
    if svc not in keys:
        problems.append("%s wrote no %s\\Services\\viostor" % (side, cs))
a = sides["virt-v2v"][1].get(svc, {})
b = sides["imager"][1].get(svc, {})
critical = ("type", "start", "group", "errorcontrol", "imagepath")
for name in sorted(set(a) | set(b), key=lambda n: (n not in critical, n)):
    va, vb = a.get(name), b.get(name)
    shown = (va or vb)[0]
    ok = same(va, vb)
    print("  %-13s virt-v2v: %-40s imager: %-40s %s" % (shown, show(va), show(vb), "same" if ok else "DIFFERS"))
    if not ok and name in critical:
        problems.append("Services\\viostor %s: virt-v2v %s, imager %s" % (shown, show(va), show(vb)))

# ---- PCI bindings ----
PCI = re.compile(r"ven_1af4&dev_(1001|1042)(&|$)")

def val(vals, key, name):
    v = vals.get(key.lower(), {}).get(name.lower())
    return None if v is None else v[2]

def bindings(keys, vals):
    """hardware ID (upper case) -> (service, detail, extra to compare)"""
    out = {}
    if kind == "win7":
        base = ("\\%s\\Control\\CriticalDeviceDatabase\\" % cs).lower()
        for k in keys:
            if not k.startswith(base):
                continue
            child = k[len(base):]
            if "\\" in child or not child.startswith("pci#") or not PCI.match(child[4:]):
                continue
            service = val(vals, k, "Service")
            guid = val(vals, k, "ClassGUID")
            out[child[4:].upper()] = (service, "key %s, ClassGUID=%s" % (keys[k].rsplit("\\", 1)[1], guid),
                                      (guid or "").lower())
    else:
        base = "\\driverdatabase\\deviceids\\pci\\"
        for k in keys:
            if not k.startswith(base):
                continue
            hwid = k[len(base):]
            if "\\" in hwid or not PCI.match(hwid):
                continue
            for name, (shown, t, d) in vals.get(k, {}).items():
                active = val(vals, "\\DriverDatabase\\DriverInfFiles\\" + name, "Active")
                pkg = "\\DriverDatabase\\DriverPackages\\%s" % active
                conf = val(vals, pkg + "\\Descriptors\\PCI\\" + hwid, "Configuration")
                service = val(vals, "%s\\Configurations\\%s" % (pkg, conf), "Service")
                detail = "%s=%s %s -> package %s -> configuration %s" % (shown, t, d, active, conf)
                out[hwid.upper()] = (service, detail, "")
    return out

def hardware_ids(hwid):
    """the IDs Windows tries for the device whose most specific ID is hwid"""
    parts = hwid.split("&")
    ven_dev = parts[:2]
    subsys = [p for p in parts if p.startswith("SUBSYS_")]
    rev = [p for p in parts if p.startswith("REV_")]
    ids = ["&".join(ven_dev + subsys + rev), "&".join(ven_dev + subsys),
           "&".join(ven_dev + rev), "&".join(ven_dev)]
    return list(dict.fromkeys(ids))

bv = bindings(*sides["virt-v2v"])
bi = bindings(*sides["imager"])
where = "%s\\Control\\CriticalDeviceDatabase" % cs if kind == "win7" else "DriverDatabase"
print("PCI bindings (%s):" % where)
if not bv:
    problems.append("virt-v2v bound no virtio-blk PCI ID (unexpected: is this virt-v2v 2.2.0?)")
matched = set()
for hwid in sorted(bv):
    service, detail, extra = bv[hwid]
    print("  %s" % hwid)
    print("    virt-v2v: %s (%s)" % (service, detail))
    hit = None
    for cand in hardware_ids(hwid):
        if cand in bi:
            hit = cand
            break
    if hit is None:
        print("    imager:   (not bound by this ID nor a less specific one)   DIFFERS")
        problems.append("%s: virt-v2v binds it to %s, imager does not bind it" % (hwid, service))
        continue
    matched.add(hit)
    iservice, idetail, iextra = bi[hit]
    ok = (iservice or "").lower() == (service or "").lower() and iextra == extra
    print("    imager:   %s via %s (%s)   %s" % (iservice, hit, idetail, "same" if ok else "DIFFERS"))
    if not ok:
        problems.append("%s: virt-v2v binds it to %s (%s), imager to %s via %s (%s)"
                        % (hwid, service, detail, iservice, hit, idetail))
for hwid in sorted(set(bi) - matched):
    print("  %s\n    virt-v2v: (not bound)\n    imager:   %s (%s)   imager only" % (hwid, bi[hwid][0], bi[hwid][1]))

for p in problems:
    print("PROBLEM: " + p)
sys.exit(1 if problems else 0)
'

# _v2v_viostor_md5 X: the md5 of /Windows/System32/drivers/viostor.sys in
# the extract X (any case), empty when absent.
_v2v_viostor_md5() {
	awk 'tolower($2) == "/windows/system32/drivers/viostor.sys" { print $1 }' "$1/sums.txt"
}

v2v_compare() { # KIND CS IMAGER BEFORE TREE
	local kind=$1 cs=$2 im=$3 before=$4 tree=$5 os=w10 side hive bad=0 want got v2v
	[ "$kind" = win7 ] && os=w7
	v2v=$T/.v2v-compare-$kind
	local -A dirs=([virt-v2v]=$v2v [imager]=$im)
	note "comparing with $($V2V --version 2>/dev/null | head -n 1) (its conversion from the cache)"
	v2v_extract "$kind" "$v2v"
	v2v_show_log "$v2v/v2v.log"
	note "what each changed (for reference):"
	for side in virt-v2v imager; do
		for hive in SYSTEM SOFTWARE; do
			note "$side, $hive:"
			reg_diff "$before/$hive" "${dirs[$side]}/$hive" | sed 's/^/     /'
		done
	done
	note "files only virt-v2v added:"
	LC_ALL=C comm -23 "$v2v/files.txt" "$im/files.txt" | sed 's/^/     /'
	note "files only imager added:"
	LC_ALL=C comm -13 "$v2v/files.txt" "$im/files.txt" | sed 's/^/     /'
	note "boot-critical keys, virt-v2v against imager (current set $cs):"
	reg_flat "$v2v/SYSTEM" >"$v2v.flat"
	reg_flat "$im/SYSTEM" >"$im.flat"
	python3 -c "$_V2V_COMPARE_PY" "$kind" "$cs" "$v2v.flat" "$im.flat" | sed 's/^/   /' || bad=1
	note "viostor.sys:"
	# (md5 -> the tree's path of each placeholder, to name the file that landed)
	(cd "$tree" && find . -type f -exec md5sum {} + | sed 's|  \./|  |') >"$v2v.tree"
	want=$(md5sum <"$tree/viostor/$os/amd64/viostor.sys" | cut -d' ' -f1)
	for side in virt-v2v imager; do
		got=$(_v2v_viostor_md5 "${dirs[$side]}")
		if [ -z "$got" ]; then
			note "$side: no /Windows/System32/drivers/viostor.sys   PROBLEM"
			bad=1
		else
			note "$side: /Windows/System32/drivers/viostor.sys is the tree's $(awk -v m="$got" '$1 == m { print $2 }' "$v2v.tree" | head -n 1)"
		fi
	done
	[ "$(_v2v_viostor_md5 "$v2v")" = "$want" ] ||
		note "virt-v2v did not install viostor/$os/amd64/viostor.sys (unexpected)"
	if [ "$(_v2v_viostor_md5 "$im")" != "$(_v2v_viostor_md5 "$v2v")" ]; then
		note "PROBLEM: imager's viostor.sys is not virt-v2v's"
		bad=1
	fi
	rm -rf "$v2v" "$v2v.flat" "$v2v.tree" "$im.flat"
	return "$bad"
}
