#!/bin/sh
# The live medium's menu, for a person at the console (no imager.run or
# imager.server on the boot line), on the console the kernel names last
# (the screen, or a serial console: console=ttyS0).  dialog draws it; what is typed is checked by imager-live
# as if it were a kernel parameter, and the work is done by lib.sh's
# functions and imager, as in unattended mode.  Every job ends on a result
# screen that shows the kernel parameters doing the same job unattended.
# Nothing that overwrites a disk starts before a confirmation naming the
# disk by model, serial and size, with what is on it now.
RUN=/run/imager
LOG=/var/log/imager-live.log
. /usr/share/imager-live/lib.sh
D="dialog --backtitle imager-live --cr-wrap"
# A serial console (the kernel's last console=): plain +-| lines, which
# every terminal program and serial-over-LAN shows.
case $(cat /sys/class/tty/console/active 2>/dev/null) in *ttyS[0-9]) D="$D --ascii-lines" ;; esac
is_mounted() { awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# The choices made so far, as kernel parameters (for the next machine).
# (the boot line's values first: imager.keymap= may be there)
. "$RUN/params"
P_IP="" P_REPO="" P_KEY="" P_KEYMAP=""
[ -n "${LIVE_KEYMAP:-}" ] && P_KEYMAP="imager.keymap=$LIVE_KEYMAP"

# params LINE: check LINE, after the repository chosen so far, as kernel
# parameters and take them (0), or say why not (1).
params() {
	if ! imager-live --cmdline="$P_REPO $P_KEY $1" >"$RUN/menu.params" 2>"$RUN/menu.err"; then
		$D --msgbox "$(sed 's/^imager-live: //' "$RUN/menu.err")" 8 70
		return 1
	fi
	. "$RUN/menu.params"
}
say_log() { echo "imager-live: menu: $*" >>"$LOG"; }

# ---- disks ----
# disk_rows: "NAME SIZE BUS MODEL / SERIAL" for each disk imager lists,
# the medium itself left out.
disk_rows() {
	imager list 2>/dev/null | awk 'NR > 1 && substr($0, 1, 1) != " " {
		d = $1 " " $2 $3 " " $4; m = ""
		for (i = 8; i <= NF; i++) m = m " " $i
		sub(/ \(rotational\)$/, "", m)
		print d m }' | while read -r name rest; do
		the_medium "$name" || echo "$name $rest"
	done
}
disk_desc() { disk_rows | awk -v d="$1" '$1 == d { $1 = ""; sub(/^ /, ""); print }'; }
disk_bytes() { echo $(($(cat "/sys/block/$1/size" 2>/dev/null || echo 0) * 512)); }
disk_contents() { # DISK: what is on it now, a line per filesystem
	for p in "/dev/$1" /dev/"$1"[0-9]* /dev/"$1"p[0-9]*; do
		[ -b "$p" ] || continue
		t=$(blkid -o value -s TYPE "$p" 2>/dev/null)
		[ -n "$t" ] || continue
		l=$(blkid -o value -s LABEL "$p" 2>/dev/null)
		echo "  ${p#/dev/}: $t${l:+ \"$l\"}"
	done | head -n 6
}
# (pick_*: called in $(...), so their messages draw on stderr, the console)
pick_disks() { # TITLE -> the names ticked, space-separated
	title=$1
	set --
	disk_rows >"$RUN/disks"
	while read -r name desc; do set -- "$@" "$name" "$desc" off; done <"$RUN/disks"
	[ $# -gt 0 ] || { $D --msgbox "No disks found." 6 40 >&2; return 1; }
	$D --stdout --checklist "$title" 15 76 8 "$@" | tr -d '"'
}
pick_disk() { # TITLE [EXCEPT] -> one disk's name
	title=$1 except=${2:-}
	set --
	disk_rows >"$RUN/disks"
	while read -r name desc; do [ "$name" = "$except" ] || set -- "$@" "$name" "$desc"; done <"$RUN/disks"
	[ $# -gt 0 ] || { $D --msgbox "No disk to choose." 6 40 >&2; return 1; }
	$D --stdout --menu "$title" 15 76 8 "$@"
}
# confirm DISK WHAT: the last question before DISK is overwritten.
confirm() {
	now=$(disk_contents "$1")
	$D --defaultno --title "Overwrite /dev/$1?" --yesno "$2\n\nTarget: /dev/$1  $(disk_desc "$1")\nNow on it:\n${now:-  no filesystem found}\n\nEverything on /dev/$1 will be overwritten. Go on?" 17 76
}

# ---- a job's run and its result ----
# run_job TITLE PARAMS COMMAND...: the command's output (imager's progress:
# bytes, rate, ETA) on the screen, then the result screen.
run_job() {
	title=$1 kparams=$2
	shift 2
	clear
	echo "imager-live: $title"
	echo "  (imager $*)"
	say_log "$title: imager $*"
	{ imager "$@" 2>&1; echo $? >"$RUN/job.rc"; } | tee "$RUN/job.out" | tee -a "$LOG"
	result "$title" "$(cat "$RUN/job.rc")" "$kparams"
}
# result TITLE RC PARAMS: the job's summary, the kernel parameters that do
# it unattended, and what next.
result() {
	rc=$2
	if [ "$rc" = 0 ]; then word="done"; else word="FAILED (exit $rc)"; fi
	last=$(tr '\r' '\n' <"$RUN/job.out" | grep -v '^[[:space:]]*$' | tail -n 4 | cut -c1-72)
	echo "$3" >"$RUN/menu.kparams"
	say_log "$1: exit $rc; kernel parameters: $3"
	next=$($D --stdout --no-cancel --title "$1: $word" --menu "$last\n\nThe same job unattended (kernel parameters):\n$3" 22 78 3 \
		menu "Back to the menu" off "Power off" reboot "Reboot")
	case $next in
	off) finish poweroff ;;
	reboot) finish reboot ;;
	esac
}
finish() {
	sync
	is_mounted /images && umount /images
	ssh_master_end
	if [ "$1" = poweroff ]; then poweroff -f; else reboot -f; fi
}
kp() { # the parameters chosen so far and ARGS, one line
	echo $P_KEYMAP $P_IP $P_REPO $P_KEY "$@"
}

