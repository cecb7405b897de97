#!/usr/bin/env python3
"""What a qemu guest shows, asked through its QMP socket.

Usage: qmp.py SOCKET evidence PREFIX

SOCKET is a QMP Unix socket's path, or virsh:URI:DOMAIN for a guest that
libvirt runs (asked through `virsh qemu-monitor-command`).

`evidence` is the boot watchdog's (tests/lib/qemuwatch.sh): for a guest whose
serial console stayed silent, it prints `info status`, `info registers` and
the VGA text screen as text (the 80x25 text-mode buffer at 0xb8000, read with
pmemsave: what SeaBIOS, GRUB or a "No bootable device" left there), and
saves the screen as PREFIX.png (screendump; a picture of graphics modes too).

Exits 0 when every command answered, 1 when the socket or a command failed
(what did answer is printed first).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile


class Qmp:
    def __init__(self, path, seconds=20):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(seconds)
        self.sock.connect(path)
        self.file = self.sock.makefile("rw", encoding="utf-8", newline="\n")
        self._read()  # the greeting
        self.call("qmp_capabilities")

    def _read(self):
        line = self.file.readline()
        if not line:
            raise OSError("qemu closed the QMP socket")
        return json.loads(line)

    def call(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.file.write(json.dumps(msg) + "\n")
        self.file.flush()
        while True:
            reply = self._read()
            if "event" in reply:
                continue
            if "error" in reply:
                raise OSError("%s: %s" % (command, reply["error"].get("desc", reply["error"])))
            return reply.get("return")

    def hmp(self, line):
        return self.call("human-monitor-command", **{"command-line": line}) or ""


class VirshQmp(Qmp):
    """The same calls, through libvirt, which owns the domain's QMP socket."""

    def __init__(self, uri, domain):
        self.uri, self.domain = uri, domain
        self.call("query-status")

    def call(self, command, **arguments):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        out = subprocess.run(["virsh", "-c", self.uri, "qemu-monitor-command", self.domain, json.dumps(msg)],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise OSError("%s: %s" % (command, out.stderr.strip()))
        reply = json.loads(out.stdout)
        if "error" in reply:
            raise OSError("%s: %s" % (command, reply["error"].get("desc", reply["error"])))
        return reply.get("return")


def text_screen(raw):
    """The VGA text buffer (character, attribute pairs) as lines of text."""
    chars = raw[0::2]
    lines = []
    for row in range(25):
        cells = chars[row * 80:(row + 1) * 80]
        lines.append("".join(chr(c) if 32 <= c < 127 else " " for c in cells).rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return lines


def evidence(q, prefix):
    ok = True
    for title, line in (("info status", "info status"), ("info registers", "info registers")):
        print("--- %s" % title)
        try:
            print(q.hmp(line).rstrip())
        except OSError as e:
            print("(no answer: %s)" % e)
            ok = False
    print("--- the VGA text screen (0xb8000)")
    # (qemu writes the files: a folder it may write to whatever user it
    # runs as, libvirt's qemu included; they are moved to PREFIX after)
    tmp = tempfile.mkdtemp(prefix="imager-qmp.")
    os.chmod(tmp, 0o777)
    raw_path = os.path.join(tmp, "vga")
    try:
        q.call("pmemsave", val=0xB8000, size=4000, filename=raw_path)
        with open(raw_path, "rb") as f:
            lines = text_screen(f.read())
        os.unlink(raw_path)
        print("\n".join("| " + l for l in lines) if lines else "(blank: nothing in text mode)")
    except OSError as e:
        print("(not read: %s)" % e)
        ok = False
    png = prefix + ".png"
    try:
        q.call("screendump", filename=os.path.join(tmp, "screen.png"), format="png")
        shutil.move(os.path.join(tmp, "screen.png"), png)
        print("--- the screen as a picture: %s" % png)
    except OSError as e:
        print("(no screendump: %s)" % e)
        ok = False
    shutil.rmtree(tmp, ignore_errors=True)
    return ok


def main(argv):
    if len(argv) != 4 or argv[2] != "evidence":
        sys.stderr.write(__doc__)
        return 2
    try:
        if argv[1].startswith("virsh:"):
            uri, _, domain = argv[1][len("virsh:"):].rpartition(":")
            q = VirshQmp(uri, domain)
        else:
            q = Qmp(argv[1])
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        print("qmp.py: cannot talk to %s: %s" % (argv[1], e))
        return 1
    return 0 if evidence(q, argv[3]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
