#!/usr/bin/env python3
"""Prints `<index bytes stored> <members' bytes of PATH>` for a seekable .tar.gz made by
`clima-artifacts create` (the layout of docs/seekable.md, read here by hand: the footer's
locator, the index pieces in gzip FEXTRA fields, the index document). For scripts/bench-partial.sh:
the bytes a ranged read of PATH needs, against which the bytes a server sent are compared.

    seekable_entry.py TARBALL PATH
"""
import gzip
import struct
import sys


def main(tarball, path):
    with open(tarball, "rb") as f:
        f.seek(-66, 2)
        footer = f.read(66)
        if footer[12:14] != b"ca" or footer[16:24] != b"clima-sk":
            sys.exit(f"{tarball}: no seekable footer")
        offset, length = struct.unpack("<QQ", footer[16 + 16:16 + 32])
        f.seek(offset)
        stored = f.read(length)
    pieces, at = [], 0
    while at < len(stored):
        if stored[at:at + 4] != b"\x1f\x8b\x08\x04":
            sys.exit(f"{tarball}: not an index piece at byte {offset + at}")
        xlen = struct.unpack("<H", stored[at + 10:at + 12])[0]
        if stored[at + 12:at + 14] != b"ci":
            sys.exit(f"{tarball}: not an index piece at byte {offset + at}")
        n = struct.unpack("<H", stored[at + 14:at + 16])[0]
        pieces.append(stored[at + 16:at + 16 + n])
        at += 12 + xlen + 10
    doc = gzip.decompress(b"".join(pieces))
    if doc[:8] != b"clima-ix":
        sys.exit(f"{tarball}: not an index document")
    flags = struct.unpack("<I", doc[12:16])[0]
    entries = struct.unpack("<Q", doc[24:32])[0]
    at = 48
    want = path.encode()
    for _ in range(entries):
        plen = struct.unpack("<H", doc[at:at + 2])[0]
        p = doc[at + 2:at + 2 + plen]
        at += 2 + plen + 4 + 8 + 20 + (32 if flags & 1 else 0) + 8 + 4
        length = struct.unpack("<Q", doc[at + 8:at + 16])[0]
        blocks = struct.unpack("<I", doc[at + 16:at + 20])[0]
        at += 20 + blocks * 48
        if p == want:
            print(len(stored), length)
            return
    sys.exit(f"{tarball}: no entry `{path}`")


if __name__ == "__main__":
    main(*sys.argv[1:])