# ---- network ----
nic_rows() {
	for i in /sys/class/net/*; do
		n=${i##*/}
		[ "$n" = lo ] && continue
		link=down
		[ "$(cat "$i/carrier" 2>/dev/null)" = 1 ] && link=up
		a=$(ip -4 -o addr show dev "$n" 2>/dev/null | awk '{ print $4; exit }')
		echo "$n $(cat "$i/address") link-$link ${a:-no-address}"
	done
}
network() {
	set --
	nic_rows >"$RUN/nics"
	while read -r n desc; do set -- "$@" "$n" "$desc"; done <"$RUN/nics"
	[ $# -gt 0 ] || { $D --msgbox "This machine has no network card the medium knows." 6 60; return; }
	nic=$($D --stdout --menu "Network cards (link state and address now)" 14 76 6 "$@") || return
	how=$($D --stdout --menu "$nic: how to get an address" 10 60 2 \
		dhcp "From a DHCP server (tried again now)" static "A fixed address, gateway and DNS") || return
	ip link set "$nic" up
	case $how in
	dhcp)
		$D --infobox "Asking for an address on $nic..." 3 50
		ip addr flush dev "$nic"
		udhcpc -i "$nic" -n -q -t 5 -T 2 -s /usr/share/imager-live/udhcpc.script >>"$LOG" 2>&1
		P_IP="ip=:::::$nic:dhcp" ;;
	static)
		v=$($D --stdout --form "$nic: a fixed address" 12 60 3 \
			"Address/prefix" 1 1 "" 1 17 20 32 \
			"Gateway" 2 1 "" 2 17 20 32 \
			"DNS server" 3 1 "" 3 17 20 32) || return
		a=$(echo "$v" | sed -n 1p) gw=$(echo "$v" | sed -n 2p) dns=$(echo "$v" | sed -n 3p)
		case $a in */*) ;; *) a=$a/24 ;; esac
		mask=$(ipcalc -m "$a" 2>/dev/null | sed 's/.*=//')
		line="ip=${a%/*}::$gw:$mask::$nic:off${dns:+:$dns}"
		params "$line" || return
		ip addr flush dev "$nic"
		ip addr add "$a" brd + dev "$nic" || { $D --msgbox "Cannot set $a on $nic." 6 50; return; }
		[ -n "$gw" ] && ip route replace default via "$gw" dev "$nic"
		[ -n "$dns" ] && echo "nameserver $dns" >/etc/resolv.conf
		P_IP=$line ;;
	esac
	$D --msgbox "$(nic_rows | sed 's/^/  /')\n\nRoute: $(ip route | awk '/^default/ { print $3; exit }')" 12 70
}

# ---- keyboard ----
keyboard() {
	k=$($D --stdout --menu "The keyboard of this machine's screen (a serial console uses its own)" 15 70 9 \
		us "English (US)" uk "English (UK)" de "German" fr "French" es "Spanish" \
		it "Italian" pt "Portuguese" be "Belgian" ch "Swiss (French)") || return
	loadkmap <"/usr/share/imager-live/keymaps/$k.bmap" || { $D --msgbox "Cannot load the layout $k." 6 50; return; }
	P_KEYMAP="imager.keymap=$k"
	say_log "keyboard layout $k"
}

# ---- the repository at /images ----
repo_dev_rows() { # partitions with a filesystem, not the medium's
	blkid -o device 2>/dev/null | sort | while read -r p; do
		b=${p#/dev/}
		d=$(basename "$(readlink -f "/sys/class/block/$b/..")")
		[ -e "/sys/block/$b" ] && d=$b
		the_medium "$d" && continue
		case $(blkid -o value -s TYPE "$p") in swap | LVM2_member | crypto_LUKS | "") continue ;; esac
		l=$(blkid -o value -s LABEL "$p")
		echo "$p $(blkid -o value -s TYPE "$p")${l:+_\"$l\"}_$(($(cat "/sys/class/block/$b/size") / 2048))MiB_on_$d:$(disk_desc "$d" | tr ' ' '_')"
	done
}
repository() {
	kind=$($D --stdout --menu "Where the image folders are" 12 70 4 \
		local "A disk of this machine" ssh "ssh://user@host[:port]/path (sshfs)" \
		nfs "nfs://host[:port]/export/path" smb "smb://[user@]host[:port]/share/path") || return
	LIVE_REPO_PASSWORD="" key=""
	case $kind in
	local)
		set --
		repo_dev_rows >"$RUN/parts"
		while read -r p desc; do set -- "$@" "$p" "$desc"; done <"$RUN/parts"
		[ $# -gt 0 ] || { $D --msgbox "No filesystem found on this machine's disks." 6 60; return; }
		p=$($D --stdout --menu "The filesystem that holds the images" 14 78 7 "$@") || return
		l=$(blkid -o value -s LABEL "$p") u=$(blkid -o value -s UUID "$p")
		if [ -n "$l" ] && [ "$(blkid -l -o device -t "LABEL=$l")" = "$p" ]; then uri="dev:LABEL=$l"
		elif [ -n "$u" ]; then uri="dev:UUID=$u"
		else uri="dev:$p"; fi ;;
	ssh | nfs | smb)
		uri=$($D --stdout --inputbox "The repository's address" 8 70 "$kind://") || return
		case $kind in
		ssh)
			a=$($D --stdout --menu "How to log in to the repository" 10 70 2 \
				password "A password (asked now, kept in memory only)" \
				key "An ssh key on a disk of this machine") || return
			if [ "$a" = password ]; then
				LIVE_REPO_PASSWORD=$($D --stdout --insecure --passwordbox "Password" 8 50) || return
			else
				key=$($D --stdout --inputbox "The key: dev:DEVICE:/PATH" 8 70 "dev:LABEL=KEYS:/id_ed25519") || return
			fi ;;
		smb)
			LIVE_REPO_PASSWORD=$($D --stdout --insecure --passwordbox "Password of the share's user (empty: a guest login)" 8 60) || return ;;
		esac ;;
	esac
	P_REPO="" P_KEY=""
	params "imager.repo=$uri${key:+ imager.key=$key}" || return
	is_mounted /images && umount /images
	$D --infobox "Mounting $uri..." 3 60
	if ! mount_repo >"$RUN/menu.err" 2>&1; then
		LIVE_REPO_PASSWORD=""
		$D --msgbox "Cannot mount $uri:\n$(tail -n 3 "$RUN/menu.err")" 10 74
		return
	fi
	LIVE_REPO_PASSWORD=""
	P_REPO="imager.repo=$uri" P_KEY="${key:+imager.key=$key}"
	say_log "repository $uri mounted"
	images_screen "Mounted $uri. Image folders found there:"
}
# image_rows: "NAME KIND_DATE_DISKS_SIZE" for each image folder in /images
image_rows() {
	for d in /images/*/; do
		[ -d "$d" ] || continue
		n=${d%/}
		n=${n##*/}
		if [ -f "$d/manifest.json" ]; then
			imager info "$n" >"$RUN/info" 2>/dev/null || continue
			date=$(sed -n 's/.* saved \([0-9-]*\)T.*/\1/p' "$RUN/info" | head -n 1)
			disk=$(sed -n 's/^  disk \([0-9.]* [KMGT]*i*B\).*/\1/p' "$RUN/info" | head -n 1 | tr -d ' ')
			from=$(sed -n 's/.* from \([^ ]*\)$/\1/p' "$RUN/info" | head -n 1)
			desc="imager ${date:-?} ${from##*/}:$disk"
		elif [ -f "$d/disk" ] && [ -f "$d/parts" ]; then
			desc="clonezilla $(date -r "$d/disk" +%Y-%m-%d) $(tr -s ' \n' ',' <"$d/disk" | sed 's/,$//')"
		else
			continue
		fi
		echo "$n $desc $(du -sh "$d" | cut -f1)" | tr ' ' '_' | sed 's/_/ /'
	done
}
images_screen() {
	cd /images || return
	image_rows >"$RUN/images"
	cd /
	if [ -s "$RUN/images" ]; then
		text="NAME  KIND  DATE  DISKS  SIZE\n$(tr '_' ' ' <"$RUN/images" | sed 's/^/  /')"
	else
		text="  (none yet)"
	fi
	$D --msgbox "$1\n\n$text" 18 76
}
repo_ready() { # a mounted repository, or the repository screen first
	is_mounted /images && return 0
	repository
	is_mounted /images
}
pick_image() { # TITLE -> an image folder's name in /images
	title=$1
	cd /images || return 1
	image_rows >"$RUN/images"
	cd /
	set --
	while read -r n desc; do set -- "$@" "$n" "$(echo "$desc" | tr _ ' ')"; done <"$RUN/images"
	[ $# -gt 0 ] || { $D --msgbox "No image folder in the repository." 6 50 >&2; return 1; }
	$D --stdout --menu "$title" 15 78 8 "$@"
}

# ---- the jobs ----
save() {
	repo_ready || return
	disks=$(pick_disks "Disks to save (space ticks one)") || return
	[ -n "$disks" ] || return
	name=$($D --stdout --inputbox "Image name (a folder per disk: NAME-DISK)" 8 60 "$(hostname)-$(date +%Y%m%d)") || return
	for d in $disks; do
		run_job "save /dev/$d into $name-$d" "$(kp "imager.run=\"save /dev/$d /images/$name-$d\"")" \
			save "/dev/$d" "/images/$name-$d"
		[ "$(cat "$RUN/job.rc")" = 0 ] || break
	done
}
# size_opts WHAT_BYTES DISK: OPTS is --shrink when the disk is smaller and
# the person takes it; 1 to stop.  (Not in $(...): dialog draws on stdout.)
size_opts() {
	OPTS=""
	have=$(disk_bytes "$2")
	[ "$1" -gt "$have" ] || return 0
	$D --yesno "/dev/$2 ($((have / 1048576)) MiB) is smaller than the source disk ($(($1 / 1048576)) MiB).\n\nShrink the partitions and their filesystems to fit (--shrink)?\n(refused with the reason when the data does not fit)" 11 70 || return 1
	OPTS=--shrink
}
restore() {
	repo_ready || return
	img=$(pick_image "The image to restore") || return
	target=$(pick_disk "The disk to restore it onto") || return
	cd /images && imager info "$img" >"$RUN/info" 2>&1
	cd /
	bytes=$(sed -n 's/^  disk .*(\([0-9]*\) bytes).*/\1/p' "$RUN/info" | head -n 1)
	size_opts "${bytes:-0}" "$target" || return
	opts=$OPTS
	plan=$(awk '/^  saved / { print "  saved " substr($2, 1, 10) " from " $NF }
		/^  disk / { print "  disk " $2 " " $3 ", table " $NF }' "$RUN/info")
	confirm "$target" "Restore $img:\n$plan, $(grep -c '^  partition' "$RUN/info") partition(s)${opts:+\nwith $opts: the partitions shrunk to fit}" || return
	run_job "restore $img onto /dev/$target" "$(kp "imager.run=\"restore /images/$img /dev/$target${opts:+ $opts}\"")" \
		restore "/images/$img" "/dev/$target" $opts
}
clone() {
	src=$(pick_disk "The disk to copy (the source)") || return
	target=$(pick_disk "The disk to copy /dev/$src onto" "$src") || return
	size_opts "$(disk_bytes "$src")" "$target" || return
	opts=$OPTS
	confirm "$target" "Clone /dev/$src ($(disk_desc "$src")) onto it${opts:+, with $opts}" || return
	run_job "clone /dev/$src onto /dev/$target" "$(kp "imager.run=\"clone /dev/$src /dev/$target${opts:+ $opts}\"")" \
		clone "/dev/$src" "/dev/$target" $opts
}
# A restore of the image a server sends to many machines at once
# (`imager multicast DIR` there); no repository needed here.
multicast() {
	target=$(pick_disk "The disk to restore the multicast image onto") || return
	port=$($D --stdout --inputbox "The sender's port base (imager multicast --portbase; 9000 unless it was changed)" 8 74 9000) || return
	case $port in '' | *[!0-9]*) $D --msgbox "$port: not a port number." 6 50; return ;; esac
	opts=""
	$D --defaultno --yesno "If /dev/$target ($(($(disk_bytes "$target") / 1048576)) MiB) is smaller than the image's disk, shrink the partitions and their filesystems to fit (--shrink)?" 9 70 && opts=--shrink
	confirm "$target" "Restore the image the server sends by multicast (port $port)${opts:+, with $opts}.\nThe restore starts when the sender starts sending." || return
	run_job "multicast restore onto /dev/$target" "$(kp "imager.run=\"restore multicast:$port /dev/$target${opts:+ $opts}\"")" \
		restore "multicast:$port" "/dev/$target" $opts
}
verify() {
	repo_ready || return
	img=$(pick_image "The image to verify") || return
	run_job "verify $img" "$(kp "imager.run=\"verify /images/$img\"")" verify "/images/$img"
}

