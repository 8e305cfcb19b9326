#!/usr/bin/env python3
"""Deterministic synthetic climate datasets for scripts/bench.sh (standard library only).

    gen_dataset.py tree DIR [--size 1G] [--files 5000] [--seed 42] [--kind mixed|fields]
        Writes a folder that looks like a climate model's input data: a few large files, about a
        hundred medium ones and thousands of small ones, in nested folders. About half of the
        bytes are "NetCDF-ish" float32 fields (smooth values with a noisy low mantissa byte and
        30 % missing-value runs, which gzip shrinks to about 60 %), the rest random (already-compressed HDF5/GRIB-like) or
        text (CSV station records). A few executables, symlinks and empty files are included.
        `--kind fields` writes the same layout with NetCDF-ish fields and CSV only (no random
        files): a compressible dataset, as model output or reanalysis fields usually are.
        Prints a summary line on stderr.

    gen_dataset.py stream-tar [--size 4G] [--seed 42] [--tree-hash-out FILE]
        Writes a plain tar archive of mostly incompressible data to stdout without ever holding
        more than a few MiB (pipe it through `gzip -1`). The git tree hash of its content is
        computed on the way and written to FILE, so nothing needs to be unpacked to know it.

The same arguments always produce the same bytes (the only randomness is `random.Random(seed)`).
"""

import argparse
import array
import hashlib
import io
import math
import os
import random
import sys
import tarfile

MiB = 1 << 20
POOL = 8 * MiB  # random pool; files take slices at random offsets (gzip's window is 32 KiB)
FILL = b"\x00\x00\xf0\x7c"  # NetCDF's default float fill value 9.96921e36, little-endian


