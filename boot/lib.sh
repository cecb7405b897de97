# The live medium's shared shell functions (boot/init and boot/menu.sh
# source it): finding and mounting the repository, the ssh key, and P2V
# straight to a server.  They read the LIVE_* variables imager-live sets
# (include/imager/live.h), write their reasons on stderr and return
# non-zero; the caller says what happens next.  RUN and LOG come from the
# caller; LIVE_OUT is where a job's output goes besides job.out (default:
# stdout), net_wait may be defined by the caller (the network comes up in
# the background).
: "${RUN:=/run/imager}" "${LOG:=/var/log/imager-live.log}" "${LIVE_OUT:=cat}"
command -v net_wait >/dev/null 2>&1 || net_wait() { :; }

# ---- the repository at /images ----
find_dev() { # SPEC: /dev/X, UUID=..., LABEL=... -> the device, waiting up to 10 s
	for i in $(seq 10); do
		case $1 in
		/dev/*) [ -b "$1" ] && { echo "$1"; return 0; } ;;
		*) d=$(blkid -l -o device -t "$1" 2>/dev/null) && [ -n "$d" ] && { echo "$d"; return 0; } ;;
		esac
		sleep 1
	done
	return 1
}
mount_dev() { # DEVICE DIR ro|rw: with the type blkid reads (busybox's own guess fails on vfat)
	t=$(blkid -o value -s TYPE "$1" 2>/dev/null)
	[ -n "$t" ] || { echo "$1: no filesystem found" >&2; return 1; }
	modprobe -q "$t"
	mount -t "$t" -o "$3" "$1" "$2"
}
key_file() { # NAME: imager.key's file copied to $RUN/NAME (mode 600); its path
	d=$(find_dev "$LIVE_KEY_DEV") || { echo "imager.key: no device $LIVE_KEY_DEV" >&2; return 1; }
	mkdir -p /mnt/key
	mount_dev "$d" /mnt/key ro || { echo "imager.key: cannot mount $d" >&2; return 1; }
	rm -f "$RUN/$1"
	(umask 077; cp "/mnt/key$LIVE_KEY_PATH" "$RUN/$1") 2>/dev/null
	umount /mnt/key
	[ -s "$RUN/$1" ] || { echo "imager.key: no file $LIVE_KEY_PATH on $d" >&2; return 1; }
	echo "$RUN/$1"
}
ssh_key() { # the key for ssh: imager.key, or the one baked in
	if [ -n "$LIVE_KEY_DEV" ]; then
		key_file id_key
	elif [ -f /etc/imager/id_key ]; then
		echo /etc/imager/id_key
	else
		echo "no ssh key: give imager.key=dev:DEVICE:/PATH or build with make boot SSH_KEY=FILE" >&2
		return 1
	fi
}
smb_opts() { # ADDRESS -> the kernel's cifs options: the user of the URI, the
	# credentials file of imager.key (username=, password=, domain=, as
	# mount.cifs reads them), or a guest login.  Commas in a value are
	# doubled, as the kernel's option parser wants.
	u=$LIVE_REPO_USER pw=${LIVE_REPO_PASSWORD:-} dom=
	if [ -n "$LIVE_KEY_DEV" ]; then
		f=$(key_file smb.cred) || return 1
		while IFS= read -r l || [ -n "$l" ]; do
			l=${l%"$(printf '\r')"}
			case $l in
			username=* | user=*) [ -n "$LIVE_REPO_USER" ] || u=${l#*=} ;;
			password=* | pass=*) pw=${l#*=} ;;
			domain=* | dom=*) dom=${l#*=} ;;
			esac
		done <"$f"
		rm -f "$f"
		[ -n "$u" ] || { echo "imager.key: the credentials file names no username=" >&2; return 1; }
	fi
	o="ip=$1,unc=//$LIVE_REPO_HOST/$LIVE_REPO_SHARE${LIVE_REPO_PORT:+,port=$LIVE_REPO_PORT}"
	if [ -z "$u" ]; then echo "$o,guest"; return 0; fi
	esc() { printf '%s' "$1" | sed 's/,/,,/g'; }
	echo "$o,username=$(esc "$u"),password=$(esc "$pw")${dom:+,domain=$(esc "$dom")}"
}
resolve() { # HOST -> an IPv4 address (the kernel's nfs and cifs take addresses)
	case $1 in *[!0-9.]*) nslookup "$1" 2>/dev/null | awk '/^Address/ && $NF ~ /^[0-9.]+$/ { a = $NF } END { print a }' ;; *) echo "$1" ;; esac
}
# SSH options: a stalled network fails the job instead of hanging it.
SSH_OPTS="StrictHostKeyChecking=accept-new,UserKnownHostsFile=$RUN/known_hosts,BatchMode=yes,ServerAliveInterval=15,ServerAliveCountMax=4,ConnectTimeout=20"
mount_repo() {
	case $LIVE_REPO_KIND in
	none) return 0 ;;
	dev)
		d=$(find_dev "$LIVE_REPO_DEV") || { echo "no device $LIVE_REPO_DEV"; return 1; }
		mount_dev "$d" /images rw 2>&1 || return 1 ;;
	ssh)
		net_wait
		if [ -n "${LIVE_REPO_PASSWORD:-}" ]; then
			# (the menu's: sshfs reads it on its stdin, never an argument)
			printf '%s\n' "$LIVE_REPO_PASSWORD" | sshfs -o "$(echo "$SSH_OPTS" | sed 's/BatchMode=yes,//'),password_stdin,port=$LIVE_REPO_PORT,reconnect" \
				"$LIVE_REPO_USER@$LIVE_REPO_HOST:$LIVE_REPO_PATH" /images 2>&1 || return 1
		else
			key=$(ssh_key) || return 1
			sshfs -o "$SSH_OPTS,IdentityFile=$key,port=$LIVE_REPO_PORT,reconnect" \
				"$LIVE_REPO_USER@$LIVE_REPO_HOST:$LIVE_REPO_PATH" /images 2>&1 || return 1
		fi ;;
	nfs)
		net_wait
		a=$(resolve "$LIVE_REPO_HOST")
		[ -n "$a" ] || { echo "cannot resolve $LIVE_REPO_HOST"; return 1; }
		modprobe -q nfsv4; modprobe -q nfsv3
		p=${LIVE_REPO_PORT:+,port=$LIVE_REPO_PORT}
		# NFSv4 first; its error is the one to show when v3 fails too
		# (a v4-only server has no portmapper to refuse v3).
		e4=$(mount -t nfs4 -o "addr=$a$p" "$LIVE_REPO_HOST:$LIVE_REPO_PATH" /images 2>&1) ||
			mount -t nfs -o "vers=3,nolock,addr=$a,mountaddr=$a$p" "$LIVE_REPO_HOST:$LIVE_REPO_PATH" /images 2>/dev/null ||
			{ echo "NFSv4: $e4 (NFSv3 failed as well)"; return 1; } ;;
	smb)
		net_wait
		a=$(resolve "$LIVE_REPO_HOST")
		[ -n "$a" ] || { echo "cannot resolve $LIVE_REPO_HOST"; return 1; }
		modprobe -q cifs
		mkdir -p /mnt/share
		o=$(smb_opts "$a") || return 1
		echo "$o" | imager-live --mount cifs "//$LIVE_REPO_HOST/$LIVE_REPO_SHARE" /mnt/share 2>&1 || return 1
		mkdir -p "/mnt/share$LIVE_REPO_PATH" && mount --bind "/mnt/share$LIVE_REPO_PATH" /images || return 1 ;;
	esac
}
repo_desc() {
	case $LIVE_REPO_KIND in
	dev) echo "dev:$LIVE_REPO_DEV" ;;
	nfs) echo "nfs://$LIVE_REPO_HOST${LIVE_REPO_PORT:+:$LIVE_REPO_PORT}$LIVE_REPO_PATH" ;;
	ssh) echo "ssh://$LIVE_REPO_USER@$LIVE_REPO_HOST:$LIVE_REPO_PORT$LIVE_REPO_PATH" ;;
	smb) echo "smb://${LIVE_REPO_USER:+$LIVE_REPO_USER@}$LIVE_REPO_HOST${LIVE_REPO_PORT:+:$LIVE_REPO_PORT}/$LIVE_REPO_SHARE$LIVE_REPO_PATH" ;;
	esac
}
# ---- P2V straight to a server (imager.server) ----
# One ssh connection to the server: each disk is exported read-only by
# nbdkit on a Unix socket here, forwarded to a socket on the server (ssh
# -R), and the server's imager p2v reads them as NBD sources, with this
# machine's facts (imager list --json).  Only used blocks cross the
# network; the conversion and the definition happen on the server.
q() { printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"; }
the_medium() { # DISK: holds the medium itself (the ISO written to a stick)
	blkid -o value -s LABEL "/dev/$1" 2>/dev/null | grep -qx IMAGER_LIVE
}
# server_p2v: the job's output in $RUN/job.out, its exit code in
# $RUN/job.rc (0 returned); 1 with the reason on stderr when it could not
# start.  Sets LIVE_RUN_TEXT.
server_p2v() {
	local auth disks name ssh rdir fwd srcs cmd d p i
	net_wait
	if [ -n "${LIVE_SSH_CTL:-}" ]; then
		auth="-S $LIVE_SSH_CTL"    # the menu's connection, already logged in
	else
		auth="-i $(ssh_key)" || return 1
	fi
	disks=$(echo "$LIVE_DISKS" | tr ',' ' ')
	if [ -z "$disks" ]; then
		for d in $(imager list | awk 'NR > 1 && substr($0, 1, 1) != " " { print $1 }'); do
			the_medium "$d" || disks="$disks $d"
		done
	fi
	[ -n "$(echo $disks)" ] || { echo "no disks to move (imager.disks, or none found)" >&2; return 1; }
	name=$LIVE_NAME
	[ -n "$name" ] || name=p2v-$(cat /sys/class/dmi/id/product_serial 2>/dev/null | tr -cd 'A-Za-z0-9._-' | cut -c1-40)
	[ "$name" != p2v- ] || name=p2v-$(cat /sys/class/net/*/address 2>/dev/null | grep -v '^00:00:00' | head -n 1 | tr -d ':')
	imager list --json >"$RUN/facts.json" || { echo "imager list --json failed" >&2; return 1; }
	ssh="ssh $auth -p $LIVE_SERVER_PORT -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR
		-o UserKnownHostsFile=$RUN/known_hosts -o ServerAliveInterval=15 -o ServerAliveCountMax=4
		-o ConnectTimeout=20 -o ExitOnForwardFailure=yes -o StreamLocalBindUnlink=yes"
	echo "imager-live: P2V of$(printf ' %s' $disks) to $LIVE_SERVER_USER@$LIVE_SERVER_HOST as $name" | $LIVE_OUT
	rdir=$($ssh "$LIVE_SERVER_USER@$LIVE_SERVER_HOST" 'mktemp -d /tmp/imager-p2v.XXXXXX' 2>"$RUN/ssh.err") || {
		echo "ssh to $LIVE_SERVER_USER@$LIVE_SERVER_HOST:$LIVE_SERVER_PORT: $(tail -n 2 "$RUN/ssh.err" | tr '\n' ' ')" >&2
		return 1
	}
	$ssh "$LIVE_SERVER_USER@$LIVE_SERVER_HOST" "cat >$rdir/facts.json" <"$RUN/facts.json" ||
		{ echo "cannot send the facts to the server" >&2; return 1; }
	fwd="" srcs=""
	for d in $disks; do
		[ -b "/dev/$d" ] || { echo "no disk /dev/$d" >&2; return 1; }
		# (a socket left by an earlier P2V from the menu would make bind fail)
		rm -f "$RUN/nbd-$d.sock" "$RUN/nbd-$d.pid"
		nbdkit -r -U "$RUN/nbd-$d.sock" -P "$RUN/nbd-$d.pid" file "/dev/$d" >>"$LOG" 2>&1 ||
			{ echo "nbdkit cannot export /dev/$d" >&2; return 1; }
		fwd="$fwd -R $rdir/$d.sock:$RUN/nbd-$d.sock"
		srcs="$srcs $(q "nbd+unix:///?socket=$rdir/$d.sock")"
	done
	cmd="imager p2v$srcs --facts $rdir/facts.json --name $(q "$name")"
	[ -n "$LIVE_CONNECT" ] && cmd="$cmd --connect $(q "$LIVE_CONNECT")"
	[ -n "$LIVE_POOL" ] && cmd="$cmd --pool $(q "$LIVE_POOL")"
	[ -n "${LIVE_MEMORY:-}" ] && cmd="$cmd --memory $LIVE_MEMORY"
	[ -n "${LIVE_VCPUS:-}" ] && cmd="$cmd --vcpus $LIVE_VCPUS"
	LIVE_RUN_TEXT="p2v$(printf ' %s' $disks) to $LIVE_SERVER_HOST as $name"
	echo "imager-live: on the server: $cmd" | $LIVE_OUT
	# -tt: the server's imager draws its progress for this console.
	{ $ssh -tt $fwd "$LIVE_SERVER_USER@$LIVE_SERVER_HOST" "$cmd; rc=\$?; rm -rf $rdir; exit \$rc" 2>&1
		echo $? >"$RUN/job.rc"; } | tee "$RUN/job.out" | $LIVE_OUT
	for d in $disks; do
		p=$(cat "$RUN/nbd-$d.pid" 2>/dev/null)
		[ -n "$p" ] || continue
		kill "$p" 2>/dev/null
		for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
		rm -f "$RUN/nbd-$d.sock" "$RUN/nbd-$d.pid"
	done
	return 0
}


