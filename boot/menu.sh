#!/bin/sh
# The live medium's menu, for a person at the console (no imager.run):
# save disks into a repository, P2V straight to a server, the disk list, a
# shell, power off.  dialog draws it; what is typed is checked by
# imager-live as if it were a kernel parameter, and the work is done by
# lib.sh's functions, the same ones the unattended mode uses.
RUN=/run/imager
LOG=/var/log/imager-live.log
. /usr/share/imager-live/lib.sh
D="dialog --backtitle imager-live"
is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# params LINE: check LINE as kernel parameters and take them (0), or say
# why not (1).
params() {
	if ! imager-live --cmdline="$1" >"$RUN/menu.params" 2>"$RUN/menu.err"; then
		$D --msgbox "$(sed 's/^imager-live: //' "$RUN/menu.err")" 8 70
		return 1
	fi
	. "$RUN/menu.params"
}

# The disks to work on: a checklist of what imager list shows.
pick_disks() { # TITLE -> the names, space-separated, on stdout
	title=$1
	set --
	imager list | awk 'NR > 1 && substr($0, 1, 1) != " " { print $1, $2 $3 "_" $4 }' >"$RUN/disks"
	while read -r name desc; do
		the_medium "$name" || set -- "$@" "$name" "$desc" off
	done <"$RUN/disks"
	[ $# -gt 0 ] || { $D --msgbox "No disks found." 6 40; return 1; }
	$D --stdout --checklist "$title" 15 60 8 "$@" | tr -d '"'
}

repo_mount() { # ask for a repository when none is mounted
	is_mounted /images && return 0
	uri=$($D --stdout --inputbox "Repository for the image folders:\n  dev:/dev/sdb1  dev:LABEL=IMAGES  ssh://user@host/path  nfs://host/export/path\n(ssh needs a key: imager.key on the boot line, or one built in)" 11 74 "dev:") || return 1
	params "imager.repo=$uri $(cat /proc/cmdline | tr ' ' '\n' | grep '^imager\.key=')" || return 1
	mount_repo >"$RUN/menu.err" 2>&1 ||
		{ $D --msgbox "Cannot mount $uri:\n$(tail -n 3 "$RUN/menu.err")" 10 70; return 1; }
}

save_disks() {
	repo_mount || return
	disks=$(pick_disks "Disks to save") || return
	[ -n "$disks" ] || return
	name=$($D --stdout --inputbox "Image name (a folder per disk: NAME-DISK)" 8 60 "$(hostname)-$(date +%Y%m%d)") || return
	done_list="" rc_all=0
	for d in $disks; do
		clear
		echo "imager save /dev/$d /images/$name-$d"
		{ imager save "/dev/$d" "/images/$name-$d"; echo $? >"$RUN/menu.rc"; } 2>&1 | tee -a "$LOG"
		rc=$(cat "$RUN/menu.rc")
		done_list="$done_list\n  /dev/$d -> $name-$d: exit $rc"
		[ "$rc" = 0 ] || rc_all=$rc
	done
	$D --msgbox "Saved (exit $rc_all):$done_list" 15 70
}

p2v_server() {
	server=$($D --stdout --inputbox "KVM host (imager, libguestfs and libvirt installed):  user@host[:port]" 8 70 "root@") || return
	key=""
	[ -f /etc/imager/id_key ] ||
		key=$($D --stdout --inputbox "ssh key on a disk of this machine:  dev:DEVICE:/PATH" 8 70 "dev:LABEL=KEYS:/id_ed25519") || return
	disks=$(pick_disks "Disks to move") || return
	[ -n "$disks" ] || return
	name=$($D --stdout --inputbox "Name of the new machine" 8 60 "$(hostname)") || return
	connect=$($D --stdout --inputbox "libvirt URI on the host (empty: a folder ./NAME there)" 8 70 "qemu:///system") || return
	pool=$($D --stdout --inputbox "Storage pool (empty: the best one)" 8 60 "") || return
	params "imager.server=$server imager.name=$name imager.disks=$(echo $disks | tr ' ' ',')${key:+ imager.key=$key}${connect:+ imager.connect=$connect}${pool:+ imager.pool=$pool}" || return
	clear
	if ! server_p2v 2>"$RUN/menu.err"; then
		$D --msgbox "P2V did not start:\n$(tail -n 3 "$RUN/menu.err")" 10 70
		return
	fi
	$D --msgbox "P2V of $disks to $LIVE_SERVER_HOST as $name: exit $(cat "$RUN/job.rc")\n\n$(tr '\r' '\n' <"$RUN/job.out" | grep -v '^[[:space:]]*$' | tail -n 3)" 14 74
}

while :; do
	choice=$($D --stdout --no-cancel --menu "imager live: $(imager list | tail -n +2 | grep -vc '^ ') disk(s)" 16 60 7 \
		save "Save disks into a repository" \
		kvm "P2V: move disks to a KVM host" \
		list "List the disks" \
		cmd "A shell" \
		off "Power off" \
		reboot "Reboot")
	# (tags with different first letters: each is its own hotkey)
	case $choice in
	save) save_disks ;;
	kvm) p2v_server ;;
	list) imager list >"$RUN/list" 2>&1; $D --textbox "$RUN/list" 20 78 ;;
	cmd) clear; echo "exit returns to the menu"; sh -l ;;
	off) sync; is_mounted /images && umount /images; poweroff -f ;;
	reboot) sync; is_mounted /images && umount /images; reboot -f ;;
	esac
done
