#!/usr/bin/env python3
"""Generates the quickstart example's datasets and its Artifacts.toml.

Writes, under examples/quickstart/:
  data/standard-atmosphere.tar.gz   temperature/pressure profile (downloaded on first use)
  data/forcing.tar.gz               solar constant and CO2 by year (downloaded on first use)
  data/hires-ozone.tar.gz           250 m ozone profile (lazy)
  data/site-observations/           a folder with no tarball: the artifact needs an override
  Artifacts.toml                    hashes computed here: sha256 of each tarball, and the git
                                    tree SHA-1 of its content computed by real `git write-tree`

The numbers are synthetic but physically shaped (an idealised standard atmosphere, a smoothed
CO2 history, a Chapman-like ozone layer). Tarballs are deterministic (fixed mtimes, owners and
gzip header), so re-running the script reproduces the checked-in files byte for byte with the
same zlib. Run from anywhere: python3 scripts/make-quickstart-data.py
"""

import gzip
import hashlib
import io
import math
import os
import shutil
import subprocess
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "quickstart")
DATA = os.path.join(EXAMPLE, "data")


def standard_atmosphere():
    rows = ["z_m,p_hPa,T_K,q_kg_per_kg"]
    for k in range(0, 41):
        z = 500.0 * k
        if z <= 11000.0:
            t = 288.15 - 0.0065 * z
            p = 1013.25 * (t / 288.15) ** 5.25588
        else:
            t = 216.65
            p = 226.32 * math.exp(-(z - 11000.0) / 6341.6)
        q = 0.012 * math.exp(-z / 2000.0)
        rows.append(f"{z:.0f},{p:.3f},{t:.2f},{q:.6f}")
    return {
        "profile.csv": "\n".join(rows) + "\n",
        "README.txt": "Idealised mid-latitude standard atmosphere, 0-20 km every 500 m.\n"
        "Columns: height (m), pressure (hPa), temperature (K), specific humidity (kg/kg).\n",
    }


def forcing():
    rows = ["year,solar_constant_W_m2,co2_ppm"]
    for year in range(1850, 2021, 10):
        co2 = 280.0 + 130.0 * math.exp((year - 2020) / 55.0) - 130.0 * math.exp(-170 / 55.0)
        solar = 1360.8 + 0.5 * math.sin(2 * math.pi * (year - 1850) / 11.0)
        rows.append(f"{year},{solar:.2f},{co2:.1f}")
    return {
        "forcing.csv": "\n".join(rows) + "\n",
        "README.txt": "Synthetic annual-mean forcing every 10 years, 1850-2020: total solar\n"
        "irradiance (W/m2) with an 11-year cycle, and a smoothed CO2 history (ppm).\n",
    }


def hires_ozone():
    rows = ["z_m,o3_ppmv"]
    for k in range(0, 201):
        z = 250.0 * k
        o3 = 0.03 + 8.0 * math.exp(-(((z - 32000.0) / 8000.0) ** 2))
        rows.append(f"{z:.0f},{o3:.4f}")
    return {
        "ozone_250m.csv": "\n".join(rows) + "\n",
        "README.txt": "Chapman-like ozone layer, 0-50 km every 250 m, volume mixing ratio (ppmv).\n",
    }


def site_observations():
    rows = ["z_m,T_K"]
    for z, t in [(0, 291.2), (1000, 284.9), (2000, 278.1), (3000, 271.0), (5000, 257.3)]:
        rows.append(f"{z},{t}")
    return {
        "radiosonde.csv": "\n".join(rows) + "\n",
        "README.txt": "A site's own radiosonde ascent: not redistributable, so the manifest has\n"
        "no download section and every user points an Overrides.toml entry at their copy.\n",
    }


def write_tree(files, where):
    os.makedirs(where, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(where, name), "w") as f:
            f.write(text)


def git_tree_sha1(files):
    with tempfile.TemporaryDirectory() as tmp:
        write_tree(files, tmp)
        env = dict(os.environ, GIT_DIR=os.path.join(tmp, ".git"), GIT_WORK_TREE=tmp)
        subprocess.run(["git", "init", "-q", tmp], check=True, env=env)
        subprocess.run(["git", "add", "-A"], check=True, cwd=tmp, env=env)
        out = subprocess.run(["git", "write-tree"], check=True, cwd=tmp, env=env,
                             capture_output=True, text=True)
        return out.stdout.strip()


