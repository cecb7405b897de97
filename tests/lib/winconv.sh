# What a Windows conversion must leave on the synthetic disks of windisk.sh,
# written out from the rules (include/imager/convert.h), for the suites in
# tests/ts/windows.  Sourced after common.sh and windisk.sh.
#
#   win_expected_system KIND BLOCK CS   the reg_diff lines the SYSTEM hive must
#                                       show, sorted (KIND win7|win10, BLOCK
#                                       viostor|vioscsi, CS the current set)
#   win_expected_software               the same for SOFTWARE
#   win_check_conversion KIND BLOCK TREE BEFORE AFTER OS
#                                       BEFORE, AFTER: win_extract folders of
#                                       the disk before and after; TREE the
#                                       virtio-win folder the drivers came
#                                       from (iso layout), OS its folder
#                                       expected (w7, w10): fails unless the
#                                       hives differ exactly as expected and
#                                       the files are where the keys say

_wx_pci() { # BLOCK -> "legacy modern"
	case $1 in
	viostor) echo "VEN_1AF4&DEV_1001&SUBSYS_00021AF4&REV_00 VEN_1AF4&DEV_1001&REV_00" \
		"VEN_1AF4&DEV_1042&SUBSYS_11001AF4&REV_01 VEN_1AF4&DEV_1042&REV_01" ;;
	vioscsi) echo "VEN_1AF4&DEV_1004&SUBSYS_00081AF4&REV_00 VEN_1AF4&DEV_1004&REV_00" \
		"VEN_1AF4&DEV_1048&SUBSYS_11001AF4&REV_01 VEN_1AF4&DEV_1048&REV_01" ;;
	esac
}

# The old-platform services each fixture plants (windisk.sh) and their Start.
_wx_old_services() { # KIND
	case $1 in
	win7) printf '%s\n' VMTools:2 vmci:0 vmxnet3ndis6:3 pvscsi:0 xenfilt:0 VBoxService:2 ;;
	win10) printf '%s\n' VMTools:2 vmci:0 vmxnet3ndis6:3 pvscsi:0 xenfilt:0 vmicheartbeat:3 ;;
	esac
}

win_expected_system() { # KIND BLOCK CS
	local kind=$1 blk=$2 cs=$3 id svc inf label conf t
	t=$'\t'
	{
		svc="\\$cs\\Services\\$blk"
		printf '+ %s\n' "$svc$t${t}key$t" "$svc${t}Type${t}dword${t}0x00000001" \
			"$svc${t}Start${t}dword${t}0x00000000" "$svc${t}Group${t}sz${t}SCSI miniport" \
			"$svc${t}ErrorControl${t}dword${t}0x00000001" \
			"$svc${t}ImagePath${t}expand_sz${t}system32\\drivers\\$blk.sys"
		for id in $(_wx_pci "$blk"); do
			if [ "$kind" = win7 ]; then
				local k="\\$cs\\Control\\CriticalDeviceDatabase\\PCI#$id"
				printf '+ %s\n' "$k$t${t}key$t" "$k${t}Service${t}sz${t}$blk" \
					"$k${t}ClassGUID${t}sz${t}{4D36E97B-E325-11CE-BFC1-08002BE10318}"
			else
				inf=imager_$blk.inf label=imager_$blk.inf_tmp conf=imager_${blk}_conf
				printf '+ %s\n' "\\DriverDatabase\\DeviceIds\\PCI\\$id$t${t}key$t" \
					"\\DriverDatabase\\DeviceIds\\PCI\\$id$t$inf${t}binary${t}01,ff,00,00" \
					"\\DriverDatabase\\DriverPackages\\$label\\Descriptors\\PCI\\$id$t${t}key$t" \
					"\\DriverDatabase\\DriverPackages\\$label\\Descriptors\\PCI\\$id${t}Configuration${t}sz$t$conf"
			fi
		done
		if [ "$kind" = win10 ]; then
			local p="\\DriverDatabase\\DriverPackages\\$label" f="\\DriverDatabase\\DriverInfFiles\\$inf"
			printf '+ %s\n' "$f$t${t}key$t" "$f$t@${t}multi_sz$t$label" "$f${t}Active${t}sz$t$label" \
				"$f${t}Configurations${t}multi_sz$t$conf" "$p$t${t}key$t" \
				"$p${t}Version${t}binary${t}00,ff,09,00,00,00,00,00,7b,e9,36,4d,25,e3,ce,11,bf,c1,08,00,2b,e1,03,18,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00,00" \
				"$p\\Configurations$t${t}key$t" "$p\\Configurations\\$conf$t${t}key$t" \
				"$p\\Configurations\\$conf${t}ConfigFlags${t}dword${t}0x00000000" \
				"$p\\Configurations\\$conf${t}Service${t}sz$t$blk" \
				"$p\\Descriptors$t${t}key$t" "$p\\Descriptors\\PCI$t${t}key$t"
		fi
		svc="\\$cs\\Services\\imager-firstboot"
		printf '+ %s\n' "$svc$t${t}key$t" "$svc${t}Type${t}dword${t}0x00000010" \
			"$svc${t}Start${t}dword${t}0x00000002" "$svc${t}ErrorControl${t}dword${t}0x00000000" \
			"$svc${t}ImagePath${t}expand_sz$t%SystemRoot%\\System32\\cmd.exe /c start \"imager-firstboot\" /min %SystemRoot%\\System32\\cmd.exe /c \"%SystemRoot%\\imager-firstboot\\firstboot.cmd\"" \
			"$svc${t}ObjectName${t}sz${t}LocalSystem" "$svc${t}DisplayName${t}sz${t}imager first boot" \
			"$svc${t}Description${t}sz${t}Installs the virtio drivers once, then removes itself"
		local s
		while IFS=: read -r s start; do
			printf -- '- %s\n' "\\$cs\\Services\\$s${t}Start${t}dword${t}0x0000000$start"
			printf '+ %s\n' "\\$cs\\Services\\$s${t}Start${t}dword${t}0x00000004"
		done < <(_wx_old_services "$kind")
		# xenfilt leaves the class filter lists it was in
		local disk="\\$cs\\Control\\Class\\{4d36e967-e325-11ce-bfc1-08002be10318}"
		printf -- '- %s\n' "$disk${t}UpperFilters${t}multi_sz${t}PartMgr|xenfilt"
		printf '+ %s\n' "$disk${t}UpperFilters${t}multi_sz${t}PartMgr"
		if [ "$kind" = win10 ]; then
			local sys="\\$cs\\Control\\Class\\{4d36e97d-e325-11ce-bfc1-08002be10318}"
			printf -- '- %s\n' "$sys${t}UpperFilters${t}multi_sz${t}xenfilt"
			printf '+ %s\n' "$sys${t}UpperFilters${t}multi_sz$t"
		fi
	} | LC_ALL=C sort
}

