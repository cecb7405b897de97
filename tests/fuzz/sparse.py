#!/usr/bin/env python3
"""sparse.py IMAGE OUT [PREFIX_HEX]: IMAGE (a disk or filesystem image) as
the fuzzers' sparse image (fuzz.h): its size in KiB, then each run of
non-zero 512-byte sectors as (sector, length, bytes) records of at most
65535 bytes.  PREFIX_HEX is not used by sparse images (kept for symmetry
with raw seeds)."""
import struct
import sys

SECTOR = 512


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src, "rb") as f:
        data = f.read()
    kib = (len(data) + 1023) // 1024
    recs = [struct.pack("<I", kib)]
    i, n = 0, len(data) // SECTOR
    while i < n:
        if not any(data[i * SECTOR:(i + 1) * SECTOR]):
            i += 1
            continue
        j = i
        while j < n and any(data[j * SECTOR:(j + 1) * SECTOR]) and (j - i + 1) * SECTOR <= 65024:
            j += 1
        chunk = data[i * SECTOR:j * SECTOR]
        recs.append(struct.pack("<IH", i, len(chunk)) + chunk)
        i = j
    with open(out, "wb") as f:
        f.write(b"".join(recs))


main()
