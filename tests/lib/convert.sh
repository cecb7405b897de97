# Helpers for the conversion suites (tests/ts/convert).  Sourced after
# common.sh and guestboot.sh.
#
#   need_guest [VARIANT]  skips unless root with qemu and libguestfs; sets
#                         GUEST to the cached test guest (tests/guest/debian12.sh,
#                         or its variant debian12-VARIANT.sh: uefi, rhel, suse,
#                         luks, bls, vmware),
#                         built by its fixture (tests/ts/fixtures)
#   guest_overlay FILE    a qcow2 overlay of the guest: writes never reach the cache
#   boot_ok IMAGE FORMAT BUS ROOT
#                         boots; fails unless the guest reached its marker with
#                         ROOT as the root device and virtio_net up

need_guest() { # [uefi|rhel|suse|luks|bls|vmware]
	local rc=0
	need_root "to build the test guest (debootstrap, loop devices)"
	need_cmd qemu-system-x86_64 qemu-img jq
	need_guestfs
	GUEST=$(guest_image "$@") || rc=$?
	[ "$rc" = 77 ] && skip "the test guest cannot be built here (see above)"
	[ "$rc" = 0 ] || fail "the test guest could not be built"
	note "test guest: $GUEST"
}

guest_overlay() {
	qemu-img create -q -f qcow2 -b "$GUEST" -F qcow2 "$1" || fail "qemu-img create $1"
}

boot_ok() { # IMAGE FORMAT BUS ROOT
	local log=$T/boot-$3.log root net virtio
	step "boot on $3 (TCG)"
	# (a boot stalled until the limit is booted once more by guest_boot:
	# a broken conversion fails both)
	guest_boot "$1" "$2" "$3" "$log" 420 || fail "the guest did not reach userspace on $3"
	root=$(guest_marker_field "$log" root)
	net=$(guest_marker_field "$log" net)
	virtio=$(guest_marker_field "$log" virtio)
	note "root=$root net=$net virtio=$virtio (${GUEST_BOOT_SECONDS:-?} s)"
	[ "$root" = "$4" ] || fail "root device is $root, expected $4"
	case ",$virtio," in *,virtio_net,*) ;; *) fail "virtio_net is not loaded" ;; esac
	[ -n "$net" ] || fail "no network interface came up"
}
