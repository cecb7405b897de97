# imager serve in the background for the serve suite (tests/ts/serve).
# Needs common.sh and vdisk.sh.  SOCK: the socket (set before sourcing);
# URI its NBD URI; serve.out and serve.err in $T hold the server's output.
URI=$(nbd_uri "$SOCK")
SERVER=
# serve ARGS...: imager serve in the background on $SOCK, up when it answers.
serve() {
	"$IMAGER" serve "$@" --socket "$SOCK" >"$T/serve.out" 2>"$T/serve.err" &
	SERVER=$!
	on_exit_kill "$SERVER"
	local i
	for ((i = 0; i < 100; i++)); do
		nbd_alive "$SOCK" && { note "serving $* (pid $SERVER)"; return 0; }
		kill -0 "$SERVER" 2>/dev/null || break
		sleep 0.1
	done
	cat "$T/serve.out" "$T/serve.err"
	fail "imager serve $* did not answer on $SOCK"
}
# range SOURCE OFF LEN OUT: LEN bytes at OFF (512-byte multiples) of SOURCE
# (the export's URI or a raw file) into OUT.
range() {
	rm -f "$4"
	qemu-img dd -f raw -O raw bs=512 skip=$(($2 / 512)) count=$(($3 / 512)) if="$1" of="$4"
}
# unserve: stop it; it must be gone and the socket silent.
unserve() {
	[ -n "$SERVER" ] || return 0
	kill "$SERVER" 2>/dev/null
	wait "$SERVER" 2>/dev/null
	! nbd_alive "$SOCK" || fail "the server still answers after being stopped"
	SERVER=
}