# ---- P2V to a server ----
p2v() {
	server=$($D --stdout --inputbox "KVM host (imager, libvirt and libguestfs installed):  user@host[:port]" 8 74 "root@") || return
	params "imager.server=$server" || return
	how=$($D --stdout --menu "How to log in to $server" 11 74 3 \
		password "A password (asked now, kept in memory for this connection only)" \
		key "An ssh key on a disk of this machine" \
		builtin "The key built into this medium") || return
	key="" IMAGER_SSH_PASSWORD=""
	case $how in
	password)
		IMAGER_SSH_PASSWORD=$($D --stdout --insecure --passwordbox "Password for $server" 8 60) || return ;;
	key)
		key=$($D --stdout --inputbox "The key: dev:DEVICE:/PATH" 8 70 "dev:LABEL=KEYS:/id_ed25519") || return
		params "imager.server=$server imager.key=$key" || return ;;
	builtin)
		[ -f /etc/imager/id_key ] || { $D --msgbox "This medium has no key built in (make boot SSH_KEY=FILE)." 6 70; return; } ;;
	esac
	$D --infobox "Connecting to $server..." 3 60
	export IMAGER_SSH_PASSWORD
	ssh_master 2>"$RUN/menu.err"
	rc=$?
	IMAGER_SSH_PASSWORD=""
	unset IMAGER_SSH_PASSWORD
	if [ $rc != 0 ]; then
		say_log "P2V: cannot log in to $server"
		$D --title "No connection" --msgbox "Cannot log in to $server:\n\n$(cut -c1-220 "$RUN/menu.err")" 12 76
		return
	fi
	sshs() { ssh -S "$RUN/ssh-ctl" -p "$LIVE_SERVER_PORT" -o LogLevel=ERROR "$LIVE_SERVER_USER@$LIVE_SERVER_HOST" "$@"; }
	# The connection test: the server has imager, libvirt, libguestfs, qemu.
	sshs 'imager -v --version' >"$RUN/versions" 2>&1
	miss=$(for w in imager libvirt libguestfs qemu; do
		grep -q "^$w [0-9]" "$RUN/versions" || echo "  $w"
	done)
	if [ -n "$miss" ]; then
		ssh_master_end
		$D --title "The server is not ready" --msgbox "$server lacks:\n$miss\n\nIt said:\n$(head -n 4 "$RUN/versions" | cut -c1-70)" 14 76
		return
	fi
	$D --title "Connected" --msgbox "$server has:\n\n$(sed 's/^/  /' "$RUN/versions" | cut -c1-72)" 11 76
	disks=$(pick_disks "Disks to move (space ticks one)") || { ssh_master_end; return; }
	[ -n "$disks" ] || { ssh_master_end; return; }
	mem=$(awk '/^MemTotal:/ { print int(($2 + 1048575) / 1048576) "G" }' /proc/meminfo)
	name=$($D --stdout --inputbox "Name of the new VM" 8 60 "$(hostname)") &&
		mem=$($D --stdout --inputbox "Memory of the new VM (4G, 2048M)" 8 60 "$mem") &&
		cpus=$($D --stdout --inputbox "vCPUs of the new VM" 8 60 "$(nproc)") &&
		uri=$($D --stdout --inputbox "libvirt URI on the host (empty: a folder ./NAME there)" 8 70 "qemu:///system") ||
		{ ssh_master_end; return; }
	pool=""
	if [ -n "$uri" ]; then
		$D --infobox "Asking $server for its storage pools..." 3 60
		sshs "imager pools --connect $(q "$uri")" >"$RUN/pools" 2>&1
		set -- auto "The best one (imager pools' first)"
		while read -r rank p rest; do
			set -- "$@" "$p" "rank $rank: $(echo $rest | cut -c1-50)"
		done <<EOF
