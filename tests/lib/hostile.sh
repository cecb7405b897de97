# The hostile-case harness: a filesystem image damaged on purpose, then
# saved.  imager must never crash or hang: it refuses with a message (exit
# 2, 3, 5 or 7) or saves, and then the image verifies and restores.  Used
# by fs/exfat-hostile, fs/ntfs-hostile, fs/xfs-hostile, fs/f2fs-hostile,
# fs/btrfs (its damaged headers) and damage/hostile-superblock.  Sourced
# after common.sh and disks.sh.
#
#   hostile_try BASE WHAT COMMANDS...
#       case n (n counts the cases; COMMANDS may use it as a seed): a copy
#       of the file BASE, $f in COMMANDS, damaged by COMMANDS (eval'd),
#       then saved into $T/image$n under a 60 s timeout.
#         exit 0: hostile_saved $f when the script defines it, else
#                 hostile_check_saved $f;
#         exit 2, 3, 5 or 7: the refusal names the partition and the
#                 plugin that refused ("imager save: partition 0: PLUGIN:
#                 ...", PLUGIN matching the extended regex $HOSTILE_FS,
#                 any name when unset), exit 5 (the filesystem needs its
#                 fsck) also says to "use --force to copy it as it is";
#                 no manifest is left; then hostile_refused $f RC when
#                 the script defines it;
#         anything else (a crash, a hang, exit 1, 4, 6, 8...): the case fails.
#       Each case runs in a subshell: every case runs, the failed ones are
#       collected in failed[] (named "${HOSTILE_PREFIX:-case }$n: WHAT"),
#       and its files ($T/case$n.img, image$n, forced$n, restored$n.img)
#       are removed afterwards.
#   hostile_check_saved F
#       the default check of a saved case: the manifest has partitions
#       (else "$HOSTILE_DATA was dropped"; not checked when
#       HOSTILE_NO_PARTITIONS_OK=1), the image verifies and restores to
#       $T/restored$n.img, a raw copy to F's very bytes; for another
#       plugin, hostile_same F PLUGIN when the script defines it.
#   hostile_done WHAT
#       the end: fails naming every failed case, else notes "N WHAT".

n=0
failed=()
hostile_try() {
	local base=$1 what=$2 label
	shift 2
	n=$((n + 1))
	label="${HOSTILE_PREFIX:-case }$n: $what"
	step "$label"
	(_hostile_case "$base" "$@") || failed+=("$label")
	rm -rf "$T/case$n.img" "$T/image$n" "$T/forced$n" "$T/restored$n.img"
}
_hostile_case() {
	local base=$1 f=$T/case$n.img rc
	shift
	cp --sparse=always "$base" "$f" || fail "could not copy $base"
	eval "$*" || fail "could not damage $f"
	rc=0
	timeout 60 "$IMAGER" save "$f" "$T/image$n" --no-progress >"$T/out" 2>"$T/err" || rc=$?
	_show_outputs
	[ "$rc" != 124 ] || fail "save hung (killed after 60 s)"
	_check_no_crash "$rc" "save of case $n"
	case $rc in
	0)
		if declare -F hostile_saved >/dev/null; then
			hostile_saved "$f"
		else
			hostile_check_saved "$f"
		fi
		;;
	2 | 3 | 5 | 7)
		if [ "$rc" = 5 ]; then
			expect_message "^imager save: partition 0: (${HOSTILE_FS:-[a-z0-9]+}): .*use --force to copy it as it is"
		else
			expect_message "^imager save: partition 0: (${HOSTILE_FS:-[a-z0-9]+}): "
		fi
		assert_file_absent "$T/image$n/manifest.json" "a refused save left a manifest"
		note "refused with exit $rc"
		if declare -F hostile_refused >/dev/null; then
			hostile_refused "$f" "$rc"
		fi
		;;
	*) fail "save of case $n: exit $rc" ;;
	esac
}
hostile_check_saved() {
	local f=$1 plugin data=${HOSTILE_DATA:-"the filesystem's data"}
	plugin=$(jq -r '[.partitions[].plugin] | join(",")' "$T/image$n/manifest.json")
	note "saved (plugin $plugin)"
	# A broken filesystem is still data: saving nothing of it is a loss.
	[ -n "$plugin" ] || [ "${HOSTILE_NO_PARTITIONS_OK:-0}" = 1 ] ||
		fail "saved as a disk without partitions: $data was dropped"
	imager_ok verify "$T/image$n"
	restore_image "$T/image$n" "$T/restored$n.img"
	if [ "$plugin" = raw ]; then
		cmp "$f" "$T/restored$n.img" || fail "a raw copy did not restore the same bytes"
	elif declare -F hostile_same >/dev/null; then
		hostile_same "$f" "$plugin"
	fi
}
hostile_done() {
	[ ${#failed[@]} = 0 ] || { printf '%s\n' "${failed[@]}"; fail "${#failed[@]} of $n hostile cases failed"; }
	note "$n $1"
}
