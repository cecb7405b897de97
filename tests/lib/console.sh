# A machine's serial console driven as a person at a terminal would: qemu
# runs inside a tmux window of 80x25 (its own tmux server, one per test),
# keys are typed with send-keys, and the screen is read with capture-pane,
# as the terminal shows it (dialog's curses drawing included).  Sourced
# after common.sh.
#
# console_start NAME QEMU_ARGS...: boots the machine (TCG, -nographic: the
#   serial console is the window; -no-reboot) with everything it writes
#   also in $T/NAME.log; CONSOLE_PID is qemu's.
# console_screen: the screen now, as text.
# console_wait REGEX SECONDS: 0 when the screen shows REGEX (extended,
#   blanks squeezed to one); 1 after SECONDS or when qemu ended.  A moment
#   is left after a match: dialog drops keys typed before it reads.
# console_text: the screen's text as one line, dialog's borders taken
#   away and blanks squeezed (a wrapped line reads whole).
# console_type TEXT: types TEXT (literally); console_key KEY...: tmux key
#   names (Enter, Space, Tab, Down, Up, BTab, C-u...), one second apart.
# console_shot NAME: the screen as text and PNG (tests/lib/screenshot.py)
#   in $SCREENS (build/test-logs/screens/SUITE-TEST/), numbered in order.
# console_ended SECONDS: 0 when qemu ends within SECONDS.
# console_stop: qemu killed, the tmux server ended (also on exit).

CONSOLE_TMUX="tmux -L imager-test-$$"
SCREENS=${IMAGER_TEST_EVIDENCE:-$T}/../screens/${TEST_NAME//\//-}
CONSOLE_SHOTS=0

console_start() {
	local name=$1 q
	shift
	need_cmd tmux
	mkdir -p "$SCREENS"
	SCREENS=$(cd "$SCREENS" && pwd)
	rm -f "$SCREENS"/*
	printf -v q ' %q' qemu-system-x86_64 -accel tcg -nographic -no-reboot -monitor none "$@"
	CONSOLE_LOG=$T/$name.log
	: >"$CONSOLE_LOG"
	$CONSOLE_TMUX -f /dev/null new-session -d -s m -x 80 -y 25 \
		"echo \$\$ >$T/console.pid; exec$q" || fail "tmux cannot start"
	$CONSOLE_TMUX pipe-pane -t m -o "cat >>$CONSOLE_LOG"
	on_exit console_stop
	for _ in $(seq 50); do [ -s "$T/console.pid" ] && break; sleep 0.1; done
	CONSOLE_PID=$(cat "$T/console.pid")
}
console_screen() { $CONSOLE_TMUX capture-pane -p -t m 2>/dev/null; }
console_text() {
	console_screen | sed 's/^[|x ]*//; s/[ |x-]*$//' | tr '\n' ' ' | tr -s ' '
}
console_alive() { kill -0 "$CONSOLE_PID" 2>/dev/null; }
console_wait() {
	local end=$((SECONDS + $2))
	while [ $SECONDS -lt "$end" ]; do
		console_screen | tr -s ' ' | grep -a -q -E -- "$1" && { sleep 1.5; return 0; }
		console_alive || return 1
		sleep 1
	done
	return 1
}
console_type() { $CONSOLE_TMUX send-keys -t m -l -- "$1"; sleep 0.5; }
console_key() {
	local k
	for k in "$@"; do
		$CONSOLE_TMUX send-keys -t m "$k"
		sleep 1
	done
}
console_shot() {
	CONSOLE_SHOTS=$((CONSOLE_SHOTS + 1))
	local f
	f=$SCREENS/$(printf %02d "$CONSOLE_SHOTS")-$1
	console_screen >"$f.txt"
	/usr/bin/python3 "$TESTS_LIB/screenshot.py" "$f.txt" "$f.png" || fail "screenshot.py $f.png"
}
console_ended() {
	local end=$((SECONDS + $1))
	while console_alive && [ $SECONDS -lt "$end" ]; do sleep 1; done
	! console_alive
}
console_stop() {
	[ -n "${CONSOLE_PID:-}" ] && kill -KILL "$CONSOLE_PID" 2>/dev/null
	$CONSOLE_TMUX kill-server 2>/dev/null
	return 0
}