def parse_size(text):
    """`1G`, `256M`, `64K` or bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in mult:
        return int(float(text[:-1]) * mult[text[-1]])
    return int(text)


class Source:
    """Deterministic byte sources: random, NetCDF-ish and CSV-ish."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.pool = b"".join(self.rng.randbytes(MiB) for _ in range(POOL // MiB))
        # A smooth float32 field (a few superposed waves, like a temperature map), 1 MiB.
        n = MiB // 4
        field = array.array(
            "f",
            (
                250.0
                + 30.0 * math.sin(i * 2 * math.pi / 1440)
                + 5.0 * math.cos(i * 2 * math.pi / 97)
                + 0.5 * math.sin(i * 0.013)
                for i in range(n)
            ),
        )
        if sys.byteorder != "little":
            field.byteswap()
        self.field = field.tobytes()

    def random(self, n):
        out = bytearray()
        while len(out) < n:
            off = self.rng.randrange(POOL)
            out += self.pool[off : off + min(n - len(out), POOL - off)]
        return bytes(out)

    def nc(self, n):
        """Classic-NetCDF-like: a header, then float32 data whose lowest byte is noise."""
        header = b"CDF\x01" + b"\x00\x00\x00\x0a" + b"lat lon time air_temperature K degrees_north "
        out = bytearray(header[:n])
        while len(out) < n:
            take = min(n - len(out), MiB) & ~3 or (n - len(out))
            rot = self.rng.randrange(MiB // 4) * 4
            chunk = bytearray((self.field[rot:] + self.field[:rot])[:take])
            quarter = len(chunk[0::4])
            off = self.rng.randrange(POOL - quarter)
            chunk[0::4] = self.pool[off : off + quarter]
            # Missing values (land under an ocean field): runs of the NetCDF fill value.
            for k in range(0, len(chunk) - 4, 16384):
                if self.rng.random() < 0.3:
                    run = min(len(chunk) - k, 16384) & ~3
                    chunk[k : k + run] = FILL * (run // 4)
            out += chunk
        return bytes(out)

    def csv(self, n):
        rng = self.rng
        lines = [b"time,station,lat,lon,t2m,precip,wind\n"]
        size = len(lines[0])
        while size < n:
            line = b"%d,%05d,%.3f,%.3f,%.2f,%.1f,%.2f\n" % (
                rng.randrange(1_000_000_000, 1_700_000_000),
                rng.randrange(100000),
                rng.uniform(-90, 90),
                rng.uniform(-180, 180),
                rng.gauss(288, 10),
                max(0.0, rng.gauss(1, 3)),
                abs(rng.gauss(5, 3)),
            )
            lines.append(line)
            size += len(line)
        return b"".join(lines)[:n]


def log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def scaled(weights, budget):
    """Integer sizes proportional to `weights` that sum to `budget`."""
    total = sum(weights) or 1
    sizes = [int(w * budget / total) for w in weights]
    sizes[-1] += budget - sum(sizes) if sizes else 0
    return sizes


def plan_tree(size, files, seed, dataset="mixed"):
    """[(relative path, kind, bytes, executable)], plus symlinks [(path, target)].

    `dataset` "fields" replaces every random (incompressible) file by a NetCDF-ish one."""
    rng = random.Random(seed ^ 0x5EED)
    n_large = 4
    n_medium = max(1, files // 50)
    n_small = max(1, files - n_large - n_medium - 6)
    entries = []
    # Large (50 % of the bytes): reanalysis fields and a compressed restart file.
    large_kinds = [("era5/2008/air_temperature.nc", "nc", 0.32),
                   ("era5/2008/specific_humidity.nc", "nc", 0.28),
                   ("restart/ocean_state.h5", "random", 0.25),
                   ("era5/2009/sea_surface_temperature.nc", "nc", 0.15)]
    for (path, kind, w), n in zip(large_kinds, scaled([k[2] for k in large_kinds], size // 2)):
        entries.append((path, kind, n, False))
    # Medium (40 %): monthly fields and compressed tiles, 1-16 MiB before scaling.
    weights = [log_uniform(rng, 1, 16) for _ in range(n_medium)]
    for i, n in enumerate(scaled(weights, size * 4 // 10)):
        if i % 2 == 0:
            path = f"cmip6/{['tas', 'pr', 'ua', 'va', 'zg'][i % 5]}/month_{i:03d}.nc"
            entries.append((path, "nc", n, False))
        else:
            entries.append((f"topography/tiles/tile_{i:03d}.grib2", "random", n, False))
    # Small (10 %): station records, small fields, metadata; 256 B - 64 KiB before scaling.
    weights = [log_uniform(rng, 256, 64 * 1024) for _ in range(n_small)]
    regions = ["africa", "antarctica", "asia", "europe", "north_america", "oceania", "south_america"]
    for i, n in enumerate(scaled(weights, size - sum(e[2] for e in entries))):
        r = regions[i % len(regions)]
        sub = f"{(i // 7) % 64:02d}"
        kind = ("csv", "nc", "random")[i % 3]
        ext = {"csv": "csv", "nc": "nc", "random": "bin"}[kind]
        entries.append((f"stations/{r}/{sub}/obs_{i:05d}.{ext}", kind, n, False))
    # A few scripts (executable), empty marker files and symlinks.
    for i in range(3):
        entries.append((f"scripts/regrid_{i}.sh", "csv", 2048 + i, True))
    entries.append(("stations/.complete", "csv", 0, False))
    entries.append(("era5/2008/.keep", "csv", 0, False))
    entries.append(("README.txt", "csv", 1500, False))
    links = [("era5/latest", "2009"), ("restart/current.h5", "ocean_state.h5"),
             ("scripts/regrid.sh", "regrid_0.sh")]
    if dataset == "fields":
        entries = [(p, "nc" if k == "random" else k, n, x) for p, k, n, x in entries]
    return entries, links


def write_tree(args):
    size, files = parse_size(args.size), args.files
    src = Source(args.seed)
    entries, links = plan_tree(size, files, args.seed, args.kind)
    root = args.dir
    os.makedirs(root, exist_ok=True)
    if os.listdir(root):
        sys.exit(f"gen_dataset.py: `{root}` is not empty; pass a new folder")
    total = 0
    for path, kind, n, exe in entries:
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            left = n
            while left:
                step = min(left, 4 * MiB)
                f.write(getattr(src, kind)(step))
                left -= step
        os.chmod(full, 0o755 if exe else 0o644)
        total += n
    for path, target in links:
        os.symlink(target, os.path.join(root, path))
    print(f"gen_dataset.py: {len(entries)} files + {len(links)} symlinks, {total} bytes in {root}",
          file=sys.stderr)


def git_tree_id(entries):
    """entries: [(name bytes, mode str, 20-byte id, is_dir)] -> tree id (git's sort order)."""
    entries = sorted(entries, key=lambda e: e[0] + (b"/" if e[3] else b""))
    body = b"".join(mode.encode() + b" " + name + b"\0" + oid for name, mode, oid, _ in entries)
    return hashlib.sha1(b"tree %d\0" % len(body) + body).digest()


def stream_tar(args):
    """A few large files of mostly random data plus a small NetCDF-ish one, as one tar stream."""
    size = parse_size(args.size)
    src = Source(args.seed)
    out = sys.stdout.buffer
    tar = tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT)
    n_files = 8
    sizes = scaled([1] * n_files, size)
    blobs = []
    for i, n in enumerate(sizes):
        name = f"part_{i:02d}.{'nc' if i == 0 else 'bin'}"
        info = tarfile.TarInfo(f"data/{name}")
        info.size, info.mode, info.mtime = n, 0o644, 0
        sha = hashlib.sha1(b"blob %d\0" % n)

        class Reader(io.RawIOBase):
            """Feeds generated bytes to tarfile and to the blob hash, chunk by chunk."""

            def __init__(self, left, kind):
                self.left, self.kind, self.buf = left, kind, b""

            def readable(self):
                return True

            def readinto(self, b):
                if not self.buf and self.left:
                    step = min(self.left, 4 * MiB)
                    self.buf = getattr(src, self.kind)(step)
                    sha.update(self.buf)
                    self.left -= step
                k = min(len(b), len(self.buf))
                b[:k] = self.buf[:k]
                self.buf = self.buf[k:]
                return k

        tar.addfile(info, io.BufferedReader(Reader(n, "nc" if i == 0 else "random"), 4 * MiB))
        blobs.append((name.encode(), "100644", sha.digest(), False))
    tar.close()
    out.flush()
    data_tree = git_tree_id(blobs)
    root = git_tree_id([(b"data", "40000", data_tree, True)])
    if args.tree_hash_out:
        with open(args.tree_hash_out, "w") as f:
            f.write(root.hex() + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tree", help="write a mixed dataset folder")
    t.add_argument("dir")
    t.add_argument("--size", default="1G")
    t.add_argument("--files", type=int, default=5000)
    t.add_argument("--seed", type=int, default=42)
    t.add_argument("--kind", choices=["mixed", "fields"], default="mixed")
    s = sub.add_parser("stream-tar", help="write a large tar of mostly random data to stdout")
    s.add_argument("--size", default="4G")
    s.add_argument("--seed", type=int, default=42)
    s.add_argument("--tree-hash-out")
    args = p.parse_args()
    if args.cmd == "tree":
        write_tree(args)
    else:
        stream_tar(args)


if __name__ == "__main__":
    main()
