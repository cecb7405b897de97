# libguestfs in the tests and benches: one decision between KVM and TCG,
# made the way the product makes it, and a bounded time for every libguestfs
# tool a test runs.  Sourced by common.sh (the wrappers) and by tests/run and
# the benches (the decision):
#
#   guestfs_decide        asks the product (`imager appliance --json`: its
#                         KVM probe, cached per host kernel in
#                         /var/cache/imager/accel) once, prints the decision
#                         in one line, and exports it to everything started
#                         afterwards: IMAGER_ACCEL (the product takes it as
#                         given), LIBGUESTFS_BACKEND=direct and, for TCG,
#                         LIBGUESTFS_BACKEND_SETTINGS=force_tcg (the tools
#                         the tests run themselves: guestfish, virt-*).
#                         Under TCG it also exports GUESTFS_QUICK (the
#                         product's quick kernel: vmlinux, modules, version
#                         and cache folder, tab-separated), which the tool
#                         wrappers below pass on as SUPERMIN_KERNEL,
#                         SUPERMIN_MODULES, SUPERMIN_KERNEL_VERSION and
#                         LIBGUESTFS_CACHEDIR, unless a test set one of
#                         those or LIBGUESTFS_PATH itself.
#                         When the appliance cannot start here, it exports
#                         GUESTFS_PROBLEM (what and how to fix it) instead,
#                         which need_guestfs turns into a skip.
#   need_guestfs          skips, with the reason, when the appliance cannot
#                         start here
#   guestfish, virt-*     the libguestfs tools, each run under timeout
#                         (GUESTFS_TOOL_SECONDS, default 600: a launch under
#                         TCG takes ~25 s) so that a hung appliance (KVM on a
#                         host whose guests hang) ends the call, not the run.
#
# Why the tests cannot leave the choice to libguestfs: on this kind of host
# /dev/kvm opens, libguestfs then picks KVM, and a stock kernel hangs under
# it: guestfish never returns.

guestfs_decide() {
	local json accel why problem
	[ -n "${IMAGER_GUESTFS_DECIDED:-}" ] && return 0
	export IMAGER_GUESTFS_DECIDED=1
	export LIBGUESTFS_BACKEND=direct
	# The product's probe may build the appliance first (~1 min on a new
	# machine) and waits up to 45 s for a KVM boot.
	json=$(timeout -k 10 1000 "$IMAGER" appliance --json 2>/dev/null) || true
	accel=$(printf '%s' "$json" | jq -r '.accel.accel // empty' 2>/dev/null)
	why=$(printf '%s' "$json" | jq -r '.accel.why // empty' 2>/dev/null)
	problem=$(printf '%s' "$json" | jq -r 'if .problem then .problem.problem + ". Fix: " + .problem.fix else empty end' 2>/dev/null)
	# The product's quick kernel (guest.h): the libguestfs tools the tests
	# run themselves boot the same appliance (see _guestfs_bounded).
	GUESTFS_QUICK=$(printf '%s' "$json" | jq -r 'if .quick_kernel.on then [.quick_kernel.vmlinux, .quick_kernel.modules, .quick_kernel.version, .quick_kernel.cachedir] | join("\t") else empty end' 2>/dev/null)
	export GUESTFS_QUICK
	case $accel in kvm | tcg) ;; *) accel=tcg why="imager appliance gave no answer: TCG, which always works" ;; esac
	export IMAGER_ACCEL=$accel
	if [ "$accel" = tcg ]; then
		export LIBGUESTFS_BACKEND_SETTINGS=force_tcg
	else
		unset LIBGUESTFS_BACKEND_SETTINGS
	fi
	if [ -n "$problem" ]; then
		export GUESTFS_PROBLEM=$problem
		echo "libguestfs: the appliance cannot start here: $problem"
	else
		unset GUESTFS_PROBLEM
		echo "libguestfs: $accel ($why)"
	fi
}

need_guestfs() {
	[ -z "${GUESTFS_PROBLEM:-}" ] || skip "needs libguestfs's appliance: $GUESTFS_PROBLEM"
}

_guestfs_bounded() {
	local tool=$1 rc=0 k m v c
	local -a quick=()
	shift
	# The quick kernel, unless the test chose an appliance of its own.
	if [ -n "${GUESTFS_QUICK:-}" ] && [ -z "${SUPERMIN_KERNEL:-}${LIBGUESTFS_CACHEDIR:-}${LIBGUESTFS_PATH:-}" ]; then
		IFS=$'\t' read -r k m v c <<<"$GUESTFS_QUICK"
		quick=(env "SUPERMIN_KERNEL=$k" "SUPERMIN_MODULES=$m" "SUPERMIN_KERNEL_VERSION=$v" "LIBGUESTFS_CACHEDIR=$c")
	fi
	timeout -k 10 "${GUESTFS_TOOL_SECONDS:-600}" "${quick[@]}" "$tool" "$@" || rc=$?
	[ "$rc" = 124 ] && echo "$tool: stopped after ${GUESTFS_TOOL_SECONDS:-600} s (a hung appliance?)" >&2
	return "$rc"
}

for _gt in guestfish guestmount virt-cat virt-copy-in virt-copy-out virt-customize virt-df \
	virt-edit virt-filesystems virt-inspector virt-ls virt-make-fs virt-rescue virt-tar-in \
	virt-tar-out virt-v2v virt-v2v-in-place libguestfs-test-tool; do
	eval "$_gt() { _guestfs_bounded $_gt \"\$@\"; }"
done
unset _gt