$(awk '$1 ~ /^[0-9]+$/ { print }' "$RUN/pools")
EOF
		pool=$($D --stdout --menu "Storage pool on $server (ranked by imager pools)" 14 76 6 "$@") ||
			{ ssh_master_end; return; }
		[ "$pool" = auto ] && pool=""
	fi
	line="imager.server=$server${key:+ imager.key=$key} imager.name=$name imager.disks=$(echo $disks | tr ' ' ',') imager.memory=$mem imager.vcpus=$cpus${uri:+ imager.connect=$uri}${pool:+ imager.pool=$pool}"
	params "$line" || { ssh_master_end; return; }
	$D --defaultno --yesno "Move $disks to $server as the VM $name ($mem, $cpus vCPUs)${uri:+ on $uri}${pool:+, pool $pool}?\n\nThe disks here are only read." 9 76 ||
		{ ssh_master_end; return; }
	clear
	LIVE_SSH_CTL=$RUN/ssh-ctl
	if ! server_p2v 2>"$RUN/menu.err"; then
		LIVE_SSH_CTL=""
		ssh_master_end
		cp "$RUN/menu.err" "$RUN/job.out"
		result "P2V to $server" 1 "$(kp "$line")"
		return
	fi
	LIVE_SSH_CTL=""
	ssh_master_end
	[ "$how" = password ] && line="$line imager.key=dev:DEVICE:/PATH (a key instead of the password)"
	result "P2V of $disks to $server as $name" "$(cat "$RUN/job.rc")" "$(kp "$line")"
}

