#!/usr/bin/env bash
# `clima-artifacts hash` of a large folder that stays on a cluster (issue 37, item 3): every
# core against one core, and against `git hash-object` of the same files, in the same run.
#
#   scripts/bench-hash.sh [SIZE] [FILES] [RUNS]     (defaults: 2G 20000 3)
#
# Generates the folder once (scripts/bench/gen_dataset.py, in ${TMPDIR:-/tmp}/clima-bench-hash),
# builds the CLI in release, then alternates, RUNS times each, with the page cache warm (one
# untimed read first): `hash DIR` on every core, `hash DIR` with RAYON_NUM_THREADS=1, and
# `git hash-object --stdin-paths` of every regular file (git's blob hashing on one core; it
# builds no trees). Prints the median of each and checks that our tree hash is git's.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
size="${1:-2G}" files="${2:-20000}" runs="${3:-3}"
work="${TMPDIR:-/tmp}/clima-bench-hash"
data="$work/data-$size-$files"
mkdir -p "$work"
if [ ! -f "$data.done" ]; then
    rm -rf "$data"
    python3 "$repo/scripts/bench/gen_dataset.py" tree "$data" --size "$size" --files "$files" --seed 7
    touch "$data.done"
fi
(cd "$repo" && cargo build -q --release -p clima-artifacts-cli)
cli="${CARGO_TARGET_DIR:-$repo/target}/release/clima-artifacts"
list="$work/files-$size-$files"
(cd "$data" && find . -type f -print > "$list")
echo "== $(wc -l < "$list") files, $(du -sh --apparent-size "$data" | cut -f1), $(nproc) cores"
cat $(sed "s|^\.|$data|" "$list") > /dev/null   # warm the page cache

expected="$(export GIT_DIR="$work/check.git" GIT_WORK_TREE="$data"; rm -rf "$GIT_DIR"
    git init -q && git add -A && git write-tree; rm -rf "$GIT_DIR")"
got="$("$cli" hash "$data" | grep -oE '[0-9a-f]{40}' | head -n1)"
[ "$got" = "$expected" ] || { echo "error: hash $got, git $expected" >&2; exit 1; }

time_of() { # COMMAND... -> seconds
    local t0 t1
    t0="$(date +%s.%N)"
    "$@" > /dev/null
    t1="$(date +%s.%N)"
    python3 -c "print(f'{$t1 - $t0:.2f}')"
}
git_blobs() { (cd "$data" && git hash-object --stdin-paths < "$list"); }
one_core() { RAYON_NUM_THREADS=1 "$cli" hash "$data"; }
declare -A times
for _ in $(seq "$runs"); do
    times[all]+="$(time_of "$cli" hash "$data") "
    times[one]+="$(time_of one_core) "
    times[git]+="$(time_of git_blobs) "
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for k in all one git; do
    case $k in
        all) label="clima-artifacts hash, every core" ;;
        one) label="clima-artifacts hash, RAYON_NUM_THREADS=1" ;;
        git) label="git hash-object --stdin-paths (blobs only)" ;;
    esac
    printf '%-46s %6s s   runs: %s\n' "$label" "$(median <<<"${times[$k]}")" "${times[$k]}"
done
