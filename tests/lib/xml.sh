# XML checks for the VM definition suites.  Sourced after common.sh.
#
#   xp FILE XPATH               prints the string value of XPATH in FILE
#                               (xmllint; the imager: prefix is bound to
#                               imager's metadata namespace)
#   assert_xp FILE XPATH WANT   fails unless the value is WANT
#   valid_domain FILE           fails unless virt-xml-validate accepts FILE
#                               as a libvirt domain
need_cmd xmllint virt-xml-validate

xp() {
	xmllint --nonet --xpath "string($2)" "$1" 2>/dev/null
}
# Namespaced paths go through local-name() (xmllint's shell binds no prefix).
assert_xp() { # FILE XPATH WANT
	local got
	got=$(xp "$1" "$2")
	[ "$got" = "$3" ] || fail "$(basename "$1"): $2 is '$got', expected '$3'"
}
valid_domain() {
	virt-xml-validate "$1" domain >"$T/validate.out" 2>&1 ||
		fail "virt-xml-validate rejects $(basename "$1"): $(cat "$T/validate.out")"
}