def tarball(files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            data = files[name].encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def main():
    os.makedirs(DATA, exist_ok=True)
    entries = []

    def shipped(name, files, meta, lazy=False):
        blob = tarball(files)
        path = os.path.join(DATA, f"{name}.tar.gz")
        with open(path, "wb") as f:
            f.write(blob)
        entries.append((name, git_tree_sha1(files), lazy, meta,
                        (f"data/{name}.tar.gz", hashlib.sha256(blob).hexdigest(), len(blob))))

    shipped("standard-atmosphere", standard_atmosphere(), {
        "description": "Idealised standard atmosphere: pressure, temperature and humidity, 0-20 km",
        "version": "1.0",
        "license": "CC0-1.0",
        "citation": "clima-artifacts quickstart data (synthetic), standard atmosphere v1.0",
        "acknowledgement": "The standard atmosphere profile follows the idealised ICAO shape.",
        "maintainer": "clima-artifacts maintainers",
        "source": "https://example.invalid/clima-artifacts/quickstart/standard-atmosphere",
    })
    shipped("forcing", forcing(), {
        "description": "Solar constant and CO2 concentration every 10 years, 1850-2020 (synthetic)",
        "version": "2024.1",
        "license": "CC-BY-4.0",
        "citation": "clima-artifacts quickstart data (synthetic), forcing table 2024.1",
        "acknowledgement": "We thank the (fictional) Forcing Working Group for the forcing table.",
        "doi": "10.5281/zenodo.0000000",
        "bibtex": "@misc{quickstart_forcing, title = {Synthetic forcing table}, year = {2024}}",
        "source": "https://example.invalid/clima-artifacts/quickstart/forcing",
    })
    shipped("hires-ozone", hires_ozone(), {
        "description": "High-resolution (250 m) ozone profile, fetched only when first used",
        "version": "0.3",
        "license": "CC-BY-4.0",
        "citation": "clima-artifacts quickstart data (synthetic), ozone layer v0.3",
        "acknowledgement": "The ozone profile is a synthetic Chapman layer made for this example.",
        "source": "https://example.invalid/clima-artifacts/quickstart/hires-ozone",
    }, lazy=True)

    site = site_observations()
    site_dir = os.path.join(DATA, "site-observations")
    shutil.rmtree(site_dir, ignore_errors=True)
    write_tree(site, site_dir)
    entries.append(("site-observations", git_tree_sha1(site), False, {
        "description": "This site's radiosonde ascent (not redistributable: needs an override)",
        "license": "LicenseRef-site-internal",
        "citation": "Radiosonde ascent of the example site (internal data, cite the site's data report)",
    }, None))

    lines = [
        "# Datasets of the quickstart model. Generated by scripts/make-quickstart-data.py: edit",
        "# that script, not this file. Download sources are paths relative to this file's folder",
        "# (an extension Julia does not read), so the example installs offline from the tarballs",
        "# checked in under data/ through the real download -> verify -> extract pipeline.",
        "# Entries with a `recipe` key were made by `clima-artifacts create --recipe` from",
        "# artifacts/<name>/; the script keeps them as they are.",
        "",
    ]

    def q(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    for name, tree, lazy, meta, dl in entries:
        lines.append(f"[{name}]")
        lines.append(f"git-tree-sha1 = {q(tree)}")
        if lazy:
            lines.append("lazy = true")
        for k, v in meta.items():
            lines.append(f"{k} = {q(v)}")
        if dl:
            url, sha, size = dl
            lines += ["", f"    [[{name}.download]]", f"    url = {q(url)}",
                      f"    sha256 = {q(sha)}", f"    size = {size}"]
        lines.append("")
    # Entries made from recipes (`clima-artifacts create --recipe`, e.g. surface-albedo) are
    # not generated here: keep them as they are.
    manifest = os.path.join(EXAMPLE, "Artifacts.toml")
    ours = {name for name, *_ in entries}
    kept = []
    if os.path.exists(manifest):
        keep = False
        for line in open(manifest).read().splitlines():
            if line.startswith("[") and not line.startswith("[["):
                keep = line.strip("[]").strip('"') not in ours
            if keep:
                kept.append(line)
    with open(manifest, "w") as f:
        f.write("\n".join(lines + kept) + ("\n" if kept else ""))
    for name, tree, *_ in entries:
        print(f"{name}: {tree}")


if __name__ == "__main__":
    main()
