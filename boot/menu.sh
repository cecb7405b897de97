#!/bin/sh
# The live medium's menu, for a person at the console (no imager.run):
# save disks into a repository, a shell, power off.  dialog draws it.
RUN=/run/imager
LOG=/var/log/imager-live.log
D="dialog --backtitle imager-live"
is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

repo_mount() { # ask for a repository when none is mounted
	is_mounted /images && return 0
	uri=$($D --stdout --inputbox "Repository for the image folders:\n  dev:/dev/sdb1  dev:LABEL=IMAGES  ssh://user@host/path  nfs://host/export/path" 10 70 "dev:") || return 1
	if ! imager-live --cmdline="imager.repo=$uri" >"$RUN/menu.params" 2>"$RUN/menu.err"; then
		$D --msgbox "$(cat "$RUN/menu.err")" 8 70
		return 1
	fi
	. "$RUN/menu.params"
	case $LIVE_REPO_KIND in
	dev) d=$LIVE_REPO_DEV
		case $d in UUID=* | LABEL=*) d=$(blkid -l -o device -t "$d") ;; esac
		mount "$d" /images >"$RUN/menu.err" 2>&1 ;;
	ssh) key=/etc/imager/id_key
		[ -f "$key" ] || key=$($D --stdout --inputbox "Private key file (on a mounted disk)" 8 70 "/mnt/id_ed25519") || return 1
		sshfs -o "StrictHostKeyChecking=accept-new,UserKnownHostsFile=$RUN/known_hosts,ServerAliveInterval=15,ServerAliveCountMax=4,IdentityFile=$key,port=$LIVE_REPO_PORT,reconnect" \
			"$LIVE_REPO_USER@$LIVE_REPO_HOST:$LIVE_REPO_PATH" /images >"$RUN/menu.err" 2>&1 ;;
	nfs) mount -t nfs4 -o "addr=$LIVE_REPO_HOST" "$LIVE_REPO_HOST:$LIVE_REPO_PATH" /images >"$RUN/menu.err" 2>&1 ;;
	*) echo "use dev:, ssh:// or nfs:// here" >"$RUN/menu.err"; false ;;
	esac || { $D --msgbox "Cannot mount $uri:\n$(tail -n 3 "$RUN/menu.err")" 10 70; return 1; }
}

save_disks() {
	repo_mount || return
	set --
	imager list | awk 'NR > 1 && $1 !~ /^ / && substr($0, 1, 1) != " " { print $1, $2 $3 "_" $4 }' >"$RUN/disks"
	while read -r name desc; do set -- "$@" "$name" "$desc" off; done <"$RUN/disks"
	[ $# -gt 0 ] || { $D --msgbox "No disks found." 6 40; return; }
	disks=$($D --stdout --checklist "Disks to save" 15 60 8 "$@") || return
	name=$($D --stdout --inputbox "Image name (a folder per disk: NAME-DISK)" 8 60 "$(hostname)-$(date +%Y%m%d)") || return
	done_list="" rc_all=0
	for d in $disks; do
		d=$(echo "$d" | tr -d '"')
		clear
		echo "imager save /dev/$d /images/$name-$d"
		imager save "/dev/$d" "/images/$name-$d" 2>&1 | tee -a "$LOG"
		rc=$?
		done_list="$done_list\n  /dev/$d -> $name-$d: exit $rc"
		[ $rc = 0 ] || rc_all=$rc
	done
	$D --msgbox "Done (exit $rc_all):$done_list" 15 70
}

while :; do
	choice=$($D --stdout --no-cancel --menu "imager live: $(imager list | tail -n +2 | grep -vc '^ ') disk(s)" 15 60 6 \
		save "Save disks into a repository" \
		list "List the disks" \
		shell "A shell" \
		poweroff "Power off" \
		reboot "Reboot")
	case $choice in
	save) save_disks ;;
	list) imager list >"$RUN/list" 2>&1; $D --textbox "$RUN/list" 20 78 ;;
	shell) clear; echo "exit returns to the menu"; sh -l ;;
	poweroff) sync; is_mounted /images && umount /images; poweroff -f ;;
	reboot) sync; is_mounted /images && umount /images; reboot -f ;;
	esac
done