# ssh_master: one logged-in connection to the server at $RUN/ssh-ctl, which
# every later ssh of the menu's P2V goes through (ssh -S).  With
# IMAGER_SSH_PASSWORD in the environment of this call only, the password
# (ssh asks the askpass program, which reads it from there: never on a
# command line, in a file or in the log); otherwise imager.key's key or
# the one built in.  One try; the reason on stderr.
ssh_master() {
	local auth
	rm -f "$RUN/ssh-ctl"
	if [ -n "${IMAGER_SSH_PASSWORD:-}" ]; then
		auth="-o PubkeyAuthentication=no -o PreferredAuthentications=password,keyboard-interactive -o NumberOfPasswordPrompts=1"
	else
		auth="-i $(ssh_key) -o BatchMode=yes" || return 1
	fi
	net_wait
	SSH_ASKPASS=/usr/share/imager-live/askpass SSH_ASKPASS_REQUIRE=force \
		ssh $auth -M -S "$RUN/ssh-ctl" -f -N -o ControlPersist=yes -p "$LIVE_SERVER_PORT" \
		-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile="$RUN/known_hosts" \
		-o ConnectTimeout=15 -o ServerAliveInterval=15 -o ServerAliveCountMax=4 -o LogLevel=ERROR \
		"$LIVE_SERVER_USER@$LIVE_SERVER_HOST" </dev/null 2>"$RUN/ssh.err" || {
		echo "ssh to $LIVE_SERVER_USER@$LIVE_SERVER_HOST:$LIVE_SERVER_PORT: $(tail -n 2 "$RUN/ssh.err" | tr '\n' ' ')" >&2
		return 1
	}
}
ssh_master_end() {
	[ -S "$RUN/ssh-ctl" ] && ssh -S "$RUN/ssh-ctl" -O exit x 2>/dev/null
	rm -f "$RUN/ssh-ctl"
}