win_expected_software() {
	local t=$'\t' k='\Microsoft\Windows\CurrentVersion'
	{
		printf -- '- %s\n' "$k${t}DevicePath${t}expand_sz$t%SystemRoot%\\inf"
		printf '+ %s\n' "$k${t}DevicePath${t}expand_sz$t%SystemRoot%\\inf;%SystemRoot%\\Drivers\\VirtIO"
	} | LC_ALL=C sort
}

# Compare two sorted line sets; print every difference.
_wx_same() { # WHAT EXPECTED-FILE ACTUAL-FILE
	if ! diff -u "$2" "$3" >"$T/wx.diff"; then
		note "$1: expected (-) against found (+):"
		sed -n '3,$p' "$T/wx.diff" | sed 's/^/     /'
		fail "$1 does not hold exactly the expected changes"
	fi
}

# md5 of a file in a win_extract folder's sums.txt
_wx_sum() { # DIR PATH
	awk -v p="$2" '{ f = $0; sub(/^[0-9a-f]+  /, "", f); if (f == p) print $1 }' "$1/sums.txt"
}

win_check_conversion() { # KIND BLOCK TREE BEFORE AFTER OS
	local kind=$1 blk=$2 tree=$3 before=$4 after=$5 os=$6 cs f want got
	cs=$(case $kind in win7) echo ControlSet002 ;; win10) echo ControlSet001 ;; esac)
	step "registry ($kind, $blk): exactly the expected keys and values"
	win_expected_system "$kind" "$blk" "$cs" >"$T/want.system"
	reg_diff "$before/SYSTEM" "$after/SYSTEM" | LC_ALL=C sort >"$T/got.system"
	_wx_same "SYSTEM" "$T/want.system" "$T/got.system"
	note "SYSTEM: $(wc -l <"$T/got.system") changed lines, as expected"
	win_expected_software >"$T/want.software"
	reg_diff "$before/SOFTWARE" "$after/SOFTWARE" | LC_ALL=C sort >"$T/got.software"
	_wx_same "SOFTWARE" "$T/want.software" "$T/got.software"

	step "files: where the keys say, from the right folder of virtio-win"
	# The boot driver: ImagePath system32\drivers\BLOCK.sys, the w7/w10 amd64 build.
	want=$(md5sum <"$tree/$blk/$os/amd64/$blk.sys" | cut -d' ' -f1)
	got=$(_wx_sum "$after" "/Windows/System32/drivers/$blk.sys")
	[ -n "$got" ] || fail "/Windows/System32/drivers/$blk.sys is missing"
	[ "$got" = "$want" ] || fail "/Windows/System32/drivers/$blk.sys is not $blk/$os/amd64/$blk.sys"
	# DevicePath's folder: every driver package of that folder, no debug symbols.
	local drv base ext
	for drv in viostor vioscsi NetKVM Balloon vioserial viorng qxldod pvpanic; do
		base=${drv,,}
		[ "$drv" = vioserial ] && base=vioser
		for ext in sys inf cat; do
			want=$(md5sum <"$tree/$drv/$os/amd64/$base.$ext" | cut -d' ' -f1)
			got=$(_wx_sum "$after" "/Windows/Drivers/VirtIO/$base.$ext")
			[ "$got" = "$want" ] || fail "/Windows/Drivers/VirtIO/$base.$ext is missing or not $drv/$os/amd64's"
		done
	done
	grep -q '\.pdb$' "$after/files.txt" && fail "debug symbols (.pdb) were copied"
	# The first boot: the script the service runs, and the agent it installs.
	for f in /Windows/imager-firstboot/firstboot.cmd /Windows/imager-firstboot/qemu-ga-x86_64.msi; do
		grep -qxF "$f" "$after/files.txt" || fail "$f is missing"
	done
	want=$(md5sum <"$tree/guest-agent/qemu-ga-x86_64.msi" | cut -d' ' -f1)
	[ "$(_wx_sum "$after" /Windows/imager-firstboot/qemu-ga-x86_64.msi)" = "$want" ] ||
		fail "the guest agent installer is not virtio-win's x86_64 one"
	# Nothing else appeared or went away.
	comm -13 "$before/files.txt" "$after/files.txt" >"$T/added"
	{
		printf '%s\n' /Windows/Drivers /Windows/Drivers/VirtIO "/Windows/System32/drivers/$blk.sys" \
			/Windows/imager-firstboot /Windows/imager-firstboot/firstboot.cmd \
			/Windows/imager-firstboot/qemu-ga-x86_64.msi
		for drv in viostor vioscsi netkvm balloon vioser viorng qxldod pvpanic; do
			printf '/Windows/Drivers/VirtIO/%s\n' "$drv.sys" "$drv.inf" "$drv.cat"
		done
	} | LC_ALL=C sort >"$T/added.want"
	_wx_same "files added" "$T/added.want" "$T/added"
	[ -z "$(comm -23 "$before/files.txt" "$after/files.txt")" ] || fail "files disappeared"
	# Files that were there keep their content (hives aside: not in sums).
	join -j 2 <(awk '{ f = $0; sub(/^[0-9a-f]+  /, "", f); print $1, f }' "$before/sums.txt" | sort -k2) \
		<(awk '{ f = $0; sub(/^[0-9a-f]+  /, "", f); print $1, f }' "$after/sums.txt" | sort -k2) |
		awk '$2 != $3 { print "changed: " $1 }' >"$T/changed"
	[ -s "$T/changed" ] && { cat "$T/changed"; fail "existing files changed"; }

	step "the first-boot script"
	[ -f "$after/firstboot.cmd" ] || fail "firstboot.cmd was not extracted"
	grep -q $'\r$' "$after/firstboot.cmd" || fail "firstboot.cmd has no CRLF line ends"
	tr -d '\r' <"$after/firstboot.cmd" >"$T/fb.txt"
	grep -qF "\"%PNPUTIL%\" -i -a \"%DRV%\\$blk.inf\"" "$T/fb.txt" || fail "the script does not install $blk"
	grep -qF 'for %%f in ("%DRV%\*.inf")' "$T/fb.txt" || fail "the script does not install the other drivers"
	grep -qF 'msiexec.exe /i "%HERE%\qemu-ga-x86_64.msi"' "$T/fb.txt" || fail "no guest agent install"
	grep -qF '/v DevicePath /t REG_EXPAND_SZ /d "%%SystemRoot%%\inf" /f' "$T/fb.txt" ||
		fail "DevicePath is not restored"
	grep -qF 'sc.exe delete imager-firstboot' "$T/fb.txt" || fail "the service does not delete itself"
	grep -qF 'rd /s /q "%HERE%"' "$T/fb.txt" || fail "the script does not remove its folder"
	if [ "$kind" = win10 ]; then
		for id in $(_wx_pci "$blk"); do
			grep -qF "DeviceIds\\PCI\\$id\" /v imager_$blk.inf /f" "$T/fb.txt" ||
				fail "the temporary binding of $id is not removed at first boot"
		done
		grep -qF "DriverPackages\\imager_$blk.inf_tmp\" /f" "$T/fb.txt" ||
			fail "the temporary package is not removed at first boot"
	else
		grep -q DriverDatabase "$T/fb.txt" && fail "Windows 7 has no DriverDatabase to clean"
	fi
	note "firstboot.cmd: $(wc -l <"$T/fb.txt") lines"
}