while :; do
	repo="none"
	is_mounted /images && repo=$(repo_desc)
	addr=$(ip -4 -o addr show 2>/dev/null | awk '$2 != "lo" { print $4; exit }')
	choice=$($D --stdout --no-cancel --menu "imager live: $(disk_rows | wc -l) disk(s), network ${addr:-none}, repository $repo" 20 72 12 \
		network "Network: addresses, DHCP or a fixed address" \
		images "Repository: where image folders are, and what is there" \
		save "Save disks into the repository" \
		restore "Restore an image onto a disk" \
		multicast "Multicast: restore what a server sends to many machines" \
		clone "Clone a disk onto another" \
		verify "Verify an image in the repository" \
		p2v "P2V: move disks to a KVM host" \
		keyboard "Keyboard layout" \
		list "List the disks" \
		zshell "A shell" \
		off "Power off or reboot")
	# (tags with different first letters: each is its own hotkey)
	case $choice in
	network) network ;;
	images)
		if is_mounted /images; then
			a=$($D --stdout --menu "Repository $(repo_desc)" 9 60 2 list "The image folders in it" other "Another repository") || continue
			if [ "$a" = list ]; then images_screen "$(repo_desc):"; else repository; fi
		else
			repository
		fi ;;
	save) save ;;
	restore) restore ;;
	multicast) multicast ;;
	clone) clone ;;
	verify) verify ;;
	p2v) p2v ;;
	keyboard) keyboard ;;
	list) imager list >"$RUN/list" 2>&1; $D --textbox "$RUN/list" 20 78 ;;
	zshell) clear; echo "exit returns to the menu"; sh -l ;;
	off)
		a=$($D --stdout --menu "End" 9 40 2 poweroff "Power off" reboot "Reboot") || continue
		finish "$a" ;;
	esac
done
