#!/usr/bin/env python3
"""Independent truth for the census test on the manifest corpus.

Lays the corpus out as `<repo>/<path>` (SOURCES.tsv) in the reader's head, keeps the files the
census reads (names ending in `Artifacts.toml`), and prints what `clima-artifacts census` must
report: number of manifests and distinct hashes, name conflicts (one name, or one name and
platform for `[[name]]` entries, with several hashes), hashes with several names, hashes named
in several manifests, and per-problem counts that need no file system (placeholder-hash,
not-downloadable, no-license, http-url). Usage: census_truth.py [CORPUS_DIR]
"""
import collections, csv, hashlib, sys, tomllib
from pathlib import Path

corpus = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/corpus/julia-artifacts")
rows = list(csv.DictReader(open(corpus / "SOURCES.tsv"), delimiter="\t"))
by_key = collections.defaultdict(set)
by_hash = collections.defaultdict(lambda: {"names": set(), "manifests": set(), "urls": [],
                                           "license": False})
manifests = 0
for r in rows:
    if not r["path"].endswith("Artifacts.toml"):
        continue
    manifests += 1
    where = f'{r["repo"]}/{r["path"]}'
    doc = tomllib.load(open(corpus / r["file"], "rb"))
    for name, entry in doc.items():
        variants = entry if isinstance(entry, list) else [entry]
        for v in variants:
            h = v["git-tree-sha1"]
            plat = None
            if isinstance(entry, list):
                plat = ",".join(f"{k}={x}" for k, x in sorted(v.items())
                                if isinstance(x, str) and k != "git-tree-sha1")
            by_key[(name, plat)].add(h)
            a = by_hash[h]
            a["names"].add(name)
            a["manifests"].add(where)
            a["urls"] += [d["url"] for d in v.get("download", [])]
            a["license"] |= "license" in v

conflicts = sorted({(n, p) for (n, p), hs in by_key.items() if len(hs) > 1}, key=str)
conflicting = {h for k in conflicts for h in by_key[k]}
print("manifests", manifests)
print("artifacts", len(by_hash))
print("name-conflict keys", [(n, p) for n, p in conflicts])
print("name-conflict artifacts", len(conflicting))
print("name-conflict single-entry names", sorted({n for n, p in conflicts if p is None}))
print("same-content", {h: sorted(a["names"]) for h, a in by_hash.items() if len(a["names"]) > 1})
shared = {h: (sorted(a["names"]), len(a["manifests"])) for h, a in by_hash.items()
          if len(a["manifests"]) > 1}
print("shared by several manifests", len(shared))
for h, v in sorted(shared.items()):
    print("  ", h, v)
placeholder = [h for h, a in by_hash.items()
               if any(hashlib.sha1(n.encode()).hexdigest() == h for n in a["names"])]
print("placeholder-hash", len(placeholder))
print("not-downloadable", sum(1 for a in by_hash.values() if not a["urls"]))
print("no-license", sum(1 for a in by_hash.values() if not a["license"]))
print("http-url", sum(1 for a in by_hash.values()
                      if any(u.lower().startswith("http://") for u in a["urls"])))
