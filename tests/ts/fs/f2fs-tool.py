#!/usr/bin/env python3
# Helpers for the F2FS suites (not a test: the dot in the name keeps the
# harness from running it).
#
#   f2fs-tool.py cp-set IMG OFFSET BYTES VALUE
#       write VALUE (little-endian) at OFFSET of the current checkpoint
#       block, in both copies of the current pack, with the CRC redone as
#       mkfs.f2fs does (f2fs_checkpoint_chksum).
#   f2fs-tool.py cp-flags IMG CLEAR SET
#       the same for ckpt_flags: flags & ~CLEAR | SET.
#   f2fs-tool.py power-off IMG
#       make the current checkpoint look like one written while mounted, as
#       after a power cut: CP_UMOUNT_FLAG and CP_NAT_BITS_FLAG cleared (nat
#       bits are only kept at unmount), and the three node summary blocks
#       that only an unmount writes into the pack dropped from it (the
#       closing copy moves up), so fsck.f2fs reads it as a consistent
#       "sudden-power-off" checkpoint.
#   f2fs-tool.py pack IMG
#       print the current pack's first block and its length.
#   f2fs-tool.py files IMG TREE
#       every regular file of TREE, dumped from IMG with dump.f2fs (inode
#       numbers from `fsck.f2fs -t`), must have the same sha256; prints
#       how many were compared.  There is no kernel f2fs here to mount.
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

BLK = 4096
MAGIC = 0xF2F52010


def crc32(crc, data):
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc


def seal(cp):
    off = struct.unpack_from("<I", cp, 164)[0]
    crc = crc32(MAGIC, cp[:off])
    if off < 4092:
        crc = crc32(crc, cp[off + 4:])
    struct.pack_into("<I", cp, off, crc)


def pack_ok(f, start):
    f.seek(start * BLK)
    a = bytearray(f.read(BLK))
    off = struct.unpack_from("<I", a, 164)[0]
    if not 192 <= off <= 4092:
        return None
    b = bytearray(a)
    seal(b)
    if a != b:
        return None
    total = struct.unpack_from("<I", a, 136)[0]
    if not 2 <= total <= 512:
        return None
    f.seek((start + total - 1) * BLK)
    last = f.read(BLK)
    if last[:8] != a[:8]:
        return None
    return struct.unpack_from("<Q", a, 0)[0], total


def current_pack(f):
    f.seek(1024)
    sb = f.read(3072)
    cp_blkaddr = struct.unpack_from("<I", sb, 76)[0]
    p0, p1 = pack_ok(f, cp_blkaddr), pack_ok(f, cp_blkaddr + 512)
    if not p0 and not p1:
        sys.exit("no valid checkpoint pack")
    if p0 and p1:
        # The kernel's ver_after(): newer modulo 2^64; the first on a tie.
        diff = (p1[0] - p0[0]) % 2**64
        use = 1 if 0 < diff < 2**63 else 0
    else:
        use = 0 if p0 else 1
    return cp_blkaddr + 512 * use, (p0, p1)[use][1]


def cp_edit(path, fn):
    with open(path, "r+b") as f:
        start, total = current_pack(f)
        f.seek(start * BLK)
        cp = bytearray(f.read(BLK))
        fn(cp)
        seal(cp)
        for blk in (start, start + total - 1):
            f.seek(blk * BLK)
            f.write(cp)


def files(img, tree):
    out = subprocess.run(["fsck.f2fs", "--dry-run", "-t", img], capture_output=True,
                         text=True, errors="replace").stdout
    inos, stack = {}, []
    for line in out.splitlines():
        m = re.match(r"^((?:\|   )*)\|-- (.*) <ino = 0x([0-9a-f]+)>", line)
        if not m:
            continue
        depth = len(m.group(1)) // 4
        stack = stack[:depth] + [m.group(2)]
        inos["/".join(stack)] = int(m.group(3), 16)
    n = 0
    bad = []
    for root, _, names in os.walk(tree):
        for name in names:
            src = os.path.join(root, name)
            if not os.path.isfile(src) or os.path.islink(src):
                continue
            rel = os.path.relpath(src, tree)
            if rel not in inos:
                bad.append(rel + ": not in the directory tree")
                continue
            with tempfile.TemporaryDirectory() as d:
                subprocess.run(["dump.f2fs", "-i", hex(inos[rel]), os.path.abspath(img)],
                               input="y\n", text=True, cwd=d, capture_output=True)
                got = os.path.join(d, "lost_found", name)
                if not os.path.exists(got):
                    bad.append(rel + ": dump.f2fs wrote nothing")
                    continue
                with open(got, "rb") as a, open(src, "rb") as b:
                    if hashlib.sha256(a.read()).digest() != hashlib.sha256(b.read()).digest():
                        bad.append(rel + ": sha256 differs")
            n += 1
    for b in bad[:20]:
        print(b)
    if bad:
        sys.exit("%d of %d files wrong" % (len(bad), n))
    print(n)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "cp-set":
        off, size, val = int(args[1], 0), int(args[2], 0), int(args[3], 0)
        cp_edit(args[0], lambda cp: cp.__setitem__(slice(off, off + size),
                                                   val.to_bytes(size, "little")))
    elif cmd == "cp-flags":
        clear, set_ = int(args[1], 0), int(args[2], 0)

        def fn(cp):
            flags = struct.unpack_from("<I", cp, 132)[0]
            struct.pack_into("<I", cp, 132, (flags & ~clear) | set_)
        cp_edit(args[0], fn)
    elif cmd == "power-off":
        with open(args[0], "r+b") as f:
            start, total = current_pack(f)
            f.seek(start * BLK)
            cp = bytearray(f.read(BLK))
            flags = struct.unpack_from("<I", cp, 132)[0]
            if flags & 0x21:   # node summaries in the pack
                total -= 3
                struct.pack_into("<I", cp, 136, total)
            struct.pack_into("<I", cp, 132, flags & ~0x81)
            seal(cp)
            for blk in (start, start + total - 1):
                f.seek(blk * BLK)
                f.write(cp)
    elif cmd == "pack":
        with open(args[0], "rb") as f:
            print(*current_pack(f))
    elif cmd == "files":
        files(args[0], args[1])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
